"""The comparator: results -> one record per run -> one record per cell, with every ratio and its
interval (intervals.py).

A cell is framework x precision x per-GPU batch x image size x device x data mode (synthetic, real,
data-only) x model x mode (default, tuned) x nodes x GPUs per node; its figure is the median
over ok repeats, and says how many of the cell's runs it rests on (runs, failed_runs: a repeat
that failed is never dropped silently). Speedup (versus the 1-GPU cell, and versus one node with
the same GPUs per node), scaling efficiency (speedup / world size) and precision gain are computed only
between comparable cells (same everything but the one axis), never across a failed cell, and never
across modes: `ratio()` refuses two cells of different modes. A searched batch (`auto`) is one
cell whatever batch its search chose (`batch_chosen`).
"""
import json
from typing import Dict, List, Optional, Sequence

import pandas as pd

from backends.contract import DEFAULT_MODEL, RunResult, data_mode

from .. import frameworks
from . import intervals, metrics

GROUP = ["framework", "precision", "batch_size", "image_size", "device", "data_mode", "model", "mode"]
KEY = GROUP + ["nodes", "gpus"]
MIXED = ("fp16", "bf16", "tf32")
# what a run says about how its figure came about: its precision without the hardware for it
# (backends/policy.py cpu_precision_note), its workers run as one process (the Horovod launcher)
NOTES = ("note", "distribution_note")
# what a real-data run records of its input pipeline (backends/dataset.py settings)
DATA_SETTINGS = ("cpu_cores", "loader_workers", "data_pipeline", "decode", "decode_why",
                 "images_read", "corrupt_skipped", "cuda_connections")
TELEMETRY = ("power_avg_w", "util_avg_pct", "mem_used_max_mib", "sm_clock_avg_mhz", "temp_max_c",
             "host_cpu_cores")
RATIOS = ("speedup", "speedup_one_node", "scaling_efficiency", "precision_gain", "framework_ratio")
COLUMNS = KEY + ["world_size", "layout", "status", "repeats", "runs", "failed_runs", "images_per_sec",
                 "images_per_sec_ci95", "images_per_sec_rel_se", "images_per_sec_dof", "ips_min",
                 "ips_max", "spread", "cv", "mlperf_mean", "uncertainty", "jitter",
                 *[c for r in RATIOS for c in (r, r + "_ci95")], "ratio_baseline", "images_per_watt",
                 *TELEMETRY, "device_name", "framework_version", "distribution", "data",
                 "compile", "options", "batch_chosen", *DATA_SETTINGS, *NOTES, "reason"]
# columns the report and the check read but the written cells (report.csv, report.json) leave
# out: failed_statuses, the statuses of a cell's runs without a figure as data (failed_runs says
# them to a reader, in prose whose reasons may read like another run's: never parsed back)
HELD = ["failed_statuses"]


class NotComparable(ValueError):
    """Two cells whose ratio would not be a verdict (e.g. of different modes)."""


def ratio(here, other) -> Optional[intervals.Estimate]:
    """here / other, two cell records, with its interval (None: no figure on a side). Cells of
    different modes are refused: a framework at its defaults against another tuned is not a
    comparison of frameworks."""
    if here is None or other is None:
        return None
    if here["mode"] != other["mode"]:
        raise NotComparable("a ratio across modes ({} ÷ {}) is not a verdict; compare cells of one "
                            "mode".format(here["mode"], other["mode"]))
    return intervals.ratio(estimate(here), estimate(other))


