"""Stage 4, report: a campaign -> its report files. The campaign is read once into a View (campaign
.json, machine.json, every result, the probes, the planned cells without a result), and every
section is built from that view (compare/reporting/) and written by reporting.write_files to
report.md, report.html and CSV. `compare run` ends with this stage; `compare report` is it alone.
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from backends.contract import RunResult

from .. import files, frameworks
from .. import parsing as p
from ..errors import UserError
from ..reporting import FORMATS, write_files
from ..study import DECLARED, SESSION, declared


@dataclass
class View:
    """A campaign as its report reads it, loaded once."""

    root: Path
    meta: Dict[str, Any]  # campaign.json
    machine: Dict[str, Any]
    results: List[RunResult]  # the planned cells' results
    warnings: List[str]  # one per result file left out, and why
    probes: List[RunResult]  # the batch searches' probes

    @classmethod
    def load(cls, campaign) -> "View":
        results, warnings = campaign.results()
        return cls(campaign.root, campaign.meta, campaign.machine, results, warnings, campaign.probes())

    @property
    def throughput(self) -> List[RunResult]:
        """The throughput runs: a time-to-accuracy run is no throughput cell (its tables are
        its own), in the report, `compare diff`, `compare check` and `compare history` alike."""
        from ..reporting.accuracy import split
        return split(self.results)[0]

    @property
    def missing(self) -> List[str]:
        """Planned cells with no result yet (a half-done campaign), by run id."""
        have = {r.run_id for r in self.results}
        return [run_id for run_id in self.meta.get("planned", {}) if run_id not in have]

    @property
    def asked(self) -> Dict[str, Any]:
        """What the latest session asked: its study, the settings' sources, the defaults' why."""
        return (self.meta.get("sessions") or [{}])[-1].get("config") or {}


def write(campaign, out_dir: Path, formats: Sequence[str] = FORMATS,
          references: Sequence[Tuple[str, object]] = (), baseline: Optional[str] = None,
          price: Optional[float] = None) -> Tuple[str, List[Path], List[str]]:
    """Write the campaign's report files; return (Markdown text, paths written, warnings about
    result files left out). price: dollars per GPU-hour (cost to train of time-to-accuracy runs;
    default the study's --gpu-hour-price; no cost columns without one)."""
    from ..defaults import lines
    from ..reporting import accuracy
    from ..reporting.comparator import cells
    from ..reporting.report import campaign_sections
    view = View.load(campaign)
    throughput, trained = accuracy.split(view.results)  # time-to-accuracy runs: tables of their own
    df = cells(throughput, baseline=baseline)
    if baseline is not None and baseline not in set(df.framework):
        raise UserError("--baseline {}: no cell of the campaign ran it; choose from {}".format(
            baseline, ", ".join(frameworks.order(set(df.framework))) or "none (no results yet)"))
    ignored = []  # a price given for a campaign it prices nothing in: said, not dropped unseen
    if price is not None and not trained and not (view.asked.get("study") or {}).get("target_accuracy"):
        ignored.append("--gpu-hour-price {}: not used: it prices time-to-accuracy runs "
                       "(--target-accuracy), and this campaign has none".format(p.plain(price)))
    if price is None:
        price = (view.asked.get("study") or {}).get("gpu_hour_price")
    chart, out_dir = accuracy.chart(trained), Path(out_dir).absolute()
    inside = campaign.root == out_dir or campaign.root in out_dir.parents  # no link below it
    text, paths = write_files(df, out_dir, formats, view.machine, throughput, references,
                              campaign_sections(view, throughput, trained, price),
                              [chart] if chart is not None else [],
                              lines(view.asked.get("defaults") or {}) + origins(view.asked),
                              base=campaign.root if inside else out_dir, trained=trained)
    if trained and "json" in formats:  # report.json holds throughput cells: these beside it
        path = out_dir / "accuracy.json"
        files.write_text(path, json.dumps(accuracy.records(trained, price), indent=2,
                                          default=str) + "\n", campaign.root if inside else out_dir)
        paths.append(path)
    elif "json" in formats:  # an earlier report's (another campaign's, in a shared --out) would
        files.remove_files(out_dir, campaign.root if inside else out_dir,  # stand beside report.json
                           lambda name: name == "accuracy.json")
    return text, paths, view.warnings + ignored


def origins(asked: Dict[str, Any]) -> List[str]:
    """Where the settings came from, when a campaign file was used: the file's, the flags' that
    overrode it, the rest at compare's defaults (those sized to the machine: the lines above)."""
    sources, path = asked.get("sources") or {}, asked.get("file")
    if not path:
        return []
    kept = [s.name for s in declared() if s.resume != SESSION and (  # in the order of --help
        s.name in DECLARED or s.name in sources)]  # an executor's own flags where given
    by = {how: [k for k in kept if sources.get(k) == how] for how in ("file", "flag over file", "flag",
                                                                       "campaign")}
    rest = [k for k in kept if k not in sources]
    said = [("from the campaign file {}".format(path), by["file"]),
            ("from flags given beside it, over the file's", by["flag over file"]),
            ("from flags given beside it", by["flag"]),
            ("kept from the campaign (as an earlier session gave them)", by["campaign"]),
            ("at compare's defaults", rest)]
    return ["{}: {}".format(what, ", ".join(keys)) for what, keys in said if keys]
