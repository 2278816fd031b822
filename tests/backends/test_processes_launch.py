"""compare's processes launcher (backends/launchers/processes.py, stdlib only) with stand-in
processes: what it records when a process is killed before process 0 writes a result, and how
the host then classifies the run (the kernel's OOM killer kills with SIGKILL and logs nothing
into the run's stderr)."""
import subprocess
import sys
import time

from backends.protocol import RunSpec, read_result, write_spec
from compare.executors import results
from compare.executors.results import Outcome, collect
from tests.helpers import ROOT

# process 1 is killed by SIGKILL, as the OOM killer does; process 0 ends without a result
KILLED = "import os, signal; os.environ['COMPARE_PROCESS_ID'] == '1' and os.kill(os.getpid(), signal.SIGKILL)"


def _launch(tmp_path, spec, rank):
    spec_file, result_file, err = tmp_path / "spec.json", tmp_path / "result.json", tmp_path / "err"
    write_spec(str(spec_file), spec)
    with err.open("w") as stderr:
        code = subprocess.call([sys.executable, "-m", "backends.launchers.processes", sys.executable,
                                "-c", rank, str(spec_file), str(result_file)],
                               cwd=str(ROOT), stderr=stderr)
    return code, result_file, err


def _kernel_killed(pid, tmp_path, monkeypatch) -> str:
    """A kernel log (the collector reads it in place of /dev/kmsg) whose OOM killer killed `pid`
    just now; returns the line."""
    line = "Out of memory: Killed process {} (python) total-vm:9123456kB".format(pid)
    boot = time.time() - time.monotonic()
    (tmp_path / "kmsg").write_text("3,7,{},-;{}\n".format(int((time.time() - boot) * 1e6), line))
    monkeypatch.setattr(results, "KERNEL_LOG", str(tmp_path / "kmsg"))
    return line


def test_a_process_killed_by_sigkill_is_named_and_an_oom_where_the_kernel_says_so(tmp_path, monkeypatch):
    spec = RunSpec("jax", "jax", gpus=2, options={"processes": 2})
    started = results.utc_now()
    code, result_file, err = _launch(tmp_path, spec, KILLED)
    recorded = read_result(str(result_file))
    assert code == 1 and recorded.status == "failed"
    assert recorded.reason.startswith("RuntimeError: the 2 jax processes exited with codes [0, -9] "
                                      "before process 0 wrote a result: process 1 (pid ")
    assert recorded.reason.endswith(") was killed by SIGKILL")
    killed = recorded.reason.split(": ", 2)[2]
    pid = killed.split("pid ")[1].split(")")[0]
    line = _kernel_killed(pid, tmp_path, monkeypatch)
    result = collect(spec, Outcome(code), result_file, err, started, 600)
    assert (result.status, result.reason) == (
        "oom", "a worker was killed: {} (the kernel's OOM killer: {}) (rank 0 recorded: {})".format(
            killed, line, recorded.reason))


def test_processes_the_launcher_killed_itself_are_not_reported_killed(tmp_path, monkeypatch):
    from backends.launchers import processes
    monkeypatch.setattr(processes, "KILL_GRACE_S", 0.5)

    class Proc:
        def __init__(self, code):
            self.code, self.pid = code, 100 + (code or 0)

        def poll(self):
            return self.code

        def kill(self):
            self.code = -9
    ended = processes._wait([Proc(1), Proc(None)])
    assert (ended.codes, ended.killed, ended.first) == ([1, -9], {1}, 0)
    assert processes.killed_by_signal([Proc(1), Proc(-9)], [1, -9], ended.killed) == ""


def test_a_single_process_killed_by_sigkill_ends_the_launcher_as_a_shell_says_so(tmp_path, monkeypatch):
    # sys.exit(-9) would exit 247, which names no signal: the host must see 137 (128 + SIGKILL)
    spec = RunSpec("jax", "jax", gpus=2, options={"processes": 1})
    started = results.utc_now()
    code, result_file, err = _launch(tmp_path, spec, KILLED.replace("'1'", "'0'").replace(
        "os.environ['COMPARE_PROCESS_ID']", "os.environ.get('COMPARE_PROCESS_ID', '0')"))
    assert code == 137 and not result_file.exists()
    monkeypatch.setattr(results, "KERNEL_LOG", str(tmp_path / "no-kernel-log"))
    result = collect(spec, Outcome(code, cgroup_oom_kills=1), result_file, err, started, 600)
    assert (result.status, result.reason) == (
        "oom", "killed by SIGKILL (exit code 137) and wrote no result (the kernel's OOM killer: its "
               "memory cgroup counted 1 OOM kill while the run ran)")


