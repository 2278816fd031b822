"""TensorFlow (+Horovod) backend. Stdlib only at import time.

The host cannot know whether the environment (an NGC image, a managed venv) has Horovod, so
`command()` always starts the backend's entry point in that environment, and the entry point
(launch.py) picks the launcher there: horovodrun for N workers where horovod.tensorflow is
built, else one process with MirroredStrategy. The result records which (`distribution`).

Under Slurm on one node, srun starts that same entry point once (horovodrun then starts the
workers on the node, as on a workstation). Across nodes horovodrun would need ssh to the other
hosts, so srun starts one task per worker instead and the workers join one
MultiWorkerMirroredStrategy, its TF_CONFIG built from the job's variables (launch.py).
"""
from typing import List

from ..dataset import LOADER_WORKERS
from ..options import CHANNELS_LAST, Option
from ..protocol import RunSpec, Unsupported

MODULE = "backends.tf_horovod"
DATA_FORMAT = "tfrecord"  # --data DIR: TFRecord shards written once, read by tf.data (data.py)
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
    LOADER_WORKERS,
)


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line that runs `spec` in this backend's environment (1 or N workers)."""
    return [python, "-m", MODULE, spec_path, result_path]


def srun_tasks(spec: RunSpec) -> int:
    """Tasks srun starts per node: one launcher on one node, one per worker across nodes."""
    return 1 if spec.nodes == 1 else spec.gpus


def srun_command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command each srun task runs (see the module docstring)."""
    if spec.nodes > 1 and spec.options.get("distribution") == "horovod":
        raise Unsupported("options.distribution=horovod across {} nodes: horovodrun reaches hosts "
                          "other than localhost only over ssh; across nodes compare runs "
                          "MultiWorkerMirroredStrategy (distribution=auto)".format(spec.nodes))
    return command(python, spec, spec_path, result_path)
