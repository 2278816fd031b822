"""The sequence every executor runs (Executor.run): an executor fills in its steps, and whatever
stops a run before it starts is a recorded result; what it started is always released."""
import json
import sys
import threading

from backends.protocol import RunSpec, write_result
from compare import executors, frameworks
from compare.executors import Attempt, Executor, Handle, Outcome, Refused
from compare.store import Campaign
from tests.helpers import MACHINE


class Recording(Executor):
    """Runs nothing: 'launches' by writing the result a backend would, and notes each step."""

    name = "recording"

    def __init__(self, ctx, refuse_at=None, outcome=Outcome(exit_code=0), earlier=False):
        super().__init__(ctx)
        self.steps, self.refuse_at, self.outcome, self.earlier = [], refuse_at, outcome, earlier

    def _step(self, name):
        self.steps.append(name)
        if name == self.refuse_at:
            raise Refused("failed", "refused at {}".format(name))

    def reap(self, campaign):
        self._step("reap")

    def attach(self, attempt: Attempt):
        if self.earlier:  # an earlier session's run of the cell, which wrote its result since
            self._step("attach")
            self.stage(attempt)
            write_result(attempt.result_path, _ok(attempt.spec))
            attempt.handle = Noted(self.steps, self.outcome)
        return self.earlier

    def environment(self, attempt: Attempt):
        self._step("environment")
        attempt.python, attempt.record = sys.executable, {"where": "here"}

    def launch(self, attempt: Attempt):
        attempt.handle = Noted(self.steps, self.outcome)  # started: stopped even if refused now
        self._step("launch")
        if self.outcome is not None and self.outcome.exit_code == 0:
            write_result(attempt.result_path, _ok(attempt.spec))

    def release(self, attempt: Attempt):
        self.steps.append("release")
        super().release(attempt)


class Noted(Handle):
    """What Recording 'started': notes the wait and the stop; wait() returns `outcome`, or when
    that is None, waits until stop() (another thread's close()) ends the run."""

    def __init__(self, steps, outcome):
        self.steps, self.outcome, self.stopped = steps, outcome, threading.Event()

    def wait(self, timeout):
        self.steps.append("wait")
        if self.outcome is None:
            self.stopped.wait(30)
            return Outcome(exit_code=-15)
        return self.outcome

    def stop(self):
        self.steps.append("stop")
        self.stopped.set()


def _ok(spec):
    from backends.protocol import RunResult
    return RunResult(run_id=spec.run_id, status="ok", spec=spec.to_dict(), images_per_sec=10.0,
                     nonce=spec.nonce, spec_hash=spec.spec_hash)


def _run(tmp_path, refuse_at=None, spec=None, **kw):
    campaign = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    executor = Recording(executors.Context([frameworks.get("caffe2")], "cpu"), refuse_at, **kw)
    spec = spec or RunSpec("caffe2", "caffe2_torch", batch_size=4, image_size=32, nonce="ab12")
    return executor, executor.run(spec, campaign, 60.0), campaign


def test_the_steps_run_in_order_and_the_result_says_where_it_ran(tmp_path):
    executor, result, campaign = _run(tmp_path)
    assert executor.steps == ["reap", "environment", "launch", "wait", "release", "stop"]
    assert (result.status, result.images_per_sec) == ("ok", 10.0)
    assert result.environment == {"executor": "recording", "where": "here"}
    # the launcher's command for the spec, with the staged spec and the result file
    spec_file = campaign.spec_path("caffe2-fp32-w1-b4-s32-r0")
    assert json.loads(spec_file.read_text())["nonce"] == "ab12"


def test_a_refused_step_is_a_recorded_result_and_what_started_is_released(tmp_path):
    executor, result, _ = _run(tmp_path, refuse_at="launch")
    assert executor.steps == ["reap", "environment", "launch", "release", "stop"]
    assert (result.status, result.reason) == ("failed", "refused at launch")
    assert result.nonce == "ab12" and result.started_at


