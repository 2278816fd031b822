"""`compare run`: validated config -> matrix -> executor per cell -> campaign -> report.

Every cell ends as a recorded result, whatever happens to it; the sweep goes on. Ctrl-C, SIGTERM
or SIGHUP end the sweep cleanly: the executor stops what runs, the interrupted cell is not
recorded, and `Interrupted` says how to resume.
"""
import contextlib
import math
import os
import secrets
import signal
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional

from backends.options import OptionError

from . import executors
from . import frameworks as fws
from .errors import UserError
from .matrix import QUICK, Matrix, parse_ints, parse_precisions

DEFAULTS = {"image_size": 224, "steps": 50, "warmup_steps": 10}
DEVICES = ("auto", "cuda", "cpu")
# what changes the measured number besides the matrix axes: fixed when a campaign is created
COMMON_SETTINGS = ("image_size", "steps", "warmup_steps", "windows", "compile")
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
    settings: Dict[str, Any] = field(default_factory=dict)  # the executor's own flags (Context)
    data: List[str] = field(default_factory=lambda: ["synthetic"])  # and/or absolute folders
    data_only: bool = False  # folders: the input pipeline alone (compare/datasets.py)

    @classmethod
    def parse(cls, *, frameworks, gpus, precision, batch_size, device, image_size, steps, warmup,
              windows, repeats, results, resume, timeout, compile, quick, python, option,
              executor="auto", nodes="1", settings=None, data="synthetic", data_only=False):
        from . import datasets, envs
        from .store import default_root
        fw_list = fws.parse(frameworks) if frameworks is not None else fws.available()
        gpu_list = parse_ints(gpus, "--gpus")
        node_list = parse_ints(nodes, "--nodes")
        precisions = parse_precisions(precision)
        batches = parse_ints(batch_size, "--batch-size")
        common = dict(DEFAULTS, **(QUICK if quick else {}), windows=windows, compile=compile)
        for key, value in (("image_size", image_size), ("steps", steps), ("warmup_steps", warmup)):
            if value is not None:
                common[key] = value
        if common["image_size"] < 32:
            raise UserError("--image-size {}: must be >= 32 (ResNet-50 downsamples 32x)".format(
                common["image_size"]))
        for name, value, low in (("--steps", common["steps"], 1), ("--warmup", common["warmup_steps"], 0),
                                 ("--windows", windows, 1), ("--repeats", repeats, 1)):
            if value < low:
                raise UserError("{} {}: must be >= {}".format(name, value, low))
        if not math.isfinite(timeout) or timeout <= 0:
            raise UserError("--timeout {}: must be a finite number of seconds > 0".format(timeout))
        if resume and results is None:
            raise UserError("--resume needs --results DIR naming the campaign to continue")
        options = parse_options(list(option), fw_list)
        data_list = datasets.parse_data(data, data_only)
        executors.load(executor) if executor != executors.AUTO else None  # a bad name fails here
        settings = executors.check_settings(executor, settings or {})
        # backends run from work/<id>: a relative path must mean what it meant where the user typed it
        overrides = {k: os.path.abspath(v) for k, v in envs.parse_overrides(python).items()}
        record = _machine(executor, fw_list, overrides, settings)
        dev = resolve_device(device, gpu_list, record.get("gpus", []),
                             "on this machine" if executors.remote(executor) is None else
                             "on the {} nodes".format(executor), record.get("cpu_count"))
        return cls([f.name for f in fw_list], gpu_list, precisions, batches, dev, common, repeats,
                   os.path.abspath(str(results or default_root())), resume, timeout, overrides,
                   executor, options, node_list, settings, data_list, data_only)

    def matrix(self) -> Matrix:
        return Matrix([fws.get(n) for n in self.frameworks], self.gpus, self.precisions,
                      self.batch_sizes, self.repeats, self.device, self.common, self.options,
                      self.nodes, self.data, self.data_only)

    def context(self, log) -> executors.Context:
        return executors.Context([fws.get(n) for n in self.frameworks], self.device, self.python,
                                 settings=self.settings, log=log)


def _machine(executor: str, fw_list, overrides, settings) -> Dict[str, Any]:
    """GPUs and cores of where the runs execute: this machine's, or the executor's nodes'."""
    remote = executors.remote(executor)
    if remote is None:
        from . import machine
        return {"gpus": machine.gpus(), "cpu_count": os.cpu_count()}
    return remote.machine(executors.Context(fw_list, "auto", overrides, settings))


