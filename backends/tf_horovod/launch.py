"""Picks how N TensorFlow workers run, inside the backend's environment. Stdlib only.

options.distribution: "auto" (default: Horovod where horovod.tensorflow is built and fit for the
device, else MirroredStrategy), "horovod" (Horovod or a recorded `unsupported`), "mirrored".
Horovod runs as `python -m horovod.runner.launch -np N -H localhost:N --gloo|--mpi python -m
backends.tf_horovod ...`: the gloo controller where Horovod has it (no MPI needed), else MPI
(NGC's images build Horovod with MPI). On GPUs a Horovod built without NCCL would average the
gradients through host memory: `auto` then runs MirroredStrategy instead and the result says why.
If the workers die before rank 0 writes the result, this process writes a `failed` one, so the
host always finds a result file.
Across Slurm nodes each worker is an srun task already: multiworker_config() gives its TF_CONFIG.
"""
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .. import harness, lifeline, options
from ..protocol import RunSpec, SchemaError, Unsupported, read_spec
from . import DISTRIBUTIONS, MODULE, OPTIONS

BUILD_KEYS = ("gloo", "mpi", "nccl", "cuda")  # hvd.<key>_built(): controllers, GPU all-reduce
_BUILD_PROBE = ("import json, horovod.tensorflow as h; "
                "print(json.dumps({{k: bool(getattr(h, k + '_built')()) for k in {!r}}}))".format(
                    BUILD_KEYS))


def horovod_tensorflow_built() -> bool:
    """Whether horovod.tensorflow's compiled ops are installed (without importing TF)."""
    spec = importlib.util.find_spec("horovod")
    if spec is None or not spec.submodule_search_locations:
        return False
    return any(glob.glob(os.path.join(d, "tensorflow", "mpi_lib*.so"))
               for d in spec.submodule_search_locations)


def horovod_build(python: str = sys.executable) -> Dict[str, bool]:
    """What the installed horovod.tensorflow was built with, e.g. {"gloo": True, "mpi": False,
    "nccl": False, "cuda": False}. Asked in a child process (it imports TensorFlow, a few
    seconds); RuntimeError with the child's last line when it does not import."""
    proc = subprocess.run([python, "-c", _BUILD_PROBE], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        raise RuntimeError(lines[-1] if lines else "exit {}".format(proc.returncode))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def choose(spec: RunSpec, choice: str, build: Optional[Dict[str, bool]], not_built: str,
           mpirun: Optional[str] = "") -> Tuple[Optional[str], str]:
    """Decide how N workers run: ("gloo" or "mpi", "") under Horovod with that controller, or
    (None, why) for one process with MirroredStrategy. Unsupported where choice is "horovod"
    and this Horovod cannot serve the spec.

    build: horovod_build()'s answer, None where Horovod is missing (`not_built` says why);
    mpirun: its path ("" = look it up on PATH, None = absent).
    """
    mpirun = shutil.which("mpirun") if mpirun == "" else mpirun
    problem = None
    if build is None:
        problem = not_built
    elif spec.device == "cuda" and not build.get("nccl"):
        problem = ("Horovod in {} was built without NCCL: it would average GPU gradients "
                   "through host memory".format(sys.prefix))
    elif not build.get("gloo") and not (build.get("mpi") and mpirun):
        problem = "Horovod was built without gloo, and {}".format(
            "without MPI" if not build.get("mpi") else "mpirun is not on PATH")
    if problem is None:
        return ("gloo" if build.get("gloo") else "mpi"), ""
    if choice == "horovod":
        raise Unsupported("options.distribution=horovod, but {}".format(problem))
    return None, problem + ": MirroredStrategy instead"


def horovod_command(spec: RunSpec, spec_path: str, result_path: str, controller: str = "gloo",
                    python: str = sys.executable) -> List[str]:
    return [python, "-m", "horovod.runner.launch", "-np", str(spec.gpus), "-H",
            "localhost:{}".format(spec.gpus), "--" + controller,
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


def _installed_build() -> Tuple[Optional[Dict[str, bool]], str]:
    """(build, why not): the installed Horovod's build, or None and the reason there is none."""
    if not horovod_tensorflow_built():
        return None, "horovod.tensorflow is not built in {}".format(sys.prefix)
    try:
        return horovod_build(), ""
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
        return None, "horovod.tensorflow does not import in {}: {}".format(sys.prefix, exc)


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
    build, not_built = _installed_build()
    try:
        controller, why = choose(spec, choice, build, not_built)
    except Unsupported as exc:
        return _record(spec, result_path, exc)
    if controller is None:
        os.environ["COMPARE_TF_FALLBACK"] = why
        return None
    started = time.time()
    cmd = horovod_command(spec, spec_path, result_path, controller)
    sys.stderr.write("compare: {}\n".format(" ".join(cmd)))
    sys.stderr.flush()
    lifeline.prepare()
    code = subprocess.call(cmd, preexec_fn=lifeline.die_with_parent)  # never outlive this launcher
    if not os.path.exists(result_path) or os.path.getmtime(result_path) < started - 1:
        return _record(spec, result_path, RuntimeError(
            "horovodrun exited {} before rank 0 wrote a result".format(code)))
    return code
