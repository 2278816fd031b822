"""collect(): where one worker fails and the others then fail or are ended because of it, the
recorded reason is the first worker's error, not what the launcher or rank 0 saw afterwards.

The logs below are excerpts of real runs (2026-12-05, CPU, `compare run --quick --gpus 2 --option
fail_at=timed --option fail_rank=1`: rank 1 raises as the timed steps begin, rank 0 goes on into
its next collective) under each launcher. Each failed promptly (18-134 s, the timeout was 300 s).
"""
from backends.protocol import RunResult, RunSpec, write_result
from compare.executors import results
from compare.executors.results import Outcome, collect

TORCH = RunSpec("caffe2", "caffe2_torch", gpus=2, device="cpu", precision="fp32", batch_size=32)
TF = RunSpec("tf", "tf_horovod", gpus=2, device="cpu", precision="fp32", batch_size=32)
JAX = RunSpec("jax", "jax", gpus=2, device="cpu", precision="fp32", batch_size=32)
STARTED = "2026-12-05T07:47:00+00:00"
INJECTED = "InjectedFailure: fail_at=timed on rank 1 (asked for by the spec's options)"
RANK1_TRACEBACK = (
    "Traceback (most recent call last):\n"
    "  File \"/tmp/l6/exp/torchrun/code/backends/harness.py\", line 156, in run\n"
    "    fields.update(measure(trainer, spec) if tta is None else tta.measure(trainer, _inject_failure))\n"
    "                  ^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"/tmp/l6/exp/torchrun/code/backends/harness.py\", line 43, in _inject_failure\n"
    "    raise InjectedFailure(\"fail_at={} on rank {} (asked for by the spec's options)\".format(\n"
    "backends.harness.InjectedFailure: fail_at=timed on rank 1 (asked for by the spec's options)\n")
# torchrun 2.x: it SIGTERMs rank 0 (which writes nothing) and exits 1 after its summary box
TORCHRUN_LOG = RANK1_TRACEBACK + (
    "W1205 07:47:31.122000 18286 torch/distributed/elastic/multiprocessing/api.py:1028] Sending "
    "process 18369 closing signal SIGTERM\n"
    "E1205 07:47:31.240000 18286 torch/distributed/elastic/multiprocessing/api.py:1002] failed "
    "(exitcode: 1) local_rank: 1 (pid: 18370) of binary: /root/.cache/compare/envs/caffe2_torch-cpu-"
    "877bacad1455/bin/python\n"
    "Traceback (most recent call last):\n"
    "  File \"<frozen runpy>\", line 198, in _run_module_as_main\n"
    "  File \"/root/.cache/compare/envs/caffe2_torch-cpu-877bacad1455/lib/python3.11/site-packages/"
    "torch/distributed/launcher/api.py\", line 383, in launch_agent\n"
    "    raise ChildFailedError(\n"
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    "============================================================\n"
    "backends.caffe2_torch FAILED\n"
    "------------------------------------------------------------\n"
    "Failures:\n"
    "[1]:\n"
    "  time      : 2026-12-05_07:47:31\n"
    "  host      : localhost\n"
    "  rank      : 0 (local_rank: 0)\n"
    "  exitcode  : -15 (pid: 18369)  (SIGTERM)\n"
    "  error_file: <N/A>\n"
    "  traceback : Signal 15 (SIGTERM) received by PID 18369\n"
    "------------------------------------------------------------\n"
    "Root Cause (first observed failure):\n"
    "[0]:\n"
    "  time      : 2026-12-05_07:47:31\n"
    "  host      : localhost\n"
    "  rank      : 1 (local_rank: 1)\n"
    "  exitcode  : 1 (pid: 18370) \n"
    "  error_file: <N/A>\n"
    "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
    "============================================================\n")
