"""How a run ended (Outcome, what every executor's wait() hands to collect()) and the result it
makes: the backend's own result file read back, or a failure saying why there is none; the words
frameworks print when memory runs out, and the kernel's own when it killed for memory (its log,
or the OOM kills a memory cgroup counted while the run ran)."""
import datetime
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from backends.contract import RunResult, RunSpec, SchemaError, oom_line, utc_now
from backends.contract.rules import ended_first, unsupported_rank

from ..loading import clean_text, load_result

TAIL_CHARS = 4000
OOM_SCAN_CHARS = 1_000_000  # how much of a run's stderr (all ranks) is searched for an OOM
KERNEL_LOG = "/dev/kmsg"  # the kernel's ring buffer: one record "prio,seq,usec,flags;text" a read
KERNEL_OOM = re.compile(r"Out of memory: Killed process|oom-kill:|Memory cgroup out of memory")
# how a launcher reports a worker killed by SIGKILL (the OOM killer's signal, which leaves nothing
# in the log) before it exits with a code of its own: torchrun's error summary, Open MPI's mpirun,
# compare's processes launcher (backends/launchers/processes.py); horovodrun with gloo (0.28.1:
# its summary names the first worker to fail, 137 = 128 + SIGKILL as the shell it starts each
# worker in says, and that shell's own "Killed" under the worker's prefix); srun ("srun: error:
# NODE: task 1: Killed", "tasks 0-1: Killed": strsignal(9)). Each form as captured from a real run
# (tests/executors/test_collect.py)
KILLED_WORKER = re.compile("|".join((
    r"Signal 9 \(SIGKILL\) received by PID \d+",  # torchrun
    r"process rank \d+ with PID \d+ on node \S+ exited on signal 9 \(Killed\)",  # mpirun
    r"process \d+ \(pid \d+\) was killed by SIGKILL",  # compare's processes launcher
    r"(?P<horovodrun>(?<=The first process to do so was:)\s*Process name: \S+\s+Exit code: 137\b"
    r"|^\[\d+\]<stderr>:Killed$)",  # horovodrun: its summary; the worker's shell
    r"srun: error: \S+: tasks? [\d,-]+: Killed\b")), re.MULTILINE)
CGROUP_ROOT = "/sys/fs/cgroup"
# a worker's failure as every harness prints it (traceback.print_exc()): the line that ends a
# Python traceback, under horovodrun's "[RANK]<stderr>:" where it runs the workers with gloo, or
# Open MPI's --tag-output "[JOB,RANK]<stderr>:" (horovodrun --mpi passes it)
RANK_PREFIX = re.compile(r"^\[(?:\d+,)?(\d+)\]<std(?:err|out)>:")
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)$")  # before its ": message"
# the launchers' own exceptions, raised after a worker failed: never the first failure
LAUNCHER_ERROR = re.compile(r"ChildFailedError|Horovod detected that one or more processes exited|"
                            r"before (?:rank|process) 0 wrote a result")
CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
# srun's word on each task that ended badly, in the order they ended ("tasks 0-1: Killed")
SRUN_TASK = re.compile(r"^srun: error: \S+: tasks? [\d,-]+: (.+)$", re.MULTILINE)
# srun --wait ending the tasks still running once one had exited 0 (the job script's grace): "srun:
# First task exited 40s ago", then a line per state ("srun: StepId=581.0 task 0: running", "tasks
# 1-3: exited"), as Slurm 22.05 says it; a task that failed would have ended them at once
SRUN_WAITED = re.compile(r"^srun: First task exited (\d+)s ago$", re.MULTILINE)
SRUN_TASK_STATE = re.compile(r"^srun: .*\btasks? ([\d,-]+): (running|exited)$")


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
    # OOM kills this host's memory cgroup of the run counted while it ran (processes.Process);
    # None: not read. With a worker killed by SIGKILL, the evidence that memory killed it
    cgroup_oom_kills: Optional[int] = None
    # whether the run's processes ran under this host's kernel, whose log is read for OOM kills:
    # not a Slurm batch job's, on Slurm's nodes (a login node's OOM kills say nothing of them)
    kernel_here: bool = True

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
    """The end of a log, with terminal escape sequences and control characters made harmless.
    Only its last bytes are read (a worker may have logged gigabytes), as UTF-8 whatever the
    locale says, bytes that are not UTF-8 replaced."""
    try:
        with open(str(path), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4 * chars))  # a character is at most 4 bytes of UTF-8
            text = f.read(4 * chars).decode("utf-8", errors="replace")
    except OSError:
        return ""
    return clean_text(text[-chars:])


