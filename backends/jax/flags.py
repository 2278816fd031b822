"""What must be set before jax is imported, which reads it once. Stdlib only.

`prepare(spec, member)`: JAX_PLATFORMS and XLA_FLAGS for the spec and its options, and on a CPU
each of several local processes pinned to its own share of the cores. This process's place in
a multi-process job (`member`) comes from backends/world.py: compare's COMPARE_PROCESS_ID /
COMPARE_NUM_PROCESSES / COMPARE_COORDINATOR (host:port) / COMPARE_LOCAL_RANK (set by
backends/launchers/processes.py for `processes=N`, or by any launcher), else Slurm's
SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID with COMPARE_COORDINATOR (without it, jax's own Slurm
detection).
"""
import os
from typing import List

from .. import options, policy
from ..protocol import RunSpec
from ..world import World
from . import OPTIONS

ADDED = []  # type: List[str]  # the flags prepare() added to XLA_FLAGS in this process (recorded)


def devices_per_process(spec: RunSpec, member: World) -> int:
    """The job's world (gpus x nodes) split evenly over its processes."""
    if spec.world_size % member.processes:
        raise ValueError("{} processes cannot share {} devices evenly (--gpus {} x --nodes {})"
                         .format(member.processes, spec.world_size, spec.gpus, spec.nodes))
    return spec.world_size // member.processes


def xla_flags(spec: RunSpec, member: World) -> List[str]:
    """The XLA flags this run adds, from the spec and its options (recorded in settings)."""
    def opt(key):
        return options.value(OPTIONS, spec.options, key)
    extra = (opt("xla_flags") or "").split()
    if spec.device == "cpu":  # the other switches are XLA:GPU's
        return ["--xla_force_host_platform_device_count={}".format(
            devices_per_process(spec, member))] + extra
    flags = []
    latency_hiding = opt("latency_hiding")
    if latency_hiding is None:  # only where there is a collective to hide: one device has none,
        latency_hiding = spec.world_size > 1  # and the plain Flax loop runs without it
    if latency_hiding:
        flags.append("--xla_gpu_enable_latency_hiding_scheduler=true")
    if opt("autotune_level") is not None:
        flags.append("--xla_gpu_autotune_level={}".format(opt("autotune_level")))
    if opt("allreduce_combine_mb") is not None:
        flags.append("--xla_gpu_all_reduce_combine_threshold_bytes={}".format(
            opt("allreduce_combine_mb") * 1024 * 1024))
    return flags + extra


def prepare(spec: RunSpec, member: World) -> List[str]:
    """Set JAX_PLATFORMS and XLA_FLAGS for this run (before jax is imported); return the flags
    added. Flags already in XLA_FLAGS stay, unless this run sets the same flag itself."""
    if spec.device == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"  # a GPU build of jax must not take a cpu cell
    added = xla_flags(spec, member)
    names = {f.split("=")[0] for f in added}
    kept = [f for f in os.environ.get("XLA_FLAGS", "").split() if f.split("=")[0] not in names]
    os.environ["XLA_FLAGS"] = " ".join(kept + added)
    ADDED[:] = added
    if pinned(spec, member):
        _pin_cores(member)
    return added


def pinned(spec: RunSpec, member: World) -> bool:
    """Whether prepare() pins this process to its own share of the cores: local CPU processes."""
    return spec.device == "cpu" and member.kind == "compare" and member.processes > 1


def _pin_cores(member: World) -> None:
    """Give each local process its own share of the cores (XLA sizes its CPU thread pool by the
    cores this process may run on), so N processes do not oversubscribe them."""
    if not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    share = policy.cpu_threads(member.processes, len(cores))
    first = (member.local_rank * share) % len(cores)
    os.sched_setaffinity(0, cores[first:first + share] or cores)
