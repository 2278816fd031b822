"""What every executor shares: reading the backend's result back, or recording why there is none;
and ending every process a run started, whichever way the run or `compare` ends."""
import datetime
import functools
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from backends.contract import RunResult, RunSpec, SchemaError, oom_line, utc_now
from backends.contract.shared import die_with_parent, lifeline

from ..store import clean_text, load_result

TAIL_CHARS = 4000
# every process a run starts inherits CAMPAIGN_ENV=<folder> and lifeline.ATTEMPT_ENV=<nonce>, so
# it can be found after its parent died (a torchrun worker runs in a session of its own; an
# orphan is re-parented)
CAMPAIGN_ENV = "COMPARE_CAMPAIGN"
GRACE_S = 3.0  # between SIGTERM (launchers forward it, clean up) and SIGKILL
OOM_SCAN_CHARS = 1_000_000  # how much of a run's stderr (all ranks) is searched for an OOM


def run_env(spec: RunSpec, code_dir: Path, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment a backend process runs with: this one's, plus the run's own variables."""
    env = dict(os.environ)
    env.update(own_env(spec, code_dir))
    if spec.precision != "fp32":
        env.pop("NVIDIA_TF32_OVERRIDE", None)
    env.update(extra or {})
    return env


def child_setup(expected: int, cores: Sequence[int] = ()) -> None:
    """A launcher's preexec_fn: pinned to `cores` (a cell sharing the machine; its workers inherit
    them), and dying with `compare` (lifeline.py). Only system calls: it runs between fork and exec."""
    if cores:
        os.sched_setaffinity(0, cores)
    die_with_parent(expected=expected)


def start_launcher(cmd: Sequence[str], out, err, env: Dict[str, str], cwd,
                   cores: Sequence[int] = ()) -> subprocess.Popen:
    """Start a run's launcher in a session of its own, pinned to `cores` and dying with compare;
    OSError if it does not start."""
    lifeline.prepare()
    return subprocess.Popen(list(cmd), stdout=out, stderr=err, env=env, cwd=str(cwd),
                            start_new_session=True, preexec_fn=functools.partial(
                                child_setup, expected=os.getpid(), cores=tuple(cores)))


def start_and_wait(cmd: Sequence[str], out, err, env: Dict[str, str], cwd, timeout: float,
                   hold: Callable[[subprocess.Popen], None], release: Callable[[], None],
                   cores: Sequence[int] = ()) -> Tuple[Optional[int], bool]:
    """Start a run's launcher in a session of its own (pinned to `cores`, dying with compare),
    hand it to hold() so that close() can stop it, and wait up to `timeout` seconds; release()
    then ends what is left of the attempt (after a timeout, a stop, or workers that outlive a
    launcher that exited). (exit code, or None; timed out). OSError if it does not start."""
    proc = start_launcher(cmd, out, err, env, cwd, cores)
    hold(proc)
    try:
        return proc.wait(timeout=timeout), False
    except subprocess.TimeoutExpired:
        return None, True
    finally:
        release()


def own_env(spec: RunSpec, code_dir) -> Dict[str, str]:
    """The variables a run sets whatever runs it: the staged backends on PYTHONPATH, unbuffered
    output, the seed, and true FP32 (no library may pick TF32 behind our back) for fp32."""
    env = {"PYTHONPATH": str(code_dir), "PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": str(spec.seed)}
    if spec.precision == "fp32":
        env["NVIDIA_TF32_OVERRIDE"] = "0"
    return env


def tail(path: Path, chars: int = TAIL_CHARS) -> str:
    """The end of a log, with terminal escape sequences and control characters made harmless."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return clean_text(text[-chars:])


