"""`compare diff A B`: machine versus machine (or before versus after) on comparable cells.

Cells match on framework, model, precision, per-GPU batch, image size, data mode, mode (default,
tuned: never across), nodes and GPUs per node. A cell is compared only when both sides have a
figure and ran the same data, compile switch and
options; every other cell is listed with the reason, never dropped. Each compared cell gets B ÷ A
with its 95 % interval and a state: better (B faster), worse, within noise (intervals.py), or not
comparable; the output ends with the count of each.
"""
import json
import statistics
from typing import Dict, List, Optional

import pandas as pd

from .. import machine_record
from . import findings, intervals, tables
from .comparator import estimate, rests_on
from .intervals import pm_ratio
from .tables import Section, Table, Text

MATCH = ["framework", "model", "precision", "batch_size", "image_size", "data_mode", "mode", "nodes",
         "gpus"]
SETTINGS = ["data", "compile", "options"]
# runs_X: the runs a side's cell ran; repeats_X: the ok ones its figure rests on (counts, for a
# machine reading diff.csv; the Markdown says "(2 of 3 runs)" where they differ)
# both ratios of a diff, img/s and minutes to target, are B's speed over A's (> 1: B faster; the
# csv's `ratio` too): one heading says so, as history's says now over previous
SPEED = "speed B ÷ A"
COLUMNS = MATCH + ["device_a", "device_b", "images_per_sec_a", "images_per_sec_b", "runs_a",
                   "repeats_a", "runs_b", "repeats_b", "ratio", "ratio_ci95", "state", "comparable",
                   "why"]


def why_not(a: Optional[pd.Series], b: Optional[pd.Series], names=("A", "B")) -> Optional[str]:
    """Why two cell records cannot be divided (None: they can)."""
    if a is None:
        return "missing in {}".format(names[0])
    if b is None:
        return "missing in {}".format(names[1])
    for side, r in zip(names, (a, b)):
        if r["status"] != "ok" or r["images_per_sec"] is None:
            return "{}: {}{}".format(side, r["status"], " ({})".format(
                str(r["reason"]).splitlines()[0][:120]) if r["reason"] else "")
    differ = ["{} {} vs {}".format(k, a[k], b[k]) for k in SETTINGS if a[k] != b[k]]
    return "settings differ: " + "; ".join(differ) if differ else None


def versus(a: Optional[pd.Series], b: Optional[pd.Series], names=("A", "B")) -> Dict:
    """B ÷ A of two cell records: ratio, half width of its interval, state and why not."""
    why = why_not(a, b, names)
    r = None if why else intervals.ratio(estimate(b), estimate(a))
    hw = r.half_width() if r else None
    if r is not None and hw is None:
        why = "no interval: a side has one run with one timed window"
    return {"ratio": r.value if r else None, "ratio_ci95": hw, "why": why,
            "state": intervals.NOT_COMPARABLE if why else intervals.state(r.value, hw),
            "comparable": why is None}


def _index(df: pd.DataFrame) -> Dict[tuple, pd.Series]:
    return {tuple(r[c] for c in MATCH): r for _, r in df.iterrows()}


