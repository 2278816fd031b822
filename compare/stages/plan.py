"""Stage 1, plan: Study -> Plan. What the study comes to where it runs: the machine record (taken
once), the device, the settings the machine decides (compare/defaults.py), the cells (matrix.py),
the executor that can run them all, the pool they are packed on and how many run at once.
`compare run --plan` stops here and prints the schedule with its estimate (compare/eta.py).
Every check that needs the machine or the whole matrix is made here, before anything runs.
"""
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from backends.contract import SchemaError
from backends.contract.rules import EXIT_GRACE_S, exit_grace

from .. import defaults, envs, executors, resources
from ..errors import UserError
from ..kept import asked_study, ran_with
from ..matrix import QUICK, Matrix, image_sizes
from ..parsing import AUTO
from ..scheduler import pool_for
from ..settings import SPEC_HELD
from ..study import Study

COMMON = {"image_size": 224, "steps": 50, "warmup_steps": 10}  # RunSpec's, unless given or --quick
OVERSUBSCRIBE = "COMPARE_OVERSUBSCRIBE"  # =1: allow more CPU workers than cores
MAX_CELLS = 10_000  # cells of one campaign: each is at least one process start
SEARCH = {"cuda": (64, 1024), "cpu": (8, 128)}  # an auto batch's search, --batch-search not given


@dataclass
class Plan:
    """A Study on the machine that runs it: the cells, where, and what the machine decided."""

    study: Study
    machine: Dict[str, Any]  # the record of where the runs execute (campaign's machine.json)
    device: str  # cuda or cpu
    matrix: Matrix
    cells: list  # RunSpec per cell, in sweep order
    executor: type  # the executor class that runs them
    why: str  # why that executor
    context: executors.Context
    pool: resources.Pool
    concurrency: int
    defaults: Dict[str, str]  # setting -> why, for each the machine decided (the report says so)

    def held(self) -> Dict[str, Any]:
        """The settings --resume holds, as they resolved here (campaign.json's `settings`): each
        HELD setting every cell carries, the executor, the search bounds, per framework its
        options and --python."""
        m = self.matrix
        out = {field: m.common[field] for field in SPEC_HELD if field in m.common}
        out.update(device=self.device, executor=self.executor.name, batch_search=list(m.search))
        for fw in m.frameworks:
            out["options." + fw.name] = m.options.get(fw.name, {})
            out["python." + fw.name] = self.study.overrides.get(fw.name)  # None: compare's choice
        return out

    @property
    def repeated(self) -> bool:
        """Whether a cell runs more than once: the plan and the sweep then count runs of cells."""
        return any(s.repeat for s in self.cells)

    def largest_batch(self) -> int:
        """The largest per-GPU batch a cell may run: given, or the top of a search."""
        auto = any(s.batch_auto for s in self.cells)
        return max([s.batch_size for s in self.cells] + [self.matrix.search[1]] * auto)


