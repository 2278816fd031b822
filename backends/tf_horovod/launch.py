"""Picks how N TensorFlow workers run, inside the backend's environment. Stdlib only.

options.distribution: "auto" (default: Horovod where horovod.tensorflow is built, else
MirroredStrategy), "horovod" (Horovod or a recorded `unsupported`), "mirrored".
Horovod runs as `python -m horovod.runner.launch -np N --gloo python -m backends.tf_horovod ...`
(the gloo controller: no MPI needed). If the workers die before rank 0 writes the result, this
process writes a `failed` one, so the host always finds a result file.
Across Slurm nodes each worker is an srun task already: multiworker_config() gives its TF_CONFIG.
"""
import glob
import importlib.util
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Mapping, Optional

from .. import harness, lifeline, options
from ..protocol import RunSpec, SchemaError, Unsupported, read_spec
from . import DISTRIBUTIONS, MODULE, OPTIONS


def horovod_tensorflow_built() -> bool:
    """Whether horovod.tensorflow's compiled ops are installed (without importing TF)."""
    spec = importlib.util.find_spec("horovod")
    if spec is None or not spec.submodule_search_locations:
        return False
    return any(glob.glob(os.path.join(d, "tensorflow", "mpi_lib*.so"))
               for d in spec.submodule_search_locations)


def horovod_command(spec: RunSpec, spec_path: str, result_path: str,
                    python: str = sys.executable) -> List[str]:
    return [python, "-m", "horovod.runner.launch", "-np", str(spec.gpus), "-H",
            "localhost:{}".format(spec.gpus), "--gloo",
            python, "-m", MODULE, spec_path, result_path]


def multiworker_config(env: Mapping[str, str] = os.environ) -> Dict[str, Any]:
    """TF_CONFIG of one worker of a Slurm job whose srun tasks are the workers (RANK, WORLD_SIZE,
    LOCAL_WORLD_SIZE set by the job, tasks placed block-wise on the nodes). Each worker listens at
    its node's address as Slurm knows it (COMPARE_NODE_ADDRS, in node order: node names need not
    resolve) on its own port after the job's coordinator port, so workers sharing a host differ."""
    addrs = env["COMPARE_NODE_ADDRS"].split(",")
    per_node, world = int(env["LOCAL_WORLD_SIZE"]), int(env["WORLD_SIZE"])
    base = int(env["COMPARE_COORDINATOR_PORT"]) + 1
    workers = ["{}:{}".format(addrs[r // per_node], base + r) for r in range(world)]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": int(env["RANK"])}}


def _record(spec: RunSpec, result_path: str, error: Exception) -> int:
    """Write the result of a run that never got to a trainer (through the harness, as usual)."""
    def setup(_spec):
        raise error
    result = harness.run(spec, result_path, setup, OPTIONS)
    return 0 if result.status in ("ok", "unsupported", "skipped") else 1


def launch(spec_path: str, result_path: str) -> Optional[int]:
    """Run the workers under horovodrun and return the exit code, or None: run here instead."""
    try:
        spec = read_spec(spec_path)
    except (OSError, SchemaError):
        return None  # the harness reports it
    choice = options.value(OPTIONS, spec.options, "distribution")
    if spec.nodes > 1:
        return None  # this process is one worker of a multi-node job (multiworker_config)
    if spec.gpus == 1 or choice not in DISTRIBUTIONS or choice == "mirrored":
        return None  # train.py rejects an unknown choice with the valid ones
    if not horovod_tensorflow_built():
        if choice == "horovod":
            return _record(spec, result_path, Unsupported(
                "options.distribution=horovod, but horovod.tensorflow is not built in {}".format(
                    sys.prefix)))
        os.environ["COMPARE_TF_FALLBACK"] = "horovod.tensorflow not built: MirroredStrategy"
        return None
    started = time.time()
    cmd = horovod_command(spec, spec_path, result_path)
    sys.stderr.write("compare: {}\n".format(" ".join(cmd)))
    sys.stderr.flush()
    lifeline.prepare()
    code = subprocess.call(cmd, preexec_fn=lifeline.die_with_parent)  # never outlive this launcher
    if not os.path.exists(result_path) or os.path.getmtime(result_path) < started - 1:
        return _record(spec, result_path, RuntimeError(
            "horovodrun exited {} before rank 0 wrote a result".format(code)))
    return code
