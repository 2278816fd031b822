"""MXNet backend (Gluon ResNet-50, a kvstore over N contexts). Stdlib only at import time."""
import os
from typing import List

from ..options import CHANNELS_LAST, LOADER_WORKERS, Option, Switch
from ..pipelines import Pipeline
from ..protocol import RunSpec, Unsupported

MODULE = "backends.mxnet"
FRAMEWORK = "mxnet"  # the package the backend imports (its bytecode: caches.bytecode)
DATA_FORMAT = "recordio"  # --data DIR: train.rec/.idx written once, read by ImageRecordIter (data.py)
PIPELINES = (Pipeline(DATA_FORMAT, "backends.mxnet.data:make_feed", "ImageRecordIter over the "
                      "RecordIO file, MXNet's C++ threads decoding with OpenCV on the CPU"),)
OPTIONS = (
    Option("kvstore", "str", "where the gradients of N contexts are summed: on the devices "
           "(as the Dell study ran it) or on the CPU", default="device", choices=("device", "local")),
    LOADER_WORKERS,
    CHANNELS_LAST,  # NHWC needs cuDNN: on a CPU it is a recorded `unsupported`
    Option("hybridize", "str", "Gluon graph mode: one static graph with static memory "
           "(static_alloc, static_shape), a plain hybridize(), or imperative", default="static",
           choices=("static", "plain", "off")),
)
HYBRIDIZE = {"static": {"static_alloc": True, "static_shape": True}, "plain": {}, "off": None}
# `tuned` (docs/modes.md): Gluon's documented fast path is hybridize(static_alloc=True,
# static_shape=True), and NHWC where cuDNN runs it (not on a CPU). compare's MXNet default already
# runs both (as NVIDIA's MXNet ResNet-50 does), so tuned differs from default by the best batch.
# why a batch search (--batch-size auto) runs each probe in a process of its own here, not all in
# the cell's (compare/batchsearch.py)
SEPARATE_PROBES = ("MXNet's pooled storage keeps what it allocated for the life of the process, so "
                   "a second probe in one process would not see what a fresh cell sees")
MODES = {"tuned": (
    Switch("hybridize", "static", "one static graph with static memory: Gluon's documented "
           "fastest hybridize"),
    Switch("channels_last", True, "NHWC convolutions (cuDNN); MXNet's CPU convolutions are NCHW "
           "only", where="cuda"),
)}


def prepare(spec: RunSpec) -> None:
    """Before mxnet is imported: true FP32 for fp32 (cuDNN 8 and cuBLAS read NVIDIA_TF32_OVERRIDE
    when mxnet loads them; the executor sets it too)."""
    if spec.precision == "fp32":
        os.environ["NVIDIA_TF32_OVERRIDE"] = "0"


def launcher(spec: RunSpec) -> str:
    """One process for any number of workers: it drives spec.gpus contexts through a kvstore."""
    if spec.nodes > 1:
        raise Unsupported("MXNet runs as one process driving its node's contexts through a kvstore; "
                          "{} nodes would need its distributed kvstore or Horovod-MXNet, which "
                          "compare does not launch (use --nodes 1)".format(spec.nodes))
    return "single"


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line of the run's one process in this backend's environment."""
    return [python, "-m", MODULE, spec_path, result_path]