def settings(config: Dict[str, Any], executor: str) -> Dict[str, Any]:
    """The settings of a campaign that change the measured number and are not a matrix axis: the
    device, COMMON_SETTINGS, the executor, and per framework its options and --python."""
    common = config.get("common", {})
    out = {"device": config.get("device"), "executor": executor}
    out.update({key: common.get(key) for key in COMMON_SETTINGS})
    for fw in config.get("frameworks", []):
        out["options." + fw] = config.get("options", {}).get(fw, {})
        out["python." + fw] = config.get("python", {}).get(fw)  # None: compare's choice
    return out


def _open_campaign(cfg: RunConfig, machine_record: Dict[str, Any], executor: str):
    """Create the campaign, or open it to resume (same machine, same settings); locked either way."""
    from . import machine
    from .store import Campaign
    config = asdict(cfg)
    fixed = settings(config, executor)
    if not cfg.resume:
        campaign = Campaign.create(Path(cfg.results), config, machine_record, fixed)
        campaign.lock()
        return campaign
    campaign = Campaign.open(Path(cfg.results))
    campaign.lock()
    try:
        recorded = campaign.machine
        differ = machine.differences(recorded, machine_record) if recorded else []
        if differ:  # one campaign, one machine: never mix two machines' figures silently
            raise UserError("--resume {}: the campaign was recorded on another machine ({}); "
                            "start a new campaign and use `compare diff`".format(
                                cfg.results, "; ".join(differ)))
        campaign.resume(config, fixed)
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
    """Run every unfinished cell; print the report. Exit 0 even when cells failed (they are results)."""
    from rich.console import Console

    from . import datasets
    from .reporting import write_report
    console = Console(stderr=True, markup=False, highlight=False)  # reasons may hold [brackets]
    ctx = cfg.context(console.print)
    cls, why = executors.choose(cfg.executor, ctx)
    if max(cfg.nodes) > 1 and not cls.multi_node:
        raise UserError("--nodes {}: the {} executor runs on one machine; more nodes need an "
                        "executor of a cluster ({})".format(max(cfg.nodes), cls.name, ", ".join(
                            n for n in executors.names() if executors.load(n).multi_node) or "none"))
    datasets.check_executor(cfg.data, cls.name)
    campaign = _open_campaign(cfg, cls.machine(ctx), cls.name)  # fails before anything runs
    try:
        console.print("executor: {} ({})".format(cls.name, why))
        folders = [d for d in cfg.data if d != "synthetic"]
        if folders:  # check the JPEGs, write the native formats that are missing (says so)
            datasets.for_run(folders, [fws.get(n) for n in cfg.frameworks], cfg.device, cfg.python,
                             console)
        _sweep(cfg, campaign, cls(ctx), console)
    finally:
        campaign.unlock()
    text, paths, warnings = write_report(campaign, campaign.root / "report")
    for w in warnings:
        console.print("warning: " + w)
    sys.stdout.write(text)
    console.print("report: {}".format(", ".join(str(p) for p in paths)))
    return 0


def _sweep(cfg: RunConfig, campaign, executor, console) -> None:
    """Run every unfinished cell, each attempt with a fresh nonce; the executor is closed on every
    way out. A stop signal ends the sweep with `Interrupted`, the running cell unrecorded."""
    from .executors.base import failure
    from .progress import SweepProgress
    specs = cfg.matrix().specs()
    campaign.plan(specs)
    done = campaign.finished_ids() if cfg.resume else set()
    todo = [s for s in specs if s.run_id not in done]
    console.print("campaign {}: {} cells, {} to run".format(campaign.root, len(specs), len(todo)))
    recorded = 0
    try:
        with _stop_on_signals(), SweepProgress(console, len(todo)) as progress:
            for spec in todo:
                spec = replace(spec, nonce=secrets.token_hex(8))
                progress.start(spec)
                fw = fws.get(spec.framework)
                if not fw.available:
                    result = failure(spec, "skipped", "{}: {}".format(fw.name, fw.unavailable_reason))
                else:
                    started = time.time()
                    result = executor.run(spec, campaign, cfg.timeout)
                    result.phases.update(cell_start=started, cell_end=time.time())
                campaign.save_result(result)
                recorded += 1
                progress.done(result)
    except KeyboardInterrupt as exc:
        executor.close()
        raise Interrupted(campaign, getattr(exc, "signum", signal.SIGINT), recorded,
                          len(todo) - recorded) from None
    finally:
        executor.close()
