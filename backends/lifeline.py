"""Every process of a run dies with the process that started it. Standard library only, Linux.

The host starts each launcher with `die_with_parent(expected=<its own pid>)` as preexec_fn; each
worker calls `die_with_parent()` as it starts (harness.main) and horovodrun is started with it.
Then the kernel ends the chain top down, whichever way the top ends (SIGKILL of `compare`
included). A worker whose launcher died before the worker asked (the moment between its start
and the call) finds a parent that is not of its attempt and ends itself.
"""
import os
import signal
import sys
from typing import Optional

ATTEMPT_ENV = "COMPARE_ATTEMPT"  # the attempt's nonce, in every process of the attempt
HOST_PID_ENV = "COMPARE_HOST_PID"  # the `compare` process that started the attempt
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
