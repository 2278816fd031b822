"""`compare check CAMPAIGN --reference NAME|CSV [--tolerance 5%]`: pass/fail against a reference.

A cell passes when its figure is at or above published × (1 − tolerance), for each figure the
matching reference row has (images/sec, published speedup). The tolerance is the row's own
`tolerance` column where it has one, else --tolerance. A cell that failed, ran out of memory or
timed out where the reference has a figure falls short, and so does a cell with a figure some of
whose runs have none (a repeat that failed: its figure rests on fewer runs than it ran); unsupported
and skipped cells are listed as not comparable and do not decide. The median is held against the
floor; the ± beside measured ÷ reference shows how far from noise the verdict is.

Images/sec are held only against a reference row of the same GPU model (its `gpu` column, matched
word for word within the device name the runs recorded, e.g. `V100-PCIe` in `Tesla V100-PCIE-16GB`;
a row of another framework never matches): any other row is not comparable, with the reason. A
speedup is a ratio on one machine, so it may cross hardware, and the verdict says so; at N = 1 it
is 1 by definition, not comparable (a cell without a figure there still falls short). Images/sec
are held only against figures of the cell's own data mode (the reference's `data` column; without
one its figures are synthetic): real data includes an input pipeline that synthetic data does not,
so a cell of the other is not comparable, and says so; a speedup may cross data modes as it
crosses hardware, and the verdict says so. A campaign with planned cells still to run
fails: a half-done study does not pass.
"""
import re
from typing import Dict, List, Optional, Sequence, Tuple

import pandas as pd

from ..errors import UserError
from ..store import FAILED_RUN  # what `compare run --resume` runs again
from . import references, tables
from .comparator import rests_on
from .intervals import pm_ratio
from .tables import Section, Table, Text

NO_FIGURE = ("failed", "oom", "timeout")  # fall short; unsupported/skipped do not decide
# a cell of references.compare
KEY = ("framework", "mode", "model", "precision", "batch_size", "image_size", "data_mode", "nodes",
       "gpus")
COLUMNS = list(KEY) + ["status", "repeats", "runs", "figure", "measured", "published", "ratio", "ratio_ci95",
                       "tolerance", "floor", "verdict", "why"]
FIGURES = (("img/s", "images_per_sec", "published_images_per_sec", "ratio"),
           ("speedup", "speedup", "published_speedup", "speedup_ratio"))
PASS, SHORT, NOT_COMPARABLE = "pass", "falls short", "not comparable"


def _words(text) -> List[str]:
    return re.findall(r"[a-z0-9]+", str(text).lower())


def same_gpu(reference_gpu, device: str) -> bool:
    """Whether the reference's GPU model is the device the cell ran on: every word of it is a word
    of the device's name ('a6000' in 'NVIDIA RTX A6000'; 'A100' is not in 'RTX A1000')."""
    ref = _words(reference_gpu) if reference_gpu is not None else []
    return bool(ref) and set(ref) <= set(_words(device))


def device_of(cell, machine: Dict) -> str:
    """What a cell ran on: the device name its runs recorded, else the campaign's machine's."""
    if cell.get("device_name"):
        return str(cell["device_name"])
    gpus = [g.get("name") for g in machine.get("gpus", []) if g.get("name")]
    return gpus[0] if cell.get("device") == "cuda" and gpus else "CPU {}".format(
        machine.get("cpu_model") or "")


def _reason(r) -> str:
    return " ({})".format(str(r.reason).splitlines()[0][:120]) if r.reason else ""


def _verdict(r, figure: str, measured: str, floor: float, device: str) -> Tuple[str, Optional[str]]:
    gpu = r.reference_gpu
    if r.data_mode == "data-only":  # no training: its figure is an input pipeline's ceiling
        return NOT_COMPARABLE, "data-only: the input pipeline alone, no training, against a " \
            "figure of training"
    crossed = references.crossed_data(r)
    if crossed and figure == "img/s":
        return NOT_COMPARABLE, "{} data here, {} in the reference: images/sec are held only " \
            "against figures of the same data (a reference without a data column is " \
            "synthetic)".format(r.data_mode, r.reference_data)
    if figure == "img/s" and not same_gpu(gpu, device):
        return NOT_COMPARABLE, "measured on {}, the reference on {}: images/sec are held only against " \
            "the same GPU model".format(device, gpu if gpu is not None else "a GPU it does not name")
    if r.status == "ok" and r.repeats < r.runs:  # a figure of fewer runs than the cell ran
        verdict, why = SHORT, "{} of its {} runs failed ({}){}".format(
            r.runs - r.repeats, r.runs, r.failed_runs, "; `compare run … --resume` runs {} again".format(
                "it" if r.runs - r.repeats == 1 else "them") if any(
                    s in FAILED_RUN for s in r.failed_statuses) else "")
    elif r.status == "ok" and r[measured] is not None and figure == "speedup" and \
            int(r.nodes) * int(r.gpus) == 1:  # 1 against 1: it would always pass
        return NOT_COMPARABLE, "a speedup at N = 1 is 1 by definition: nothing measured to check"
    elif r.status == "ok" and r[measured] is not None:
        verdict, why = (PASS, None) if r[measured] >= floor else (SHORT, "below {:.2f}".format(floor))
    elif r.status in NO_FIGURE:
        verdict, why = SHORT, "no figure: {}{}".format(r.status, _reason(r))
    elif r.status == "ok":  # a speedup with nothing to divide by
        return NOT_COMPARABLE, "no speedup: the cell at N = 1, the same otherwise, has no figure"
    else:
        return NOT_COMPARABLE, "{}{}".format(r.status, _reason(r))
    if figure == "speedup" and not same_gpu(gpu, device):  # a ratio on one machine may cross
        across = "across hardware: {} here, {} in the reference".format(device, gpu or "unnamed")
        why = across if why is None else "{}; {}".format(why, across)
    if crossed:  # a ratio may cross data modes too, said as plainly
        across = "across data: {} here, {} in the reference".format(r.data_mode, r.reference_data)
        why = across if why is None else "{}; {}".format(why, across)
    return verdict, why