def run_record(r: RunResult) -> Dict:
    """One flat record per run: the cell's key, the figures, window statistics, telemetry."""
    s, ok, tel, settings = r.spec, r.status == "ok", r.telemetry or {}, r.settings or {}
    row = {"run_id": r.run_id, "framework": s.get("framework"), "precision": s.get("precision"),
           "batch_size": "auto" if s.get("batch_auto") else s.get("batch_size"),
           "batch_chosen": s.get("batch_size") if s.get("batch_auto") else None,
           "mode": s.get("mode", "default"), "image_size": s.get("image_size"),
           "device": s.get("device"), "nodes": s.get("nodes", 1), "gpus": s.get("gpus"),
           "repeat": s.get("repeat", 0), "status": r.status,
           "images_per_sec": r.images_per_sec if ok else None,
           "median_window_images_per_sec": r.median_images_per_sec if ok else None,
           "uncertainty": r.uncertainty if ok else None, "jitter": r.jitter if ok else None,
           "windows": json.dumps(r.window_images_per_sec or []) if ok else None,
           "layout": settings.get("layout"),
           "distribution": r.distribution, "reason": r.reason, "device_name": r.device_name,
           "framework_version": r.framework_version,
           "model": s.get("model") or DEFAULT_MODEL,  # a cell's key: never None
           "data": s.get("data"), "compile": s.get("compile"),
           "options": json.dumps(s.get("options") or {}, sort_keys=True),
           "telemetry_samples": tel.get("samples"), "started_at": r.started_at,
           "data_mode": data_mode(s)}
    row.update({k: tel.get(k) if ok else None for k in TELEMETRY})
    row["power_avg_w"] = job_power(row["power_avg_w"], row["nodes"])
    row.update({k: settings.get(k) for k in DATA_SETTINGS + NOTES})
    return row


def job_power(node_watts, nodes) -> Optional[float]:
    """Watts of the whole job: rank 0 samples its own node's GPUs (backends/telemetry.py), so the
    job draws about `nodes` times that (the other nodes taken to draw the same); None without a
    reading. Every power figure of the report (runs.csv, report.csv, the Energy table) is this."""
    if node_watts is None or node_watts != node_watts:
        return None
    return float(node_watts) * int(nodes)


def runs(results: Sequence[RunResult]) -> pd.DataFrame:
    """The per-run table (report/runs.csv): every repeat, not just the cell medians."""
    return pd.DataFrame([run_record(r) for r in results])


def _cell(key, g: pd.DataFrame) -> Dict:
    ok = g[g.status == "ok"]
    ips = [float(x) for x in ok.images_per_sec]
    last = (ok if len(ok) else g).iloc[-1]
    est = intervals.cell(ips, [json.loads(w) for w in ok.windows], list(ok.uncertainty))
    cell = dict(zip(KEY, key), status="ok" if ips else g.status.iloc[-1], repeats=len(ips),
                runs=len(g), failed_runs=_failed_runs(g), failed_statuses=list(g.status[g.status != "ok"]),
                images_per_sec=est.value if est else None,
                images_per_sec_ci95=est.half_width() if est else None,
                images_per_sec_rel_se=est.rel_se if est else None,
                images_per_sec_dof=est.dof if est else None,
                ips_min=min(ips) if ips else None, ips_max=max(ips) if ips else None,
                spread=metrics.spread(ips), cv=metrics.coefficient_of_variation(ips),
                mlperf_mean=metrics.mlperf_mean(ips), uncertainty=metrics.median(ok.uncertainty),
                jitter=metrics.median(ok.jitter), reason=None if ips else last.reason)
    cell["world_size"] = int(cell["nodes"]) * int(cell["gpus"])
    layouts = sorted({str(x) for x in g.layout if x is not None and x == x})
    cell["layout"] = "/".join(layouts) or None
    for col in ("device_name", "framework_version", "distribution", "data", "compile",
                "options", "batch_chosen") + NOTES + DATA_SETTINGS:
        cell[col] = last[col]
    for col in TELEMETRY:  # power_avg_w: the whole job's, every node's (run_record)
        cell[col] = metrics.median(ok[col])
    cell["images_per_watt"] = metrics.images_per_watt(cell["images_per_sec"], cell["power_avg_w"])
    return cell


def _failed_runs(g: pd.DataFrame) -> Optional[str]:
    """'r1: failed: killed by SIGKILL …' for each run of a cell without a figure (None: none), so
    that a figure resting on fewer runs than the cell ran says which, and why."""
    bad = g[g.status != "ok"]
    return "; ".join("r{}: {}{}".format(int(r["repeat"]), r.status, ": " + str(r.reason).splitlines()[0][:200]
                                        if r.reason else "") for _, r in bad.iterrows()) or None


def rests_on(cell) -> str:
    """' (2 of 3 runs)' where a cell's figure rests on fewer runs than it ran; '' otherwise."""
    if cell["status"] != "ok" or cell["repeats"] >= cell["runs"]:
        return ""
    return " ({})".format(OF_RUNS.format(cell["repeats"], cell["runs"]))