# process 1 is killed by SIGKILL; process 0 sees its peer gone and writes a failed result of its
# own (as JAX's process 0 did for real: "Gloo all-reduce failed: ... Connection closed by peer")
PEER_GONE = (
    "import os, signal, sys, time\n"
    "from backends.protocol import RunResult, read_spec, write_result\n"
    "if os.environ['COMPARE_PROCESS_ID'] == '1':\n"
    "    os.kill(os.getpid(), signal.SIGKILL)\n"
    "time.sleep(1.0)\n"
    "spec = read_spec(sys.argv[-2])\n"
    "write_result(sys.argv[-1], RunResult(run_id=spec.run_id, status='failed', spec=spec.to_dict(),\n"
    "             nonce=spec.nonce, reason='JaxRuntimeError: Connection closed by peer'))\n"
    "sys.exit(1)\n")


def test_a_killed_process_is_named_also_when_process_0_wrote_a_failure_of_its_own(tmp_path, monkeypatch):
    """Before: the launcher named a SIGKILLed process only when it wrote the result itself, so
    a run whose process 0 recorded its lost peer was `failed` whatever the kernel's log said."""
    spec = RunSpec("jax", "jax", gpus=2, options={"processes": 2})
    started = results.utc_now()
    code, result_file, err = _launch(tmp_path, spec, PEER_GONE)
    assert code == 9 and read_result(str(result_file)).reason == "JaxRuntimeError: Connection closed by peer"
    killed = [line for line in err.read_text().splitlines() if "was killed by SIGKILL" in line]
    assert len(killed) == 1 and killed[0].startswith("compare: process 1 (pid ")
    pid = killed[0].split("pid ")[1].split(")")[0]
    line = _kernel_killed(pid, tmp_path, monkeypatch)
    result = collect(spec, Outcome(code), result_file, err, started, 600)
    assert (result.status, result.reason) == (
        "oom", "a worker was killed: process 1 (pid {}) was killed by SIGKILL (the kernel's OOM "
               "killer: {}) (rank 0 recorded: JaxRuntimeError: Connection closed by peer)".format(pid, line))


# per-rank divergence: one process ends while the others wait for it in a collective that never
# completes (here: sleep). The launcher, its grace cut to 0.5 s, must end them long before the
# cell's timeout; each test's own timeout stands for that
GRACE = ("import sys; from backends.launchers import processes; processes.KILL_GRACE_S = "
         "processes.EXIT_GRACE_S = 0.5; sys.exit(processes.main(sys.argv[1:]))")
WAITS = "import time; time.sleep(120)  # in a collective its peer never joins\n"
RANK1_FAILS = ("import os\n"
               "class InjectedFailure(RuntimeError):\n    pass\n"
               "if os.environ['COMPARE_PROCESS_ID'] == '1':\n"
               "    raise InjectedFailure(\"fail_at=timed on rank 1 (asked for by the spec's options)\")\n"
               + WAITS)
RANK1_EXITS_0 = "import os\nif os.environ['COMPARE_PROCESS_ID'] == '1':\n    raise SystemExit(0)\n" + WAITS
RANK0_UNSUPPORTED = (
    "import os, sys\n"
    "from backends.protocol import RunResult, read_spec, write_result\n"
    "if os.environ['COMPARE_PROCESS_ID'] == '0':\n"
    "    spec = read_spec(sys.argv[-2])\n"
    "    write_result(sys.argv[-1], RunResult(run_id=spec.run_id, status='unsupported', "
    "spec=spec.to_dict(), nonce=spec.nonce, reason='bf16 needs compute capability 8.0 (gpu 0: 7.0)'))\n"
    "    raise SystemExit(0)\n" + WAITS)


def _diverge(tmp_path, rank):
    spec = RunSpec("jax", "jax", gpus=2, options={"processes": 2})
    spec_file, result_file, err = tmp_path / "spec.json", tmp_path / "result.json", tmp_path / "err"
    write_spec(str(spec_file), spec)
    started, began = results.utc_now(), time.monotonic()
    with err.open("w") as stderr:
        code = subprocess.run([sys.executable, "-c", GRACE, sys.executable, "-c", rank, str(spec_file),
                               str(result_file)], cwd=str(ROOT), stderr=stderr, timeout=15).returncode
    assert time.monotonic() - began < 10
    return collect(spec, Outcome(code), result_file, err, started, 600)


def test_a_failed_process_ends_the_waiting_ones_and_its_error_is_the_reason(tmp_path):
    """Before, the record said only 'exited with codes [-9, 1]': which process failed first and
    that the launcher ended the other were unsaid."""
    result = _diverge(tmp_path, RANK1_FAILS)
    assert (result.status, result.reason) == (
        "failed", "InjectedFailure: fail_at=timed on rank 1 (asked for by the spec's options) (the "
                  "first error in the run's log; the result recorded: RuntimeError: the 2 jax processes "
                  "exited with codes [-9, 1] before process 0 wrote a result; process 1 ended first "
                  "(exit code 1) and this launcher killed process 0, still running 0.5 s later)")


