"""MXNet backend (Gluon ResNet-50, a kvstore over N contexts). Stdlib only at import time."""
from typing import List

from ..dataset import LOADER_WORKERS
from ..options import CHANNELS_LAST, Option
from ..protocol import RunSpec, Unsupported

MODULE = "backends.mxnet"
DATA_FORMAT = "recordio"  # --data DIR: train.rec/.idx written once, read by ImageRecordIter (data.py)
OPTIONS = (
    Option("kvstore", "str", "where the gradients of N contexts are summed: on the devices "
           "(as the Dell study ran it) or on the CPU", default="device", choices=("device", "local")),
    LOADER_WORKERS,
    CHANNELS_LAST,  # NHWC needs cuDNN: on a CPU it is a recorded `unsupported`
)


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line that runs `spec` in this backend's environment.

    One process for any number of workers: it drives spec.gpus contexts through a kvstore.
    """
    return [python, "-m", MODULE, spec_path, result_path]


def srun_command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """Under Slurm: the same one process, on one node (srun starts one task per node)."""
    if spec.nodes > 1:
        raise Unsupported("MXNet runs as one process driving its node's contexts through a kvstore; "
                          "{} nodes would need its distributed kvstore or Horovod-MXNet, which "
                          "compare does not launch (use --nodes 1)".format(spec.nodes))
    return command(python, spec, spec_path, result_path)
