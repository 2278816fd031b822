"""How N TensorFlow workers run, decided without TensorFlow (backends/launchers/horovod.py is
stdlib only), and which Horovod the environment's setup script builds (its plan, with a
stand-in Python).

A Horovod without NCCL must not average GPU gradients through host memory unnoticed; a Horovod
built with MPI only (NGC's images) must be started with --mpi, not --gloo.
"""
import os
import stat
import subprocess

import pytest

from backends.launchers import horovod as launch
from backends.protocol import RunSpec, Unsupported
from tests.helpers import ROOT

CPU_BUILD = {"gloo": True, "mpi": False, "nccl": False, "cuda": False}  # what setup.sh builds here
NGC_BUILD = {"gloo": False, "mpi": True, "nccl": True, "cuda": True}
NOT_BUILT = "horovod.tensorflow is not built in /env"


def _spec(device="cpu"):
    return RunSpec("tf", "tf_horovod", gpus=2, device=device)


def test_cpu_runs_use_gloo_when_horovod_has_it():
    assert launch.choose(_spec(), "auto", CPU_BUILD, NOT_BUILT, mpirun=None) == ("gloo", "")


def test_gpu_runs_without_nccl_fall_back_to_mirrored_strategy_and_say_why():
    controller, why = launch.choose(_spec("cuda"), "auto", CPU_BUILD, NOT_BUILT, mpirun=None)
    assert controller is None
    assert why.endswith("was built without NCCL: it would average GPU gradients through host "
                        "memory: MirroredStrategy instead")


def test_asking_for_horovod_on_gpus_without_nccl_is_unsupported():
    with pytest.raises(Unsupported, match="^options.distribution=horovod, but Horovod in .* was "
                                          "built without NCCL"):
        launch.choose(_spec("cuda"), "horovod", CPU_BUILD, NOT_BUILT, mpirun=None)


def test_a_horovod_with_mpi_only_is_started_with_mpi():
    controller, _ = launch.choose(_spec("cuda"), "auto", NGC_BUILD, NOT_BUILT, mpirun="/usr/bin/mpirun")
    assert controller == "mpi"
    cmd = launch.horovod_command(_spec("cuda"), ["py", "-m", "backends.tf_horovod", "s.json", "r.json"],
                                 controller)
    assert cmd[:8] == ["py", "-m", "horovod.runner.launch", "-np", "2", "-H", "localhost:2", "--mpi"]


def test_mpi_only_without_mpirun_falls_back_with_the_reason():
    controller, why = launch.choose(_spec("cuda"), "auto", NGC_BUILD, NOT_BUILT, mpirun=None)
    assert (controller, why) == (None, "Horovod was built without gloo, and mpirun is not on PATH: "
                                       "MirroredStrategy instead")


def test_missing_horovod_falls_back_or_is_unsupported():
    assert launch.choose(_spec(), "auto", None, NOT_BUILT) == (None, NOT_BUILT + ": MirroredStrategy instead")
    with pytest.raises(Unsupported, match="^options.distribution=horovod, but horovod.tensorflow is "
                                          "not built in /env$"):
        launch.choose(_spec(), "horovod", None, NOT_BUILT)


# --- compare/requirements/tf_horovod.setup.sh: what it plans to build, with a stand-in Python ---

