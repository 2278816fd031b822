"""Rules both sides apply, written once: whether an error says memory ran out (the harness asks
of an exception, the host of a run's stderr, every rank's), which GPUs CUDA_VISIBLE_DEVICES
names (the host's pool and docker's device requests, the backends' telemetry and JAX's local
devices), and how long a run's other processes may go on once one has exited 0 (compare's
processes launcher, srun in a Slurm job) and how that is recorded, how a rank other than 0 says
its run is unsupported. Standard library only, Python >= 3.8.
"""
import json
import os
import re
from typing import List, Mapping, Optional, Sequence, Tuple

# how frameworks word a failed allocation, device or host: PyTorch's CPU allocator says "can't
# allocate memory"; TF reports a failed host-to-GPU copy of a tensor as "Dst tensor is not
# initialized"; exception type names (OutOfMemoryError, ResourceExhaustedError) count too
OOM_PATTERN = re.compile(
    r"out of memory|OutOfMemory|OOM when allocating|ResourceExhausted|failed to allocate|"
    r"Dst tensor is not initialized|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|"
    r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|MemoryError|can't allocate memory|"
    r"cannot allocate memory|bad_alloc", re.IGNORECASE)
# TF's allocator logs "ran out of memory trying to allocate ... not a failure" when it merely
# retries: such a line says nothing ran out
NOT_A_FAILURE = "not a failure"


def says_out_of_memory(text: str) -> bool:
    """Whether one line (or an error's text) says memory ran out."""
    return bool(OOM_PATTERN.search(text)) and NOT_A_FAILURE not in text


def is_oom(exc: BaseException) -> bool:
    """Whether an exception a framework raised means memory ran out: its type or its text."""
    return isinstance(exc, MemoryError) or says_out_of_memory(
        "{}: {}".format(type(exc).__name__, exc))


def oom_line(text: str) -> Optional[str]:
    """The last line of `text` (a run's stderr, every rank's) that says memory ran out, or None:
    the error itself, after the allocator's warnings."""
    found = None
    for line in text.splitlines():
        if says_out_of_memory(line):
            found = line
    return found.strip()[-300:] if found else None


def visible_gpus(environ: Optional[Mapping[str, str]] = None) -> Optional[List[str]]:
    """The GPUs CUDA_VISIBLE_DEVICES names (indices or UUIDs, in its order); None where it is
    not set (every GPU is visible), [] where it is set to nothing."""
    environ = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" not in environ:
        return None
    return [x.strip() for x in environ["CUDA_VISIBLE_DEVICES"].split(",") if x.strip()]


# once one process of a run has exited 0, the others may be waiting for it in a collective that
# never completes: they get this long to end, then they are killed (backends/launchers/
# processes.py; srun --wait in the Slurm job script, compare/executors/slurm_tools.py). In a run
# that went well every process ends within the harness's CLOSE_WAIT_S of the others (past the last
# barrier, process 0 writes the result, each closes its trainer)
EXIT_GRACE_S = 40.0
# where set, whole seconds in place of EXIT_GRACE_S for both (0: no limit, srun's --wait=0); the
# Slurm job script hands it to srun as it is, so anything srun would refuse is refused here too
EXIT_GRACE_ENV = "COMPARE_EXIT_GRACE_S"


def exit_grace(environ: Optional[Mapping[str, str]] = None, default: float = EXIT_GRACE_S) -> float:
    """The grace after one process exited 0: EXIT_GRACE_ENV's whole seconds, inf for 0 (no
    limit), `default` where it is unset or empty; ValueError naming it for anything else (srun
    says only "Invalid numeric value" of a fraction, a sign, hex or an exponent)."""
    value = (os.environ if environ is None else environ).get(EXIT_GRACE_ENV, "")
    if not value:
        return default
    if not re.fullmatch(r"[0-9]+", value):
        raise ValueError("{}={!r} is not a whole number of seconds (0: no limit)".format(
            EXIT_GRACE_ENV, value))
    return float(value) if int(value) else float("inf")