def tagged_pids(name: str, value: str) -> List[int]:
    """This user's live processes whose environment has NAME=VALUE (zombies have none)."""
    needle = "\0{}={}\0".format(name, value).encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open("/proc/{}/environ".format(entry.name), "rb") as f:
                environ = b"\0" + f.read() + b"\0"
        except OSError:  # gone, or another user's
            continue
        if needle in environ and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def _signal_all(pids: List[int], group: Optional[int], sig: int) -> None:
    if group is not None:
        try:
            os.killpg(group, sig)
        except OSError:
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def end_processes(proc: Optional[subprocess.Popen], name: str, value: str,
                  grace: float = GRACE_S) -> int:
    """End `proc` (a launcher started in a session of its own), its process group and every process
    tagged NAME=VALUE: SIGTERM, up to `grace` seconds, then SIGKILL. Returns how many were alive."""
    def alive() -> List[int]:
        return tagged_pids(name, value)
    running = proc is not None and proc.poll() is None
    group = proc.pid if running else None  # an unreaped launcher keeps its id: no reuse
    first = alive()
    if not first and not running:
        return 0
    _signal_all(first, group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and ((proc is not None and proc.poll() is None) or alive()):
        time.sleep(0.05)
    _signal_all(alive(), group if proc is not None and proc.poll() is None else None, signal.SIGKILL)
    if proc is not None:
        proc.wait()
    return len(set(first) | ({proc.pid} if running else set()))


def failure(spec: RunSpec, status: str, reason: str, stderr_tail: Optional[str] = None,
            started_at: Optional[str] = None) -> RunResult:
    """A result for a run that produced none of its own (crash, timeout, missing environment)."""
    return RunResult(run_id=spec.run_id, status=status, spec=spec.to_dict(), reason=reason,
                     stderr_tail=stderr_tail or None, started_at=started_at, finished_at=utc_now(),
                     nonce=spec.nonce, spec_hash=spec.spec_hash)


def collect(spec: RunSpec, result_file: Path, returncode: Optional[int], stderr_file: Path,
            started_at: str, timed_out: bool, timeout: float) -> RunResult:
    """Turn a finished process into a result: its own file if it wrote one, else a failure.

    A file is this attempt's only if it echoes the spec's nonce: one written late by a process
    left over from an earlier attempt is ignored, and the recorded result says so."""
    stderr_tail = tail(stderr_file)
    # only rank 0 writes the result: another rank's out-of-memory shows in the shared stderr
    # (contract.oom_line: the rule the harness applies to an exception, applied to its lines)
    oom = oom_line(tail(stderr_file, OOM_SCAN_CHARS))
    if timed_out:
        reason = "killed after the {:g} s timeout".format(timeout)
        if oom:
            return failure(spec, "oom", reason + "; a worker ran out of memory first: " + oom,
                           stderr_tail, started_at)
        return failure(spec, "timeout", reason, stderr_tail, started_at)
    note = ""
    if result_file.exists():
        try:
            result = load_result(result_file)
        except (SchemaError, OSError) as exc:
            return failure(spec, "failed", "unreadable result file: {}".format(exc),
                           stderr_tail, started_at)
        if result.nonce in (spec.nonce, None):  # None: a backend older than nonces (a named image)
            if result.status == "failed" and oom:
                result.status = "oom"
                result.reason = "a worker ran out of memory: {} (rank 0 recorded: {})".format(
                    oom, result.reason)
            if result.status != "ok":
                result.stderr_tail = stderr_tail or None
            return result
        note = " (ignored a result file written by another attempt, nonce {}, not this attempt's " \
               "{}: a process left over from an earlier sweep)".format(result.nonce, spec.nonce)
    last = [line for line in stderr_tail.splitlines() if line.strip()]
    how, kernel, signum = "exited with code {}".format(returncode), None, signal_of(returncode)
    if signum:  # failed, with the signal; out of memory only where the kernel's log says so
        how = "killed by {} (exit code {})".format(_signal_name(signum), returncode)
        kernel = None if oom else kernel_oom_since(started_at)
        oom = oom or kernel
    reason = "{} and wrote no result{}{}{}".format(
        how, note, (": " + last[-1][-300:]) if last else "",
        " (the kernel's OOM killer: {})".format(kernel) if kernel else "")
    return failure(spec, "oom" if oom else "failed", reason, stderr_tail, started_at)


def signal_of(returncode: Optional[int]) -> Optional[int]:
    """The signal that ended a process: -N from Popen, 128+N as shells and containers report it."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    return returncode - 128 if 128 < returncode <= 128 + 64 else None


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "signal {}".format(signum)


KERNEL_LOG = "/dev/kmsg"  # the kernel's ring buffer: one record "prio,seq,usec,flags;text" a read
KERNEL_OOM = re.compile(r"Out of memory: Killed process|oom-kill:|Memory cgroup out of memory")


def kernel_oom_since(started_at: str) -> Optional[str]:
    """The kernel's last OOM-killer line logged since `started_at` (ISO time), or None (none, or a
    log this user may not read)."""
    try:
        start = datetime.datetime.fromisoformat(started_at).timestamp() - 1.0
        boot = time.time() - time.monotonic()  # the log counts microseconds since boot
        fd = os.open(KERNEL_LOG, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError, TypeError):
        return None
    found, chunks = None, []
    try:
        for _ in range(200000):  # the ring buffer holds far fewer records
            try:
                chunk = os.read(fd, 8192)
            except BrokenPipeError:  # a record overwritten while reading: go on
                continue
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:  # EAGAIN: read to the end
        pass
    finally:
        os.close(fd)
    for line in b"".join(chunks).decode(errors="replace").splitlines():
        head, _, text = line.partition(";")
        fields = head.split(",")
        if len(fields) >= 3 and fields[2].isdigit() and KERNEL_OOM.search(text) and \
                boot + int(fields[2]) / 1e6 >= start:
            found = text.strip()[:300]
    return found
