"""MXNet backend, on the CPU, in its managed environment (mxnet 1.9.1, numpy 1.23; built on first use).

The Gluon model is the PyTorch model's twin (same trainable count, same layers); the loss falls;
bf16 really runs through AMP casts; 1 and 2 contexts run end to end through command() with the
kvstore recorded; fp16 and tf32 on the CPU are `unsupported` with the reason; the backend needs
nothing from the host side.
"""
import ast
import json
import os
import subprocess
import sys

import pytest

from backends import mxnet as mxnet_backend
from backends import options
from backends.protocol import RunSpec
from tests import helpers
from tests.helpers import ROOT, TINY_RUN, run_compare, run_in_backend, torch_layers

pytestmark = pytest.mark.backend  # a real framework in its environment

TORCH_TRAINABLE = helpers.RESNET50_TRAINABLE
BN_RUNNING_STATS = helpers.RESNET50_BN_RUNNING_STATS


# MXNet 1.9.1 runs bfloat16 on the CPU through oneDNN, whose bf16 kernels need AVX-512 (avx512bw
# and friends); without it even a bf16 dense op fails ("could not create a primitive descriptor
# iterator"), and compare records bf16 `unsupported` with those words.
BF16_CPU = helpers.AVX512
NEEDS_BF16_CPU = pytest.mark.skipif(not BF16_CPU, reason="this CPU has no AVX-512: MXNet 1.9.1 has "
                                    "no bf16 CPU kernels here (bf16 is recorded unsupported)")


def run_backend(tmp_path, timeout=600, **fields):
    """Run one spec of this backend through its command(); return (RunResult, proc)."""
    return helpers.run_backend("mxnet", tmp_path, timeout, **fields)


def test_trainable_parameters_equal_the_pytorch_model():
    out = run_in_backend("mxnet", (
        "import math\n"
        "from backends.mxnet.models import trainable_parameters\n"
        "from backends.mxnet.resnet import ResNet50\n"
        "net = ResNet50(1000)\n"
        "total = sum(math.prod(p.shape) for p in net.collect_params().values())\n"
        "print(trainable_parameters(net), total)"))
    trainable, total = map(int, out.split()[-2:])
    assert trainable == TORCH_TRAINABLE
    assert total - trainable == BN_RUNNING_STATS  # Gluon lists the running statistics too


def test_same_layers_as_pytorch_in_order():
    """Trainable shapes in registration order, and conv strides: v1.5, no biases, same widths."""
    out = run_in_backend("mxnet", (
        "import json\n"
        "from mxnet.gluon import nn\n"
        "from backends.mxnet.resnet import ResNet50\n"
        "net = ResNet50(1000)\n"
        "shapes = [list(p.shape) for p in net.collect_params().values() if p.grad_req != 'null']\n"
        "def convs(block):\n"
        "    if isinstance(block, nn.Conv2D):\n"
        "        yield block._kwargs['stride'][0]\n"
        "    for child in block._children.values():\n"
        "        yield from convs(child)\n"
        "print(json.dumps([shapes, list(convs(net))]))"))
    shapes, strides = json.loads(out.strip().splitlines()[-1])
    assert len(strides) == 53 and strides.count(2) == 7  # stem + 3 downsamples + 3 3x3 convs
    torch = torch_layers()
    assert shapes == torch["shapes"]
    assert strides == torch["strides"]


def test_the_nhwc_model_has_the_same_trainable_count_and_a_consistent_graph():
    """Channels last: NHWC convolutions and pooling, BatchNorm over axis 3, every shape inferred
    from an NHWC batch to the logits (the CPU cannot run NHWC convolutions: GPU only)."""
    out = run_in_backend("mxnet", (
        "import json, mxnet as mx\n"
        "from mxnet.gluon import nn\n"
        "from backends.mxnet.models import conv_layout, trainable_parameters\n"
        "from backends.mxnet.resnet import ResNet50\n"
        "net = ResNet50(1000, 'NHWC')\n"
        "def blocks(b):\n"
        "    yield b\n"
        "    for c in b._children.values():\n"
        "        yield from blocks(c)\n"
        "kinds = {}\n"
        "for b in blocks(net):\n"
        "    key = {nn.Conv2D: 'conv', nn.MaxPool2D: 'pool', nn.GlobalAvgPool2D: 'pool',"
        " nn.BatchNorm: 'bn'}.get(type(b))\n"
        "    if key:\n"
        "        kinds.setdefault(key, set()).add(str(b._kwargs.get('layout', b._kwargs.get('axis'))))\n"
        "_, shapes, _ = net(mx.sym.var('data')).infer_shape(data=(2, 64, 64, 3))\n"
        "print(json.dumps([trainable_parameters(net), conv_layout(net),"
        " {k: sorted(v) for k, v in kinds.items()}, shapes]))"))
    trainable, layout, kinds, shapes = json.loads(out.strip().splitlines()[-1])
    assert trainable == TORCH_TRAINABLE and layout == "NHWC"
    assert kinds == {"conv": ["NHWC"], "pool": ["NHWC"], "bn": ["3"]}
    assert shapes == [[2, 1000]]


