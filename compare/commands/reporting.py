"""The report commands: `compare report`, `diff`, `history`, `check` and `list references`.

    compare report results/2026-11-30 --format md,html --reference a6000_tf_cnn_benchmarks
    compare diff results/t4 results/v100 --out diff/
    compare history results/                       # every campaign in the folder, oldest first
    compare check results/new-box --reference my_v100.csv --tolerance 5%

One function per command; compare/cli.py joins them with register(). Heavy imports (pandas,
matplotlib) happen inside the commands.
"""
import json
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import typer

from .. import frameworks as fws
from .. import parsing
from ..errors import UserError
from ..study import DECLARED
from . import err as _err


def _cells(path: Path):
    """(campaign, its throughput cells, planned cells without a result, every result) with one
    warning line per result left out: the campaign read once (the report stage's View)."""
    from ..reporting.comparator import cells
    from ..stages.report import View
    from ..store import Campaign
    c = Campaign.open(path)
    view = View.load(c)
    for e in view.warnings:
        _err("warning: {}: {}".format(path, e))
    return c, cells(view.throughput), view.missing, view.results


def _out(text: Optional[str], read: Sequence[Path] = (), whose: str = "") -> Optional[Path]:
    """--out as a folder: taken as text, as typer would make '' the current folder (Path('.'));
    one line where it is empty, inside a folder a campaign's runs write, or inside the folder of
    a campaign other than those the command reads (`read`; `whose`: how the message names them)."""
    if text is None:
        return None
    parsing.given(text, "--out", "give a folder path")
    from ..store import check_outside_runs
    check_outside_runs(Path(text), "--out", " (a campaign's report folder, or any other)")
    _not_another_campaign(Path(text), read, whose)
    return Path(text)


def _not_another_campaign(out: Path, read: Sequence[Path], whose: str) -> None:
    """One line where `out` is, or lies inside, the folder of a campaign the command does not
    read: its files would stand among that campaign's (a report over its own report/)."""
    from ..store import CAMPAIGN_FILE
    where, mine = out.resolve(), {Path(r).resolve() for r in read}
    for root in [where] + list(where.parents):  # the nearest campaign above --out decides
        if (root / CAMPAIGN_FILE).is_file():
            if root in mine:
                return
            one = len(mine) == 1 and whose.startswith("the campaign ")
            raise UserError("--out {}: inside the folder of campaign {}, not {}{}; give a "
                            "folder inside {} or outside every campaign".format(
                                out, root, whose, " ({})".format(", ".join(map(str, read))) if read
                                else "",
                                "it (the default: {})".format(Path(read[0]) / "report") if one
                                else "one of them"))


def _read_by_history(folders: List[Path]) -> List[Path]:
    """The campaigns `compare history` reads of its arguments (each, or those one level below)."""
    from ..store import campaign_folders
    return list(dict.fromkeys(p for f in folders for p in campaign_folders(f)))


def _campaign(text: str, label: str) -> Path:
    """A campaign folder argument (`label`: how usage names it), refused where empty."""
    return Path(parsing.given(text, label, "give a campaign folder made by `compare run`"))


def _framework(name: str, flag: str) -> str:
    """A framework a flag names (an alias too), by its name; one line naming the flag if none."""
    try:
        return fws.get(name).name
    except UserError:
        raise UserError("{} {!r}: unknown framework; choose from {}".format(flag, name, fws.choices())) \
            from None


