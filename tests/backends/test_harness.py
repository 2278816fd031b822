"""The one timing loop, driven by a stdlib trainer: what is timed, and failures as results."""
import json
import time

from backends import harness
from backends.protocol import RunSpec, Unsupported


class SleepTrainer(harness.Trainer):
    """Each step takes `dt` seconds; loss falls by one per step."""

    def __init__(self, dt):
        self.dt, self.steps = dt, 0

    def step(self):
        time.sleep(self.dt)
        self.steps += 1

    def loss(self):
        return 100.0 - self.steps

    def describe(self):
        return {"framework_version": "sleep 1.0", "settings": {"x": 1}}


def _spec(**kw):
    base = dict(framework="caffe2", backend="caffe2_torch", batch_size=10, gpus=2,
                warmup_steps=2, steps=10, windows=5)
    base.update(kw)
    return RunSpec(**base)


def test_global_images_per_sec_is_global_batch_times_steps_over_wall(tmp_path):
    trainer = SleepTrainer(0.01)
    result = harness.run(_spec(), str(tmp_path / "r.json"), lambda s: trainer)
    assert result.status == "ok"
    assert trainer.steps == 12  # 2 warm-up + 10 timed
    assert result.global_batch == 20
    assert abs(result.images_per_sec - 20 * 10 / result.wall_time_s) < 1e-9
    assert 1000 < result.images_per_sec <= 2000  # 20 images per >= 10 ms step
    assert len(result.window_images_per_sec) == 5
    assert result.first_loss == 98.0 and result.final_loss == 88.0
    on_disk = json.loads((tmp_path / "r.json").read_text())
    assert on_disk["status"] == "ok" and on_disk["settings"] == {"x": 1, "mode": "default"}


def test_windows_split_steps_evenly():
    assert harness.window_sizes(10, 3) == [4, 3, 3]
    assert harness.window_sizes(2, 5) == [1, 1]


def test_exception_in_framework_is_a_failed_result(tmp_path):
    def setup(spec):
        raise RuntimeError("cuDNN exploded")
    result = harness.run(_spec(), str(tmp_path / "r.json"), setup)
    assert result.status == "failed"
    assert result.reason == "RuntimeError: cuDNN exploded"
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "failed"


def test_out_of_memory_is_oom(tmp_path):
    class OutOfMemoryError(RuntimeError):
        pass

    def setup(spec):
        raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert harness.run(_spec(), str(tmp_path / "r.json"), setup).status == "oom"
    assert harness.run(_spec(), str(tmp_path / "m.json"),
                       lambda s: (_ for _ in ()).throw(MemoryError())).status == "oom"


def test_unsupported_keeps_its_reason(tmp_path):
    def setup(spec):
        raise Unsupported("tf32 is an NVIDIA tensor-core mode")
    result = harness.run(_spec(precision="tf32"), str(tmp_path / "r.json"), setup)
    assert (result.status, result.reason) == ("unsupported", "tf32 is an NVIDIA tensor-core mode")


def test_only_rank_zero_writes(tmp_path):
    trainer = SleepTrainer(0.0)
    trainer.rank = 1
    harness.run(_spec(), str(tmp_path / "r.json"), lambda s: trainer)
    assert not (tmp_path / "r.json").exists()


def test_one_window_has_no_uncertainty_rather_than_zero(tmp_path):
    result = harness.run(_spec(steps=1, windows=5), str(tmp_path / "r.json"), lambda s: SleepTrainer(0.0))
    assert result.status == "ok" and len(result.window_images_per_sec) == 1
    assert (result.uncertainty, result.jitter) == (None, None)  # n/a: one figure has no spread
    two = harness.run(_spec(steps=2, windows=2), str(tmp_path / "r2.json"), lambda s: SleepTrainer(0.0))
    assert two.uncertainty is not None and two.jitter is not None


def test_the_result_echoes_the_nonce_and_spec_hash_it_was_given(tmp_path):
    spec = _spec(nonce="feedface00000001")
    result = harness.run(spec, str(tmp_path / "r.json"), lambda s: SleepTrainer(0.0))
    on_disk = json.loads((tmp_path / "r.json").read_text())
    assert (on_disk["nonce"], on_disk["spec_hash"]) == ("feedface00000001", spec.spec_hash)
    assert result.spec_hash == _spec(nonce="other", repeat=3).spec_hash  # not a setting
    assert result.spec_hash != _spec(steps=11).spec_hash


FAKE_BACKEND = {
    "__init__.py": "OPTIONS = ()\nprepared = []\n\n\ndef prepare(spec):\n    prepared.append(spec.run_id)\n",
    "runtime.py": (
        "import time\n"
        "from backends import phases\n"
        "from backends.trainer import Runtime\n\n\n"
        "def start(spec):\n"
        "    time.sleep(0.01)\n"
        "    phases.mark('devices_ready')\n"
        "    return Runtime()\n"),
    "train.py": (
        "from backends.trainer import RuntimeTrainer\n\n\n"
        "class Idle(RuntimeTrainer):\n"
        "    def step(self):\n"
        "        pass\n\n\n"
        "def setup(spec, runtime):\n"
        "    trainer = Idle()\n"
        "    trainer.runtime = runtime\n"
        "    return trainer\n"),
}


