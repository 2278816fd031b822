"""Run one command so that every process it starts ends with it, and with the compare that
started it, however compare ends (SIGKILL too):

    python compare/reaper.py CMD [ARG...]      # started by compare with a parent-death SIGTERM

For what compare does not write itself and so cannot give a parent-death signal the way it gives
one to its workers (backends/lifeline.py): pip, and a setup script building an environment
(envs.py), whose children (compilers, wheel builds) would otherwise outlive a killed compare and
write into a folder the next compare clears. It makes itself the subreaper of what CMD starts
(orphans come to it, not to init) and, on SIGTERM, SIGINT or SIGHUP, or once CMD has ended, ends
every process left below it: SIGTERM, then SIGKILL after a grace period. Its exit code is CMD's
(128 + the signal when stopped). Standard library only; run as a script, so it needs no import
path; off Linux it only runs CMD.
"""
import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Dict, List

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 2.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stopped(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _prctl():
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _parents() -> Dict[int, int]:
    """pid -> parent pid of every live process (zombies left out: they are only waiting)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/{}/stat".format(name)) as f:
                fields = f.read().rsplit(")", 1)[1].split()  # the command may hold spaces
        except (OSError, IndexError):
            continue
        if fields and fields[0] != "Z":
            out[int(name)] = int(fields[1])
    return out


def below(pid: int) -> List[int]:
    """Every live process descending from `pid`."""
    parents, found, todo = _parents(), [], [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found += children
        todo += children
    return found


def end_below() -> None:
    """End every process below this one: SIGTERM, and SIGKILL for what is left after GRACE_S."""
    deadline, sig = time.monotonic() + GRACE_S, signal.SIGTERM
    while True:
        with contextlib.suppress(ChildProcessError):  # orphans re-parented here that have ended
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        pids = below(os.getpid())
        if not pids:
            return
        if time.monotonic() > deadline:
            sig = signal.SIGKILL
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        time.sleep(0.05)


def main(argv: List[str]) -> int:
    if not argv:
        sys.stderr.write("usage: reaper.py CMD [ARG...]\n")
        return 2
    prctl = _prctl() if sys.platform.startswith("linux") else None

    def stop(signum, frame):
        raise Stopped(signum)
    for sig in STOP_SIGNALS:
        signal.signal(sig, stop)
    child = None
    try:
        if prctl is not None:
            prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        # CMD dies if this process is killed outright (SIGKILL leaves it no time to end CMD)
        child = subprocess.Popen(argv, preexec_fn=(lambda: prctl(PR_SET_PDEATHSIG, int(
            signal.SIGKILL), 0, 0, 0)) if prctl is not None else None)
        code = child.wait()
        code = code if code >= 0 else 128 - code
    except Stopped as exc:
        code = 128 + exc.signum
    except OSError as exc:  # CMD could not start
        sys.stderr.write("reaper: cannot run {}: {}\n".format(argv[0], exc.strerror or exc))
        code = 127
    for sig in STOP_SIGNALS:  # the clean-up is not cut short by a second signal
        signal.signal(sig, signal.SIG_IGN)
    end_below()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
