"""The executor registry: names, the `auto` choice with its reason, doctor's list."""
import pytest

from compare import executors, frameworks
from compare.errors import UserError
from compare.executors import docker_images
from tests.helpers import main_exit


def _ctx(**kw):
    return executors.Context([frameworks.get("caffe2")], "cpu", **kw)


def test_an_unknown_executor_names_the_valid_ones():
    with pytest.raises(UserError, match="^unknown executor 'podman'; choose from auto, docker, local, slurm$"):
        executors.load("podman")


def test_auto_takes_local_without_an_engine_and_says_why(monkeypatch):
    monkeypatch.setattr(docker_images, "engine", lambda: (None, "no Docker engine answers (refused)"))
    cls, why = executors.choose("auto", _ctx())
    assert cls.name == "local"
    assert why == ("each backend runs here, in its managed environment (or --python); "
                   "docker not chosen: no Docker engine answers (refused)")


def test_python_overrides_keep_runs_out_of_containers():
    cls, why = executors.choose("auto", _ctx(overrides={"caffe2": "/usr/bin/python3"}))
    assert cls.name == "local"
    assert "docker not chosen: --python names interpreters, which run outside containers" in why


def test_asking_for_an_executor_that_cannot_run_here_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(docker_images, "engine", lambda: (None, "no Docker engine answers (refused)"))
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--device", "cpu", "--executor",
                              "docker"], capsys)
    assert (code, err) == (2, "compare: error: --executor docker: no Docker engine answers (refused)\n")


def test_doctor_lists_every_executor_with_its_state(monkeypatch, capsys):
    from compare.executors import slurm
    monkeypatch.setattr(docker_images, "engine", lambda: (None, "no Docker engine answers (refused)"))
    monkeypatch.setattr(slurm.SlurmExecutor, "available",
                        classmethod(lambda cls, ctx: (False, "no sbatch on PATH")))
    code, out, _ = main_exit(["doctor"], capsys)
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith("executor")]
    assert lines[:len(executors.names())] == [
        "executor docker: not available: no Docker engine answers (refused)",
        "executor local:  available: each backend runs here, in its managed environment (or --python)",
        "executor slurm:  not available: no sbatch on PATH"]
    assert lines[-1].startswith("executor: local (--executor auto: each backend runs here")
