"""TensorFlow (+Horovod) backend, on the CPU, in its managed environment (built on first use).

The model is the PyTorch model's twin (same trainable count); the loss falls; fp32 really runs
with TF32 off; 1 and 2 workers run end to end through the launcher (Horovod over Gloo, and
MirroredStrategy over logical CPU devices); a TF crash is a recorded `failed` result.
"""
import json
import os

import pytest

from backends import options
from backends import tf_horovod as tf_backend
from backends.protocol import RunSpec, read_result, write_spec
from tests import helpers
from tests.helpers import TINY_RUN, run_compare, run_in_backend, torch_layers

pytestmark = pytest.mark.backend  # a real framework in its environment

TORCH_TRAINABLE = helpers.RESNET50_TRAINABLE
BN_RUNNING_STATS = helpers.RESNET50_BN_RUNNING_STATS


def run_backend(tmp_path, timeout=600, **fields):
    """Run one spec of this backend through its command(); return (RunResult, proc)."""
    return helpers.run_backend("tf", tmp_path, timeout, **fields)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The host CLI end to end, once for the module (a TensorFlow cell costs 10-30 s on 2 cores):
    1 and 2 workers x fp32, bf16 in the managed environment, then its JSON report. The tests of
    one worker in fp32 and of two under Horovod read its cells."""
    campaign = tmp_path_factory.mktemp("sweep") / "campaign"
    run_compare(["run", "--frameworks", "tf", "--gpus", "1,2", "--precision", "fp32,bf16",
                 "--quick", "--executor", "local", "--results", str(campaign)] + TINY_RUN)
    run_compare(["report", str(campaign), "--format", "json"], timeout=300)
    return campaign


def _cell(campaign, run_id):
    """A cell's RunResult and its stderr (the launcher's and the workers')."""
    return (read_result(str(campaign / "results" / (run_id + ".json"))),
            (campaign / "logs" / (run_id + ".stderr")).read_text())


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory):
    """`compare run --option distribution=mirrored` on two workers: its one cell."""
    campaign = tmp_path_factory.mktemp("mirrored") / "campaign"
    run_compare(["run", "--frameworks", "tf", "--gpus", "2", "--precision", "fp32", "--quick",
                 "--option", "distribution=mirrored", "--executor", "local", "--results",
                 str(campaign)] + TINY_RUN, timeout=900)
    return [read_result(str(p)) for p in (campaign / "results").glob("*.json")]


def test_trainable_parameters_equal_the_pytorch_model():
    out = run_in_backend("tf", (
        "from backends.tf_horovod.resnet import resnet50\n"
        "from backends.tf_horovod.models import trainable_parameters, non_trainable_parameters\n"
        "m = resnet50(1000, 64)\n"
        "print(trainable_parameters(m), non_trainable_parameters(m))"))
    trainable, running_stats = map(int, out.split()[-2:])
    assert trainable == TORCH_TRAINABLE
    assert running_stats == BN_RUNNING_STATS


def test_same_architecture_as_pytorch_layer_by_layer():
    """Conv and BN shapes in order: strides on the 3x3 conv (v1.5), no biases, same widths."""
    out = run_in_backend("tf", (
        "import json\n"
        "from backends.tf_horovod.resnet import resnet50\n"
        "m = resnet50(1000, 224)\n"
        "print(json.dumps([[l.strides[0], l.kernel.shape.as_list()] for l in m.layers "
        "if l.__class__.__name__ == 'Conv2D' and 'down' not in l.name]))"))
    keras_convs = json.loads(out.strip().splitlines()[-1])
    assert keras_convs == torch_layers()["main_convs"]


