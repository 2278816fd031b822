"""The rules every trainer applies the same way, and the names results use for the same thing.

Standard library only, Python >= 3.8. A trainer asks here whether a precision can run on its
device (and whether it sees a GPU at all), checks the number of workers its launcher started,
takes its share of the CPU cores, and records its settings in the common vocabulary below, notes
included; framework code stays in each backend's runtime.py and train.py.
"""
import os
from typing import Any, Dict, Optional, Tuple

from .protocol import Unsupported

MIN_CAPABILITY = {"tf32": (8, 0), "bf16": (8, 0)}  # tensor-core modes since Ampere
OPTIMIZER = "sgd-momentum"  # every backend trains with SGD + momentum, same LR and momentum
# compute dtype of the matrix work per precision name (parameters stay float32 everywhere)
COMPUTE_DTYPE = {"fp32": "float32", "tf32": "tensorfloat32", "fp16": "float16", "bf16": "bfloat16"}
# the keys every trainer's settings carry, with one meaning across frameworks
COMMON_SETTINGS = ("trainable_parameters", "optimizer", "optimizer_impl", "compute_dtype",
                   "loss_scaling", "tf32", "layout", "compiler", "threads")


def check_precision(precision: str, device: str,
                    capability: Optional[Tuple[int, int]] = None) -> None:
    """Raise Unsupported when `precision` cannot run on the device.

    capability: the GPU's compute capability (major, minor) where the framework can tell it.
    """
    if device == "cpu" and precision == "tf32":
        raise Unsupported("tf32 is an NVIDIA tensor-core mode; the CPU has none (use fp32 or bf16)")
    need = MIN_CAPABILITY.get(precision)
    if device == "cuda" and need and capability is not None and tuple(capability) < need:
        raise Unsupported("{} needs compute capability {}.{}+, this GPU is {}.{}".format(
            precision, need[0], need[1], capability[0], capability[1]))


def check_gpu(sees_one: bool, framework: str, detail: str = "") -> None:
    """Unsupported when the framework (e.g. "torch 2.3.1") sees no GPU for a cuda run."""
    if not sees_one:
        raise Unsupported("device cuda asked for, but {} sees no GPU{}".format(framework, detail))


def check_tf32_override(precision: str) -> None:
    """tf32 cannot run where NVIDIA_TF32_OVERRIDE=0 switches it off for cuDNN and cuBLAS (read by
    the backends that leave TF32 to those libraries)."""
    if precision == "tf32" and os.environ.get("NVIDIA_TF32_OVERRIDE") == "0":
        raise Unsupported("tf32 asked for, but NVIDIA_TF32_OVERRIDE=0 switches it off")


def fp16_cpu_note(precision: str, device: str, what: str = "fp16",
                  runs: str = "runs") -> Optional[str]:
    """The note a result's settings carry for fp16 on a CPU (it runs, nothing makes it faster)."""
    if precision == "fp16" and device == "cpu":
        return "{} on CPU: {}, but CPUs have no fp16 tensor cores".format(what, runs)
    return None


BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of CPUs with bf16 instructions


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset:
    """The CPU's feature flags (empty where /proc/cpuinfo cannot be read: not Linux)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def bf16_cpu_note(precision: str, device: str, what: str = "bf16", who: str = "the framework",
                  flags: Optional[frozenset] = None) -> Optional[str]:
    """The note a result's settings carry for bf16 on a CPU without bf16 instructions: it runs,
    but in software, so its figure and its gain over fp32 say nothing about bf16 hardware. None
    on a CPU with them, or where the flags cannot be read."""
    if precision != "bf16" or device != "cpu":
        return None
    flags = cpu_flags() if flags is None else flags
    if not flags or any(f in flags for f in BF16_CPU_FLAGS):
        return None
    return ("{} on a CPU without bf16 instructions (neither {}{}): {} emulates it, so its figure "
            "and its gain over fp32 measure the emulation, not bf16 hardware").format(
                what, " nor ".join(BF16_CPU_FLAGS), ", and no AVX-512" if "avx512f" not in flags
                else "", who)


def cpu_precision_note(precision: str, device: str, what: str = "", who: str = "") -> Optional[str]:
    """The note for a reduced precision on a CPU, if any: fp16 (no tensor cores) or bf16 without
    bf16 instructions. `what`: how the framework names the mode (e.g. "autocast"); `who`: what
    runs it (e.g. "XLA")."""
    if precision == "fp16":
        return fp16_cpu_note(precision, device, what=" ".join(filter(None, ("fp16", what))),
                             runs="{} runs it".format(who) if who else "runs")
    return bf16_cpu_note(precision, device, what=" ".join(filter(None, ("bf16", what))),
                         who=who or "the framework")


def check_workers(expected: int, started: int, launcher: str) -> None:
    """The launcher must have started exactly the workers the spec asks for."""
    if started != expected:
        raise RuntimeError("spec asks for {} workers but {} started {}".format(
            expected, launcher, started))


def cpu_threads(workers: int, cores: Optional[int] = None) -> int:
    """Threads per worker on a CPU: an equal share of the cores, so N workers do not
    oversubscribe them (N processes, or N contexts/devices in one process). By default the cores
    this process may run on: a cell that shares the machine is pinned to its own."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) // max(1, workers))


def channels_last(given: Optional[bool], device: str) -> bool:
    """The common layout rule (options.CHANNELS_LAST): NHWC on GPUs, where tensor cores want it
    and every framework's cuDNN path has it; NCHW on CPUs unless asked for."""
    return device == "cuda" if given is None else bool(given)


def settings(*, trainable_parameters: int, optimizer_impl: str, precision: str,
             loss_scaling: Optional[str], tf32: bool, layout: str, compiler: Optional[str],
             threads: Optional[int], **framework_specific: Any) -> Dict[str, Any]:
    """A result's `settings`: the common keys first, then the framework's own.

    loss_scaling: "dynamic", "static <scale>" or None; layout: "NHWC" or "NCHW"; compiler: what
    compiled the step ("xla", "torch.compile <mode>", ...) or None; threads: CPU threads per worker.
    """
    out = {"trainable_parameters": trainable_parameters, "optimizer": OPTIMIZER,
           "optimizer_impl": optimizer_impl, "compute_dtype": COMPUTE_DTYPE[precision],
           "loss_scaling": loss_scaling, "tf32": bool(tf32), "layout": layout,
           "compiler": compiler, "threads": threads}
    clash = sorted(set(out) & set(framework_specific))
    if clash:
        raise ValueError("framework settings repeat common keys: {}".format(", ".join(clash)))
    out.update(framework_specific)
    return out
