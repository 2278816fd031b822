"""TensorFlow (+Horovod) backend. Stdlib only at import time.

The host cannot know whether the environment (an NGC image, a managed venv) has Horovod, so N
workers on one node start with the horovod launcher, a stdlib program that decides inside that
environment (backends/launchers/horovod.py): horovodrun where horovod.tensorflow is built, else
one process with MirroredStrategy. The result records which (`distribution`).

Under Slurm on one node, srun starts that launcher once (horovodrun then starts the workers on
the node, as on a workstation). Across nodes horovodrun would need ssh to the other hosts, so
srun starts one task per worker instead and the workers join one MultiWorkerMirroredStrategy,
its TF_CONFIG built from the job's variables (runtime.py).
"""
import os
from typing import List

from ..options import CHANNELS_LAST, LOADER_WORKERS, Option, Switch
from ..pipelines import Pipeline
from ..protocol import RunSpec, Unsupported

MODULE = "backends.tf_horovod"
FRAMEWORK = "tensorflow"  # the package the backend imports (its bytecode: caches.bytecode)
DATA_FORMAT = "tfrecord"  # --data DIR: TFRecord shards written once, read by tf.data (data.py)
PIPELINES = (Pipeline(DATA_FORMAT, "backends.tf_horovod.data:make_feed", "tf.data over the "
                      "TFRecord shards, decode_and_crop_jpeg in a parallel map on the CPU"),)
DISTRIBUTIONS = ("auto", "horovod", "mirrored")
ONEDNN = "TF_ENABLE_ONEDNN_OPTS"
OPTIONS = (
    Option("distribution", "str", "N workers: Horovod where built (auto), or always one of the two",
           default="auto", choices=DISTRIBUTIONS),
    Option("xla", "bool", "XLA-compile the forward and backward pass and the optimizer's update "
           "(jit_compile)", default_text="as --compile"),
    CHANNELS_LAST,
    Option("intra_op_threads", "int", "CPU threads per op, per worker", minimum=1, maximum=1024,
           default_text="cores / workers"),
    Option("inter_op_threads", "int", "CPU ops run at once, per worker", default=2, minimum=1,
           maximum=1024),
    LOADER_WORKERS,
)
# `tuned` (docs/modes.md): TensorFlow's documented fast path is XLA (`jit_compile=True`) with the
# Keras mixed-precision policy; the policy is already how compare runs fp16/bf16 in both modes
# (mixed_float16 / mixed_bfloat16), so XLA is the switch.
# why a batch search (--batch-size auto) runs each probe in a process of its own here, not all in
# the cell's (compare/batchsearch.py): a second probe in one process would not see the memory a
# fresh cell sees
SEPARATE_PROBES = ("TensorFlow keeps the device memory its allocator took until the process ends, "
                   "so a second probe in one process would not see what a fresh cell sees")
MODES = {"tuned": (
    Switch("xla", True, "XLA-compile forward, backward and the update (jit_compile), as "
           "TensorFlow's performance guide recommends"),
)}


def prepare(spec: RunSpec) -> None:
    """Before TF is imported: its CPU kernels for NCHW pooling exist only through oneDNN, which TF
    switches on by itself only on CPUs with AVX-512; set it for CPU runs unless the user chose."""
    if spec.device == "cpu":
        os.environ.setdefault(ONEDNN, "1")


def launcher(spec: RunSpec) -> str:
    """The launcher of the spec's workers (see the module docstring)."""
    choice = spec.options.get("distribution", "auto")
    if spec.nodes > 1:
        if choice == "horovod":
            raise Unsupported("options.distribution=horovod across {} nodes: horovodrun reaches "
                              "hosts other than localhost only over ssh; across nodes compare runs "
                              "MultiWorkerMirroredStrategy (distribution=auto)".format(spec.nodes))
        return "srun"
    # mirrored, or a bad choice the trainer rejects naming the valid ones: one process
    return "horovod" if spec.gpus > 1 and choice in ("auto", "horovod") else "single"


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line one process (one worker, or one over N devices) executes in this
    backend's environment."""
    return [python, "-m", MODULE, spec_path, result_path]
