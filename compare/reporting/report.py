"""Comparator and reports: results -> one record per cell -> the seed-style tables.

A cell is framework x precision x per-GPU batch x image size x device x GPU count; its figure
is the median over ok repeats. Speedup, scaling efficiency and precision gain are computed only
between comparable cells (same everything but the one axis), never across a failed cell.
"""
import json
import statistics
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pandas as pd

from backends.protocol import RunResult

from .. import frameworks
from ..errors import UserError
from . import data_table, metrics

FORMATS = ("md", "csv", "json", "html")
GROUP = ["framework", "precision", "batch_size", "image_size", "device", "data_mode"]
KEY = GROUP + ["gpus"]
MIXED = ("fp16", "bf16", "tf32")
# what a real-data run records of its input pipeline (backends/dataset.py settings)
DATA_SETTINGS = ("cpu_cores", "loader_workers", "data_pipeline", "decode", "images_read",
                 "corrupt_skipped")
TELEMETRY = ("power_avg_w", "util_avg_pct", "mem_used_max_mib", "sm_clock_avg_mhz", "temp_max_c")
COLUMNS = KEY + ["status", "repeats", "images_per_sec", "ips_min", "ips_max", "spread", "cv",
                 "mlperf_mean", "uncertainty", "jitter", "speedup", "scaling_efficiency",
                 "precision_gain", "framework_ratio", "ratio_baseline", "images_per_watt",
                 *TELEMETRY, "device_name", "framework_version", "distribution", "model", "data",
                 "compile", "options", *DATA_SETTINGS, "reason"]


def parse_formats(csv: str) -> List[str]:
    items = [s.strip().lower() for s in csv.split(",") if s.strip()]
    if not items:
        raise UserError("--format is empty; choose from {}".format(", ".join(FORMATS)))
    for f in items:
        if f not in FORMATS:
            raise UserError("unknown format {!r}; choose from {}".format(f, ", ".join(FORMATS)))
    return items


def run_record(r: RunResult) -> Dict:
    """One flat record per run: the cell's key, the figures, window statistics, telemetry."""
    s, ok, tel = r.spec, r.status == "ok", r.telemetry or {}
    row = {"run_id": r.run_id, "framework": s.get("framework"), "precision": s.get("precision"),
           "batch_size": s.get("batch_size"), "image_size": s.get("image_size"),
           "device": s.get("device"), "gpus": s.get("gpus"), "repeat": s.get("repeat", 0),
           "status": r.status, "images_per_sec": r.images_per_sec if ok else None,
           "median_window_images_per_sec": r.median_images_per_sec if ok else None,
           "uncertainty": r.uncertainty if ok else None, "jitter": r.jitter if ok else None,
           "distribution": r.distribution, "reason": r.reason, "device_name": r.device_name,
           "framework_version": r.framework_version, "model": s.get("model"),
           "data": s.get("data"), "compile": s.get("compile"),
           "options": json.dumps(s.get("options") or {}, sort_keys=True),
           "telemetry_samples": tel.get("samples"), "started_at": r.started_at,
           "data_mode": s.get("data_mode") or ("synthetic" if s.get("data", "synthetic") ==
                                               "synthetic" else "real")}
    row.update({k: tel.get(k) if ok else None for k in TELEMETRY})
    row.update({k: (r.settings or {}).get(k) for k in DATA_SETTINGS})
    return row


def runs(results: Sequence[RunResult]) -> pd.DataFrame:
    """The per-run table (report/runs.csv): every repeat, not just the cell medians."""
    return pd.DataFrame([run_record(r) for r in results])


def _median(values) -> Optional[float]:
    xs = [float(x) for x in values if x is not None and x == x]
    return float(statistics.median(xs)) if xs else None


def _cell(key, g: pd.DataFrame) -> Dict:
    ok = g[g.status == "ok"]
    ips = [float(x) for x in ok.images_per_sec]
    last = (ok if len(ok) else g).iloc[-1]
    cell = dict(zip(KEY, key), status="ok" if ips else g.status.iloc[-1], repeats=len(ips),
                images_per_sec=_median(ips), ips_min=min(ips) if ips else None,
                ips_max=max(ips) if ips else None, spread=metrics.spread(ips),
                cv=metrics.coefficient_of_variation(ips), mlperf_mean=metrics.mlperf_mean(ips),
                uncertainty=_median(ok.uncertainty), jitter=_median(ok.jitter),
                reason=None if ips else last.reason)
    for col in ("device_name", "framework_version", "distribution", "model", "data", "compile",
                "options") + DATA_SETTINGS:
        cell[col] = last[col]
    for col in TELEMETRY:
        cell[col] = _median(ok[col])
    cell["images_per_watt"] = metrics.images_per_watt(cell["images_per_sec"], cell["power_avg_w"])
    return cell


