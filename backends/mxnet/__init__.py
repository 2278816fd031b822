"""MXNet backend (Gluon ResNet-50, kvstore `device` over N contexts). Stdlib only at import time."""
from typing import List

from ..protocol import RunSpec

MODULE = "backends.mxnet"


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line that runs `spec` in this backend's environment.

    One process for any number of workers: it drives spec.gpus contexts through a kvstore.
    (Horovod, where wanted, is started by the user's horovodrun around this same command.)
    """
    return [python, "-m", MODULE, spec_path, result_path]
