"""JAX (Flax) backend. Stdlib only at import time.

One process drives every local device (`shard_map`: per-device batch norm, gradients averaged
once per step); `processes=N` runs N local processes joined by jax.distributed instead (started
by backends/launchers/processes.py), as a Slurm job does with one task per node. docs/jax.md has
the details.
"""
from typing import List

from .. import pipelines
from ..options import HW_DECODE, LOADER_WORKERS, Option
from ..protocol import RunSpec

MODULE = "backends.jax"
FRAMEWORK = "jax"  # the package the backend imports (its bytecode: caches.bytecode)
DATA_FORMAT = None  # --data DIR: the pipeline reads the JPEG folder itself (data.py)
# its input pipelines (backends/pipelines/), in order of preference: decode=auto takes the first
# that runs here; --option decode and --option pipeline are made from this table
PIPELINES = (
    pipelines.hw_row("backends.jax.data:hw"),
    pipelines.Pipeline("cpu", "backends.jax.data:cpu", "Pillow in the loader's workers"),
    pipelines.dali_row("backends.jax.dali:make"),
)
XLA_GPU = "it sets a flag of XLA:GPU, which a CPU run leaves out (flags.py)"
OPTIONS = (
    Option("sync_bn", "bool", "batch-norm statistics over the global batch (an all-reduce in "
           "every BN layer) instead of per device as DDP and Horovod do", default=False),
    Option("processes", "int", "local processes joined by jax.distributed, each driving "
           "gpus/N devices (at most one per device; 1: one process drives them all)", default=1,
           minimum=1, maximum=64),
    Option("loss_scale", "float", "fp16: a static loss scale instead of the dynamic one "
           "(which checks every step for overflow, as PyTorch's GradScaler)", minimum=1,
           maximum=2 ** 24, default_text="dynamic"),
    Option("flat_allreduce", "bool", "several devices: differentiate with respect to one vector "
           "of all parameters, so the gradient all-reduce is one collective over one buffer "
           "(false: XLA's own combining of the 161 gradient arrays)", default=True),
    Option("donate", "bool", "donate the train state's buffers to the step (updated in place)",
           default=True),
    Option("latency_hiding", "bool", "XLA's latency-hiding scheduler (may overlap the gradient "
           "all-reduce with the backward pass)", default_text="true on cuda with several devices",
           gpu=XLA_GPU),
    Option("allreduce_combine_mb", "int", "XLA combines all-reduces up to this size (MiB); "
           "smaller ones can start before the backward pass ends", minimum=0,
           maximum=65536, default_text="XLA's own", gpu=XLA_GPU),
    Option("autotune_level", "int", "XLA's GPU autotuning level, 0 (off) to 4", minimum=0, maximum=4,
           default_text="XLA's own (4)", gpu=XLA_GPU),
    Option("xla_flags", "str", "more XLA flags, appended to XLA_FLAGS as given (recorded)",
           default=""),
    LOADER_WORKERS,
    pipelines.decode_option(PIPELINES),
    Option("loader", "str", "with --data DIR and CPU decode: Grain worker processes, or a thread "
           "pool in the training process", default="grain", choices=("grain", "threads")),
    pipelines.pipeline_option(PIPELINES),
    *HW_DECODE,
    Option("device_prefetch", "int", "with --data DIR: batches kept ready on the devices ahead "
           "of the step (each one a global batch of float32 images)", default=2, minimum=1,
           maximum=64),
)
# `tuned` (docs/modes.md): JAX is always XLA-compiled; no XLA flag has been measured faster than
# the defaults on an H200 (BENCHMARKS.md: latency hiding, combine thresholds, autotune levels,
# static loss scale), so tuned sets no switch and differs from default by the best batch only.
# bench/jax_parity.sh measures the candidates; one that wins goes here, with its figure.
MODES = {"tuned": ()}  # no Switch(...) yet


def prepare(spec: RunSpec) -> None:
    """Before jax is imported: JAX_PLATFORMS and XLA_FLAGS for this run (flags.py), the
    persistent compilation cache (compile_cache.py), and with decode=hw CUDA's hardware queues
    (pipelines/feed.py: hw_connections)."""
    from .. import world
    from ..pipelines import feed
    from . import compile_cache
    from .flags import prepare
    feed.hw_connections(spec, OPTIONS)
    member = world.world()
    prepare(spec, member)
    several_cpu = spec.device == "cpu" and member.processes > 1
    compile_cache.prepare(off=compile_cache.CPU_PROCESSES if several_cpu else None)


def launcher(spec: RunSpec) -> str:
    """processes=N on one node: compare's multi-process launcher; else one process (per node:
    across nodes the cluster starts one task on each)."""
    wanted = spec.options.get("processes", 1)
    several = isinstance(wanted, int) and min(wanted, spec.world_size) > 1
    return "processes" if several and spec.nodes == 1 else "single"


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line one process of the run executes in this backend's environment."""
    return [python, "-m", MODULE, spec_path, result_path]
