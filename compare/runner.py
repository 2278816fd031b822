"""`compare run`: validated config -> matrix -> executor per cell -> campaign -> report.

Every cell ends as a recorded result, whatever happens to it; the sweep goes on.
"""
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List

from backends.options import OptionError

from . import executors
from . import frameworks as fws
from .errors import UserError
from .matrix import QUICK, Matrix, parse_ints, parse_precisions

DEFAULTS = {"image_size": 224, "steps": 50, "warmup_steps": 10}
DEVICES = ("auto", "cuda", "cpu")


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


def resolve_device(device: str, gpus: List[int], machine_gpus: List[Dict], where: str) -> str:
    if device not in DEVICES:
        raise UserError("unknown device {!r}; choose from {}".format(device, ", ".join(DEVICES)))
    if device == "auto":
        device = "cuda" if machine_gpus else "cpu"
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
        if timeout <= 0:
            raise UserError("--timeout {}: must be > 0 seconds".format(timeout))
        if resume and results is None:
            raise UserError("--resume needs --results DIR naming the campaign to continue")
        options = parse_options(list(option), fw_list)
        data_list = datasets.parse_data(data, data_only)
        executors.load(executor) if executor != executors.AUTO else None  # a bad name fails here
        settings = executors.check_settings(executor, settings or {})
        overrides = envs.parse_overrides(python)
        dev = resolve_device(device, gpu_list, _machine_gpus(executor, fw_list, overrides, settings),
                             "on this machine" if executors.remote(executor) is None else
                             "on the {} nodes".format(executor))
        return cls([f.name for f in fw_list], gpu_list, precisions, batches, dev, common, repeats,
                   str(results or default_root()), resume, timeout, overrides, executor, options,
                   node_list, settings, data_list, data_only)

    def matrix(self) -> Matrix:
        return Matrix([fws.get(n) for n in self.frameworks], self.gpus, self.precisions,
                      self.batch_sizes, self.repeats, self.device, self.common, self.options,
                      self.nodes, self.data, self.data_only)

    def context(self, log) -> executors.Context:
        return executors.Context([fws.get(n) for n in self.frameworks], self.device, self.python,
                                 settings=self.settings, log=log)


def _machine_gpus(executor: str, fw_list, overrides, settings) -> List[Dict[str, Any]]:
    """The GPUs of where the runs execute: this machine's, or the executor's nodes'."""
    remote = executors.remote(executor)
    if remote is None:
        from . import machine
        return machine.gpus()
    return remote.machine(executors.Context(fw_list, "auto", overrides, settings)).get("gpus", [])


def _open_campaign(cfg: RunConfig, machine_record: Dict[str, Any]):
    from . import machine
    from .store import Campaign
    config = asdict(cfg)
    if cfg.resume:
        campaign = Campaign.open(Path(cfg.results))
        recorded = campaign.machine
        differ = machine.differences(recorded, machine_record) if recorded else []
        if differ:  # one campaign, one machine: never mix two machines' figures silently
            raise UserError("--resume {}: the campaign was recorded on another machine ({}); "
                            "start a new campaign and use `compare diff`".format(
                                cfg.results, "; ".join(differ)))
        campaign.resume(config)
        return campaign
    return Campaign.create(Path(cfg.results), config, machine_record)


def execute(cfg: RunConfig) -> int:
    """Run every unfinished cell; print the report. Exit 0 even when cells failed (they are results)."""
    from rich.console import Console

    from . import datasets
    from .executors.base import failure
    from .progress import SweepProgress
    from .reporting import write_report
    console = Console(stderr=True, markup=False, highlight=False)  # reasons may hold [brackets]
    ctx = cfg.context(console.print)
    cls, why = executors.choose(cfg.executor, ctx)
    if max(cfg.nodes) > 1 and not cls.multi_node:
        raise UserError("--nodes {}: the {} executor runs on one machine; more nodes need an "
                        "executor of a cluster ({})".format(max(cfg.nodes), cls.name, ", ".join(
                            n for n in executors.names() if executors.load(n).multi_node) or "none"))
    datasets.check_executor(cfg.data, cls.name)
    campaign = _open_campaign(cfg, cls.machine(ctx))  # bad --results fails before anything runs
    console.print("executor: {} ({})".format(cls.name, why))
    folders = [d for d in cfg.data if d != "synthetic"]
    if folders:  # check the JPEGs, write the native formats that are missing (says so)
        datasets.for_run(folders, [fws.get(n) for n in cfg.frameworks], cfg.device, cfg.python,
                         console)
    executor = cls(ctx)
    specs = cfg.matrix().specs()
    done = campaign.finished_ids() if cfg.resume else set()
    todo = [s for s in specs if s.run_id not in done]
    console.print("campaign {}: {} cells, {} to run".format(campaign.root, len(specs), len(todo)))
    try:
        with SweepProgress(console, len(todo)) as progress:
            for spec in todo:
                progress.start(spec)
                fw = fws.get(spec.framework)
                if not fw.available:
                    result = failure(spec, "skipped", "{}: {}".format(fw.name, fw.unavailable_reason))
                else:
                    started = time.time()
                    result = executor.run(spec, campaign, cfg.timeout)
                    result.phases.update(cell_start=started, cell_end=time.time())
                campaign.save_result(result)
                progress.done(result)
    finally:
        executor.close()
    text, paths, warnings = write_report(campaign, campaign.root / "report")
    for w in warnings:
        console.print("warning: " + w)
    sys.stdout.write(text)
    console.print("report: {}".format(", ".join(str(p) for p in paths)))
    return 0