def report(
    campaign: str = typer.Argument(..., help="A campaign folder made by `compare run`."),
    format: str = typer.Option("md", help="Comma list of md, csv, json, html."),
    out: Optional[str] = typer.Option(None, metavar="DIR",
                                      help="Folder for report files (default CAMPAIGN/report)."),
    reference: List[str] = typer.Option([], metavar="NAME|CSV", help="Published figures to compare "
                                        "with: a name from `compare list references` or a CSV path; "
                                        "several: the flag again."),
    baseline: Optional[str] = typer.Option(None, help="Framework the others are divided by "
                                           "(default: the first present, in the order of {}).".format(
                                               fws.choices())),
    gpu_hour_price: Optional[str] = typer.Option(None, help=DECLARED["gpu_hour_price"].help + (
        " Default: the campaign's.")),
):
    """Write the report files of a campaign; with md (the default) also print the Markdown."""
    from ..files import check_writable_dir, user_path
    from ..reporting import parse_formats, references
    from ..stages import report as stage
    from ..store import Campaign
    campaign = _campaign(campaign, "compare report: CAMPAIGN")
    out = _out(out, [campaign], "the campaign reported")
    formats = parse_formats(format)
    loaded, seen = [], set()
    for r in reference:  # each reference once, as history counts a campaign named twice once
        if references.resolve(r).resolve() in seen:
            _err("warning: --reference {}: named twice; shown once".format(r))
            continue
        seen.add(references.resolve(r).resolve())
        loaded.append((references.resolve(r).resolve(), references.load(r)[1]))
    refs = references.distinct(loaded)  # two files named ref.csv: two tables, told apart
    base = None if baseline is None else _framework(baseline, "--baseline")
    price = None if gpu_hour_price is None else DECLARED["gpu_hour_price"].parse(
        gpu_hour_price, "--gpu-hour-price", DECLARED["gpu_hour_price"])
    c = Campaign.open(campaign)
    refs, base = _unused_for_accuracy(c, [r for r in dict.fromkeys(reference)], refs, baseline,
                                      base)
    label = "--out" if out else "the report folder (no --out given)"  # name no flag not given
    check_writable_dir(out or c.root / "report", label)
    with user_path(out or c.root / "report", label):
        text, paths, warnings = stage.write(c, out or c.root / "report", formats, refs, base, price)
    for w in warnings:
        _err("warning: " + w)
    if "md" in formats:  # the Markdown on stdout only when it was asked for
        sys.stdout.write(text)
    for path in paths:
        _err("wrote {}".format(path))


def _unused_for_accuracy(c, typed: List[str], refs: list, baseline: Optional[str], base):
    """(references, baseline) for the report: both divide or match throughput cells, so for a
    campaign of time-to-accuracy runs alone each is said unused, one warning line each, as
    --gpu-hour-price is for a campaign without such runs (--baseline was refused as run by no
    cell, "none (no results yet)", and --reference dropped without a word)."""
    from ..reporting.accuracy import split
    throughput, trained = split(c.results()[0])
    if throughput or not trained:
        return refs, base
    alone = "and this campaign has time-to-accuracy runs alone"
    if baseline is not None:
        _err("warning: --baseline {}: not used: it divides throughput cells (framework versus "
             "framework), {}".format(baseline, alone))
    for r in typed:
        _err("warning: --reference {}: not used: published images/sec are held against "
             "throughput cells, {}".format(r, alone))
    return [], None


def diff(
    campaign_a: str = typer.Argument(..., help="Campaign A (e.g. the T4 machine)."),
    campaign_b: str = typer.Argument(..., help="Campaign B (e.g. the V100 machine): ratios are B ÷ A."),
    out: Optional[str] = typer.Option(None, metavar="DIR", help="Also write diff.md, diff.csv, diff.json "
                                      "here "
                                       "(and diff_time_to_accuracy.csv/.json where there are "
                                       "time-to-accuracy cells)."),
):
    """Machine versus machine: B ÷ A on every comparable cell, better / worse / within noise; the
    others listed with the reason."""
    from ..files import check_writable_dir, remove_files, user_path, write_text
    from ..reporting import diff as d
    from ..reporting import tables
    typed = (campaign_a, campaign_b)
    campaign_a, campaign_b = (_campaign(campaign_a, "compare diff: CAMPAIGN_A"),
                              _campaign(campaign_b, "compare diff: CAMPAIGN_B"))
    out = _out(out, list(dict.fromkeys([campaign_a, campaign_b])), "one of the campaigns compared")
    if out is not None:
        check_writable_dir(out, "--out")
    (ca, da, _, ra), (cb, db, _, rb) = _cells(campaign_a), _cells(campaign_b)
    if ca.root.resolve() == cb.root.resolve():  # a slip: "within noise" of itself, unsaid
        _err("warning: {} and {} are the same campaign: each cell is compared with itself".format(
            *typed))
    table = d.diff(da, db)
    tta = d.tta_diff(d.tta_cells(ra), d.tta_cells(rb))  # minutes to target, B against A
    text = tables.markdown(d.sections(table, da, db, ca.machine, cb.machine, str(campaign_a),
                                      str(campaign_b), tta))
    sys.stdout.write(text)
    if out is not None:
        with user_path(out, "--out"):  # each file made aside and renamed (files.py)
            write_text(out / "diff.md", text, out)
            write_text(out / "diff.csv", table.to_csv(index=False), out)
            write_text(out / "diff.json", json.dumps(d.records(table), indent=2) + "\n", out)
            names = ["diff.md", "diff.csv", "diff.json"]
            if len(tta):  # the time-to-accuracy cells: columns of their own, in both formats
                write_text(out / "diff_time_to_accuracy.csv", tta.to_csv(index=False), out)
                write_text(out / "diff_time_to_accuracy.json",
                           json.dumps(d.records(tta), indent=2) + "\n", out)
                names += ["diff_time_to_accuracy.csv", "diff_time_to_accuracy.json"]
            else:  # an earlier diff's, of other campaigns, would stand beside this one's diff.md
                remove_files(out, out, lambda n: n in ("diff_time_to_accuracy.csv",
                                                       "diff_time_to_accuracy.json"))
        _err("wrote {}".format(", ".join(str(out / n) for n in names)))


