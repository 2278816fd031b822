"""The report's charts, drawn with matplotlib (Agg, no display) from the comparator's cells.

Each chart function takes the cells DataFrame of `comparator.cells()` (or, for `history` and
`tta_history`, the rows of `history.history()` and `history.tta_history()`) and returns a `Chart`
(title, caption that says how to read it, PNG bytes), or None when there is nothing to draw.
"""
import io
from dataclasses import dataclass
from typing import List, Optional

import pandas as pd

from .. import frameworks
from .tables import n_of

MAX_PANELS = 6


@dataclass
class Chart:
    title: str
    caption: str
    png: bytes


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def _unit(df: pd.DataFrame) -> str:
    return "workers (CPU processes)" if set(df.device) == {"cpu"} else "GPUs"


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    """The cells with a figure; with synthetic and real data in one campaign, the synthetic ones
    (the input-pipeline table of the report compares the two)."""
    ok = df[(df.status == "ok") & df.images_per_sec.notna()]
    return ok[ok.data_mode == "synthetic"] if ok.data_mode.nunique() > 1 else ok


def scaling(df: pd.DataFrame) -> Optional[Chart]:
    """images/sec versus the job's GPU count (nodes × GPUs per node), one line per framework,
    dashed: perfect linear scaling."""
    ok = _ok(df)
    groups = [(k, g) for k, g in ok.groupby(["precision", "batch_size", "image_size", "model",
                                              "mode"], sort=False)
              if g.world_size.nunique() > 1][:MAX_PANELS]
    if not groups:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(groups), figsize=(5.2 * len(groups), 4.2), squeeze=False)
    for ax, ((precision, batch, image, model, mode), g) in zip(axes[0], groups):
        several = g.nodes.nunique() > 1
        # a line per framework and node count: 1 node × 4 GPUs and 2 nodes × 2 GPUs are both 4
        # GPUs, each drawn (keeping one per GPU count left the other out)
        for (fw, nodes), f in g.groupby(["framework", "nodes"], sort=False):
            f = f.sort_values("world_size")
            color = frameworks.color(fw)
            ax.errorbar(f.world_size, f.images_per_sec, yerr=_err(f.images_per_sec_ci95),
                        fmt="o-" if int(nodes) == 1 else "s:", color=color, linewidth=2, capsize=3,
                        label=frameworks.display(fw) + (" ({} node{})".format(
                            nodes, "" if int(nodes) == 1 else "s") if several else ""))
            one = f[f.world_size == 1]
            if len(one):
                base = float(one.images_per_sec.iloc[0])
                ax.plot(f.world_size, base * f.world_size, "--", color=color, alpha=0.5,
                        label="{} ideal".format(frameworks.display(fw)))
        ax.set_title("{}{} · batch {} · {}px{}".format(
            model + " · " if ok.model.nunique() > 1 else "", precision, batch, image,
            _mode(mode, " · ")))
        ax.set_xlabel(_unit(df))
        ax.set_ylabel("images/sec (whole job)")
        ax.set_xticks(sorted(g.world_size.unique()))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return Chart("Throughput versus number of {}".format(_unit(df)),
                 "Each solid line is one framework, its whiskers the 95 % intervals; the dashed "
                 "line of the same colour is perfect scaling (the 1-{} figure times N). The closer "
                 "a solid line stays to its dashed line, the better the framework scales.{}".format(
                     "worker" if set(df.device) == {"cpu"} else "GPU",
                     " A dotted line with squares: the cells on more than one node, at their N "
                     "of all nodes." if (ok.nodes > 1).any() else ""), _png(fig))


def _err(values) -> List[float]:
    """Error bar half widths: the 95 % intervals, 0 where a figure has none."""
    return [float(v) if v is not None and v == v else 0.0 for v in values]


def _bars(ax, labels: List[str], series: List[tuple], fmt: str) -> None:
    """Grouped bars: one group per label, one bar per (name, values, color[, 95 % half widths])
    in series."""
    width = 0.8 / max(1, len(series))
    for i, (name, values, color, *errors) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(labels))]
        bars = ax.bar(xs, [v if v is not None else 0 for v in values], width, label=name, color=color,
                      yerr=_err(errors[0]) if errors else None, capsize=3 if errors else 0)
        for bar, v in zip(bars, values):
            if v is not None:
                ax.annotate(fmt.format(v), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)


def precision_gain(df: pd.DataFrame) -> Optional[Chart]:
    """Per framework: how much faster fp16/bf16/tf32 is than fp32 at the same N, in %."""
    g = df[df.precision_gain.notna()]
    if g.data_mode.nunique() > 1:
        g = g[g.data_mode == "synthetic"]
    if not len(g):
        return None
    plt = _plt()
    labels, series = _grouped(g.assign(gain=100 * g.precision_gain.astype(float),
                                       gain_ci95=100 * g.precision_gain_ci95.astype(float)),
                              ["precision", "gpus", "batch_size"], "{} ×{} b{}", "gain", "gain_ci95")
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(labels) + 3), 4))
    _bars(ax, labels, series, "{:+.0f}%")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel("% faster than fp32")
    return Chart("Mixed-precision gain over true FP32",
                 "Bar height = img/s at that precision ÷ img/s at fp32 − 1, same framework, batch "
                 "and N; the whisker is its 95 % interval. +85 % reads \"85 % faster than FP32\". "
                 "A missing bar: no comparable fp32 cell.", _png(fig))