def _plan(tmp_path, tf_cuda, **env):
    """Run the setup script's plan with a fake environment Python that reports a TF build."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\ncase \"$*\" in *is_built_with_cuda*) echo \"2.15.1 {} cp311\";;\n"
                      "*nvidia.nccl*) echo /site/nvidia/nccl;; *) exit 3;; esac\n".format(tf_cuda))
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "VIRTUAL_ENV": str(venv),
            "COMPARE_HOROVOD_PLAN_ONLY": "1"}
    if os.access("/usr/bin/nvcc", os.X_OK) or os.access("/bin/nvcc", os.X_OK):
        pytest.skip("nvcc on this machine's /usr/bin: the no-toolkit case cannot be staged")
    return subprocess.run(["bash", str(ROOT / "compare/requirements/tf_horovod.setup.sh")],
                          env=dict(base, **env), capture_output=True, text=True, timeout=60)


def _toolkit(tmp_path):
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(0o755)
    return str(tmp_path / "cuda")


def test_a_cuda_tensorflow_without_a_toolkit_gets_a_warning_not_a_silent_gloo_horovod(tmp_path):
    proc = _plan(tmp_path, 1)
    assert proc.returncode == 0, proc.stderr
    assert "compare: WARNING: TensorFlow is a CUDA build, but no CUDA toolkit (nvcc)" in proc.stdout
    assert "runs on cuda use MirroredStrategy instead" in proc.stdout
    assert proc.stdout.strip().endswith("gpu_operations=none wheels={}/.cache/compare/wheels/"
                                        "horovod-0.28.1-tf2.15.1-cp311-cudatf".format(tmp_path))


def test_a_cuda_tensorflow_with_a_toolkit_asks_for_nccl_from_the_tensorflow_wheels(tmp_path):
    proc = _plan(tmp_path, 1, CUDA_HOME=_toolkit(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "Horovod GPU all-reduce: NCCL (CUDA toolkit {}/cuda, NCCL /site/nvidia/nccl)".format(
        tmp_path) in proc.stdout
    assert "gpu_operations=NCCL" in proc.stdout and proc.stdout.strip().endswith("-nccl")


def test_nccl_can_be_required_or_refused(tmp_path):
    required = _plan(tmp_path, 1, COMPARE_HOROVOD_NCCL="require")
    assert required.returncode == 1
    assert "COMPARE_HOROVOD_NCCL=require: stopping" in required.stdout
    refused = _plan(tmp_path / "b", 1, CUDA_HOME=_toolkit(tmp_path), COMPARE_HOROVOD_NCCL="off")
    assert "gpu_operations=none" in refused.stdout


def test_a_cpu_tensorflow_builds_the_plain_horovod_as_before(tmp_path):
    proc = _plan(tmp_path, 0, CUDA_HOME=_toolkit(tmp_path))
    assert proc.stdout.splitlines() == [
        "compare: TensorFlow 2.15.1, CUDA build: no",
        "compare: plan: gpu_operations=none wheels={}/.cache/compare/wheels/"
        "horovod-0.28.1-tf2.15.1-cp311".format(tmp_path)]


def test_horovodrun_killed_by_a_signal_is_recorded_so_and_an_oom_where_the_kernel_says_so(
        tmp_path, monkeypatch):
    """horovodrun itself SIGKILLed (seen for real: its workers die with it): the launcher's
    result names the signal and the launcher exits as a shell says it (137), so the host looks
    for the kernel's OOM evidence. Before: 'horovodrun exited 137', exit 1, always `failed`."""
    import sys
    import time

    from backends.protocol import read_result, write_spec
    from compare.executors import results
    from compare.executors.results import Outcome, collect

    spec = _spec()
    spec_file, result_file, err = tmp_path / "spec.json", tmp_path / "result.json", tmp_path / "err"
    write_spec(str(spec_file), spec)
    started = results.utc_now()
    stand_in = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
                str(spec_file), str(result_file)]
    code = launch._horovodrun(spec, stand_in)
    recorded = read_result(str(result_file))
    assert code == 137
    assert recorded.reason == ("RuntimeError: horovodrun was killed by SIGKILL (exit code 137) before "
                               "rank 0 wrote a result")
    err.write_text("compare: horovodrun ...\n")
    monkeypatch.setattr(results, "KERNEL_LOG", str(tmp_path / "no-kernel-log"))
    result = collect(spec, Outcome(code), result_file, err, started, 600)
    assert (result.status, result.reason) == ("failed", recorded.reason + " (whether by the kernel's "
                                              "OOM killer is not known: the kernel's log is not "
                                              "readable here and no memory cgroup counted an OOM "
                                              "kill while the run ran)")
    line = "Out of memory: Killed process 4242 (python) total-vm:9123456kB"
    boot = time.time() - time.monotonic()
    (tmp_path / "kmsg").write_text("3,7,{},-;{}\n".format(int((time.time() - boot) * 1e6), line))
    monkeypatch.setattr(results, "KERNEL_LOG", str(tmp_path / "kmsg"))
    result = collect(spec, Outcome(code), result_file, err, started, 600)
    assert (result.status, result.reason) == ("oom", "{} (the kernel's OOM killer: {})".format(
        recorded.reason, line))