def collect(spec: RunSpec, outcome: Outcome, result_file: Path, stderr_file: Path,
            started_at: str, timeout: float) -> RunResult:
    """Turn an ended run into its result: the executor's word where it has the last one, else the
    run's own file if it wrote one, else a failure saying how it ended; `unsupported` with its
    reason where a rank other than 0 said so before the run failed, timed out or its executor ended
    it (a Slurm job CANCELLED or OUT_OF_MEMORY: the end stays in the reason).

    A file is this attempt's only if it echoes the spec's nonce: one written late by a process
    left over from an earlier attempt is ignored, and the recorded result says so."""
    stderr_tail = tail(stderr_file)
    # only rank 0 writes the result: another rank's out-of-memory, error or unsupported shows in
    # the shared stderr
    text = tail(stderr_file, OOM_SCAN_CHARS)
    if outcome.ended:  # the executor's word (a Slurm job's end state): the file is not read
        result = failure(spec, *outcome.ended, stderr_tail, started_at)
    else:
        result = _read(spec, outcome, result_file, text, stderr_tail, started_at, timeout)
        if outcome.oom_killed and result.status == "failed":
            return failure(spec, "oom", outcome.oom_killed, result.stderr_tail, started_at)
    # a timeout too (compare's, or a Slurm job's time limit), and any end the executor knows (a
    # job CANCELLED or OUT_OF_MEMORY while the others waited for that rank in a collective that
    # never completes): run again, the cell would end so again
    ranked = unsupported_rank(text) if outcome.ended or result.status in ("failed", "timeout") \
        else None
    if ranked:  # it ended first, as rank 0's Unsupported would have: the rest followed from it
        result.status, result.reason = "unsupported", "rank {}: {} (the run recorded otherwise: " \
            "{})".format(ranked[0], ranked[1], result.reason)
    return result


def _read(spec: RunSpec, outcome: Outcome, result_file: Path, text: str,
          stderr_tail: str, started_at: str, timeout: float) -> RunResult:
    """The result of a run that ended (`text`: its stderr, every rank's): a timeout, else its
    own result file, a failure there told by what the log says came first, else a failure
    saying how it ended without one."""
    oom = oom_line(text)
    if outcome.timed_out:
        first = "; a worker ran out of memory first: " + oom if oom else ""
        return failure(spec, "oom" if oom else "timeout", "killed after the {:g} s timeout{}".format(
            timeout, first), stderr_tail, started_at)
    result, note = _own_result(spec, result_file)
    if result is None:
        return _without_result(spec, outcome, text, oom, note, stderr_tail, started_at)
    if result.status == "failed":
        _explain(result, text, oom, outcome, started_at)
    if result.status != "ok":
        result.stderr_tail = stderr_tail or None
    return result


def _own_result(spec: RunSpec, result_file: Path) -> Tuple[Optional[RunResult], str]:
    """(the run's result file, where there is one of this attempt, else None; what a reason
    without it says of the file: " that could be read (…)", " (ignored a result file …)" or "")."""
    if not result_file.exists():
        return None, ""
    try:
        result = load_result(result_file)
    except (SchemaError, OSError) as exc:
        # cut short or damaged: no result; the run is judged by how it ended, as without one
        return None, " that could be read ({}: {})".format(result_file.name, exc)
    if result.nonce in (spec.nonce, None):  # None: a backend older than nonces (a named image)
        return result, ""
    return None, " (ignored a result file written by another attempt, nonce {}, not this " \
                 "attempt's {}: a process left over from an earlier sweep)".format(result.nonce, spec.nonce)


def _explain(result: RunResult, text: str, oom: Optional[str], outcome: Outcome,
             started_at: str) -> None:
    """A `failed` result (rank 0's, or the launcher's) told by what came first: a worker out of
    memory, a worker killed by SIGKILL, the launcher killed so, or another worker's error."""
    if oom:
        result.status = "oom"
        result.reason = "a worker ran out of memory: {} (rank 0 recorded: {})".format(
            oom, result.reason)
    elif worker := killed_worker(text):
        for_memory, result.reason = _worker_killed(worker, result.reason, outcome, started_at)
        result.status = "oom" if for_memory else result.status
    elif outcome.signal == signal.SIGKILL:
        # the launcher outlived its child launcher (horovodrun) killed so, and said it
        evidence, unknown = memory_evidence(outcome, started_at)
        result.status = "oom" if evidence else result.status
        result.reason = "{}{}".format(result.reason, oom_killer(evidence, unknown))
    elif (error := first_error(text)) and _kind(error) != _kind(result.reason or ""):
        # another worker failed first; what rank 0 (or the launcher) saw followed from it
        result.reason = "{} (the first error in the run's log; the result recorded: " \
                        "{})".format(error, result.reason)


