"""Comparator and reports: results -> one record per cell -> the seed-style tables.

A cell is framework x precision x per-GPU batch x image size x device x GPU count; its figure
is the median over ok repeats. Speedup, scaling efficiency and precision gain are computed only
between comparable cells (same everything but the one axis), never across a failed cell.
"""
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pandas as pd

from backends.protocol import RunResult

from . import frameworks, metrics
from .errors import UserError

FORMATS = ("md", "csv", "json")
GROUP = ["framework", "precision", "batch_size", "image_size", "device"]
MIXED = ("fp16", "bf16", "tf32")


def parse_formats(csv: str) -> List[str]:
    items = [s.strip().lower() for s in csv.split(",") if s.strip()]
    if not items:
        raise UserError("--format is empty; choose from {}".format(", ".join(FORMATS)))
    for f in items:
        if f not in FORMATS:
            raise UserError("unknown format {!r}; choose from {}".format(f, ", ".join(FORMATS)))
    return items


def _row(r: RunResult) -> Dict:
    s = r.spec
    return {"framework": s.get("framework"), "precision": s.get("precision"),
            "batch_size": s.get("batch_size"), "image_size": s.get("image_size"),
            "device": s.get("device"), "gpus": s.get("gpus"), "repeat": s.get("repeat", 0),
            "status": r.status, "images_per_sec": r.images_per_sec if r.status == "ok" else None,
            "distribution": r.distribution, "reason": r.reason}


def cells(results: Sequence[RunResult]) -> pd.DataFrame:
    """One record per cell with images_per_sec, speedup, scaling_efficiency, precision_gain."""
    cols = GROUP + ["gpus", "status", "repeats", "images_per_sec", "speedup",
                    "scaling_efficiency", "precision_gain", "distribution", "reason"]
    if not results:
        return pd.DataFrame(columns=cols)
    runs = pd.DataFrame([_row(r) for r in results])
    out = []
    for key, g in runs.groupby(GROUP + ["gpus"], sort=False):
        ok = g[g.status == "ok"]
        out.append(dict(zip(GROUP + ["gpus"], key),
                        status="ok" if len(ok) else g.status.iloc[-1],
                        repeats=int(len(ok)),
                        images_per_sec=float(ok.images_per_sec.median()) if len(ok) else None,
                        distribution=(ok if len(ok) else g).distribution.iloc[-1],
                        reason=None if len(ok) else g.reason.iloc[-1]))
    df = pd.DataFrame(out)
    ips = {tuple(r[c] for c in GROUP + ["gpus"]): r["images_per_sec"] for _, r in df.iterrows()}
    sp, eff, gain = [], [], []
    for _, r in df.iterrows():
        base = tuple(r[c] for c in GROUP)
        s = metrics.speedup(r.images_per_sec, ips.get(base + (1,)))
        sp.append(s)
        eff.append(metrics.scaling_efficiency(s, int(r.gpus)))
        fp32 = (r.framework, "fp32") + base[2:] + (r.gpus,)
        gain.append(metrics.precision_gain(r.images_per_sec, ips.get(fp32))
                    if r.precision in MIXED else None)
    df["speedup"], df["scaling_efficiency"], df["precision_gain"] = sp, eff, gain
    df = df.astype(object).where(df.notna(), None)
    return df[cols]


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
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, g in df.groupby(keys, sort=False):
        by_n = {r["gpus"]: r for _, r in g.iterrows()}
        row = [frameworks.get(key[0]).display, key[1], str(key[2]), str(key[3])]
        row += [value(by_n[n]) if n in by_n else "" for n in gpus]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def markdown(df: pd.DataFrame, machine: Optional[Dict] = None) -> str:
    """The seed-style report: img/s (speedup) per GPU count, efficiency, precision gain."""
    if df.empty:
        return "No results yet.\n"
    cpu = set(df.device) == {"cpu"}
    unit = (lambda n: "{} worker{} (CPU)".format(n, "s" if n > 1 else "")) if cpu else \
        (lambda n: "{} GPU{}".format(n, "s" if n > 1 else ""))
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
    bad = df[df.status != "ok"]
    if len(bad):
        out += ["## Cells without a figure", ""]
        for _, r in bad.iterrows():
            out.append("- {} {} b{} ×{}: **{}** — {}".format(
                r.framework, r.precision, r.batch_size, r.gpus, r.status,
                (r.reason or "").splitlines()[0][:200] if r.reason else "no reason recorded"))
        out.append("")
    if machine:
        gpus = ", ".join(g["name"] for g in machine.get("gpus", [])) or "none"
        out += ["Machine: {} · {} cores · {} GiB · GPUs: {}".format(
            machine.get("cpu_model"), machine.get("cpu_count"), machine.get("memory_gib"), gpus), ""]
    out += ["fp32 = true FP32 (TF32 off); tf32; fp16 = mixed precision with loss scaling; "
            "bf16 = bfloat16 mixed precision. Synthetic data; figures are global images/sec "
            "(median over repeats).", ""]
    return "\n".join(out)


def _num(x, fmt: str) -> str:
    return fmt.format(x) if x is not None else "n/a"


def write(df: pd.DataFrame, out_dir: Path, formats: Sequence[str], machine: Optional[Dict]) -> List[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = out_dir / "report.{}".format(fmt)
        if fmt == "md":
            path.write_text(markdown(df, machine))
        elif fmt == "csv":
            df.to_csv(path, index=False)
        else:
            path.write_text(json.dumps(df.to_dict(orient="records"), indent=2, default=str) + "\n")
        written.append(path)
    return written
