"""`compare diff A B`: machine versus machine (or before versus after) on comparable cells.

Cells match on framework, precision, per-GPU batch, image size and GPU count. A cell is compared
only when both sides have a figure and ran the same model, data, compile switch and options;
every other cell is listed with the reason, never dropped.
"""
import json
import statistics
from typing import Dict, List, Optional

import pandas as pd

from .. import frameworks, machine
from . import metrics

MATCH = ["framework", "precision", "batch_size", "image_size", "gpus"]
SETTINGS = ["model", "data", "compile", "options"]
COLUMNS = MATCH + ["device_a", "device_b", "images_per_sec_a", "images_per_sec_b", "ratio",
                   "comparable", "why"]


def _why_not(a: Optional[pd.Series], b: Optional[pd.Series]) -> Optional[str]:
    if a is None:
        return "missing in A"
    if b is None:
        return "missing in B"
    for side, r in (("A", a), ("B", b)):
        if r["status"] != "ok" or r["images_per_sec"] is None:
            return "{}: {}{}".format(side, r["status"], " ({})".format(
                str(r["reason"]).splitlines()[0][:120]) if r["reason"] else "")
    differ = ["{} {} vs {}".format(k, a[k], b[k]) for k in SETTINGS if a[k] != b[k]]
    if differ:
        return "settings differ: " + "; ".join(differ)
    return None


def _index(df: pd.DataFrame) -> Dict[tuple, pd.Series]:
    return {tuple(r[c] for c in MATCH): r for _, r in df.iterrows()}


def diff(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per cell of A or B: both figures, B ÷ A where comparable, else why not."""
    ia, ib = _index(a), _index(b)
    keys = list(ia) + [k for k in ib if k not in ia]
    rows = []
    for key in keys:
        ra, rb = ia.get(key), ib.get(key)
        why = _why_not(ra, rb)
        rows.append(dict(zip(MATCH, key),
                         device_a=None if ra is None else ra["device"],
                         device_b=None if rb is None else rb["device"],
                         images_per_sec_a=None if ra is None else ra["images_per_sec"],
                         images_per_sec_b=None if rb is None else rb["images_per_sec"],
                         ratio=None if why else metrics.ratio(rb["images_per_sec"], ra["images_per_sec"]),
                         comparable=why is None, why=why))
    d = pd.DataFrame(rows, columns=COLUMNS).astype(object)
    return d.where(d.notna(), None)


def _gpu_label(m: Dict) -> str:
    names = [g.get("name") for g in m.get("gpus", [])]
    return "{}× {}".format(len(names), names[0]) if names else "CPU {}".format(m.get("cpu_model"))


def summary(d: pd.DataFrame, label_a: str = "A", label_b: str = "B") -> str:
    """'B (V100) is 2.20–3.60× as fast as A (T4) over 6 comparable cells (median 2.90×).'"""
    ratios = [r for r in d[d.comparable].ratio if r is not None]
    skipped = int((~d.comparable.astype(bool)).sum())
    tail = "; {} cell{} not comparable (listed below).".format(
        skipped, "s" if skipped != 1 else "") if skipped else "."
    if not ratios:
        return "No comparable cells between {} and {}{}".format(label_a, label_b, tail)
    lo, hi, mid = min(ratios), max(ratios), statistics.median(ratios)
    span = "{:.2f}×".format(lo) if abs(hi - lo) < 0.005 else "{:.2f}–{:.2f}×".format(lo, hi)
    return "{} runs at {} the speed of {} over {} comparable cell{} (median {:.2f}×){}".format(
        label_b, span, label_a, len(ratios), "s" if len(ratios) != 1 else "", mid, tail)


def markdown(d: pd.DataFrame, machine_a: Dict, machine_b: Dict, name_a: str, name_b: str) -> str:
    label_a = "A ({}, {})".format(name_a, _gpu_label(machine_a))
    label_b = "B ({}, {})".format(name_b, _gpu_label(machine_b))
    out = ["## {} versus {}".format(label_b, label_a), "", summary(d, label_a, label_b), "",
           "- A: " + (machine.describe(machine_a) if machine_a else "no machine record"),
           "- B: " + (machine.describe(machine_b) if machine_b else "no machine record")]
    differ = machine.differences(machine_a, machine_b)
    out += ["- Machines differ in: " + "; ".join(differ) if differ else
            "- Same machine fingerprint (CPU, GPUs, driver): a before/after comparison.", ""]
    ok = d[d.comparable.astype(bool)]
    if len(ok):
        out += ["| framework | precision | batch | image | N | A img/s | B img/s | B ÷ A |",
                "|---|---|---|---|---|---|---|---|"]
        for _, r in ok.iterrows():
            out.append("| {} | {} | {} | {} | {} | {:.2f} | {:.2f} | {:.2f}× |".format(
                frameworks.display(r.framework), r.precision, r.batch_size, r.image_size,
                r.gpus, r.images_per_sec_a, r.images_per_sec_b, r.ratio))
        out.append("")
    bad = d[~d.comparable.astype(bool)]
    if len(bad):
        out += ["## Not comparable", ""]
        for _, r in bad.iterrows():
            out.append("- {} {} b{} {}px ×{}: {}".format(r.framework, r.precision, r.batch_size,
                                                         r.image_size, r.gpus, r.why))
        out.append("")
    return "\n".join(out)


def records(d: pd.DataFrame) -> List[Dict]:
    return json.loads(d.to_json(orient="records"))
