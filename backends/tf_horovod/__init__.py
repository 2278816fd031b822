"""TensorFlow (+Horovod) backend. Stdlib only at import time.

The host cannot know whether the environment (an NGC image, a managed venv) has Horovod, so
`command()` always starts the backend's entry point in that environment, and the entry point
(launch.py) picks the launcher there: horovodrun for N workers where horovod.tensorflow is
built, else one process with MirroredStrategy. The result records which (`distribution`).
"""
from typing import List

from ..options import CHANNELS_LAST, Option
from ..protocol import RunSpec

MODULE = "backends.tf_horovod"
DISTRIBUTIONS = ("auto", "horovod", "mirrored")
OPTIONS = (
    Option("distribution", "str", "N workers: Horovod where built (auto), or always one of the two",
           default="auto", choices=DISTRIBUTIONS),
    Option("xla", "bool", "XLA-compile the forward and backward pass and the optimizer's update "
           "(jit_compile)", default_text="as --compile"),
    CHANNELS_LAST,
    Option("intra_op_threads", "int", "CPU threads per op, per worker", minimum=1,
           default_text="cores / workers"),
    Option("inter_op_threads", "int", "CPU ops run at once, per worker", default=2, minimum=1),
)


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line that runs `spec` in this backend's environment (1 or N workers)."""
    return [python, "-m", MODULE, spec_path, result_path]
