"""PyTorch backend ("caffe2": Caffe2 was merged into PyTorch). Stdlib only at import time."""
from typing import List

from ..options import CHANNELS_LAST, Option
from ..protocol import RunSpec

MODULE = "backends.caffe2_torch"
OPTIONS = (
    CHANNELS_LAST,
    Option("optimizer", "str", "SGD implementation: one fused kernel, per-tensor-list, or a loop",
           choices=("fused", "foreach", "loop"), default_text="fused on cuda, foreach on cpu"),
    Option("compile_mode", "str", "torch.compile mode, with --compile", default="default",
           choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")),
    Option("cuda_graphs", "bool", "capture the whole step as one CUDA graph (cuda, 1 GPU)",
           default=False),
)


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line that runs `spec` in this backend's environment.

    One worker runs as a plain process; N workers through torchrun (DDP), one process each.
    """
    if spec.gpus == 1:
        return [python, "-m", MODULE, spec_path, result_path]
    return [python, "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node", str(spec.gpus), "-m", MODULE, spec_path, result_path]
