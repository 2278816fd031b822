"""Stage 3, run: cells -> results. Every unfinished cell of the plan, up to `concurrency` at once on
disjoint units of the pool (scheduler.py: a lane, an executor of its own, per cell running),
each attempt with a fresh nonce; an auto cell's batch is searched first (batchsearch.py). Each
result is saved the moment it exists, the plan with its ETA printed before the first cell.

Every cell ends as a recorded result, whatever happens to it; the sweep goes on. Ctrl-C, SIGTERM
or SIGHUP end the sweep cleanly: the executors stop what runs, the cells stopped are not recorded,
and `Interrupted` says how to resume (cli.py prints the line; exit 128 + the signal).
"""
import contextlib
import shlex
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import List

from .. import batchsearch, envs
from .. import frameworks as fws
from ..progress import SweepProgress
from ..scheduler import Lanes
from ..store import counted
from . import plan as planning
from .prepare import Prepared

STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


class Interrupted(Exception):
    """The sweep was stopped by a signal; the campaign can be resumed."""

    def __init__(self, campaign, signum: int, recorded: int, remaining: int, word: str = "cell"):
        super().__init__("interrupted by {}".format(signal.Signals(signum).name))
        self.campaign, self.signum = campaign, signum
        self.recorded, self.remaining = recorded, remaining
        self.word = word  # what was recorded: cells, or runs where cells are repeated
        self.exit_code = 128 + signum  # 130 for Ctrl-C, 143 for SIGTERM, as shells report them

    def line(self) -> str:
        """What the user reads (cli.py prints it): what is recorded, and the command to go on."""
        return "interrupted ({}): {} {}{} recorded, {} not run; resume with: {}".format(
            signal.Signals(self.signum).name, self.recorded, self.word,
            "" if self.recorded == 1 else "s", self.remaining, "compare run --results {} --resume".format(
                shlex.quote(str(self.campaign.root))))  # it keeps its study


class PrepareInterrupted(Interrupted):
    """Stopped by a signal before the first cell: prepare.make kept no new campaign and left a
    resumed one as it was."""

    def __init__(self, study, signum: int):
        super().__init__(None, signum, 0, 0)
        self.study = study

    def line(self) -> str:
        said = "interrupted ({}) while preparing the run: no cell ran and ".format(
            signal.Signals(self.signum).name)
        if not self.study.resume:
            return said + "nothing is kept; run the same command again"
        return said + "the campaign is as it was; resume with: compare run --results {} " \
            "--resume".format(shlex.quote(str(Path(self.study.results).absolute())))


class ReportInterrupted(Interrupted):
    """Stopped by a signal in the report stage: every cell is recorded, the report is not."""

    def __init__(self, campaign, signum: int, what: str):
        super().__init__(campaign, signum, 0, 0)
        self.what = what  # the cells recorded, as the report counts them ("8 runs of 4 cells")

    def line(self) -> str:
        return "interrupted ({}) while writing the report: every cell is recorded ({}); write the " \
            "report with: compare report {}".format(signal.Signals(self.signum).name, self.what,
                                                    shlex.quote(str(self.campaign.root)))


@contextlib.contextmanager
def stop_on_signals():
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt (with .signum) once; while the sweep
    then stops what runs, further ones are ignored, so the clean-up is not cut short."""
    caught: List[int] = []

    def handler(signum, frame):
        if not caught:
            caught.append(signum)
            exc = KeyboardInterrupt()
            exc.signum = signum
            raise exc
    try:
        previous = {s: signal.signal(getattr(signal, s), handler) for s in STOP_SIGNALS}
    except ValueError:  # not the main thread: leave signals alone
        previous = {}
    try:
        yield
    finally:
        for name, old in previous.items():
            signal.signal(getattr(signal, name), old)


def sweep(prepared: Prepared, console) -> int:
    """Run every cell not finished yet; return how many were recorded (Interrupted on a signal).
    Every executor is closed on every way out."""
    plan, campaign = prepared.plan, prepared.campaign
    todo = [s for s in plan.cells if s.run_id not in prepared.done]
    what, word = counted([s.run_id for s in plan.cells], plan.repeated)  # as the report counts
    console.print("campaign {}: {}, {} to run{}".format(campaign.root, what, len(todo),
                                                         plan.pool.describe(plan.concurrency)))
    for note in plan.pool.notes:
        console.print("note: " + note)
    # an auto cell's spec hash -> the batch its search chose (an earlier session's, or this one's)
    searched = planning.searched(prepared.done.values())
    try:  # the plan with its ETA, before the first cell; the bar shows it, and each cell's phase
        text, estimates, overlap, unbuilt = planning.schedule(plan, todo, campaign.root.parent,
                                                              searched)
        if todo:
            console.print(text.rstrip())
    except Exception as exc:  # an estimate must never stop the sweep it estimates
        console.print("plan: no estimate ({}: {})".format(type(exc).__name__, exc))
        estimates, overlap, unbuilt = {}, 1.0, []
    progress = SweepProgress(console, len(todo), campaign.root / "work", estimates, overlap,
                             lambda spec: spec.framework in unbuilt and not envs.existing(
                                 fws.get(spec.framework), spec.device), word)

    def run_cell(executor, spec, slot):
        spec = replace(spec, nonce=campaign.attempt_nonce())  # names the campaign
        started = time.time()
        if spec.batch_auto:  # its batch first, from probes (batchsearch.py)
            result = batchsearch.run_auto(spec, campaign, executor, plan, slot, console.print, searched)
        else:
            result = executor.run(spec, campaign, plan.study.timeout, slot=slot)
        result.phases.update(cell_start=started, cell_end=time.time())
        return result
    recorded = 0
    try:
        with stop_on_signals(), progress, Lanes(lambda: plan.executor(plan.context), plan.pool,
                                                 plan.concurrency, console.print,
                                                 first=prepared.executor) as lanes:
            for _, result in lanes.run(todo, run_cell, lambda spec, slot: progress.start(spec),
                                       searched):
                campaign.save_result(result)
                recorded += 1
                progress.done(result)
    except KeyboardInterrupt as exc:
        raise Interrupted(campaign, getattr(exc, "signum", signal.SIGINT), recorded,
                          len(todo) - recorded, word) from None
    return recorded
