"""compare's own multi-process launcher: N local processes of the run, joined through a
coordinator on 127.0.0.1 (JAX's `processes=N`: jax.distributed). Stdlib only.

    python -m backends.launchers.processes python -m backends.jax SPEC RESULT

N is the backend's option `processes`, at most one process per device of the run. Each process
finds the others through COMPARE_COORDINATOR, COMPARE_NUM_PROCESSES, COMPARE_PROCESS_ID and
COMPARE_LOCAL_RANK (backends/world.py). Once one process has ended, failed or not, the others
may be waiting for it in a collective that never completes: they get KILL_GRACE_S (it failed) or
EXIT_GRACE_S (it exited 0; COMPARE_EXIT_GRACE_S where set, as srun's --wait in a Slurm job) to
end themselves, then they are killed. If process 0 wrote no result,
this launcher writes a `failed` one, naming the process that ended first and a process killed by
SIGKILL that it did not kill itself (the kernel's OOM killer's signal: the host looks for its
evidence, compare/executors/results.py).
"""
import os
import signal
import socket
import sys
import time
from typing import Dict, List, Optional, Sequence, Set, Tuple

from .. import harness, lifeline, options
from ..contract.rules import EXIT_GRACE_S, ended_first, exit_grace
from ..protocol import RunSpec
from . import launcher

KILL_GRACE_S = 20.0  # after one process fails, the others get this long to notice it themselves
# after one exits 0 they get EXIT_GRACE_S, or COMPARE_EXIT_GRACE_S (contract/rules.py: exit_grace),
# as srun's --wait in a Slurm job


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


class Ended:
    """How the wait for the processes ended: their exit codes, which of them this launcher
    killed, and the process that ended first while others ran (a failed one before one that
    exited 0) with the grace the others were given after it."""

    def __init__(self, codes: List[Optional[int]], killed: Set[int], first: Optional[int],
                 grace: float) -> None:
        self.codes, self.killed, self.first, self.grace = codes, killed, first, grace

    def said(self) -> str:
        """"; process 1 ended first (exit code 1) and this launcher killed process 0, still
        running 20 s later", or "" where it killed none."""
        if not self.killed or self.first is None:
            return ""
        return ended_first([self.first], self.codes[self.first], sorted(self.killed), self.grace,
                           "this launcher")


def _wait(procs, exit_grace: float = EXIT_GRACE_S) -> Ended:
    """Wait for every process; once one has ended while the others run, give them KILL_GRACE_S
    (it failed) or `exit_grace` (it exited 0; inf: no limit), then kill them."""
    ended = {}  # type: Dict[int, float]  # process -> when this launcher saw it end
    killed = set()  # type: Set[int]
    while True:
        codes = [p.poll() for p in procs]
        now = time.time()
        for i, code in enumerate(codes):
            if code is not None and i not in ended:
                ended[i] = now
        if len(ended) == len(procs):
            return Ended(codes, killed, *_first(codes, ended, killed, exit_grace))
        first, grace = _first(codes, ended, killed, exit_grace)
        if first is not None and now - ended[first] > grace:
            for i, p in enumerate(procs):
                if p.poll() is None:
                    p.kill()
                    killed.add(i)
        time.sleep(0.2)


def _first(codes: Sequence[Optional[int]], ended: Dict[int, float], killed: Set[int],
           exit_grace: float) -> Tuple[Optional[int], float]:
    """(the process whose end sets the others' deadline, their grace): the first that failed
    (not killed by this launcher), else the first that ended; (None, 0) while none has."""
    failed = [i for i in ended if codes[i] != 0 and i not in killed]
    if failed:
        return min(failed, key=lambda i: (ended[i], i)), KILL_GRACE_S
    if ended:
        return min(ended, key=lambda i: (ended[i], i)), exit_grace
    return None, 0.0


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
    try:
        grace = exit_grace(os.environ, EXIT_GRACE_S)
    except ValueError as exc:  # the grace the user asked for, not a default in its place
        return launcher.record(spec, result_path, exc)
    started = time.time()
    coordinator = "127.0.0.1:{}".format(_free_port())
    procs = [launcher.start(rank, dict(os.environ, COMPARE_COORDINATOR=coordinator,
                                   COMPARE_NUM_PROCESSES=str(n), COMPARE_PROCESS_ID=str(i),
                                   COMPARE_LOCAL_RANK=str(i)))
             for i in range(n)]
    ended = _wait(procs, grace)
    codes = ended.codes
    by_signal = killed_by_signal(procs, codes, ended.killed)
    if not launcher.wrote_result(result_path, started):
        return launcher.record(spec, result_path, RuntimeError(
            "the {} {} processes exited with codes {} before process 0 wrote a result{}{}".format(
                n, spec.framework, codes, ended.said(), by_signal)))
    # process 0 wrote the result (its own failure, a peer gone): the run's log names the process
    # killed by SIGKILL all the same, for the host to look for the kernel's word on it
    for line in by_signal.split(": ")[1:]:
        sys.stderr.write("compare: {}\n".format(line))
    sys.stderr.flush()
    return max(abs(c) for c in codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
