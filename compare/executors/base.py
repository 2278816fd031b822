"""What every executor shares: reading the backend's result back, or recording why there is none."""
import datetime
import os
import re
from pathlib import Path
from typing import Dict, Optional

from backends.protocol import RunResult, RunSpec, SchemaError, read_result

TAIL_CHARS = 4000
OOM_SCAN_CHARS = 1_000_000  # how much of a run's stderr (all ranks) is searched for an OOM
# what frameworks print when device or host memory runs out, on whichever rank it happens;
# TF reports a failed host-to-GPU copy of a tensor as "Dst tensor is not initialized"
OOM_PATTERN = re.compile(
    r"out of memory|OOM when allocating|ResourceExhausted|Dst tensor is not initialized|"
    r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED|"
    r"CUDNN_STATUS_ALLOC_FAILED|MemoryError", re.IGNORECASE)


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def run_env(spec: RunSpec, code_dir: Path, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment a backend process runs with: this one's, plus the run's own variables."""
    env = dict(os.environ)
    env.update(own_env(spec, code_dir))
    if spec.precision != "fp32":
        env.pop("NVIDIA_TF32_OVERRIDE", None)
    env.update(extra or {})
    return env


def own_env(spec: RunSpec, code_dir) -> Dict[str, str]:
    """The variables a run sets whatever runs it: the staged backends on PYTHONPATH, unbuffered
    output, the seed, and true FP32 (no library may pick TF32 behind our back) for fp32."""
    env = {"PYTHONPATH": str(code_dir), "PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": str(spec.seed)}
    if spec.precision == "fp32":
        env["NVIDIA_TF32_OVERRIDE"] = "0"
    return env


def tail(path: Path, chars: int = TAIL_CHARS) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return text[-chars:]


def failure(spec: RunSpec, status: str, reason: str, stderr_tail: Optional[str] = None,
            started_at: Optional[str] = None) -> RunResult:
    """A result for a run that produced none of its own (crash, timeout, missing environment)."""
    return RunResult(run_id=spec.run_id, status=status, spec=spec.to_dict(), reason=reason,
                     stderr_tail=stderr_tail or None, started_at=started_at, finished_at=now())


def oom_line(text: str) -> Optional[str]:
    """The last line of `text` (a run's stderr, every rank's) that says memory ran out, or None:
    the error itself, after the allocator's warnings.

    TF's allocator also logs "ran out of memory trying to allocate ... not a failure" when it
    merely retries; such lines do not count.
    """
    found = None
    for line in text.splitlines():
        if OOM_PATTERN.search(line) and "not a failure" not in line:
            found = line
    return found.strip()[-300:] if found else None


def collect(spec: RunSpec, result_file: Path, returncode: Optional[int], stderr_file: Path,
            started_at: str, timed_out: bool, timeout: float) -> RunResult:
    """Turn a finished process into a result: its own file if it wrote one, else a failure."""
    stderr_tail = tail(stderr_file)
    # only rank 0 writes the result: another rank's out-of-memory shows in the shared stderr
    oom = oom_line(tail(stderr_file, OOM_SCAN_CHARS))
    if timed_out:
        reason = "killed after the {:.0f} s timeout".format(timeout)
        if oom:
            return failure(spec, "oom", reason + "; a worker ran out of memory first: " + oom,
                           stderr_tail, started_at)
        return failure(spec, "timeout", reason, stderr_tail, started_at)
    if result_file.exists():
        try:
            result = read_result(str(result_file))
        except SchemaError as exc:
            return failure(spec, "failed", "unreadable result file: {}".format(exc),
                           stderr_tail, started_at)
        if result.status == "failed" and oom:
            result.status = "oom"
            result.reason = "a worker ran out of memory: {} (rank 0 recorded: {})".format(
                oom, result.reason)
        if result.status != "ok":
            result.stderr_tail = stderr_tail or None
        return result
    last = [line for line in stderr_tail.splitlines() if line.strip()]
    if returncode is not None and returncode in (-9, 137) and not last:
        oom = "killed"  # the kernel's OOM killer leaves no message of its own
    reason = "exited with code {} and wrote no result{}".format(
        returncode, (": " + last[-1][-300:]) if last else "")
    return failure(spec, "oom" if oom else "failed", reason, stderr_tail, started_at)
