"""MXNet's runtime: the contexts this one process drives (one per worker), sync, the GPU's name.
Imported by train.py and data.py (it needs mxnet)."""
import os
from typing import Any, Dict, List

import mxnet as mx

from .. import phases
from ..machine import cpu_model
from ..protocol import RunSpec, Unsupported
from ..trainer import Runtime


def contexts(spec: RunSpec) -> List[mx.Context]:
    """The contexts this process drives: one per worker."""
    if spec.device == "cuda":
        have = mx.context.num_gpus()
        if have < spec.gpus:
            raise Unsupported("spec asks for {} GPUs, mxnet {} sees {}".format(
                spec.gpus, mx.__version__, have))
        return [mx.gpu(i) for i in range(spec.gpus)]
    return [mx.cpu(i) for i in range(spec.gpus)]


def gpu_name(ctx: mx.Context) -> str:
    """MXNet has no device-name call; the NVIDIA driver lists its GPUs under /proc."""
    root = "/proc/driver/nvidia/gpus"
    try:
        folders = sorted(os.listdir(root))
        with open(os.path.join(root, folders[ctx.device_id], "information")) as f:
            for line in f:
                if line.startswith("Model:"):
                    return line.split(":", 1)[1].strip()
    except (OSError, IndexError):
        pass
    return "NVIDIA GPU {}".format(ctx.device_id)


class MXNetRuntime(Runtime):
    """One process over N contexts: no process group, nothing to join."""

    def __init__(self, spec: RunSpec):
        self.contexts = contexts(spec)
        self.gpu = self.contexts[0].device_type == "gpu"
        self.distribution = "kvstore" if len(self.contexts) > 1 else "single"
        phases.mark("devices_ready")

    def sync(self) -> None:
        mx.nd.waitall()

    def describe(self) -> Dict[str, Any]:
        return {"framework_version": "mxnet " + mx.__version__,
                "device_name": gpu_name(self.contexts[0]) if self.gpu else cpu_model()}


def start(spec: RunSpec) -> MXNetRuntime:
    return MXNetRuntime(spec)
