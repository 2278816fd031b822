"""JAX's compile caches under compare's cache folder (backends/caches.py): its persistent
compilation cache (jax/jaxlib-<version>/, every jitted function) and XLA's GPU autotuning results
beside it (one per fusion and GPU model: a 2-GPU step whose fusions a 1-GPU step tuned is not
tuned again), and what a run found in them. Stdlib only: prepare() runs before jax is imported.
"""
import os
from typing import Any, Dict, Optional

from .. import caches

AUTOTUNE_DIR = "xla_gpu_per_fusion_autotune_cache_dir"  # JAX's name for it, under its cache
# jax.monitoring events: a compilation that asked the cache, and one the cache answered
ASKED = "/jax/compilation_cache/compile_requests_use_cache"
HIT = "/jax/compilation_cache/cache_hits"
# Measured on jax 0.10.2 CPU (tests/backends/test_jax.py, two processes): the second run of a job
# whose step had been cached hung in its first collective (gloo's key exchange timed out after
# 30 s) and the job ended at jax's shutdown barrier; with the cache off it ran.
CPU_PROCESSES = ("off for several CPU processes: their gloo collectives hung when the step came "
                 "from JAX's persistent cache")


def prepare(off: Optional[str] = None) -> None:
    """The persistent compilation cache and XLA's autotuning cache, before `import jax`; `off`:
    the reason this run goes without them (recorded)."""
    if off:
        caches.off("jax", off)
        return
    path = caches.claim("JAX_COMPILATION_CACHE_DIR", "jax", "jax", "jaxlib-" + caches.version("jaxlib"))
    if path is None:
        return
    # every jitted function is kept (JAX's defaults skip those compiled within 1 s)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES", AUTOTUNE_DIR)
    caches.note("jax", hits=0, misses=0,
                autotune_entries_before=caches.entries(os.path.join(path, AUTOTUNE_DIR)))
    caches.at_record("jax", _after)


def _after(value: Dict[str, Any]) -> None:
    value["autotune_entries_after"] = caches.entries(os.path.join(value["dir"], AUTOTUNE_DIR))


def watch(monitoring) -> None:
    """Count the persistent cache's hits and misses (compilations that asked it and were not
    answered) from jax.monitoring's events (pass the module); call before anything is compiled."""
    counts = caches.counts("jax")
    if not counts or counts.get("dir") is None:
        return

    def on_event(event: str, **kwargs: Any) -> None:
        if event == HIT:
            counts["hits"] += 1
            counts["misses"] -= 1
        elif event == ASKED:
            counts["misses"] += 1
    monitoring.register_event_listener(on_event)