def make(study: Study, log=lambda text: None) -> Plan:
    """The plan of `study` (one UserError line for what cannot run where it would)."""
    envs.check_cache()  # environments and prepared data go there: refused before anything runs
    _check_exit_grace()
    fws = study.framework_list()
    ctx = executors.Context(fws, "auto", study.overrides, study.executor_flags, log=log,
                            said=study.label("executor"))
    remote = executors.remote(study.executor)
    machine = (remote or executors.Executor).machine(ctx)  # once, for everything that follows
    sized, where = machine, "on this machine" if remote is None else "on the {} nodes".format(
        study.executor)
    if study.plan_gpus and study.device == "cpu":
        raise UserError("{}{} {}: plans the study on GPUs, and {} cpu runs it on the CPU; leave one "
                        "of them out".format(study.at("plan_gpus", "device"), study.said("plan_gpus"),
                                             study.plan_gpus, study.said("device")))
    if study.plan_gpus:  # what the study would take on a machine of that many GPUs
        sized, where = dict(machine, gpus=[{}] * study.plan_gpus), "the planned machine"
    kind = device_of(study, [1], sized, where)
    given, batches, said = defaults.fill(sized, kind, study, _resumed_steps(study))
    device = device_of(study, given["gpus"], sized, where)
    _gpu_only(study, device, fws, log)
    common = dict(COMMON, **(QUICK if study.quick else {}), windows=study.windows,
                  compile=study.compile)
    common.update({k: v for k, v in (("image_size", study.image_size), ("steps", given["steps"]),
                                     ("warmup_steps", given["warmup"])) if v is not None})
    if study.windows > common["steps"]:  # the harness times one window per step at most
        if study.given("windows"):
            raise UserError("{}{} {}: more windows than the {} timed steps; give {} <= {}".format(
                study.at("windows", "steps"), study.said("windows"), study.windows, common["steps"],
                study.said("windows"), study.said("steps", "windows")))
        said["windows"] = "{0} ({1} timed steps: one window per step, not the default {2})".format(
            common["steps"], common["steps"], study.windows)
        if _resumed_windows(study) != study.windows:  # what the harness times, recorded so
            common["windows"] = common["steps"]
    if study.target_accuracy is not None:  # time to accuracy (docs/accuracy.md)
        common.update(target_accuracy=study.target_accuracy, max_epochs=study.max_epochs,
                      eval_every=study.eval_every)
    _check_size(study, given, fws)
    matrix = Matrix(fws, given["gpus"], given["precision"], list(study.batch_size or ()),
                    study.repeats, device, common, study.options(), study.nodes, study.data,
                    study.data_only, study.model, image_sizes(study.model, study.image_size,
                                                              study.quick),
                    study.mode, study.batch_search or SEARCH[device], batches, _classes(study),
                    given["search_starts"], given["search_steps"])
    cells = matrix.specs()
    for spec in cells:  # the host's checks come first; this is the contract's own, as a backstop
        try:
            spec.validate()
        except SchemaError as exc:
            raise UserError("cell {}: {}".format(spec.run_id, exc)) from None
    if study.target_accuracy is not None:
        _check_epochs(study, cells)
    ctx = executors.Context(fws, device, study.overrides, flags=study.executor_flags, log=log,
                            needs=_needs(study, device), said=study.label("executor"))
    cls, why = executors.choose(study.executor, ctx, _resumed_executor(study))  # one that can
    # run the whole study (a resumed campaign's own first)
    _check_python(study, cls)
    _unused_python(study, log)
    pool, at_once = pool_for(cls, ctx, given["gpus"], _concurrency(study, device, machine),
                             study.plan_gpus, len(cells))  # the executor's own, or --plan-gpus N
    return Plan(study, machine, device, matrix, cells, cls, why, ctx, pool, at_once, said)


def _resumed_executor(study: Study) -> Optional[str]:
    """The executor a campaign ran with, for --resume with --executor auto; None otherwise (or
    where campaign.json does not say: prepare's checks then speak of that)."""
    if not study.resume or study.executor != executors.AUTO:
        return None
    name = ran_with(study.campaign)
    return name if isinstance(name, str) else None


def _resumed_steps(study: Study) -> Optional[Tuple[int, int]]:
    """The (timed, warm-up) steps a resumed campaign resolved (campaign.json's settings), which
    it keeps where its study left them to the machine; None otherwise (or where campaign.json
    does not say: a campaign of an earlier compare stored no study, and its rebuilt one gives
    them: kept.study_of_config)."""
    meta = study.campaign if study.resume else {}
    settings = meta.get("settings")
    if asked_study(meta) is None or not isinstance(settings, dict):
        return None
    steps, warmup = settings.get("steps"), settings.get("warmup_steps")
    return (steps, warmup) if all(type(v) is int and v >= 0 for v in (steps, warmup)) else None


def _resumed_windows(study: Study) -> Optional[int]:
    """The windows a resumed campaign's cells hold (campaign.json's settings): an earlier compare
    recorded the default beside fewer timed steps (its harness timed one a step), and they stay."""
    settings = study.campaign.get("settings") if study.resume else None
    windows = settings.get("windows") if isinstance(settings, dict) else None
    return windows if type(windows) is int else None