def test_channels_last_on_the_cpu_is_unsupported_with_mxnets_reason(tmp_path):
    assert options.CHANNELS_LAST in mxnet_backend.OPTIONS  # the option every backend shares
    result, proc = run_backend(tmp_path, options={"channels_last": True})
    assert proc.returncode == 0
    assert result.status == "unsupported"
    assert result.reason.startswith("float32 NHWC convolution on cpu(0): mxnet 1.9.1 says: ")
    assert result.reason.endswith("(MXNet runs NHWC convolutions with cuDNN only: "
                                  "--option channels_last=false)")


def test_a_hopper_gpu_with_the_pip_cuda_wheel_is_unsupported_before_any_kernel():
    """A 9.0 device and the mxnet-cu117 wheel's architectures, injected; and a machine whose
    libcuda cannot be loaded (this one), for real."""
    out = run_in_backend("mxnet", (
        "import mxnet as mx\n"
        "from backends.mxnet import train\n"
        "from backends.protocol import Unsupported\n"
        "def reason(precision):\n"
        "    try:\n"
        "        train.resolve_precision(precision, mx.gpu(0))\n"
        "    except Unsupported as exc:\n"
        "        return str(exc)\n"
        "print(reason('fp32'))\n"
        "mx.util.get_cuda_compute_capability = lambda ctx: 90\n"
        "train.cuda_build.installed_wheel = lambda: 'mxnet-cu117'\n"
        "print(reason('bf16'))\n"
        "print(train.gpu_capability(mx.gpu(0), archs=('8.0', '9.0'), build='a source build'))"))
    no_driver, hopper, capability = out.strip().splitlines()[-3:]
    assert no_driver.startswith("cannot read the compute capability of gpu(0) (OSError: ")
    assert hopper.startswith("mxnet-cu117 has GPU code for compute capability 5.0, 6.0, 7.0, "
                             "8.0, 8.6 only (no PTX); this GPU is 9.0")
    assert capability == "(9, 0)"


@NEEDS_BF16_CPU
def test_bf16_is_probed_with_a_convolution_not_only_a_dense_op():
    """A build whose bf16 dense op works but whose bf16 convolution fails is unsupported."""
    out = run_in_backend("mxnet", (
        "import mxnet as mx\n"
        "from backends.mxnet import train\n"
        "from backends.protocol import Unsupported\n"
        "real = mx.nd.Convolution\n"
        "def conv(data, *args, **kwargs):\n"
        "    if data.dtype != mx.np.float32:\n"  # bfloat16 has no numpy dtype of its own
        "        raise mx.base.MXNetError('no kernel image is available for execution on the device')\n"
        "    return real(data, *args, **kwargs)\n"
        "mx.nd.Convolution = conv\n"
        "train.probe(mx.cpu(), 'float32', 'NCHW')\n"
        "try:\n"
        "    train.probe(mx.cpu(), 'bfloat16', 'NCHW')\n"
        "except Unsupported as exc:\n"
        "    print(exc)"))
    assert out.strip().splitlines()[-1] == (
        "bfloat16 NCHW convolution on cpu(0): mxnet 1.9.1 says: no kernel image is available for "
        "execution on the device")


def test_loss_falls_over_20_steps_on_one_fixed_batch():
    out = run_in_backend("mxnet", (
        "from backends.protocol import RunSpec\n"
        "from backends.mxnet.train import setup\n"
        "t = setup(RunSpec(framework='mxnet', backend='mxnet', batch_size=4, image_size=32))\n"
        "losses = []\n"
        "for _ in range(20):\n"
        "    t.step()\n"
        "    losses.append(t.loss())\n"
        "print(losses[0], losses[-1])"))
    first, last = map(float, out.split()[-2:])
    assert first > 1.0  # 1000 random classes: the first loss is far from zero
    assert last < 0.5 * first


@NEEDS_BF16_CPU
def test_bf16_runs_through_amp_casts_to_bfloat16():
    """AMP wraps the operators: the hybridized graph casts conv and dense inputs to bfloat16."""
    out = run_in_backend("mxnet", (
        "import mxnet as mx\n"
        "from backends.protocol import RunSpec\n"
        "from backends.mxnet.train import setup\n"
        "t = setup(RunSpec(framework='mxnet', backend='mxnet', precision='bf16', batch_size=2,"
        " image_size=32))\n"
        "t.step()\n"
        "graph = t.net._cached_graph[1].tojson(remove_amp_cast=False)\n"
        "print(graph.count('\"amp_cast\"'), graph.count('\"bfloat16\"'), t.describe()['settings']"
        "['amp_target_dtype'], t.net(mx.nd.ones((1, 3, 32, 32))).dtype.names[0])"))
    casts, bf16_casts, amp, out_dtype = out.split()[-4:]
    assert int(casts) >= 54 and int(bf16_casts) >= 54  # at least one per conv and the dense
    assert amp == "bfloat16" and out_dtype == "bfloat16"