# horovodrun 0.28.1 with gloo: it ends rank 0 ("Terminated"); compare's horovod launcher then
# records a failed result of its own
HOROVODRUN_LOG = "".join("[1]<stderr>:" + line + "\n" for line in RANK1_TRACEBACK.splitlines()) + (
    "[0]<stderr>:2026-12-05 07:48:27.695538: W tensorflow/core/framework/op_kernel.cc:1839] "
    "OP_REQUIRES failed at mpi_ops.cc:515 : UNKNOWN: Horovod has been shut down. This was caused by "
    "an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor "
    "after one of the ranks finished execution.\n"
    "[0]<stderr>:Terminated\n"
    "Traceback (most recent call last):\n"
    "  File \"/root/.cache/compare/envs/tf_horovod-cpu-58f6d2f1bc57/lib/python3.11/site-packages/"
    "horovod/runner/gloo_run.py\", line 284, in launch_gloo\n"
    "    raise RuntimeError('Horovod detected that one or more processes exited with non-zero '\n"
    "RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus "
    "causing the job to be terminated. The first process to do so was:\n"
    "Process name: 1\n"
    "Exit code: 1\n"
    "\n"
    "Traceback (most recent call last):\n"
    "  File \"/tmp/l6/exp/hvd/code/backends/launchers/launcher.py\", line 57, in setup\n"
    "    raise error\n"
    "RuntimeError: horovodrun exited 1 before rank 0 wrote a result\n")
# compare's processes launcher (JAX, processes=2): rank 0 fails in its all-reduce and records that
JAX_RANK0 = ("JaxRuntimeError: INTERNAL: Error dispatching computation: Gloo all-reduce failed: "
             "[external/gloo/gloo/transport/tcp/pair.cc:547] Connection closed by peer [127.0.0.1]:48337")
PROCESSES_LOG = RANK1_TRACEBACK + (
    "harness: the trainer's close() had not returned after 15 s; the process exits without it\n"
    "Traceback (most recent call last):\n"
    "  File \"/tmp/l6/exp/procs/code/backends/jax/train.py\", line 118, in sync\n"
    "    jax.block_until_ready(self._losses)\n"
    "jax.errors.JaxRuntimeError: INTERNAL: Error dispatching computation: Gloo all-reduce failed: "
    "[external/gloo/gloo/transport/tcp/pair.cc:547] Connection closed by peer [127.0.0.1]:48337\n")
# srun --kill-on-bad-exit=1 (Slurm 22.05.8; each rank a task): it ends rank 0 with SIGTERM and
# exits 143, the job script with it
SRUN_LOG = RANK1_TRACEBACK + (
    "srun: error: nodeA: task 1: Exited with exit code 1\n"
    "srun: launch/slurm: _step_signal: Terminating StepId=500.0\n"
    "slurmstepd-nodeA: error: *** STEP 500.0 ON nodeA CANCELLED AT 2026-12-05T07:50:58 ***\n"
    "srun: error: nodeA: task 0: Terminated\n"
    "srun: Force Terminated StepId=500.0\n")

# srun --wait=2 (Slurm 22.05.8, 4 tasks on 2 nodes): task 1 exited 0, the others slept on, and srun
# killed them 2 s later (exit code 137); a task that ends so wrote no traceback
SRUN_WAIT_LOG = (
    "srun: First task exited 2s ago\n"
    "srun: StepId=583.0 tasks 0,2-3: running\n"
    "srun: StepId=583.0 task 1: exited\n"
    "srun: launch/slurm: _step_signal: Terminating StepId=583.0\n"
    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
    "slurmstepd-nodeA: error: *** STEP 583.0 ON nodeA CANCELLED AT 2026-12-05T11:32:27 ***\n"
    "srun: error: nodeA: task 0: Killed\n"
    "srun: launch/slurm: _step_signal: Terminating StepId=583.0\n"
    "srun: error: nodeB: tasks 2-3: Killed\n")


