"""PyTorch backend ("caffe2": Caffe2 was merged into PyTorch). Stdlib only at import time.

One process per worker, each a DDP rank: started by torchrun on one machine, by srun (one task
per worker) in a Slurm job; backends/world.py reads the rank from either (launcher()).
"""
from typing import List

from .. import pipelines
from ..options import CHANNELS_LAST, COMPILE, HW_DECODE, LOADER_WORKERS, Option, Switch
from ..protocol import RunSpec

MODULE = "backends.caffe2_torch"
FRAMEWORK = "torch"  # the package the backend imports (its bytecode: caches.bytecode)
DATA_FORMAT = None  # --data DIR: the DataLoader reads the JPEG folder itself (data.py)
# its input pipelines (backends/pipelines/), in order of preference: decode=auto takes the first
# that runs here; --option decode and --option pipeline are made from this table
PIPELINES = (
    pipelines.hw_row("backends.caffe2_torch.data:hw"),
    pipelines.Pipeline("cpu", "backends.caffe2_torch.data:cpu", "Pillow in the loader workers"),
    pipelines.Pipeline("gpu", "backends.caffe2_torch.data:gpu", "nvJPEG through torchvision",
                       short="nvJPEG through torchvision",
                       gpu="decodes with nvJPEG on a CUDA device"),
    pipelines.dali_row("backends.caffe2_torch.dali:make"),
)
CUDNN_TUNING = "cuDNN's autotuning of a GPU's convolutions"  # cudnn_benchmark's and its limit's
OPTIONS = (
    CHANNELS_LAST,
    Option("optimizer", "str", "SGD implementation: one fused kernel, per-tensor-list, or a loop",
           choices=("fused", "foreach", "loop"), default_text="fused on cuda, foreach on cpu"),
    Option("compile_mode", "str", "torch.compile mode, with --compile", default="default",
           choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")),
    Option("cuda_graphs", "bool", "capture the whole step as one CUDA graph (cuda, 1 GPU)",
           default=False, gpu="a CUDA graph needs a GPU (a CPU cell with it true is recorded "
           "unsupported)"),
    Option("inductor_tuning", "str", "with --compile: time block sizes for inductor's own "
           "Triton kernels (the fused batch-norm/ReLU/add passes), not the convolutions: "
           "coordinate descent, max_autotune_pointwise, both, or off",
           default="off", choices=("off", "coordinate", "pointwise", "both"),
           gpu="it tunes Triton kernels, which inductor writes for a GPU (C++ on a CPU)"),
    Option("cudnn_benchmark", "bool", "cuDNN times candidate algorithms for each convolution in "
           "the first step and keeps the fastest (else its heuristics choose)", default=True,
           gpu=CUDNN_TUNING),
    Option("cudnn_benchmark_limit", "int", "with cudnn_benchmark: how many candidates to time per "
           "convolution (0: all)", default=10, minimum=0, maximum=1000, gpu=CUDNN_TUNING),
    pipelines.decode_option(PIPELINES),
    LOADER_WORKERS,
    pipelines.pipeline_option(PIPELINES),
    *HW_DECODE,
)
# `tuned` (docs/modes.md): PyTorch 2's documented fast path, torch.compile, with the whole step
# captured as one CUDA graph where compare can (one GPU; its capture does not cover DDP's
# collectives). compile_mode `default`: `max-autotune*` had not compiled this step after 540 s
# on an H200, and `reduce-overhead` is inductor's own CUDA graphs of the forward and backward
# only, where cuda_graphs captures the optimizer too (BENCHMARKS.md: fp16 7,152, bf16 6,785 b256).
MODES = {"tuned": (
    Switch(COMPILE, True, "torch.compile (inductor) of the model: PyTorch 2's documented way "
           "to train faster"),
    Switch("compile_mode", "default", "inductor without autotuning: compiles in about a minute; "
           "max-autotune did not finish in 540 s"),
    Switch("cuda_graphs", True, "the whole step (forward, backward, fused SGD) replayed as one "
           "CUDA graph: no launch overhead", where="cuda-1"),
)}


# cuDNN's autotuning (cudnn.benchmark: 57 s in the first fp32 step of ResNet-50 on an H200) has
# no on-disk cache: cuDNN and PyTorch keep the algorithms they chose in the process's memory only
# (pytorch/pytorch#4392 and #88410 ask for one), so every process tunes again; the record says so
CUDNN = ("no on-disk cache: cuDNN and PyTorch keep the algorithms cudnn.benchmark chose in the "
         "process's memory only, so each process tunes again in its first step")


def prepare(spec: RunSpec) -> None:
    """Before torch is imported (it reads its variables once): with decode=hw, CUDA's hardware
    queues (pipelines/feed.py: hw_connections); with --compile, torch.compile's
    cache folder under compare's (backends/caches.py: Inductor's FX graphs, AOTAutograd's and
    Triton's kernels, keyed by torch on the graph, its inputs and the compile settings); on GPUs,
    cuDNN's word."""
    from .. import caches
    from ..pipelines import feed
    feed.hw_connections(spec, OPTIONS)
    if spec.device == "cuda":
        caches.say("cudnn_autotune", CUDNN)
    if spec.compile:
        caches.claim("TORCHINDUCTOR_CACHE_DIR", "torchinductor", "torchinductor",
                     "torch-" + caches.version("torch"))


def launcher(spec: RunSpec) -> str:
    """One worker: a plain process; N: torchrun (srun's tasks in a Slurm job), one process each."""
    return "torchrun" if spec.world_size > 1 else "single"


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line one process (one DDP rank) executes in this backend's environment."""
    return [python, "-m", MODULE, spec_path, result_path]
