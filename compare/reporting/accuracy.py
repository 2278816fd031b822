"""The time-to-accuracy part of a report (docs/accuracy.md): minutes to target per cell across
its seeds with MLPerf's score, speedup in time to train beside speedup in throughput (flagged
where they differ beyond noise: the seed's super-linear caveat, measured), cost to train from a
GPU-hour price, and an accuracy-versus-time chart.

`tables(results, price)` and `chart(results)` take RunResults; throughput runs are left out
(`split` separates the two kinds for the rest of the report). A cell is framework x model x
mode x precision x batch x image size x device x nodes x GPUs, its runs one per seed.
"""
import math
import statistics
from typing import Dict, List, Optional, Sequence, Tuple

from .. import frameworks
from ..mllogs import FINISHED
from ..mlperf import REQUIRED_RUNS, olympic_mean
from . import intervals, metrics
from . import tables as _tables
from .charts import Chart, _plt, _png
from .comparator import short_of
from .tables import Table, num

CELL = ("framework", "model", "mode", "precision", "batch_size", "image_size", "device")
COST_NOTE = ("$ = gpu_hour_price × GPUs (or CPU workers) × time to train, per run (median over "
             "the seeds); $/M images = that ÷ millions of images trained.")


def is_accuracy(result) -> bool:
    return (result.spec or {}).get("target_accuracy") is not None


def split(results: Sequence) -> Tuple[List, List]:
    """(throughput runs, time-to-accuracy runs)."""
    return [r for r in results if not is_accuracy(r)], [r for r in results if is_accuracy(r)]


def record(r) -> Dict:
    """One flat record of an accuracy run."""
    s, a = r.spec or {}, r.accuracy or {}
    out = {k: s.get(k) for k in CELL}
    out.update(nodes=s.get("nodes", 1), gpus=s.get("gpus", 1), run_id=r.run_id,
               status=r.status, target=s.get("target_accuracy"), classes=s.get("num_classes"),
               seed=a.get("seed"),
               best=a.get("best"), epochs=a.get("epochs"), images_trained=a.get("images_trained"),
               epochs_to_target=a.get("epochs_to_target"), evals=a.get("evals") or [],
               init_s=a.get("init_s"), compile_s=a.get("compile_s"),
               images_per_sec=r.images_per_sec if r.status in FINISHED else None,
               reason=r.reason, log=a.get("mllog") or a.get("aborted_mllog"))
    start, stop = a.get("run_start_ms"), a.get("run_stop_ms")
    out["minutes"] = (stop - start) / 60000 if r.status in FINISHED and start and stop else None
    out["world"] = int(out["nodes"]) * int(out["gpus"])
    return out


def cells(results: Sequence) -> Dict[Tuple, List[Dict]]:
    """Accuracy runs grouped by cell (CELL + nodes, GPUs), in the order they came."""
    out: Dict[Tuple, List[Dict]] = {}
    for r in results:
        if is_accuracy(r):
            rec = record(r)
            out.setdefault(tuple(rec[k] for k in CELL) + (rec["nodes"], rec["gpus"]), []).append(rec)
    return out


def estimate(xs: Sequence[float]) -> Optional[intervals.Estimate]:
    """The mean of the seeds' figures with its standard error (None: no figure)."""
    xs = [float(x) for x in xs if x is not None]
    if not xs:
        return None
    mean = statistics.fmean(xs)
    if len(xs) < 2 or mean == 0:
        return intervals.Estimate(mean, None)
    return intervals.Estimate(mean, statistics.stdev(xs) / math.sqrt(len(xs)) / abs(mean),
                              len(xs) - 1)


