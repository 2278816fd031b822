"""`compare run`: validated config -> matrix -> executor per cell -> campaign -> report.

Every cell ends as a recorded result, whatever happens to it; the sweep goes on. Ctrl-C, SIGTERM
or SIGHUP end the sweep cleanly: the executor stops what runs, the interrupted cell is not
recorded, and `Interrupted` says how to resume.
"""
import contextlib
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional

from backends.contract import OptionError

from . import bounds, executors
from . import frameworks as fws
from . import matrix as axes
from .errors import UserError
from .matrix import AUTO, QUICK, Matrix, image_sizes, parse_ints, parse_models, parse_precisions
from .resources import Pool
from .settings import COMMON_SETTINGS, settings, settings_of_results  # noqa: F401  (one definition)

DEFAULTS = {"image_size": 224, "steps": 50, "warmup_steps": 10}
DEVICES = ("auto", "cuda", "cpu")
OVERSUBSCRIBE = "COMPARE_OVERSUBSCRIBE"  # =1: allow more CPU workers than cores
STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


class Interrupted(Exception):
    """The sweep was stopped by a signal; the campaign can be resumed."""

    def __init__(self, campaign, signum: int, recorded: int, remaining: int):
        super().__init__("interrupted by {}".format(signal.Signals(signum).name))
        self.campaign, self.signum = campaign, signum
        self.recorded, self.remaining = recorded, remaining
        self.exit_code = 128 + signum  # 130 for Ctrl-C, 143 for SIGTERM, as shells report them


def parse_options(items: List[str], frameworks: List[fws.Framework]) -> Dict[str, Dict[str, Any]]:
    """['channels_last=false', 'tf.xla=true'] -> {framework: {key: typed value}}.

    A plain KEY goes to every framework of the run that declares it (and must be declared by one);
    FRAMEWORK.KEY to that framework only. Values are checked against the declaration.
    """
    out: Dict[str, Dict[str, Any]] = {fw.name: {} for fw in frameworks}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError("--option {!r}: expected KEY=VALUE, e.g. channels_last=true".format(item))
        scope, dot, bare = key.rpartition(".")
        targets = frameworks
        if dot:
            fw = fws.get(scope)
            if fw not in frameworks:
                raise UserError("--option {}: {} is not in this run's --frameworks ({})".format(
                    item, fw.name, ", ".join(f.name for f in frameworks)))
            targets, key = [fw], bare
        takers = [fw for fw in targets if key in {o.key for o in fw.options()}]
        if not takers:
            valid = "; ".join("{}: {}".format(fw.name, ", ".join(sorted(o.key for o in fw.options())))
                              for fw in targets)
            raise UserError("--option {}: unknown key {!r} for {}; valid keys: {}".format(
                item, key, ", ".join(fw.name for fw in targets), valid))
        for fw in takers:
            declared = {o.key: o for o in fw.options()}
            try:
                out[fw.name][key] = declared[key].parse(value)
            except OptionError as exc:
                raise UserError("--option {}".format(exc)) from None
    return out


def resolve_device(device: str, gpus: List[int], machine_gpus: List[Dict], where: str,
                   cores: Optional[int] = None) -> str:
    if device not in DEVICES:
        raise UserError("unknown device {!r}; choose from {}".format(device, ", ".join(DEVICES)))
    if device == "auto":
        device = "cuda" if machine_gpus else "cpu"
    if device == "cpu" and cores and max(gpus) > cores and os.environ.get(OVERSUBSCRIBE) != "1":
        raise UserError("--gpus {}: on CPU each worker is a process and {} has {} core{}; give "
                        "counts from 1 to {} (or set {}=1 to run more workers than cores)".format(
                            max(gpus), where.replace("on ", "", 1), cores, "s" if cores > 1 else "",
                            cores, OVERSUBSCRIBE))
    if device == "cuda":
        if not machine_gpus:
            raise UserError("--device cuda: no NVIDIA GPU found {} (nvidia-smi lists none); "
                            "use --device cpu".format(where))
        if max(gpus) > len(machine_gpus):
            raise UserError("--gpus {}: {} has {} GPU{}; give counts from 1 to {}".format(
                max(gpus), where.replace("on ", "", 1), len(machine_gpus),
                "s" if len(machine_gpus) > 1 else "", len(machine_gpus)))
    return device


