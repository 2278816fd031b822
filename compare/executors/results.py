"""How a run ended (Outcome, what every executor's wait() hands to collect()) and the result it
makes: the backend's own result file read back, or a failure saying why there is none; the words
frameworks print when memory runs out, and the kernel's own when it killed for memory."""
import datetime
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

from backends.contract import RunResult, RunSpec, SchemaError, oom_line, utc_now

from ..loading import clean_text, load_result

TAIL_CHARS = 4000
OOM_SCAN_CHARS = 1_000_000  # how much of a run's stderr (all ranks) is searched for an OOM
KERNEL_LOG = "/dev/kmsg"  # the kernel's ring buffer: one record "prio,seq,usec,flags;text" a read
KERNEL_OOM = re.compile(r"Out of memory: Killed process|oom-kill:|Memory cgroup out of memory")


@dataclass(frozen=True)
class Outcome:
    """How a run ended, as its executor saw it: what wait() returns, the same for every executor."""

    exit_code: Optional[int] = None  # the launcher's (a job's script's); None: not known
    timed_out: bool = False  # compare's timeout ended it (SIGTERM, a grace, SIGKILL of it all)
    # where the run's environment itself says memory ran out (a container's OOM kill): why; a
    # run that failed is then `oom`
    oom_killed: str = ""
    # (status, reason) where the executor knows how the run ended without its result file (a
    # Slurm job stopped at its time limit): recorded so, the file is not read
    ended: Optional[Tuple[str, str]] = None

    @property
    def signal(self) -> Optional[int]:
        """The signal that ended the launcher: -N from Popen, 128+N as shells and containers say."""
        rc = self.exit_code
        if rc is None:
            return None
        return -rc if rc < 0 else (rc - 128 if 128 < rc <= 128 + 64 else None)


def failure(spec: RunSpec, status: str, reason: str, stderr_tail: Optional[str] = None,
            started_at: Optional[str] = None) -> RunResult:
    """A result for a run that produced none of its own (crash, timeout, missing environment)."""
    return RunResult(run_id=spec.run_id, status=status, spec=spec.to_dict(), reason=reason,
                     stderr_tail=stderr_tail or None, started_at=started_at, finished_at=utc_now(),
                     nonce=spec.nonce, spec_hash=spec.spec_hash)


def tail(path: Path, chars: int = TAIL_CHARS) -> str:
    """The end of a log, with terminal escape sequences and control characters made harmless."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return clean_text(text[-chars:])


def collect(spec: RunSpec, outcome: Outcome, result_file: Path, stderr_file: Path,
            started_at: str, timeout: float) -> RunResult:
    """Turn an ended run into its result: the executor's word where it has the last one, else the
    run's own file if it wrote one, else a failure saying how it ended.

    A file is this attempt's only if it echoes the spec's nonce: one written late by a process
    left over from an earlier attempt is ignored, and the recorded result says so."""
    stderr_tail = tail(stderr_file)
    if outcome.ended:
        return failure(spec, *outcome.ended, stderr_tail, started_at)
    result = _read(spec, outcome, result_file, stderr_file, stderr_tail, started_at, timeout)
    if outcome.oom_killed and result.status == "failed":
        return failure(spec, "oom", outcome.oom_killed, result.stderr_tail, started_at)
    return result


def _read(spec: RunSpec, outcome: Outcome, result_file: Path, stderr_file: Path,
          stderr_tail: str, started_at: str, timeout: float) -> RunResult:
    # only rank 0 writes the result: another rank's out-of-memory shows in the shared stderr
    oom = oom_line(tail(stderr_file, OOM_SCAN_CHARS))
    if outcome.timed_out:
        first = "; a worker ran out of memory first: " + oom if oom else ""
        return failure(spec, "oom" if oom else "timeout", "killed after the {:g} s timeout{}".format(
            timeout, first), stderr_tail, started_at)
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
    how, kernel, signum = "exited with code {}".format(outcome.exit_code), None, outcome.signal
    if signum:  # failed, with the signal; out of memory only where the kernel's log says so
        how = "killed by {} (exit code {})".format(_signal_name(signum), outcome.exit_code)
        kernel = None if oom else kernel_oom_since(started_at)
        oom = oom or kernel
    reason = "{} and wrote no result{}{}{}".format(
        how, note, (": " + last[-1][-300:]) if last else "",
        " (the kernel's OOM killer: {})".format(kernel) if kernel else "")
    return failure(spec, "oom" if oom else "failed", reason, stderr_tail, started_at)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "signal {}".format(signum)


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
