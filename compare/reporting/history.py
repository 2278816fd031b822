"""`compare history CAMPAIGN... | FOLDER`: each cell's figure over time, regressions flagged.

The campaigns are ordered by the time they were created. Each point of a cell is compared with the
cell's previous point that has a figure (B ÷ A with its interval, diff.versus): "worse" there is a
regression. A point on another machine, or with other settings, is not comparable to the one
before it and says why.
"""
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from backends.contract import DEFAULT_MODEL

from .. import frameworks, machine_record
from ..errors import UserError
from . import accuracy, diff, findings, intervals
from .comparator import KEY, cells, rests_on
from .intervals import pm, pm_ratio
from .tables import Section, Table, Text

COLUMNS = KEY + ["date", "commit", "campaign", "framework_version", "status", "repeats", "runs",
                 "images_per_sec", "images_per_sec_ci95", "ratio", "ratio_ci95", "state", "regression",
                 "why"]


def campaigns(paths: Sequence[Path], warn: Callable[[str], None] = lambda s: None) -> List:
    """The campaigns named, or found one level below a folder that is not one itself; oldest
    first, each once. A campaign named that cannot be read is one UserError line; one found in a
    folder is skipped with warn(why), and the others are shown."""
    from ..store import Campaign, campaign_folders
    found: Dict[Path, object] = {}

    def add(campaign, named: Path) -> None:
        if campaign.root.resolve() in found:
            warn("{}: named twice; counted once".format(named))
        found.setdefault(campaign.root.resolve(), campaign)
    for path in paths:
        path = Path(path)
        inside = campaign_folders(path)
        if not path.is_dir() or inside == [path]:
            add(Campaign.open(path), path)  # a bad path: Campaign.open says why
            continue
        if not inside:
            raise UserError("{}: neither a campaign nor a folder of campaigns; give campaign folders "
                            "made by `compare run`, or the folder that holds them".format(path))
        for p in inside:
            try:
                add(Campaign.open(p), p)
            except UserError as exc:  # one corrupt campaign does not hide the others
                warn("skipped {}".format(exc))
    return sorted(found.values(), key=lambda c: (c.meta.get("created_at") or "", str(c.root)))


def _commit(m: Dict) -> str:
    git = m.get("git") or {}
    return (git.get("commit") or "unknown")[:10] + ("+dirty" if git.get("dirty") else "")


def history(camps: Sequence, warn: Callable[[str], None] = lambda s: None) -> pd.DataFrame:
    """One row per cell per campaign, with the ratio to that cell's previous figure and its state;
    unreadable results are skipped, each with warn("CAMPAIGN: why")."""
    rows, last = [], {}  # last: cell key -> (cell record, machine record, campaign) of its previous figure
    for camp in camps:
        results, skipped = camp.results()
        for why in skipped:
            warn("{}: {}".format(camp.root, why))
        m = camp.machine
        facts = _facts(camp)
        for _, r in cells(accuracy.split(results)[0]).iterrows():  # throughput cells, as reports
            key = tuple(r[c] for c in KEY)
            before = last.get(key)
            row = dict(zip(KEY, key), **facts, framework_version=r.framework_version, status=r.status,
                       repeats=r.repeats, runs=r.runs, images_per_sec=r.images_per_sec,
                       images_per_sec_ci95=r.images_per_sec_ci95)
            if before is None:
                row.update(ratio=None, ratio_ci95=None, state=None, why="first figure"
                           if r.status == "ok" else "no figure: {}".format(r.status))
            else:
                row.update(diff.versus(before[0], r, ("before", "now")))
                row.update(_machines(before, camp.root.name, m))
            row["regression"] = row["state"] == intervals.WORSE
            row.pop("comparable", None)
            rows.append(row)
            if r.status == "ok" and r.images_per_sec is not None:
                last[key] = (r, m, camp.root.name)
    d = pd.DataFrame(rows, columns=COLUMNS).astype(object)
    return d.where(d.notna(), None)


def _machines(before, name: str, machine) -> dict:
    """A point's state where its machine is not the previous figure's (before: (figure, machine
    record, campaign)): not comparable, saying why; {} where the same machine ran both. Without a
    machine.json, whether it changed is not known."""
    unknown = [n for n, record in ((before[2], before[1]), (name, machine)) if not record]
    if unknown:
        return dict(state=intervals.NOT_COMPARABLE, why="machine unknown: {} {} no machine "
                    "record".format(" and ".join(unknown), "have" if len(unknown) > 1 else "has"))
    changed = machine_record.differences(before[1], machine)
    return dict(state=intervals.NOT_COMPARABLE, why="machine changed: " + "; ".join(changed)) \
        if changed else {}


