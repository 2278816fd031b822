"""Compile caches that outlive the process, under compare's cache folder, and what each run found
in them (recorded in every result's environment["compile_cache"]). Standard library only,
Python >= 3.8.

    $COMPARE_COMPILE_CACHE (default: <compare's cache folder>/compile; "off" switches them off)
      jax/jaxlib-<version>/     JAX's persistent compilation cache. JAX keys an entry on the
                                computation's HLO, jaxlib, the XLA flags and the devices (kind
                                and count); every jitted function is kept, however fast it compiled.
        xla_gpu_per_fusion_autotune_cache_dir/   XLA's GPU autotuning results, one per fusion
                                and GPU model (JAX points XLA there): a 2-GPU step whose fusions
                                a 1-GPU step already tuned is not tuned again.
      torchinductor/torch-<version>/   torch.compile's caches (Inductor's FX graph cache,
                                AOTAutograd's and Triton's kernels), keyed by torch on the graph,
                                its inputs and the compile settings: used with --compile.

A backend calls prepare_jax() or prepare_torch() before it imports its framework (both read their
variables once, at import); its trainer counts what the compiler found (watch_jax(), note()). A
variable the user set already (JAX_COMPILATION_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR) wins, and is
recorded. The jaxlib and torch versions name the folders because XLA leaves version checks of its
autotuning cache to its user.

cuDNN's autotuning (PyTorch's cudnn.benchmark: 57 s in the first fp32 step of ResNet-50 on an
H200) has no on-disk cache: cuDNN and PyTorch keep the algorithms they chose in the process's
memory only (pytorch/pytorch#4392 and #88410 ask for one), so every process tunes again; the
record says so.
"""
import os
from typing import Any, Dict, Optional

ENV = "COMPARE_COMPILE_CACHE"  # the folder; "off" or "0": no persistent compile caches
AUTOTUNE_DIR = "xla_gpu_per_fusion_autotune_cache_dir"  # JAX's name for it, under its cache
# jax.monitoring events: a compilation that asked the cache, and one the cache answered
JAX_ASKED = "/jax/compilation_cache/compile_requests_use_cache"
JAX_HIT = "/jax/compilation_cache/cache_hits"
CUDNN = ("no on-disk cache: cuDNN and PyTorch keep the algorithms cudnn.benchmark chose in the "
         "process's memory only, so each process tunes again in its first step")

_record: Dict[str, Any] = {}


def cache_root() -> str:
    """compare's cache folder, as the host's envs.cache_dir() names it."""
    return os.environ.get("COMPARE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                           "compare")


def root() -> Optional[str]:
    """The compile caches' folder; None when switched off."""
    value = os.environ.get(ENV)
    if value is not None and value.strip().lower() in ("off", "0", "false", "no"):
        return None
    return value or os.path.join(cache_root(), "compile")


def _version(package: str) -> str:
    try:
        from importlib.metadata import version
        return version(package)
    except Exception:  # not installed as a distribution (a source checkout): one shared folder
        return "unknown"


def _folder(*parts: str) -> Optional[str]:
    base = root()
    if base is None:
        return None
    path = os.path.join(base, *parts)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:  # a read-only cache: the run compiles as if there were none
        _record["error"] = "{}: {}".format(path, exc.strerror or exc)
        return None
    return path


def _claim(variable: str, name: str, *parts: str) -> Optional[str]:
    """The folder of cache `name`: the user's where `variable` is set already, else ours under
    root() (then set in `variable`); None where the caches are off. Recorded either way."""
    if os.environ.get(variable):
        path, source = os.environ[variable], variable
    else:
        path, source = _folder(*parts), ENV
        if path is None:
            _record[name] = {"dir": None, "state": "off"}
            return None
        os.environ[variable] = path
    _record[name] = {"dir": path, "set_by": source}
    return path


# Measured on jax 0.10.2 CPU (tests/backends/test_jax.py, two processes): the second run of a job
# whose step had been cached hung in its first collective (gloo's key exchange timed out after
# 30 s) and the job ended at jax's shutdown barrier; with the cache off it ran.
CPU_PROCESSES = ("off for several CPU processes: their gloo collectives hung when the step came "
                 "from JAX's persistent cache")


def prepare_jax(off: Optional[str] = None) -> None:
    """JAX's persistent compilation cache and XLA's autotuning cache, before `import jax`;
    `off`: the reason this run goes without them (recorded)."""
    if off:
        _record["jax"] = {"dir": None, "state": "off", "why": off}
        return
    path = _claim("JAX_COMPILATION_CACHE_DIR", "jax", "jax", "jaxlib-" + _version("jaxlib"))
    if path is None:
        return
    # every jitted function is kept (JAX's defaults skip those compiled within 1 s)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES", AUTOTUNE_DIR)
    _record["jax"].update(hits=0, misses=0,
                          autotune_entries_before=_entries(os.path.join(path, AUTOTUNE_DIR)))


def watch_jax(monitoring) -> None:
    """Count the persistent cache's hits and misses (compilations that asked it and were not
    answered) from jax.monitoring's events (pass the module); call before anything is compiled."""
    counts = _record.get("jax")
    if not counts or counts.get("dir") is None:
        return

    def on_event(event: str, **kwargs: Any) -> None:
        if event == JAX_HIT:
            counts["hits"] += 1
            counts["misses"] -= 1
        elif event == JAX_ASKED:
            counts["misses"] += 1
    monitoring.register_event_listener(on_event)


def prepare_torch(compile: bool, cuda: bool) -> None:
    """torch.compile's cache folder (with --compile), before `import torch`; on GPUs, cuDNN's
    word."""
    if cuda:
        _record["cudnn_autotune"] = CUDNN
    if compile:
        _claim("TORCHINDUCTOR_CACHE_DIR", "torchinductor", "torchinductor",
               "torch-" + _version("torch"))


def note(name: str, **counts: int) -> None:
    """Add what a framework counted (hits, misses) to cache `name`'s record."""
    _record.setdefault(name, {}).update(counts)


def _entries(path: str) -> int:
    try:
        return len(os.listdir(path))
    except OSError:
        return 0


def state(hits: int, misses: int) -> str:
    """hit (everything came from the cache), miss (nothing did), partial, or unused."""
    if hits and not misses:
        return "hit"
    if misses and not hits:
        return "miss"
    return "partial" if hits else "unused"


def record() -> Dict[str, Any]:
    """What this run's compile caches held: {cache: {dir, hits, misses, state, ...}}."""
    out = {}
    for name, value in _record.items():
        value = dict(value) if isinstance(value, dict) else value
        if isinstance(value, dict) and "hits" in value and value.get("dir"):
            value["state"] = state(value["hits"], value["misses"])
        if name == "jax" and value.get("dir"):
            value["autotune_entries_after"] = _entries(os.path.join(value["dir"], AUTOTUNE_DIR))
        out[name] = value
    return out