OF_RUNS = "{} of {} runs"


def short_of(kept: int, ran: int, statuses: Sequence[str]) -> str:
    """'4 of 5 runs (1 timeout)': where a figure needs more runs than have one (MLPerf's 5) but
    the cell ran enough, how many have one and what the others ended as (their reasons are listed
    under the runs without a figure), not 'n<5' of a cell that ran 5."""
    ended: Dict[str, int] = {}
    for status in statuses:
        ended[status] = ended.get(status, 0) + 1
    return OF_RUNS.format(kept, ran) + " ({})".format(", ".join(
        "{} {}".format(n, status) for status, n in sorted(ended.items())))


def written(df: pd.DataFrame) -> pd.DataFrame:
    """The cells as report.csv and report.json hold them: without the HELD columns."""
    return df.drop(columns=[c for c in HELD if c in df.columns])


def estimate(row) -> Optional[intervals.Estimate]:
    """The estimate of a cell record (None without a figure)."""
    if row is None or row["images_per_sec"] is None or row["images_per_sec"] != row["images_per_sec"]:
        return None
    rel, dof = row["images_per_sec_rel_se"], row["images_per_sec_dof"]
    return intervals.Estimate(float(row["images_per_sec"]), None if rel is None or rel != rel else rel,
                              None if dof is None or dof != dof else dof)


def _ratio_columns(df: pd.DataFrame, base_fw: Optional[str]) -> Dict[str, List]:
    """Every ratio of every cell, with the half width of its 95 % interval."""
    rows = {tuple(r[c] for c in KEY): r for _, r in df.iterrows()}
    out: Dict[str, List] = {c: [] for r in RATIOS for c in (r, r + "_ci95")}

    def put(name: str, est: Optional[intervals.Estimate], value=lambda v: v, per: int = 1) -> None:
        hw = est.half_width() if est else None  # efficiency and gain keep the ratio's interval
        out[name].append(value(est.value) if est else None)
        out[name + "_ci95"].append(hw / per if hw is not None else None)

    for key, r in rows.items():
        group, nodes, gpus = key[:len(GROUP)], int(r["nodes"]), int(r["gpus"])
        speedup = _versus(r, key, group + (1, 1), rows)
        put("speedup", speedup)
        put("speedup_one_node", _versus(r, key, group + (1, gpus), rows) if nodes > 1 else None)
        put("scaling_efficiency", speedup, lambda v: metrics.scaling_efficiency(v, nodes * gpus),
            per=nodes * gpus)
        mixed = r["precision"] in MIXED
        put("precision_gain", _versus(r, key, (r["framework"], "fp32") + key[2:], rows)
            if mixed else None, lambda v: v - 1.0)
        put("framework_ratio", _versus(r, key, (base_fw,) + key[1:], rows) if base_fw else None)
    return out


def _versus(row, key, other_key, rows) -> Optional[intervals.Estimate]:
    """The cell `row` / the cell at other_key; exactly 1 (no interval) when it is the same cell."""
    if estimate(row) is None:
        return None
    if tuple(other_key) == tuple(key):
        return intervals.Estimate(1.0, 0.0)
    return ratio(row, rows.get(tuple(other_key)))


def cells(results: Sequence[RunResult], baseline: Optional[str] = None) -> pd.DataFrame:
    """One record per cell: median img/s over ok repeats with its interval, the spread of the
    repeats, speedup, scaling efficiency, precision gain, ratio to the baseline framework at equal
    settings (each with the half width of its 95 % interval), img/s per W."""
    if not results:
        return pd.DataFrame(columns=COLUMNS + HELD)
    per_run = runs(results)
    df = pd.DataFrame([_cell(k, g) for k, g in per_run.groupby(KEY, sort=False)])
    df = df.astype(object).where(df.notna(), None)
    present = frameworks.order(set(df.framework))
    base_fw = baseline or (present[0] if present else None)
    for name, values in _ratio_columns(df, base_fw).items():
        df[name] = values
    df["ratio_baseline"] = base_fw
    df = df.astype(object).where(df.notna(), None)
    return df[COLUMNS + HELD]
