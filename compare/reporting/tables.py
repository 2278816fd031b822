"""The table model of every report: a section is built once and rendered to Markdown, CSV or HTML.

A `Table` is a grid (title, header, rows of text cells, notes under it); a `Text` is prose (the
findings as a list, provenance lines, warnings in bold). The renderers below are the only place
that knows Markdown or HTML syntax; nothing is ever parsed back.
"""
import csv
import html
import io
import re
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Sequence, Union

from .. import frameworks


@dataclass
class Table:
    title: str  # "" = no heading
    header: List[str]
    rows: List[List[str]]
    notes: List[str] = field(default_factory=list)  # paragraphs under the table
    name: str = ""  # stem of its CSV file (default: from the title)
    labels: int = 0  # leading columns that name the row (never left out by pruned())

    def csv_name(self) -> str:
        return self.name or slug(self.title)

    def pruned(self) -> Optional["Table"]:
        """The table without the value columns that have no value in any row (empty or n/a: a
        study with one GPU count or one precision), or None when no value is left at all."""
        keep = [i for i in range(len(self.header))
                if i < self.labels or any(row[i] not in EMPTY for row in self.rows)]
        if not self.rows or len(keep) == self.labels:
            return None
        if len(keep) == len(self.header):
            return self
        return Table(self.title, [self.header[i] for i in keep],
                     [[row[i] for i in keep] for row in self.rows], self.notes, self.name,
                     self.labels)


EMPTY = ("", "n/a", None)  # what a table cell without a value shows


def num(x, fmt: str) -> str:
    return fmt.format(x) if x is not None else "n/a"


def n_of(nodes, gpus) -> str:
    """A cell's N: its GPUs (or workers), as nodes×GPUs per node on more than one node."""
    return str(gpus) if int(nodes) == 1 else "{}×{}".format(nodes, gpus)


# --- the columns that name a cell ------------------------------------------------------------------
# Every table that lists cells names each by these fields; the optional ones get a column only
# where the campaign holds more than one value (one network: no model column). Which to show is
# decided once per campaign (shown), so no table of a campaign has a column another lacks.
# The mode gets a column where a cell is not in the default mode (the framework column then names
# the framework alone; without it, label() says "PyTorch, tuned" for a cell of another mode).
OPTIONAL = ("model", "mode", "data_mode")
# and the image size, in the tables that named none (check, references, timeline): two cells of
# one setting at two image sizes would read as one row twice
OPTIONAL_IMAGE = OPTIONAL + ("image_size",)
HEADINGS = {"batch_size": "batch", "image_size": "image", "data_mode": "data"}  # else the field's


def _values(cells, field: str) -> set:
    rows = cells.to_dict("records") if hasattr(cells, "to_dict") else cells
    return {str(r.get(field)) for r in rows if r.get(field) is not None}


def varies(cells, field: str) -> bool:
    """Whether `field` holds more than one value among `cells` (a DataFrame or records)."""
    return len(_values(cells, field)) > 1


def shows(cells, field: str) -> bool:
    """Whether an optional column of `field` is shown for `cells`: it holds several values, or
    for the mode, a value other than default."""
    return bool(_values(cells, "mode") - {"default"}) if field == "mode" else varies(cells, field)


def shown(cells, fields: Iterable[str], optional: Sequence[str] = OPTIONAL) -> List[str]:
    """`fields` without the optional ones that `cells` (the campaign's) do not show (shows)."""
    return [f for f in fields if f not in optional or shows(cells, f)]


def heading(fields: Sequence[str]) -> List[str]:
    return [HEADINGS.get(f, f) for f in fields]


def label(row, fields: Sequence[str]) -> List[str]:
    """A cell's text under `fields`: the framework as reports name it (with its mode where no
    `mode` field says it), `N` as nodes×GPUs per node (n_of), the rest as they are."""
    out = []
    for f in fields:
        if f == "framework":
            out.append(frameworks.display(row["framework"], "default" if "mode" in fields
                                          else row["mode"]))
        elif f == "N":
            out.append(n_of(row["nodes"], row["gpus"]))
        else:
            out.append(str(row[f]))
    return out


@dataclass
class Text:
    title: str  # "" = no heading
    lines: List[str]
    bullets: bool = False  # a list (findings, cells without a figure) instead of paragraphs
    warnings: List[str] = field(default_factory=list)  # shown in bold after the lines


Section = Union[Table, Text]


