"""The report's sections, built once from the comparator's cells as table models (tables.py), and
the one list of them in their order (build): images/sec with speedup, speedup versus one node,
scaling efficiency, precision gain, framework versus framework, repeats, energy, cells without a
figure, provenance; then references, the timeline and the campaign's own sections. Every ratio
carries the half width of its 95 % interval (intervals.py).
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import pandas as pd

from .. import frameworks
from . import data_table, findings, metrics, tables
from .comparator import MIXED, NOTES, rests_on, short_of
from .intervals import pm
from .tables import Section, Table, Text, num

ROW = ["framework", "precision", "batch_size", "image_size"]
INTERVAL_NOTE = ("± is the half width of the 95 % interval, from the timed windows of each run and "
                 "the spread of the repeats (README: How sure is a figure).")
LEGEND = ("fp32 = true FP32 (TF32 off); tf32; fp16 = mixed precision with loss scaling; bf16 = "
          "bfloat16 mixed precision. {}; figures are global images/sec (median over repeats).")
MODES_NOTE = ("mode: default = each framework as a plain script of it runs; tuned = its documented "
              "fastest switches (`compare list modes`) at its best batch. Ratios are taken within "
              "one mode only. batch auto = the fastest batch of a search (its probes, if any, are "
              "listed below); [bN] = the batch it chose.")


class Layout(NamedTuple):
    """How a report lays out its pivots: the column label of (nodes, GPUs), the short N of a
    row, whether rows need a layout column (it varies across them), and the unit word."""
    label: Callable[[int, int], str]
    n: Callable[[int, int], str]
    layout_column: bool
    word: str  # "GPU" or "worker"
    data_column: bool = False  # the campaign mixes data modes: rows say which
    model_column: bool = False  # the campaign holds more than one network: rows say which
    mode_column: bool = False  # a cell is not in the default mode: rows say their mode


def _plural(n: int, word: str) -> str:
    return "{} {}{}".format(n, word, "s" if n != 1 else "")


def layout_of(df: pd.DataFrame) -> Layout:
    cpu = set(df.device) == {"cpu"}
    word = "worker" if cpu else "GPU"
    layouts = {x for x in df.layout if x is not None}
    mixed_data, models = tables.varies(df, "data_mode"), tables.varies(df, "model")
    modes = tables.shows(df, "mode")
    if (df.nodes == 1).all():
        return Layout(lambda n, g: _plural(g, word) + (" (CPU)" if cpu else ""), lambda n, g: str(g),
                      len(layouts) > 1, word, mixed_data, models, modes)
    return Layout(lambda n, g: "{} × {}".format(_plural(n, "node"), _plural(g, word)),
                  lambda n, g: "{}×{}".format(n, g), len(layouts) > 1, word, mixed_data, models, modes)


def _rows(lay: Layout) -> List[str]:
    """The columns that name a row (a pivot's rows are grouped by them): ROW, the model, the mode
    and the data mode where they vary."""
    shown = {"model": lay.model_column, "mode": lay.mode_column, "data_mode": lay.data_column}
    return [c for c in ROW[:1] + ["model", "mode"] + ROW[1:] + ["data_mode"] if shown.get(c, True)]


def _row_label(key, g: pd.DataFrame, lay: Layout) -> List[str]:
    label = [frameworks.display(key[0])] + [str(k) for k in key[1:]]
    if lay.layout_column:
        label.append("/".join(sorted({x for x in g.layout if x is not None})) or "?")
    return label


def _head(lay: Layout) -> List[str]:
    return tables.heading(_rows(lay)) + (["layout"] if lay.layout_column else [])


def _listing(title: str, cells: pd.DataFrame, lay: Layout, head: List[str], values: Callable,
             notes: Sequence[str] = ()) -> Table:
    """A table that lists cells, not a pivot: each cell's label and N, then values(cell) under
    `head`."""
    lay = lay._replace(layout_column=False)
    rows = [[frameworks.display(r.framework)] + [str(r[c]) for c in _rows(lay)[1:]] +
            [lay.n(r.nodes, r.gpus)] + values(r) for _, r in cells.iterrows()]
    label = _head(lay)
    return Table(title, label + ["N"] + head, rows, list(notes), labels=len(label) + 1)


def pivot(df: pd.DataFrame, title: str, value: Callable, lay: Layout,
          notes: Optional[List[str]] = None) -> Table:
    """Rows framework x precision x batch x image size; one column per (nodes, GPUs per node)."""
    cols = sorted({(int(n), int(g)) for n, g in zip(df.nodes, df.gpus)}, key=lambda c: (c[0] * c[1], c[0]))
    rows = []
    for key, g in df.groupby(_rows(lay), sort=False):
        by = {(int(r["nodes"]), int(r["gpus"])): r for _, r in g.iterrows()}
        rows.append(_row_label(key, g, lay) + [value(by[c]) if c in by else "" for c in cols])
    return Table(title, _head(lay) + [lay.label(n, g) for n, g in cols], rows, list(notes or []),
                 labels=len(_head(lay)))


def _images(r) -> str:
    if r["status"] != "ok":
        return r["status"]
    text = "{:.2f}".format(r["images_per_sec"]) + rests_on(r)
    if r["world_size"] != 1 and r["speedup"] is not None:
        text += " ({})".format(pm(r["speedup"], r["speedup_ci95"], "{:.3f}"))
    if r["batch_size"] == "auto" and r["batch_chosen"] is not None:  # the batch its search chose
        text += " [b{}]".format(int(r["batch_chosen"]))
    return text


@dataclass
class Report:
    """What the numbers say (sentences), then the tables; rendered by tables.py and html.py."""
    summary: Text
    tables: List[Section] = field(default_factory=list)

    def sections(self) -> List[Section]:
        return [self.summary] + self.tables


DEFAULTS_TITLE = "Defaults (flags not given: the seeds' study sized to this machine, compare/defaults.py)"


def build(df: pd.DataFrame, machine: Optional[Dict] = None, defaults: Optional[List[str]] = None,
          references: Sequence[Tuple[str, object]] = (), results: Sequence = (),
          more: Sequence[Section] = (), trained: Sequence = ()) -> Report:
    """The report, every section in its order (the one list of them: reporting/__init__.py only
    renders it): the findings; the seed-style tables (throughput_tables); each `--reference`
    compared; where the time goes (timeline.py, from `results`, the study's lines from `trained`
    too); then `more`, the campaign's own sections in campaign_sections' order. A campaign of
    time-to-accuracy runs alone (`trained`) opens with what they reached and its tables (in
    `more`), then where the time went, and ends with the machine and software they ran on."""
    from . import references as refs
    from . import timeline
    if not df.empty:
        rep = Report(findings.summary(df, layout_of(df)), throughput_tables(df, machine, defaults))
    elif trained:
        rep = Report(accuracy_summary(trained))
    else:
        rep = Report(Text("", ["No results yet."]))
    rep.tables += [refs.table(name, refs.compare(df, ref)) for name, ref in references
                   if not df.empty]  # no cell yet: nothing to set beside a published figure
    if df.empty and trained:  # its own tables are its figures: they come first, where a
        # throughput report has its seed-style tables, then where the time went
        from .comparator import runs
        rep.tables += list(more) + timeline.sections(results, machine, trained)
        rep.tables.append(provenance(runs(trained), machine))  # throughput_tables ends with it
    else:
        rep.tables += timeline.sections(results, machine, trained) + list(more)
    return rep


def accuracy_summary(trained: Sequence) -> Text:
    """The opening lines of a campaign of time-to-accuracy runs: its cells and runs, how many
    reached the target, and how many have no figure and why (listed below)."""
    from . import accuracy
    groups = accuracy.cells(trained)
    recs = [x for runs in groups.values() for x in runs]
    targets = ", ".join("{:g}".format(t) for t in sorted({x["target"] for x in recs}))
    by = {}
    for x in recs:
        by[x["status"]] = by.get(x["status"], 0) + 1
    line = "Time to accuracy: {} cell{}, {} run{} to top-1 {}: {} reached the target".format(
        len(groups), "" if len(groups) == 1 else "s", len(recs), "" if len(recs) == 1 else "s",
        targets, by.pop("ok", 0))
    if by:
        line += "; {} (listed under \"{}\")".format(", ".join(
            "{} {}".format(n, status) for status, n in sorted(by.items())), accuracy.NOT_REACHED)
    return Text("", [line + "."])


def campaign_sections(view, results: Sequence, trained: Sequence,
                      price: Optional[float] = None) -> List[Section]:
    """A campaign's own sections, in order, from its View (compare/stages/report.py): time to
    accuracy (its runs, `trained`), the cells not run yet, packed cells against their serial
    twins, the batch searches, result files left out."""
    from ..store import still_to_run
    from . import accuracy, packing, probes
    out: List[Section] = accuracy.tables(trained, price)
    if view.missing:  # a half-done campaign says so, and which cells are still to run
        out.append(Text("Not run yet", ["{}: {}. `compare run … --resume` runs {}.".format(
            still_to_run(view.missing, list(view.meta.get("planned", {}))), ", ".join(view.missing),
            "it" if len(view.missing) == 1 else "them")]))
    out += packing.sections(results, view.root, view.machine)
    searched = probes.table(view.probes, [r for r in results if r.spec.get("batch_auto")])
    out += [searched] if searched is not None else []
    if view.warnings:  # foreign or unreadable files: listed in the report too, never counted
        out.append(Text("Result files left out", list(view.warnings), bullets=True))
    return out


def throughput_tables(df: pd.DataFrame, machine: Optional[Dict] = None,
                      defaults: Optional[List[str]] = None) -> List[Section]:
    """The seed-style tables: img/s (speedup) per GPU count, speedup versus one node, efficiency,
    precision gain; what ran at its default; framework ratios, data, repeats, energy, notes on
    cells, the cells without a figure; the machine and software, and the legend."""
    lay, cpu = layout_of(df), set(df.device) == {"cpu"}
    first_notes = [INTERVAL_NOTE]
    if cpu:
        first_notes.append("On CPU, N means N worker processes (or contexts) sharing the machine's "
                           "cores, not N GPUs.")
    out: List[Section] = [
        pivot(df, "Images/sec (speedup vs 1 {})".format("worker" if cpu else "GPU"), _images, lay,
              first_notes),
        pivot(df[df.nodes > 1], "Speedup vs one node (img/s ÷ img/s of 1 node, same {} per node)"
              .format("workers" if cpu else "GPUs"),
              lambda r: pm(r["speedup_one_node"], r["speedup_one_node_ci95"], "{:.3f}"), lay),
        pivot(df[df.world_size > 1], "Scaling efficiency (speedup / N)", lambda r: pm(
            r["scaling_efficiency"], r["scaling_efficiency_ci95"], "{:.3f}"), lay),
        precision_gains(df[df.precision.isin(MIXED)], lay)]
    # the seeds' tables first (img/s with speedup, efficiency, precision gain), then what ran at
    # its default, then the rest
    out += [Text(DEFAULTS_TITLE, list(defaults), bullets=True)] if defaults else []
    out += [framework_ratios(df, lay), data_table.table(df), repeats(df, lay), energy(df, lay),
            cell_notes(df, lay), failures(df, lay), failed_runs(df, lay)]
    # no table without a row (no multi-node cell, no repeats) or a value, no column without a
    # value in any row (one GPU count, one precision)
    out = [p for p in (t.pruned() if isinstance(t, Table) else t for t in out if t is not None)
           if p is not None]
    data = "Synthetic data" if set(df.data_mode) == {"synthetic"} else \
        "Data: " + ", ".join(sorted(set(df.data_mode)))
    legend = [LEGEND.format(data)]
    if lay.mode_column or (df.batch_size == "auto").any():
        legend.append(MODES_NOTE)
    return out + [provenance(df, machine), Text("", legend)]


NOTED = ("(note): the cell carries a note (Notes on cells, below): its precision ran without the "
         "hardware made for it, so its gain says little about that precision.")


def precision_gains(mixed: pd.DataFrame, lay: Layout) -> Table:
    """Each mixed precision over fp32 at the same N; a gain whose cell ran its precision on a
    CPU without the instructions for it (a note) is marked so."""
    marked = []

    def value(r) -> str:
        text = pm(r["precision_gain"], r["precision_gain_ci95"], "{:+.1%}", "{:.1%}")
        if r["precision_gain"] is not None and r["note"]:
            marked.append(r)
            text += " (note)"
        return text
    table = pivot(mixed, "Precision gain over fp32 (img/s ÷ img/s fp32 − 1, same N)", value, lay)
    if marked:
        table.notes.append(NOTED)
    return table


def cell_notes(df: pd.DataFrame, lay: Layout) -> Table:
    """What the runs of a cell said about how its figure came about (fp16 on a CPU, bf16 emulated,
    workers run as one process), once per framework, precision and note, with the N it holds at."""
    said = pd.Series(["; ".join(str(r[k]) for k in NOTES if r[k]) for _, r in df.iterrows()],
                     index=df.index, dtype=object)
    noted = df.assign(said=said)[(said != "") & (df.status == "ok")]
    plain = lay._replace(layout_column=False)
    rows = []
    for key, g in noted.groupby(_rows(plain) + ["said"], sort=False):
        ns = sorted({(int(r.nodes), int(r.gpus)) for _, r in g.iterrows()}, key=lambda c: c[0] * c[1])
        rows.append(_row_label(key[:-1], g, plain) + [", ".join(lay.n(n, p) for n, p in ns), key[-1]])
    head = _head(plain)
    return Table("Notes on cells", head + ["N", "note"], rows, labels=len(head) + 1)


PIPELINES_NOTE = ("(pipelines): real-data cells where either cell is input-bound (data efficiency "
                  "below {:.2f}) or not known to be within it, and data-only cells: the ratio "
                  "compares the two input pipelines, not the frameworks.")


def framework_ratios(df: pd.DataFrame, lay: Layout) -> Optional[Table]:
    """Framework vs framework; a real-data ratio that an input pipeline bounds says so."""
    base = df.ratio_baseline.iloc[0]
    others = df[df.framework != base]
    if not len(others) or base is None:
        return None
    verdicts = data_table.pipeline_verdicts(df)
    marked = []

    def value(r) -> str:
        text = pm(r["framework_ratio"], r["framework_ratio_ci95"], "{:.2f}×", "{:.2f}")
        if r["framework_ratio"] is not None and data_table.pipelines_compared(r, base, verdicts):
            marked.append(r)
            text += " (pipelines)"
        return text
    table = pivot(others, "Framework vs framework (img/s ÷ img/s of {}, same {}precision, batch, "
                  "N)".format(frameworks.display(base), "mode, " if lay.mode_column else ""),
                  value, lay)
    if marked:
        table.notes.append(PIPELINES_NOTE.format(metrics.INPUT_BOUND))
    return table


def repeats(df: pd.DataFrame, lay: Layout) -> Table:
    def values(r) -> List[str]:
        # the ok runs its figure is of, 'of' all it ran where some have no figure (as '(2 of 3 runs)')
        return [str(r.repeats) if r.repeats >= r.runs else "{} of {}".format(r.repeats, r.runs),
                pm(r.images_per_sec, r.images_per_sec_ci95),
                "{:.2f}–{:.2f}".format(r.ips_min, r.ips_max), num(r.spread, "{:.1%}"),
                num(r.cv, "{:.1%}"), mlperf_mean(r)]
    return _listing("Repeats (img/s of each cell over its runs)", df[df.repeats > 1], lay,
                    ["runs", "median", "min–max", "spread", "CV", "MLPerf mean"], values,
                    ["spread = (max − min) ÷ median; CV = standard deviation ÷ mean; MLPerf mean = "
                     "mean after dropping the fastest and the slowest run (5 runs or more)."])


def mlperf_mean(r) -> str:
    """A cell's MLPerf mean; 'n<5' where it ran fewer than 5 runs, '4 of 5 runs (1 timeout)'
    where it ran 5 but some have no figure."""
    if r.repeats >= 5:
        return num(r.mlperf_mean, "{:.2f}")
    return short_of(r.repeats, r.runs, r.failed_statuses) if r.runs >= 5 else "n<5"


def energy(df: pd.DataFrame, lay: Layout) -> Table:
    measured = df[df.power_avg_w.notna()]
    notes = ["On more than one node, the power is measured on the first node's GPUs (rank 0 "
             "samples them) and counted once per node: the other nodes are taken to draw the "
             "same."] if (measured.nodes > 1).any() else []
    return pivot(measured, "Energy (img/s per W of the job's GPUs; average power in brackets)",
                 lambda r: "{} ({})".format(num(r["images_per_watt"], "{:.2f}"),
                                            num(r["power_avg_w"], "{:.0f} W")), lay, notes)


def failures(df: pd.DataFrame, lay: Layout) -> Table:
    return _listing("Cells without a figure", df[df.status != "ok"], lay, ["status", "reason"],
                    lambda r: [r.status, r.reason.splitlines()[0][:200] if r.reason
                               else "no reason recorded"])


def failed_runs(df: pd.DataFrame, lay: Layout) -> Table:
    """The cells with a figure some of whose runs have none: which runs, and why (their figure
    rests on the others, and says so: '(2 of 3 runs)')."""
    return _listing("Runs without a figure in cells that have one",
                    df[(df.status == "ok") & df.failed_runs.notna()], lay, ["ok runs", "the others"],
                    lambda r: ["{} of {}".format(r.repeats, r.runs), r.failed_runs],
                    ["The cell's figure is the median of its ok runs alone; `compare run … --resume` "
                     "runs its failed and timed-out runs again."])


def provenance(df: pd.DataFrame, machine: Optional[Dict]) -> Text:
    """Machine, software and layout lines; a warning when one campaign holds runs on different
    devices."""
    lines = []
    if machine:
        from ..machine_record import describe
        lines.append("Machine: " + describe(machine))
    elif machine is not None:  # a campaign's, read and empty: said, as `compare diff` says it
        lines.append("Machine: no machine record (machine.json missing or empty): what it ran on "
                     "is not known.")
    software = df[df.framework_version.notna()].drop_duplicates(["framework", "framework_version"])
    if len(software):
        lines.append("Software: " + "; ".join("{} = {}".format(frameworks.display(r.framework),
                                                               r.framework_version)
                                              for _, r in software.iterrows()))
    layouts = sorted({x for x in df.layout if x is not None})
    if len(layouts) == 1:
        lines.append("Layout: {} in every cell.".format(layouts[0]))
    if set(df["mode"]) == {"default"}:  # else a mode column names each row's
        lines.append("Mode: default in every cell (each framework as a plain script of it runs; "
                     "`--mode tuned` runs each at its fastest).")
    warnings = []
    for device, g in df[df.device_name.notna()].groupby("device"):
        names = sorted(set(g.device_name))
        if len(names) > 1:
            warnings.append("Warning: this campaign holds {} runs on different devices: {}. Compare "
                            "them only knowingly.".format(device, ", ".join(names)))
    return Text("", lines, warnings=warnings)
