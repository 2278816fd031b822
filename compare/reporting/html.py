"""The self-contained HTML report: findings in words, charts (base64 PNG), then the tables.

No external file, font or script: the page opens from an e-mail attachment. The tables are the same
table models the Markdown report renders (tables.py), so the two never disagree.
"""
import base64
import html
import re
from typing import List, Sequence

import pandas as pd

from . import charts, tables

STYLE = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;
color:#202124}h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
figure{margin:1.5em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:.9em;max-width:900px}table{border-collapse:collapse;margin:.8em 0;
font-size:.9em}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:right}
td:first-child,th:first-child{text-align:left}ul li{margin:.3em 0}
code{font-family:ui-monospace,monospace;background:#f3f3f3;padding:0 .2em}"""


CODE = re.compile(r"`([^`<>\n]+)`")  # `compare run …` in a table or a sentence: code, as Markdown


def code(fragment: str) -> str:
    """The HTML of escaped text with its `backticked` spans as <code>, as Markdown shows them."""
    return CODE.sub(r"<code>\1</code>", fragment)


def figure(chart: charts.Chart) -> str:
    data = base64.b64encode(chart.png).decode("ascii")
    return ('<figure class="chart"><h2>{0}</h2><img alt="{0}" src="data:image/png;base64,{1}">'
            '<figcaption>{2}</figcaption></figure>').format(
                html.escape(chart.title), data, html.escape(chart.caption))


def document(title: str, body: List[str]) -> str:
    """A whole page around HTML fragments."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>{}</title><style>{}</style></head><body>\n{}\n</body></html>\n").format(
                html.escape(title), STYLE, "\n".join(body))


def _trained(df: pd.DataFrame, accuracy_models: Sequence = ()) -> str:
    """'ResNet-50 v1.5 training throughput', 'ResNet-50 v1.5 and VGG-16 …', 'ResNet-50 v1.5 time
    to accuracy' (a campaign of time-to-accuracy runs alone, whose networks are accuracy_models):
    the networks of the cells, as `compare list models` names them (a name it does not know, as
    it is), and what was measured of them."""
    from backends.contract.shared import networks
    present = set(df.model) if "model" in df else set()
    present |= {m for m in accuracy_models if m}
    known = [n.name for n in networks.NETWORKS]
    titles = [networks.get(m).title if m in known else str(m)
              for m in sorted(present, key=lambda m: (known.index(m) if m in known else len(known),
                                                      str(m)))]
    measured = " and ".join((["training throughput"] if not df.empty or not accuracy_models else [])
                            + (["time to accuracy"] if accuracy_models else []))
    if not titles:
        return measured[0].upper() + measured[1:]
    return "{} {}".format(" and ".join([", ".join(titles[:-1])] + titles[-1:])
                          if len(titles) > 1 else titles[0], measured)


def page(df: pd.DataFrame, report, more=(), trained: Sequence = ()) -> str:
    """The campaign report (report.Report) with the charts of its cells and `more` charts (time
    to accuracy's; trained: its runs, whose networks the heading names too), as one string."""
    models = [(r.spec or {}).get("model") or "resnet50" for r in trained]
    body = ["<h1>{} — compare report</h1>".format(html.escape(_trained(df, models))),
            code(tables.to_html(report.summary))]
    if not df.empty or more:
        body += [figure(c) for c in (charts.all_charts(df) if not df.empty else []) + list(more)]
        body.append("<h1>Tables</h1>")
        body.append(code(tables.html_fragment(report.tables)))
    return document("compare report", body)