def parse_concurrency(text: str, device: str, cores: Optional[int]) -> Optional[int]:
    """--concurrency: None for auto (every free GPU on cuda, 1 on a CPU) or a count >= 1."""
    from .scheduler import concurrency_of
    try:
        value = concurrency_of(text)
    except ValueError:
        raise UserError("--concurrency {!r}: give auto or a count of cells at once >= 1".format(
            text)) from None
    if value and device == "cpu" and cores and value > cores and os.environ.get(OVERSUBSCRIBE) != "1":
        raise UserError("--concurrency {}: on CPU each cell needs a core of its own and there are {}; "
                        "give 1 to {} (or set {}=1)".format(value, cores, cores, OVERSUBSCRIBE))
    return value


def parse_plan(plan: bool, gpus: Optional[int], source: Optional[str]) -> Optional[Dict[str, Any]]:
    """--plan [--plan-gpus N] [--plan-from DIR] -> {"gpus": N or None, "source": folder}."""
    from .store import default_root
    for flag, value in (("--plan-gpus", gpus), ("--plan-from", source)):
        if value is not None and not plan:
            raise UserError("{} belongs to --plan (print the schedule and exit); add --plan".format(flag))
    if gpus is not None and gpus < 1:
        raise UserError("--plan-gpus {}: must be >= 1".format(gpus))
    if source is not None and not Path(source).is_dir():
        raise UserError("--plan-from {}: no such folder; give the folder that holds earlier "
                        "campaigns (default results)".format(source))
    folder = Path(source) if source is not None else default_root().parent
    return {"gpus": gpus, "source": str(folder)} if plan else None


