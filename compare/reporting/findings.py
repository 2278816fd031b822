"""The report in sentences ("What the numbers say"), claiming only what the intervals support.

A difference is stated only where its 95 % interval excludes "no difference"; otherwise the
sentence says "within noise (±x %)". Cells that are single runs on a CPU are smoke numbers: the
windows of one run do not see how much a shared CPU moves between runs, so no ranking is drawn
from them. A campaign of several modes (default, tuned) gets its findings mode by mode, each
sentence naming its mode, and a headline of the framework verdict in each.
"""
from typing import List

import pandas as pd

from .. import frameworks
from . import data_table, intervals, metrics
from .comparator import ratio
from .tables import Text

SMOKE = ("Smoke numbers, not a ranking: every cell is a single run on a CPU, where figures move "
         "between runs by more than the noise inside one run shows. Rerun with --repeats 3 or more "
         "to compare.")


def smoke(row) -> bool:
    """One run on a CPU: its windows cannot tell how much the next run would differ."""
    return row["device"] == "cpu" and int(row["repeats"] or 0) < 2


def _name(fw: str, model=None) -> str:
    """How a sentence names a framework, with the network where the campaign holds several."""
    return frameworks.display(fw) + (" {}".format(model) if model else "")


def _by(lay) -> list:
    """What a sentence's cells are grouped by: the framework, the model where several, precision."""
    return ["framework"] + (["model"] if lay.model_column else []) + ["precision"]


def _settings(ok: pd.DataFrame) -> list:
    """The batch and the image size too, where the cells ran several: each scales and gains on
    its own (one sentence for two image sizes spoke of one and hid the other)."""
    return [c for c in ("batch_size", "image_size") if ok[c].astype(str).nunique() > 1]


def _setting(row, settings: list) -> List[str]:
    """['batch 256', 'image 112']: a cell's settings among `settings`, as a sentence names them."""
    return (["batch {}".format(_batch(row))] if "batch_size" in settings else []) + \
        (["image {}".format(row.image_size)] if "image_size" in settings else [])


def _span(values, fmt: str) -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else "{}–{}".format(
        fmt.format(lo), fmt.format(hi).lstrip("+"))


def _noise(rows: pd.DataFrame, value: str, relative: bool = True) -> str:
    """'±x %': the widest interval among rows, relative to the figure (ratios) or in points (gains)."""
    widths = [r[value + "_ci95"] / (r[value] if relative else 1.0) for _, r in rows.iterrows()]
    return pct(max(widths))


def pct(fraction: float) -> str:
    """'±7.1 %', '±0.48 %', '±15 %': two significant figures, never a bare '±0 %'."""
    p = 100 * fraction
    return "±{:.2g} %".format(p) if p < 10 else "±{:.0f} %".format(p)


def _states(rows: pd.DataFrame, value: str, null: float = 1.0) -> pd.Series:
    return pd.Series([intervals.state(r[value], r[value + "_ci95"], null) for _, r in rows.iterrows()],
                     index=rows.index, dtype=object)


def _fastest(ok: pd.DataFrame, lay) -> List[str]:
    if not len(ok):
        return []
    ranked = ok.sort_values("images_per_sec", ascending=False)
    top = ranked.iloc[0]
    model = lay.model_column
    images = "image_size" in _settings(ok)  # the image size where the cells ran several
    ci95 = top.images_per_sec_ci95  # '1900.0 ±12.3 images/sec', '1900.0 images/sec, one run: …'
    figure = intervals.pm(top.images_per_sec, ci95, "{:.1f}") + " images/sec" if ci95 is not None \
        else "{:.1f} images/sec, {}".format(top.images_per_sec, intervals.NO_INTERVAL)
    text = "Fastest: {} at {}, batch {}{}, on {}: {}".format(
        _name(top.framework, model and top.model), top.precision, _batch(top),
        ", image {}".format(top.image_size) if images else "", lay.label(top.nodes, top.gpus), figure)
    if len(ranked) > 1:
        second = ranked.iloc[1]
        r = ratio(top, second)
        hw = r.half_width() if r else None
        if hw is None:
            return [text + "; no interval tells it from the next cell."]
        if intervals.state(r.value, hw) == intervals.NOISE:
            return [text + "; within noise of {} at {}, batch {}{}, on {} ({}).".format(
                _name(second.framework, model and second.model), second.precision, _batch(second),
                ", image {}".format(second.image_size) if images else "",
                lay.label(second.nodes, second.gpus), pct(hw / r.value))]
    return [text + "."]


def _batch(row) -> str:
    """'256', or 'auto (512)' for a searched batch."""
    if row.batch_size == "auto" and row.batch_chosen is not None:
        return "auto ({})".format(int(row.batch_chosen))
    return str(row.batch_size)