def test_what_the_backends_launcher_cannot_run_is_unsupported(tmp_path):
    spec = RunSpec("mxnet", "mxnet", nodes=2, batch_size=4, image_size=32)
    executor, result, _ = _run(tmp_path, spec=spec)
    assert executor.steps == ["reap", "environment", "release"]  # nothing was launched
    assert result.status == "unsupported"
    assert result.reason.startswith("MXNet runs as one process driving its node's contexts")


def test_a_run_an_earlier_session_started_is_taken_up_not_started_again(tmp_path):
    executor, result, _ = _run(tmp_path, earlier=True)
    assert executor.steps == ["reap", "attach", "wait", "release", "stop"]
    assert (result.status, result.images_per_sec) == ("ok", 10.0)


def test_how_a_run_ended_makes_its_result_whichever_executor_ran_it(tmp_path):
    _, timed_out, _ = _run(tmp_path / "a", outcome=Outcome(timed_out=True))
    assert (timed_out.status, timed_out.reason) == ("timeout", "killed after the 60 s timeout")
    _, killed, _ = _run(tmp_path / "b", outcome=Outcome(exit_code=137, oom_killed="the container "
                                                         "was killed by the out-of-memory killer"))
    assert (killed.status, killed.reason) == ("oom", "the container was killed by the "
                                                     "out-of-memory killer")
    # where the executor knows the end (a Slurm job at its time limit), its word is recorded
    _, ended, _ = _run(tmp_path / "c", outcome=Outcome(exit_code=0, ended=(
        "timeout", "Slurm stopped job 7 at its time limit (00:01:00)")))
    assert (ended.status, ended.reason) == ("timeout", "Slurm stopped job 7 at its time limit "
                                                       "(00:01:00)")


def test_close_from_another_thread_stops_the_running_cell(tmp_path):
    campaign = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    executor = Recording(executors.Context([frameworks.get("caffe2")], "cpu"), outcome=None)
    spec = RunSpec("caffe2", "caffe2_torch", batch_size=4, image_size=32, nonce="ab12")
    results = []
    lane = threading.Thread(target=lambda: results.append(executor.run(spec, campaign, 60.0)))
    lane.start()
    while "wait" not in executor.steps:
        lane.join(0.01)
    executor.close()  # a stop signal: the main thread closes every lane's executor
    lane.join(10)
    assert executor.steps == ["reap", "environment", "launch", "wait", "stop", "release", "stop"]
    assert (results[0].status, results[0].reason) == (
        "failed", "killed by SIGTERM (exit code -15) and wrote no result")


def test_each_campaign_is_reaped_once(tmp_path):
    executor, _, campaign = _run(tmp_path)
    executor.run(RunSpec("caffe2", "caffe2_torch", batch_size=4, image_size=32, repeat=1), campaign, 60)
    assert executor.steps.count("reap") == 1


def test_executor_flags_are_declared_by_the_executor_that_reads_them():
    assert [(name, flag.option) for name, flag in executors.flags()] == [
        ("slurm", "--partition"), ("slurm", "--account"), ("slurm", "--time-limit"),
        ("slurm", "--slurm-option")]


def test_a_launcher_that_does_not_start_is_refused_and_its_temp_folder_removed(tmp_path):
    import pytest

    from compare.executors import processes
    campaign = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    spec = RunSpec("caffe2", "caffe2_torch", batch_size=4, image_size=32, nonce="ab12")
    attempt = Attempt(spec, campaign, "2026-01-01T00:00:00+00:00", 60.0)
    attempt.work, temp = campaign.work_dir(spec.run_id), tmp_path / "tmp"
    temp.mkdir()
    with pytest.raises(Refused, match=r"^could not start /no/such/launcher: \[Errno 2\] No such file"):
        processes.start(attempt, ["/no/such/launcher"], {}, temp=temp)
    assert not temp.exists()
