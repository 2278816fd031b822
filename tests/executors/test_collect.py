"""collect(): a finished process becomes a result; out-of-memory is read from every rank's stderr.

Only rank 0 writes the result file, so a worker that ran out of memory shows only in the run's
stderr (horovodrun and torchrun merge every rank's output there). The texts below are the forms
TensorFlow, Horovod, PyTorch and MXNet print.
"""
import datetime
import os
import subprocess
import sys
import time
from pathlib import Path

from backends.protocol import RunResult, RunSpec, write_result
from compare.executors import results
from compare.executors.results import Outcome, collect, oom_line

ROOT = Path(__file__).resolve().parents[2]
SPEC = RunSpec("tf", "tf_horovod", gpus=2, device="cuda", precision="fp16", batch_size=512)
HOROVOD_RANK1_OOM = (
    "[1]<stderr>:2026-11-30 05:40:01.1: W tensorflow/core/common_runtime/bfc_allocator.cc:485] "
    "Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.53GiB (rounded to 1644167168)\n"
    "[1]<stderr>:tensorflow.python.framework.errors_impl.ResourceExhaustedError: {{function_node "
    "__wrapped__Conv2D_device_/job:localhost/replica:0/task:0/device:GPU:0}} OOM when allocating "
    "tensor with shape[512,64,112,112] and type half on /job:localhost/replica:0/task:0/device:GPU:0\n")
RANK0_FAILED = "HorovodInternalError: ncclCommInitRank failed: a peer process exited"
TF_DST_TENSOR = (
    "tensorflow.python.framework.errors_impl.InternalError: Failed copying input tensor from "
    "/job:localhost/replica:0/task:0/device:CPU:0 to /job:localhost/replica:0/task:0/device:GPU:0 "
    "in order to run _EagerConst: Dst tensor is not initialized.\n")
BFC_RETRY_WARNING = (
    "W tensorflow/tsl/framework/bfc_allocator.cc:296] Allocator (GPU_0_bfc) ran out of memory "
    "trying to allocate 2.13GiB with freed_by_count=0. The caller indicates that this is not a "
    "failure, but this may mean that there could be performance gains if more memory were "
    "available.\n")
NOISE = "I tensorflow/core/common_runtime/gpu/gpu_device.cc:1929] Created device /GPU:0\n" * 200


def _collect(tmp_path, stderr, status=None, reason=None, returncode=1, timed_out=False):
    """Write rank 0's result (if `status`) and the run's stderr; return collect()'s result."""
    result_file, err = tmp_path / "result.json", tmp_path / "stderr.log"
    err.write_text(stderr)
    if status is not None:
        write_result(str(result_file), RunResult(run_id=SPEC.run_id, status=status,
                                                 spec=SPEC.to_dict(), reason=reason,
                                                 images_per_sec=1000.0 if status == "ok" else None))
    return collect(SPEC, Outcome(returncode, timed_out), result_file, err,
                   "2026-11-30T05:40:00+00:00", 600)


def test_a_non_zero_rank_out_of_memory_makes_rank_0s_failure_an_oom(tmp_path):
    result = _collect(tmp_path, HOROVOD_RANK1_OOM + NOISE, "failed", RANK0_FAILED)
    assert result.status == "oom"
    assert "OOM when allocating tensor with shape[512,64,112,112]" in result.reason
    assert result.reason.startswith("a worker ran out of memory: [1]<stderr>:tensorflow")
    assert result.reason.endswith("(rank 0 recorded: {})".format(RANK0_FAILED))


def test_tensorflows_dst_tensor_form_is_an_oom(tmp_path):
    result = _collect(tmp_path, TF_DST_TENSOR, "failed", "InternalError: Failed copying input "
                      "tensor ... Dst tensor is not initialized.")
    assert result.status == "oom"
    assert "Dst tensor is not initialized" in result.reason


def test_the_allocators_retry_warning_alone_is_not_an_oom(tmp_path):
    result = _collect(tmp_path, BFC_RETRY_WARNING + "ValueError: bad shape\n", "failed",
                      "ValueError: bad shape")
    assert result.status == "failed"
    assert result.reason == "ValueError: bad shape"