def _scaling(ok: pd.DataFrame, lay) -> List[str]:
    out = []
    multi = ok[ok.speedup.notna() & ok.speedup_ci95.notna() & (ok.world_size > 1)]
    settings = _settings(ok)
    for key, g in multi.groupby(_by(lay) + settings, sort=False):
        r = g.loc[g.world_size.astype(int).idxmax()]
        key = key[:len(key) - len(settings)]
        where = "{} ({}) on {}".format(_name(*key[:-1]), ", ".join([key[-1]] + _setting(r, settings)),
                                       lay.label(r.nodes, r.gpus))
        if intervals.state(r.speedup, r.speedup_ci95) == intervals.NOISE:
            out.append("{} is within noise of one {} ({}).".format(where, lay.word, _noise(
                g.loc[[r.name]], "speedup")))
        else:
            out.append("{} is {:.2f}× as fast as on one {} (±{:.2f}): {:.0%} scaling efficiency.".format(
                where, r.speedup, lay.word, r.speedup_ci95, r.scaling_efficiency))
    return out


def _gains(ok: pd.DataFrame, lay) -> List[str]:
    out = []
    rows = ok[ok.precision_gain.notna() & ok.precision_gain_ci95.notna()]
    settings = _settings(ok)
    for key, g in rows.groupby(_by(lay) + settings, sort=False):
        key = key[:len(key) - len(settings)]
        precision = key[-1] + (" at " + ", ".join(_setting(g.iloc[0], settings)) if settings else "")
        states = _states(g, "precision_gain", null=0.0)
        sig, noise = g[states != intervals.NOISE], g[states == intervals.NOISE]
        parts = []
        for word, part in (("faster", sig[sig.precision_gain > 0]), ("slower", sig[sig.precision_gain < 0])):
            if len(part):
                parts.append("{} % {} than fp32 ({})".format(_span(
                    [abs(100 * v) for v in part.precision_gain], "{:.0f}"), word,
                    _noise(part, "precision_gain", relative=False)))
        if len(noise):
            at = " at " + ", ".join("N={}".format(lay.n(int(r.nodes), int(r.gpus)))
                                    for _, r in noise.iterrows()) if len(sig) else ""
            parts.append("within noise of fp32{} ({})".format(at, _noise(noise, "precision_gain", False)))
        notes = sorted({n for n in g.note if n})  # "bf16 on a CPU without bf16 instructions …"
        why = ". Note: {}".format("; ".join(notes)) if notes else ""
        out.append("{}: {} is {}{}.".format(_name(*key[:-1]), precision, "; ".join(parts), why))
    return out


def _frameworks(ok: pd.DataFrame, base) -> List[str]:
    out = []
    rows = ok[ok.framework_ratio.notna() & ok.framework_ratio_ci95.notna() & (ok.framework != base)]
    for fw, g in rows.groupby("framework", sort=False):
        states = _states(g, "framework_ratio")
        if (states == intervals.NOISE).all():
            out.append("{} and {} are within noise of each other at equal settings ({}).".format(
                _name(fw), _name(base), _noise(g, "framework_ratio")))
            continue
        parts = []
        for state, word in ((intervals.BETTER, "faster"), (intervals.WORSE, "slower")):
            part = g[states == state]
            if len(part):
                parts.append("{} in {} setting{} ({}×)".format(word, len(part), "s" if len(part) > 1 else "",
                                                             _span(part.framework_ratio, "{:.2f}")))
        noise = g[states == intervals.NOISE]
        if len(noise):
            parts.append("within noise in {} ({})".format(len(noise), _noise(noise, "framework_ratio")))
        out.append("{} versus {} at equal settings: {}.".format(_name(fw), _name(base), ", ".join(parts)))
    return out


def _pipelines(rows: pd.DataFrame, df: pd.DataFrame, base, lay) -> List[str]:
    """Framework ratios of real-data and data-only cells, each naming both input pipelines; where
    either cell is input-bound (or not known not to be) it is a comparison of input pipelines."""
    rows = rows[(rows.data_mode != "synthetic") & rows.framework_ratio.notna() & (rows.framework != base)]
    verdicts = data_table.pipeline_verdicts(df)
    images = df.image_size.astype(str).nunique() > 1  # the image size where the study has several
    out = []
    for _, r in rows.iterrows():
        model = lay.model_column and r.model  # the network and the mode where the campaign has several
        pair = "{} ({}) vs {} ({})".format(
            _name(r.framework, model), verdicts.get(data_table.cell_key(r), {}).get("pipeline"),
            _name(base, model), verdicts.get(data_table.cell_key(r, base), {}).get("pipeline"))
        figure = "{} ({} data, {}{}, batch {}{}, on {})".format(
            intervals.pm(r.framework_ratio, r.framework_ratio_ci95, "{:.2f}×", "{:.2f}"),
            "real" if r.data_mode == "real" else "data-only",
            r["mode"] + ", " if lay.mode_column else "", r.precision, _batch(r),
            ", image {}".format(r.image_size) if images else "", lay.label(r.nodes, r.gpus))
        why = data_table.pipelines_compared(r, base, verdicts)
        if why:
            out.append("Input pipelines, not frameworks: {}: {}; {}.".format(pair, figure, why))
        else:
            out.append("{}: {}; both cells within {:.0%} of synthetic: a comparison of the "
                       "frameworks.".format(pair, figure, 1 - metrics.INPUT_BOUND))
    return out


