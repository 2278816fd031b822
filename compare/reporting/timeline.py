"""Where a sweep's time goes: per-cell phase durations, time to first step, and the duty cycle.

From each result's `phases` (backends/phases.py: Unix times of named moments). A cell's time to
first step runs from the moment its backend was launched to the end of its first training step,
so it holds the interpreter start, the framework import, device and communicator set-up, building
the model, and what the first step costs beyond a normal one (compilation, autotuning). The duty
cycle is the timed work over the wall time of all the sweep's cells: the share of the sweep spent
measuring.
"""
from typing import Dict, List, Optional, Sequence, Tuple

from backends.contract import DEFAULT_MODEL, RunResult, data_mode

from .. import frameworks
from ..store import counted
from . import tables
from .metrics import median
from .tables import Section, Table, Text

# (column, from, to): the spans a reader wants, in order; each covers the moments between
SPANS = (("launch", "cell_start", "launched"),  # env resolution, container or job start
         ("interpreter", "launched", "process_started"),
         ("import", "process_started", "framework_imported"),
         ("devices", "framework_imported", "devices_ready"),
         ("batch search", "devices_ready", "batch_searched"),  # in the cell's process, if it did
         ("model", ("batch_searched", "devices_ready"), "model_built"),
         ("first step", "model_built", "first_step_done"),
         ("warm-up", "first_step_done", "warmup_done"),
         ("timed", "timed_start", "timed_end"),
         ("teardown", "timed_end", "cell_end"))
KEY = ("framework", "model", "precision", "batch_size", "image_size", "nodes", "gpus", "mode",
       "data_mode")
DEFAULTS = {"nodes": 1, "model": DEFAULT_MODEL, "mode": "default"}  # of a spec from before the field


def _key(spec: Dict) -> tuple:
    """A cell's KEY in its spec (synthetic, real or data-only, and a searched batch `auto`
    whichever batch it chose: as the comparator says it)."""
    mode = data_mode(spec)
    return tuple(mode if k == "data_mode" else "auto" if k == "batch_size" and spec.get("batch_auto")
                 else spec.get(k, DEFAULTS.get(k)) for k in KEY)


def span(marks: Dict[str, float], start, end: str) -> Optional[float]:
    """Seconds from `start` to `end` (a tuple of starts: the first that was marked)."""
    if isinstance(start, tuple):
        start = next((n for n in start if marks.get(n) is not None), start[-1])
    return None if marks.get(start) is None or marks.get(end) is None else marks[end] - marks[start]


def env_build_s(r: RunResult) -> float:
    """Seconds of the cell's launch that built its environment once (envs.py), not cell time."""
    return float((r.environment or {}).get("env_build_s") or 0.0)


def _span(r: RunResult, name: str, start, end: str) -> Optional[float]:
    """A span of the table: the launch and the whole cell without the environment its launch
    built once (set-up, said in a line of its own)."""
    value = span(r.phases, start, end)
    if value is None or name not in ("launch", "cell"):
        return value
    # the build is timed apart from the launch marks, a few ms apart: no "-0.0" s of launch
    return max(0.0, value - env_build_s(r))


def time_to_first_step(marks: Dict[str, float]) -> Optional[float]:
    return span(marks, "launched", "first_step_done")


def rows(results: Sequence[RunResult]) -> List[Dict]:
    """One row per cell (median over its ok repeats): the spans in seconds, time to first step."""
    groups: Dict[tuple, List[RunResult]] = {}
    for r in results:
        if r.status == "ok" and r.phases:
            groups.setdefault(_key(r.spec), []).append(r)
    out = []
    for key, rs in groups.items():
        # the network as "network": "model" is the span of building it
        row = {"network" if k == "model" else k: v for k, v in zip(KEY, key)}
        for name, start, end in SPANS:
            row[name] = median(_span(r, name, start, end) for r in rs)
        row["to first step"] = median(time_to_first_step(r.phases) for r in rs)
        row["cell"] = median(_span(r, "cell", "cell_start", "cell_end") for r in rs)
        out.append(row)
    return out


def setup_lines(results: Sequence[RunResult]) -> List[str]:
    """The environments built during the sweep, once each: set-up, not the cells' time."""
    built = [(r.spec.get("framework"), env_build_s(r), r.run_id) for r in results if env_build_s(r)]
    if not built:
        return []
    return ["Set-up: environments built once during the sweep, each inside the launch of its first "
            "cell and left out of that cell's launch and cell times above: {}.".format("; ".join(
                "{} {:.1f} s (in {})".format(frameworks.display(fw), s, run) for fw, s, run in built))]


def clock(seconds: float) -> str:
    """72.4 -> '1:12'; 3725 -> '1:02:05'."""
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    return "{}:{:02d}:{:02d}".format(h, *divmod(rest, 60)) if h else "{}:{:02d}".format(*divmod(rest, 60))


def _union(spans: List[Tuple[float, float]]) -> float:
    """Seconds covered by at least one of the (start, end) spans."""
    total, reach = 0.0, None
    for start, end in sorted(spans):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