def ended_first(first: Sequence[int], code: int, killed: Sequence[int], grace: float,
                killer: str) -> str:
    """"; process 1 ended first (exit code 0) and srun killed process 0, still running 40 s
    later": what a run's record adds where its processes were killed because one had ended."""
    def named(ids: Sequence[int]) -> str:
        return "process{} {}".format("es" if len(ids) > 1 else "", ", ".join(map(str, sorted(ids))))
    return "; {} ended first (exit code {}) and {} killed {}, still running {:g} s later".format(
        named(first), code, killer, named(killed), grace)


# a rank other than 0 whose own check ended it `unsupported` writes no result (rank 0 does), and
# exits 0: it says why on the run's stderr, in this line (the reason as JSON, whatever its lines),
# for the host to record (compare/executors/results.py); a launcher may put a prefix before it
UNSUPPORTED_RANK = "compare: rank {} found the run unsupported: {}"
UNSUPPORTED_RANK_LINE = re.compile(r"compare: rank (\d+) found the run unsupported: (\".*\")$",
                                   re.MULTILINE)


def unsupported_line(rank: int, reason: str) -> str:
    """The line a rank other than 0 writes to stderr where its run is unsupported."""
    return UNSUPPORTED_RANK.format(rank, json.dumps(reason)) + "\n"


def unsupported_rank(text: str) -> Optional[Tuple[int, str]]:
    """(rank, reason) of the first unsupported_line() in a run's stderr, or None."""
    for found in UNSUPPORTED_RANK_LINE.finditer(text):
        try:
            return int(found.group(1)), str(json.loads(found.group(2)))
        except ValueError:  # cut short (the head of a scanned tail) or not ours
            continue
    return None


# a failure's recorded reason (the harness's for a cell, the batch search's for a probe)
REASON_TAIL_CHARS = 2000  # of a long error message, the end kept for context after its headline
HEADLINE_CHARS = 1000  # a headline longer than this (a shape list, a path) is cut
# lines of TensorFlow's messages that say where an error happened, not what it was
WHERE_LINE = re.compile(r"Node: |\[\[|\[Op:|Hint: |\d+ root error\(s\) found|\d+ successful operations|"
                        r"\d+ derived errors ignored")
# a line that already names its exception ("RuntimeError: …", as an embedded traceback ends)
EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Failure): ")


def error_reason(exc: BaseException) -> str:
    """The recorded reason of a framework's exception: "Type: the line that says what failed"
    first (reports show a reason's first line), then, where the message is more than that line,
    its last REASON_TAIL_CHARS for context."""
    text = str(exc).strip()
    line = headline(text)
    embedded = "(most recent call last)" in text  # its line may name its own exception
    first = line if embedded and EXCEPTION_LINE.match(line) else "{}: {}".format(type(exc).__name__, line)
    if text == line:
        return first
    return first + "\n" + (text if len(text) <= REASON_TAIL_CHARS else "…" + text[-REASON_TAIL_CHARS:])


def headline(message: str) -> str:
    """The line of an exception's message that says what failed: its first, unless the message
    holds a traceback of its own (TensorFlow's "Detected at node … (most recent call last):",
    a DataLoader worker's, MXNet's engine's): then the first line after its last one's frames
    (indented) that is not a pointer to where (TF's "Node:", "[[{{node …}}]]", "Hint:")."""
    lines = message.splitlines()
    marks = [i for i, line in enumerate(lines) if "(most recent call last)" in line]
    if marks:
        after = lines[marks[-1] + 1:]
        while after and (not after[0].strip() or after[0][0].isspace()):
            after.pop(0)
        found = [ln.strip() for ln in after if ln.strip() and not WHERE_LINE.match(ln.strip())]
        if found:
            return found[0][:HEADLINE_CHARS]
    return next((ln.strip() for ln in lines if ln.strip()), "")[:HEADLINE_CHARS]