def device_of(study: Study, gpus: List[int], machine: Dict[str, Any], where: str) -> str:
    """The study's device (auto, cuda or cpu) -> cuda or cpu, checked against the GPUs (or cores)
    of the machine."""
    device, found, cores = study.device, machine.get("gpus") or [], machine.get("cpu_count")
    gpu_flag, device_flag = study.label("gpus"), study.label("device")
    if device == "auto":
        device = "cuda" if found else "cpu"
    there = where.replace("on ", "", 1)
    if device == "cpu" and cores and max(gpus) > cores and os.environ.get(OVERSUBSCRIBE) != "1":
        raise UserError("{} {}: on CPU each worker is a process and {} has {} core{}; give "
                        "counts from 1 to {} (or set {}=1 to run more workers than cores)".format(
                            gpu_flag, max(gpus), there, cores, "s" if cores > 1 else "", cores,
                            OVERSUBSCRIBE))
    if device == "cuda" and not found:
        raise UserError("{} cuda: no NVIDIA GPU found {} (nvidia-smi lists none); use {}".format(
            device_flag, where, study.ask("device", "device", "cpu", '"cpu"')))
    if device == "cuda" and max(gpus) > len(found):
        raise UserError("{} {}: {} has {} GPU{}; give counts from 1 to {}".format(
            gpu_flag, max(gpus), there, len(found), "s" if len(found) > 1 else "", len(found)))
    return device


def _classes(study: Study) -> Dict[str, int]:
    """Time to accuracy: each data folder's class count (its train part's), the model's outputs."""
    if study.target_accuracy is None:
        return {}
    return {d: sum(1 for e in os.scandir(os.path.join(d, "train")) if e.is_dir() and
                   not e.name.startswith(".")) for d in study.data}


def _check_epochs(study: Study, cells) -> None:
    """Time to accuracy: each folder's train/ holds at least the largest global batch (an epoch
    of no step trains nothing; the backend fails such a cell), refused before a campaign is made.
    Its JPEG files are counted; prepare counts again the usable ones (datasets.for_run). Then
    prepare's other rules, in its words: two classes or more, a val/ of JPEGs naming train/'s."""
    from ..datasets import (
        check_val_classes,
        held_out,
        jpegs_up_to,
        one_class,
        open_held_out,
        too_few_to_train,
    )
    widest = max(cells, key=lambda s: s.global_batch)
    for folder in study.data:
        train, what = os.path.join(folder, "train"), "{}{} {}".format(
            study.at("data"), study.said("data"), folder)
        images = jpegs_up_to(train, widest.global_batch)
        if images < widest.global_batch:
            raise too_few_to_train(what, train, images, widest.global_batch, widest.world_size,
                                   study.said("batch_size", "data"))
        classes = _with_jpegs(train)
        if len(classes) < 2:  # prepare's rules (datasets.for_run), before a campaign is made
            raise one_class(what, os.path.realpath(train))
        if held_out(folder):
            val = open_held_out(folder)
            check_val_classes(val.root, val.classes, classes, os.path.realpath(train))


def _with_jpegs(root: str) -> List[str]:
    """The class folders of `root` that hold a JPEG file (as open_folder finds them; each is
    read up to its first JPEG, so ImageNet's train/ is not listed whole)."""
    from ..datasets import SUFFIXES
    return [e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith(".") and any(
        f.name.lower().endswith(SUFFIXES) and f.is_file() for f in os.scandir(e.path))]


def _check_python(study: Study, executor: type) -> None:
    """Each --python interpreter has the modules every run of its framework imports, asked where
    it runs: on this machine (the local executor; docker takes none), not on a cluster's nodes
    (slurm: a path there). Each of its cells would fail at once: refused before the first."""
    if executor.runs_on != "host":
        return
    for fw in study.framework_list():
        python = study.overrides.get(fw.name)
        if python is not None:
            envs.check_python(fw, python, study.label("python"), study.said("python"))