def summary(runs: List[Dict]) -> Dict:
    """A cell's figures over its seeds: converged runs' minutes and epochs, MLPerf's score."""
    done = [x for x in runs if x["status"] == "ok" and x["minutes"] is not None]
    minutes = [x["minutes"] for x in done]
    finished = [x for x in runs if x["status"] in FINISHED]
    dropped = len(finished) - len(done)
    return {"runs": len(runs), "converged": len(done), "finished": len(finished),
            "minutes": estimate(minutes), "median": statistics.median(minutes) if minutes else None,
            "spread": metrics.spread(minutes),
            "epochs": [x["epochs_to_target"] for x in done],
            "score": olympic_mean(minutes, dropped) if len(finished) >= REQUIRED_RUNS else None,
            "best": max((x["best"] for x in finished if x["best"] is not None), default=None),
            "ips": estimate([x["images_per_sec"] for x in finished]),
            "images": statistics.median([x["images_trained"] for x in done]) if done else None,
            "init": _median([x["init_s"] for x in runs]),
            "compile": _median([x["compile_s"] for x in runs])}


def _median(xs: Sequence) -> Optional[float]:
    xs = [float(x) for x in xs if x is not None]
    return statistics.median(xs) if xs else None


FIELDS = ["framework", "model", "mode", "precision", "batch_size", "image_size", "N"]


def fields(groups: Dict[Tuple, List[Dict]]) -> List[str]:
    """The columns that name these cells, as every other table of the report names its cells
    (tables.shown): the model and the mode only where the cells hold several, or another mode."""
    return _tables.shown([_cell(key) for key in groups], FIELDS)


def _cell(key: Tuple) -> Dict:
    return dict(zip(CELL + ("nodes", "gpus"), key))


def _label(key: Tuple, shown: List[str]) -> List[str]:
    out = _tables.label(_cell(key), shown)
    if "N" in shown and key[CELL.index("device")] == "cpu":
        out[shown.index("N")] += " (CPU)"
    return out


def _epochs(xs: List[int]) -> str:
    if not xs:
        return "n/a"
    lo, hi = min(xs), max(xs)
    return "{:g}".format(statistics.median(xs)) + (" ({}–{})".format(lo, hi) if lo != hi else "")


def time_table(groups: Dict[Tuple, List[Dict]], price: Optional[float]) -> Table:
    """Minutes to target per cell over its seeds (and cost to train with a price)."""
    rows, shown = [], fields(groups)
    for key, runs in groups.items():
        s = summary(runs)
        row = _label(key, shown) + [
            "{}/{}".format(s["converged"], s["runs"]), intervals.pm_minutes(
                s["minutes"].value if s["minutes"] else None,
                s["minutes"].half_width() if s["minutes"] else None),
            num(s["median"], "{:.2f}"), num(s["spread"], "{:.0%}"), _epochs(s["epochs"]),
            _score(s, runs),
            num(s["best"], "{:.3f}"), _init(s)]
        if price is not None:
            row += _cost(s, key, price)
        rows.append(row)
    head = _tables.heading(shown) + ["converged", "minutes to target", "median", "spread", "epochs",
                   "MLPerf score", "best top-1", "init s (compile)"] + (["$ to target", "$/M images"] if price
                                                   is not None else [])
    target = sorted({x["target"] for runs in groups.values() for x in runs})
    notes = ["Target top-1: {}. minutes = run_start → run_stop of the converged runs (one seed "
             "each; ± the half width of the 95 % interval of their mean); spread = (max − min) ÷ "
             "median; epochs = median (min–max) to the target; MLPerf score = mean after dropping "
             "the fastest and the slowest run, a run that did not converge dropped first (5 runs "
             "or more, at most one not converged); init s (compile) = seconds before run_start, "
             "outside time to train: set-up and warm_up (of which compiling and autotuning the "
             "steps), median over the runs.".format(", ".join("{:g}".format(t)
                                                                      for t in target))]
    if price is not None:
        notes.append(COST_NOTE.replace("gpu_hour_price", "${:g}/GPU-hour".format(price)))
    notes += _at_chance(groups)
    return Table("Time to accuracy (minutes to target)", head, rows, notes, name="time_to_accuracy",
                 labels=len(shown))


def _init(s: Dict) -> str:
    """'12.0 (6.0)': the median seconds of initialisation and, of them, of warm_up."""
    if s["init"] is None:
        return "n/a"
    return "{:.1f}".format(s["init"]) + (" ({:.1f})".format(s["compile"]) if s["compile"] is not None
                                         else "")