def _without_result(spec: RunSpec, outcome: Outcome, text: str, oom: Optional[str], note: str,
                    stderr_tail: str, started_at: str) -> RunResult:
    """A failure (an oom where memory ran out) saying how a run that wrote no result ended: its
    exit code or signal, srun's word on its tasks, the first error its log shows (else the log's
    last line), and what is known of the kernel's OOM killer's part in a kill."""
    last = [line for line in stderr_tail.splitlines() if line.strip()]
    error = first_error(text)
    said = ": " + (error or last[-1])[-300:] if error or last else ""
    how, signum, said, waited = _srun_said(outcome, text, error, said)
    verdict = ""
    if signum:  # failed, with the signal; out of memory only where the kernel's log says so
        how = "killed by {} (exit code {})".format(_signal_name(signum), outcome.exit_code)
        kernel, why = (None, "") if oom else memory_evidence(outcome, started_at)
        if kernel or (signum == signal.SIGKILL and not oom):  # the OOM killer's signal, and others'
            verdict = oom_killer(kernel, why)
        oom = oom or kernel
    elif not oom and not waited and (worker := killed_worker(text)):  # the launcher outlived it
        oom, said = _worker_killed(worker, None, outcome, started_at)
        said = ": " + said
    reason = "{} and wrote no result{}{}{}".format(how, note, said, verdict)
    return failure(spec, "oom" if oom else "failed", reason, stderr_tail, started_at)


def _srun_said(outcome: Outcome, text: str, error: Optional[str],
               said: str) -> Tuple[str, Optional[int], str, Optional[str]]:
    """(how the run ended, the signal left to explain, what the reason says after it, srun's
    account of the tasks it ended after one exited 0 or None): srun's word where it has one."""
    how, signum = "exited with code {}".format(outcome.exit_code), outcome.signal
    task = next(iter(SRUN_TASK.finditer(text)), None)
    waited = srun_waited(text)
    if waited:  # srun's exit code and its "Killed" say only that it ended the others itself
        said, signum = (": " + error[-300:] if error else "") + waited, None
    elif signum and task and task.group(1) != "Terminated":
        # srun's exit code is its tasks': the first of them to end badly says how the run ended
        # (a SIGTERM: srun --kill-on-bad-exit ending the others); a killed one is said below
        ended = "; srun then ended the other tasks" if signum == signal.SIGTERM else ""
        if task.group(1) != "Killed":
            how += " ({}{})".format(task.group(0), ended)
        signum = None
    return how, signum, said, waited


def srun_waited(text: str) -> Optional[str]:
    """"; process 1 ended first (exit code 0) and srun killed process 0, still running 40 s
    later" where srun ended the tasks still running once one had exited 0 (--wait), else None."""
    waited = SRUN_WAITED.search(text)
    states: Dict[str, List[int]] = {"running": [], "exited": []}
    for line in text[waited.end():].splitlines()[1:] if waited else []:
        state = SRUN_TASK_STATE.match(line)
        if not state:
            break
        for part in state.group(1).split(","):
            first, _, last = part.partition("-")
            states[state.group(2)] += range(int(first), int(last or first) + 1)
    if not (states["exited"] and states["running"]):
        return None
    return ended_first(states["exited"], 0, states["running"], int(waited.group(1)), "srun")


def first_error(text: str) -> Optional[str]:
    """The first exception a worker of the run died of, as its log shows it and as the harness
    words a reason ("InjectedFailure: fail_at=timed on rank 1 (...)"; "rank 1: ..." under
    horovodrun, whose prefix says the rank), or None. The first one logged: the others follow
    from it (a peer gone, a launcher ending the rest). Of a chain ("During handling of the
    above exception ..."), its last exception; a launcher's own exception is never the one."""
    chains: List[List[Optional[str]]] = []  # [rank prefix, exception line], in log order
    state: Dict[str, Tuple[int, str]] = {}  # prefix -> (its chain, frames|after|chained)
    for raw in text.splitlines():
        match = RANK_PREFIX.match(raw)
        key, line = (match.group(1), raw[match.end():]) if match else ("", raw)
        index, mode = state.get(key, (-1, ""))
        if line.startswith("Traceback (most recent call last):"):
            if mode != "chained":
                chains.append([key, None])
                index = len(chains) - 1
            state[key] = (index, "frames")
        elif mode == "frames" and line.strip() and not line[0].isspace():
            chains[index][1] = line.strip()
            state[key] = (index, "after")
        elif mode == "after" and line.strip():
            state[key] = (index, "chained" if line.startswith(CHAINED) else "")
    for key, line in chains:
        named = EXCEPTION_LINE.match(line.split(":", 1)[0]) if line else None
        if named and not LAUNCHER_ERROR.search(line):
            message = line.split(":", 1)[1].strip() if ":" in line else ""
            said = named.group(1) + (": " + message if message else "")
            return "rank {}: {}".format(key, said) if key else said
    return None