def history(
    campaigns: List[str] = typer.Argument(..., metavar="CAMPAIGN...", help="Campaign folders "
                                          "made by `compare run`, or one folder holding them."),
    out: Optional[str] = typer.Option(None, metavar="DIR", help="Also write history.md, history.csv and "
                                       "history.html (a chart per cell) here (and "
                                       "history_time_to_accuracy.csv where there are "
                                       "time-to-accuracy cells)."),
):
    """Each cell's figure over time (date, commit, versions), regressions flagged."""
    from ..files import check_writable_dir, remove_files, user_path, write_text
    from ..reporting import history as hist
    from ..reporting import html, tables
    campaigns = [Path(parsing.given(c, "compare history: CAMPAIGNS", "give campaign folders made by "
                                    "`compare run`, or the folder that holds them")) for c in campaigns]
    out = _out(out, _read_by_history(campaigns), "one of the campaigns of the history")
    if out is not None:
        check_writable_dir(out, "--out")
    camps = hist.campaigns(campaigns, lambda w: _err("warning: " + w))
    h = hist.history(camps, lambda w: _err("warning: " + w))
    tta = hist.tta_history(camps)  # time-to-accuracy cells: minutes to target over time
    parts = hist.sections(h, tta, hist.without_results(camps, h, tta))
    text = tables.markdown([s for _, secs in parts for s in secs])
    sys.stdout.write(text)
    if out is None:
        return
    body = []
    for key, secs in parts:
        chart = hist.chart(key, h, tta)  # img/s, or minutes to target, over the campaigns
        body += ([html.figure(chart)] if chart else []) + [html.code(tables.html_fragment(secs))]
    with user_path(out, "--out"):  # each file made aside and renamed (files.py)
        write_text(out / "history.md", text, out)
        write_text(out / "history.csv", h.to_csv(index=False), out)
        if len(tta):  # the time-to-accuracy cells: columns of their own
            write_text(out / "history_time_to_accuracy.csv", tta.to_csv(index=False), out)
        else:  # an earlier history's, of other campaigns, would stand beside this one's
            remove_files(out, out, lambda n: n == "history_time_to_accuracy.csv")
        write_text(out / "history.html", html.document("compare history", body), out)
    _err("wrote {}".format(", ".join(str(out / n) for n in ["history.md", "history.csv", "history.html"]
                                     + (["history_time_to_accuracy.csv"] if len(tta) else []))))


def check(
    campaign: str = typer.Argument(..., help="A campaign folder made by `compare run`."),
    reference: str = typer.Option(..., help="A name from `compare list references` or a CSV path."),
    tolerance: str = typer.Option("5%", help="How far below the reference a figure may be (5% or "
                                  "0.05); a reference's own `tolerance` column wins."),
):
    """Exit 0 when every comparable cell is at or above reference × (1 − tolerance), else exit 1
    listing the cells that fall short."""
    from ..reporting import check as chk
    from ..reporting import references, tables
    campaign = _campaign(campaign, "compare check: CAMPAIGN")
    tol = references.parse_tolerance(tolerance)
    name, ref = references.load(reference)
    c, cells, missing, _ = _cells(campaign)
    secs, passed = chk.sections(chk.check(cells, ref, name, tol, c.machine, missing), name, missing,
                                cells, list(c.meta.get("planned", {})))
    sys.stdout.write(tables.markdown(secs))
    raise typer.Exit(0 if passed else 1)


def list_references():
    """Published figures shipped with compare, and the user's own (CSV files in the cache)."""
    from ..reporting import references
    for name in references.available():
        try:
            print(references.describe(*references.load(name)))
        except UserError as exc:  # a user's CSV in the cache: the others are still listed
            _err("warning: {}; left out".format(exc))
    print("add your own: a CSV in {} or `compare report DIR --reference PATH.csv`".format(
        references.user_dir()))


def register(app: typer.Typer, list_app: typer.Typer) -> None:
    """Join the report commands to the `compare` app and its `list` sub-app."""
    app.command()(report)
    app.command("diff")(diff)
    app.command()(history)
    app.command()(check)
    list_app.command("references")(list_references)
