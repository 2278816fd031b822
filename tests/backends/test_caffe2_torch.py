"""The PyTorch backend, run for real on the CPU in its own environment."""
import json

import pytest

from backends import caffe2_torch, options
from tests.helpers import (
    RESNET50_BN_RUNNING_STATS,
    RESNET50_TRAINABLE,
    TINY_RUN,
    run_backend,
    run_compare,
    run_in_backend,
)

pytestmark = pytest.mark.backend  # a real framework in its environment


def test_resnet50_v15_parameter_count():
    out = run_in_backend("caffe2", """
from backends.caffe2_torch.models import trainable_parameters
from backends.caffe2_torch.resnet import ResNet50
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
    # the common layout rule (backends/options.CHANNELS_LAST): NCHW on a CPU unless asked
    assert options.CHANNELS_LAST in caffe2_torch.OPTIONS
    assert (s["channels_last"], s["layout"]) == (False, "NCHW")


def test_tf32_on_cpu_is_unsupported_with_reason(tmp_path):
    r = _run_spec(tmp_path, precision="tf32")
    assert r["status"] == "unsupported"
    assert "no tensor-core" in r["reason"] or "CPU has none" in r["reason"]


def test_compile_and_channels_last_switches_run_on_cpu(tmp_path):
    r = _run_spec(tmp_path, precision="bf16", compile=True, options={"channels_last": True})
    assert r["status"] == "ok", r.get("reason")
    assert (r["settings"]["compiler"], r["settings"]["channels_last"]) == ("torch.compile default", True)
    assert r["settings"]["layout"] == "NHWC"
    assert r["settings"]["autocast_dtype"] == "bfloat16"


def test_inductor_tuning_sets_inductors_own_switches_and_is_recorded():
    out = run_in_backend("caffe2", """
import torch._inductor.config as c
from backends.protocol import RunSpec
from backends.caffe2_torch.train import setup
for how in ('coordinate', 'both', 'off'):
    t = setup(RunSpec(framework='caffe2', backend='caffe2_torch', batch_size=2, image_size=32,
                      num_classes=10, compile=True, options={'inductor_tuning': how}))
    print(how, c.coordinate_descent_tuning, c.max_autotune_pointwise,
          t.describe()['settings']['inductor_tuning'])
t = setup(RunSpec(framework='caffe2', backend='caffe2_torch', batch_size=2, image_size=32,
                  num_classes=10, options={'inductor_tuning': 'both'}))
print('eager', t.describe()['settings']['inductor_tuning'])
""")
    assert out.splitlines() == ["coordinate True False coordinate", "both True True both",
                                "off False False off", "eager None"]


@pytest.mark.parametrize("given,expected", [("false", False), ("yes", True)])
def test_channels_last_option_is_recorded_typed_and_really_switches_the_layout(tmp_path, given, expected):
    campaign = tmp_path / "c"
    run_compare(["run", "--frameworks", "caffe2", "--device", "cpu", "--executor", "local",
                 "--precision", "fp32", "--option", "channels_last=" + given,
                 "--results", str(campaign)] + TINY_RUN)
    r = json.loads((campaign / "results" / "caffe2-fp32-w1-b4-s32-r0.json").read_text())
    assert r["status"] == "ok", r["reason"]
    assert r["spec"]["options"] == {"channels_last": expected}  # a bool, not the string typed
    # read back from the batch tensor's memory format inside the backend
    assert (r["settings"]["channels_last"], r["settings"]["layout"]) == \
        (expected, "NHWC" if expected else "NCHW")
