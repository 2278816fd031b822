"""The batch search of `--batch-size auto` (and of the tuned mode): its rule, and the search run
inside the cell's own process (one import, one device set-up, one compile cache; a fresh model
per batch). Standard library only, Python >= 3.8: the host's separate-process search
(compare/batchsearch.py) follows the same rule.

The rule. A probe is the cell at one batch, shortened to PROBE. The search starts at the cell's
batch (the default batch of its network, within MIN-MAX) and doubles while the larger batch is
faster beyond the probes' noise; it stops at the first gain within the noise (NOISE_Z × the two
probes' standard errors added in quadrature, and at least MIN_GAIN), at MAX, or when its time
budget is spent. A probe out of memory ends only that probe: after an out-of-memory at 2b with b
fitting, one more probe lies between (1.5b, down to a multiple of 8); when the first probe does
not fit, the batch halves down to MIN until one does. The cell runs at the fastest probe's batch.

In one process a first probe at MAX (a search started at a measured batch, compare/defaults.py)
runs FIT's steps: with no larger batch to compare it with, it only shows that the batch fits, and
the cell's own steps time it. The trainer of the last probe is kept when it is the one chosen (no
rebuild); otherwise it is released (the backend's `train.release()` where it has one, e.g.
PyTorch's compile graphs and cached device memory) and the chosen batch is built afresh.
"""
import gc
import math
import sys
import time
from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import phases
from .contract.rules import error_reason
from .protocol import RunSpec, Unsupported

PROBE = {"warmup_steps": 5, "steps": 10, "windows": 2}  # at most; a cell asking fewer keeps its own
# a search's first probe at its maximum has no larger batch to be compared with: it shows that the
# batch fits (or goes down on out-of-memory), and the cell's own steps time it
FIT = {"warmup_steps": 1, "steps": 2, "windows": 2}
NOISE_Z = 2.0  # ~95 % of a normal: a gain inside this many standard errors is noise
MIN_GAIN = 0.01  # a larger batch that buys under 1 % is not worth its memory
PROBE_PHASES = ("model_built", "first_step_done", "warmup_done", "timed_start", "timed_end")

Probe = Dict[str, Any]  # batch_size, status, images_per_sec, uncertainty, reason, seconds


class BatchSearchFailed(RuntimeError):
    """No batch ran: the cell's result, in the words of the search and of its first probe."""


def probe_spec(cell: RunSpec, batch: int, steps: Dict[str, int] = PROBE) -> RunSpec:
    """The short run of `cell` at `batch`: same everything, fewer steps (`steps`: PROBE or FIT),
    named as a probe."""
    return replace(cell, batch_size=batch, batch_auto=False, probe=True, repeat=0, search=None,
                   **{k: min(getattr(cell, k), v) for k, v in steps.items()})


def _between(fits: int, fails: int) -> Optional[int]:
    """One batch between one that ran and one out of memory: 1.5x, down to a multiple of 8."""
    mid = (fits + fails) // 2
    mid = mid - mid % 8 if mid >= 16 else mid
    return mid if fits < mid < fails else None


def _rse(p: Probe) -> float:
    """A probe's relative standard error (0 where its windows give none)."""
    u, ips = p.get("uncertainty"), p.get("images_per_sec")
    return u / ips if u and ips else 0.0


def gain(prev: Probe, new: Probe) -> Tuple[float, float]:
    """(new ÷ prev − 1, the noise that gain must exceed)."""
    noise = NOISE_Z * math.sqrt(_rse(prev) ** 2 + _rse(new) ** 2)
    return new["images_per_sec"] / prev["images_per_sec"] - 1, max(noise, MIN_GAIN)


