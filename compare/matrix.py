"""The benchmark matrix: frameworks x models x modes x precisions x batch sizes x nodes x gpus x
data x repeats -> RunSpecs."""
import itertools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from backends.contract import COMPILE, DEFAULT_MODEL, MODES, PRECISIONS, RunSpec, mode_switches
from backends.contract.shared import networks

from .errors import UserError
from .frameworks import Framework

QUICK = {"image_size": 64, "steps": 10, "warmup_steps": 3}  # a CPU sweep in minutes
AUTO = "auto"  # --batch-size auto: the batch is searched (batchsearch.py)
# where a batch search goes when --batch-search does not say: doubling from the first to the second
SEARCH = {"cuda": (64, 1024), "cpu": (8, 128)}


def parse_ints(csv: str, option: str, minimum: int = 1) -> List[int]:
    """'1,2,4' -> [1, 2, 4]; one UserError line for anything else."""
    items = [s.strip() for s in str(csv).split(",") if s.strip()]
    if not items:
        raise UserError("{} is empty; give one or more integers >= {}, e.g. 1,2".format(
            option, minimum))
    out = []
    for s in items:
        try:
            v = int(s)
        except ValueError:
            raise UserError("{} {!r}: not an integer; give integers >= {}, e.g. 1,2".format(
                option, s, minimum)) from None
        if v < minimum:
            raise UserError("{} {}: must be >= {}".format(option, v, minimum))
        if v not in out:
            out.append(v)
    return out


def parse_choices(csv: str, name: str, valid: Sequence[str]) -> List[str]:
    """'fp32,fp16' -> ['fp32', 'fp16'] for --precision (name 'precision'), checked against valid."""
    items = [s.strip().lower() for s in str(csv).split(",") if s.strip()]
    if not items:
        raise UserError("--{} is empty; choose from {}".format(name, ", ".join(valid)))
    for p in items:
        if p not in valid:
            raise UserError("unknown {} {!r}; choose from {}".format(name, p, ", ".join(valid)))
    return list(dict.fromkeys(items))


def parse_precisions(csv: str) -> List[str]:
    return parse_choices(csv, "precision", PRECISIONS)


def parse_batches(csv: str) -> List[Union[int, str]]:
    """'256,auto' -> [256, 'auto']: per-GPU batch sizes, `auto` for a searched one."""
    items = [s.strip().lower() for s in str(csv).split(",") if s.strip()]
    for s in items:
        if s != AUTO and not s.lstrip("-").isdigit():
            raise UserError("--batch-size {!r}: not an integer or auto; give per-GPU batch sizes "
                            ">= 1 and/or auto, e.g. 256,auto".format(s))
    numbers = [s for s in items if s != AUTO]
    ints = parse_ints(",".join(numbers), "--batch-size") if numbers or not items else []
    return ints + ([AUTO] if AUTO in items else [])


def parse_modes(csv: str) -> List[str]:
    return parse_choices(csv, "mode", MODES)


def parse_search(text: Optional[str], device: str) -> Tuple[int, int]:
    """--batch-search 'MIN-MAX' -> (MIN, MAX); None: the device's SEARCH bounds."""
    if text is None:
        return SEARCH[device]
    low, sep, high = str(text).partition("-")
    try:
        bounds = (int(low), int(high))
    except ValueError:
        bounds = (0, 0)
    if not sep or bounds[0] < 1 or bounds[1] < bounds[0]:
        raise UserError("--batch-search {!r}: give MIN-MAX, two per-GPU batch sizes with "
                        "1 <= MIN <= MAX, e.g. 64-1024".format(text))
    return bounds


