"""The benchmark matrix: frameworks x models x modes x precisions x batch sizes x nodes x gpus x
data x repeats -> RunSpecs (the plan stage, compare/stages/plan.py, fills it from the Study)."""
import itertools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from backends.contract import COMPILE, DEFAULT_MODEL, RunSpec, mode_switches
from backends.contract.shared import networks

from .errors import UserError
from .frameworks import Framework
from .parsing import AUTO

QUICK = {"image_size": 64, "steps": 10, "warmup_steps": 3}  # a CPU sweep in minutes


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
    classes: Dict[str, int] = field(default_factory=dict)  # time to accuracy: folder -> its classes
    # (model, precision) -> where its tuned cells' search starts, where measured (defaults.py)
    search_starts: Dict[Tuple[str, str], int] = field(default_factory=dict)
    # (model, precision) -> (steps, warm-up) of its tuned cells where their start sets them
    search_steps: Dict[Tuple[str, str], Tuple[int, int]] = field(default_factory=dict)

    def batches(self, mode: str, model: str) -> List[Union[int, str]]:
        """The batch axis of a mode: as given (or the network's default) for default; tuned runs
        at the best batch."""
        if mode != "default":
            return [AUTO]
        return list(self.batch_sizes) or [self.model_batches[model]]

    def start(self, model: str, precision: str, mode: str) -> int:
        """Where an auto cell's search starts, within the bounds: for a tuned cell a measured
        start for its network and precision, else its network's default batch (an auto cell of
        the default mode starts there whatever other modes the study lists)."""
        low, high = self.search
        first = (mode != "default" and self.search_starts.get((model, precision))) or \
            self.model_batches.get(model, low)
        return min(max(first, low), high)

    def start_steps(self, model: str, precision: str, mode: str) -> Optional[Tuple[int, int]]:
        """(steps, warm-up) of an auto cell that its search's start sets (a tuned cell's measured
        start: compare/defaults.py), None where the cell takes the study's."""
        return self.search_steps.get((model, precision)) if mode != "default" else None

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
        if auto and self.start_steps(model, precision, mode):
            common["steps"], common["warmup_steps"] = self.start_steps(model, precision, mode)
        return RunSpec(framework=fw.name, backend=fw.backend, nodes=nodes, gpus=gpus,
                       device=self.device, precision=precision, model=model,
                       batch_size=self.start(model, precision, mode) if auto else batch,
                       batch_auto=auto, mode=mode, repeat=repeat, data=data,
                       data_only=self.data_only and data != "synthetic", options=options, **common,
                       **({"num_classes": self.classes[data]} if data in self.classes else {}))