def framework_bars(df: pd.DataFrame) -> Optional[Chart]:
    """images/sec of each framework side by side at equal precision, batch, image size and N."""
    ok = _ok(df)
    if ok.framework.nunique() < 2:
        return None
    plt = _plt()
    labels, series = _grouped(ok, ["precision", "batch_size", "image_size", "gpus"],
                              "{} b{} {}px ×{}", "images_per_sec", "images_per_sec_ci95")
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(labels) + 3), 4.2))
    _bars(ax, labels, series, "{:.0f}")
    ax.set_ylabel("images/sec (whole job)")
    return Chart("Framework versus framework",
                 "Each group is one setting (precision, batch per {}, image size, N); the taller "
                 "bar is the faster framework there, its whisker the 95 % interval. Missing bar: "
                 "that framework has no figure.".format(
                     "worker" if set(df.device) == {"cpu"} else "GPU"),
                 _png(fig))


def _grouped(ok: pd.DataFrame, keys: List[str], fmt: str, value: str, error: str = ""):
    """Bar groups: one label per distinct `keys` setting, one series per framework (None where
    that framework has no figure for the setting), with the `error` column's half widths."""
    if ok.model.nunique() > 1:  # one group per network too
        keys, fmt = ["model"] + keys, "{} " + fmt
    if "image_size" not in keys and ok.image_size.nunique() > 1:  # and per image size
        keys, fmt = keys + ["image_size"], fmt + " {}px"

    def label(r) -> str:  # a tuned cell is never one bar group with a default cell
        return fmt.format(*(n_of(r["nodes"], r[k]) if k == "gpus" else r[k]  # N: 2, or 2×2
                            for k in keys)) + _mode(r["mode"], " ")
    labels = list(dict.fromkeys(label(r) for _, r in ok.iterrows()))
    series = []
    for fw, f in ok.groupby("framework", sort=False):
        by = {label(r): r[value] for _, r in f.iterrows()}
        errs = {label(r): r[error] for _, r in f.iterrows()} if error else {}
        series.append((frameworks.display(fw), [by.get(lab) for lab in labels], frameworks.color(fw))
                      + ((([errs.get(lab) for lab in labels]),) if error else ()))
    return labels, series


def _mode(mode: str, sep: str) -> str:
    """'' for the default mode, else sep + the mode ('tuned')."""
    return "" if mode in ("default", None) else sep + mode


def energy(df: pd.DataFrame) -> Optional[Chart]:
    """img/s per W, where NVML measured power."""
    ok = _ok(df)
    ok = ok[ok.images_per_watt.notna()]
    if not len(ok):
        return None
    plt = _plt()
    labels, series = _grouped(ok, ["precision", "batch_size", "gpus"], "{} b{} ×{}",
                              "images_per_watt")
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(labels) + 3), 4))
    _bars(ax, labels, series, "{:.2f}")
    ax.set_ylabel("images/sec per watt")
    return Chart("Energy efficiency",
                 "Images per second per watt drawn by the job's GPUs (NVML, averaged over the timed "
                 "region) = images per joule. Higher is better.", _png(fig))


def history(h: pd.DataFrame, title: str) -> Optional[Chart]:
    """One cell over time: img/s with its 95 % interval per campaign, regressions in red."""
    return _over_time(h, "images_per_sec", "images/sec (whole job)", title,
                      "Each point is one campaign (date, commit), with its 95 % interval; a red "
                      "triangle marks a figure worse than the one before beyond noise.")


def tta_history(t: pd.DataFrame, title: str) -> Optional[Chart]:
    """One time-to-accuracy cell over time (history.tta_history's rows): minutes to target with
    its 95 % interval per campaign, regressions (slower) in red; campaigns of another target a
    line of their own (minutes to another target are not the same figure: the table says 'not
    comparable')."""
    return _over_time(t, "minutes", "minutes to target", title,
                      "Each point is one campaign (date, commit): minutes to target, the mean of its "
                      "converged runs, with its 95 % interval; a line joins the campaigns of one "
                      "target; a red triangle marks a time slower than the one before beyond "
                      "noise. Lower is better.", by="target")


def _over_time(rows: pd.DataFrame, value: str, ylabel: str, title: str,
               caption: str, by: Optional[str] = None) -> Optional[Chart]:
    """rows[value] per campaign with rows[value + '_ci95'] as error bars, a red triangle where
    `regression`; None with fewer than two points. by: a column whose values each get a line of
    their own, in the legend, where there are several."""
    ok = rows[rows[value].notna()]
    if len(ok) < 2:
        return None
    plt = _plt()
    xs = list(range(len(ok)))
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(ok) + 3), 3.6))
    groups = sorted(set(ok[by])) if by is not None and by in ok else [None]
    styles = ["o-", "s--", "^:", "d-."]
    for i, g in enumerate(groups):
        mine = [j for j, v in enumerate(ok[by]) if v == g] if g is not None else xs
        ax.errorbar([xs[j] for j in mine], [float(ok[value].iloc[j]) for j in mine],
                    yerr=[ok[value + "_ci95"].iloc[j] or 0.0 for j in mine],
                    fmt=styles[i % len(styles)], color=frameworks.color(ok.framework.iloc[0]),
                    capsize=3, label=None if len(groups) < 2 else "{} {:g}".format(by, g))
    bad = [(x, y) for x, y, flag in zip(xs, ok[value], ok.regression) if flag]
    if bad:
        ax.plot([x for x, _ in bad], [y for _, y in bad], "v", color="#d93025", markersize=11,
                label="regression")
    if bad or len(groups) > 1:
        ax.legend(fontsize=8)
    ax.set_xticks(xs)
    ax.set_xticklabels(["{}\n{}".format(d[:10], c[:7]) for d, c in zip(ok.date, ok.commit)], fontsize=7)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    return Chart(title, caption, _png(fig))


def all_charts(df: pd.DataFrame) -> List[Chart]:
    drawn = (draw(df) for draw in (scaling, precision_gain, framework_bars, energy))
    return [chart for chart in drawn if chart is not None]