def test_loss_falls_on_one_fixed_batch():
    out = run_in_backend("tf", (
        "from backends.protocol import RunSpec\n"
        "from backends.tf_horovod.train import setup\n"
        "t = setup(RunSpec('tf', 'tf_horovod', batch_size=8, image_size=32, learning_rate=0.05))\n"
        "losses = []\n"
        "for _ in range(20):\n"
        "    t.step(); losses.append(t.loss())\n"
        "print(t.distribution, losses[0], losses[-1])"))
    distribution, first, last = out.split()[-3:]
    assert distribution == "single"
    assert float(last) < 0.5 * float(first), (first, last)


def test_fp32_runs_with_tf32_off(sweep):
    result, _ = _cell(sweep, "tf-fp32-w1-b4-s32-r0")
    assert result.status == "ok", result.reason
    assert result.settings["tensor_float_32_execution"] is False
    # the common layout rule: NCHW on a CPU unless asked, read back from the built model
    assert (result.settings["layout"], result.settings["data_format"]) == ("NCHW", "channels_first")
    assert (result.settings["xla"], result.settings["optimizer_jit_compile"]) == (False, False)
    assert result.settings["compiler"] is None
    assert result.settings["policy"] == "float32"
    assert result.settings["trainable_parameters"] == TORCH_TRAINABLE
    assert result.environment["env"]["NVIDIA_TF32_OVERRIDE"] == "0"
    assert result.framework_version.startswith("tensorflow ")
    assert result.images_per_sec > 0 and result.global_batch == 4


def test_tf32_on_cpu_is_unsupported_with_a_reason(tmp_path):
    result, proc = run_backend(tmp_path, precision="tf32")
    assert result.status == "unsupported"
    assert "CPU" in result.reason
    assert proc.returncode == 0


@pytest.mark.parametrize("precision,policy", [("bf16", "mixed_bfloat16"),
                                              ("fp16", "mixed_float16")])
def test_mixed_precision_policies(tmp_path, precision, policy):
    # NHWC: TF's CPU max-pooling has no float16 NCHW kernel (next test)
    result, _ = run_backend(tmp_path, precision=precision, options={"channels_last": True})
    assert result.status == "ok", result.reason
    assert result.settings["policy"] == policy
    assert result.settings["loss_scaling"] == ("dynamic" if precision == "fp16" else None)
    # fp16 always has a note on a CPU (no tensor cores); bf16 where the CPU has no bf16 instructions
    assert ("note" in result.settings) is (precision == "fp16" or not helpers.BF16_INSTRUCTIONS)
    if precision == "bf16" and not helpers.BF16_INSTRUCTIONS:
        assert result.settings["note"].startswith("bf16 on a CPU without bf16 instructions (neither "
                                                  "avx512_bf16 nor amx_bf16")


def test_fp16_in_nchw_on_the_cpu_is_unsupported_with_tensorflows_reason(tmp_path):
    result, proc = run_backend(tmp_path, precision="fp16")  # NCHW: the CPU default
    assert result.status == "unsupported"
    assert result.reason == ("float16 NCHW on /cpu:0: tensorflow 2.15.1 says: Default "
                             "MaxPoolingOp only supports NHWC on device type CPU "
                             "(--option channels_last=true runs NHWC)")
    assert proc.returncode == 0