def cells(results: Sequence[RunResult], baseline: Optional[str] = None) -> pd.DataFrame:
    """One record per cell: median img/s over ok repeats, their spread, speedup, scaling
    efficiency, precision gain, ratio to the baseline framework at equal settings, img/s per W."""
    if not results:
        return pd.DataFrame(columns=COLUMNS)
    per_run = runs(results)
    df = pd.DataFrame([_cell(k, g) for k, g in per_run.groupby(KEY, sort=False)])
    ips = {tuple(r[c] for c in KEY): r["images_per_sec"] for _, r in df.iterrows()}
    present = frameworks.order(set(df.framework))
    base_fw = baseline or (present[0] if present else None)
    sp, eff, gain, vs = [], [], [], []
    for _, r in df.iterrows():
        key = tuple(r[c] for c in KEY)
        s = metrics.speedup(r.images_per_sec, ips.get(key[:-1] + (1,)))
        sp.append(s)
        eff.append(metrics.scaling_efficiency(s, int(r.gpus)))
        fp32 = (r.framework, "fp32") + key[2:]
        gain.append(metrics.precision_gain(r.images_per_sec, ips.get(fp32))
                    if r.precision in MIXED else None)
        vs.append(metrics.ratio(r.images_per_sec, ips.get((base_fw,) + key[1:])))
    df["speedup"], df["scaling_efficiency"], df["precision_gain"] = sp, eff, gain
    df["framework_ratio"], df["ratio_baseline"] = vs, base_fw
    df = df.astype(object).where(df.notna(), None)
    return df[COLUMNS]


def _fmt_cell(r) -> str:
    if r["status"] != "ok":
        return r["status"]
    text = "{:.2f}".format(r["images_per_sec"])
    if r["gpus"] != 1 and r["speedup"] is not None:
        text += " ({:.3f})".format(r["speedup"])
    return text


def _pivot(df: pd.DataFrame, value, columns_label: str) -> str:
    """Rows framework x precision x batch (x image size); one column per GPU count."""
    gpus = sorted(df.gpus.unique())
    keys = ["framework", "precision", "batch_size", "image_size"]
    head = ["framework", "precision", "batch", "image"] + [columns_label(n) for n in gpus]
    if df.data_mode.nunique() > 1:  # synthetic and real rows of one cell side by side
        keys, head = keys + ["data_mode"], head[:4] + ["data"] + head[4:]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, g in df.groupby(keys, sort=False):
        by_n = {r["gpus"]: r for _, r in g.iterrows()}
        row = [frameworks.display(key[0])] + [str(k) for k in key[1:]]
        row += [value(by_n[n]) if n in by_n else "" for n in gpus]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _unit(df: pd.DataFrame):
    if set(df.device) == {"cpu"}:
        return lambda n: "{} worker{} (CPU)".format(n, "s" if n > 1 else "")
    return lambda n: "{} GPU{}".format(n, "s" if n > 1 else "")


def markdown(df: pd.DataFrame, machine: Optional[Dict] = None) -> str:
    """The seed-style report: img/s (speedup) per GPU count, efficiency, precision gain, framework
    ratios, repeats, energy; then the cells without a figure and the machine and software."""
    if df.empty:
        return "No results yet.\n"
    cpu, unit = set(df.device) == {"cpu"}, _unit(df)
    out = ["## Images/sec (speedup vs 1 {})".format("worker" if cpu else "GPU"), "",
           _pivot(df, _fmt_cell, unit), ""]
    if cpu:
        out += ["On CPU, N means N worker processes (or contexts) sharing the machine's cores, "
                "not N GPUs.", ""]
    multi = df[df.gpus > 1]
    if len(multi):
        out += ["## Scaling efficiency (speedup / N)", "",
                _pivot(multi, lambda r: _num(r["scaling_efficiency"], "{:.3f}"), unit), ""]
    mixed = df[df.precision.isin(MIXED)]
    if len(mixed):
        out += ["## Precision gain over fp32 (img/s ÷ img/s fp32 − 1, same N)", "",
                _pivot(mixed, lambda r: _num(r["precision_gain"], "{:+.1%}"), unit), ""]
    base = df.ratio_baseline.iloc[0]
    others = df[df.framework != base]
    if len(others) and base is not None:
        out += ["## Framework vs framework (img/s ÷ img/s of {}, same precision, batch, N)".format(
            frameworks.display(base)), "",
                _pivot(others, lambda r: _num(r["framework_ratio"], "{:.2f}×"), unit), ""]
    out += data_table.markdown(data_table.data_table(df))
    out += _repeats_section(df) + _energy_section(df, unit) + _failures_section(df)
    out += provenance(df, machine)
    out += ["fp32 = true FP32 (TF32 off); tf32; fp16 = mixed precision with loss scaling; "
            "bf16 = bfloat16 mixed precision. {}; figures are global images/sec "
            "(median over repeats).".format("Synthetic data" if set(df.data_mode) == {"synthetic"}
                                            else "Data: " + ", ".join(sorted(set(df.data_mode)))),
            ""]
    return "\n".join(out)