# both ratios, img/s and minutes to target, are the speed now over the previous figure's (> 1:
# faster now), as diff's are B's over A's (diff.SPEED); one heading says so
SPEED = "speed now ÷ previous"
TTA_KEY = diff.TTA_MATCH + ["device"]
TTA_COLUMNS = TTA_KEY + ["date", "commit", "campaign", "framework_version", "target", "status",
                         "converged", "runs",
                         "minutes", "minutes_ci95", "ratio", "ratio_ci95", "state", "regression",
                         "why"]


def tta_history(camps: Sequence) -> pd.DataFrame:
    """The time-to-accuracy cells' history: one row per cell per campaign, minutes to target (the
    mean of its converged seeds, with its interval) and the ratio previous ÷ now, its speed now
    over the previous (> 1: it trains to the target faster now, as img/s now ÷ previous > 1)
    with its state, as diff.tta_diff takes it; a point on another machine, or with another
    target or data set, is not comparable and says why."""
    rows, last = [], {}  # cell key -> (cell, machine record, campaign) of its previous figure
    for camp in camps:
        m = camp.machine
        facts = _facts(camp)
        for cell in diff.tta_cells(camp.results()[0]).values():
            key = tuple(cell[c] for c in TTA_KEY)
            before, est = last.get(key), cell["minutes"]
            row = dict(zip(TTA_KEY, key), **facts, framework_version=cell["framework_version"],
                       target=cell["target"], status=cell["status"],
                       converged=cell["converged"], runs=cell["runs"],
                       minutes=est.value if est else None,
                       minutes_ci95=est.half_width() if est else None)
            if before is None:
                row.update(ratio=None, ratio_ci95=None, state=None, why="first figure" if est
                           else "no figure" + (": " + cell["status"] if cell["status"] != "ok" else ""))
            else:
                t = diff.tta_diff({key: before[0]}, {key: cell}, ("before", "now")).iloc[0]
                row.update(ratio=t.ratio, ratio_ci95=t.ratio_ci95, state=t.state, why=t.why)
                row.update(_machines(before, camp.root.name, m))
            row["regression"] = row["state"] == intervals.WORSE
            rows.append(row)
            if est is not None:
                last[key] = (cell, m, camp.root.name)
    d = pd.DataFrame(rows, columns=TTA_COLUMNS).astype(object)
    return d.where(d.notna(), None)


def chart(key: tuple, h: pd.DataFrame, t: pd.DataFrame):
    """The chart of one cell of sections() (its key; () for none): img/s of a throughput cell,
    minutes to target of a time-to-accuracy cell (key "tta", ...), over the campaigns; None
    where there is nothing to draw."""
    from . import charts
    if not key:
        return None
    if key[0] == "tta":
        return charts.tta_history(t[[tuple(r) == key[1:] for r in t[TTA_KEY].itertuples(index=False)]],
                                  tta_title(key[1:]))
    return charts.history(h[[tuple(r) == key for r in h[KEY].itertuples(index=False)]], title(key))


def tta_title(key, prefix: str = "Time to accuracy: ") -> str:
    return prefix + _named(dict(zip(TTA_KEY, key)), "")


def _tta_sections(t: pd.DataFrame) -> List[Tuple[tuple, List[Section]]]:
    out = []
    for key, g in t.groupby(TTA_KEY, sort=False):
        rows = [[r.date, r.commit, r.campaign, r.framework_version or "", "{:g}".format(r.target),
                 intervals.pm_minutes(r.minutes, r.minutes_ci95) + rests_on(
                     {"status": "ok", "repeats": r.converged, "runs": r.runs})
                 if r.minutes is not None else r.status,
                 pm_ratio(r.ratio, r.ratio_ci95, missing=""), _state(r)] for _, r in g.iterrows()]
        out.append((("tta",) + tuple(key), [Table(tta_title(key), [
            "date", "commit", "campaign", "version", "target", "minutes to target", SPEED, "state"],
            rows)]))
    if out:  # once, under the last of them
        out.append(((), [Text("", ["Time to accuracy: minutes = run_start → run_stop, the mean "
                                   "of the converged runs (one seed each) ± the half width of its "
                                   "95 % interval; " + SPEED + " = the previous minutes ÷ now's; "
                                   "> 1: it trains to the target faster now."])]))
    return out


def title(key) -> str:
    k = dict(zip(KEY, key))
    return _named(k, {"synthetic": "", "real": ", real data"}.get(k["data_mode"],
                                                                  ", " + str(k["data_mode"])))