def _failures(df: pd.DataFrame) -> List[str]:
    bad = df[df.status != "ok"]
    if not len(bad):
        return []
    return ["{} cell{} without a figure ({}); the reasons are listed below.".format(
        len(bad), "s" if len(bad) > 1 else "", ", ".join(sorted(set(bad.status))))]


IN_MODE = {"default": "At defaults, ", "tuned": "Tuned, "}


def _in_mode(mode: str, line: str) -> str:
    """'Fastest: …' -> 'Tuned, fastest: …'."""
    return IN_MODE.get(mode, mode + ": ") + (line[0].lower() + line[1:] if line.startswith("Fastest: ")
                                             else line)


def _verdict(g: pd.DataFrame, base) -> str:
    """'is 1.17–1.43× PyTorch' / 'is level with PyTorch (within noise, ±1 %)': one framework's
    ratios to the baseline in one mode."""
    states = _states(g, "framework_ratio")
    if (states == intervals.NOISE).all():
        return "is level with {} (within noise, {})".format(_name(base), _noise(g, "framework_ratio"))
    sig = g[states != intervals.NOISE]
    text = "is {}× {}".format(_span(sig.framework_ratio, "{:.2f}"), _name(base))
    noise = int((states == intervals.NOISE).sum())
    return text + (" (level in {} of {} settings)".format(noise, len(g)) if noise else "")


def _headline(trusted: pd.DataFrame, base) -> List[str]:
    """'By mode: at defaults, JAX is 1.17–1.43× PyTorch; tuned, JAX is level with PyTorch …'."""
    rows = trusted[trusted.framework_ratio.notna() & trusted.framework_ratio_ci95.notna()
                   & (trusted.framework != base)]
    parts = []
    for mode, g in rows.groupby("mode", sort=False):
        verdicts = ["{} {}".format(_name(fw), _verdict(f, base)) for fw, f in g.groupby("framework",
                                                                                      sort=False)]
        parts.append(IN_MODE.get(mode, mode + ": ").lower() + "; ".join(verdicts))
    return ["By mode: " + "; ".join(parts) + "."] if len(parts) > 1 else []


def _findings(trusted: pd.DataFrame, lay, base) -> List[str]:
    """The sentences of each mode, named by it when the campaign is not all default."""
    def sentences(g: pd.DataFrame) -> List[str]:  # framework ratios on synthetic data only
        return _fastest(g, lay) + _scaling(g, lay) + _gains(g, lay) + \
            _frameworks(g[g.data_mode == "synthetic"], base)
    if set(trusted["mode"]) <= {"default"}:
        return sentences(trusted)
    lines = _headline(trusted[trusted.data_mode == "synthetic"], base)
    for mode, g in trusted.groupby("mode", sort=False):
        lines += [_in_mode(mode, line) for line in sentences(g)]
    return lines


def summary(df: pd.DataFrame, lay) -> Text:
    """'What the numbers say': the fastest cell, scaling, precision gain, framework ratios and
    failures, each stated only as far as its interval allows."""
    ok = all_ok = df[(df.status == "ok") & df.images_per_sec.notna()]
    smokes = pd.Series([smoke(r) for _, r in all_ok.iterrows()], index=all_ok.index, dtype=bool)
    if ok.data_mode.nunique() > 1:  # real data is the input-pipeline table's subject
        ok = ok[ok.data_mode == "synthetic"]
    is_smoke = smokes.loc[ok.index]
    lines = []
    if len(ok) and is_smoke.all():
        lines.append(SMOKE)
    else:
        if is_smoke.any():
            lines.append("{} cell{} of single CPU runs left out of the findings: smoke numbers.".format(
                int(is_smoke.sum()), "s" if is_smoke.sum() > 1 else ""))
        trusted = ok[~is_smoke]
        base = df.ratio_baseline.iloc[0]
        lines += _findings(trusted, lay, base)
        lines += _pipelines(all_ok[(all_ok.data_mode != "synthetic") & ~smokes], df, base, lay)
    return Text("What the numbers say", lines + _failures(df), bullets=True)
