"""COMPARE_EXIT_GRACE_S for launchers that wait for every worker (torchrun, horovodrun, mpirun):
none of them has a knob for it. Stdlib only, Linux (/proc).

    python -m backends.launchers.watch python -m torch.distributed.run … -m backends.X SPEC RESULT

Once one worker has ended while the others run, the others may be waiting for it in a collective
that never completes, and such a launcher waits with them until compare's timeout (a worker
that failed it ends the others itself). This program starts the launcher and watches its
workers: the processes under it that run the rank command's module on its spec and result (the
launcher's command ends with `-m MODULE SPEC RESULT`), each one's rank read from its environment
(backends/world.py; one that ends within a poll of its start, POLL_S, is not seen).
EXIT_GRACE_S (COMPARE_EXIT_GRACE_S where set, as srun's --wait and the processes launcher) after
the first ended, unless it failed, those still running get SIGTERM (the launcher then ends and
reports as for any worker ended so), SIGKILL TERM_WAIT_S later. If process 0 wrote no result,
the run's record says which ended first and whom this program ended.
"""
import os
import signal
import sys
import time
from typing import Dict, List, Optional, Sequence, Set, Tuple

from .. import lifeline, world
from ..contract.rules import EXIT_GRACE_S, ended_first, exit_grace
from ..protocol import RunSpec
from . import launcher

POLL_S = 0.2
TERM_WAIT_S = 5.0  # after SIGTERM, before SIGKILL
NAMES = {"torch.distributed.run": "torchrun", "horovod.runner.launch": "horovodrun"}


def _table() -> Dict[int, Tuple[int, str, Optional[int]]]:
    """pid -> (parent, state, exit status as waitpid says it: a zombie's, else None)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/{}/stat".format(entry)) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        status = int(fields[-1]) if fields[0] == "Z" and len(fields) >= 50 else None
        out[int(entry)] = (int(fields[1]), fields[0], status)
    return out


def _argv(pid: int, name: str = "cmdline") -> List[str]:
    try:
        with open("/proc/{}/{}".format(pid, name), "rb") as f:
            return f.read().decode("utf-8", "replace").split("\0")[:-1]
    except OSError:
        return []


def is_worker(argv: Sequence[str], tail: Sequence[str]) -> bool:
    """Whether argv runs the rank command `tail` (-m MODULE SPEC RESULT) itself: its first -m is
    that module (the launcher's own is the launcher's), and it ends with the spec and result."""
    if "-m" not in argv or len(argv) < 4:
        return False
    i = list(argv).index("-m")
    return i + 1 < len(argv) and argv[i + 1] == tail[1] and list(argv[-2:]) == list(tail[-2:])


def _code(status: Optional[int]) -> Optional[int]:
    if status is None:
        return None
    return (status >> 8) & 0xFF if status & 0x7F == 0 else -(status & 0x7F)


class Watch:
    """The workers under one launcher process: who ran, who ended first, whom this ended."""

    def __init__(self, root: int, tail: Sequence[str]):
        self.root, self.tail = root, list(tail)
        self.ranks: Dict[int, int] = {}  # pid -> rank, of every worker seen
        self.ended: Dict[int, Tuple[float, Optional[int]]] = {}  # pid -> (when, exit code if seen)
        self.killed: Set[int] = set()
        self.termed = 0.0

    def look(self) -> List[int]:
        """Note workers started and ended; the pids of those still running."""
        table, now = _table(), time.time()
        children: Dict[int, List[int]] = {}
        for pid, (ppid, _, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        under, todo = set(), [self.root]
        while todo:
            kids = [pid for pid in children.get(todo.pop(), []) if pid not in under]
            under.update(kids)
            todo += kids
        running = []
        for pid in under:
            if pid not in self.ranks and table[pid][1] != "Z" and is_worker(_argv(pid), self.tail):
                env = dict(v.split("=", 1) for v in _argv(pid, "environ") if "=" in v)
                self.ranks[pid] = world.rank(env)
            if pid in self.ranks and table[pid][1] != "Z":
                running.append(pid)
        for pid in self.ranks:
            if pid not in running and pid not in self.ended:
                self.ended[pid] = (now, _code(table[pid][2]) if pid in table else None)
        return running

    def first(self) -> Optional[int]:
        return min(self.ended, key=lambda p: (self.ended[p][0], self.ranks[p])) if self.ended else None

    def end_others(self, running: List[int], grace: float) -> None:
        """Past the grace after the first worker ended (not one that failed: the launcher ends the
        rest itself), SIGTERM those running; SIGKILL them TERM_WAIT_S later."""
        first = self.first()
        if first is None or not running or self.ended[first][1] not in (0, None):
            return
        now = time.time()
        if not self.killed and now - self.ended[first][0] > grace:
            self.termed = now
            for pid in running:
                _signal(pid, signal.SIGTERM)
                self.killed.add(pid)
        elif self.killed and now - self.termed > TERM_WAIT_S:
            for pid in running:
                _signal(pid, signal.SIGKILL)

    def said(self, grace: float) -> str:
        """"; process 1 ended first (exit code 0) and this launcher killed process 0, still
        running 40 s later", or "" where it ended none."""
        first = self.first()
        if not self.killed or first is None:
            return ""
        code = self.ended[first][1]
        return ended_first([self.ranks[first]], "unknown" if code is None else code,  # type: ignore
                           [self.ranks[p] for p in self.killed], grace, "this launcher")


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:
        pass


def run(cmd: Sequence[str], grace: float) -> Tuple[int, str]:
    """Run the launcher `cmd` to its end under the grace: (its exit code as launcher.run says it,
    what Watch.said() says of the workers it ended)."""
    proc = launcher.start(cmd)
    watch = Watch(proc.pid, cmd[-4:])
    while proc.poll() is None:
        watch.end_others(watch.look(), grace)
        time.sleep(POLL_S)
    code = proc.returncode
    return (128 - code if code < 0 else code), watch.said(grace)


def main(cmd: Sequence[str]) -> int:
    """Run the launcher command `cmd` under the exit grace (see the module docstring)."""
    lifeline.die_with_parent()  # never outlive what started this program
    spec: Optional[RunSpec] = launcher.read(cmd)
    result_path = launcher.files(cmd)[1]
    try:
        grace = exit_grace(os.environ, EXIT_GRACE_S)
    except ValueError as exc:  # the grace the user asked for, not a default in its place
        return launcher.record(spec, result_path, exc) if spec else launcher.run(cmd)
    started = time.time()
    code, said = run(cmd, grace)
    if said and spec is not None and not launcher.wrote_result(result_path, started):
        module = cmd[cmd.index("-m") + 1]  # the launcher's: torch.distributed.run, horovodrun's
        name = NAMES.get(module, module)
        return launcher.record(spec, result_path, RuntimeError(
            "{} exited {} before rank 0 wrote a result{}".format(name, code, said)))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
