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
    """'md,csv' -> ['md', 'csv']; a format given twice is one line, as any comma list's value."""
    from ..parsing import listed
    items = [s.lower() for s in listed(csv, "--format", "choose from {}".format(", ".join(FORMATS)))]
    for f in items:
        if f not in FORMATS:
            raise UserError("unknown format {!r}; choose from {}".format(f, ", ".join(FORMATS)))
    return items


def write_files(df, out_dir: Path, formats: Sequence[str], machine: Optional[Dict],
                results: Sequence = (), references: Sequence[Tuple[str, object]] = (),
                extra: Sequence = (), charts: Sequence = (), defaults: Sequence[str] = (),
                base: Optional[Path] = None, trained: Sequence = ()) -> Tuple[str, List[Path]]:
    """report.md / .csv (one record per cell) + runs.csv (one per run) + tables/*.csv (each table
    as shown) / .json / .html from the cells `df`; return (Markdown text, paths written). Each
    file is made whole beside its name and renamed over it (files.py): never written through a
    link below `base` (the campaign, when the report goes inside it), nor left half-written.
    trained: the campaign's time-to-accuracy runs (their tables come in `extra`)."""
    from .. import files
    from . import html, report, tables
    from .comparator import runs
    from .comparator import written as cells_written
    rep = report.build(df, machine, list(defaults), references, results, extra, trained)
    text = tables.markdown(rep.sections())
    base = base if base is not None else out_dir
    cells_out = cells_written(df)  # report.csv and report.json: less what only the report reads
    written = []
    for fmt in formats:
        path = out_dir / "report.{}".format(fmt)
        if fmt == "md":
            files.write_text(path, text, base)
        elif fmt == "csv":
            files.write_text(path, cells_out.to_csv(index=False), base)
            if results:
                files.write_text(out_dir / "runs.csv", runs(results).to_csv(index=False), base)
                written.append(out_dir / "runs.csv")
            else:  # an earlier report's runs.csv would list runs this campaign no longer has
                files.remove_files(out_dir, base, lambda name: name == "runs.csv")
            shown = [t for t in rep.tables if isinstance(t, tables.Table)]
            for t in shown:
                files.write_text(out_dir / "tables" / (t.csv_name() + ".csv"), tables.to_csv(t), base)
            # tables/ is this report's tables: one an earlier report had and this one has not (a
            # cell without a figure run again by --resume) would contradict report.md
            kept = {t.csv_name() + ".csv" for t in shown}
            files.remove_files(out_dir / "tables", base, lambda name: name.endswith(".csv") and
                               name not in kept)
            if shown:  # none without results: no folder made, none announced
                written.append(out_dir / "tables")
        elif fmt == "html":
            files.write_text(path, html.page(df, rep, more=charts, trained=trained), base)
        else:
            files.write_text(path, json.dumps(cells_out.to_dict(orient="records"), indent=2, default=str)
                             + "\n", base)
        written.append(path)
    return text, written
