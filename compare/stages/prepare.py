"""Stage 2, prepare: Plan -> Prepared. What the cells need, done once before the first: the campaign
folder (created; or opened to resume: the same machine, the same held settings, the same cells),
the executor, each --data folder checked and the frameworks' native formats written. The machine
record is the plan's (taken once). Environments and images are made by the executor when a
framework's first cell needs them (its result records how long), so a sweep stopped early builds
only what it used. A failure here leaves nothing running and the campaign unlocked; no cell ran,
so a new campaign is not kept (the same command creates it again) and a resumed one's
campaign.json is as it was.
"""
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from backends.contract import RunResult

from .. import datasets, formats, machine_record
from ..errors import UserError
from ..executors import Executor
from ..settings import FREE_FLAGS, settings_of_results
from ..store import FINISHED, Campaign, default_root
from ..study import resume_off
from .plan import Plan


@dataclass
class Prepared:
    """A plan ready to run: its campaign (locked), the first lane's executor, the finished cells."""

    plan: Plan
    campaign: Campaign
    executor: Executor
    done: Dict[str, RunResult]  # a resumed campaign's finished cells by run id, read once


def make(plan: Plan, console) -> Prepared:
    """The campaign, the executor and the data of `plan` (one UserError line if one is amiss)."""
    campaign, before = _campaign(plan), None
    try:
        if plan.study.resume:  # the same machine, the same held settings, the same cells
            before = campaign.meta  # campaign.json as it was, read under the lock
            check_resume(plan, campaign)
        else:
            campaign.plan(plan.cells)
        console.print("executor: {} ({})".format(plan.executor.name, plan.why))
        executor = plan.executor(plan.context)
        try:
            _data(plan, executor, console)
            results, left_out = campaign.results() if plan.study.resume else ([], [])
            for line in left_out:  # a result file its cell's run will replace: said first
                console.print("warning: " + line)
        except BaseException:
            executor.close()  # a writer's container, a Slurm check
            raise
    except BaseException:  # no cell ran: a new campaign is not kept, a resumed one is as it was
        try:
            with contextlib.suppress(Exception):  # the failure is what the user must see
                if not plan.study.resume:
                    campaign.discard(whole=not plan.study.results)  # results/<time>: named by none
                elif before is not None:
                    campaign.restore(before)
        finally:
            campaign.unlock()
        raise
    return Prepared(plan, campaign, executor, {r.run_id: r for r in results if r.status in FINISHED})


def _campaign(plan: Plan) -> Campaign:
    """Create the campaign, or open it to resume (make() checks it and plans its cells); locked.
    campaign.json's `config` of each session: the study, where each setting came from, and why
    each the machine decided is what it is (the report's "Defaults")."""
    study = plan.study
    root = Path(study.results or default_root()).absolute()
    if not study.resume:
        return Campaign.create(root, _asked(plan), plan.machine, plan.held(),  # locked
                               study.label("results"), study.ask("results", "resume"))
    campaign = Campaign.open(root, resume_off(study.sources, study.config), study.resuming(root))
    campaign.lock(study.label("results"), study.ask("results", "resume"))
    return campaign


def _asked(plan: Plan) -> Dict[str, Any]:
    study = plan.study  # the file as a path that names it from anywhere (the report's)
    return {"study": study.to_json(), "sources": dict(study.sources),
            "file": study.config and os.path.abspath(study.config), "defaults": plan.defaults}


def check_resume(plan: Plan, campaign: Campaign, write: bool = True) -> None:
    """A resume's checks (one UserError line): the same machine, the settings the campaign
    holds, a cell planned before the same cell. `write`: record this session and its cells;
    False for `--resume --plan`, which must refuse what the run would refuse and write nothing."""
    recorded, said = campaign.machine, plan.study.resuming(campaign.root)
    differ = machine_record.differences(recorded, plan.machine) if recorded else []
    if differ:  # one campaign, one machine: never mix two machines' figures silently
        raise UserError("{}: the campaign was recorded on another machine ({}); "
                        "start a new campaign and use `compare diff`".format(
                            said, "; ".join(differ)))
    campaign.resume(_asked(plan), plan.held(), lambda rs: settings_of_results(rs, said),
                    write=write, free=FREE_FLAGS, said=said)
    campaign.plan(plan.cells, write=write, said=said)  # a cell planned before must be the same cell


def _data(plan: Plan, executor: Executor, console) -> None:
    """Check the JPEGs of each --data folder and write the native formats that are missing (says
    so); the executor checks its runs can read them."""
    folders = [d for d in plan.study.data if d != "synthetic"]
    if folders:
        m = plan.matrix
        writer = executor.data_writer() or formats.LocalWriter(plan.device, plan.study.overrides,
                                                                plan.context.log)
        workers = max(m.gpus) * max(m.nodes)
        try:
            prepared = datasets.for_run(folders, m.frameworks, console, writer,
                                        plan.largest_batch() * workers, workers,
                                        plan.study.target_accuracy is not None,
                                        (plan.study.label("data"), plan.study.said("batch_size", "data")))
        except UserError as exc:  # a folder it cannot use, named as the study names --data
            if folder_of(str(exc), folders) is None:
                raise
            raise UserError("{} {}".format(plan.study.label("data"), exc)) from None
        executor.check_data(prepared)


def folder_of(message: str, folders: Sequence[str]) -> Optional[str]:
    """The folder of `folders` a message of datasets.for_run is about, where it begins with a path
    (the folder as resolved, or its val/) and ': '; None where it names none (one that begins
    with the setting already). Compared as resolved path components, not as text: /data/imagenet2
    is no part of /data/imagenet, and /data/imagenet/val is."""
    at = message.find(": ")
    while at > 0:
        head = message[:at]  # a folder's name may hold ': ' too: each place it could end
        if os.path.isabs(head):
            parts = Path(os.path.realpath(head)).parts
            for folder in folders:
                mine = Path(os.path.realpath(folder)).parts
                if parts[:len(mine)] == mine:
                    return folder
        at = message.find(": ", at + 1)
    return None

