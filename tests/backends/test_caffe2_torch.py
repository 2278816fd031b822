"""The PyTorch backend, run for real on the CPU in its own environment."""
from tests.conftest import (RESNET50_BN_RUNNING_STATS, RESNET50_TRAINABLE, run_backend,
                            run_in_backend)


def test_resnet50_v15_parameter_count():
    out = run_in_backend("caffe2", """
from backends.caffe2_torch.resnet50 import ResNet50, trainable_parameters
m = ResNet50()
print(trainable_parameters(m), sum(b.numel() for n, b in m.named_buffers() if 'running' in n))
print(tuple(m.layer2[0].conv2.stride), tuple(m.layer2[0].conv1.stride), m.conv1.bias)
""")
    counts, strides = out.splitlines()
    assert counts == "{} {}".format(RESNET50_TRAINABLE, RESNET50_BN_RUNNING_STATS)
    assert strides == "(2, 2) (1, 1) None"  # v1.5: the stride is on the 3x3 conv, no conv bias


def test_loss_falls_over_20_steps_on_one_batch():
    out = run_in_backend("caffe2", """
from backends.protocol import RunSpec
from backends.caffe2_torch.train import setup
t = setup(RunSpec(framework='caffe2', backend='caffe2_torch', batch_size=8, image_size=32,
                  num_classes=10, learning_rate=0.05))
losses = []
for _ in range(20):
    t.step(); losses.append(t.loss())
print(losses[0], losses[-1])
""")
    first, last = map(float, out.split())
    assert last < 0.5 * first, (first, last)


def _run_spec(tmp_path, **kw):
    result, _ = run_backend("caffe2", tmp_path, warmup_steps=1, steps=2, **kw)
    return result.to_dict()


def test_fp32_records_tf32_off(tmp_path):
    r = _run_spec(tmp_path, precision="fp32")
    assert r["status"] == "ok"
    s = r["settings"]
    assert (s["allow_tf32_matmul"], s["allow_tf32_cudnn"], s["float32_matmul_precision"]) == \
        (False, False, "highest")
    assert s["trainable_parameters"] == RESNET50_TRAINABLE


def test_tf32_on_cpu_is_unsupported_with_reason(tmp_path):
    r = _run_spec(tmp_path, precision="tf32")
    assert r["status"] == "unsupported"
    assert "no tensor-core" in r["reason"] or "CPU has none" in r["reason"]


def test_compile_and_channels_last_switches_run_on_cpu(tmp_path):
    r = _run_spec(tmp_path, precision="bf16", compile=True, options={"channels_last": True})
    assert r["status"] == "ok", r.get("reason")
    assert (r["settings"]["compile"], r["settings"]["channels_last"]) == (True, True)
    assert r["settings"]["autocast_dtype"] == "bfloat16"
