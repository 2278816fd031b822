"""JAX (Flax) backend. Stdlib only at import time.

One process drives every local device (`shard_map`: per-device batch norm, gradients averaged
once per step); `processes=N` starts N local processes joined by jax.distributed instead, as a
Slurm launch does with one task per node or per GPU (launch.py). docs/jax.md has the details.
"""
from typing import List

from ..dataset import LOADER_WORKERS
from ..options import Option
from ..protocol import RunSpec

MODULE = "backends.jax"
DATA_FORMAT = None  # --data DIR: loader threads read the JPEG folder itself (data.py, loader.py)
OPTIONS = (
    Option("sync_bn", "bool", "batch-norm statistics over the global batch (an all-reduce in "
           "every BN layer) instead of per device as DDP and Horovod do", default=False),
    Option("processes", "int", "local processes joined by jax.distributed, each driving "
           "gpus/N devices (at most one per device; 1: one process drives them all)", default=1,
           minimum=1),
    Option("loss_scale", "float", "fp16: a static loss scale instead of the dynamic one "
           "(which checks every step for overflow, as PyTorch's GradScaler)", minimum=1,
           default_text="dynamic"),
    Option("flat_allreduce", "bool", "several devices: differentiate with respect to one vector "
           "of all parameters, so the gradient all-reduce is one collective over one buffer "
           "(false: XLA's own combining of the 161 gradient arrays)", default=True),
    Option("donate", "bool", "donate the train state's buffers to the step (updated in place)",
           default=True),
    Option("latency_hiding", "bool", "XLA's latency-hiding scheduler (may overlap the gradient "
           "all-reduce with the backward pass)", default_text="true on cuda"),
    Option("allreduce_combine_mb", "int", "XLA combines all-reduces up to this size (MiB); "
           "smaller ones can start before the backward pass ends", minimum=0,
           default_text="XLA's own"),
    Option("autotune_level", "int", "XLA's GPU autotuning level, 0 (off) to 4", minimum=0,
           default_text="XLA's own (4)"),
    Option("xla_flags", "str", "more XLA flags, appended to XLA_FLAGS as given (recorded)",
           default=""),
    LOADER_WORKERS,
    Option("device_prefetch", "int", "with --data DIR: batches kept ready on the devices ahead "
           "of the step (each one a global batch of float32 images)", default=2, minimum=1),
)


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line that runs `spec` in this backend's environment.

    Always one process; with processes=N it starts the N processes itself (launch.py).
    """
    return [python, "-m", MODULE, spec_path, result_path]
