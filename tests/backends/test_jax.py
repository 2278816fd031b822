"""JAX (Flax) backend, on the CPU, in its managed environment (jax 0.10.2, flax 0.12.8, optax 0.2.8).

The Flax model is the PyTorch model's twin (counts, every layer's shape and stride in order);
the loss falls; fp32 compiles every convolution and matmul at precision HIGHEST; 1 device and
2 devices with global BN give the same losses; 2 devices (one process, or two joined by
jax.distributed) all-reduce the gradients only; tf32 and a bad option are recorded with the
reason; the main job runs side by side with PyTorch. Sizes are tiny: compiles dominate.
"""
import json
import os

import pytest

from backends import jax as jax_backend
from backends.protocol import RunSpec
from tests import helpers
from tests.helpers import (
    RESNET50_BN_RUNNING_STATS,
    RESNET50_TRAINABLE,
    TINY_RUN,
    run_compare,
    run_in_backend,
    torch_layers,
)

pytestmark = pytest.mark.backend  # a real framework in its environment


def _json_out(code: str):
    return json.loads(run_in_backend("jax", code).strip().splitlines()[-1])


def test_same_network_as_pytorch_layer_by_layer():
    out = _json_out("""
import json, jax
from backends.jax.models import count, init, layers
from backends.jax.resnet import ResNet50
m = ResNet50(1000)
v = init(m, jax.random.PRNGKey(0), 64)
bn3 = [float(abs(b['bn3']['scale']).sum()) for k, b in v['params'].items() if k.startswith('layer')]
print(json.dumps({'trainable': count(v['params']), 'stats': count(v['batch_stats']),
                  'layers': layers(m, v, 64), 'bn3_scale_abs_sum': sum(bn3), 'blocks': len(bn3),
                  'conv_std': float(v['params']['layer4_1']['conv2']['kernel'].std()),
                  'fc_max': float(abs(v['params']['fc']['kernel']).max())}))
""")
    assert (out["trainable"], out["stats"]) == (RESNET50_TRAINABLE, RESNET50_BN_RUNNING_STATS)
    assert (out["blocks"], out["bn3_scale_abs_sum"]) == (16, 0.0)  # each residual branch starts at 0
    # PyTorch's init: kaiming_normal_(fan_out) convs, nn.Linear's uniform(+-1/sqrt(fan_in)) fc
    assert out["conv_std"] == pytest.approx((2 / (3 * 3 * 512)) ** 0.5, rel=0.01)
    assert 0.99 / 2048 ** 0.5 < out["fc_max"] <= 1 / 2048 ** 0.5 + 1e-7
    torch = torch_layers()
    convs = [entry for entry in out["layers"] if entry["kind"] == "Conv"]
    assert [s for entry in out["layers"] for s in entry["shapes"]] == torch["shapes"]
    assert [c["stride"] for c in convs] == torch["strides"]
    assert [[c["stride"], c["kernel"]] for c in convs if "downsample" not in c["path"]] == \
        torch["main_convs"]


@pytest.fixture(scope="module")
def trainers():
    """In one process with two CPU devices: an fp32 trainer on one device (batch 4) takes 20
    steps on its fixed batch; two on two devices (2 each) with sync_bn take its first 2, one
    with the gradients all-reduced as a tree of arrays, one as one flat buffer (the default)."""
    return _json_out("""
import json
from backends.protocol import RunSpec
from backends.jax import flags
from backends.world import World
def spec(gpus, **kw):
    return RunSpec(framework='jax', backend='jax', gpus=gpus, batch_size=4 // gpus, image_size=32,
                   num_classes=10, learning_rate=0.05, **kw)
flags.prepare(spec(2), World())  # two CPU devices in this process
from backends.jax.train import setup
one, two = setup(spec(1)), setup(spec(2, options={'sync_bn': True, 'flat_allreduce': False}))
flat = setup(spec(2, options={'sync_bn': True, 'flat_allreduce': True}))
out = {'one': [], 'two': [], 'flat': []}
for i in range(20):
    one.step(); out['one'].append(one.loss())
    if i < 2:
        two.step(); out['two'].append(two.loss())
        flat.step(); out['flat'].append(flat.loss())
ops = [line for line in one.lowered.as_text().splitlines()
       if 'stablehlo.convolution' in line or 'stablehlo.dot_general' in line]
out.update(ops=len(ops), highest=sum('HIGHEST' in line for line in ops),
           settings=one.describe()['settings'], two_settings=two.describe()['settings'],
           flat_settings=flat.describe()['settings'])
print(json.dumps(out))
""")


def test_loss_falls_over_20_steps_on_one_fixed_batch(trainers):
    losses = trainers["one"]
    assert losses[0] > 1.0  # 10 random classes: the first loss is far from zero
    assert losses[-1] < 0.5 * losses[0], losses


