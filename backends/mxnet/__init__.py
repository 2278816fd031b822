"""MXNet backend (Gluon ResNet-50, a kvstore over N contexts). Stdlib only at import time."""
from typing import List

from ..options import CHANNELS_LAST, Option
from ..protocol import RunSpec

MODULE = "backends.mxnet"
OPTIONS = (
    Option("kvstore", "str", "where the gradients of N contexts are summed: on the devices "
           "(as the Dell study ran it) or on the CPU", default="device", choices=("device", "local")),
    CHANNELS_LAST,  # NHWC needs cuDNN: on a CPU it is a recorded `unsupported`
)


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line that runs `spec` in this backend's environment.

    One process for any number of workers: it drives spec.gpus contexts through a kvstore.
    """
    return [python, "-m", MODULE, spec_path, result_path]
