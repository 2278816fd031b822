"""How JAX processes start and find each other, before jax is imported. Stdlib only.

- `membership()`: this process's place in a multi-process job, from the environment:
  COMPARE_PROCESS_ID / COMPARE_NUM_PROCESSES / COMPARE_COORDINATOR (host:port) /
  COMPARE_LOCAL_RANK (set by `launch()` below, or by any launcher), else Slurm's SLURM_PROCID /
  SLURM_NTASKS / SLURM_LOCALID with COMPARE_COORDINATOR (without it, jax's own Slurm detection).
- `prepare(spec, member)`: JAX_PLATFORMS and XLA_FLAGS for the spec and its options; it must run
  before `import jax`, which reads them once.
- `launch()`: `--option processes=N` on one host: N local processes of this backend, joined by
  jax.distributed through a coordinator on 127.0.0.1 (the CI test of the multi-process path).
"""
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

from .. import harness, options, policy
from ..protocol import RunSpec, SchemaError, read_spec
from . import MODULE, OPTIONS

KILL_GRACE_S = 20.0  # after one process fails, the others get this long to notice it themselves


@dataclass(frozen=True)
class Member:
    """This process in a job of `processes` processes (1: a job of its own)."""

    process_id: int = 0
    processes: int = 1
    coordinator: Optional[str] = None  # host:port of process 0's coordination service
    local_rank: int = 0  # index among the processes of this host
    source: str = "single"  # "compare" (COMPARE_* variables), "slurm", or "single"


def membership(env: Optional[Dict[str, str]] = None) -> Member:
    env = os.environ if env is None else env
    if "COMPARE_NUM_PROCESSES" in env:
        n = int(env["COMPARE_NUM_PROCESSES"])
        pid = int(env.get("COMPARE_PROCESS_ID", "0"))
        return Member(pid, n, env.get("COMPARE_COORDINATOR"),
                      int(env.get("COMPARE_LOCAL_RANK", str(pid))), "compare")
    if int(env.get("SLURM_NTASKS", "1")) > 1:
        return Member(int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]),
                      env.get("COMPARE_COORDINATOR"), int(env.get("SLURM_LOCALID", "0")), "slurm")
    return Member()


def devices_per_process(spec: RunSpec, member: Member) -> int:
    """The job's world (gpus x nodes) split evenly over its processes."""
    if spec.world_size % member.processes:
        raise ValueError("{} processes cannot share {} devices evenly (--gpus {} x --nodes {})"
                         .format(member.processes, spec.world_size, spec.gpus, spec.nodes))
    return spec.world_size // member.processes


def xla_flags(spec: RunSpec, member: Member) -> List[str]:
    """The XLA flags this run adds, from the spec and its options (recorded in settings)."""
    def opt(key):
        return options.value(OPTIONS, spec.options, key)
    extra = (opt("xla_flags") or "").split()
    if spec.device == "cpu":  # the other switches are XLA:GPU's
        return ["--xla_force_host_platform_device_count={}".format(
            devices_per_process(spec, member))] + extra
    flags = []
    latency_hiding = opt("latency_hiding")
    if latency_hiding is None or latency_hiding:
        flags.append("--xla_gpu_enable_latency_hiding_scheduler=true")
    if opt("autotune_level") is not None:
        flags.append("--xla_gpu_autotune_level={}".format(opt("autotune_level")))
    if opt("allreduce_combine_mb") is not None:
        flags.append("--xla_gpu_all_reduce_combine_threshold_bytes={}".format(
            opt("allreduce_combine_mb") * 1024 * 1024))
    return flags + extra


def prepare(spec: RunSpec, member: Member) -> List[str]:
    """Set JAX_PLATFORMS and XLA_FLAGS for this run (before jax is imported); return the flags
    added. Flags already in XLA_FLAGS stay, unless this run sets the same flag itself."""
    if spec.device == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"  # a GPU build of jax must not take a cpu cell
    added = xla_flags(spec, member)
    names = {f.split("=")[0] for f in added}
    kept = [f for f in os.environ.get("XLA_FLAGS", "").split() if f.split("=")[0] not in names]
    os.environ["XLA_FLAGS"] = " ".join(kept + added)
    if pinned(spec, member):
        _pin_cores(member)
    return added


def pinned(spec: RunSpec, member: Member) -> bool:
    """Whether prepare() pins this process to its own share of the cores: local CPU processes."""
    return spec.device == "cpu" and member.source == "compare" and member.processes > 1


def _pin_cores(member: Member) -> None:
    """Give each local process its own share of the cores (XLA sizes its CPU thread pool by the
    cores this process may run on), so N processes do not oversubscribe them."""
    if not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    share = policy.cpu_threads(member.processes, len(cores))
    first = (member.local_rank * share) % len(cores)
    os.sched_setaffinity(0, cores[first:first + share] or cores)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _record(spec: RunSpec, result_path: str, error: Exception) -> int:
    """Write a `failed` result for a job whose processes wrote none (through the harness)."""
    def setup(_spec):
        raise error
    result = harness.run(spec, result_path, setup, OPTIONS)
    return 0 if result.status in ("ok", "unsupported", "skipped") else 1


def _wait(procs: List[subprocess.Popen]) -> List[Optional[int]]:
    """Wait for every process; once one fails, give the rest KILL_GRACE_S, then kill them."""
    failed_at = None
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return codes
        if failed_at is None and any(c not in (None, 0) for c in codes):
            failed_at = time.time()
        if failed_at is not None and time.time() - failed_at > KILL_GRACE_S:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        time.sleep(0.2)


def launch(spec_path: str, result_path: str) -> Optional[int]:
    """Run `processes` local processes and return the exit code, or None: run in this process."""
    try:
        spec = read_spec(spec_path)
        typed = options.parse(tuple(OPTIONS) + harness.COMMON_OPTIONS, spec.options, spec.framework)
    except (OSError, SchemaError, options.OptionError):
        return None  # the harness reports it
    # at most one process per device: `--gpus 1,2 --option processes=2` runs 1 and 2 processes
    n = min(typed.get("processes", 1), spec.world_size)
    if n == 1:
        return None
    if spec.world_size % n:
        return _record(spec, result_path, ValueError(
            "processes={} must divide the {} devices of --gpus {}".format(n, spec.world_size, spec.gpus)))
    started = time.time()
    coordinator = "127.0.0.1:{}".format(_free_port())
    procs = []
    for i in range(n):
        env = dict(os.environ, COMPARE_COORDINATOR=coordinator, COMPARE_NUM_PROCESSES=str(n),
                   COMPARE_PROCESS_ID=str(i), COMPARE_LOCAL_RANK=str(i), RANK=str(i))
        procs.append(subprocess.Popen([sys.executable, "-m", MODULE, spec_path, result_path], env=env))
    codes = _wait(procs)
    if not os.path.exists(result_path) or os.path.getmtime(result_path) < started - 1:
        return _record(spec, result_path, RuntimeError(
            "the {} jax processes exited with codes {} before process 0 wrote a result".format(
                n, codes)))
    return max(abs(c) for c in codes)
