"""Where a run's time goes: named moments of one run, as Unix times, recorded in every result.

Standard library only, Python >= 3.8. The executor puts the moment it launched the backend in
COMPARE_LAUNCHED_AT; `process_started` is when the backend's interpreter first ran our code (this
module is imported at once by every entry point: so interpreter start-up, and any launcher in
between such as torchrun or horovodrun, fall before it); the backend marks the moments only it can
see (framework imported, devices ready), and the harness marks the rest. The host adds
`cell_start` and `cell_end` around the whole cell, so that everything between is accounted for:

    cell_start -> launched -> process_started -> framework_imported -> devices_ready
    [-> batch_searched] -> model_built -> first_step_done -> warmup_done -> timed_start
    -> timed_end -> cell_end

`first_step_done` includes what the first step costs beyond a normal one (compilation, cuDNN or
XLA autotuning, lazy allocations). `batch_searched` ends a batch search run in the cell's own
process (backends/batchprobe.py: its probes' own marks are forgotten). Under a multi-process
launcher the result holds rank 0's marks.
"""
import os
import time
from typing import Dict, Optional

_IMPORTED = time.time()

ORDER = ("cell_start", "launched", "process_started", "framework_imported", "devices_ready",
         "batch_searched", "model_built", "first_step_done", "warmup_done", "timed_start",
         "timed_end", "cell_end")
OPTIONAL = ("batch_searched",)  # only a cell that searches its batch in its own process has it
LAUNCHED_ENV = "COMPARE_LAUNCHED_AT"
FILE_ENV = "COMPARE_PHASE_FILE"  # where set: each mark is also appended there, as it happens
PHASE_FILE = "phase"  # its name in a cell's work folder (the local executor's choice)

_marks = {}  # type: Dict[str, float]


def mark(name: str, when: Optional[float] = None) -> None:
    """Record that `name` happened now (the first mark of a name wins)."""
    if name not in ORDER:
        raise ValueError("unknown phase {!r}; known: {}".format(name, ", ".join(ORDER)))
    if name not in _marks:
        _marks[name] = time.time() if when is None else when
        _tell(name, _marks[name])


def _tell(name: str, when: float) -> None:
    """The mark for whoever watches the run live (the host's progress bar), never an error."""
    path = os.environ.get(FILE_ENV)
    if path:
        try:
            with open(path, "a") as f:
                f.write("{} {:.3f}\n".format(name, when))
        except OSError:
            pass


def forget(names) -> None:
    """Drop these marks (a probe's, so that the cell's own steps mark them again)."""
    for name in names:
        _marks.pop(name, None)


def record() -> Dict[str, float]:
    """The marks of this process so far, with the launch and process start added, in ORDER."""
    launched = os.environ.get(LAUNCHED_ENV)
    if launched:
        try:
            mark("launched", float(launched))
        except ValueError:
            pass
    mark("process_started", _IMPORTED)
    return {name: _marks[name] for name in ORDER if name in _marks}


def durations(marks: Dict[str, float]) -> Dict[str, float]:
    """Seconds between consecutive marks that are present: {'launched->process_started': s, ...}."""
    present = [(n, marks[n]) for n in ORDER if marks.get(n) is not None]
    return {"{}->{}".format(a, b): tb - ta for (a, ta), (b, tb) in zip(present, present[1:])}