def _at_chance(groups: Dict[Tuple, List[Dict]]) -> List[str]:
    """A note for each target no better than chance (1/classes of the model's outputs): one
    class for every image scores 1/K on a balanced val/, so such a target says nothing learned."""
    pairs = sorted({(x["target"], x["classes"]) for runs in groups.values() for x in runs
                    if x["target"] and x["classes"] and x["target"] <= 1 / x["classes"]})
    return ["Target top-1 {:g} is no better than chance with {} classes (1/{} = {:.2g} on a "
            "balanced val/): a network that learned nothing reaches it; give a --target-accuracy "
            "well above 1/classes.".format(t, k, k, 1 / k) for t, k in pairs]


def _score(s: Dict, runs: List[Dict]) -> str:
    """MLPerf's score; 'n<5' of a cell that ran fewer runs, '4 of 5 runs (1 timeout)' of one that
    ran 5 of which some did not finish, 'n/a' (more than one not converged) otherwise."""
    if s["score"] is not None:
        return "{:.2f}".format(s["score"])
    if s["finished"] >= REQUIRED_RUNS:
        return "n/a"
    if s["runs"] < REQUIRED_RUNS:
        return "n<{}".format(REQUIRED_RUNS)
    return short_of(s["finished"], s["runs"], [x["status"] for x in runs if x["status"] not in FINISHED])


def costs(s: Dict, key: Tuple, price: Optional[float]) -> Tuple[Optional[float], Optional[float]]:
    """(dollars to target, dollars per million images trained) of a cell (COST_NOTE): the
    table's two cost columns and accuracy.json's, from one rule. None where there is no figure."""
    if price is None or s["median"] is None:
        return None, None
    dollars = price * key[-2] * key[-1] * s["median"] / 60
    return dollars, dollars / (s["images"] / 1e6) if s["images"] else None


def _cost(s: Dict, key: Tuple, price: float) -> List[str]:
    return [num(x, "{:.4f}") for x in costs(s, key, price)]


def speedup_table(groups: Dict[Tuple, List[Dict]]) -> Optional[Table]:
    """Speedup versus the cell's 1-GPU twin in time to train and in training throughput (the
    same runs), and whether the two differ beyond noise."""
    rows, flagged, shown = [], False, fields(groups)
    for key, runs in groups.items():
        one = groups.get(key[:-2] + (1, 1))
        if one is None or key[-2] * key[-1] == 1:
            continue
        here, base = summary(runs), summary(one)
        tta = intervals.ratio(base["minutes"], here["minutes"])
        tput = intervals.ratio(here["ips"], base["ips"])
        both = intervals.ratio(tta, tput)
        verdict = intervals.state(both.value if both else None, both.half_width() if both else None)
        flag = {intervals.BETTER: "time to train scales better than throughput (seeds)",
                intervals.WORSE: "time to train scales worse than throughput (seeds)"}.get(
                    verdict, verdict)
        flagged = flagged or verdict in (intervals.BETTER, intervals.WORSE)
        rows.append(_label(key, shown) + [_pm(tta, "{:.2f}×"), _pm(tput, "{:.2f}×"), flag])
    if not rows:
        return None
    notes = ["time to train: minutes(1) ÷ minutes(N) of converged runs; throughput: training "
             "images/sec of the same runs, N ÷ 1. Epochs to converge vary with the seed, so "
             "time to train can scale super-linearly where throughput does not (MLPerf v0.5)."]
    if flagged:
        notes.append("A flagged row: the two speedups differ beyond their 95 % intervals.")
    return Table("Speedup in time to train beside speedup in throughput", _tables.heading(shown) + [
        "time to train", "throughput", "verdict"], rows, notes, name="tta_speedup",
        labels=len(shown))


RUN_FIELDS = ("run_id", "status", "seed", "minutes", "epochs", "epochs_to_target", "best",
              "images_per_sec", "init_s", "compile_s", "reason", "log")


