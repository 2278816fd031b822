"""Time to accuracy for real, on the CPU: PyTorch and JAX train ResNet-50 on a small learnable
set (compare data make --learnable) to a target, TensorFlow and MXNet run the same cells (the
target or `not_converged`), a run that cannot reach its target is `not_converged` with its best
accuracy, every MLPerf log passes mlperf-logging's checker, and the four frameworks record the
same recipe (backends/recipe.py)."""
import pytest

from backends import mllog, recipe
from compare import datasets, learnable, mlperf
from compare.imagegen import make
from tests.helpers import run_backend, run_in_backend, write_formats

pytestmark = pytest.mark.backend  # real frameworks in their environments

# 4 classes (chance 0.25), 128 training images of 32x32 crops, 52 held out; two workers (DDP
# processes on gloo, two XLA CPU devices) of 8 images: 8 steps of 16 an epoch. ResNet-50 from
# scratch passes 0.5 within a few epochs
TARGET, EPOCHS, BATCH, WORKERS = 0.5, 6, 8, 2


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("tta") / "learnable"
    make(root, learnable.LearnableSpec(classes=4, train_per_class=32, val_per_class=13), 2,
         lambda n, b: None)
    for part in (root, root / "val"):
        datasets.check(datasets.open_folder(str(part)))
    write_formats(root, ("tf", "mxnet"))  # their TFRecord and RecordIO of train/
    return str(root)


def _run(framework, tmp_path, folder, **kw):
    fields = dict(data=folder, target_accuracy=TARGET, max_epochs=EPOCHS, batch_size=BATCH,
                  gpus=WORKERS, image_size=32, num_classes=4, options={"loader_workers": 1})
    fields.update(kw)
    result, proc = run_backend(framework, tmp_path, timeout=900, **fields)
    assert result.status in ("ok", "not_converged"), (result.reason, proc.stderr[-3000:])
    return result, tmp_path / mllog.FILE_NAME


@pytest.fixture(scope="module")
def trained(tmp_path_factory, folder):
    """One run per framework (module-wide: each takes a minute or more on a CPU)."""
    jax_options = {"loader_workers": 1, "loader": "threads"}
    return {"caffe2": _run("caffe2", tmp_path_factory.mktemp("caffe2"), folder),
            "jax": _run("jax", tmp_path_factory.mktemp("jax"), folder, options=jax_options),
            # two Horovod workers over gloo; an MXNet kvstore over two CPU contexts
            "tf": _run("tf", tmp_path_factory.mktemp("tf"), folder),
            "mxnet": _run("mxnet", tmp_path_factory.mktemp("mxnet"), folder)}


@pytest.mark.parametrize("framework", ["caffe2", "jax"])
def test_reaches_the_target_in_a_few_epochs_and_its_log_passes_the_checker(trained, framework):
    result, log = trained[framework]
    a = result.accuracy
    assert result.status == "ok", result.reason
    assert a["reached"] and a["best"] >= TARGET and a["epochs_to_target"] <= EPOCHS
    assert a["evals"][-1]["accuracy"] >= TARGET and a["evals"][-1]["total"] == 52
    assert a["steps_per_epoch"] == 128 // (WORKERS * BATCH) and a["seed"] == result.spec["seed"]
    assert result.world_size == WORKERS
    assert 0 < a["time_to_train_s"] and a["init_s"] >= a["compile_s"] >= 0
    check = mlperf.check(str(log))
    assert check.passed, check.line()
    assert mlperf.run_minutes(str(log)) * 60 == pytest.approx(a["time_to_train_s"], abs=1e-9)


@pytest.mark.parametrize("framework", ["tf", "mxnet"])
def test_tf_and_mxnet_run_the_same_cell_to_the_target_or_not_converged(trained, framework):
    result, log = trained[framework]
    a = result.accuracy
    assert result.distribution == {"tf": "horovod", "mxnet": "kvstore"}[framework]
    assert a["reached"] is (result.status == "ok") and a["best"] == max(
        e["accuracy"] for e in a["evals"])
    assert {e["total"] for e in a["evals"]} == {52}  # each image once, summed over the workers
    assert a["steps_per_epoch"] == 128 // (WORKERS * BATCH) and result.world_size == WORKERS
    check = mlperf.check(str(log))
    assert check.passed, check.line()


def test_the_four_frameworks_record_the_recipe_of_recipe_py(trained):
    recorded = {fw: r.accuracy["recipe"] for fw, (r, _) in trained.items()}
    global_batch = WORKERS * BATCH
    assert recorded == dict.fromkeys(("caffe2", "jax", "tf", "mxnet"), recipe.record(
        global_batch, 128 // global_batch, EPOCHS, 32))
    for fw, (r, _) in trained.items():
        assert r.settings["weight_decay_on"] == recipe.WEIGHT_DECAY_ON
        assert "label smoothing {:g}".format(recipe.LABEL_SMOOTHING) in r.settings["loss"]


def test_an_unreachable_target_is_not_converged_with_the_best_accuracy(tmp_path, folder):
    result, log = _run("caffe2", tmp_path, folder, target_accuracy=1.0, max_epochs=1)
    a = result.accuracy
    assert result.status == "not_converged"
    assert a["evals"][0]["total"] == 52 and a["best"] == a["evals"][0]["accuracy"]
    assert result.reason == "target accuracy 1 not reached: best top-1 {:.4f} (1 epoch " \
        "trained)".format(a["best"])
    assert a["epochs"] == 1 and a["epochs_to_target"] is None and not a["reached"]
    assert mlperf.check(str(log)).passed


def test_warm_up_changes_no_state_and_set_up_reads_no_image(folder):
    out = run_in_backend("caffe2", """
import torch
from backends.protocol import RunSpec
from backends.caffe2_torch.accuracy import setup
t = setup(RunSpec(framework='caffe2', backend='caffe2_torch', batch_size=4, image_size=32,
                  num_classes=4, data={!r}, target_accuracy=0.5))
before = {{k: v.clone() for k, v in t.model.state_dict().items()}}
t.warm_up()
after = t.model.state_dict()
print(all(torch.equal(before[k], after[k]) for k in before), len(t.optimizer.state),
      t.feed is None and t.val is None, [g["weight_decay"] for g in t.optimizer.param_groups])
""".format(folder))
    same, momentum, no_pipeline, decay = out.split(" ", 3)
    assert (same, momentum, no_pipeline) == ("True", "0", "True")  # BN statistics included
    assert decay.strip() == "[{}, 0.0]".format(recipe.WEIGHT_DECAY)