def study(results: Sequence[RunResult], machine_gpus: Optional[int] = None) -> Optional[Dict]:
    """The sweep as a whole, over every cell with host marks (any status): its wall time (while at
    least one cell ran: gaps between sessions do not count), the serial estimate (its cells one
    after the other), the timed work in them, the one-time environment builds inside them
    (setup_s), the most cells at once, and on GPUs the GPU-hours: held (the machine's GPUs x
    wall), used by the cells, timed; duty cycle = timed / held, and what it would be serially.
    None without host marks (results from before phases were recorded)."""
    cells = [(r.phases["cell_start"], r.phases["cell_end"], r) for r in results
             if span(r.phases or {}, "cell_start", "cell_end") is not None]
    if not cells:
        return None
    wall = _union([(a, b) for a, b, _ in cells])
    out = {"run_ids": [r.run_id for _, _, r in cells],  # counted as the plan counts them
           "wall_s": wall, "serial_s": sum(b - a for a, b, _ in cells),
           "at_once": max(sum(1 for a2, b2, _ in cells if a2 <= a < b2) for a, _, _ in cells),
           "timed_s": sum(span(r.phases, "timed_start", "timed_end") or 0.0 for _, _, r in cells),
           "setup_s": sum(env_build_s(r) for _, _, r in cells)}
    if machine_gpus and all(r.spec.get("device") == "cuda" for _, _, r in cells):
        def gpu_s(r, seconds):
            return (r.spec.get("gpus") or 1) * (r.spec.get("nodes") or 1) * seconds
        timed = sum(gpu_s(r, span(r.phases, "timed_start", "timed_end") or 0.0) for _, _, r in cells)
        out.update(gpus=machine_gpus, held_gpu_h=machine_gpus * wall / 3600,
                   used_gpu_h=sum(gpu_s(r, b - a) for a, b, r in cells) / 3600,
                   timed_gpu_h=timed / 3600, duty=timed / (machine_gpus * wall) if wall else None,
                   duty_serial=timed / (machine_gpus * out["serial_s"]) if out["serial_s"] else None)
    return out


def study_lines(s: Dict) -> List[str]:
    """The study's wall time, GPU-hours and duty cycle beside the serial estimate, in words."""
    # "4 runs of 2 cells" where cells were repeated: the tables above count 2 cells, not 4
    what, word = counted(s["run_ids"])
    if s["at_once"] <= 1:  # nothing side by side: no "1.00× by running up to 1 at once" (as the plan)
        lines = ["Study: {} wall for {}, one {} at a time.".format(clock(s["wall_s"]), what, word)]
    else:
        lines = ["Study: {} wall for {} ({} one after the other, the serial estimate; {:.2f}× "
                 "by running up to {} at once).".format(
                     clock(s["wall_s"]), what,
                     clock(s["serial_s"]), s["serial_s"] / s["wall_s"] if s["wall_s"] else 1.0,
                     s["at_once"])]
    if "gpus" in s:
        lines.append("GPU time: {} GPU{} × {} = {:.3f} GPU-hours held, {:.3f} used by cells, "
                     "{:.3f} timed: a duty cycle of {:.1%} (serially {:.3f} GPU-hours held, "
                     "{:.1%}).".format(
                         s["gpus"], "" if s["gpus"] == 1 else "s", clock(s["wall_s"]),
                         s["held_gpu_h"], s["used_gpu_h"], s["timed_gpu_h"], s["duty"] or 0.0,
                         s["gpus"] * s["serial_s"] / 3600, s["duty_serial"] or 0.0))
    return lines


def sections(results: Sequence[RunResult], machine: Optional[Dict] = None,
             trained: Sequence[RunResult] = ()) -> List[Section]:
    """The report's sections: a table of spans per cell, then the duty cycle and the study's
    wall time, GPU-hours and duty cycle beside the serial estimate. `trained`, the campaign's
    time-to-accuracy runs, count in the study's lines (they took its time; their time to train
    is what they measured), not in the table of throughput cells' spans."""
    table = rows(results)
    out: List[Section] = []
    if table:
        columns = [s[0] for s in SPANS if any(r[s[0]] is not None for r in table)] + \
            ["to first step", "cell"]
        named = [dict(r, model=r["network"]) for r in table]  # its "model": the span of building it
        # a model, image or data column where the campaign (every run, any status) has several;
        # N as nodes×GPUs per node: as every table of the report names a cell
        fields = tables.shown([dict(zip(KEY, _key(r.spec))) for r in results],
                              ["framework", "model", "mode", "precision", "batch_size",
                               "image_size", "data_mode", "N"], tables.OPTIONAL_IMAGE)
        out.append(Table("Where the time goes (seconds per cell, median over repeats)",
                         tables.heading(fields) + columns,
                         [tables.label(cell, fields) +
                          ["{:.1f}".format(r[c]) if r[c] is not None else "n/a" for c in columns]
                          for cell, r in zip(named, table)],
                         name="phases"))
    whole = study(list(results) + list(trained), len((machine or {}).get("gpus") or []))
    if whole is not None and whole["serial_s"] > 0:
        timed, cells, setup = whole["timed_s"], whole["serial_s"], whole["setup_s"]
        line = "Duty cycle: {:.1f} s timed of {:.1f} s in the cells = {:.1%} of the sweep spent " \
            "measuring".format(timed, cells, timed / cells)
        if 0 < setup < cells:
            line += " ({:.1%} of the {:.1f} s left without the environment builds)".format(
                timed / (cells - setup), cells - setup)
        out.append(Text("", setup_lines(results) + [line + "."] + study_lines(whole)))
    return out