def slug(title: str) -> str:
    """'Images/sec (speedup vs 1 GPU)' -> 'images_sec'. The words before any bracket."""
    words = re.findall(r"[a-z0-9]+", title.split("(")[0].lower())
    return "_".join(words) or "table"


# --- Markdown ---------------------------------------------------------------------------------------
# Free text (a reason, an option value, a version, a host name from machine.json) must render as
# the text it is, as html.escape makes it in HTML: never as HTML (`<script>`), a link or image
# (`[x](url)`, `![x](url)`), emphasis, or a block of its own (a line break then `# `). `code`
# spans, compare's own, are left as they are: Markdown shows their content literally.
_CODE = re.compile(r"(`[^`\n]*`)")
_BREAK = re.compile(r"\r\n|[\r\n]")  # in a table a line break ends the row; in text, the paragraph
_ESCAPED = [
    (re.compile(r"\\(?=[!-/:-@[-`{-~])"), r"\\\\"),  # a backslash before punctuation stays one
    (re.compile(r"<(?=[A-Za-z/!?])"), r"\<"),  # an HTML tag, comment or autolink
    (re.compile(r"\](?=[(\[:])"), r"\]"),  # a link, an image, a reference or its definition
    (re.compile(r"[*~]"), r"\\\g<0>"),  # emphasis, strikethrough
    (re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])"), r"\_"),  # emphasis (not inside a_word)
]
# what would begin a block at the start of a line: a heading, a quote, a list item, a rule
_BLOCK = re.compile(r"^(#{1,6}|>|[-+*]|\d{1,9}[.)]|[-_=]{3,})(?=\s|$)")


def _md_plain(text: str) -> str:
    for pattern, repl in _ESCAPED:
        text = pattern.sub(repl, text)
    return text


def _md(text) -> str:
    parts = _CODE.split(_BREAK.sub(" ", str(text)))
    out = "".join(part if i % 2 else _md_plain(part) for i, part in enumerate(parts))
    # a backslash before the marker (before the `.` of `1.`) makes it text
    return _BLOCK.sub(lambda m: m.group()[:-1] + "\\" + m.group()[-1] if m.group()[0].isdigit()
                      else "\\" + m.group(), out)


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_md(c).replace("|", "\\|") for c in cells) + " |"


def _md_lines(section: Section) -> List[str]:
    out = ["## " + _md(section.title), ""] if section.title else []
    if isinstance(section, Table):
        out += [_md_row(section.header), "|" + "---|" * len(section.header)]
        out += [_md_row(r) for r in section.rows] + [""]
        for note in section.notes:
            out += [_md(note), ""]
        return out
    if section.bullets:
        out += ["- " + _md(line) for line in section.lines] + ([""] if section.lines else [])
    else:
        for line in section.lines:
            out += [_md(line), ""]
    for w in section.warnings:
        out += ["**{}**".format(_md(w)), ""]
    return out


def markdown(sections: Sequence[Section]) -> str:
    """The sections as one Markdown document (each followed by a blank line)."""
    return "\n".join(line for section in sections for line in _md_lines(section))


# --- CSV ------------------------------------------------------------------------------------------

def to_csv(table: Table) -> str:
    """The table as shown (text cells, header first), for a spreadsheet."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([table.header] + table.rows)
    return buf.getvalue()


# --- HTML -----------------------------------------------------------------------------------------

def _h(text: str) -> str:
    return html.escape(str(text))


def to_html(section: Section) -> str:
    """One section as an HTML fragment: <h2>, <table> or <ul>/<p>, notes, bold warnings."""
    out = ["<h2>{}</h2>".format(_h(section.title))] if section.title else []
    if isinstance(section, Table):
        out.append("<table><thead><tr>" + "".join("<th>{}</th>".format(_h(c)) for c in section.header)
                   + "</tr></thead><tbody>")
        for row in section.rows:
            out.append("<tr>" + "".join("<td>{}</td>".format(_h(c)) for c in row) + "</tr>")
        out.append("</tbody></table>")
        out += ["<p>{}</p>".format(_h(n)) for n in section.notes]
        return "\n".join(out)
    if section.bullets and section.lines:
        out.append("<ul>" + "".join("<li>{}</li>".format(_h(line)) for line in section.lines) + "</ul>")
    else:
        out += ["<p>{}</p>".format(_h(line)) for line in section.lines]
    out += ["<p><strong>{}</strong></p>".format(_h(w)) for w in section.warnings]
    return "\n".join(out)


def html_fragment(sections: Sequence[Section]) -> str:
    return "\n".join(to_html(s) for s in sections)
