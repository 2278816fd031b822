"""Rules both sides apply, written once: whether an error says memory ran out (the harness asks
of an exception, the host of a run's stderr, every rank's), and which GPUs CUDA_VISIBLE_DEVICES
names (the host's pool and docker's device requests, the backends' telemetry and JAX's local
devices). Standard library only, Python >= 3.8.
"""
import os
import re
from typing import List, Mapping, Optional

# how frameworks word a failed allocation, device or host: PyTorch's CPU allocator says "can't
# allocate memory"; TF reports a failed host-to-GPU copy of a tensor as "Dst tensor is not
# initialized"; exception type names (OutOfMemoryError, ResourceExhaustedError) count too
OOM_PATTERN = re.compile(
    r"out of memory|OutOfMemory|OOM when allocating|ResourceExhausted|failed to allocate|"
    r"Dst tensor is not initialized|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|"
    r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|MemoryError|can't allocate memory|"
    r"cannot allocate memory|bad_alloc", re.IGNORECASE)
# TF's allocator logs "ran out of memory trying to allocate ... not a failure" when it merely
# retries: such a line says nothing ran out
NOT_A_FAILURE = "not a failure"


def says_out_of_memory(text: str) -> bool:
    """Whether one line (or an error's text) says memory ran out."""
    return bool(OOM_PATTERN.search(text)) and NOT_A_FAILURE not in text


def is_oom(exc: BaseException) -> bool:
    """Whether an exception a framework raised means memory ran out: its type or its text."""
    return isinstance(exc, MemoryError) or says_out_of_memory(
        "{}: {}".format(type(exc).__name__, exc))


def oom_line(text: str) -> Optional[str]:
    """The last line of `text` (a run's stderr, every rank's) that says memory ran out, or None:
    the error itself, after the allocator's warnings."""
    found = None
    for line in text.splitlines():
        if says_out_of_memory(line):
            found = line
    return found.strip()[-300:] if found else None


def visible_gpus(environ: Optional[Mapping[str, str]] = None) -> Optional[List[str]]:
    """The GPUs CUDA_VISIBLE_DEVICES names (indices or UUIDs, in its order); None where it is
    not set (every GPU is visible), [] where it is set to nothing."""
    environ = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" not in environ:
        return None
    return [x.strip() for x in environ["CUDA_VISIBLE_DEVICES"].split(",") if x.strip()]