def records(results: Sequence, price: Optional[float] = None) -> List[Dict]:
    """One plain record per cell of these results' accuracy runs (what the time table shows, as
    numbers: report.json's counterpart, written as accuracy.json), each with its runs."""
    out = []
    for key, runs in cells(results).items():
        s = summary(runs)
        minutes, ips = s["minutes"], s["ips"]
        dollars, per_million = costs(s, key, price)
        cell: Dict = _cell(key)
        cell.update(
            target=runs[0]["target"], runs=s["runs"], converged=s["converged"],
            finished=s["finished"], minutes_mean=minutes.value if minutes else None,
            minutes_ci95=minutes.half_width() if minutes else None, minutes_median=s["median"],
            spread=s["spread"], epochs_to_target=s["epochs"], mlperf_score=s["score"],
            best=s["best"], images_per_sec=ips.value if ips else None,
            cost_to_target=dollars, cost_per_million_images=per_million,
            init_s_median=s["init"], compile_s_median=s["compile"],
            run_records=[{k: x[k] for k in RUN_FIELDS} for x in runs])
        out.append(cell)
    return out


NOT_REACHED = "Time-to-accuracy runs without a time to target"


def not_reached_table(groups: Dict[Tuple, List[Dict]]) -> Optional[Table]:
    """Every run that did not reach its target (not converged, failed, unsupported, out of
    memory, timed out), as "Cells without a figure" lists throughput cells: its cell, run, status,
    seed, the epochs it trained, its best top-1, the first line of its reason and its MLPerf log
    (a partial one kept aside for a run that did not finish)."""
    rows, shown = [], fields(groups)
    for key, runs in groups.items():
        for x in runs:
            if x["status"] == "ok":
                continue
            reason = (x["reason"] or "").strip()
            rows.append(_label(key, shown) + [
                x["run_id"], x["status"], num(x["seed"], "{}"), num(x["epochs"], "{}"),
                num(x["best"], "{:.3f}"), reason.splitlines()[0][:200] if reason
                else "no reason recorded", x["log"] or "n/a"])
    if not rows:
        return None
    return Table(NOT_REACHED, _tables.heading(shown) + [
        "run", "status", "seed", "epochs", "best top-1", "reason", "MLPerf log"], rows, [
        "not_converged: trained its --max-epochs (or stopped at a non-finite loss) below the "
        "target; a finished cell, dropped from MLPerf's score. failed, timeout: ended before "
        "run_stop (`compare run ... --resume` runs it again); oom, unsupported: the cell's "
        "answer. A run that did not finish keeps its partial log; its seed, epochs (those it "
        "completed) and best top-1 are that log's."],
        name="tta_not_reached", labels=len(shown))


def _pm(e: Optional[intervals.Estimate], fmt: str) -> str:
    """An estimate as '1.95 ±0.02' in fmt, its half width to two places."""
    return intervals.pm(e.value if e else None, e.half_width() if e else None, fmt, "{:.2f}")


def tables(results: Sequence, price: Optional[float] = None) -> List[Table]:
    """The time-to-accuracy tables of these results (none without accuracy runs)."""
    groups = cells(results)
    if not groups:
        return []
    return [t for t in (time_table(groups, price), speedup_table(groups),
                        not_reached_table(groups)) if t is not None]


def chart(results: Sequence) -> Optional[Chart]:
    """Top-1 after every evaluation versus minutes since run_start, one line per run, coloured
    by framework; the target dashed."""
    runs = [record(r) for r in results if is_accuracy(r) and (r.accuracy or {}).get("evals")]
    if not runs:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    seen = set()
    for x in runs:
        fw = x["framework"]
        ax.plot([e["time_s"] / 60 for e in x["evals"]], [e["accuracy"] for e in x["evals"]],
                marker="o", ms=3, lw=1.2, alpha=0.8, color=frameworks.color(fw),
                linestyle="-" if x["precision"] in ("fp16", "fp32") else "--",
                label=None if fw in seen else frameworks.display(fw))
        seen.add(fw)
    for t in sorted({x["target"] for x in runs}):
        ax.axhline(t, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("minutes since run_start")
    ax.set_ylabel("top-1 accuracy (val/)")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    return Chart("Accuracy versus time to train", "Each line is one run (one seed): top-1 on val/ "
                 "after each evaluation, against minutes since run_start; dotted: the target. "
                 "Solid lines fp32/fp16, dashed bf16/tf32.", _png(fig))
