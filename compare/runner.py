"""`compare run`: validated config -> matrix -> executor per cell -> campaign -> report.

Every cell ends as a recorded result, whatever happens to it; the sweep goes on.
"""
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List

from . import frameworks as fws
from . import machine
from .errors import UserError
from .matrix import QUICK, Matrix, parse_ints, parse_precisions

DEFAULTS = {"image_size": 224, "steps": 50, "warmup_steps": 10}
DEVICES = ("auto", "cuda", "cpu")


def _parse_options(items: List[str]) -> Dict[str, Any]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError("--option {!r}: expected KEY=VALUE, e.g. channels_last=true".format(item))
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def resolve_device(device: str, gpus: List[int], machine_gpus: List[Dict]) -> str:
    if device not in DEVICES:
        raise UserError("unknown device {!r}; choose from {}".format(device, ", ".join(DEVICES)))
    if device == "auto":
        device = "cuda" if machine_gpus else "cpu"
    if device == "cuda":
        if not machine_gpus:
            raise UserError("--device cuda: no NVIDIA GPU found (nvidia-smi lists none); "
                            "use --device cpu")
        if max(gpus) > len(machine_gpus):
            raise UserError("--gpus {}: this machine has {} GPU{}; give counts from 1 to {}".format(
                max(gpus), len(machine_gpus), "s" if len(machine_gpus) > 1 else "",
                len(machine_gpus)))
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
    executor: str = "auto"  # auto | local | docker

    @classmethod
    def parse(cls, *, frameworks, gpus, precision, batch_size, device, image_size, steps, warmup,
              windows, repeats, results, resume, timeout, compile, quick, python, option,
              executor="auto"):
        from . import envs
        from .store import default_root
        fw_list = fws.parse(frameworks if frameworks is not None else
                            ",".join(f.name for f in fws.FRAMEWORKS if f.available))
        gpu_list = parse_ints(gpus, "--gpus")
        precisions = parse_precisions(precision)
        batches = parse_ints(batch_size, "--batch-size")
        common = dict(DEFAULTS, **(QUICK if quick else {}), windows=windows, compile=compile,
                      options=_parse_options(option))
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
        dev = resolve_device(device, gpu_list, machine.gpus())
        return cls([f.name for f in fw_list], gpu_list, precisions, batches, dev, common, repeats,
                   str(results or default_root()), resume, timeout, envs.parse_overrides(python),
                   executor)

    def matrix(self) -> Matrix:
        return Matrix([fws.get(n) for n in self.frameworks], self.gpus, self.precisions,
                      self.batch_sizes, self.repeats, self.device, self.common)


def _open_campaign(cfg: RunConfig):
    from .store import Campaign
    config = asdict(cfg)
    if cfg.resume:
        campaign = Campaign.open(Path(cfg.results))
        recorded = campaign.machine
        differ = machine.differences(recorded, machine.info()) if recorded else []
        if differ:  # one campaign, one machine: never mix two machines' figures silently
            raise UserError("--resume {}: the campaign was recorded on another machine ({}); "
                            "start a new campaign and use `compare diff`".format(
                                cfg.results, "; ".join(differ)))
        campaign.resume(config)
        return campaign
    return Campaign.create(Path(cfg.results), config, machine.info())


def make_executor(cfg: RunConfig, log):
    """--executor auto|local|docker: docker when an engine answers and the images are built.

    Returns the executor and one line saying which and why."""
    from .executors import docker
    from .executors.local import LocalExecutor
    name, why = docker.choose(cfg.executor, [fws.get(n) for n in cfg.frameworks], cfg.device,
                              cfg.python)
    description = "executor: {} ({})".format(name, why)
    if name == "docker":
        return docker.DockerExecutor(cfg.device, log=log), description
    return LocalExecutor(cfg.device, cfg.python, log=log), description


def execute(cfg: RunConfig) -> int:
    """Run every unfinished cell; print the report. Exit 0 even when cells failed (they are results)."""
    from rich.console import Console
    from . import report
    from .executors.base import failure
    from .progress import SweepProgress
    console = Console(stderr=True, markup=False, highlight=False)  # reasons may hold [brackets]
    executor, description = make_executor(cfg, console.print)
    campaign = _open_campaign(cfg)  # bad --results fails here, before anything is printed
    console.print(description)
    specs = cfg.matrix().specs()
    done = campaign.finished_ids() if cfg.resume else set()
    todo = [s for s in specs if s.run_id not in done]
    console.print("campaign {}: {} cells, {} to run".format(campaign.root, len(specs), len(todo)))
    with SweepProgress(console, len(todo)) as progress:
        for spec in todo:
            progress.start(spec)
            fw = fws.get(spec.framework)
            if not fw.available:
                result = failure(spec, "skipped", "{}: {}".format(fw.name, fw.unavailable_reason))
            else:
                result = executor.run(spec, campaign, cfg.timeout)
            campaign.save_result(result)
            progress.done(result)
    results, errors = campaign.results()
    for e in errors:
        console.print("warning: " + e)
    df = report.cells(results)
    sys.stdout.write(report.markdown(df, campaign.machine))
    paths = report.write(df, campaign.root / "report", ["md", "csv", "json", "html"],
                         campaign.machine, results)
    console.print("report: {}".format(", ".join(str(p) for p in paths)))
    return 0
