"""The benchmark matrix: frameworks x precisions x batch sizes x nodes x gpus x repeats -> RunSpecs."""
import itertools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence

from backends.protocol import PRECISIONS, RunSpec

from .errors import UserError
from .frameworks import Framework

QUICK = {"image_size": 64, "steps": 10, "warmup_steps": 3}  # a CPU sweep in minutes


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


def parse_precisions(csv: str) -> List[str]:
    items = [s.strip().lower() for s in str(csv).split(",") if s.strip()]
    if not items:
        raise UserError("--precision is empty; choose from {}".format(", ".join(PRECISIONS)))
    for p in items:
        if p not in PRECISIONS:
            raise UserError("unknown precision {!r}; choose from {}".format(p, ", ".join(PRECISIONS)))
    return list(dict.fromkeys(items))


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

    def specs(self) -> List[RunSpec]:
        """Every cell, in sweep order: framework, precision, batch, nodes, gpus, data, repeat."""
        return [RunSpec(framework=fw.name, backend=fw.backend, nodes=nodes, gpus=gpus,
                        device=self.device, precision=precision, batch_size=batch, repeat=repeat,
                        data=data, data_only=self.data_only and data != "synthetic",
                        options=dict(self.options.get(fw.name, {})), **self.common)
                for fw, precision, batch, nodes, gpus, data, repeat in itertools.product(
                    self.frameworks, self.precisions, self.batch_sizes, self.nodes, self.gpus,
                    self.data, range(self.repeats))]
