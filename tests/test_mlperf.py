"""Time to accuracy without a framework: the loop (backends/accuracy.py) driven by a stdlib
trainer through the harness, its MLPerf logs checked by mlperf-logging's compliance checker, and
compare's score against mlperf-logging's own scoring code from the same logs."""
import json
import shutil
import time

import pytest
from mlperf_logging.result_summarizer import result_summarizer as summarizer

from backends import harness, mllog, recipe
from backends.protocol import RunSpec, SchemaError
from backends.trainer import Trainer
from compare import datasets, learnable, mllogs, mlperf
from compare.imagegen import make


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A learnable DIR/train + DIR/val of 2 classes, 8 + 4 images, checked as the host does."""
    root = tmp_path_factory.mktemp("data") / "tiny"
    make(root, learnable.LearnableSpec(classes=2, train_per_class=4, val_per_class=2), 1,
         lambda n, b: None)
    train = datasets.check(datasets.open_folder(str(root)))
    datasets.check(datasets.open_folder(str(root / "val")))
    assert train.manifest["images"] == 8
    return str(root)


class Climber(Trainer):
    """Top-1 rises by `per_epoch` an epoch; each step sleeps `dt` (so seeds take different
    times); `fail_in_epoch`: step() raises there."""

    def __init__(self, spec, per_epoch=0.3, dt=0.002, fail_in_epoch=None):
        self.spec, self.per_epoch, self.dt, self.fail = spec, per_epoch, dt, fail_in_epoch
        self.steps, self.rates, self.warmed = 0, [], False

    def steps_per_epoch(self):
        return 8 // self.spec.global_batch

    def set_learning_rate(self, lr):
        self.rates.append(lr)

    def step(self):
        if self.fail and self.steps // self.steps_per_epoch() + 1 == self.fail:
            raise RuntimeError("killed in epoch {}".format(self.fail))
        time.sleep(self.dt)
        self.steps += 1

    def evaluate(self):
        epochs = self.steps / self.steps_per_epoch()
        return min(4, int(4 * self.per_epoch * epochs)), 4

    def warm_up(self):
        self.warmed = True

    def loss(self):
        return 2.0 / (1 + self.steps)


def _spec(folder, repeat=0, **kw):
    base = dict(framework="caffe2", backend="caffe2_torch", batch_size=2, image_size=32,
                num_classes=2, data=folder, target_accuracy=0.75, max_epochs=5, repeat=repeat)
    base.update(kw)
    return RunSpec(**base)


def _run(tmp_path, spec, **trainer):
    made = []

    def setup(s):
        made.append(Climber(s, **trainer))
        return made[0]
    out = tmp_path / spec.run_id
    return harness.run(spec, str(out / "result.json"), setup), made[0], out / mllog.FILE_NAME


def test_the_run_stops_at_the_target_and_records_it_as_its_log_says(tmp_path, folder):
    result, trainer, log = _run(tmp_path, _spec(folder), dt=0.01)
    a = result.accuracy
    assert result.status == "ok" and trainer.warmed
    # 0.3 an epoch: 0.6 after 2 epochs, 0.75 after 3 (one eval an epoch)
    assert (a["epochs"], a["epochs_to_target"], a["best"]) == (3, 3, 0.75)
    assert [e["accuracy"] for e in a["evals"]] == [0.25, 0.5, 0.75]
    events = mllog.read(str(log))
    at = {e["key"]: e for e in events}
    assert a["time_to_train_s"] == (at["run_stop"]["time_ms"] - at["run_start"]["time_ms"]) / 1e3
    assert a["time_to_train_s"] >= 3 * 4 * 0.01  # 12 steps of >= 10 ms
    assert at["run_stop"]["metadata"]["status"] == "success"
    assert [e["metadata"]["epoch_num"] for e in events if e["key"] == "eval_accuracy"] == [1, 2, 3]
    assert at["seed"]["value"] == result.spec["seed"] == a["seed"]
    assert a["train_images"] == 8 and a["eval_images"] == 4 and a["images_trained"] == 24
    assert mlperf.check(str(log)).passed, mlperf.check(str(log)).line()


def test_the_recipe_is_the_one_in_recipe_py_and_its_rate_is_set_every_step(tmp_path, folder):
    result, trainer, _ = _run(tmp_path, _spec(folder, eval_every=5), dt=0)
    spe = 4  # 8 images, global batch 2
    assert result.accuracy["recipe"] == recipe.record(2, spe, 5, 32)
    assert result.accuracy["recipe"]["momentum"] == recipe.MOMENTUM
    assert trainer.rates == [recipe.learning_rate(i, spe, 2, 5) for i in range(20)]
    peak, warm = recipe.BASE_LR * 2 / recipe.REFERENCE_BATCH, round(recipe.WARMUP_EPOCHS * spe)
    assert trainer.rates[warm - 1] == pytest.approx(peak)  # the end of the linear warm-up
    assert trainer.rates[0] == pytest.approx(peak / warm)
    decay = 20 - warm  # polynomial to END_LR over the rest of the 5 epochs
    assert trainer.rates[-1] == pytest.approx(
        recipe.END_LR + (peak - recipe.END_LR) * (1 / decay) ** recipe.DECAY_POWER)


def test_the_log_gives_the_warm_up_the_run_had_in_epochs(tmp_path, folder):
    # the log said opt_learning_rate_warmup_epochs 0.5 whatever the steps: with one step an
    # epoch the warm-up is round(0.5) = 0 steps, with 5 it is round(2.5) = 2 steps, 0.4 epochs
    for spe, epochs in ((1, 0.0), (4, 0.5), (5, 0.4)):
        logged = recipe.mllog_hyperparameters(recipe.record(8, spe, 3, 32))
        assert logged["opt_learning_rate_warmup_epochs"] == epochs, spe
    result, _, log = _run(tmp_path, _spec(folder, batch_size=8), dt=0)  # one step an epoch
    assert [e["value"] for e in mllog.read(str(log))
            if e["key"] == "opt_learning_rate_warmup_epochs"] == [0.0]
    assert recipe.learning_rate(0, 1, 8, 5) == pytest.approx(recipe.peak_learning_rate(8))


def test_a_run_that_misses_its_target_is_not_converged_with_its_best(tmp_path, folder):
    result, _, log = _run(tmp_path, _spec(folder, target_accuracy=1.0, max_epochs=2), dt=0)
    assert result.status == "not_converged"
    assert result.reason == "target accuracy 1 not reached: best top-1 0.5000 (2 epochs trained)"
    assert result.accuracy["epochs_to_target"] is None and result.accuracy["best"] == 0.5
    run_stop = [e for e in mllog.read(str(log)) if e["key"] == "run_stop"]
    assert [e["metadata"]["status"] for e in run_stop] == ["aborted"]
    assert mlperf.check(str(log)).passed  # an open-division log of a run that did not converge


def test_a_run_killed_mid_training_logs_run_stop_aborted_and_fails(tmp_path, folder):
    result, _, log = _run(tmp_path, _spec(folder), fail_in_epoch=2)
    assert result.status == "failed" and "killed in epoch 2" in result.reason
    keys = [e["key"] for e in mllog.read(str(log))]
    assert keys.count("epoch_start") == 2 and keys[-1] == "run_stop"


@pytest.mark.parametrize("fields,message", [
    ({"target_accuracy": 0.0}, "target_accuracy must be in (0, 1], got 0.0"),
    ({"target_accuracy": 1.5}, "target_accuracy must be in (0, 1], got 1.5"),
    ({"max_epochs": 0}, "max_epochs must be >= 1, got 0"),
    ({"eval_every": 0}, "eval_every must be >= 1, got 0"),
    ({"data": "synthetic"}, "target_accuracy trains on a folder"),
])
def test_bad_spec_values_are_refused_with_the_rule(folder, fields, message):
    with pytest.raises(SchemaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _spec(folder, **fields).validate()


def test_a_folder_without_val_is_a_failed_run_saying_so(tmp_path, folder):
    bare = tmp_path / "bare"
    shutil.copytree(folder + "/train", str(bare / "train"))
    datasets.check(datasets.open_folder(str(bare)))
    result, _, _ = _run(tmp_path, _spec(str(bare)))
    assert result.status == "failed"
    assert "has no val/ folder: time to accuracy evaluates on DIR/val" in result.reason


def test_score_equals_mlperf_loggings_own_from_the_same_logs(tmp_path, folder):
    logs, results = tmp_path / "logs", []
    logs.mkdir()
    for r in range(5):  # five seeds, each a different time to train
        result, _, log = _run(tmp_path, _spec(folder, repeat=r), dt=0.004 * (r + 1))
        assert result.status == "ok" and mlperf.check(str(log)).passed
        results.append(result)
        shutil.copy(str(log), str(logs / "result_{}.txt".format(r)))
    theirs, _, _ = summarizer._compute_strong_score_standalone(
        "resnet", None, False, str(logs), mlperf.USAGE, mlperf.RULESET)
    ours = mlperf.score(sorted(str(p) for p in logs.glob("result_*.txt")))
    assert ours == pytest.approx(theirs, rel=1e-12)
    minutes = sorted(r.accuracy["time_to_train_s"] / 60 for r in results)
    assert ours == pytest.approx(sum(minutes[1:4]) / 3, rel=1e-12)  # fastest and slowest dropped
    assert len({r.accuracy["seed"] for r in results}) == 5


def test_a_run_that_did_not_converge_is_dropped_as_mlperf_logging_drops_it():
    minutes = [3.0, 1.0, 2.0, 4.0]  # the fifth run did not converge
    assert mlperf.olympic_mean(minutes, 1) == summarizer._compute_olympic_average(
        list(minutes), 1, 1) == 3.0
    assert mlperf.olympic_mean(minutes[:3], 2) is None  # more than one: no score


def test_the_host_keeps_a_finished_log_and_an_aborted_attempts(tmp_path, folder):
    from compare.store import Campaign
    campaign = Campaign.create(tmp_path / "c", {}, {})
    spec = _spec(folder)
    work = campaign.work_dir(spec.run_id)
    result, _, _ = _run(work.parent, spec)
    assert mllogs.keep(campaign.root, work, result) == campaign.root / "logs" / (spec.run_id + ".mllog")
    assert result.accuracy["mllog"] == "logs/{}.mllog".format(spec.run_id)
    # a new attempt whose predecessor was never collected (compare killed): its log is kept aside
    (work / mllog.FILE_NAME).write_text(':::MLLOG {"key": "run_start"}\n')
    campaign.work_dir(spec.run_id)
    aborted = list((campaign.root / "logs").glob(spec.run_id + ".*.aborted.mllog"))
    assert len(aborted) == 1 and "attempt aborted" in aborted[0].read_text()
    assert json.loads(aborted[0].read_text().splitlines()[0][len(":::MLLOG "):]) == {"key": "run_start"}


def test_a_global_batch_larger_than_train_is_unsupported_saying_so(tmp_path, folder):
    # 8 training images, a global batch of 16: an epoch of 8 // 16 = 0 steps would train nothing
    # and be reported as a model that did not learn (or, with a NaN loss, one that diverged)
    result, trainer, _ = _run(tmp_path, _spec(folder, batch_size=16), dt=0)
    assert result.status == "unsupported" and trainer.steps == 0
    assert result.reason == (
        "{}/train holds 8 training images, fewer than the global batch of 16 (16 x 1 worker): an "
        "epoch would be no step; give a --batch-size of at most 8, or a folder with more "
        "images".format(folder))
    from compare.loading import load_result  # a result the host reads, the reason its own
    assert load_result(tmp_path / result.run_id / "result.json").reason == result.reason


def test_a_partial_log_says_whether_the_cell_runs_again(tmp_path, folder):
    # an unsupported (or oom) cell is the cell's answer: --resume does not run it again, so its
    # kept log must not say it "ran again as a new attempt"; a failed one runs again on --resume
    from compare.store import Campaign
    campaign = Campaign.create(tmp_path / "c", {}, {})
    for batch, status, says in ((16, "unsupported", "the cell's answer: --resume does not run it "
                                 "again"),
                                (2, "failed", "recorded as failed: `compare run --results {} --resume` "
                                 "runs the cell again as a new attempt".format(campaign.root))):
        spec = _spec(folder, batch_size=batch)
        work = campaign.work_dir(spec.run_id)
        result, _, _ = _run(work.parent, spec, **({"fail_in_epoch": 1} if status == "failed" else {}))
        assert result.status == status
        kept = mllogs.keep(campaign.root, work, result)
        last = kept.read_text().splitlines()[-1]
        assert last.startswith("# compare: attempt aborted ({}: ".format(status)) and \
            last.endswith("); {}".format(says)), last
    from compare import store
    assert set(mllogs.ANSWERS) == set(store.FINISHED) - set(mllogs.FINISHED)


def test_an_evaluation_over_part_of_val_fails_the_run_saying_so(tmp_path, folder):
    # top-1 is over every image of val/: a trainer that counted 3 of its 4 images (a dropped last
    # batch, a rank's share lost) scored a partial set, and the run was ok at 2/3 >= 0.6
    class Partial(Climber):
        def evaluate(self):
            return 2, 3
    spec = _spec(folder, target_accuracy=0.6)
    out = tmp_path / spec.run_id
    result = harness.run(spec, str(out / "result.json"), lambda s: Partial(s))
    assert result.status == "failed"
    assert result.reason == "RuntimeError: the evaluation after epoch 1 counted 3 images, not " \
        "the 4 of val/: top-1 must be over every image of val/ (backends/pipelines/accuracy_data.py)"


def test_a_run_that_did_not_finish_shows_its_seed_epochs_and_best_from_its_partial_log(
        tmp_path, folder):
    # a failed or timed-out run's row read "n/a" for its seed, epochs and best top-1, though its
    # partial log (kept in logs/) says the seed it trained with and every epoch and evaluation
    from compare.reporting import accuracy
    from compare.store import Campaign
    campaign = Campaign.create(tmp_path / "c", {}, {})
    spec = _spec(folder, repeat=1)
    work = campaign.work_dir(spec.run_id)
    result, _, _ = _run(work.parent, spec, fail_in_epoch=3)
    assert result.status == "failed"
    mllogs.keep(campaign.root, work, result)
    assert {k: result.accuracy[k] for k in ("seed", "epochs", "best")} == {
        "seed": spec.seed + 1000, "epochs": 2, "best": 0.5}
    row = accuracy.not_reached_table(accuracy.cells([result])).rows[0]
    assert row[-6:-1] == ["failed", str(spec.seed + 1000), "2", "0.500",
                          "RuntimeError: killed in epoch 3"]
    # killed in its first epoch: 0 epochs completed, no evaluation yet
    spec = _spec(folder, repeat=2)
    work = campaign.work_dir(spec.run_id)
    result, _, _ = _run(work.parent, spec, fail_in_epoch=1)
    mllogs.keep(campaign.root, work, result)
    assert (result.accuracy["seed"], result.accuracy["epochs"], "best" in result.accuracy) == (
        spec.seed + 2000, 0, False)
