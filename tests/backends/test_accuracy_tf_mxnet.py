"""The TensorFlow and MXNet time-to-accuracy trainers' own guarantees, on the CPU in their
managed environments (their cells beside PyTorch's and JAX's, with two workers, and the four
frameworks' recipe: tests/backends/test_accuracy.py): one worker trains an epoch of ResNet-50 on
a learnable folder (10 classes, 80 + 40 JPEGs, 32x32 crops) from its own input pipeline
(TFRecord, RecordIO) through the harness, and records the cell and an MLPerf log that passes
mlperf-logging's checker; warm_up leaves every variable as it was; the optimizer's update is
torch.optim.SGD's at a rate that changes every step (TF: without tracing the step again); MXNet's
fp16 on a CPU is `unsupported` with MXNet's words.
"""
import numpy as np
import pytest

from backends import recipe
from compare import mlperf
from tests import helpers

pytestmark = pytest.mark.backend  # real frameworks in their environments

TRAIN, VAL, BATCH, EPOCHS = 80, 40, 16, 1
SPEC = dict(batch_size=BATCH, image_size=32, num_classes=10, target_accuracy=0.9,
            max_epochs=EPOCHS)
RESNET50_ARRAYS = 161 + 106  # trained (conv, dense, BN scale and shift) + BN running statistics
RATES = (0.5, 0.1, 0.3)  # a rate that changes every step: where SGD's two forms differ

