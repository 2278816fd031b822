"""PyTorch backend ("caffe2": Caffe2 was merged into PyTorch). Stdlib only at import time.

Launchers: torchrun on one machine (command()); under Slurm, srun starts one task per worker and
each task is one DDP rank (srun_tasks(), srun_command()): the job sets RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR and MASTER_PORT as torchrun would, from Slurm's variables.
"""
from typing import List

from ..dataset import LOADER_WORKERS
from ..options import CHANNELS_LAST, Option
from ..protocol import RunSpec

MODULE = "backends.caffe2_torch"
DATA_FORMAT = None  # --data DIR: the DataLoader reads the JPEG folder itself (data.py)
OPTIONS = (
    CHANNELS_LAST,
    Option("optimizer", "str", "SGD implementation: one fused kernel, per-tensor-list, or a loop",
           choices=("fused", "foreach", "loop"), default_text="fused on cuda, foreach on cpu"),
    Option("compile_mode", "str", "torch.compile mode, with --compile", default="default",
           choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")),
    Option("cuda_graphs", "bool", "capture the whole step as one CUDA graph (cuda, 1 GPU)",
           default=False),
    Option("cudnn_benchmark", "bool", "cuDNN times candidate algorithms for each convolution in "
           "the first step and keeps the fastest (else its heuristics choose)", default=True),
    Option("cudnn_benchmark_limit", "int", "with cudnn_benchmark: how many candidates to time per "
           "convolution (0: all)", default=10, minimum=0),
    Option("decode", "str", "with --data DIR: decode JPEGs with Pillow in the loader workers, or "
           "a batch at once with nvJPEG on the GPU (needs torchvision)", default="cpu",
           choices=("cpu", "gpu")),
    LOADER_WORKERS,
)


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line that runs `spec` in this backend's environment.

    One worker runs as a plain process; N workers through torchrun (DDP), one process each.
    """
    if spec.gpus == 1:
        return [python, "-m", MODULE, spec_path, result_path]
    return [python, "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node", str(spec.gpus), "-m", MODULE, spec_path, result_path]


def srun_tasks(spec: RunSpec) -> int:
    """Tasks srun starts per node: one per worker, each a rank."""
    return spec.gpus


def srun_command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command one srun task runs: one rank, no torchrun (the job set its variables)."""
    return [python, "-m", MODULE, spec_path, result_path]