def test_two_workers_run_under_horovod(sweep):
    result, stderr = _cell(sweep, "tf-fp32-w2-b4-s32-r0")
    assert result.status == "ok", result.reason
    assert result.distribution == "horovod"
    assert result.world_size == 2 and result.global_batch == 8
    assert result.settings["horovod_version"] == "0.28.1"
    assert result.settings["horovod_controller"] == "gloo"
    # read from horovod.tensorflow in the worker: this env's Horovod has no GPU all-reduce
    assert result.settings["horovod_build"] == {"gloo": True, "mpi": False, "nccl": False,
                                                "cuda": False}
    assert result.settings["allreduce"] == "horovod DistributedGradientTape"
    # each of the two worker processes gets its share of the cores
    assert result.settings["intra_op_threads"] == max(1, (os.cpu_count() or 1) // 2)
    assert "horovod.runner.launch" in stderr


def test_two_logical_cpu_devices_under_mirrored_strategy(mirrored):
    result = mirrored[0]
    assert result.status == "ok", result.reason
    assert result.distribution == "mirrored"
    assert result.settings["replicas"] == 2
    assert result.global_batch == 8
    # read back from the strategy, not the name the code meant to pass
    assert result.settings["allreduce"] == "MirroredStrategy ReductionToOneDevice"


def test_xla_with_two_workers_averages_with_grouped_allreduce(tmp_path):
    # the Keras 3 path too: DistributedGradientTape cannot wrap an XLA-compiled tape
    result, _ = run_backend(tmp_path, gpus=2, options={"xla": True})
    assert result.status == "ok", result.reason
    assert result.distribution == "horovod"
    assert result.settings["xla"] is True
    assert result.settings["allreduce"] == "horovod grouped_allreduce"


def _entry_without_horovod(tmp_path, **fields):
    """Run the horovod launcher in the env as if horovod.tensorflow were not built there."""
    spec = RunSpec(framework="tf", backend="tf_horovod", gpus=2, batch_size=4, image_size=32,
                   warmup_steps=1, steps=2, windows=1, **fields)
    spec_path, result_path = tmp_path / "spec.json", tmp_path / "result.json"
    write_spec(str(spec_path), spec)
    out = run_in_backend("tf", (
        "import sys\n"
        "from backends.launchers import horovod as launch\n"
        "print('built', launch.horovod_tensorflow_built())\n"
        "launch.horovod_tensorflow_built = lambda: False\n"
        "print('exit', launch.main([sys.executable, '-m', 'backends.tf_horovod', {!r}, {!r}]))".format(
            str(spec_path), str(result_path))))
    assert "built True" in out  # the real check finds the Horovod this env built
    return read_result(str(result_path))


def test_without_horovod_two_workers_fall_back_to_mirrored_and_say_so(tmp_path):
    result = _entry_without_horovod(tmp_path)
    assert result.status == "ok", result.reason
    assert result.distribution == "mirrored"
    assert result.settings["distribution_note"].startswith("horovod.tensorflow is not built in ")
    assert result.settings["distribution_note"].endswith(": MirroredStrategy instead")


def test_asking_for_horovod_where_it_is_not_built_is_unsupported(tmp_path):
    result = _entry_without_horovod(tmp_path, options={"distribution": "horovod"})
    assert result.status == "unsupported"
    assert "horovod.tensorflow is not built" in result.reason


def test_mirrored_strategy_makes_each_replicas_batch_on_its_own_device():
    out = run_in_backend("tf", (
        "from backends.protocol import RunSpec\n"
        "from backends.tf_horovod.train import setup\n"
        "t = setup(RunSpec('tf', 'tf_horovod', gpus=2, batch_size=2, image_size=32,"
        " options={'distribution': 'mirrored'}))\n"
        "print(*[v.device for v in t.images.values + t.labels.values])"))
    devices = out.split()[-4:]
    assert [d.rsplit("/", 1)[-1] for d in devices] == ["device:CPU:0", "device:CPU:1"] * 2


def test_mirrored_strategy_over_gpus_is_given_nccl_all_reduce():
    # built over logical CPU devices (no GPU here): the op is held, used only at the first step
    out = run_in_backend("tf", (
        "import tensorflow as tf\n"
        "cpu = tf.config.list_physical_devices('CPU')[0]\n"
        "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)\n"
        "from backends.tf_horovod.runtime import make_strategy, allreduce_name\n"
        "print(allreduce_name(make_strategy(['/cpu:0', '/cpu:1'], gpu=True)),"
        " allreduce_name(make_strategy(['/cpu:0', '/cpu:1'], gpu=False)),"
        " allreduce_name(tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])))"))
    assert out.split()[-3:] == ["NcclAllReduce", "ReductionToOneDevice", "CollectiveAllReduce"]


def test_keras2_optimizer_compiles_its_update_only_when_asked_even_with_a_gpu_visible():
    """Keras 2 turns jit_compile on whenever a GPU is visible: make one look visible to it."""
    out = run_in_backend("tf", (
        "import tensorflow as tf\n"
        "from keras.src.optimizers import optimizer as keras_optimizer\n"
        "config = keras_optimizer.tf.config\n"
        "real = config.list_physical_devices\n"
        "config.list_physical_devices = lambda kind=None: ['GPU:0'] if kind == 'GPU' else real(kind)\n"
        "from backends.tf_horovod.train import make_optimizer, optimizer_jit_compile as jit\n"
        "print(tf.keras.optimizers.SGD(0.1).jit_compile,"
        " jit(make_optimizer(0.1, 0.9, xla=False, loss_scaling=False)),"
        " jit(make_optimizer(0.1, 0.9, xla=False, loss_scaling=True)),"
        " jit(make_optimizer(0.1, 0.9, xla=True, loss_scaling=True)))"))
    assert out.split()[-4:] == ["True", "False", "False", "True"]  # Keras' default, then ours


def test_channels_last_runs_nhwc_and_is_read_back(tmp_path):
    assert options.CHANNELS_LAST in tf_backend.OPTIONS  # the option every backend shares
    result, _ = run_backend(tmp_path, options={"channels_last": True})
    assert result.status == "ok", result.reason
    assert result.spec["options"] == {"channels_last": True}
    assert (result.settings["layout"], result.settings["data_format"]) == ("NHWC", "channels_last")


def test_a_tensorflow_crash_is_a_failed_result(tmp_path):
    # no classes: TF refuses to draw labels from an empty range, inside the run
    result, proc = run_backend(tmp_path, num_classes=0)
    assert result.status == "failed"
    assert result.reason.startswith("InvalidArgumentError"), result.reason
    assert "minval < maxval" in result.reason
    assert proc.returncode == 1


def test_an_unknown_distribution_names_the_valid_ones(tmp_path):
    result, _ = run_backend(tmp_path, gpus=2, options={"distribution": "ring"})
    assert result.status == "failed"
    assert "auto, horovod, mirrored" in result.reason


def test_tensorflow_out_of_memory_is_classified_as_oom():
    out = run_in_backend("tf", (
        "import tensorflow as tf\n"
        "from backends.harness import is_oom\n"
        "e = tf.errors.ResourceExhaustedError(None, None, 'OOM when allocating tensor')\n"
        "print(is_oom(e), is_oom(tf.errors.InvalidArgumentError(None, None, 'bad shape')))"))
    assert out.split()[-2:] == ["True", "False"]


def test_compare_run_sweeps_workers_and_precisions_and_reports(sweep):
    """The host CLI end to end: 1 and 2 workers x fp32, bf16; 2 workers run under Horovod."""
    campaign = sweep
    rows = json.loads((campaign / "report" / "report.json").read_text())
    cells = {(r["precision"], r["gpus"]): r for r in rows}
    assert set(cells) == {(p, n) for p in ("fp32", "bf16") for n in (1, 2)}
    for (precision, n), cell in cells.items():
        if precision == "bf16" and not helpers.AVX512:  # no bf16 NCHW pooling kernel here
            assert cell["status"] == "unsupported"
            assert "tensorflow 2.15.1 says: Default MaxPoolingOp only supports NHWC" in cell["reason"]
            continue
        assert cell["status"] == "ok", cell["reason"]
        assert cell["images_per_sec"] > 0
        assert cell["distribution"] == ("horovod" if n > 1 else "single")
    for path in (campaign / "results").glob("*.json"):
        result = json.loads(path.read_text())
        if result["status"] == "ok":  # an unsupported cell stops before its model is built
            helpers.assert_phases(result)


def test_compare_run_can_force_mirrored_strategy(mirrored):
    results = mirrored
    assert len(results) == 1
    assert results[0].status == "ok", results[0].reason
    assert results[0].distribution == "mirrored"
    assert results[0].settings["replicas"] == 2
