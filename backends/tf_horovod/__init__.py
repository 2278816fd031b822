"""TensorFlow (+Horovod) backend. Stdlib only at import time.

The host cannot know whether the environment (an NGC image, a managed venv) has Horovod, so
`command()` always starts the backend's entry point in that environment, and the entry point
(launch.py) picks the launcher there: horovodrun for N workers where horovod.tensorflow is
built, else one process with MirroredStrategy. The result records which (`distribution`).
"""
from typing import List

from ..protocol import RunSpec

MODULE = "backends.tf_horovod"


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line that runs `spec` in this backend's environment (1 or N workers)."""
    return [python, "-m", MODULE, spec_path, result_path]