@dataclass
class RunConfig:
    frameworks: List[str]
    gpus: List[int]
    precisions: List[str]
    batch_sizes: List[int]
    device: str
    common: Dict[str, Any]
    repeats: int
    results: str
    resume: bool
    timeout: float
    python: Dict[str, str] = field(default_factory=dict)
    executor: str = "auto"  # auto or a name in executors.EXECUTORS
    options: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # framework -> typed options
    nodes: List[int] = field(default_factory=lambda: [1])  # machines per job (Slurm)
    executor_flags: Dict[str, Any] = field(default_factory=dict)  # its own flags (Executor.FLAGS)
    data: List[str] = field(default_factory=lambda: ["synthetic"])  # and/or absolute folders
    data_only: bool = False  # folders: the input pipeline alone (compare/datasets.py)
    concurrency: Optional[int] = None  # cells at once; None: auto (scheduler.py, resources.py)
    plan: Optional[Dict[str, Any]] = None  # --plan: {"gpus": N or None, "source": folder}
    models: List[str] = field(default_factory=lambda: ["resnet50"])  # backends/networks.py
    image_sizes: Dict[str, int] = field(default_factory=dict)  # model -> its cells' image side
    modes: List[str] = field(default_factory=lambda: ["default"])
    batch_search: List[int] = field(default_factory=lambda: [1, 1])  # MIN, MAX of a batch search
    # each network's default batch (defaults.py): the batch axis where --batch-size is not
    # given, and where an auto cell's search starts
    model_batches: Dict[str, int] = field(default_factory=dict)
    defaults: Dict[str, str] = field(default_factory=dict)  # setting -> why, where not given

    @classmethod
    def parse(cls, *, frameworks, gpus, precision, batch_size, device, image_size, steps, warmup,
              windows, repeats, results, resume, timeout, compile, quick, python, option,
              executor="auto", nodes="1", executor_flags=None, data="synthetic", data_only=False,
              concurrency="auto", plan=False, plan_gpus=None, plan_from=None, model="resnet50",
              mode="default", batch_search=None):
        from . import datasets, defaults, envs
        from .store import default_root
        fw_list = fws.parse(frameworks) if frameworks is not None else fws.available()
        models, modes = parse_models(model), axes.parse_modes(mode)
        executors.load(executor) if executor != executors.AUTO else None  # a bad name fails here
        flags = executors.check_flags(executor, executor_flags or {})
        # backends run from work/<id>: a relative path must mean what it meant where the user typed it
        overrides = {k: os.path.abspath(v) for k, v in envs.parse_overrides(python).items()}
        record = _machine(executor, fw_list, overrides, flags)
        where = "on this machine" if executors.remote(executor) is None else \
            "on the {} nodes".format(executor)
        if plan_gpus:  # what the study would take on a machine of that many GPUs
            record, where = dict(record, gpus=[{}] * plan_gpus), "the planned machine"
        # the flags not given: the study the seeds made, sized to this machine (defaults.py)
        kind = resolve_device(device, [1], record.get("gpus", []), where, record.get("cpu_count"))
        given, model_batches, said = defaults.fill(
            record, kind, dict(gpus=gpus, precision=precision, batch_size=batch_size, steps=steps,
                               warmup=warmup, quick=quick), models,
            {m: image_size for m in models}, windows)
        gpu_list = parse_ints(given["gpus"], "--gpus")
        node_list = parse_ints(nodes, "--nodes")
        precisions = parse_precisions(given["precision"])
        batches = axes.parse_batches(given["batch_size"]) if given["batch_size"] is not None else []
        common = dict(DEFAULTS, **(QUICK if quick else {}), windows=windows, compile=compile)
        for key, value in (("image_size", image_size), ("steps", given["steps"]),
                           ("warmup_steps", given["warmup"])):
            if value is not None:
                common[key] = value
        search = axes.parse_search(batch_search, "cpu")  # a malformed value fails here
        numeric = [b for b in batches if b != AUTO] or list(model_batches.values())
        bounds.check(common, windows, repeats, timeout, gpu_list, node_list,
                     numeric + (list(search) if batch_search else []))
        sizes = image_sizes(models, image_size, quick)  # each network's own unless --image-size
        if resume and results is None:
            raise UserError("--resume needs --results DIR naming the campaign to continue")
        options = parse_options(list(option), fw_list)
        data_list = datasets.parse_data(data, data_only)
        model_axis = [("model", len(models))] if len(models) > 1 else []  # named where it varies
        bounds.check_size([("framework", len(fw_list))] + model_axis + [("precision", len(precisions)),
                     ("batch size", len(batches) or 1), ("node count", len(node_list)),
                     ("GPU count", len(gpu_list)), ("data", len(data_list)), ("repeat", repeats)]
                          + [("mode", len(modes))] * (len(modes) > 1))
        plan_record = parse_plan(plan, plan_gpus, plan_from)
        dev = resolve_device(device, gpu_list, record.get("gpus", []), where, record.get("cpu_count"))
        return cls([f.name for f in fw_list], gpu_list, precisions, batches, dev, common, repeats,
                   os.path.abspath(str(results or default_root())), resume, timeout, overrides,
                   executor, options, node_list, flags, data_list, data_only,
                   parse_concurrency(concurrency, dev, record.get("cpu_count")), plan_record,
                   models, sizes, modes, list(axes.parse_search(batch_search, dev)),
                   model_batches, said)

    def largest_batch(self) -> int:
        """The largest per-GPU batch a cell may run: given, or the top of a search."""
        searched = AUTO in self.batch_sizes or self.modes != ["default"]
        return max([b for b in self.batch_sizes if b != AUTO] + self.batch_search[1:] * searched
                   + list(self.model_batches.values()) * (not self.batch_sizes))

    def matrix(self) -> Matrix:
        return Matrix([fws.get(n) for n in self.frameworks], self.gpus, self.precisions,
                      self.batch_sizes, self.repeats, self.device, self.common, self.options,
                      self.nodes, self.data, self.data_only, self.models, self.image_sizes,
                      self.modes, tuple(self.batch_search), dict(self.model_batches))

    def context(self, log) -> executors.Context:
        return executors.Context([fws.get(n) for n in self.frameworks], self.device, self.python,
                                 flags=self.executor_flags, log=log, needs=self.needs())

    def needs(self) -> Dict[str, str]:
        """What the study asks of an executor (executors.CAPABILITIES) -> the flag that asks."""
        out = {}
        if max(self.nodes) > 1:
            out["multi_node"] = "--nodes {}".format(max(self.nodes))
        folders = [d for d in self.data if d != "synthetic"]
        if folders:
            out["real_data"] = "--data {}".format(folders[0])
        if self.device == "cuda":
            out["gpus"] = "--device cuda"
        return out


