"""The self-contained HTML report: findings in words, charts (base64 PNG), then the tables.

No external file, font or script: the page opens from an e-mail attachment. The tables are the
Markdown report's own tables, rendered here, so the two never disagree.
"""
import base64
import html
import re
from typing import Dict, List, Optional

import pandas as pd

from .. import frameworks
from . import charts
from .report import markdown

STYLE = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;
color:#202124}h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
figure{margin:1.5em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:.9em;max-width:900px}table{border-collapse:collapse;margin:.8em 0;
font-size:.9em}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:right}
td:first-child,th:first-child{text-align:left}.findings li{margin:.3em 0}"""


def _name(fw: str) -> str:
    return frameworks.display(fw)


def findings(df: pd.DataFrame) -> List[str]:
    """The report in sentences: fastest cell, scaling, precision gain, framework ratios, failures."""
    ok = df[(df.status == "ok") & df.images_per_sec.notna()]
    out = []
    unit = "workers" if set(df.device) == {"cpu"} else "GPUs"
    if len(ok):
        top = ok.loc[ok.images_per_sec.astype(float).idxmax()]
        out.append("Fastest: {} at {}, batch {}, on {} {}: {:.1f} images/sec.".format(
            _name(top.framework), top.precision, top.batch_size, top.gpus, unit, top.images_per_sec))
    for (fw, precision), g in ok[ok.speedup.notna() & (ok.gpus > 1)].groupby(
            ["framework", "precision"], sort=False):
        r = g.loc[g.gpus.astype(int).idxmax()]
        out.append("{} ({}) on {} {} is {:.2f}× as fast as on one: {:.0%} scaling efficiency.".format(
            _name(fw), precision, r.gpus, unit, r.speedup, r.scaling_efficiency))
    for (fw, precision), g in ok[ok.precision_gain.notna()].groupby(["framework", "precision"],
                                                                    sort=False):
        lo, hi = 100 * g.precision_gain.min(), 100 * g.precision_gain.max()
        word = "faster" if lo >= 0 else "slower" if hi <= 0 else "faster or slower"
        lo, hi = sorted((abs(lo), abs(hi)))
        span = "{:.0f} %".format(lo) if round(lo) == round(hi) else "{:.0f}–{:.0f} %".format(lo, hi)
        out.append("{}: {} is {} {} than fp32.".format(_name(fw), precision, span, word))
    base = df.ratio_baseline.iloc[0] if len(df) else None
    for fw, g in ok[ok.framework_ratio.notna() & (ok.framework != base)].groupby("framework",
                                                                                 sort=False):
        lo, hi = g.framework_ratio.min(), g.framework_ratio.max()
        out.append("{} runs at {} the speed of {} at equal settings.".format(
            _name(fw), "{:.2f}×".format(lo) if abs(hi - lo) < 0.005 else
            "{:.2f}–{:.2f}×".format(lo, hi), _name(base)))
    bad = df[df.status != "ok"]
    if len(bad):
        out.append("{} cell{} without a figure ({}); the reasons are listed below.".format(
            len(bad), "s" if len(bad) > 1 else "", ", ".join(sorted(set(bad.status)))))
    return out


def _inline(text: str) -> str:
    text = html.escape(text)
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)


def _table(rows: List[str]) -> str:
    cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows]
    head, body = cells[0], cells[2:]  # cells[1] is the |---| rule
    out = ["<table><thead><tr>" + "".join("<th>{}</th>".format(_inline(c)) for c in head)
           + "</tr></thead><tbody>"]
    for row in body:
        out.append("<tr>" + "".join("<td>{}</td>".format(_inline(c)) for c in row) + "</tr>")
    return "\n".join(out) + "</tbody></table>"


def markdown_to_html(md: str) -> str:
    """Just the Markdown the report writes: ## headings, | tables |, - lists, paragraphs."""
    out, lines, i = [], md.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out.append(_table(lines[i:j]))
            i = j
            continue
        if line.startswith("## "):
            out.append("<h2>{}</h2>".format(_inline(line[3:])))
        elif line.startswith("- "):
            out.append("<ul><li>{}</li></ul>".format(_inline(line[2:])))
        elif line.strip():
            out.append("<p>{}</p>".format(_inline(line)))
        i += 1
    return "\n".join(out).replace("</ul>\n<ul>", "\n")


def _figure(chart: charts.Chart) -> str:
    data = base64.b64encode(chart.png).decode("ascii")
    return ('<figure class="chart"><h2>{0}</h2><img alt="{0}" src="data:image/png;base64,{1}">'
            '<figcaption>{2}</figcaption></figure>').format(
                html.escape(chart.title), data, html.escape(chart.caption))


def page(df: pd.DataFrame, machine: Optional[Dict] = None, title: str = "compare report") -> str:
    """The whole HTML page as one string."""
    body = ["<h1>ResNet-50 training throughput — {}</h1>".format(html.escape(title))]
    if df.empty:
        body.append("<p>No results yet.</p>")
    else:
        body.append('<h2>What the numbers say</h2><ul class="findings">'
                    + "".join("<li>{}</li>".format(html.escape(s)) for s in findings(df)) + "</ul>")
        body += [_figure(c) for c in charts.all_charts(df)]
        body.append("<h1>Tables</h1>")
        body.append(markdown_to_html(markdown(df, machine)))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>{}</title><style>{}</style></head><body>\n{}\n</body></html>\n").format(
                html.escape(title), STYLE, "\n".join(body))
