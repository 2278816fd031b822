"""The batch search behind `--batch-size auto` and the tuned mode: the fastest per-GPU batch up to
the largest that fits, per framework x mode x precision x GPU count (one search per cell).

Each candidate batch is a probe: a short run of the cell at that batch (PROBE caps its steps),
recorded in the campaign's probes/ folder and shown in the report as a probe, never as a cell.
The batch doubles from the search's MIN until a probe fails (out of memory, or anything else),
MAX is reached, or the time budget is spent (MIN = MAX: no probe, the cell runs at it); after an
out-of-memory at 2b, one more probe lies between (1.5b, down to a multiple of 8). The cell then
runs, as any cell, at the batch whose probe was fastest; its result records the search
(settings.batch_search).
"""
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Tuple

from backends.protocol import RunResult, RunSpec

PROBE = {"warmup_steps": 5, "steps": 10, "windows": 2}  # at most; a cell asking fewer keeps its own
BUDGET_S = {"cuda": 900.0, "cpu": 300.0}  # no new probe starts after this long (one search)


@dataclass
class Outcome:
    bounds: Tuple[int, int]
    probes: List[RunResult] = field(default_factory=list)
    stopped: str = ""  # why the search ended

    @property
    def ok(self) -> List[RunResult]:
        return [p for p in self.probes if p.status == "ok"]

    @property
    def batch(self) -> Optional[int]:
        """The batch whose probe was fastest (None: no batch ran); bounds of one batch: it."""
        if self.bounds[0] == self.bounds[1]:
            return self.bounds[0]
        ok = self.ok
        return max(ok, key=lambda p: p.images_per_sec).spec["batch_size"] if ok else None

    def record(self) -> Dict[str, Any]:
        """settings.batch_search of the measured cell."""
        return {"bounds": list(self.bounds), "chosen": self.batch, "stopped": self.stopped,
                "probes": [{"batch_size": p.spec["batch_size"], "status": p.status,
                            "images_per_sec": p.images_per_sec} for p in self.probes]}

    def failure_reason(self) -> str:
        """Why a search that found no batch ends the cell: the first probe's words."""
        first = self.probes[0]
        return "batch search from {}: the probe at batch {} ended {}: {}".format(
            self.bounds[0], first.spec["batch_size"], first.status, first.reason or "no reason")


def probe_spec(cell: RunSpec, batch: int) -> RunSpec:
    """The short run of `cell` at `batch`: same everything, fewer steps, named as a probe."""
    return replace(cell, batch_size=batch, batch_auto=False, probe=True, repeat=0, nonce="",
                   **{k: min(getattr(cell, k), v) for k, v in PROBE.items()})


def _between(fits: int, fails: int) -> Optional[int]:
    """One batch between one that ran and one out of memory: 1.5x, down to a multiple of 8."""
    mid = (fits + fails) // 2
    mid = mid - mid % 8 if mid >= 16 else mid
    return mid if fits < mid < fails else None


def search(cell: RunSpec, bounds: Tuple[int, int], run: Callable[[RunSpec], RunResult],
           budget_s: float, clock: Callable[[], float] = time.monotonic) -> Outcome:
    """Probe `cell` at doubling batches within `bounds`; `run` runs (and records) one probe."""
    low, high = bounds
    out, started, batch = Outcome(bounds), clock(), low
    if low == high:  # nothing to choose between: the cell itself says whether it fits
        out.stopped = "one candidate, {}: not probed".format(low)
        return out
    while True:
        result = run(probe_spec(cell, batch))
        out.probes.append(result)
        if result.status != "ok":
            out.stopped = "batch {} {}".format(batch, result.status)
            break
        if batch >= high:
            out.stopped = "reached the maximum, {}".format(high)
            return out
        if clock() - started >= budget_s:
            out.stopped = "time budget of {:g} s spent".format(budget_s)
            return out
        batch = min(2 * batch, high)
    fitted = [p.spec["batch_size"] for p in out.ok]
    mid = _between(max(fitted), batch) if fitted and result.status == "oom" else None
    if mid is not None and clock() - started < budget_s:
        out.probes.append(run(probe_spec(cell, mid)))
        out.stopped += "; then batch {} {}".format(mid, out.probes[-1].status)
    return out


def run_auto(cell: RunSpec, campaign, executor, cfg, slot, log: Callable[[str], None],
             searched: Dict[str, int]) -> RunResult:
    """Run an auto cell: find its batch (probes run by `executor` on the cell's `slot`, each saved
    in the campaign), once for all its repeats and sessions, then the cell at that batch with the
    search in its settings. A search that finds no batch is the cell's result, with why."""
    from .executors.base import failure
    batch, record = searched.get(cell.spec_hash) or _searched_before(campaign, cell), None
    if batch is None:
        def probe(spec: RunSpec) -> RunResult:
            result = executor.run(replace(spec, nonce=secrets.token_hex(8)), campaign, cfg.timeout,
                                  slot=slot)
            campaign.save_probe(result)
            log("  probe {:<30} {:>8}  {}".format(result.run_id, result.status, "{:.2f} img/s".format(
                result.images_per_sec) if result.status == "ok" else ""))
            return result
        outcome = search(cell, tuple(cfg.batch_search), probe, BUDGET_S[cell.device])
        batch, record = outcome.batch, outcome.record()
        if batch is None:
            first = outcome.probes[0]
            return failure(cell, first.status, outcome.failure_reason(), first.stderr_tail)
        searched[cell.spec_hash] = batch
    result = executor.run(replace(cell, batch_size=batch), campaign, cfg.timeout, slot=slot)
    result.settings["batch_search"] = record or {
        "chosen": batch, "stopped": "chosen by an earlier search of this cell (its first repeat)"}
    return result


def _searched_before(campaign, cell: RunSpec) -> Optional[int]:
    """The batch an earlier session's search chose for this auto cell (another repeat's result)."""
    results, _ = campaign.results()
    done = [r for r in results if r.spec_hash == cell.spec_hash and r.status == "ok"]
    return done[0].spec.get("batch_size") if done else None