def test_an_ok_result_stays_ok_whatever_stderr_says(tmp_path):
    assert _collect(tmp_path, HOROVOD_RANK1_OOM, "ok", returncode=0).status == "ok"


def test_an_oom_far_above_the_last_lines_still_counts_when_no_result_was_written(tmp_path):
    # a rank dies of OOM, the others print pages of shutdown logs before exiting
    result = _collect(tmp_path, HOROVOD_RANK1_OOM + NOISE * 3)
    assert result.status == "oom"
    assert result.reason.startswith("exited with code 1 and wrote no result")


def test_a_timeout_after_a_worker_ran_out_of_memory_is_an_oom(tmp_path):
    # the other ranks wait in the all-reduce for the dead one until the timeout kills them
    result = _collect(tmp_path, HOROVOD_RANK1_OOM + NOISE, returncode=None, timed_out=True)
    assert result.status == "oom"
    assert result.reason.startswith("killed after the 600 s timeout; a worker ran out of memory "
                                    "first: [1]<stderr>:tensorflow")
    plain = _collect(tmp_path, NOISE, returncode=None, timed_out=True)
    assert (plain.status, plain.reason) == ("timeout", "killed after the 600 s timeout")


def test_every_frameworks_form_is_recognised():
    forms = [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 139 GiB)",
        "mxnet.base.MXNetError: Check failed: e == cudaSuccess (2 vs. 0) : cudaMalloc retry "
        "failed: out of memory",
        "[0]<stderr>:E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:1013] failed to "
        "alloc 4294967296 bytes on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
        "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
        "MemoryError: Unable to allocate 3.00 GiB for an array",
        TF_DST_TENSOR.strip(),
    ]
    assert [oom_line("I starting\n" + form + "\nI done") for form in forms] == forms
    assert oom_line(BFC_RETRY_WARNING + NOISE) is None


def test_a_worker_killed_by_a_signal_is_failed_with_the_signal(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "KERNEL_LOG", str(tmp_path / "no-kernel-log"))
    for code in (-9, 137):  # Popen's form, and a shell's or a container's
        result = _collect(tmp_path, "", returncode=code)
        assert (result.status, result.reason) == (
            "failed", "killed by SIGKILL (exit code {}) and wrote no result (whether by the kernel's OOM "
                      "killer is not known: the kernel's log is not readable here and no memory cgroup "
                      "counted an OOM kill while the run ran)".format(code))
    term = _collect(tmp_path, "Traceback ...\nKeyboardInterrupt\n", returncode=-15)
    assert (term.status, term.reason) == ("failed", "killed by SIGTERM (exit code -15) and wrote no "
                                                    "result: KeyboardInterrupt")


def _iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat()


def test_a_kill_is_an_oom_where_the_kernel_log_says_so(tmp_path, monkeypatch):
    boot = time.time() - time.monotonic()
    started = time.time() - 5
    log = tmp_path / "kmsg"
    line = "Out of memory: Killed process 4242 (python) total-vm:91234567kB, anon-rss:81234567kB"
    log.write_text("6,100,{},-;Started session 3\n3,101,{},-;{}\n".format(
        int((started - 60 - boot) * 1e6), int((started + 2 - boot) * 1e6), line))
    monkeypatch.setattr(results, "KERNEL_LOG", str(log))
    spec_file, err = tmp_path / "none.json", tmp_path / "stderr.log"
    err.write_text("")
    result = collect(SPEC, Outcome(-9), spec_file, err, _iso(started), 600)
    assert (result.status, result.reason) == (
        "oom", "killed by SIGKILL (exit code -9) and wrote no result (the kernel's OOM killer: "
               "{})".format(line))
    # the same line logged before the cell started is not this cell's
    assert collect(SPEC, Outcome(-9), spec_file, err, _iso(started + 30), 600).status == "failed"


