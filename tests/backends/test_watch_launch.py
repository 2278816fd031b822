"""COMPARE_EXIT_GRACE_S under launchers that wait for every worker (torchrun, horovodrun):
backends/launchers/watch.py starts them and ends the workers still running a grace after one
exited, as the processes launcher and srun --wait do. Stand-ins on the CPU: a launcher that, as
torchrun, waits for each of its two workers (RANK set, `python -u -m MODULE SPEC RESULT`), and
workers of which rank 1 exits 0 at once while rank 0 waits, as in a collective its peer never
joins. Before: no grace, the launcher waited for rank 0 until compare's timeout."""
import sys
import time

from backends.launchers import horovod, watch
from backends.launchers.torchrun import Torchrun
from backends.protocol import RunSpec, read_result, write_spec

SPEC = RunSpec("caffe2", "caffe2_torch", gpus=2, device="cpu")
LAUNCHER = ("import os, subprocess, sys\n"
            "procs = [subprocess.Popen([sys.executable, '-u'] + sys.argv[1:], env=dict(os.environ, "
            "RANK=str(r), WORLD_SIZE='2')) for r in range(2)]\n"
            "sys.exit(1 if any([p.wait() for p in procs]) else 0)  # rank 0 first, as it waits\n")
WORKER = ("import os, sys, time\n"
          "if os.environ['RANK'] == '1':\n"
          "    time.sleep(1)  # its checks (a worker seen for less than the watch's poll is not)\n"
          "    sys.exit(0)\n"
          "time.sleep({})\n"
          "sys.exit(3)  # its own end: not ended by the watch\n")


def _stand_ins(tmp_path, monkeypatch, grace, rank0_s=60):
    (tmp_path / "fakerun.py").write_text(LAUNCHER)
    (tmp_path / "fakeworker.py").write_text(WORKER.format(rank0_s))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("COMPARE_EXIT_GRACE_S", grace)
    write_spec(str(tmp_path / "spec.json"), SPEC)
    return [sys.executable, "-m", "fakerun", "-m", "fakeworker", str(tmp_path / "spec.json"),
            str(tmp_path / "result.json")]


def test_torchrun_runs_under_the_watch():
    rank = ["py", "-m", "backends.caffe2_torch", "s.json", "r.json"]
    assert Torchrun().command("py", SPEC, rank) == [
        "py", "-m", "backends.launchers.watch", "py", "-m", "torch.distributed.run", "--standalone",
        "--nproc_per_node", "2", "-m", "backends.caffe2_torch", "s.json", "r.json"]
    assert Torchrun().task_command("py", SPEC, rank) == rank  # under srun: srun's --wait


def test_a_worker_left_waiting_after_another_exited_0_is_ended_after_the_grace(tmp_path, monkeypatch):
    cmd = _stand_ins(tmp_path, monkeypatch, "1")
    started = time.time()
    assert watch.main(cmd) == 1
    assert time.time() - started < 20  # not rank 0's 60 s
    assert read_result(str(tmp_path / "result.json")).reason == (
        "RuntimeError: fakerun exited 1 before rank 0 wrote a result; process 1 ended first (exit "
        "code 0) and this launcher killed process 0, still running 1 s later")


def test_a_grace_of_0_waits_for_every_worker(tmp_path, monkeypatch):
    cmd = _stand_ins(tmp_path, monkeypatch, "0", rank0_s=2)
    assert watch.main(cmd) == 1  # the launcher's own code, rank 0 ended by itself
    assert not (tmp_path / "result.json").exists()  # the host says how it ended, as before


def test_horovodrun_gets_the_grace_too(tmp_path, monkeypatch):
    cmd = _stand_ins(tmp_path, monkeypatch, "1")
    assert horovod._horovodrun(SPEC, cmd, 1.0) == 1
    assert read_result(str(tmp_path / "result.json")).reason == (
        "RuntimeError: horovodrun exited 1 before rank 0 wrote a result; process 1 ended first (exit "
        "code 0) and this launcher killed process 0, still running 1 s later")
