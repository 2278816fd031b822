"""Managed environments (compare/envs.py): a build ends with the compare that started it, every
process of it (issue 37, defect 10), and a build that did not finish is built again, never used."""
import os
import signal
import subprocess
import sys

import pytest

from tests.helpers import ROOT, processes_of, wait_for

# a build of the `jax` environment from stand-in requirement files: pip installs nothing, and
# the setup script starts a grandchild that runs until the build is ended (or `finish` exists)
BUILD = """
import sys
from pathlib import Path
from compare import envs, frameworks
envs.REQUIREMENTS = Path(sys.argv[1])
path = envs.ensure(frameworks.get("jax"), "cpu", print)
print("READY", path, flush=True)
"""
SETUP = """echo started > "{out}/started"
(while [ ! -e "{out}/finish" ]; do sleep 0.1; done) &
wait
"""


def _requirements(tmp_path):
    req = tmp_path / "req"
    req.mkdir()
    (req / "jax-cpu.txt").write_text("# nothing to install\n")
    (req / "jax.setup.sh").write_text(SETUP.format(out=tmp_path))
    return req


def _build(tmp_path, req):
    env = dict(os.environ, COMPARE_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-c", BUILD, str(req)], env=env, cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _env_dir(tmp_path):
    envs = tmp_path / "cache" / "envs"
    found = [p for p in envs.iterdir() if p.is_dir()] if envs.is_dir() else []
    return found[0] if found else None


def test_a_killed_build_leaves_no_process_and_is_built_again(tmp_path):
    req = _requirements(tmp_path)
    first = _build(tmp_path, req)
    try:
        assert wait_for(lambda: (tmp_path / "started").exists(), 120), first.communicate()[1]
        path = _env_dir(tmp_path)
        assert processes_of(path)  # the setup script and its grandchild, tagged with the env
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        left = wait_for(lambda: not processes_of(path), 10) or processes_of(path)
        assert left is True, left  # every process of the build ended with it
        assert not (path / ".compare-ready.json").exists()
        (tmp_path / "started").unlink()
        (tmp_path / "finish").write_text("")
        second = _build(tmp_path, req)
        out, err = second.communicate(timeout=180)
        assert second.returncode == 0, err
        assert "creating the jax environment in {}".format(path) in out  # built again, not reused
        assert (tmp_path / "started").exists()
        assert (path / ".compare-ready.json").is_file()
    finally:
        for pid, _ in processes_of(tmp_path / "cache"):
            os.kill(pid, signal.SIGKILL)


def test_two_builds_of_one_environment_build_it_once(tmp_path):
    req = _requirements(tmp_path)
    (tmp_path / "finish").write_text("")
    builds = [_build(tmp_path, req) for _ in range(2)]
    outs = [b.communicate(timeout=300) for b in builds]
    assert [b.returncode for b in builds] == [0, 0], [e for _, e in outs]
    assert sum("creating the jax environment" in out for out, _ in outs) == 1
    assert all("READY {}".format(_env_dir(tmp_path)) in out for out, _ in outs)


def test_a_build_step_that_fails_leaves_no_ready_environment(tmp_path, monkeypatch):
    from compare import envs, frameworks
    req = _requirements(tmp_path)
    (req / "jax.setup.sh").write_text("exit 3\n")
    monkeypatch.setenv("COMPARE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(envs, "REQUIREMENTS", req)
    with pytest.raises(envs.EnvError) as exc:
        envs.ensure(frameworks.get("jax"), "cpu")
    assert str(exc.value).startswith("creating the jax environment failed at `bash ")
    assert "(exit 3)" in str(exc.value)
    assert envs.existing(frameworks.get("jax"), "cpu") is None


def test_a_compare_cache_that_is_a_file_is_flagged_by_doctor_and_refused_by_run(tmp_path, capsys,
                                                                                 monkeypatch):
    # doctor said "made on first run: /etc/passwd/envs/…" unflagged, and `run` went on to fail
    # each cell at its environment
    from tests.helpers import main_exit
    (tmp_path / "file").write_text("not a folder\n")
    monkeypatch.setenv("COMPARE_CACHE", str(tmp_path / "file"))
    code, out, _ = main_exit(["doctor"], capsys)
    problem = ("COMPARE_CACHE {}: is a file, not a folder; give a folder compare may create or "
               "write (or unset it: ~/.cache/compare)".format(tmp_path / "file"))
    assert code == 0 and "\ncache:   {}\n".format(problem) in out
    assert "made on first run" not in out and "jax:     managed env not created yet (cannot be made: " \
        "COMPARE_CACHE is not a folder)\n" in out
    code, out, err = main_exit(["run", "--frameworks", "caffe2", "--device", "cpu", "--executor",
                                "local", "--results", str(tmp_path / "c")], capsys)
    assert (code, out, err) == (2, "", "compare: error: {}\n".format(problem))
    assert not (tmp_path / "c").exists()
    (tmp_path / "d" / "train" / "n0").mkdir(parents=True)  # data prepare builds writers there too
    (tmp_path / "d" / "train" / "n0" / "a.JPEG").write_bytes(b"")
    code, out, err = main_exit(["data", "prepare", str(tmp_path / "d")], capsys)
    assert (code, out, err) == (2, "", "compare: error: {}\n".format(problem))
    monkeypatch.setenv("COMPARE_CACHE", str(tmp_path / "file" / "cache"))  # inside a file
    code, out, err = main_exit(["run", "--frameworks", "caffe2", "--device", "cpu", "--executor",
                                "local", "--results", str(tmp_path / "c"), "--plan"], capsys)
    assert (code, err) == (2, "compare: error: COMPARE_CACHE {}: {} is a file, not a folder; give a "
                              "folder compare may create or write (or unset it: ~/.cache/compare)"
                              "\n".format(tmp_path / "file" / "cache", tmp_path / "file"))


def test_images_build_with_a_cache_that_is_a_file_is_one_line(tmp_path, capsys, monkeypatch):
    # `run`, `--plan` and `data prepare` refused it; `images build` asked the engine, then failed
    # making its build log's folder inside the file
    from compare.executors import docker_images
    from tests.helpers import main_exit
    (tmp_path / "file").write_text("not a folder\n")
    monkeypatch.setenv("COMPARE_CACHE", str(tmp_path / "file"))
    monkeypatch.setattr(docker_images, "engine", lambda: (None, "no Docker engine answers"))
    code, out, err = main_exit(["images", "build", "--frameworks", "caffe2", "--cpu"], capsys)
    assert (code, out, err) == (2, "", "compare: error: COMPARE_CACHE {}: is a file, not a folder; "
                                       "give a folder compare may create or write (or unset it: "
                                       "~/.cache/compare)\n".format(tmp_path / "file"))
