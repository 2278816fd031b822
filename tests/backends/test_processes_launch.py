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
    codes, killed = processes._wait([Proc(1), Proc(None)])
    assert (codes, killed) == ([1, -9], {1})
    assert processes.killed_by_signal([Proc(1), Proc(-9)], [1, -9], killed) == ""


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