def test_a_container_killed_for_memory_is_an_oom_unless_its_run_ended_well(tmp_path):
    err, result_file = tmp_path / "stderr.log", tmp_path / "result.json"
    err.write_text("Killed\n")
    killed = Outcome(137, oom_killed="the container was killed by the out-of-memory killer (exit 137)")
    result = collect(SPEC, killed, result_file, err, "2026-11-30T05:40:00+00:00", 600)
    assert (result.status, result.reason) == ("oom", killed.oom_killed)
    write_result(str(result_file), RunResult(run_id=SPEC.run_id, status="ok", spec=SPEC.to_dict(),
                                             images_per_sec=1000.0))
    assert collect(SPEC, killed, result_file, err, "2026-11-30T05:40:00+00:00", 600).status == "ok"


# what torchrun prints when one of its workers is killed (here by the kernel's OOM killer, which
# prints nothing into the run's log): torchrun itself then exits 1, not with the signal
TORCHRUN_RANK1_KILLED = (
    "W1130 05:40:09.1 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 4241 "
    "closing signal SIGTERM\n"
    "E1130 05:40:09.2 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
    "local_rank: 1 (pid: 4242) of binary: /usr/bin/python\n"
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    "============================================================\n"
    "backends.caffe2_torch FAILED\n"
    "------------------------------------------------------------\n"
    "Root Cause (first observed failure):\n"
    "[0]:\n"
    "  time      : 2026-11-30_05:40:09\n"
    "  host      : gpu-node\n"
    "  rank      : 1 (local_rank: 1)\n"
    "  exitcode  : -9 (pid: 4242)\n"
    "  error_file: <N/A>\n"
    "  traceback : Signal 9 (SIGKILL) received by PID 4242\n"
    "============================================================\n")
KERNEL_KILLED_4242 = "Out of memory: Killed process 4242 (python) total-vm:91234567kB, anon-rss:812345kB"
TORCH_SPEC = RunSpec("torch", "caffe2_torch", gpus=2, device="cuda", precision="fp32", batch_size=256)


def _kernel_log(tmp_path, monkeypatch, started, *lines):
    boot = time.time() - time.monotonic()
    log = tmp_path / "kmsg"
    log.write_text("".join("3,{},{},-;{}\n".format(101 + i, int((started + 2 - boot) * 1e6), line)
                           for i, line in enumerate(lines)))
    monkeypatch.setattr(results, "KERNEL_LOG", str(log))


def test_a_worker_of_a_launcher_killed_by_the_oom_killer_is_an_oom(tmp_path, monkeypatch):
    started = time.time() - 5
    _kernel_log(tmp_path, monkeypatch, started, KERNEL_KILLED_4242)
    err = tmp_path / "stderr.log"
    err.write_text(TORCHRUN_RANK1_KILLED)
    result = collect(TORCH_SPEC, Outcome(1), tmp_path / "none.json", err, _iso(started), 600)
    assert (result.status, result.reason) == (
        "oom", "exited with code 1 and wrote no result: a worker was killed: Signal 9 (SIGKILL) "
               "received by PID 4242 (the kernel's OOM killer: {})".format(KERNEL_KILLED_4242))
    # rank 0 saw its peer vanish and wrote a failure of its own first: still an oom
    result_file = tmp_path / "result.json"
    write_result(str(result_file), RunResult(run_id=TORCH_SPEC.run_id, status="failed",
                                             spec=TORCH_SPEC.to_dict(), nonce=TORCH_SPEC.nonce,
                                             reason="RuntimeError: Connection closed by peer"))
    result = collect(TORCH_SPEC, Outcome(1), result_file, err, _iso(started), 600)
    assert (result.status, result.reason) == (
        "oom", "a worker was killed: Signal 9 (SIGKILL) received by PID 4242 (the kernel's OOM "
               "killer: {}) (rank 0 recorded: RuntimeError: Connection closed by peer)".format(
                   KERNEL_KILLED_4242))


def test_a_killed_worker_without_memory_evidence_stays_failed_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "KERNEL_LOG", str(tmp_path / "no-kernel-log"))
    err = tmp_path / "stderr.log"
    err.write_text(TORCHRUN_RANK1_KILLED)
    result = collect(TORCH_SPEC, Outcome(1), tmp_path / "none.json", err, _iso(time.time()), 600)
    assert (result.status, result.reason) == (
        "failed", "exited with code 1 and wrote no result: a worker was killed: Signal 9 (SIGKILL) "
                  "received by PID 4242 (whether by the kernel's OOM killer is not known: the "
                  "kernel's log is not readable here and no memory cgroup counted an OOM kill "
                  "while the run ran)")


