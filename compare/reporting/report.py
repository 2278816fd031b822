"""The report's sections, built once from the comparator's cells as table models (tables.py):
images/sec with speedup, speedup versus one node, scaling efficiency, precision gain, framework
versus framework, repeats, energy, cells without a figure, provenance. Every ratio carries the half
width of its 95 % interval (intervals.py).
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, List, NamedTuple, Optional

import pandas as pd

from .. import frameworks
from . import data_table, findings
from .comparator import MIXED
from .intervals import pm
from .tables import Section, Table, Text

ROW = ["framework", "precision", "batch_size", "image_size"]
INTERVAL_NOTE = ("± is the half width of the 95 % interval, from the timed windows of each run and "
                 "the spread of the repeats (README: How sure is a figure).")
LEGEND = ("fp32 = true FP32 (TF32 off); tf32; fp16 = mixed precision with loss scaling; bf16 = "
          "bfloat16 mixed precision. {}; figures are global images/sec (median over repeats).")


class Layout(NamedTuple):
    """How a report lays out its pivots: the column label of (nodes, GPUs), the short N of a
    row, whether rows need a layout column (it varies across them), and the unit word."""
    label: Callable[[int, int], str]
    n: Callable[[int, int], str]
    layout_column: bool
    word: str  # "GPU" or "worker"
    data_column: bool = False  # the campaign mixes data modes: rows say which


def _plural(n: int, word: str) -> str:
    return "{} {}{}".format(n, word, "s" if n != 1 else "")


def layout_of(df: pd.DataFrame) -> Layout:
    cpu = set(df.device) == {"cpu"}
    word = "worker" if cpu else "GPU"
    layouts = {x for x in df.layout if x is not None}
    mixed_data = df.data_mode.nunique() > 1
    if (df.nodes == 1).all():
        return Layout(lambda n, g: _plural(g, word) + (" (CPU)" if cpu else ""), lambda n, g: str(g),
                      len(layouts) > 1, word, mixed_data)
    return Layout(lambda n, g: "{} × {}".format(_plural(n, "node"), _plural(g, word)),
                  lambda n, g: "{}×{}".format(n, g), len(layouts) > 1, word, mixed_data)


def _row_label(key, g: pd.DataFrame, lay: Layout) -> List[str]:
    label = [frameworks.display(key[0]), key[1], str(key[2]), str(key[3])]
    if lay.data_column:
        label.append(str(key[4]))
    if lay.layout_column:
        label.append("/".join(sorted({x for x in g.layout if x is not None})) or "?")
    return label


def _head(lay: Layout) -> List[str]:
    return ["framework", "precision", "batch", "image"] + (["data"] if lay.data_column else []) + \
        (["layout"] if lay.layout_column else [])


def pivot(df: pd.DataFrame, title: str, value: Callable, lay: Layout,
          notes: Optional[List[str]] = None) -> Table:
    """Rows framework x precision x batch x image size; one column per (nodes, GPUs per node)."""
    cols = sorted({(int(n), int(g)) for n, g in zip(df.nodes, df.gpus)}, key=lambda c: (c[0] * c[1], c[0]))
    rows = []
    for key, g in df.groupby(ROW + (["data_mode"] if lay.data_column else []), sort=False):
        by = {(int(r["nodes"]), int(r["gpus"])): r for _, r in g.iterrows()}
        rows.append(_row_label(key, g, lay) + [value(by[c]) if c in by else "" for c in cols])
    return Table(title, _head(lay) + [lay.label(n, g) for n, g in cols], rows, list(notes or []))


def _num(x, fmt: str) -> str:
    return fmt.format(x) if x is not None else "n/a"


def _images(r) -> str:
    if r["status"] != "ok":
        return r["status"]
    text = "{:.2f}".format(r["images_per_sec"])
    if r["world_size"] != 1 and r["speedup"] is not None:
        text += " ({})".format(pm(r["speedup"], r["speedup_ci95"], "{:.3f}"))
    return text


@dataclass
class Report:
    """What the numbers say (sentences), then the tables; rendered by tables.py and html.py."""
    summary: Text
    tables: List[Section] = field(default_factory=list)

    def sections(self) -> List[Section]:
        return [self.summary] + self.tables


def build(df: pd.DataFrame, machine: Optional[Dict] = None) -> Report:
    """The seed-style report: findings, img/s (speedup) per GPU count, speedup versus one node,
    efficiency, precision gain, framework ratios, repeats, energy; then the cells without a figure
    and the machine and software."""
    if df.empty:
        return Report(Text("", ["No results yet."]))
    lay, cpu = layout_of(df), set(df.device) == {"cpu"}
    first_notes = [INTERVAL_NOTE]
    if cpu:
        first_notes.append("On CPU, N means N worker processes (or contexts) sharing the machine's "
                           "cores, not N GPUs.")
    out: List[Section] = [pivot(df, "Images/sec (speedup vs 1 {})".format("worker" if cpu else "GPU"),
                                _images, lay, first_notes)]
    multi_node = df[df.nodes > 1]
    if len(multi_node):
        out.append(pivot(multi_node, "Speedup vs one node (img/s ÷ img/s of 1 node, same {} per node)"
                         .format("workers" if cpu else "GPUs"),
                         lambda r: pm(r["speedup_one_node"], r["speedup_one_node_ci95"], "{:.3f}"), lay))
    multi = df[df.world_size > 1]
    if len(multi):
        out.append(pivot(multi, "Scaling efficiency (speedup / N)", lambda r: pm(
            r["scaling_efficiency"], r["scaling_efficiency_ci95"], "{:.3f}"), lay))
    mixed = df[df.precision.isin(MIXED)]
    if len(mixed):
        out.append(pivot(mixed, "Precision gain over fp32 (img/s ÷ img/s fp32 − 1, same N)", lambda r: pm(
            r["precision_gain"], r["precision_gain_ci95"], "{:+.1%}", "{:.1%}"), lay))
    base = df.ratio_baseline.iloc[0]
    others = df[df.framework != base]
    if len(others) and base is not None:
        out.append(pivot(others, "Framework vs framework (img/s ÷ img/s of {}, same precision, batch, N)"
                         .format(frameworks.display(base)), lambda r: pm(
                             r["framework_ratio"], r["framework_ratio_ci95"], "{:.2f}×", "{:.2f}"), lay))
    out += [t for t in (data_table.table(df), repeats(df, lay), energy(df, lay), failures(df, lay))
            if t is not None]
    data = "Synthetic data" if set(df.data_mode) == {"synthetic"} else \
        "Data: " + ", ".join(sorted(set(df.data_mode)))
    out += [provenance(df, machine), Text("", [LEGEND.format(data)])]
    return Report(findings.summary(df, lay), out)


def repeats(df: pd.DataFrame, lay: Layout) -> Optional[Table]:
    rep = df[df.repeats > 1]
    if not len(rep):
        return None
    rows = [[frameworks.display(r.framework), r.precision, str(r.batch_size), str(r.image_size),
             lay.n(r.nodes, r.gpus), str(r.repeats), pm(r.images_per_sec, r.images_per_sec_ci95),
             "{:.2f}–{:.2f}".format(r.ips_min, r.ips_max), _num(r.spread, "{:.1%}"), _num(r.cv, "{:.1%}"),
             _num(r.mlperf_mean, "{:.2f}") if r.repeats >= 5 else "n<5"] for _, r in rep.iterrows()]
    return Table("Repeats (img/s of each cell over its runs)",
                 ["framework", "precision", "batch", "image", "N", "runs", "median", "min–max",
                  "spread", "CV", "MLPerf mean"], rows,
                 ["spread = (max − min) ÷ median; CV = standard deviation ÷ mean; MLPerf mean = mean "
                  "after dropping the fastest and the slowest run (5 runs or more)."])


def energy(df: pd.DataFrame, lay: Layout) -> Optional[Table]:
    powered = df[df.power_avg_w.notna()]
    if not len(powered):
        return None
    return pivot(powered, "Energy (img/s per W of the job's GPUs; average power in brackets)",
                 lambda r: "{} ({})".format(_num(r["images_per_watt"], "{:.2f}"),
                                            _num(r["power_avg_w"], "{:.0f} W")), lay)


def failures(df: pd.DataFrame, lay: Layout) -> Optional[Table]:
    bad = df[df.status != "ok"]
    if not len(bad):
        return None
    rows = [[frameworks.display(r.framework), r.precision, str(r.batch_size), str(r.image_size)]
            + ([r.data_mode] if lay.data_column else []) + [lay.n(r.nodes, r.gpus), r.status,
             r.reason.splitlines()[0][:200] if r.reason else "no reason recorded"]
            for _, r in bad.iterrows()]
    return Table("Cells without a figure", ["framework", "precision", "batch", "image"]
                 + (["data"] if lay.data_column else []) + ["N", "status", "reason"], rows)


def provenance(df: pd.DataFrame, machine: Optional[Dict]) -> Text:
    """Machine, software and layout lines; a warning when one campaign holds runs on different
    devices."""
    lines = []
    if machine:
        from ..machine import describe
        lines.append("Machine: " + describe(machine))
    software = df[df.framework_version.notna()].drop_duplicates(["framework", "framework_version"])
    if len(software):
        lines.append("Software: " + "; ".join("{} = {}".format(frameworks.display(r.framework),
                                                               r.framework_version)
                                              for _, r in software.iterrows()))
    layouts = sorted({x for x in df.layout if x is not None})
    if len(layouts) == 1:
        lines.append("Layout: {} in every cell.".format(layouts[0]))
    warnings = []
    for device, g in df[df.device_name.notna()].groupby("device"):
        names = sorted(set(g.device_name))
        if len(names) > 1:
            warnings.append("Warning: this campaign holds {} runs on different devices: {}. Compare "
                            "them only knowingly.".format(device, ", ".join(names)))
    return Text("", lines, warnings=warnings)
