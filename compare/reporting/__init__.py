"""Reports of a campaign: the comparator (report.cells), its tables and charts, diff, references.

`write_report` is the one writer `compare run` and `compare report` share.
"""
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

FORMATS = ("md", "csv", "json", "html")


def write_report(campaign, out_dir: Path, formats: Sequence[str] = FORMATS,
                 references: Sequence[Tuple[str, object]] = (),
                 baseline: Optional[str] = None) -> Tuple[str, List[Path], List[str]]:
    """Read the campaign's results, write the report files; return (Markdown text, paths written,
    warnings about result files that could not be read)."""
    from . import references as refs
    from .report import cells, markdown, write
    results, warnings = campaign.results()
    df = cells(results, baseline=baseline)
    text = markdown(df, campaign.machine)
    for name, ref in references:
        text += "\n" + refs.markdown(name, refs.compare(df, ref))
    missing = campaign.missing(results)
    if missing:  # a half-done campaign says so, and which cells are still to run
        text += "\n## Not run yet\n\n{} of the campaign's {} planned cells have no result: {}. " \
                "`compare run … --resume` runs them.\n".format(
                    len(missing), len(campaign.meta.get("planned", {})), ", ".join(missing))
    paths = write(df, Path(out_dir), formats, campaign.machine, results, markdown_text=text)
    return text, paths, warnings