def _machine(executor: str, fw_list, overrides, flags) -> Dict[str, Any]:
    """GPUs and cores of where the runs execute: this machine's, or the executor's nodes'."""
    remote = executors.remote(executor)
    if remote is None:
        from . import machine_record
        return {"gpus": machine_record.gpus(), "cpu_count": os.cpu_count()}
    return remote.machine(executors.Context(fw_list, "auto", overrides, flags))


def _open_campaign(cfg: RunConfig, record: Dict[str, Any], executor: str):
    """Create the campaign, or open it to resume (same machine, same settings); locked either way."""
    from . import machine_record
    from .store import Campaign
    config = asdict(cfg)
    fixed = settings(config, executor)
    if not cfg.resume:
        campaign = Campaign.create(Path(cfg.results), config, record, fixed)
        campaign.lock()
        return campaign
    campaign = Campaign.open(Path(cfg.results))
    campaign.lock()
    try:
        recorded = campaign.machine
        differ = machine_record.differences(recorded, record) if recorded else []
        if differ:  # one campaign, one machine: never mix two machines' figures silently
            raise UserError("--resume {}: the campaign was recorded on another machine ({}); "
                            "start a new campaign and use `compare diff`".format(
                                cfg.results, "; ".join(differ)))
        campaign.resume(config, fixed, settings_of_results)
    except BaseException:
        campaign.unlock()
        raise
    return campaign


@contextlib.contextmanager
def _stop_on_signals():
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


def execute(cfg: RunConfig) -> int:
    """Run every unfinished cell; print the report. Exit 1 when a cell failed or timed out (it
    is recorded, and --resume runs it again), else 0."""
    from rich.console import Console

    from . import datasets
    from .reporting import write_report
    from .store import user_path
    console = Console(stderr=True, markup=False, highlight=False)  # reasons may hold [brackets]
    ctx = cfg.context(lambda text: console.print(text, soft_wrap=True))  # paths stay whole
    cls, why = executors.choose(cfg.executor, ctx)  # one that can run the whole study
    from .scheduler import pool_for
    record = cls.machine(ctx)
    pool, concurrency = pool_for(cls, ctx, cfg.gpus, cfg.concurrency, (cfg.plan or {}).get("gpus"))
    if cfg.plan is not None:  # the schedule and its estimate, then exit: nothing is created
        from . import plan
        specs = cfg.matrix().specs()
        done = _finished(cfg)
        sys.stdout.write(plan.make([s for s in specs if s.run_id not in done], pool, concurrency,
                                   Path(cfg.plan["source"]), record, "--concurrency {}".format(
                                       cfg.concurrency or "auto"), cls.name,
                                   plan.to_build(cfg.frameworks, cfg.device, cfg.python, cls.name)))
        return 0
    campaign = _open_campaign(cfg, record, cls.name)  # fails before anything runs
    try:
        console.print("executor: {} ({})".format(cls.name, why))
        executor = cls(ctx)
        folders = [d for d in cfg.data if d != "synthetic"]
        if folders:  # check the JPEGs, write the native formats that are missing (says so)
            with _closed_on_error(executor):
                writer = executor.data_writer() or datasets.LocalWriter(cfg.device, cfg.python,
                                                                        ctx.log)
                executor.check_data(datasets.for_run(
                    folders, [fws.get(n) for n in cfg.frameworks], console, writer,
                    cfg.largest_batch() * max(cfg.gpus) * max(cfg.nodes)))
        _sweep(cfg, campaign, executor, lambda: cls(ctx), pool, concurrency, console)
    finally:
        campaign.unlock()
    with user_path(campaign.root / "report", "--results"):
        text, paths, warnings = write_report(campaign, campaign.root / "report")
    for w in warnings:
        console.print("warning: " + w)
    sys.stdout.write(text)
    console.print("report: {}".format(", ".join(str(p) for p in paths)))
    code, failed = campaign.run_outcome()  # 1 where a cell failed or timed out (store.FAILED_RUN)
    if failed:
        console.print(failed)
    return code