@pytest.mark.parametrize("contexts", [1, 2])
def test_entry_point_runs_one_process_over_contexts(tmp_path, contexts):
    result, proc = run_backend(tmp_path, gpus=contexts, precision="fp32")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert result.status == "ok", result.reason
    assert mxnet_backend.command("py", RunSpec("mxnet", "mxnet", gpus=contexts), "s", "r") == [
        "py", "-m", "backends.mxnet", "s", "r"]  # one process, however many contexts
    assert result.distribution == ("kvstore" if contexts > 1 else "single")
    assert result.settings["contexts"] == ["cpu({})".format(i) for i in range(contexts)]
    assert result.settings["kvstore"] == ("device" if contexts > 1 else None)
    assert result.global_batch == 4 * contexts and result.world_size == contexts
    assert result.settings["trainable_parameters"] == TORCH_TRAINABLE
    assert result.settings["layout"] == "NCHW"  # the CPU default, read back from the model
    assert result.images_per_sec > 0 and len(result.window_images_per_sec) == 2
    assert result.framework_version == "mxnet 1.9.1"


def test_fp16_on_cpu_is_unsupported_with_mxnets_reason(tmp_path):
    result, proc = run_backend(tmp_path, precision="fp16")
    assert proc.returncode == 0
    assert result.status == "unsupported"
    assert "float16" in result.reason and "mxnet 1.9.1 says" in result.reason
    assert "only supported by CuDNN" in result.reason  # MXNet's own words, not ours
    assert result.images_per_sec is None


def test_tf32_on_cpu_is_unsupported(tmp_path):
    result, _ = run_backend(tmp_path, precision="tf32")
    assert result.status == "unsupported"
    assert "tf32" in result.reason and "CPU" in result.reason


def test_environment_has_numpy_1_23_and_the_real_mxnet():
    out = run_in_backend("mxnet", (
        "import sys, numpy, mxnet\n"
        "import backends.mxnet.train\n"
        "host = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('compare', 'pandas', 'typer', 'rich'))\n"
        "print(numpy.__version__, mxnet.__version__, mxnet.__file__, host)"))
    numpy_version, mxnet_version, mxnet_file, host = out.strip().split(" ", 3)
    assert numpy_version.startswith("1.23.")
    assert mxnet_version == "1.9.1"
    assert "site-packages" in mxnet_file  # top-level mxnet, not shadowed by backends/mxnet
    assert host == "[]"


def test_backend_package_is_stdlib_only_and_python38():
    """__init__ and __main__ import only the standard library and relative modules; 3.8 syntax."""
    folder = ROOT / "backends" / "mxnet"
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path), feature_version=(3, 8))
        if path.name not in ("__init__.py", "__main__.py"):
            continue
        for node in tree.body:  # module level only: train.py is imported lazily in a function
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] in sys.stdlib_module_names, (path.name, name)
    proc = subprocess.run([sys.executable, "-c", "import sys, backends.mxnet, backends.mxnet.__main__;"
                           "print('mxnet' in sys.modules)"], capture_output=True, text=True,
                          cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stdout.strip() == "False", proc.stderr


def test_compare_run_sweeps_contexts_and_precisions_and_reports(tmp_path):
    """The host CLI end to end: 1 and 2 contexts x fp32, bf16, fp16; fp16 is a recorded
    `unsupported` with MXNet's reason and the sweep goes on past it."""
    campaign = tmp_path / "campaign"
    run_compare(["run", "--frameworks", "mxnet", "--gpus", "1,2", "--precision", "fp16,fp32,bf16",
                 "--quick", "--results", str(campaign)] + TINY_RUN, timeout=1200)
    run_compare(["report", str(campaign), "--format", "json"], timeout=300)
    rows = json.loads((campaign / "report" / "report.json").read_text())
    cells = {(r["precision"], r["gpus"]): r for r in rows}
    assert set(cells) == {(p, n) for p in ("fp16", "fp32", "bf16") for n in (1, 2)}
    for n in (1, 2):
        assert cells[("fp16", n)]["status"] == "unsupported"
        assert "only supported by CuDNN" in cells[("fp16", n)]["reason"]
        if not BF16_CPU:  # no AVX-512: MXNet's own error is the recorded reason
            assert cells[("bf16", n)]["status"] == "unsupported"
            assert "mxnet 1.9.1 says" in cells[("bf16", n)]["reason"]
        for precision in ("fp32", "bf16") if BF16_CPU else ("fp32",):
            cell = cells[(precision, n)]
            assert cell["status"] == "ok", cell["reason"]
            assert cell["images_per_sec"] > 0
            assert cell["distribution"] == ("kvstore" if n > 1 else "single")
            helpers.assert_phases(json.loads((campaign / "results" / "mxnet-{}-w{}-b4-s32-r0.json".format(
                precision, n)).read_text()))
