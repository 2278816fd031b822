"""Where a sweep's time goes: per-cell phase durations, time to first step, and the duty cycle.

From each result's `phases` (backends/phases.py: Unix times of named moments). A cell's time to
first step runs from the moment its backend was launched to the end of its first training step,
so it holds the interpreter start, the framework import, device and communicator set-up, building
the model, and what the first step costs beyond a normal one (compilation, autotuning). The duty
cycle is the timed work over the wall time of all the sweep's cells: the share of the sweep spent
measuring.
"""
import statistics
from typing import Dict, List, Optional, Sequence

from backends.phases import ORDER
from backends.protocol import RunResult

from .. import frameworks
from .tables import Section, Table, Text

# (column, from, to): the spans a reader wants, in order; each covers the moments between
SPANS = (("launch", "cell_start", "launched"),  # env resolution, container or job start
         ("interpreter", "launched", "process_started"),
         ("import", "process_started", "framework_imported"),
         ("devices", "framework_imported", "devices_ready"),
         ("model", "devices_ready", "model_built"),
         ("first step", "model_built", "first_step_done"),
         ("warm-up", "first_step_done", "warmup_done"),
         ("timed", "timed_start", "timed_end"),
         ("teardown", "timed_end", "cell_end"))
KEY = ("framework", "precision", "batch_size", "image_size", "nodes", "gpus")


def span(marks: Dict[str, float], start: str, end: str) -> Optional[float]:
    if marks.get(start) is None or marks.get(end) is None:
        return None
    return marks[end] - marks[start]


def time_to_first_step(marks: Dict[str, float]) -> Optional[float]:
    return span(marks, "launched", "first_step_done")


def ordered(marks: Dict[str, float]) -> bool:
    """The marks present follow ORDER in time."""
    times = [marks[n] for n in ORDER if n in marks]
    return all(a <= b for a, b in zip(times, times[1:]))


def _median(xs: List[float]) -> Optional[float]:
    return float(statistics.median(xs)) if xs else None


def rows(results: Sequence[RunResult]) -> List[Dict]:
    """One row per cell (median over its ok repeats): the spans in seconds, time to first step."""
    groups: Dict[tuple, List[RunResult]] = {}
    for r in results:
        if r.status == "ok" and r.phases:
            key = tuple(r.spec.get(k, 1 if k == "nodes" else None) for k in KEY)
            groups.setdefault(key, []).append(r)
    out = []
    for key, rs in groups.items():
        row = dict(zip(KEY, key))
        for name, start, end in SPANS:
            row[name] = _median([v for v in (span(r.phases, start, end) for r in rs) if v is not None])
        row["to first step"] = _median([v for v in map(time_to_first_step, (r.phases for r in rs))
                                        if v is not None])
        row["cell"] = _median([v for v in (span(r.phases, "cell_start", "cell_end") for r in rs)
                               if v is not None])
        out.append(row)
    return out


def duty_cycle(results: Sequence[RunResult]) -> Optional[Dict[str, float]]:
    """{'timed_s', 'wall_s', 'duty_cycle'} over every cell with host marks (any status); None
    when no cell has them (results from before phases were recorded)."""
    timed = wall = 0.0
    for r in results:
        cell = span(r.phases or {}, "cell_start", "cell_end")
        if cell is None:
            continue
        wall += cell
        timed += span(r.phases, "timed_start", "timed_end") or 0.0
    if wall <= 0:
        return None
    return {"timed_s": timed, "wall_s": wall, "duty_cycle": timed / wall}


def sections(results: Sequence[RunResult]) -> List[Section]:
    """The report's sections: a table of spans per cell, then the duty cycle line."""
    table, duty = rows(results), duty_cycle(results)
    out: List[Section] = []
    if table:
        columns = [s[0] for s in SPANS] + ["to first step", "cell"]
        out.append(Table("Where the time goes (seconds per cell, median over repeats)",
                         ["framework", "precision", "batch", "N"] + columns,
                         [[frameworks.display(r["framework"]), r["precision"], str(r["batch_size"]),
                           _n(r)] + ["{:.1f}".format(r[c]) if r[c] is not None else "n/a"
                                     for c in columns] for r in table],
                         name="phases"))
    if duty is not None:
        out.append(Text("", ["Duty cycle: {:.1f} s timed of {:.1f} s in the cells = {:.1%} of the "
                             "sweep spent measuring.".format(duty["timed_s"], duty["wall_s"],
                                                             duty["duty_cycle"])]))
    return out


def _n(row: Dict) -> str:
    return "{} × {}".format(row["nodes"], row["gpus"]) if (row["nodes"] or 1) > 1 else str(row["gpus"])