def test_a_backend_folder_is_run_prepare_then_runtime_then_trainer_phases_in_order(tmp_path, monkeypatch):
    """harness.entry(package): the package's prepare(spec), its runtime (the framework imported,
    then the devices), its trainer; the phases come out in their order."""
    import importlib
    import sys

    from backends import phases
    package = tmp_path / "fake_backend"
    package.mkdir()
    for name, text in FAKE_BACKEND.items():
        (package / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(phases, "_marks", {})
    result = harness.run(_spec(steps=2, windows=1), str(tmp_path / "r.json"),
                         harness.backend_setup("fake_backend"))
    assert result.status == "ok", result.reason
    assert importlib.import_module("fake_backend").prepared == [result.run_id]
    marks = result.phases
    assert marks["framework_imported"] <= marks["devices_ready"] <= marks["model_built"]
    sys.modules.pop("fake_backend", None)


# TensorFlow 2.12's message for an out-of-memory inside a tf.function (trimmed frames repeated to
# its real length): the graph's Python traceback first, the error itself near the end
TF_FRAMES = "".join(
    "    File \"/usr/local/lib/python3.10/dist-packages/keras/engine/training.py\", line {}, in "
    "train_step\n      y_pred = self(x, training=True)\n".format(1000 + i) for i in range(40))
TF_OOM_LINE = ("OOM when allocating tensor with shape[256,64,112,112] and type half on "
               "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc")
TF_OOM_MESSAGE = (
    "Graph execution error:\n\n"
    "Detected at node 'resnet50/conv1/Conv2D' defined at (most recent call last):\n" + TF_FRAMES +
    "Node: 'resnet50/conv1/Conv2D'\n" + TF_OOM_LINE + "\n"
    "\t [[{{node resnet50/conv1/Conv2D}}]]\n"
    "Hint: If you want to see a list of allocated tensors when OOM happens, add "
    "report_tensor_allocations_upon_oom to RunOptions for current allocation info. This isn't "
    "available when eager execution is enabled.\n"
    " [Op:__inference_train_function_12345]")


def _failed_with(tmp_path, exc):
    def setup(spec):
        raise exc
    return harness.run(_spec(), str(tmp_path / "r.json"), setup)


def test_a_long_tensorflow_error_is_recorded_with_its_own_line_first(tmp_path):
    """Reports show a reason's first line. Before, the reason was the type and the message's last
    2000 characters, whose first line here was 'ResourceExhaustedError: ng=True)': a frame cut."""
    class ResourceExhaustedError(RuntimeError):
        pass
    assert len(TF_OOM_MESSAGE) > 4000
    result = _failed_with(tmp_path, ResourceExhaustedError(TF_OOM_MESSAGE))
    assert result.status == "oom"
    lines = result.reason.splitlines()
    assert lines[0] == "ResourceExhaustedError: " + TF_OOM_LINE
    assert lines[1].startswith("…") and result.reason.endswith(" [Op:__inference_train_function_12345]")
    assert len(result.reason) < 2200  # the context is the message's tail, as before


def test_an_error_raised_in_another_process_is_named_by_its_own_line(tmp_path):
    # PyTorch re-raises a DataLoader worker's error with the worker's traceback in the message;
    # MXNet's engine puts its C++ frames before its error
    worker = ("Caught RuntimeError in DataLoader worker process 0.\n"
              "Original Traceback (most recent call last):\n"
              "  File \"/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py\", line 308, "
              "in _worker_loop\n    data = fetcher.fetch(index)\n"
              "RuntimeError: stack expects each tensor to be equal size, but got [3, 224, 224] at "
              "entry 0 and [3, 200, 200] at entry 1\n")
    result = _failed_with(tmp_path, RuntimeError(worker))
    assert result.reason.splitlines()[0] == (
        "RuntimeError: stack expects each tensor to be equal size, but got [3, 224, 224] at entry 0 "
        "and [3, 200, 200] at entry 1")
    assert result.reason.endswith(worker.strip())

    class MXNetError(Exception):
        pass
    engine = ("Traceback (most recent call last):\n"
              "  [bt] (1) /usr/local/lib/python3.8/dist-packages/mxnet/libmxnet.so(+0x2d5b9b) [0x7f]\n"
              "  File \"src/operator/nn/./cudnn/cudnn_convolution-inl.h\", line 1012\n"
              "MXNetError: cudnnFindConvolutionForwardAlgorithmEx failed: CUDNN_STATUS_ALLOC_FAILED")
    result = _failed_with(tmp_path, MXNetError(engine))
    assert (result.status, result.reason.splitlines()[0]) == (
        "oom", "MXNetError: cudnnFindConvolutionForwardAlgorithmEx failed: CUDNN_STATUS_ALLOC_FAILED")
    # a message that is its own first line stays one line, under its own exception's name
    assert _failed_with(tmp_path, KeyError("images")).reason == "KeyError: 'images'"
    assert _failed_with(tmp_path, SystemError("RuntimeError: x")).reason == "SystemError: RuntimeError: x"