def diff(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per cell of A or B: both figures, B ÷ A with its interval and state, else why not."""
    ia, ib = _index(a), _index(b)
    rows = []
    for key in list(ia) + [k for k in ib if k not in ia]:
        ra, rb = ia.get(key), ib.get(key)
        rows.append(dict(zip(MATCH, key), device_a=None if ra is None else ra["device"],
                         device_b=None if rb is None else rb["device"],
                         images_per_sec_a=None if ra is None else ra["images_per_sec"],
                         images_per_sec_b=None if rb is None else rb["images_per_sec"],
                         runs_a=None if ra is None else int(ra["runs"]),
                         repeats_a=None if ra is None else int(ra["repeats"]),
                         runs_b=None if rb is None else int(rb["runs"]),
                         repeats_b=None if rb is None else int(rb["repeats"]),
                         **versus(ra, rb)))
    d = pd.DataFrame(rows, columns=COLUMNS).astype(object)
    return d.where(d.notna(), None)


def _rests_on(r, side: str, used: str = "repeats") -> str:
    """' (2 of 3 runs)' where a compared side's figure rests on fewer runs (`used`: its ok
    repeats, or a time-to-accuracy cell's converged runs) than it ran."""
    return rests_on({"status": "ok", "repeats": r[used + "_" + side], "runs": r["runs_" + side]})


def _gpu_label(m: Dict) -> str:
    """'1× Tesla T4'; every GPU model of a machine of several (as machine_record.describe names
    them); its CPU without GPUs; 'no machine record' for a campaign without machine.json."""
    if not m:
        return "no machine record"
    names = [g.get("name") for g in m.get("gpus", [])]
    return "{}× {}".format(len(names), ", ".join(sorted(set(map(str, names))))) if names else \
        "CPU {}".format(m.get("cpu_model") or "unknown")


def summary(d: pd.DataFrame, label_a: str = "A", label_b: str = "B") -> str:
    """'B (V100) is 2.20–3.60× as fast as A (T4) over 6 comparable cells (median 2.90×).'"""
    ratios = [r for r in d[d.comparable.astype(bool)].ratio if r is not None]
    skipped = int((~d.comparable.astype(bool)).sum())
    tail = "; {} cell{} not comparable (listed below).".format(
        skipped, "s" if skipped != 1 else "") if skipped else "."
    if not ratios:
        return "No comparable cells between {} and {}{}".format(label_a, label_b, tail)
    lo, hi, mid = min(ratios), max(ratios), statistics.median(ratios)
    span = "{:.2f}×".format(lo) if abs(hi - lo) < 0.005 else "{:.2f}–{:.2f}×".format(lo, hi)
    return "{} runs at {} the speed of {} over {} comparable cell{} (median {:.2f}×){}".format(
        label_b, span, label_a, len(ratios), "s" if len(ratios) != 1 else "", mid, tail)


def counts(states) -> str:
    """'Cells: 1 better, 0 worse, 5 within noise, 3 not comparable.'"""
    states = list(states)
    return "Cells: " + ", ".join("{} {}".format(states.count(s), s) for s in intervals.STATES) + "."


def sections(d: pd.DataFrame, a: pd.DataFrame, b: pd.DataFrame, machine_a: Dict, machine_b: Dict,
             name_a: str, name_b: str, t: Optional[pd.DataFrame] = None) -> List[Section]:
    """The diff as table models: summary and machines, the compared cells, the rest, the
    time-to-accuracy cells (t, tta_diff), the counts."""
    t = t if t is not None else pd.DataFrame(columns=TTA_COLUMNS)
    label_a = "A ({}, {})".format(name_a, _gpu_label(machine_a))
    label_b = "B ({}, {})".format(name_b, _gpu_label(machine_b))
    unknown = [side for side, m in (("A", machine_a), ("B", machine_b)) if not m]
    differ = [] if unknown else machine_record.differences(machine_a, machine_b)
    said = ([summary(d, label_a, label_b)] if len(d) or not len(t) else []) + \
        ([tta_summary(t, label_a, label_b)] if len(t) else [])
    head = Text("{} versus {}".format(label_b, label_a), said)
    lines = ["A: " + (machine_record.describe(machine_a) if machine_a else "no machine record"),
             "B: " + (machine_record.describe(machine_b) if machine_b else "no machine record"),
             "Whether the machines differ is unknown: {} no machine record.".format(
                 " and ".join(unknown) + (" have" if len(unknown) > 1 else " has")) if unknown else
             "Machines differ in: " + "; ".join(differ) if differ else
             "Same machine fingerprint (CPU, GPUs, driver): a before/after comparison."]
    if any(findings.smoke(r) for df in (a, b) for _, r in df[df.status == "ok"].iterrows()):
        lines.append("Single runs on a CPU: their intervals only count the noise inside one run, so "
                     "a state from them is a hint, not a finding (use --repeats 3 or more).")
    out: List[Section] = [head, Text("", lines, bullets=True)]
    ok = d[d.comparable.astype(bool)]
    # the model and the data mode only where the campaigns hold several
    fields = tables.shown(d, ["framework", "model", "mode", "precision", "batch_size",
                              "image_size", "data_mode", "N"])
    first = tables.heading(fields)
    if len(ok):
        out.append(Table("", first + ["A img/s", "B img/s", SPEED, "state"],
                         [tables.label(r, fields) + ["{:.2f}".format(r.images_per_sec_a) + _rests_on(r, "a"),
                           "{:.2f}".format(r.images_per_sec_b) + _rests_on(r, "b"),
                           pm_ratio(r.ratio, r.ratio_ci95), r.state]
                          for _, r in ok.iterrows()],
                         [SPEED + " = B's img/s ÷ A's img/s; > 1: B is faster."], name="diff"))
    bad = d[~d.comparable.astype(bool)]
    if len(bad):
        out.append(Table("Not comparable", first + ["why"],
                         [tables.label(r, fields) + [r.why] for _, r in bad.iterrows()],
                         name="not_comparable"))
    if len(t):
        out.append(tta_table(t))
    return out + [Text("", [counts(list(d.state) + list(t.state))])]


def records(d: pd.DataFrame) -> List[Dict]:
    return json.loads(d.to_json(orient="records"))


# --- time to accuracy: minutes to target of B against A, over the seeds of each side ----------
TTA_MATCH = ["framework", "model", "mode", "precision", "batch_size", "image_size", "nodes", "gpus"]
# what a time to target depends on beyond the cell: the target, the data, and the recipe's
# schedule (--max-epochs: warm-up, then decay to its end) and how often it is looked for
TTA_SETTINGS = ["target", "data", "max_epochs", "eval_every"]
TTA_COLUMNS = TTA_MATCH + ["device_a", "device_b", "minutes_a", "minutes_a_ci95", "minutes_b",
                           "minutes_b_ci95", "converged_a", "runs_a", "converged_b", "runs_b",
                           "ratio", "ratio_ci95", "state", "comparable", "why"]


def tta_cells(results) -> Dict[tuple, Dict]:
    """The time-to-accuracy cells of these runs (any device: diff crosses machines), each with
    its minutes to target over its converged seeds (mean with its interval, as the report's)."""
    from . import accuracy
    groups: Dict[tuple, List[Dict]] = {}
    for r in results:
        if accuracy.is_accuracy(r):
            spec = r.spec or {}
            rec = dict(accuracy.record(r), data=spec.get("data"),
                       max_epochs=spec.get("max_epochs"), eval_every=spec.get("eval_every", 1),
                       framework_version=r.framework_version)
            groups.setdefault(tuple(rec[k] for k in TTA_MATCH), []).append(rec)
    out = {}
    for key, runs in groups.items():
        s, last = accuracy.summary(runs), runs[-1]
        missed = [x for x in runs if x["status"] != "ok"]
        out[key] = dict(zip(TTA_MATCH, key), device=last["device"], target=last["target"],
                        data=last["data"], max_epochs=last["max_epochs"],
                        eval_every=last["eval_every"], framework_version=next((
                            x["framework_version"] for x in reversed(runs)
                            if x["framework_version"]), None),
                        runs=len(runs), converged=s["converged"],
                        minutes=s["minutes"], status=missed[-1]["status"] if missed else "ok",
                        reason=missed[-1]["reason"] if missed else None)
    return out


def _tta_why_not(a: Optional[Dict], b: Optional[Dict], names=("A", "B")) -> Optional[str]:
    """Why two time-to-accuracy cells cannot be divided (None: they can), each side called by
    its name in `names` (history: before, now), as why_not names them."""
    if a is None or b is None:
        return "missing in {}".format(names[0] if a is None else names[1])
    # other settings first: a side that did not reach 0.99 says nothing against one that reached 0.5
    differ = ["{} {} vs {}".format(k, a[k], b[k]) for k in TTA_SETTINGS if a[k] != b[k]]
    if differ:
        return "settings differ: " + "; ".join(differ)
    for side, c in zip(names, (a, b)):
        if not c["converged"]:
            return "{}: no run reached the target ({} of {}: {}{})".format(
                side, c["runs"] - c["converged"], c["runs"], c["status"], ", " + str(
                    c["reason"]).splitlines()[0][:120] if c["reason"] else "")
    return None


def tta_diff(a: Dict[tuple, Dict], b: Dict[tuple, Dict], names=("A", "B")) -> pd.DataFrame:
    """One row per time-to-accuracy cell of A or B: minutes to target on each side and A ÷ B
    (B's speed over A's, as diff's img/s ratio: how many times faster B trains to the target)
    with its 95 % interval from the seeds' spread, and its state; else why not (a side without a
    converged run, another target, data set, --max-epochs or --eval-every, a side of one seed: no
    interval)."""
    rows = []
    for key in list(a) + [k for k in b if k not in a]:
        ca, cb = a.get(key), b.get(key)
        why = _tta_why_not(ca, cb, names)
        r = None if why else intervals.ratio(ca["minutes"], cb["minutes"])
        hw = r.half_width() if r else None
        if r is not None and hw is None:
            why = "no interval: a side has one converged run (one seed); use --repeats 5 as MLPerf does"
        row = dict(zip(TTA_MATCH, key), ratio=r.value if r else None, ratio_ci95=hw, why=why,
                   state=intervals.NOT_COMPARABLE if why else intervals.state(r.value, hw),
                   comparable=why is None)
        for side, c in (("a", ca), ("b", cb)):
            m = c["minutes"] if c else None
            row.update({"device_" + side: c["device"] if c else None,
                        "minutes_" + side: m.value if m else None,
                        "minutes_{}_ci95".format(side): m.half_width() if m else None,
                        "converged_" + side: c["converged"] if c else None,
                        "runs_" + side: c["runs"] if c else None})
        rows.append(row)
    d = pd.DataFrame(rows, columns=TTA_COLUMNS).astype(object)
    return d.where(d.notna(), None)


def tta_summary(t: pd.DataFrame, label_a: str = "A", label_b: str = "B") -> str:
    """'B trains to the target 2.20× as fast as A over 1 comparable time-to-accuracy cell.'"""
    ratios = [r for r in t[t.comparable.astype(bool)].ratio if r is not None]
    skipped = len(t) - len(ratios)
    tail = "; {} not comparable (listed below).".format(skipped) if skipped else "."
    if not ratios:
        return "No comparable time-to-accuracy cells between {} and {}{}".format(label_a, label_b, tail)
    lo, hi = min(ratios), max(ratios)
    span = "{:.2f}×".format(lo) if abs(hi - lo) < 0.005 else "{:.2f}–{:.2f}×".format(lo, hi)
    return "{} trains to the target {} as fast as {} over {} comparable time-to-accuracy cell{}{}".format(
        label_b, span, label_a, len(ratios), "s" if len(ratios) != 1 else "", tail)


def tta_table(t: pd.DataFrame) -> Table:
    def minutes(r, side):
        if r["minutes_" + side] is None:
            return "n/a"
        return intervals.pm_minutes(r["minutes_" + side], r["minutes_{}_ci95".format(side)]) + \
            _rests_on(r, side, "converged")
    fields = tables.shown(t, ["framework", "model", "mode", "precision", "batch_size", "image_size", "N"])
    rows = [tables.label(r, fields) + [minutes(r, "a"), minutes(r, "b"),
                                       pm_ratio(r.ratio, r.ratio_ci95),
                                       r.state if r.comparable else "not comparable: " + r.why]
            for _, r in t.iterrows()]
    return Table("Time to accuracy (minutes to target)", tables.heading(fields) + [
        "A minutes", "B minutes", SPEED, "state"], rows,
        ["minutes = run_start → run_stop, the mean of each side's converged runs (one seed each) ± "
         "the half width of its 95 % interval; " + SPEED + " = A's minutes ÷ B's minutes; > 1: B "
         "trains to the target faster. Epochs "
         "to converge vary with the seed (MLPerf v0.5): throughput is the fairer cross-hardware "
         "figure."], name="diff_time_to_accuracy", labels=len(fields))
