"""A Slurm job whose task exits 0 while another runs on (per-rank divergence: one rank's own
check ended it `unsupported`, or it finished while its peer waits in a collective that never
completes): srun ends the others after the grace compare's processes launcher gives them, and the
record says so. On the real two-node cluster of scripts/slurm-cluster (tests/executors/test_slurm.py
says how it is started or skipped); the grace is cut to a few seconds through the variable the
job script reads.
"""
import subprocess
import sys
import time

import pytest

from backends.contract import RunSpec, utc_now
from compare.executors import slurm_tools as st
from compare.executors.results import collect
from compare.executors.slurm_jobs import Job
from tests.executors.test_slurm import cluster  # noqa: F401  (the fixture)

GRACE_S = 3
RANK1_EXITS_0 = ("import os, sys, time\n"
                 "if os.environ['SLURM_PROCID'] == '1':\n"
                 "    sys.exit(0)  # its own check ended the run here\n"
                 "time.sleep(300)  # in a collective its peer never joins\n")


def _ended_after(job_id: str, since: float, limit: float) -> float:
    """Seconds from `since` until squeue no longer lists the job; the test fails past `limit`."""
    while time.time() - since < limit:
        if not st.queued([job_id]):
            return time.time() - since
        time.sleep(0.2)
    pytest.fail("task 0 still ran {:.0f} s after task 1 exited 0 (the grace: {} s)".format(
        time.time() - since, GRACE_S))


@pytest.mark.slurm
def test_a_task_that_exits_0_early_does_not_leave_the_others_waiting(cluster, tmp_path,  # noqa: F811
                                                                     monkeypatch):
    """Before, srun ended the other tasks only after one failed (--kill-on-bad-exit): here task 0
    slept on until the job's time limit, and the cell with it."""
    monkeypatch.setenv("COMPARE_EXIT_GRACE_S", str(GRACE_S))  # sbatch hands it to the job script
    spec = RunSpec("caffe2", "caffe2_torch", nodes=2, gpus=1, device="cpu", precision="fp32",
                   batch_size=4)
    work, err = tmp_path / "work", tmp_path / "stderr.log"
    work.mkdir()
    script = st.write_job(work, spec.run_id, 2, 1, [sys.executable, "-c", RANK1_EXITS_0], {}, [])
    started = utc_now()
    job_id = st.submit(["--job-name=compare-" + spec.run_id, "--chdir=" + str(work),
                        "--output=" + str(tmp_path / "stdout.log"), "--error=" + str(err),
                        "--nodes=2", "--ntasks-per-node=1", "--no-requeue", "--time=5"], script)
    try:
        task1, deadline = work / st.TASKS_DIR / "1", time.time() + 120  # queued behind another job
        while not task1.exists() and time.time() < deadline:
            time.sleep(0.1)
        assert task1.exists(), "job {} did not start within 120 s".format(job_id)
        exited = task1.stat().st_mtime  # task 1 ends as it starts
        took = _ended_after(job_id, exited, GRACE_S + 20)
    finally:
        subprocess.run(["scancel", job_id], capture_output=True)
    assert GRACE_S <= took < GRACE_S + 10, took
    result = collect(spec, Job(job_id, spec.run_id, work).wait(60), work / "result.json", err,
                     started, 600)
    assert (result.status, result.reason) == (
        "failed", "exited with code 137 and wrote no result; process 1 ended first (exit code 0) "
                  "and srun killed process 0, still running {} s later".format(GRACE_S))


def test_unless_told_otherwise_srun_gives_the_processes_launchers_grace(tmp_path):
    from backends.launchers import processes
    script = st.write_job(tmp_path, "r", 1, 2, ["true"], {}, []).read_text()
    assert processes.EXIT_GRACE_S == 40
    assert "\nsrun --kill-on-bad-exit=1 --wait=${COMPARE_EXIT_GRACE_S:-40} " in script


def test_a_grace_srun_would_refuse_is_refused_before_the_job_is_submitted(tmp_path, monkeypatch):
    """Before, the job started and its srun refused `--wait=1.5` ('Invalid numeric value'), which
    names no variable; the processes launcher refuses it in the same words (its own tests)."""
    from compare import executors, frameworks
    from compare.executors import slurm
    from compare.store import Campaign
    submitted = []
    monkeypatch.setattr(slurm.st, "has_pyxis", lambda: True)  # an image: no managed environment
    monkeypatch.setattr(slurm.st, "submit", lambda args, script: submitted.append(script) or "42")
    monkeypatch.setenv("COMPARE_IMAGE_CAFFE2", "nvcr.io/nvidia/pytorch:24.03-py3")
    monkeypatch.setenv("COMPARE_EXIT_GRACE_S", "1.5")
    campaign = Campaign.create(tmp_path / "c", {}, {})
    executor = slurm.SlurmExecutor(executors.Context([frameworks.get("caffe2")], "cpu"))
    result = executor.run(RunSpec("caffe2", "caffe2_torch"), campaign, 600)
    assert (result.status, result.reason, submitted) == (
        "failed", "not submitted: COMPARE_EXIT_GRACE_S='1.5' is not a whole number of seconds "
                  "(0: no limit)", [])