def _collect(tmp_path, spec, log, code, recorded=None):
    err, result_file = tmp_path / "stderr.log", tmp_path / "result.json"
    err.write_text(log)
    if recorded:
        write_result(str(result_file), RunResult(run_id=spec.run_id, status="failed",
                                                 spec=spec.to_dict(), nonce=spec.nonce, reason=recorded))
    result = collect(spec, Outcome(code), result_file, err, STARTED, 300)
    return result.status, result.reason


def test_under_torchrun_the_reason_is_the_failed_workers_error_not_torchruns_box(tmp_path):
    # before: "exited with code 1 and wrote no result: ======…"
    assert _collect(tmp_path, TORCH, TORCHRUN_LOG, 1) == (
        "failed", "exited with code 1 and wrote no result: " + INJECTED)


def test_under_horovodrun_the_reason_is_the_failed_workers_error(tmp_path):
    # before: "RuntimeError: horovodrun exited 1 before rank 0 wrote a result", no word of rank 1
    recorded = "RuntimeError: horovodrun exited 1 before rank 0 wrote a result"
    assert _collect(tmp_path, TF, HOROVODRUN_LOG, 1, recorded) == (
        "failed", "rank 1: {} (the first error in the run's log; the result recorded: {})".format(
            INJECTED, recorded))


def test_under_the_processes_launcher_rank_0s_lost_peer_comes_after_the_first_error(tmp_path):
    # before: rank 0's "Connection closed by peer" alone
    assert _collect(tmp_path, JAX, PROCESSES_LOG, 1, JAX_RANK0) == (
        "failed", "{} (the first error in the run's log; the result recorded: {})".format(
            INJECTED, JAX_RANK0))


def test_under_srun_a_failed_task_is_not_reported_as_a_sigterm(tmp_path):
    # before: "killed by SIGTERM (exit code 143) and wrote no result: srun: Force Terminated …"
    assert _collect(tmp_path, TORCH, SRUN_LOG, 143) == (
        "failed", "exited with code 143 (srun: error: nodeA: task 1: Exited with exit code 1; srun "
                  "then ended the other tasks) and wrote no result: " + INJECTED)


def test_under_srun_tasks_killed_after_one_exited_0_are_not_a_killed_worker(tmp_path):
    # before: "a worker was killed: srun: error: nodeA: task 0: Killed (whether by the kernel's OOM
    # killer is not known: …)", as if memory might have run out
    assert _collect(tmp_path, TORCH, SRUN_WAIT_LOG, 137) == (
        "failed", "exited with code 137 and wrote no result; process 1 ended first (exit code 0) and "
                  "srun killed processes 0, 2, 3, still running 2 s later")


def test_rank_0s_own_error_stays_the_reason():
    log = RANK1_TRACEBACK.replace("rank 1", "rank 0")
    assert results.first_error(log) == INJECTED.replace("rank 1", "rank 0")


def test_of_a_chain_of_exceptions_the_last_is_the_error_and_launchers_own_are_skipped():
    chained = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nKeyError: 'a'\n\n"
               "During handling of the above exception, another exception occurred:\n\n"
               "Traceback (most recent call last):\n  File \"x.py\", line 2, in f\n"
               "ValueError: no a\n")
    assert results.first_error(chained) == "ValueError: no a"
    assert results.first_error(TORCHRUN_LOG.replace(RANK1_TRACEBACK, "")) is None
    assert results.first_error("ValueError: not after a traceback\n") is None
    # horovodrun --mpi: Open MPI tags each line with its job and rank
    tagged = "".join("[1,1]<stderr>:" + line + "\n" for line in RANK1_TRACEBACK.splitlines())
    assert results.first_error(tagged) == "rank 1: " + INJECTED


