"""Every process of a run dies with the process that started it. Standard library only, Linux.

The host starts each launcher with `die_with_parent(expected=<its own pid>)` as preexec_fn; each
worker calls `die_with_parent()` as it starts (harness.main) and horovodrun is started with it.
Then the kernel ends the chain top down, whichever way the top ends (SIGKILL of `compare`
included). A worker whose launcher died before the worker asked (the moment between its start
and the call) finds a parent that is not of its attempt and ends itself.

A container's processes are not compare's children: there each worker watches the flock compare
holds on its campaign folder, mounted read-only at $COMPARE_HOST_LOCK (`watch_host_lock`), and
ends when the kernel has dropped it, whichever way compare ended.
"""
import os
import signal
import sys
from typing import Optional

ATTEMPT_ENV = "COMPARE_ATTEMPT"  # the attempt's nonce, in every process of the attempt
HOST_PID_ENV = "COMPARE_HOST_PID"  # the `compare` process that started the attempt
HOST_LOCK_ENV = "COMPARE_HOST_LOCK"  # in a container: the campaign folder compare holds a flock on
WATCH_S = 1.0  # how often a container's worker looks whether compare's lock is still held
PR_SET_PDEATHSIG = 1
_prctl = []  # libc's prctl, once found: see prepare()


def _environ(pid: int) -> bytes:
    try:
        with open("/proc/{}/environ".format(pid), "rb") as f:
            return b"\0" + f.read()
    except OSError:
        return b""


def _parent_is_of_this_attempt(parent: int) -> bool:
    """True where this process was not started by compare (no tag: nothing to check), or its
    parent is the compare that started the attempt or a process of the same attempt."""
    tag = os.environ.get(ATTEMPT_ENV)
    if not tag:
        return True
    if str(parent) == os.environ.get(HOST_PID_ENV) or _command(parent) == "slurmstepd":
        return True  # started by compare, or as an srun task (a step of compare's allocation)
    return "\0{}={}\0".format(ATTEMPT_ENV, tag).encode() in _environ(parent)


def _command(pid: int) -> str:
    try:
        with open("/proc/{}/comm".format(pid)) as f:
            return f.read().strip()
    except OSError:
        return ""


def prepare() -> bool:
    """Find prctl (in the parent, before a fork: a preexec_fn then loads no library in the child,
    where a lock held by another thread at the fork could never be released). False without it."""
    if not _prctl and sys.platform.startswith("linux"):
        try:
            import ctypes
            _prctl.append(ctypes.CDLL(None, use_errno=True).prctl)
        except (OSError, AttributeError):
            return False
    return bool(_prctl)


def die_with_parent(sig: int = signal.SIGKILL, expected: Optional[int] = None) -> None:
    """Have the kernel send `sig` to this process when its parent exits; if the parent is already
    gone (not `expected`, or not of this attempt), end now. A no-op off Linux or without prctl."""
    if not prepare():
        return
    _prctl[0](PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    parent = os.getppid()  # after prctl: a parent dying from here on sends the signal
    if parent != (expected if expected is not None else parent) or \
            (expected is None and not _parent_is_of_this_attempt(parent)):
        os.kill(os.getpid(), sig)


def watch_host_lock(poll_s: float = WATCH_S) -> None:
    """Where $COMPARE_HOST_LOCK names the campaign folder of the compare that started this run (a
    container: the kernel's parent-death signal cannot reach across), end this process as soon
    as that compare's flock on it is gone: it ended, SIGKILL included, and no one will collect
    this run. A thread tries a shared lock every `poll_s`; it is refused while compare holds its
    exclusive one. compare mounts the folder only while it holds the lock, so a lock free at the
    first look means compare ended before it (a SIGKILL right after the container started); the
    engine runs on compare's kernel, as its bind mounts of compare's folders need, so the lock
    is seen from inside."""
    path = os.environ.get(HOST_LOCK_ENV)
    if not path:
        return
    import fcntl
    import threading
    import time
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        sys.stderr.write("lifeline: cannot watch compare's lock at {}: {}\n".format(path, exc))
        return

    def held() -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # refused: compare holds its exclusive lock, it is running
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)  # not ours to hold: a resuming compare takes it
        return False

    def watch() -> None:
        while held():
            time.sleep(poll_s)
        sys.stderr.write("lifeline: the compare that started this run has ended (its lock on the "
                         "campaign is gone); the run ends with it\n")
        sys.stderr.flush()
        os._exit(1)
    threading.Thread(target=watch, name="compare-lifeline", daemon=True).start()