def _kind(reason: str) -> str:
    """The exception a reason names: "rank 1: KeyError: 'x'" -> "KeyError"."""
    return re.sub(r"^rank \d+: ", "", reason).split(":", 1)[0].strip()


def killed_worker(text: str) -> Optional[str]:
    """A launcher's report (in the run's stderr) of a worker killed by SIGKILL, or None."""
    found = [("horovodrun: " if m.group("horovodrun") else "") + " ".join(m.group(0).split())
             for m in KILLED_WORKER.finditer(text)]
    return found[-1] if found else None  # torchrun, horovodrun: the first failure is said last


def _worker_killed(worker: str, recorded: Optional[str], outcome: Outcome,
                   started_at: str) -> Tuple[bool, str]:
    """A failed run whose launcher reported `worker` killed by SIGKILL (rank 0 `recorded` a
    reason, or None): (killed for memory, the reason). Memory where the kernel's log or the
    memory cgroup says so; else the reason says what is not known and why: the launcher shows
    only the worker's signal."""
    evidence, unknown = memory_evidence(outcome, started_at)
    # the worker first: reports show a reason's first line, and rank 0's may run over many
    return bool(evidence), "a worker was killed: {}{}{}".format(
        worker, oom_killer(evidence, unknown),
        " (rank 0 recorded: {})".format(recorded) if recorded else "")


def oom_killer(evidence: Optional[str], unknown: str) -> str:
    """What is known of the kernel's OOM killer's part in a SIGKILL, in the one wording every
    reason uses: " (the kernel's OOM killer: EVIDENCE)", else " (whether by the kernel's OOM
    killer is not known: WHY)" (memory_evidence()'s two answers)."""
    if evidence:
        return " (the kernel's OOM killer: {})".format(evidence)
    return " (whether by the kernel's OOM killer is not known: {})".format(unknown)


def memory_evidence(outcome: Outcome, started_at: str) -> Tuple[Optional[str], str]:
    """(what says the kernel killed for memory while the run ran: its log's line, or the count
    of the run's memory cgroup; else None, and why that is not known)."""
    if not outcome.kernel_here:
        return None, "the run's tasks ran on Slurm's nodes, whose kernel logs are not read from here"
    readable, line = _kernel_oom(started_at)
    kills = outcome.cgroup_oom_kills
    if line or kills:
        return line or "its memory cgroup counted {} OOM kill{} while the run ran".format(
            kills, "" if kills == 1 else "s"), ""
    return None, "the kernel's log {} and no memory cgroup counted an OOM kill while the run " \
                 "ran".format("records none since the run started" if readable else "is not readable here")


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "signal {}".format(signum)


def _kernel_oom(started_at: str) -> Tuple[bool, Optional[str]]:
    """(whether this user may read the kernel's log, its last OOM-killer line logged since
    `started_at` (ISO time) or None)."""
    try:
        start = datetime.datetime.fromisoformat(started_at).timestamp() - 1.0
        boot = time.time() - time.monotonic()  # the log counts microseconds since boot
        fd = os.open(KERNEL_LOG, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError, TypeError):
        return False, None
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
    return True, found


def cgroup_oom_kills(proc_cgroup: str = "/proc/self/cgroup", root: str = CGROUP_ROOT) -> Optional[int]:
    """How many processes the OOM killer killed in this process's memory cgroup and below
    (cgroup v2's memory.events, v1's memory.oom_control), or None where neither reads. In a
    cgroup namespace (a container) the path /proc names is not under the mount: its root is."""
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        v1 = "memory" in controllers.split(",")
        if controllers and not v1:
            continue
        name, mount = ("memory.oom_control", Path(root) / controllers) if v1 else \
            ("memory.events", Path(root))
        for folder in (mount / path.lstrip("/"), mount):
            try:
                fields = dict(row.split() for row in (folder / name).read_text().splitlines())
                return int(fields["oom_kill"])
            except (OSError, ValueError, KeyError):
                continue
    return None
