"""horovodrun where Horovod is built for this run, else one process: decided inside the
framework's environment, where the host cannot look. Stdlib only.

    python -m backends.launchers.horovod python -m backends.tf_horovod SPEC RESULT

The backend's option `distribution`: "auto" (Horovod where horovod.tensorflow is built and fit
for the device, else one process with MirroredStrategy), "horovod" (Horovod or a recorded
`unsupported`), "mirrored". Horovod runs as `python -m horovod.runner.launch -np N -H
localhost:N --gloo|--mpi RANK_COMMAND`: the gloo controller where Horovod has it (no MPI needed),
else MPI (NGC's images build Horovod with MPI). On GPUs a Horovod built without NCCL would
average the gradients through host memory: `auto` then runs one process instead and says why
(COMPARE_TF_FALLBACK, recorded in the result). horovodrun waits for every worker: once one has
exited, the others get COMPARE_EXIT_GRACE_S (watch.py). If the processes end before rank 0
writes the result, this launcher writes a `failed` one, so the host always finds a result file.
"""
import glob
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

from .. import lifeline, options
from ..contract.rules import EXIT_GRACE_S, exit_grace
from ..protocol import RunSpec, Unsupported
from . import launcher, watch

BUILD_KEYS = ("gloo", "mpi", "nccl", "cuda")  # hvd.<key>_built(): controllers, GPU all-reduce
FALLBACK_ENV = "COMPARE_TF_FALLBACK"  # why N workers run as one process (the trainer records it)
_BUILD_PROBE = ("import json, horovod.tensorflow as h; "
                "print(json.dumps({{k: bool(getattr(h, k + '_built')()) for k in {!r}}}))".format(
                    BUILD_KEYS))


class Horovod(launcher.Launcher):
    """horovodrun on one host where Horovod is built for the run, else one process (TensorFlow)"""

    def command(self, python: str, spec: RunSpec, rank: List[str]) -> List[str]:
        return [python, "-m", __name__] + list(rank)


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


def horovod_command(spec: RunSpec, rank: Sequence[str], controller: str = "gloo") -> List[str]:
    """horovodrun starting `rank` once per worker on this host, with that controller."""
    return [rank[0], "-m", "horovod.runner.launch", "-np", str(spec.gpus), "-H",
            "localhost:{}".format(spec.gpus), "--" + controller] + list(rank)


def _installed_build() -> Tuple[Optional[Dict[str, bool]], str]:
    """(build, why not): the installed Horovod's build, or None and the reason there is none."""
    if not horovod_tensorflow_built():
        return None, "horovod.tensorflow is not built in {}".format(sys.prefix)
    try:
        return horovod_build(), ""
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
        return None, "horovod.tensorflow does not import in {}: {}".format(sys.prefix, exc)


def _horovodrun(spec: RunSpec, cmd: Sequence[str], grace: float = EXIT_GRACE_S) -> int:
    """Run horovodrun to its end, its workers given `grace` once one has exited (watch.py:
    horovodrun waits for every one); a failed result when it ends before rank 0 wrote one, saying
    which worker ended first and whom this launcher ended. Killed by a signal, horovodrun is said
    to be, and this launcher exits as a shell says it (128 + N): the host then looks for the
    kernel's word on a SIGKILL (its OOM killer's signal)."""
    started = time.time()
    code, ended = watch.run(cmd, grace)
    result_path = launcher.files(cmd)[1]
    if not launcher.wrote_result(result_path, started):
        how = "was killed by {} (exit code {})".format(_signal_name(code - 128), code) \
            if 128 < code <= 128 + 64 else "exited {}".format(code)
        recorded = launcher.record(spec, result_path, RuntimeError(
            "horovodrun {} before rank 0 wrote a result{}".format(how, ended)))
        return code if 128 < code <= 128 + 64 else recorded
    return code


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "signal {}".format(signum)


def main(rank: Sequence[str]) -> int:
    """Run the rank command under horovodrun, or as one process (see the module docstring)."""
    lifeline.die_with_parent()  # never outlive what started this launcher
    spec = launcher.read(rank)
    choice = options.value(launcher.declared(spec), spec.options, "distribution") if spec else None
    if spec is None or spec.gpus == 1 or choice not in ("auto", "horovod"):
        # mirrored; or a spec or choice the harness rejects, naming the valid ones
        return launcher.run(rank)
    build, not_built = _installed_build()
    try:
        controller, why = choose(spec, choice, build, not_built)
    except Unsupported as exc:
        return launcher.record(spec, launcher.files(rank)[1], exc)
    if controller is None:
        return launcher.run(rank, dict(os.environ, **{FALLBACK_ENV: why}))
    try:
        grace = exit_grace(os.environ, EXIT_GRACE_S)
    except ValueError as exc:  # the grace the user asked for, not a default in its place
        return launcher.record(spec, launcher.files(rank)[1], exc)
    cmd = horovod_command(spec, rank, controller)
    launcher.say(cmd)
    return _horovodrun(spec, cmd, grace)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