def _repeats_section(df: pd.DataFrame) -> List[str]:
    rep = df[df.repeats > 1]
    if not len(rep):
        return []
    lines = ["## Repeats (img/s of each cell over its runs)", "",
             "| framework | precision | batch | image | N | runs | median | min–max | spread | CV "
             "| MLPerf mean |", "|" + "---|" * 11]
    for _, r in rep.iterrows():
        lines.append("| {} | {} | {} | {} | {} | {} | {:.2f} | {:.2f}–{:.2f} | {} | {} | {} |".format(
            frameworks.display(r.framework), r.precision, r.batch_size, r.image_size, r.gpus,
            r.repeats, r.images_per_sec, r.ips_min, r.ips_max, _num(r.spread, "{:.1%}"),
            _num(r.cv, "{:.1%}"), _num(r.mlperf_mean, "{:.2f}") if r.repeats >= 5 else "n<5"))
    return lines + ["", "spread = (max − min) ÷ median; CV = standard deviation ÷ mean; MLPerf "
                    "mean = mean after dropping the fastest and the slowest run (5 runs or more).", ""]


def _energy_section(df: pd.DataFrame, unit) -> List[str]:
    powered = df[df.power_avg_w.notna()]
    if not len(powered):
        return []
    return ["## Energy (img/s per W of the job's GPUs; average power in brackets)", "",
            _pivot(powered, lambda r: "{} ({})".format(_num(r["images_per_watt"], "{:.2f}"),
                                                       _num(r["power_avg_w"], "{:.0f} W")), unit), ""]


def _failures_section(df: pd.DataFrame) -> List[str]:
    bad = df[df.status != "ok"]
    if not len(bad):
        return []
    out = ["## Cells without a figure", ""]
    for _, r in bad.iterrows():
        out.append("- {} {} b{} ×{}{}: **{}** — {}".format(
            r.framework, r.precision, r.batch_size, r.gpus,
            "" if r.data_mode == "synthetic" else " " + r.data_mode, r.status,
            (r.reason or "").splitlines()[0][:200] if r.reason else "no reason recorded"))
    return out + [""]


def provenance(df: pd.DataFrame, machine: Optional[Dict]) -> List[str]:
    """Machine and software lines; a warning when one campaign holds runs on different devices."""
    out = []
    if machine:
        from ..machine import describe
        out += ["Machine: " + describe(machine), ""]
    software = df[df.framework_version.notna()].drop_duplicates(["framework", "framework_version"])
    if len(software):
        out += ["Software: " + "; ".join("{} = {}".format(frameworks.display(r.framework),
                                                          r.framework_version)
                                         for _, r in software.iterrows()), ""]
    for device, g in df[df.device_name.notna()].groupby("device"):
        names = sorted(set(g.device_name))
        if len(names) > 1:
            out += ["**Warning: this campaign holds {} runs on different devices: {}. Compare "
                    "them only knowingly.**".format(device, ", ".join(names)), ""]
    return out


def _num(x, fmt: str) -> str:
    return fmt.format(x) if x is not None else "n/a"


def write(df: pd.DataFrame, out_dir: Path, formats: Sequence[str], machine: Optional[Dict],
          results: Sequence[RunResult] = (), markdown_text: Optional[str] = None) -> List[Path]:
    """report.md / .csv / .json (one record per cell) / .html; runs.csv: one row per run."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = out_dir / "report.{}".format(fmt)
        if fmt == "md":
            path.write_text(markdown_text if markdown_text is not None else markdown(df, machine))
        elif fmt == "csv":
            df.to_csv(path, index=False)
            if results:
                runs(results).to_csv(out_dir / "runs.csv", index=False)
                written.append(out_dir / "runs.csv")
        elif fmt == "html":
            from .html import page
            path.write_text(page(df, machine))
        else:
            path.write_text(json.dumps(df.to_dict(orient="records"), indent=2, default=str) + "\n")
        written.append(path)
    return written
