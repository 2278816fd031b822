"""`compare run … --plan`: the schedule a sweep would take and how long, printed before it starts.

    compare run --frameworks caffe2,jax --gpus 1,2 --precision fp32,fp16 --plan
    compare run … --plan --plan-gpus 8          # the same study on a machine of 8 such GPUs

A cell's time is estimated from the cell times (phases cell_start -> cell_end) of earlier results
on a machine like this one (the same GPU and CPU models; any number of GPUs) in the campaigns
under --plan-from (default `results/`, where campaigns go by default): the median of the last
three runs of the same cell (same settings: spec hash), marked `=`; else of cells of the same
framework, precision and GPU count, `~`; else of the framework's cells, or of any cell, `?`; a
cell with nothing to go by counts DEFAULT_S. The schedule is scheduler.plan(): the rule the sweep
itself follows.
"""
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from backends.protocol import RunResult, RunSpec

from .reporting.timeline import clock
from .resources import Pool, cpuset
from .scheduler import Planned, plan

DEFAULT_S = 60.0  # a cell with no earlier result of any kind to go by
RECENT = 3  # the last runs of a cell that make its estimate (caches warm up over time)
LEGEND = ("= the same cell ran before (median of its last {} runs); ~ a cell of the same "
          "framework, precision and GPU count; ? the framework's or any cell's median: a guess")


def _model(machine: Dict[str, Any]) -> Tuple:
    return (machine.get("cpu_model"), tuple(sorted({g.get("name") for g in machine.get("gpus", [])})))


def earlier_results(folder: Path, machine: Dict[str, Any]) -> Tuple[List[RunResult], int]:
    """Results with cell times from campaigns in `folder` (or `folder` itself) recorded on a
    machine of the same CPU and GPU models; and how many campaigns they came from."""
    from .errors import UserError
    from .store import CAMPAIGN_FILE, Campaign
    if not folder.is_dir():
        return [], 0
    roots = [folder] if (folder / CAMPAIGN_FILE).is_file() else sorted(
        p for p in folder.iterdir() if (p / CAMPAIGN_FILE).is_file())
    out, used = [], 0
    for root in roots:
        try:
            campaign = Campaign.open(root)
            if _model(campaign.machine) != _model(machine):
                continue
            results, _ = campaign.results()
        except (UserError, OSError):
            continue  # a broken campaign is `compare report`'s to complain about, not the plan's
        timed = [r for r in results if _cell_s(r) is not None]
        used += bool(timed)
        out += timed
    return out, used


def _cell_s(r: RunResult) -> Optional[float]:
    start, end = (r.phases or {}).get("cell_start"), (r.phases or {}).get("cell_end")
    return end - start if start is not None and end is not None and end >= start else None


def _recent_median(rs: List[RunResult]) -> float:
    rs = sorted(rs, key=lambda r: r.phases["cell_end"])[-RECENT:]
    return float(statistics.median(_cell_s(r) for r in rs))


class Estimates:
    """seconds(spec) and how sure (=, ~, ?) from the earlier results."""

    def __init__(self, results: Sequence[RunResult]):
        self.by_hash: Dict[str, List[RunResult]] = {}
        self.by_like: Dict[Tuple, List[RunResult]] = {}
        self.by_fw: Dict[str, List[RunResult]] = {}
        for r in results:
            self.by_hash.setdefault(r.spec_hash or "", []).append(r)
            self.by_like.setdefault(self._like(r.spec), []).append(r)
            self.by_fw.setdefault(r.spec.get("framework"), []).append(r)
        self.all = list(results)

    @staticmethod
    def _like(spec: Dict[str, Any]) -> Tuple:
        return tuple(spec.get(k) for k in ("framework", "precision", "gpus", "nodes", "device"))

    def of(self, spec: RunSpec) -> Tuple[float, str]:
        for mark, found in (("=", self.by_hash.get(spec.spec_hash)),
                            ("~", self.by_like.get(self._like(spec.to_dict()))),
                            ("?", self.by_fw.get(spec.framework)), ("?", self.all)):
            if found:
                return _recent_median(found), mark
        return DEFAULT_S, "?"


def render(items: List[Planned], marks: Dict[str, str], pool: Pool, concurrency: int,
           source: str, asked: str) -> str:
    """The plan as text: one line per cell in start order, then the totals."""
    lines = ["plan: {} cell{} on {}, up to {} at once ({}); {}".format(
        len(items), "" if len(items) == 1 else "s", _machine(pool), concurrency, asked, source)]
    lines += ["note: " + n for n in pool.notes]
    lines.append("{:>8} {:>8}  {:<5} {:<9} {:>6}  cell".format("start", "end", "GPUs", "cores",
                                                                "time"))
    for it in items:
        lines.append("{:>8} {:>8}  {:<5} {:<9} {:>6}  {}".format(
            clock(it.start), clock(it.end), ",".join(it.slot.gpus) or "-",
            cpuset(it.slot.cores) if it.slot.cores else ("-" if pool.gpu and not pool.cores[
                pool.units[0]] else "all"),
            "{}{:.0f} s".format(marks[it.spec.run_id], it.end - it.start), it.spec.run_id))
    wall = max((it.end for it in items), default=0.0)
    serial = sum(it.end - it.start for it in items)
    total = "estimate: {} wall, against {} one cell at a time".format(clock(wall), clock(serial))
    if wall > 0:
        total += " ({:.2f}× faster)".format(serial / wall)
    if pool.gpu:
        total += "; {} GPUs held {:.2f} GPU-hours".format(len(pool.units), len(pool.units) * wall / 3600)
    return "\n".join(lines + [total, LEGEND.format(RECENT)]) + "\n"


def _machine(pool: Pool) -> str:
    if pool.gpu:
        return "{} GPU{}".format(len(pool.units), "s" if len(pool.units) > 1 else "")
    cores = sum(len(c) for c in pool.cores.values())
    return "{} core{}".format(cores, "s" if cores > 1 else "")


def make(specs: Sequence[RunSpec], pool: Pool, concurrency: int, folder: Path,
         machine: Dict[str, Any], asked: str) -> str:
    """The plan of `specs` (the cells still to run) on `pool`, as text."""
    results, campaigns = earlier_results(folder, machine)
    estimates = Estimates(results)
    marks: Dict[str, str] = {}

    def seconds(spec: RunSpec) -> float:
        value, marks[spec.run_id] = estimates.of(spec)
        return value
    items = plan(specs, pool, concurrency, seconds)
    source = "cell times from {} earlier run{} in {} campaign{} under {}".format(
        len(results), "" if len(results) == 1 else "s", campaigns, "" if campaigns == 1 else "s",
        folder) if results else "no earlier run on a machine like this under {}: every cell " \
        "counts {:.0f} s".format(folder, DEFAULT_S)
    return render(items, marks, pool, concurrency, source, asked)