def _check_exit_grace() -> None:
    """COMPARE_EXIT_GRACE_S, read once here for every executor: each cell's launcher reads it
    too (a Slurm job's srun, the processes launcher in a local run or a container), and refused it
    cell by cell, only where a cell has more than one process."""
    try:
        exit_grace()
    except ValueError as exc:
        raise UserError("{}; give whole seconds, or unset it for the default {:g} s".format(
            exc, EXIT_GRACE_S)) from None


def _unused_python(study: Study, log) -> None:
    """A --python of a framework the run leaves out is said, not taken unseen (a script may give
    every framework's python and pick --frameworks, so it is no error; a resumed campaign's own
    are not said again)."""
    if study.sources.get("python") in (None, "default", "campaign"):
        return
    run = [fw.name for fw in study.framework_list()]
    for name, path in study.overrides.items():
        if name not in run:
            log("warning: {} {}={}: not used: {} is not in this run's {} ({})".format(
                study.label("python"), name, path, name, study.said("frameworks", "python"),
                ", ".join(run)))


def _gpu_only(study: Study, device: str, fws, log) -> None:
    """An --option only a GPU reads (its declaration's `gpu` says what it does there), given to a
    CPU run, is said once as planned, not ignored (or a cell recorded unsupported) unseen; a
    resumed campaign's own are not said again."""
    if device != "cpu" or study.sources.get("option") in (None, "default", "campaign"):
        return
    on = "{} cpu".format(study.label("device")) if study.device == "cpu" else "no GPU found"
    for item in study.option:
        scope, _, key = item.partition("=")[0].rpartition(".")
        why = next((o.gpu for fw in fws if scope in ("", fw.name) for o in fw.options()
                    if o.key == key and o.gpu), "")
        if why:
            log("warning: {} {}: has no effect on a CPU, and this run is on one ({}): {}".format(
                study.label("option"), item, on, why))


def _check_size(study: Study, given: Dict[str, Any], fws) -> None:
    """At most MAX_CELLS cells, counted before a single one is built (a mode other than default
    runs at one searched batch: Matrix.batches)."""
    batches, plain = len(study.batch_size or ()) or 1, tuple(study.mode) == ("default",)
    runs = sum(batches if mode == "default" else 1 for mode in study.mode)
    axes = [("framework", len(fws))] + [("model", len(study.model))] * (len(study.model) > 1) + [
        ("precision", len(given["precision"]))] + [("batch size", batches)] * plain + [
        ("node count", len(study.nodes)), ("GPU count", len(given["gpus"])),
        ("data", len(study.data)), ("repeat", study.repeats)] + [
        ("(mode, batch) pair", runs)] * (not plain)
    cells = math.prod(n for _, n in axes)
    if cells > MAX_CELLS:
        raise UserError("the matrix has {} cells ({}); at most {} per campaign: give fewer values "
                        "or split the study into campaigns".format(cells, " × ".join(
                            "{} {}{}".format(n, what, "s" if n != 1 else "") for what, n in axes),
                            MAX_CELLS))


def _concurrency(study: Study, device: str, machine: Dict[str, Any]) -> Optional[int]:
    cores, value = machine.get("cpu_count"), study.concurrency
    if value and device == "cpu" and cores and value > cores and os.environ.get(OVERSUBSCRIBE) != "1":
        raise UserError("{} {}: on CPU each cell needs a core of its own and there are {}; "
                        "give 1 to {} (or set {}=1)".format(study.label("concurrency"), value, cores, cores,
                                                           OVERSUBSCRIBE))
    return value


def _needs(study: Study, device: str) -> Dict[str, str]:
    """What the study asks of an executor (executors.CAPABILITIES) -> the flag that asks."""
    out = {}  # each setting as the study names it: a campaign file's by the file and its key
    if max(study.nodes) > 1:
        out["multi_node"] = "{} {}".format(study.label("nodes"), max(study.nodes))
    folders = [d for d in study.data if d != "synthetic"]
    if folders:
        out["real_data"] = "{} {}".format(study.label("data"), folders[0])
    if device == "cuda":
        out["gpus"] = "{} cuda".format(study.label("device"))
    return out


