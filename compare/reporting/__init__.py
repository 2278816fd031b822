"""Reports of a campaign: the comparator (comparator.cells), the report's table models and their
renderers, charts, diff, history, references and the check against them.

`write_files` is the one writer of the report stage (compare/stages/report.py), which `compare
run` and `compare report` share: every section (the `--reference` ones included) is built once
and rendered to report.md, report.html and CSV. Which sections a report has, in which order, is
report.py's list (build, campaign_sections); this module only renders it.
"""
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import UserError

FORMATS = ("md", "csv", "json", "html")


def parse_formats(csv: str) -> List[str]:
    items = [s.strip().lower() for s in csv.split(",") if s.strip()]
    if not items:
        raise UserError("--format is empty; choose from {}".format(", ".join(FORMATS)))
    for f in items:
        if f not in FORMATS:
            raise UserError("unknown format {!r}; choose from {}".format(f, ", ".join(FORMATS)))
    return items


def write_files(df, out_dir: Path, formats: Sequence[str], machine: Optional[Dict],
                results: Sequence = (), references: Sequence[Tuple[str, object]] = (),
                extra: Sequence = (), charts: Sequence = (), defaults: Sequence[str] = ()
                ) -> Tuple[str, List[Path]]:
    """report.md / .csv (one record per cell) + runs.csv (one per run) + tables/*.csv (each table
    as shown) / .json / .html from the cells `df`; return (Markdown text, paths written)."""
    from . import html, report, tables
    from .comparator import runs
    rep = report.build(df, machine, list(defaults), references, results, extra)
    text = tables.markdown(rep.sections())
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = out_dir / "report.{}".format(fmt)
        if fmt == "md":
            path.write_text(text)
        elif fmt == "csv":
            df.to_csv(path, index=False)
            written += _csv_extras(out_dir, rep, results, runs, tables)
        elif fmt == "html":
            path.write_text(html.page(df, rep, more=charts))
        else:
            path.write_text(json.dumps(df.to_dict(orient="records"), indent=2, default=str) + "\n")
        written.append(path)
    return text, written


def _csv_extras(out_dir: Path, rep, results, runs, tables) -> List[Path]:
    out = []
    if results:
        runs(results).to_csv(out_dir / "runs.csv", index=False)
        out.append(out_dir / "runs.csv")
    folder = out_dir / "tables"
    folder.mkdir(exist_ok=True)
    for t in rep.tables:
        if isinstance(t, tables.Table):
            (folder / (t.csv_name() + ".csv")).write_text(tables.to_csv(t))
    return out + [folder]