def test_fp32_compiles_every_conv_and_matmul_at_highest_precision(trainers):
    # 53 convs forward, 52 input gradients (not the stem's) and 53 weight gradients; the fc layer
    # forward and its two gradients
    assert trainers["ops"] == 53 + 52 + 53 + 3
    assert trainers["highest"] == trainers["ops"]
    s = trainers["settings"]
    assert (s["matmul_precision"], s["compute_dtype"], s["tf32"], s["loss_scaling"]) == \
        ("highest", "float32", False, None)
    ten_classes = RESNET50_TRAINABLE - 2049 * (1000 - 10)  # this fc has 10 outputs, not 1000
    assert (s["trainable_parameters"], s["bn_running_statistics"]) == \
        (ten_classes, RESNET50_BN_RUNNING_STATS)
    assert (s["layout"], s["compiler"], s["allreduce_ops"], s["devices"]) == \
        ("NHWC", "xla", 0, ["cpu:0"])


def test_fp16_dynamic_loss_scaling_skips_an_overflowing_step():
    """The train step's loss scaling, on a small float16 conv net (ResNet-50's fp16 step takes
    a minute to compile on a small CPU): a finite step moves the weights and counts; a step
    whose scaled loss overflows changes no weight, halves the scale, restarts the count."""
    out = _json_out("""
import json, jax, optax, jax.numpy as jnp, numpy as np
from flax import linen as nn
from jax.sharding import Mesh
from backends.jax import step
from backends.jax.resnet import ResNet
class Small(nn.Module):
    initial = staticmethod(ResNet.initial)  # PyTorch's initial values, as every network has
    @nn.compact
    def __call__(self, x, train=True):
        x = nn.Conv(8, (3, 3), use_bias=False, dtype=jnp.float16, name='conv1')(x)
        x = nn.BatchNorm(use_running_average=not train, dtype=jnp.float16, name='bn1')(x)
        return nn.Dense(10, dtype=jnp.float16, name='fc')(jnp.mean(nn.relu(x), axis=(1, 2)))
model, tx, mesh = Small(), optax.sgd(0.1, momentum=0.9), Mesh(np.array(jax.devices()[:1]), ('data',))
state = step.initial_state(model, tx, jax.random.PRNGKey(0), 8, mesh, dynamic_scale=True)
run = step.build(model, tx, mesh, state)
images, labels = jax.random.normal(jax.random.PRNGKey(1), (4, 8, 8, 3)), jnp.arange(4)
out = {'initial': [float(state.dynamic_scale.scale), int(state.dynamic_scale.fin_steps)]}
for name, value in (('fine', 1.0), ('overflow', 3e38)):
    kernel = np.asarray(state.params['conv1']['kernel']).copy()
    state = state._replace(dynamic_scale=state.dynamic_scale.replace(scale=jnp.float32(value)))
    state, _ = run(state, images, labels)
    out[name] = [float(state.dynamic_scale.scale), int(state.dynamic_scale.fin_steps),
                 not np.array_equal(kernel, state.params['conv1']['kernel'])]
plain = step.initial_state(model, tx, jax.random.PRNGKey(0), 8, mesh, dynamic_scale=False)
a, _ = step.build(model, tx, mesh, plain, donate=False)(plain, images, labels)
b, _ = step.build(model, tx, mesh, plain, donate=False, static_scale=1024.0)(plain, images, labels)
out['static_same_update'] = bool(np.allclose(a.params['conv1']['kernel'], b.params['conv1']['kernel'],
                                             rtol=1e-3, atol=1e-6))
out['checks'] = [bool(step.all_finite({'a': jnp.ones(3), 'b': (jnp.zeros((2, 2)), jnp.array(v))}))
                 for v in (1.0, np.inf, -np.inf, np.nan)]
print(json.dumps(out))
""")
    assert out["initial"] == [2.0 ** 16, 0]  # PyTorch GradScaler's initial scale
    assert out["fine"] == [1.0, 1, True]
    assert out["overflow"] == [pytest.approx(1.5e38, rel=1e-6), 0, False]
    assert out["static_same_update"]  # loss_scale=1024: scaled, unscaled, the same step
    assert out["checks"] == [True, False, False, False]  # one inf or NaN in any array is caught


def test_one_device_equals_two_devices_with_global_batch_norm(trainers):
    """Batch 4 on one device vs 2 + 2 on two devices with sync_bn: the same global batch (drawn
    independently of its sharding), the same BN statistics, the same averaged gradients, so the
    same losses step after step. (Per-device BN would normalise each half on its own.)"""
    assert trainers["two"] == pytest.approx(trainers["one"][:2], rel=1e-4)
    s = trainers["two_settings"]
    assert (s["bn_mode"], s["devices"]) == ("global (sync_bn)", ["cpu:0", "cpu:1"])
    assert s["allreduce_ops"] > 53  # BN statistics in every BN layer, besides the gradients


