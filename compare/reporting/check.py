"""`compare check CAMPAIGN --reference NAME|CSV [--tolerance 5%]`: pass/fail against a reference.

A cell passes when its figure is at or above published × (1 − tolerance), for each figure the
matching reference row has (images/sec, published speedup). The tolerance is the row's own
`tolerance` column where it has one, else --tolerance. A cell that failed, ran out of memory or
timed out where the reference has a figure falls short; unsupported and skipped cells are listed as
not comparable and do not decide. The median is held against the floor; the ± beside measured ÷
reference shows how far from noise the verdict is.
"""
from typing import List, Tuple

import pandas as pd

from .. import frameworks
from ..errors import UserError
from . import references
from .intervals import pm
from .tables import Section, Table, Text

NO_FIGURE = ("failed", "oom", "timeout")  # fall short; unsupported/skipped do not decide
FIGURES = (("img/s", "images_per_sec", "published_images_per_sec", "ratio"),
           ("speedup", "speedup", "published_speedup", "speedup_ratio"))
PASS, SHORT, NOT_COMPARABLE = "pass", "falls short", "not comparable"


def check(cells: pd.DataFrame, ref: pd.DataFrame, name: str, tolerance: float) -> pd.DataFrame:
    """One row per (cell, reference figure) it matches: measured, published, ratio, floor, verdict."""
    rows = []
    for _, r in references.compare(cells, ref).iterrows():
        for figure, measured, published, ratio in FIGURES:
            if r[published] is None:
                continue
            tol = r.tolerance if r.tolerance is not None else tolerance
            floor = r[published] * (1 - tol)
            if r.status == "ok" and r[measured] is not None:
                verdict, why = (PASS, None) if r[measured] >= floor else (SHORT, "below {:.2f}".format(floor))
            elif r.status in NO_FIGURE:
                verdict, why = SHORT, "no figure: {}{}".format(r.status, " ({})".format(
                    str(r.reason).splitlines()[0][:120]) if r.reason else "")
            else:
                verdict, why = NOT_COMPARABLE, "{}{}".format(r.status, " ({})".format(
                    str(r.reason).splitlines()[0][:120]) if r.reason else "")
            rows.append({**{k: r[k] for k in ("framework", "precision", "batch_size", "image_size",
                                              "nodes", "gpus", "status")},
                         "figure": figure, "measured": r[measured], "published": r[published],
                         "ratio": r[ratio], "ratio_ci95": r[ratio + "_ci95"], "tolerance": tol,
                         "floor": floor, "verdict": verdict, "why": why})
    if not rows:
        raise UserError("reference {}: no cell of the campaign matches one of its rows (matched on "
                        "precision and N, and on framework, batch and image size where it has them); "
                        "nothing to check".format(name))
    d = pd.DataFrame(rows).astype(object)
    return d.where(d.notna(), None)


def _row(r) -> List[str]:
    n = str(r.gpus) if int(r.nodes) == 1 else "{}×{}".format(r.nodes, r.gpus)
    fmt = "{:.2f}" if r.figure == "img/s" else "{:.3f}"
    return [frameworks.display(r.framework), r.precision, str(r.batch_size), n, r.figure,
            fmt.format(r.measured) if r.measured is not None else r.status, fmt.format(r.published),
            pm(r.ratio, r.ratio_ci95, "{:.2f}×", "{:.2f}", missing="—"),
            "{:g}%".format(round(100 * r.tolerance, 3)),
            r.verdict + (": " + r.why if r.why else "")]


def sections(c: pd.DataFrame, name: str) -> Tuple[List[Section], bool]:
    """The check as table models, and whether it passed (no cell falls short, one passes)."""
    head = ["framework", "precision", "batch", "N", "figure", "measured", "reference",
            "measured ÷ reference", "tolerance", "verdict"]
    short, passed = c[c.verdict == SHORT], c[c.verdict == PASS]
    counts = "{} pass, {} fall{} short, {} not comparable (of {} figures the reference has for this " \
             "campaign).".format(len(passed), len(short), "s" if len(short) == 1 else "",
                                 int((c.verdict == NOT_COMPARABLE).sum()), len(c))
    ok = len(short) == 0 and len(passed) > 0
    verdict = ("PASS: every comparable cell is at or above the reference less its tolerance. "
               if ok else "FAIL: " if len(short) else "FAIL: no comparable cell to check. ")
    out: List[Section] = [Text("Check against {}".format(name), [verdict + counts]),
                          Table("", head, [_row(r) for _, r in c.iterrows()], name="check")]
    if len(short):
        out.append(Table("Cells that fall short", head, [_row(r) for _, r in short.iterrows()],
                         name="falls_short"))
    return out, ok