def check(cells: pd.DataFrame, ref: pd.DataFrame, name: str, tolerance: float,
          machine: Optional[Dict] = None, missing: Sequence[str] = ()) -> pd.DataFrame:
    """One row per (cell, reference figure) it matches: measured, published, ratio, floor, verdict."""
    rows = []
    devices = {tuple(c[k] for k in KEY): device_of(c, machine or {}) for _, c in cells.iterrows()}
    for _, r in references.compare(cells, ref).iterrows():
        for figure, measured, published, ratio in FIGURES:
            if r[published] is None:
                continue
            tol = r.tolerance if r.tolerance is not None else tolerance
            floor = r[published] * (1 - tol)
            verdict, why = _verdict(r, figure, measured, floor, devices[tuple(r[k] for k in KEY)])
            rows.append({**{k: r[k] for k in KEY + ("status", "repeats", "runs")},
                         "figure": figure, "measured": r[measured], "published": r[published],
                         "ratio": r[ratio], "ratio_ci95": r[ratio + "_ci95"], "tolerance": tol,
                         "floor": floor, "verdict": verdict, "why": why})
    if not rows and not missing:
        raise UserError("reference {}: no cell of the campaign matches one of its rows (matched on "
                        "network, precision and N, and on framework, batch and image size where it "
                        "has them: {}); nothing to check".format(name, references.unmatched(cells, ref)))
    d = pd.DataFrame(rows, columns=COLUMNS).astype(object)
    return d.where(d.notna(), None)


def _row(r, fields: List[str]) -> List[str]:
    fmt = "{:.2f}" if r.figure == "img/s" else "{:.3f}"
    return tables.label(r, fields) + [
        r.figure, fmt.format(r.measured) + rests_on(r) if r.measured is not None else
        r.status if r.status != "ok" else "n/a",
        fmt.format(r.published),
        pm_ratio(r.ratio, r.ratio_ci95, missing="—"),
        "{:g}%".format(round(100 * r.tolerance, 3)), r.verdict + (": " + r.why if r.why else "")]


def sections(c: pd.DataFrame, name: str, missing: Sequence[str] = (),
             cells: Optional[pd.DataFrame] = None,
             planned: Optional[Sequence[str]] = None) -> Tuple[List[Section], bool]:
    """The check as table models, and whether it passed (no cell falls short, one passes, and no
    planned cell is still to run). A model, data or image column where the campaign (`cells`,
    else the checked ones) has several: as the report's table of the same reference shows them.
    `planned`: the campaign's planned run ids (`missing` among them), counted as the report
    counts them (`runs of cells` where cells repeat)."""
    from ..store import still_to_run
    fields = tables.shown(c if cells is None else cells, ["framework", "model", "mode",
                                                          "precision", "batch_size", "image_size",
                                                          "data_mode", "N"], tables.OPTIONAL_IMAGE)
    head = tables.heading(fields) + ["figure", "measured", "reference", "measured ÷ reference",
                                     "tolerance", "verdict"]
    short, passed = c[c.verdict == SHORT], c[c.verdict == PASS]
    counts = "{} pass, {} fall{} short, {} not comparable (of {} figure{} the reference has for this " \
             "campaign).".format(len(passed), len(short), "s" if len(short) == 1 else "",
                                 int((c.verdict == NOT_COMPARABLE).sum()), len(c), "" if len(c) == 1 else "s")
    ok = len(short) == 0 and len(passed) > 0 and not missing
    verdict = ("PASS: every comparable cell is at or above the reference less its tolerance. "
               if ok else "FAIL: " if len(short) or missing else "FAIL: no comparable cell to check. ")
    lines = [verdict + counts]
    if missing:
        lines.append("{} yet: {}. A half-done campaign does not pass; `compare run … --resume` "
                     "runs {}.".format(still_to_run(missing, missing if planned is None else planned),
                                       ", ".join(missing), "them" if len(missing) != 1 else "it"))
    out: List[Section] = [Text("Check against {}".format(name), lines)]
    if len(c):  # none where no cell has a result yet: the lines above say so, no empty table
        out.append(Table("", head, [_row(r, fields) for _, r in c.iterrows()], name="check"))
    if len(short):
        out.append(Table("Cells that fall short", head,
                         [_row(r, fields) for _, r in short.iterrows()], name="falls_short"))
    return out, ok