def _finished(cfg: RunConfig) -> set:
    """Run ids a resumed campaign has already finished (none for a new one)."""
    from .store import Campaign
    return Campaign.open(Path(cfg.results)).finished_ids() if cfg.resume else set()


@contextlib.contextmanager
def _closed_on_error(executor):
    """The executor closed when the block fails (a writer's container, a Slurm check)."""
    try:
        yield
    except BaseException:
        executor.close()
        raise


def _sweep(cfg: RunConfig, campaign, executor, new_executor, pool: Pool, concurrency: int,
           console) -> None:
    """Run every unfinished cell, up to `concurrency` at once on disjoint units of the pool
    (scheduler.py), each attempt with a fresh nonce: `executor` runs the first lane's cells,
    new_executor() makes one for each further lane; every executor is closed on every way out.
    A stop signal ends the sweep with `Interrupted`, the running cells unrecorded."""
    from . import batchsearch
    from .executors.results import failure
    from .progress import SweepProgress
    from .scheduler import Lanes
    specs = cfg.matrix().specs()
    campaign.plan(specs)
    done = campaign.finished_ids() if cfg.resume else set()
    todo = [s for s in specs if s.run_id not in done]
    console.print("campaign {}: {} cells, {} to run{}".format(
        campaign.root, len(specs), len(todo), pool.describe(concurrency)))
    for note in pool.notes:
        console.print("note: " + note)
    # the plan with its ETA, before the first cell; the bar shows it and each cell's phase
    progress = SweepProgress.planned(console, todo, pool, concurrency, campaign, cfg, executor.name)

    def run_cell(executor, spec, slot):
        spec = replace(spec, nonce=campaign.attempt_nonce())  # names the campaign
        fw = fws.get(spec.framework)
        if not fw.available:
            return failure(spec, "skipped", "{}: {}".format(fw.name, fw.unavailable_reason))
        started = time.time()
        if spec.batch_auto:  # its batch first, from probes (batchsearch.py)
            result = batchsearch.run_auto(spec, campaign, executor, cfg, slot, console.print, searched)
        else:
            result = executor.run(spec, campaign, cfg.timeout, slot=slot)
        result.phases.update(cell_start=started, cell_end=time.time())
        return result
    recorded, searched = 0, {}  # searched: an auto cell's spec hash -> the batch it chose
    try:
        with _stop_on_signals(), progress, \
                Lanes(new_executor, pool, concurrency, console.print, first=executor) as lanes:
            for _, result in lanes.run(todo, run_cell, lambda spec, slot: progress.start(spec)):
                campaign.save_result(result)
                recorded += 1
                progress.done(result)
    except KeyboardInterrupt as exc:
        raise Interrupted(campaign, getattr(exc, "signum", signal.SIGINT), recorded,
                          len(todo) - recorded) from None
