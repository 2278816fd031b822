"""`compare run` is four stages in order, each a module with typed inputs and outputs:

    Study ─► plan.make ─► Plan ─► prepare.make ─► Prepared ─► run.sweep ─► results ─► report.write

study.py builds the Study (flags, a campaign file, a resumed campaign's); `compare run --plan`
stops after the plan (plan.show); `compare report` is the report stage alone.
"""
import signal
import sys
from pathlib import Path

from ..study import Study
from . import plan as planning
from . import prepare, report
from . import run as running


def execute(study: Study) -> int:
    """Plan, prepare, run every unfinished cell, report. Exit 1 when a cell failed or timed out
    (it is recorded, and --resume runs it again), else 0."""
    from rich.console import Console

    from ..files import user_path
    console = Console(stderr=True, markup=False, highlight=False)  # reasons may hold [brackets]
    plan = planning.make(study, lambda text: console.print(text, soft_wrap=True))  # paths whole
    if study.plan:  # the schedule and its estimate, then exit: nothing is created
        campaign = None
        if study.resume:  # what the run would refuse, refused here too, on the one reading of
            from ..store import Campaign  # campaign.json the study was built from
            campaign = Campaign.snapshot(Path(study.results), study.campaign)
            prepare.check_resume(plan, campaign, write=False)
        return planning.show(plan, campaign)
    try:  # fails before anything runs; a signal too, as prepare's failures: nothing kept
        with running.stop_on_signals():
            prepared = prepare.make(plan, console)
    except KeyboardInterrupt as exc:
        raise running.PrepareInterrupted(study, getattr(exc, "signum", signal.SIGINT)) from None
    try:
        running.sweep(prepared, console)
    finally:
        prepared.campaign.unlock()
    root = prepared.campaign.root
    try:  # a signal here too is one line: the cells are recorded, the report can be written again
        with running.stop_on_signals(), user_path(root / "report", "--results"):
            text, paths, warnings = report.write(prepared.campaign, root / "report")
    except KeyboardInterrupt as exc:
        from ..store import counted
        raise running.ReportInterrupted(prepared.campaign, getattr(exc, "signum", signal.SIGINT),
                                        counted([s.run_id for s in plan.cells], plan.repeated)[0]) \
            from None
    for w in warnings:
        console.print("warning: " + w)
    sys.stdout.write(text)
    console.print("report: {}".format(", ".join(str(p) for p in paths)))
    code, failed = prepared.campaign.run_outcome()  # 1 where a cell failed or timed out
    if failed:
        console.print(failed)
    return code