# each wrap(trainer, report) runs in the backend after set-up: it checks warm_up by comparing
# every variable before and after, and runs the recipe's SGD on a 3x2 weight (0.5, gradient 1)
# and a bias (0, gradient 1) at RATES
TF_WRAP = """
import numpy as np
def sgd():  # tensorflow is imported by then (after the backend's prepare() set its options)
    import tensorflow as tf
    from backends.tf_horovod.accuracy import RecipeSGD
    w, b = tf.Variable(tf.fill((3, 2), 0.5)), tf.Variable(tf.zeros((3,)))
    opt = RecipeSGD(learning_rate=0.0, momentum=0.9, jit_compile=False)
    opt.build([w, b])
    apply = tf.function(lambda: opt.apply_gradients([(tf.ones((3, 2)), w), (tf.ones((3,)), b)]))
    for lr in %r:
        opt.learning_rate = lr
        apply()
    return {"weight": w.numpy().tolist(), "bias": b.numpy().tolist(),
            "traces": apply.experimental_get_tracing_count()}
def wrap(trainer, report):
    state = lambda: [v.numpy().copy() for v in list(trainer.model.variables) +
                     list(trainer.optimizer.variables)]
    warm_up = trainer.warm_up
    def checked():
        before = state(); warm_up(); after = state()
        report["changed"] = [len(before), sum(not np.array_equal(a, b) for a, b in zip(before, after))]
    trainer.warm_up = checked
    report["sgd"] = sgd()
""" % (RATES,)
MXNET_WRAP = """
import os, pickle, tempfile
import mxnet as mx, numpy as np
from mxnet import gluon
from backends.mxnet.accuracy import RecipeSGD
def sgd():  # on 2 contexts, as a kvstore run updates: one optimizer for both
    contexts = [mx.cpu(0), mx.cpu(1)]
    net = gluon.nn.Dense(3, in_units=2)
    net.initialize(mx.init.Constant(0.5), ctx=contexts)  # the weight; Dense's bias starts at 0
    trainer = gluon.Trainer(net.collect_params(), RecipeSGD(learning_rate=0.0), kvstore="device",
                            update_on_kvstore=False)
    for lr in %r:
        trainer.set_learning_rate(lr)
        with mx.autograd.record():
            outs = [net(mx.nd.ones((1, 2), ctx=c)).sum() for c in contexts]
        mx.autograd.backward(outs)
        trainer.step(2)  # the mean of the two contexts' gradients: every one 1
    return {"weight": [w.asnumpy().tolist() for w in net.weight.list_data()],
            "bias": [b.asnumpy().tolist() for b in net.bias.list_data()]}
def optimizer_state(trainer):
    path = os.path.join(tempfile.mkdtemp(), "states")
    trainer.save_states(path)
    with open(path, "rb") as f:
        states, optimizer = pickle.loads(f.read())
    return [len(states), optimizer.num_update]
def wrap(trainer, report):
    state = lambda: [d.asnumpy() for p in trainer.net.collect_params().values() for d in p.list_data()]
    warm_up = trainer.warm_up
    def checked():
        before = state(); warm_up(); after = state()
        report["changed"] = [len(before), sum(not np.array_equal(a, b) for a, b in zip(before, after))]
        report["optimizer"] = optimizer_state(trainer.trainer)
    trainer.warm_up = checked
    report["sgd"] = sgd()
""" % (RATES,)
WRAPS = {"tf": TF_WRAP, "mxnet": MXNET_WRAP}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return helpers.learnable_folder(tmp_path_factory.mktemp("data") / "learnable", ("tf", "mxnet"),
                                    train_per_class=TRAIN // 10, val_per_class=VAL // 10)


@pytest.fixture(scope="module")
def cell(folder, tmp_path_factory):
    """framework -> (RunResult, wrap's report, MLPerf log) of its one-worker cell, run once."""
    done = {}

    def run(framework):
        if framework not in done:
            out = tmp_path_factory.mktemp(framework)
            result, report = helpers.run_wrapped(framework, out, WRAPS[framework],
                                                 data=str(folder), **SPEC)
            done[framework] = result, report, out / "mlperf.log"
        return done[framework]
    return run


def torch_sgd(start: float, decays: bool) -> float:
    """torch.optim.SGD (momentum 0.9, weight decay if `decays`) on one value, gradient 1."""
    w, buf = start, 0.0
    for lr in RATES:
        buf = recipe.MOMENTUM * buf + 1.0 + (recipe.WEIGHT_DECAY * w if decays else 0.0)
        w -= lr * buf
    return w


@pytest.mark.parametrize("framework", ["tf", "mxnet"])
def test_the_cell_is_recorded_as_the_loop_says(cell, framework):
    result, _, _ = cell(framework)
    a = result.accuracy
    assert result.status in ("ok", "not_converged"), result.reason
    tops = [e["accuracy"] for e in a["evals"]]
    assert a["best"] == max(tops)
    if result.status == "not_converged":
        assert result.reason == "target accuracy 0.9 not reached: best top-1 {:.4f} (1 epoch " \
                                "trained)".format(a["best"])
    else:
        assert a["epochs_to_target"] == a["epochs"] and tops[-1] >= 0.9
    assert [e["epoch"] for e in a["evals"]] == list(range(1, a["epochs"] + 1))
    assert {(e["total"], 0 <= e["correct"] <= VAL) for e in a["evals"]} == {(VAL, True)}
    assert a["steps_per_epoch"] == TRAIN // BATCH
    assert a["images_trained"] == a["epochs"] * (TRAIN // BATCH) * BATCH
    assert a["seed"] == result.spec["seed"] + 1000 * result.spec["repeat"]
    assert a["compile_s"] > 0 and a["time_to_train_s"] > 0


@pytest.mark.parametrize("framework", ["tf", "mxnet"])
def test_its_mlperf_log_passes_the_compliance_checker(cell, framework):
    _, _, log = cell(framework)
    check = mlperf.check(str(log))
    assert check.passed, check.line()


@pytest.mark.parametrize("framework", ["tf", "mxnet"])
def test_warm_up_leaves_every_variable_as_it_was(cell, framework):
    result, report, _ = cell(framework)
    variables, changed = report["changed"]
    # ResNet-50's 161 trained arrays and 106 BN statistics; TF: its 161 momentum slots, iterations
    assert (variables, changed) == (RESNET50_ARRAYS + (162 if framework == "tf" else 0), 0)
    if framework == "mxnet":  # no momentum yet, no update counted: the first step makes them
        assert report["optimizer"] == [0, 0]


@pytest.mark.parametrize("framework", ["tf", "mxnet"])
def test_the_update_is_torch_sgds_with_decay_on_weights_only(cell, framework):
    _, report, _ = cell(framework)
    assert np.allclose(report["sgd"]["weight"], torch_sgd(0.5, True), rtol=1e-6, atol=0)
    assert np.allclose(report["sgd"]["bias"], torch_sgd(0.0, False), rtol=1e-6, atol=0)
    result, _, _ = cell(framework)
    assert result.settings["optimizer_impl"].endswith("(torch.optim.SGD's update: w -= lr * buf)")


def test_tf_sets_the_rate_in_a_variable_without_retracing(cell):
    result, report, _ = cell("tf")
    assert report["sgd"]["traces"] == 1
    assert result.settings["train_step_traces"] == 1  # warm-up and every epoch: one trace


def test_mxnet_fp16_on_a_cpu_is_unsupported_with_mxnets_reason(folder, tmp_path):
    result, _ = helpers.run_backend("mxnet", tmp_path, data=str(folder), precision="fp16",
                                    **SPEC)
    assert result.status == "unsupported"
    assert "mxnet 1.9.1 says" in result.reason and "only supported by CuDNN" in result.reason
