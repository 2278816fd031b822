"""The sweep's progress bar: cell k of n, what runs now and in which phase (building env /
importing / compiling / warm-up / timed ...), the ETA of the whole sweep, the last figure measured.

The phase is what the running cell's backend marked last (backends/phases.py writes each mark to
the file COMPARE_PHASE_FILE names; the local executor puts it in the cell's work folder), or,
before the backend has started, "building env" while the framework's environment is being made.
The ETA is the plan's (compare/eta.py): the estimates of the cells not finished, minus what
the running ones have had so far, at the plan's overlap (its serial time ÷ its wall time).
"""
import time
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from backends.contract import ORDER, PHASE_FILE, RunResult, RunSpec

from .reporting.timeline import clock

WORDS = {"process_started": "importing", "framework_imported": "setting up devices",
         "devices_ready": "building the model", "batch_searched": "building the model",
         "model_built": "compiling (first step)", "first_step_done": "warm-up",
         "warmup_done": "timed", "timed_start": "timed", "timed_end": "teardown"}


def phase_of(path: Path) -> Optional[str]:
    """The last mark a backend wrote to its phase file, in words (None before the first)."""
    try:
        lines = path.read_text().split("\n")
    except OSError:
        return None
    names = {line.split()[0] for line in lines if line.strip()} & set(ORDER)
    if not names:
        return None
    latest = max(names, key=ORDER.index)  # a backend adds its start-up marks only at the end
    return WORDS.get(latest, latest)


def _shortened(reason: str, most: int = 200) -> str:
    """A failed cell's reason in its line: whole up to `most` characters, else its start and its
    end, where a reason says where to look (`see …/jax-cpu-….log`)."""
    return reason if len(reason) <= most else reason[:most // 2] + " … " + reason[-(most // 2 - 3):]


class _Status(ProgressColumn):
    """Phase of the running cells and the sweep's ETA, read at most once a second."""

    def __init__(self, owner: "SweepProgress"):
        super().__init__()
        self.owner, self.shown, self.read_at = owner, Text(""), 0.0

    def render(self, task) -> Text:
        if time.monotonic() - self.read_at >= 1.0:
            self.read_at, self.shown = time.monotonic(), Text(self.owner.status())
        return self.shown


class SweepProgress:
    def __init__(self, console: Console, total: int, work: Optional[Path] = None,
                 estimates: Optional[Dict[str, float]] = None, overlap: float = 1.0,
                 building: Callable[[RunSpec], bool] = lambda spec: False, word: str = "cell"):
        """work: the campaign's work folder (each cell's phase file); estimates: the plan's
        seconds per cell (run id), at `overlap` cells at once on average; building(spec): whether
        the cell's environment is being built; word: what the bar counts (cell, or run where
        cells are repeated: store.counted)."""
        self.console, self.work, self.estimates = console, work, dict(estimates or {})
        self.overlap, self.building = max(overlap, 1.0), building
        self.running: Dict[str, tuple] = {}  # run id -> (spec, started)
        self.status_column = _Status(self)
        self.progress = Progress(TextColumn(word), MofNCompleteColumn(), BarColumn(),
                                 TextColumn("{task.description}"), self.status_column,
                                 TimeElapsedColumn(), console=console, transient=False)
        self.task = self.progress.add_task("", total=total)
        self.last, self.what = "", ""  # the last figure; the cell started last, in words

    def __enter__(self) -> "SweepProgress":
        if self.progress.tasks[0].total:  # nothing to run (a finished campaign resumed): no bar
            self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.progress.tasks[0].total:
            self.progress.__exit__(*exc)

    def start(self, spec: RunSpec) -> None:
        self.running[spec.run_id] = (spec, time.monotonic())
        unit = "GPU" if spec.device == "cuda" else "worker"
        nodes = getattr(spec, "nodes", 1) or 1  # "2 nodes x1 worker": a job of several nodes
        self.what = "{} {} {}x{} {}{} b{}{}".format(
            spec.framework, spec.precision, "{} nodes ".format(nodes) if nodes > 1 else "",
            spec.gpus, unit, "s" if spec.gpus > 1 else "",
            "auto" if spec.batch_auto else spec.batch_size, "" if spec.mode == "default" else " " + spec.mode)
        self.progress.update(self.task, description=self.what + self.last)

    def phase(self, spec: RunSpec) -> str:
        found = phase_of(self.work / spec.run_id / PHASE_FILE) if self.work else None
        if found == "timed" and spec.kind == "accuracy":  # epochs until the target, not timed steps
            return "training to top-1 {:g}".format(spec.target_accuracy)
        if found:
            return found
        if self.building(spec):
            return "building env"
        return "batch search" if spec.batch_auto else "starting"

    def eta(self) -> Optional[Tuple[float, float]]:
        """(seconds the sweep still needs by the plan, how far the running cells are past their
        own estimates), None without a plan."""
        if not self.estimates:
            return None
        now = time.monotonic()
        ran = {r: now - t for r, (_, t) in self.running.items()}
        left = sum(max(e - ran.get(r, 0.0), 0.0) for r, e in self.estimates.items())
        over = max([ran[r] - self.estimates.get(r, 0.0) for r in ran] or [0.0])
        return left / self.overlap, max(over, 0.0)

    def status(self) -> str:
        parts = [self.phase(spec) for spec, _ in self.running.values()]
        eta = self.eta()
        said = "" if eta is None else "ETA ~{}".format(clock(eta[0])) + (
            " (running past its estimate by {})".format(clock(eta[1])) if eta[1] >= 1 else "")
        return " · ".join(filter(None, [", ".join(dict.fromkeys(parts)), said]))

    def done(self, result: RunResult) -> None:
        self.running.pop(result.run_id, None)
        self.estimates.pop(result.run_id, None)
        a = result.accuracy or {}
        to_target = a.get("time_to_train_s") if result.status == "ok" and a.get("reached") else None
        if to_target is not None:  # time to accuracy: its figure is minutes to the target
            epochs = a.get("epochs_to_target")
            self.last = " | last: {:.2f} min to target".format(to_target / 60)
            figure = "{:.2f} min to top-1 {:g}{}".format(to_target / 60, a.get("target"), "" if (
                epochs is None) else " ({} epoch{})".format(epochs, "" if epochs == 1 else "s"))
        else:
            self.last = " | last: " + ("{:.1f} img/s".format(result.images_per_sec)
                                       if result.status == "ok" else result.status)
            figure = "{:.2f} img/s".format(result.images_per_sec) if result.status == "ok" \
                else _shortened((result.reason or "").splitlines()[0]) if result.reason else ""
        self.console.print("{:<36} {:>8}  {}".format(result.run_id, result.status, figure))
        # the figure just measured, and the phases and ETA read anew (the bar's last line, once
        # every cell is done, is not what was read while the last one ran)
        self.status_column.read_at = 0.0
        self.progress.update(self.task, description=self.what + self.last, advance=1)
