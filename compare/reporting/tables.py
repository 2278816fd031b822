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
from typing import List, Sequence, Union


@dataclass
class Table:
    title: str  # "" = no heading
    header: List[str]
    rows: List[List[str]]
    notes: List[str] = field(default_factory=list)  # paragraphs under the table
    name: str = ""  # stem of its CSV file (default: from the title)

    def csv_name(self) -> str:
        return self.name or slug(self.title)


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

def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _md_lines(section: Section) -> List[str]:
    out = ["## " + section.title, ""] if section.title else []
    if isinstance(section, Table):
        out += [_md_row(section.header), "|" + "---|" * len(section.header)]
        out += [_md_row(r) for r in section.rows] + [""]
        for note in section.notes:
            out += [note, ""]
        return out
    if section.bullets:
        out += ["- " + line for line in section.lines] + ([""] if section.lines else [])
    else:
        for line in section.lines:
            out += [line, ""]
    for w in section.warnings:
        out += ["**{}**".format(w), ""]
    return out


def markdown(sections: Sequence[Section]) -> str:
    """The sections as one Markdown document (each followed by a blank line)."""
    lines: List[str] = []
    for section in sections:
        lines += _md_lines(section)
    return "\n".join(lines)


# --- CSV ------------------------------------------------------------------------------------------

def to_csv(table: Table) -> str:
    """The table as shown (text cells, header first), for a spreadsheet."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.header)
    writer.writerows(table.rows)
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
