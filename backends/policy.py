"""The rules every trainer applies the same way, and the names results use for the same thing.

Standard library only, Python >= 3.8. A trainer asks here whether a precision can run on its
device, checks the number of workers its launcher started, takes its share of the CPU cores, and
records its settings in the common vocabulary below; framework code stays in each train.py.
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


def check_workers(expected: int, started: int, launcher: str) -> None:
    """The launcher must have started exactly the workers the spec asks for."""
    if started != expected:
        raise RuntimeError("spec asks for {} workers but {} started {}".format(
            expected, launcher, started))


def cpu_threads(workers: int, cores: Optional[int] = None) -> int:
    """Threads per worker on a CPU: an equal share of the cores, so N workers do not
    oversubscribe them (N processes, or N contexts/devices in one process)."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return max(1, cores // max(1, workers))


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