def _named(k: Dict, data: str) -> str:
    """A cell's history title from its key's fields (k): 'PyTorch (Caffe2) fp32 b256 224px ×2 on
    each of 2 nodes, real data (cuda)', the network only where it is not ResNet-50."""
    model = "" if k["model"] == DEFAULT_MODEL else " " + k["model"]  # ResNet-50 titles as before
    nodes = "" if int(k["nodes"]) == 1 else " on each of {} nodes".format(k["nodes"])
    return "{}{} {} b{} {}px ×{}{}{} ({})".format(frameworks.display(k["framework"], k["mode"]), model,
                                                k["precision"], k["batch_size"], k["image_size"],
                                                k["gpus"], nodes, data, k["device"])


def _facts(camp) -> Dict[str, str]:
    """What a history row says of its campaign: its date, its commit, its name."""
    return {"date": (camp.meta.get("created_at") or "")[:19].replace("T", " "),
            "commit": _commit(camp.machine), "campaign": camp.root.name}


def _state(r) -> str:
    if r.state is None:
        return r.why
    if r.state == intervals.NOT_COMPARABLE:
        return "not comparable: " + r.why
    return r.state + (" — regression" if r.regression else "")


def without_results(camps: Sequence, h: pd.DataFrame, t: pd.DataFrame) -> List[str]:
    """The names of the campaigns that have no point in h or t (none of their cells finished)."""
    shown = set(h.campaign) | set(t.campaign)
    return [c.root.name for c in camps if c.root.name not in shown]


def sections(h: pd.DataFrame, t: Optional[pd.DataFrame] = None,
             empty: Sequence[str] = ()) -> List[Tuple[tuple, List[Section]]]:
    """A summary, then per cell (its key, its table) in the order cells first appear: the
    throughput cells (h), then the time-to-accuracy cells (t, tta_history; keys begin "tta").
    empty: the campaigns given without a result yet (counted, and named, not left out unsaid)."""
    t = t if t is not None else pd.DataFrame(columns=TTA_COLUMNS)
    if h.empty and t.empty:  # campaigns planned or started, none with a result yet
        return [((), [Text("History", ["No cell of these campaigns has a result yet: nothing to "
                                       "follow over time (`compare run … --resume` runs them)."],
                           bullets=True)])]
    dates = sorted(set(h.date) | set(t.date))
    n_cells = len(h.groupby(KEY)) + len(t.groupby(TTA_KEY))
    n_camps = len(set(h.campaign) | set(t.campaign)) + len(empty)
    lines = ["{} campaign{} from {} to {}; {} cell{}{}.".format(
        n_camps, "s" if n_camps != 1 else "", dates[0], dates[-1], n_cells,
        "s" if n_cells != 1 else "", " ({} of them time to accuracy)".format(
            len(t.groupby(TTA_KEY))) if len(t) and len(h) else
        " of time to accuracy" if len(t) else "")]
    lines += ["Regression: {} at {} ({}): {} of the previous figure.".format(
        title(tuple(r[c] for c in KEY)), r.campaign, r.commit, pm_ratio(r.ratio, r.ratio_ci95))
        for _, r in h[h.regression.astype(bool)].iterrows()] + [
        "Regression: {}, time to accuracy, at {} ({}): trains to the target at {} the previous "
        "speed.".format(tta_title(tuple(r[c] for c in TTA_KEY), ""), r.campaign, r.commit,
            pm_ratio(r.ratio, r.ratio_ci95)) for _, r in t[t.regression.astype(bool)].iterrows()] or [
        "No regression: no cell is worse than its previous figure beyond noise."]
    if empty:
        lines.append("No result yet in {}: nothing of {} to show (`compare run … --resume` runs {} "
                     "cells).".format(", ".join(empty), "it" if len(empty) == 1 else "them",
                                      "its" if len(empty) == 1 else "their"))
    if any(findings.smoke(r) for _, r in h[h.status == "ok"].iterrows()):  # as `compare diff` says
        lines.append("Single runs on a CPU: their intervals only count the noise inside one run, so "
                     "a regression from them is a hint, not a finding (use --repeats 3 or more).")
    out = [((), [Text("History", lines, bullets=True)])]
    for key, g in h.groupby(KEY, sort=False):
        rows = [[r.date, r.commit, r.campaign, r.framework_version or "",
                 pm(r.images_per_sec, r.images_per_sec_ci95, "{:.2f}") + rests_on(r)
                 if r.status == "ok" else r.status,
                 pm_ratio(r.ratio, r.ratio_ci95, missing=""), _state(r)]
                for _, r in g.iterrows()]
        out.append((key, [Table(title(key), ["date", "commit", "campaign", "version", "img/s",
                                             SPEED, "state"], rows)]))
    return out + _tta_sections(t)
