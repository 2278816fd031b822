"""The sequence every executor runs (Executor.run): an executor fills in its steps, and whatever
stops a run before it starts is a recorded result; what it started is always released."""
import json
import sys

from backends.protocol import RunSpec, write_result
from compare import executors, frameworks
from compare.executors import Attempt, Executor, Refused
from compare.store import Campaign
from tests.helpers import MACHINE


class Recording(Executor):
    """Runs nothing: 'launches' by writing the result a backend would, and notes each step."""

    name = "recording"

    def __init__(self, ctx, refuse_at=None):
        super().__init__(ctx)
        self.steps, self.refuse_at = [], refuse_at

    def _step(self, name):
        self.steps.append(name)
        if name == self.refuse_at:
            raise Refused("failed", "refused at {}".format(name))

    def reap(self, campaign):
        self._step("reap")

    def environment(self, attempt: Attempt):
        self._step("environment")
        attempt.python, attempt.record = sys.executable, {"where": "here"}

    def launch(self, attempt: Attempt):
        self._step("launch")
        write_result(attempt.result_path, _ok(attempt.spec))

    def wait(self, attempt, timeout):
        self._step("wait")
        return 0, False

    def release(self, attempt):
        self.steps.append("release")


def _ok(spec):
    from backends.protocol import RunResult
    return RunResult(run_id=spec.run_id, status="ok", spec=spec.to_dict(), images_per_sec=10.0,
                     nonce=spec.nonce, spec_hash=spec.spec_hash)


def _run(tmp_path, refuse_at=None, spec=None):
    campaign = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    executor = Recording(executors.Context([frameworks.get("caffe2")], "cpu"), refuse_at)
    spec = spec or RunSpec("caffe2", "caffe2_torch", batch_size=4, image_size=32, nonce="ab12")
    return executor, executor.run(spec, campaign, 60.0), campaign


def test_the_steps_run_in_order_and_the_result_says_where_it_ran(tmp_path):
    executor, result, campaign = _run(tmp_path)
    assert executor.steps == ["reap", "environment", "launch", "wait", "release"]
    assert (result.status, result.images_per_sec) == ("ok", 10.0)
    assert result.environment == {"executor": "recording", "where": "here"}
    # the launcher's command for the spec, with the staged spec and the result file
    spec_file = campaign.spec_path("caffe2-fp32-w1-b4-s32-r0")
    assert json.loads(spec_file.read_text())["nonce"] == "ab12"


def test_a_refused_step_is_a_recorded_result_and_what_started_is_released(tmp_path):
    executor, result, _ = _run(tmp_path, refuse_at="launch")
    assert executor.steps == ["reap", "environment", "launch", "release"]
    assert (result.status, result.reason) == ("failed", "refused at launch")
    assert result.nonce == "ab12" and result.started_at


def test_what_the_backends_launcher_cannot_run_is_unsupported(tmp_path):
    spec = RunSpec("mxnet", "mxnet", nodes=2, batch_size=4, image_size=32)
    executor, result, _ = _run(tmp_path, spec=spec)
    assert executor.steps == ["reap", "environment", "release"]  # nothing was launched
    assert result.status == "unsupported"
    assert result.reason.startswith("MXNet runs as one process driving its node's contexts")


def test_each_campaign_is_reaped_once(tmp_path):
    executor, _, campaign = _run(tmp_path)
    executor.run(RunSpec("caffe2", "caffe2_torch", batch_size=4, image_size=32, repeat=1), campaign, 60)
    assert executor.steps.count("reap") == 1


def test_executor_flags_are_declared_by_the_executor_that_reads_them():
    assert [(name, flag.option) for name, flag in executors.flags()] == [
        ("slurm", "--partition"), ("slurm", "--account"), ("slurm", "--time-limit"),
        ("slurm", "--slurm-option")]