def parse_models(csv: str) -> List[str]:
    """'resnet152,vgg16' -> the names, in order, duplicates dropped; one UserError line for a name
    that is not a network (nasnet is one: its cells are recorded unsupported, with the reason)."""
    items = [s.strip().lower() for s in str(csv).split(",") if s.strip()]
    valid = ", ".join(networks.names(supported_only=False))
    if not items:
        raise UserError("--model is empty; choose from {}".format(valid))
    for m in items:
        if m not in networks.names(supported_only=False):
            raise UserError("unknown model {!r}; choose from {} (`compare list models`)".format(
                m, valid))
    return list(dict.fromkeys(items))


def image_sizes(models: Sequence[str], given: Optional[int], quick: bool) -> Dict[str, int]:
    """model -> the image side its cells run at: --image-size, else its quick or native size."""
    out = {}
    for m in models:
        try:
            out[m] = networks.image_size(m, given, quick)
        except ValueError as exc:
            raise UserError("--image-size {}: {}; give a larger size, or leave --image-size out "
                            "(each network's native size)".format(given, exc)) from None
    return out


@dataclass
class Matrix:
    frameworks: Sequence[Framework]
    gpus: Sequence[int]
    precisions: Sequence[str]
    batch_sizes: Sequence[int]
    repeats: int = 1
    device: str = "cpu"
    common: Dict[str, Any] = field(default_factory=dict)  # image_size, steps, warmup_steps, ...
    options: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # framework -> its options
    nodes: Sequence[int] = (1,)  # machines per job (GPUs per node: `gpus`)
    data: Sequence[str] = ("synthetic",)  # synthetic and/or absolute folder paths
    data_only: bool = False  # folders: time the input pipeline alone
    models: Sequence[str] = (DEFAULT_MODEL,)
    image_sizes: Dict[str, int] = field(default_factory=dict)  # model -> its image side, if not common's
    modes: Sequence[str] = ("default",)
    search: Tuple[int, int] = (1, 1)  # bounds of a batch search
    # model -> its default batch (compare/defaults.py): the batch axis where none is given, and
    # where an auto cell's search starts (within the bounds; without one: at the first bound)
    model_batches: Dict[str, int] = field(default_factory=dict)

    def batches(self, mode: str, model: str = DEFAULT_MODEL) -> List[Union[int, str]]:
        """The batch axis of a mode: as given (or the network's default) for default; tuned runs
        at the best batch."""
        if mode != "default":
            return [AUTO]
        return list(self.batch_sizes) or [self.model_batches[model]]

    def start(self, model: str) -> int:
        """Where an auto cell's search starts: its network's default batch, within the bounds."""
        low, high = self.search
        return min(max(self.model_batches.get(model, low), low), high)

    def specs(self) -> List[RunSpec]:
        """Every cell, in sweep order: framework, model, mode, precision, batch, nodes, gpus, data,
        repeat."""
        return [self.spec(fw, model, mode, precision, batch, nodes, gpus, data, repeat)
                for fw, model, mode in itertools.product(self.frameworks, self.models, self.modes)
                for precision, batch, nodes, gpus, data, repeat in itertools.product(
                    self.precisions, self.batches(mode, model), self.nodes, self.gpus, self.data,
                    range(self.repeats))]

    def spec(self, fw, model, mode, precision, batch, nodes, gpus, data, repeat) -> RunSpec:
        """One cell: the mode's switches for its device and world, then the user's options (the
        user wins); a mode's `compile` switch is the spec's compile field."""
        options = mode_switches(getattr(fw.module(), "MODES", {}), mode, self.device, gpus * nodes)
        common = dict(self.common, **({"image_size": self.image_sizes[model]}
                                      if model in self.image_sizes else {}))
        common[COMPILE] = bool(common.get(COMPILE) or options.pop(COMPILE, False))
        options.update(self.options.get(fw.name, {}))
        auto = batch == AUTO
        return RunSpec(framework=fw.name, backend=fw.backend, nodes=nodes, gpus=gpus,
                       device=self.device, precision=precision, model=model,
                       batch_size=self.start(model) if auto else batch, batch_auto=auto, mode=mode,
                       repeat=repeat, data=data, data_only=self.data_only and data != "synthetic",
                       options=options, **common)