class Outcome:
    """The probes of one search, in the order they ran, and why it stopped."""

    def __init__(self, start: int, bounds: Tuple[int, int]):
        self.start, self.bounds = start, (int(bounds[0]), int(bounds[1]))
        self.probes: List[Probe] = []
        self.stopped = ""
        self.seconds = 0.0

    @property
    def batch(self) -> Optional[int]:
        """The batch whose probe was fastest (None: no batch ran); bounds of one batch: it."""
        if self.bounds[0] == self.bounds[1]:
            return self.bounds[0]
        ok = [p for p in self.probes if p["status"] == "ok"]
        return max(ok, key=lambda p: p["images_per_sec"])["batch_size"] if ok else None

    def record(self, where: str) -> Dict[str, Any]:
        """settings.batch_search of the measured cell."""
        return {"bounds": list(self.bounds), "start": self.start, "chosen": self.batch,
                "stopped": self.stopped, "where": where, "seconds": round(self.seconds, 1),
                "probes": [dict(p) for p in self.probes]}

    def failure_reason(self) -> str:
        """Why a search that found no batch ends the cell: the first probe's words."""
        first = self.probes[0]
        return "batch search from {}: the probe at batch {} ended {}: {}".format(
            self.start, first["batch_size"], first["status"], first.get("reason") or "no reason")


