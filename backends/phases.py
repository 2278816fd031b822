"""Records the moments of one run that backends/contract/phases.py names (its docstring has
the order and what each means), as Unix times, for the result's `phases`.

Standard library only, Python >= 3.8. `process_started` is when the backend's interpreter first
ran our code: this module is imported at once by every entry point.
"""
import os
import time
from typing import Dict, Optional

_IMPORTED = time.time()  # before the names below are imported: as early as this module runs

from .contract.phases import (  # noqa: E402, F401  (the names, one definition)
    FILE_ENV,
    LAUNCHED_ENV,
    OPTIONAL,
    ORDER,
    PHASE_FILE,
)

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