def test_an_oom_kill_the_runs_memory_cgroup_counted_makes_a_killed_worker_an_oom(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "KERNEL_LOG", str(tmp_path / "no-kernel-log"))
    err = tmp_path / "stderr.log"
    err.write_text(TORCHRUN_RANK1_KILLED)
    result = collect(TORCH_SPEC, Outcome(1, cgroup_oom_kills=1), tmp_path / "none.json", err,
                     _iso(time.time()), 600)
    assert (result.status, result.reason) == (
        "oom", "exited with code 1 and wrote no result: a worker was killed: Signal 9 (SIGKILL) "
               "received by PID 4242 (the kernel's OOM killer: its memory cgroup counted 1 OOM "
               "kill while the run ran)")


def test_the_memory_cgroups_oom_kills_are_read_from_either_cgroup_version(tmp_path):
    v2, v1 = tmp_path / "v2", tmp_path / "v1"
    (v2 / "user.slice" / "run").mkdir(parents=True)
    (v2 / "user.slice" / "run" / "memory.events").write_text(
        "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 0\n")
    (v1 / "memory").mkdir(parents=True)  # a cgroup namespace: its root is this process's cgroup
    (v1 / "memory" / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/user.slice/run\n")
    assert results.cgroup_oom_kills(str(proc), str(v2)) == 2
    proc.write_text("4:memory:/process_api/7a3a\n0::/\n")
    assert results.cgroup_oom_kills(str(proc), str(v1)) == 3
    assert results.cgroup_oom_kills(str(tmp_path / "no-such"), str(v1)) is None


# Captured from real runs (2026-12-05), one worker of two SIGKILLed mid-training, excerpts of the
# run's stderr log. horovodrun 0.28.1 with gloo (`compare run --frameworks tf --gpus 2 --quick`
# on a CPU): rank 0 fails in its allreduce and writes a failed result; horovodrun's summary names
# the worker that failed first, with the exit code of the shell it ran in (128 + 9)
HOROVOD_GLOO_RANK1_KILLED = (
    "[0]<stderr>:[2026-12-05 07:43:10.805628: E /tmp/pip-wheel-_ddsy19o/horovod_179bfd8b7bcf4e26ad21c"
    "c9d179dba9e/horovod/common/operations.cc:697] [0]: Horovod background loop uncaught exception: "
    "[/tmp/pip-wheel-_ddsy19o/horovod_179bfd8b7bcf4e26ad21cc9d179dba9e/third_party/compatible17_glo"
    "o/gloo/transport/tcp/pair.cc:589] Read error [127.0.0.1]:38319: Connection reset by peer\n"
    "[0]<stderr>:  File \"<string>\", line 111, in horovod_allreduce\n"
    "[0]<stderr>:\n"
    "[0]<stderr>:[/tmp/pip-wheel-_ddsy19o/horovod_179bfd8b7bcf4e26ad21cc9d179dba9e/third_party/compa"
    "tible17_gloo/gloo/transport/tcp/pair.cc:589] Read error [127.0.0.1]:38319: Connection reset by "
    "peer\n"
    "[1]<stderr>:Killed\n"
    "Traceback (most recent call last):\n"
    "  File \"/root/.cache/compare/envs/tf_horovod-cpu-58f6d2f1bc57/lib/python3.11/site-packages/horo"
    "vod/runner/gloo_run.py\", line 284, in launch_gloo\n"
    "    raise RuntimeError('Horovod detected that one or more processes exited with non-zero '\n"
    "RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus "
    "causing the job to be terminated. The first process to do so was:\n"
    "Process name: 1\n"
    "Exit code: 137\n")
# srun (Slurm 22.05.8, `compare run --executor slurm --frameworks caffe2 --gpus 2 --quick`, each
# rank an srun task): rank 0 fails on the closed connection, srun names the task killed
SRUN_TASK1_KILLED = (
    "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
    "closed by peer [127.0.0.1]:26309. This is typically caused by a remote worker crashing. Check the "
    "logs of the remote worker before reporting an error. GLHF! \N{BEACH WITH UMBRELLA}\ufe0f\n"
    "srun: error: nodeA: task 1: Killed\n"
    "srun: launch/slurm: _step_signal: Terminating StepId=496.0\n"
    "slurmstepd-nodeA: error: *** STEP 496.0 ON nodeA CANCELLED AT 2026-12-05T07:45:47 ***\n"
    "srun: error: nodeA: task 0: Exited with exit code 1\n"
    "srun: Force Terminated StepId=496.0\n")
HOROVOD_RANK0_RECORDED = ("UnknownError: [/tmp/pip-wheel-_ddsy19o/horovod/third_party/compatible17_gloo/"
                          "gloo/transport/tcp/pair.cc:589] Read error [127.0.0.1]:38319: Connection "
                          "reset by peer")


def test_horovodruns_gloo_report_of_a_killed_worker_is_recognised(tmp_path, monkeypatch):
    started = time.time() - 5
    _kernel_log(tmp_path, monkeypatch, started,
                "Out of memory: Killed process 13162 (python) total-vm:9123456kB, anon-rss:8123456kB")
    err, result_file = tmp_path / "stderr.log", tmp_path / "result.json"
    err.write_text(HOROVOD_GLOO_RANK1_KILLED)
    write_result(str(result_file), RunResult(run_id=SPEC.run_id, status="failed", spec=SPEC.to_dict(),
                                             nonce=SPEC.nonce, reason=HOROVOD_RANK0_RECORDED))
    result = collect(SPEC, Outcome(1), result_file, err, _iso(started), 600)
    assert (result.status, result.reason) == (
        "oom", "a worker was killed: horovodrun: Process name: 1 Exit code: 137 (the kernel's OOM "
               "killer: Out of memory: Killed process 13162 (python) total-vm:9123456kB, "
               "anon-rss:8123456kB) (rank 0 recorded: {})".format(HOROVOD_RANK0_RECORDED))
    # no evidence of memory: failed, and the reason names the killed worker beside rank 0's error
    monkeypatch.setattr(results, "KERNEL_LOG", str(tmp_path / "no-kernel-log"))
    result = collect(SPEC, Outcome(1), result_file, err, _iso(started), 600)
    assert result.status == "failed"
    assert result.reason.startswith("a worker was killed: horovodrun: Process name: 1 Exit code: "
                                    "137 (whether by the kernel's OOM")
    assert result.reason.endswith("(rank 0 recorded: {})".format(HOROVOD_RANK0_RECORDED))
    # the summary may name another worker that failed first: the shell's "Killed" still counts
    err.write_text(HOROVOD_GLOO_RANK1_KILLED.replace("Process name: 1\nExit code: 137",
                                                     "Process name: 0\nExit code: 1"))
    assert results.killed_worker(err.read_text()) == "horovodrun: [1]<stderr>:Killed"


def test_sruns_report_of_a_killed_task_is_recognised(tmp_path, monkeypatch):
    started = time.time() - 5
    _kernel_log(tmp_path, monkeypatch, started, KERNEL_KILLED_4242)
    err, result_file = tmp_path / "stderr.log", tmp_path / "result.json"
    err.write_text(SRUN_TASK1_KILLED)
    recorded = "RuntimeError: Connection closed by peer [127.0.0.1]:26309"
    write_result(str(result_file), RunResult(run_id=TORCH_SPEC.run_id, status="failed",
                                             spec=TORCH_SPEC.to_dict(), nonce=TORCH_SPEC.nonce,
                                             reason=recorded))
    result = collect(TORCH_SPEC, Outcome(137), result_file, err, _iso(started), 600)
    assert (result.status, result.reason) == (
        "oom", "a worker was killed: srun: error: nodeA: task 1: Killed (the kernel's OOM killer: "
               "{}) (rank 0 recorded: {})".format(KERNEL_KILLED_4242, recorded))
    assert results.killed_worker("srun: error: nodeB: tasks 0-1: Killed\n") == \
        "srun: error: nodeB: tasks 0-1: Killed"


HUGE_LOG_CHECK = """
import resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from compare.executors.results import Outcome, collect
from tests.executors.test_collect import SPEC
err, none = Path(sys.argv[1]), Path(sys.argv[2])
result = collect(SPEC, Outcome(1), none, err, "2026-11-30T05:40:00+00:00", 600)
print(result.status, "|", result.reason)
"""


def test_a_run_that_logged_gigabytes_is_collected_from_its_logs_end(tmp_path):
    """A worker that logged 64 GiB (a sparse file here) is collected from the log's last bytes:
    reading all of it would take compare's memory (here: a 2 GiB address space) with it."""
    err = tmp_path / "stderr.log"
    with open(str(err), "wb") as f:
        f.truncate(64 << 30)
        f.seek(64 << 30)
        f.write(b"\nRuntimeError: the last words\n")
    proc = subprocess.run([sys.executable, "-c", HUGE_LOG_CHECK, str(err), str(tmp_path / "none.json")],
                          capture_output=True, text=True, timeout=120, cwd=str(ROOT),
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "failed | exited with code 1 and wrote no result: RuntimeError: the last words"


def test_a_log_that_is_not_utf8_is_read_with_its_bad_bytes_replaced(tmp_path):
    err = tmp_path / "stderr.log"
    err.write_bytes("caf\u00e9 ".encode("latin-1") + b"\xff\xfe\n" + "RuntimeError: \u00fcber 🏖️\n".encode())
    result = collect(SPEC, Outcome(1), tmp_path / "none.json", err, "2026-11-30T05:40:00+00:00", 600)
    assert (result.status, result.reason) == ("failed", "exited with code 1 and wrote no result: "
                                                        "RuntimeError: \u00fcber 🏖️")
    assert result.stderr_tail.startswith("caf\ufffd \ufffd\ufffd\n")


def test_a_slurm_jobs_killed_task_is_not_judged_by_the_submitting_hosts_kernel_log(
        tmp_path, monkeypatch):
    """A batch job's tasks run on Slurm's nodes: an OOM kill in this host's kernel log (a login
    node's, where the OOM killer is busy) says nothing about them. Before: `oom`, on that line."""
    from compare.executors import slurm_jobs, slurm_tools

    started = time.time() - 5
    _kernel_log(tmp_path, monkeypatch, started, KERNEL_KILLED_4242)
    monkeypatch.setattr(slurm_tools, "job_info", lambda job_id: {
        "JobName": "compare-" + TORCH_SPEC.run_id, "JobState": "FAILED", "ExitCode": "137:0"})
    outcome = slurm_jobs.Job("496", TORCH_SPEC.run_id, tmp_path).wait(600)
    err = tmp_path / "stderr.log"
    err.write_text(SRUN_TASK1_KILLED)
    result = collect(TORCH_SPEC, outcome, tmp_path / "none.json", err, _iso(started), 600)
    assert (result.status, result.reason) == (
        "failed", "exited with code 137 and wrote no result: a worker was killed: srun: error: nodeA: "
                  "task 1: Killed (whether by the kernel's OOM killer is not known: the run's tasks "
                  "ran on Slurm's nodes, whose kernel logs are not read from here)")
    result_file = tmp_path / "result.json"
    write_result(str(result_file), RunResult(run_id=TORCH_SPEC.run_id, status="failed",
                                             spec=TORCH_SPEC.to_dict(), nonce=TORCH_SPEC.nonce,
                                             reason="RuntimeError: Connection closed by peer"))
    result = collect(TORCH_SPEC, outcome, result_file, err, _iso(started), 600)
    assert (result.status, result.reason) == (
        "failed", "a worker was killed: srun: error: nodeA: task 1: Killed (whether by the kernel's "
                  "OOM killer is not known: the run's tasks ran on Slurm's nodes, whose kernel logs "
                  "are not read from here) (rank 0 recorded: RuntimeError: Connection closed by peer)")


# rank 0's reason as the harness recorded it in the real horovodrun run above: TensorFlow's
# message holds a traceback of its own, cut to its last 2000 characters
HOROVOD_RANK0_TRACEBACK = (
    "UnknownError: /tf_horovod-cpu-58f6d2f1bc57/lib/python3.11/site-packages/horovod/tensorflow/"
    "__init__.py\", line 1076, in gradient\n\n  File \"/root/.cache/compare/envs/tf_horovod-cpu-58f6d2"
    "f1bc57/lib/python3.11/site-packages/horovod/tensorflow/__init__.py\", line 573, in allreduce_grads"
    "\n\nHorovod has been shut down. This was caused by an exception on one of the ranks or an attempt "
    "to allreduce, allgather or broadcast a tensor after one of the ranks finished execution.\n"
    "\t [[{{node DistributedGradientTape_Allreduce/cond/HorovodAllreduce_gradient_tape_resnet50_v1_5_"
    "conv1_Conv2D_Conv2DBackpropFilter_0}}]] [Op:__inference_tape_step_17363]")


def test_a_killed_worker_leads_the_reason_where_reports_show_its_first_line(tmp_path, monkeypatch):
    """Reports show a reason's first line; rank 0's multi-line error came first and the killed
    worker was said at its very end, where no table shows it. Before, the first line was
    'UnknownError: /tf_horovod-cpu-…/__init__.py", line 1076, in gradient'."""
    monkeypatch.setattr(results, "KERNEL_LOG", str(tmp_path / "no-kernel-log"))
    err, result_file = tmp_path / "stderr.log", tmp_path / "result.json"
    err.write_text(HOROVOD_GLOO_RANK1_KILLED)
    write_result(str(result_file), RunResult(run_id=SPEC.run_id, status="failed", spec=SPEC.to_dict(),
                                             nonce=SPEC.nonce, reason=HOROVOD_RANK0_TRACEBACK))
    result = collect(SPEC, Outcome(1), result_file, err, _iso(time.time()), 600)
    assert result.status == "failed"
    assert result.reason.splitlines()[0] == (
        "a worker was killed: horovodrun: Process name: 1 Exit code: 137 (whether by the kernel's "
        "OOM killer is not known: the kernel's log is not readable here and no memory cgroup counted "
        "an OOM kill while the run ran) (rank 0 recorded: UnknownError: /tf_horovod-cpu-58f6d2f1bc57/"
        "lib/python3.11/site-packages/horovod/tensorflow/__init__.py\", line 1076, in gradient")
    assert result.reason.endswith(HOROVOD_RANK0_TRACEBACK + ")")


def test_a_half_written_result_file_is_judged_by_how_the_run_ended(tmp_path):
    """A result file cut short (a node that crashed before its disk had it all) is no result:
    the run is then judged as one that wrote none, by its exit and its log (here a worker's out
    of memory). Before: `failed`, 'unreadable result file: …', the OOM and the exit unsaid."""
    result_file, err = tmp_path / "result.json", tmp_path / "stderr.log"
    write_result(str(result_file), RunResult(run_id=SPEC.run_id, status="ok", spec=SPEC.to_dict(),
                                             nonce=SPEC.nonce, images_per_sec=1000.0))
    whole = result_file.read_bytes()
    result_file.write_bytes(whole[:len(whole) // 2])
    err.write_text(HOROVOD_RANK1_OOM)
    result = collect(SPEC, Outcome(1), result_file, err, "2026-11-30T05:40:00+00:00", 600)
    assert result.status == "oom"
    assert result.reason.startswith("exited with code 1 and wrote no result that could be read "
                                    "(result.json: not valid JSON (")
    err.write_text(NOISE + RANK0_FAILED + "\n")
    result = collect(SPEC, Outcome(-9), result_file, err, "2026-11-30T05:40:00+00:00", 600)
    assert result.status == "failed" and result.reason.startswith("killed by SIGKILL (exit code -9) "
                                                                  "and wrote no result that could be read")
    assert result.reason.endswith(": {} (whether by the kernel's OOM killer is not known: the kernel's log "
                                  "records none since the run started and no memory cgroup counted an "
                                  "OOM kill while the run ran)".format(RANK0_FAILED))