def search(start: int, bounds: Tuple[int, int], run: Callable[[int], Probe], budget_s: float,
           clock: Callable[[], float] = time.monotonic) -> Outcome:
    """Probe from `start` (within `bounds`) by the rule above; `run(batch)` runs one probe."""
    low, high = int(bounds[0]), int(bounds[1])
    start = min(max(int(start), low), high)
    out, began = Outcome(start, (low, high)), clock()
    if low == high:  # nothing to choose between: the cell itself says whether it fits
        out.stopped = "one candidate, {}: not probed".format(low)
        return out
    spent = lambda: clock() - began >= budget_s  # noqa: E731
    batch, last, oom_at = start, None, None
    while True:
        probe = run(batch)
        out.probes.append(probe)
        if probe["status"] != "ok":
            oom_at = batch if probe["status"] == "oom" else None
            if last is None and oom_at and batch > low and not spent():
                batch = max(low, batch // 2)  # nothing fits yet: smaller
                continue
            out.stopped = "batch {} {}".format(batch, probe["status"])
            break
        if oom_at:  # came down from an out-of-memory to a batch that fits
            out.stopped = "batch {} oom; {} fits".format(oom_at, batch)
            break
        if last is not None:
            up, noise = gain(last, probe)
            if up <= noise:  # slower beyond the noise, or no faster than the noise can tell
                out.stopped = "batch {} gains {:+.1%} over {}: {} the probes' noise " \
                    "(±{:.1%})".format(batch, up, last["batch_size"],
                                       "slower beyond" if up < -noise else "not beyond", noise)
                break
        if batch >= high:
            out.stopped = "reached the maximum, {}".format(high)
            break
        if spent():
            out.stopped = "time budget of {:g} s spent".format(budget_s)
            break
        last, batch = probe, min(2 * batch, high)
    fitted = [p["batch_size"] for p in out.probes if p["status"] == "ok"
              and oom_at and p["batch_size"] < oom_at]
    mid = _between(max(fitted), oom_at) if fitted else None
    if mid is not None and not spent():
        out.probes.append(run(mid))
        out.stopped += "; then batch {} {}".format(mid, out.probes[-1]["status"])
    out.seconds = clock() - began
    return out


LAST: Dict[str, Any] = {}  # this process's search record, for the result's settings


def settings() -> Dict[str, Any]:
    """{"batch_search": record} after an in-process search in this process, else {}."""
    return {"batch_search": dict(LAST)} if LAST else {}


def in_process(spec: RunSpec, setup: Callable[[RunSpec], Any], measure: Callable,
               classify: Callable[[BaseException], str]):
    """Search spec.search's bounds from spec.batch_size in this process; return the trainer of
    the chosen batch and set spec.batch_size to it. `setup(spec)` builds a trainer (the runtime
    once per process), `measure(trainer, spec)` times it, `classify(exc)` says oom or failed.
    Raises BatchSearchFailed when no batch runs, or Unsupported as the cell's own answer."""
    live: List[Any] = []  # [(batch, trainer)] of the last probe, while it may be the one chosen
    plan = spec.search or {}
    bounds = tuple(plan.get("bounds") or (spec.batch_size,) * 2)
    ran: List[int] = []

    def run(batch: int) -> Probe:
        _release(live, spec)
        fit = not ran and batch == spec.batch_size == bounds[1]  # the first probe, at the maximum
        ran.append(batch)
        pspec, began = probe_spec(spec, batch, FIT if fit else PROBE), time.monotonic()
        trainer, failure, fields = None, None, {}
        try:
            trainer = setup(pspec)
            fields = measure(trainer, pspec)
        except Unsupported:
            raise
        except Exception as exc:  # the framework's own error: this probe's result only
            failure = (classify(exc), error_reason(exc))
            _forget_frames(exc)
        probe = {"batch_size": batch, "status": "ok", "reason": None, "steps": pspec.steps,
                 "warmup_steps": pspec.warmup_steps,
                 "images_per_sec": fields.get("images_per_sec"),
                 "uncertainty": fields.get("uncertainty"),
                 "window_images_per_sec": fields.get("window_images_per_sec", [])}
        if failure is not None:
            probe.update(status=failure[0], reason=failure[1])
            sys.stderr.write("batch search: the probe at batch {} ended {}: {}\n".format(
                batch, failure[0], failure[1].splitlines()[0][:300]))
        live.append((batch, trainer))
        trainer = None
        if failure is not None:
            _release(live, spec)  # its memory back before the next probe
        probe["seconds"] = round(time.monotonic() - began, 1)
        return probe
    out = search(spec.batch_size, bounds, run, float(plan.get("budget_s", 900.0)))
    chosen = out.batch
    LAST.clear()
    LAST.update(out.record("in the cell's process"))
    phases.forget(PROBE_PHASES)
    phases.mark("batch_searched")
    if chosen is None:
        _release(live, spec)
        raise BatchSearchFailed(out.failure_reason())
    for name, value in at_batch(spec, chosen, plan.get("images")).items():
        setattr(spec, name, value)
    if live and live[0][0] == chosen and out.probes[-1]["status"] == "ok":
        LAST["reused"] = True  # the last probe's trainer goes on: built and compiled once
        return live.pop()[1]
    _release(live, spec)
    return setup(spec)


def steps_covering(cell: RunSpec, batch: int, images: Optional[int]) -> int:
    """The timed steps of `cell` at the `batch` its search chose: its own, or where the search
    ended below the start and the plan set the cell's steps for the start's batch (`images`: the
    images they time; compare/defaults.py), enough to time as many, rounded up to its windows."""
    if not images or batch >= cell.batch_size:
        return cell.steps
    n = -(-int(images) // batch)
    return max(cell.steps, cell.windows * -(-n // cell.windows))


def at_batch(cell: RunSpec, batch: int, images: Optional[int]) -> Dict[str, int]:
    """The fields of `cell` at the `batch` its search chose: the batch and, where it times more
    steps than planned (steps_covering), those steps and the planned ones, which its hash keeps."""
    steps = steps_covering(cell, batch, images)
    return dict(batch_size=batch, **({"steps": steps, "planned_steps": cell.steps}
                                     if steps != cell.steps else {}))


def _forget_frames(exc: Optional[BaseException]) -> None:
    """Drop the tracebacks of an exception and of those it was raised from: their frames hold
    the failed probe's tensors, which the next probe needs the memory of."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = None
        exc = exc.__cause__ or exc.__context__


def _release(live: List[Any], spec: RunSpec) -> None:
    """Let go of the kept trainer: its input pipeline closed, its memory given back."""
    while live:
        _, trainer = live.pop()
        feed = getattr(trainer, "feed", None)
        if feed is not None:
            feed.close()
        del trainer
    gc.collect()
    train = sys.modules.get("backends.{}.train".format(spec.backend))
    release = getattr(train, "release", None)
    if release is not None:
        release()