def schedule(plan: Plan, todo, folder: Path, known=()) -> Tuple[str, Dict[str, float], float,
                                                               List[str]]:
    """The schedule of the cells `todo`, estimated from the campaigns in `folder` (eta.py): (the
    text `--plan` prints and the sweep prints before its first cell, each cell's seconds, cells
    at once on average, the frameworks whose environment is built first). `known`: the spec
    hashes of auto cells whose batch an earlier session found."""
    from .. import eta
    unbuilt = eta.to_build(plan.matrix.frameworks, plan.device, plan.study.overrides,
                           plan.executor.name)
    items, marks, source, notes = eta.schedule(todo, plan.pool, plan.concurrency, folder,
                                               plan.machine, plan.executor.name, unbuilt,
                                               plan.study.timeout, known, plan.repeated)
    from ..store import counted
    asked, fewer = plan.study.concurrency, len(plan.cells) < (plan.study.concurrency or 0)
    text = eta.render(items, marks, plan.pool, plan.concurrency, source, "--concurrency {}{}".format(
        asked or AUTO, ", for " * fewer + counted([s.run_id for s in plan.cells], plan.repeated)[0]
        * fewer), notes, plan.repeated, _trains(plan.study))
    wall, serial = max((it.end for it in items), default=0.0), sum(it.end - it.start for it in items)
    return text, {it.spec.run_id: it.end - it.start for it in items}, \
        serial / wall if wall else 1.0, unbuilt


def _trains(study: Study) -> List[str]:
    """Time to accuracy: one line of what each run does (target, epochs, evaluations) and what
    each data folder holds (train/ and val/: JPEG files and classes); none for throughput."""
    from ..datasets import jpeg_count
    if study.target_accuracy is None:
        return []

    def every(n: int) -> str:
        return "epoch" if n == 1 else "{} epochs".format(n)

    def holds(folder: str) -> str:
        return "{} images in {} classes".format(jpeg_count(folder),
                                                len(_with_jpegs(folder)))
    return ["time to accuracy: top-1 {} on val/ within {}, evaluated every {}; {}".format(
        study.target_accuracy, "{} epoch{}".format(study.max_epochs, "s" * (study.max_epochs > 1)),
        every(study.eval_every), "; ".join(
            "{}: train/ {}, val/ {}".format(d, holds(os.path.join(d, "train")),
                                            holds(os.path.join(d, "val"))) for d in study.data))]


def searched(done) -> Dict[str, int]:
    """An auto cell's spec hash -> the batch its search chose, from the finished results `done`
    (each repeat and session then runs at it: batchsearch.run_auto)."""
    return {r.spec_hash: r.spec["batch_size"] for r in done
            if r.spec.get("batch_auto") and r.status == "ok" and r.spec_hash}


def show(plan: Plan, campaign=None) -> int:
    """`--plan`: print the schedule of the cells still to run and its estimate; nothing is made.
    `campaign`: the one --resume continues, as the resume's checks opened it (a snapshot of the
    reading the study was built from: stages.execute)."""
    from ..files import check_writable_dir
    from ..store import FINISHED, check_new, default_root
    study = plan.study
    done = [r for r in campaign.results()[0] if r.status in FINISHED] if study.resume else []
    if study.results and not study.resume:  # a folder the run would refuse is refused here
        check_writable_dir(Path(study.results), study.label("results"))  # named as given
        check_new(Path(study.results), study.label("results"), study.ask("results", "resume"))
    # the campaigns beside this one, as the run's own plan reads them (run.sweep)
    source = Path(study.plan_from) if study.plan_from else Path(study.results).absolute().parent \
        if study.results else default_root().parent
    ran = {r.run_id for r in done}
    # which executor the run would take (auto's choice shapes the estimate), as the run says it
    sys.stderr.write("executor: {} ({})\n".format(plan.executor.name, plan.why))
    sys.stdout.write(schedule(plan, [s for s in plan.cells if s.run_id not in ran], source,
                              searched(done))[0])
    return 0