def test_a_process_that_exits_0_early_does_not_leave_the_others_waiting(tmp_path):
    """Before, only a failure started the grace: the others waited until the cell's timeout."""
    result = _diverge(tmp_path, RANK1_EXITS_0)
    assert (result.status, result.reason) == (
        "failed", "RuntimeError: the 2 jax processes exited with codes [-9, 0] before process 0 wrote "
                  "a result; process 1 ended first (exit code 0) and this launcher killed process 0, "
                  "still running 0.5 s later")


def test_process_0s_unsupported_stays_the_result_when_a_peer_is_left_waiting(tmp_path):
    """Before: the cell hung to its timeout, and then was `timeout`, not `unsupported`."""
    result = _diverge(tmp_path, RANK0_UNSUPPORTED)
    assert (result.status, result.reason) == ("unsupported", "bf16 needs compute capability 8.0 (gpu 0: 7.0)")


# COMPARE_EXIT_GRACE_S: the grace after a process exits 0, the one srun's --wait gets in a Slurm
# job (compare/executors/slurm_tools.py), read by this launcher too
RANK1_EXITS_0_RANK0_ENDS = (
    "import os, sys, time\n"
    "if os.environ['COMPARE_PROCESS_ID'] == '1':\n"
    "    raise SystemExit(0)\n"
    "time.sleep(2.0)  # longer than the 0.5 s grace GRACE sets\n"
    "sys.exit(3)  # its own end: not killed\n")


def _under(tmp_path, monkeypatch, grace, rank):
    monkeypatch.setenv("COMPARE_EXIT_GRACE_S", grace)
    return _diverge(tmp_path, rank)


def test_the_exit_grace_is_the_one_compare_exit_grace_s_gives_as_in_a_slurm_job(tmp_path, monkeypatch):
    """Before, only the Slurm job script read the variable: here the launcher waited its own 0.5 s."""
    result = _under(tmp_path, monkeypatch, "1", RANK1_EXITS_0)
    assert (result.status, result.reason) == (
        "failed", "RuntimeError: the 2 jax processes exited with codes [-9, 0] before process 0 wrote "
                  "a result; process 1 ended first (exit code 0) and this launcher killed process 0, "
                  "still running 1 s later")


def test_an_exit_grace_of_0_waits_for_every_process_as_srun_does(tmp_path, monkeypatch):
    result = _under(tmp_path, monkeypatch, "0", RANK1_EXITS_0_RANK0_ENDS)
    assert (result.status, result.reason) == (
        "failed", "RuntimeError: the 2 jax processes exited with codes [3, 0] before process 0 "
                  "wrote a result")


def test_an_exit_grace_that_is_not_whole_seconds_fails_the_run_saying_so(tmp_path, monkeypatch):
    """srun refuses `--wait=1.5` as it refuses `abc`: so does this launcher, before it starts any
    process (else process 0 would sleep 120 s: the test's own timeout)."""
    for grace in ("abc", "1.5", "-3"):
        result = _under(tmp_path, monkeypatch, grace, WAITS)
        assert (result.status, result.reason) == (
            "failed", "ValueError: COMPARE_EXIT_GRACE_S={!r} is not a whole number of seconds "
                      "(0: no limit)".format(grace))


# per-rank divergence the other way round: process 1's own check finds the run unsupported (its
# GPU is older than process 0's), through the real harness; process 0 waits in a collective
RANK1_UNSUPPORTED = (
    "import os, sys, time\n"
    "from backends import harness, jax\n"
    "from backends.protocol import Unsupported\n"
    "def setup(spec):\n"
    "    if os.environ['COMPARE_PROCESS_ID'] == '1':\n"
    "        raise Unsupported('bf16 needs compute capability 8.0+, this GPU is 7.0')\n"
    "    time.sleep(120)  # in a collective its peer never joins\n"
    "sys.exit(harness.main(setup, sys.argv[-2:], jax.OPTIONS))\n")


def test_an_unsupported_process_other_than_0_is_the_cells_reason(tmp_path):
    """Before: `failed`, 'the 2 jax processes exited with codes [-9, 0] before process 0 wrote a
    result; ...': process 1's reason was written nowhere."""
    result = _diverge(tmp_path, RANK1_UNSUPPORTED)
    assert (result.status, result.reason) == (
        "unsupported", "rank 1: bf16 needs compute capability 8.0+, this GPU is 7.0 (the run "
                       "recorded otherwise: RuntimeError: the 2 jax processes exited with codes [-9, 0] "
                       "before process 0 wrote a result; process 1 ended first (exit code 0) and this "
                       "launcher killed process 0, still running 0.5 s later)")
