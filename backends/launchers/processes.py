"""compare's own multi-process launcher: N local processes of the run, joined through a
coordinator on 127.0.0.1 (JAX's `processes=N`: jax.distributed). Stdlib only.

    python -m backends.launchers.processes python -m backends.jax SPEC RESULT

N is the backend's option `processes`, at most one process per device of the run. Each process
finds the others through COMPARE_COORDINATOR, COMPARE_NUM_PROCESSES, COMPARE_PROCESS_ID and
COMPARE_LOCAL_RANK (backends/world.py). Once one process fails the others get KILL_GRACE_S to
notice it themselves, then they are killed; if process 0 wrote no result, this launcher writes
a `failed` one, naming a process killed by SIGKILL that it did not kill itself (the kernel's OOM
killer's signal: the host looks for its evidence, compare/executors/results.py).
"""
import os
import signal
import socket
import sys
import time
from typing import List, Optional, Sequence, Set, Tuple

from .. import harness, lifeline, options
from ..protocol import RunSpec
from . import launcher

KILL_GRACE_S = 20.0  # after one process fails, the others get this long to notice it themselves


class Processes(launcher.Launcher):
    """N local processes joined through a coordinator on this host (the option `processes`)"""

    def command(self, python: str, spec: RunSpec, rank: List[str]) -> List[str]:
        return [python, "-m", __name__] + list(rank)


def count(spec: RunSpec) -> Optional[int]:
    """How many processes the spec asks for, at most one per device (`--gpus 1,2 --option
    processes=2` runs 1 and 2); None where its options do not parse (the harness reports them)."""
    try:
        typed = options.parse(launcher.declared(spec) + harness.COMMON_OPTIONS, spec.options,
                              spec.framework)
    except options.OptionError:
        return None
    return min(typed.get("processes", 1), spec.world_size)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(procs) -> Tuple[List[Optional[int]], Set[int]]:
    """Wait for every process; once one fails, give the rest KILL_GRACE_S, then kill them.
    Returns their exit codes and which of them this launcher killed."""
    failed_at, killed = None, set()  # type: Optional[float], Set[int]
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return codes, killed
        if failed_at is None and any(c not in (None, 0) for c in codes):
            failed_at = time.time()
        if failed_at is not None and time.time() - failed_at > KILL_GRACE_S:
            for i, p in enumerate(procs):
                if p.poll() is None:
                    p.kill()
                    killed.add(i)
        time.sleep(0.2)


def killed_by_signal(procs, codes: Sequence[Optional[int]], killed: Set[int]) -> str:
    """": process I (pid P) was killed by SIGKILL" for each process something other than this
    launcher killed so (the kernel's OOM killer does), else ""."""
    return "".join(": process {} (pid {}) was killed by SIGKILL".format(i, p.pid)
                   for i, (p, code) in enumerate(zip(procs, codes))
                   if code == -signal.SIGKILL and i not in killed)


def main(rank: Sequence[str]) -> int:
    """Run the rank command `processes` times, joined (see the module docstring)."""
    lifeline.die_with_parent()  # never outlive what started this launcher
    spec = launcher.read(rank)
    n = count(spec) if spec is not None else None
    if n is None or n == 1:
        return launcher.run(rank)
    result_path = launcher.files(rank)[1]
    if spec.world_size % n:
        return launcher.record(spec, result_path, ValueError(
            "processes={} must divide the {} devices of --gpus {}".format(n, spec.world_size, spec.gpus)))
    started = time.time()
    coordinator = "127.0.0.1:{}".format(_free_port())
    procs = [launcher.start(rank, dict(os.environ, COMPARE_COORDINATOR=coordinator,
                                   COMPARE_NUM_PROCESSES=str(n), COMPARE_PROCESS_ID=str(i),
                                   COMPARE_LOCAL_RANK=str(i)))
             for i in range(n)]
    codes, killed = _wait(procs)
    by_signal = killed_by_signal(procs, codes, killed)
    if not launcher.wrote_result(result_path, started):
        return launcher.record(spec, result_path, RuntimeError(
            "the {} {} processes exited with codes {} before process 0 wrote a result{}".format(
                n, spec.framework, codes, by_signal)))
    # process 0 wrote the result (its own failure, a peer gone): the run's log names the process
    # killed by SIGKILL all the same, for the host to look for the kernel's word on it
    for line in by_signal.split(": ")[1:]:
        sys.stderr.write("compare: {}\n".format(line))
    sys.stderr.flush()
    return max(abs(c) for c in codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