def test_flat_allreduce_gives_the_same_steps(trainers):
    """--option flat_allreduce=true: the gradients are averaged as one vector, then split back;
    the same numbers, so the same losses as the tree of arrays, and recorded as such."""
    assert trainers["flat"] == pytest.approx(trainers["two"], rel=1e-5)
    assert trainers["flat_settings"]["gradient_allreduce"] == "pmean once per step, one flat buffer"
    assert trainers["two_settings"]["gradient_allreduce"] == "pmean once per step"


def test_two_processes_joined_by_jax_distributed(tmp_path):
    flag = "--xla_gpu_autotune_level=2"  # any valid XLA flag: recorded, reaches every process
    result, proc = helpers.run_backend("jax", tmp_path, gpus=2, warmup_steps=1, steps=2, windows=1,
                                       options={"processes": 2, "xla_flags": flag})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert result.status == "ok", result.reason
    s = result.settings
    assert (result.distribution, result.world_size, result.global_batch) == ("jax-spmd", 2, 8)
    assert (s["processes"], s["devices_per_process"], s["process_launcher"]) == (2, 1, "compare")
    assert s["bn_mode"] == "per-device"
    assert s["xla_flags_added"] == ["--xla_force_host_platform_device_count=1", flag]
    # per-device BN: the gradients' one all-reduce (one flat buffer), none in the BN layers
    assert (s["allreduce_ops"], s["gradient_allreduce"]) == (1, "pmean once per step, one flat buffer")
    cores = len(os.sched_getaffinity(0))
    assert s["threads"] == max(1, cores // 2)  # each process pinned to its share of the cores
    # a step loaded from JAX's persistent cache hung in gloo's key exchange: off, and said so
    assert result.environment["compile_cache"]["jax"]["state"] == "off"
    # the command of one process; backends/launchers/processes.py starts the others
    assert jax_backend.command("py", RunSpec("jax", "jax", gpus=2), "s", "r") == [
        "py", "-m", "backends.jax", "s", "r"]


def test_tf32_on_cpu_is_unsupported_with_reason(tmp_path):
    result, proc = helpers.run_backend("jax", tmp_path, precision="tf32")
    assert proc.returncode == 0
    assert (result.status, result.reason) == (
        "unsupported", "tf32 is an NVIDIA tensor-core mode; the CPU has none (use fp32 or bf16)")


@pytest.mark.parametrize("options,message", [
    ({"processes": 0}, "option processes=0: out of range; give an integer from 1 to 64, e.g. "
                       "processes=1"),
    ({"sync_bn": "maybe"}, "option sync_bn=maybe: not a boolean; give true or false (also 1/0, "
                           "yes/no, on/off)"),
    ({"channels_last": True}, "option channels_last: unknown option for jax; valid: "
                              "allreduce_combine_mb, autotune_level, cpu_decoders, cpu_draft, cpu_share, "
                              "cuda_connections, decode, device_prefetch, donate, "
                              "fail_at, fail_rank, feeder_priority, flat_allreduce, latency_hiding, "
                              "loader, loader_workers, loss_scale, memory_limit_mb, nvimgcodec_api, "
                              "pipeline, processes, switch_interval_ms, sync_bn, xla_flags"),
])
def test_a_bad_option_in_a_spec_is_a_failed_result_with_the_message(tmp_path, options, message):
    result, proc = helpers.run_backend("jax", tmp_path, options=options)
    assert proc.returncode == 1
    assert (result.status, result.reason) == ("failed", message)


def test_main_job_side_by_side_with_pytorch(tmp_path):
    campaign = tmp_path / "c"
    # bf16 only: fp32 of both frameworks over 1 and 2 workers runs in test_run_e2e and above
    proc = run_compare(["run", "--frameworks", "jax,caffe2", "--gpus", "1,2", "--precision",
                        "bf16", "--quick", "--executor", "local", "--device", "cpu",
                        "--results", str(campaign)] + TINY_RUN)  # tiny sizes override --quick's
    results = [json.loads(p.read_text()) for p in (campaign / "results").glob("*.json")]
    assert sorted((r["spec"]["framework"], r["spec"]["gpus"], r["spec"]["precision"], r["status"])
                  for r in results) == sorted((fw, n, p, "ok") for fw in ("caffe2", "jax")
                                              for n in (1, 2) for p in ("bf16",)), \
        [(r["run_id"], r["reason"]) for r in results if r["status"] != "ok"]
    out = proc.stdout
    assert "| JAX (Flax) | bf16 | 4 | 32 |" in out
    assert "## Framework vs framework (img/s ÷ img/s of PyTorch (Caffe2), same precision, batch, N)" in out
    jax_two = json.loads((campaign / "results" / "jax-bf16-w2-b4-s32-r0.json").read_text())
    assert (jax_two["distribution"], jax_two["settings"]["compute_dtype"]) == ("jax-spmd", "bfloat16")
    assert jax_two["framework_version"].startswith("jax 0.10.2 (jaxlib 0.10.2, flax 0.12.8")