def test_under_srun_a_task_other_than_0_found_unsupported_is_the_cells_reason(tmp_path, monkeypatch,
                                                                               capsys):
    """Task 1's own check ended it `unsupported` (exit code 0), srun killed the others after the
    grace: before, 'exited with code 137 and wrote no result; process 1 ended first …' alone."""
    from backends import harness
    from backends.protocol import Unsupported

    def setup(spec):
        raise Unsupported("multi-line reason\nits second line")
    for name, value in (("SLURM_NTASKS", "4"), ("SLURM_PROCID", "1"), ("SLURM_LOCALID", "1")):
        monkeypatch.setenv(name, value)
    harness.run(TORCH, str(tmp_path / "unwritten.json"), setup)  # task 1's harness
    assert not (tmp_path / "unwritten.json").exists()  # rank 0 alone writes the result
    assert _collect(tmp_path, TORCH, capsys.readouterr().err + SRUN_WAIT_LOG, 137) == (
        "unsupported", "rank 1: multi-line reason\nits second line (the run recorded otherwise: "
                       "exited with code 137 and wrote no result; process 1 ended first (exit code "
                       "0) and srun killed processes 0, 2, 3, still running 2 s later)")


# a rank other than 0 found the run unsupported and exited 0; rank 0 waited in a collective for it
# until compare's timeout (a launcher that waits for every worker: torchrun, horovodrun, or
# COMPARE_EXIT_GRACE_S=0), or Slurm's time limit, ended the run
BF16 = "bf16 needs compute capability 8.0 (gpu 1: 7.0)"


def _timed_out(tmp_path, outcome, log):
    from backends.contract.rules import unsupported_line
    err = tmp_path / "stderr.log"
    err.write_text("starting\n" + unsupported_line(1, BF16) + log)
    result = collect(TORCH, outcome, tmp_path / "result.json", err, STARTED, 300)
    return result.status, result.reason


def test_a_run_timed_out_after_a_rank_found_it_unsupported_is_unsupported_with_its_reason(tmp_path):
    """Before, `timeout`, 'killed after the 300 s timeout' alone: the rank's reason was in the log
    only, and --resume ran the cell again, to the same end."""
    assert _timed_out(tmp_path, Outcome(timed_out=True), "") == (
        "unsupported", "rank 1: {} (the run recorded otherwise: killed after the 300 s "
                       "timeout)".format(BF16))


def test_a_slurm_job_stopped_at_its_time_limit_after_a_rank_found_it_unsupported_is_unsupported(tmp_path):
    ended = ("timeout", "Slurm stopped job 42 at its time limit (00:05:00)")
    assert _timed_out(tmp_path, Outcome(exit_code=None, ended=ended, kernel_here=False), "") == (
        "unsupported", "rank 1: {} (the run recorded otherwise: Slurm stopped job 42 at its time "
                       "limit (00:05:00))".format(BF16))


def test_a_timeout_after_a_worker_ran_out_of_memory_stays_an_oom_as_a_failed_run_does(tmp_path):
    oom = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert _timed_out(tmp_path, Outcome(timed_out=True), oom)[0] == "oom"


def test_a_slurm_job_that_ended_cancelled_or_out_of_memory_after_a_rank_found_it_unsupported_is_unsupported(
        tmp_path, monkeypatch):
    """Slurm's end state (scontrol show job, as recorded) had the last word: `failed` 'cancelled:
    Slurm job 42 was cancelled', `oom` '… ran out of memory (OUT_OF_MEMORY)', and --resume ran the
    cell again, to the same end. The rank's reason comes first; the job's end stays in the reason."""
    from compare.executors import slurm_jobs, slurm_tools
    for state, reason in (("CANCELLED", "cancelled: Slurm job 42 was cancelled"),
                          ("OUT_OF_MEMORY", "Slurm job 42 ran out of memory (OUT_OF_MEMORY)")):
        monkeypatch.setattr(slurm_tools, "job_info", lambda job_id, s=state: {
            "JobName": "compare-" + TORCH.run_id, "JobState": s, "ExitCode": "0:15"})
        outcome = slurm_jobs.Job("42", TORCH.run_id, tmp_path).wait(600)
        assert _timed_out(tmp_path, outcome, "srun: error: nodeA: task 0: Terminated\n") == ("unsupported", "rank 1: {} (the run recorded otherwise: {})".format(
            BF16, reason))
