"""ResNet-50 v1.5 in Flax (linen), NHWC: the twin of backends/caffe2_torch/resnet50.py.

Stride on the 3x3 conv, no conv biases, PyTorch's symmetric padding, BN momentum and epsilon as
PyTorch's. 25,557,032 trainable parameters (`params`) and 53,120 BN running statistics
(`batch_stats`). `init()` gives PyTorch's initial values: kaiming fan_out normal convs, nn.Linear's
uniform fc, the last BN of each residual branch starting at zero (Flax's own `model.init` values
are not used). Submodules are called in PyTorch's registration order (the downsample branch
last), so `layers()` lists them in the order torch's `parameters()` does.
"""
import math
from functools import partial
from typing import Any, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp
from flax import linen as nn

BN_MOMENTUM = 0.9  # Flax's decay convention: PyTorch's momentum 0.1
BN_EPSILON = 1e-5
STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, stride)
EXPANSION = 4
ZERO_INIT_BN = "bn3"  # the last BN of each residual branch: the block starts as the identity


def _padding(kernel: int):
    """PyTorch's symmetric padding (Flax's "SAME" pads stride-2 convs on one side only)."""
    p = kernel // 2
    return ((p, p), (p, p))


class _Layers:
    """The convs and norms of the network, made alike from the module's `dtype` (compute dtype)
    and `axis_name` (set: BN statistics over every device on this mesh axis, i.e. SyncBN)."""

    def conv(self, features: int, kernel: int, stride: int, name: str) -> nn.Conv:
        return nn.Conv(features, (kernel, kernel), strides=(stride, stride),
                       padding=_padding(kernel), use_bias=False, dtype=self.dtype, name=name)

    def norm(self, train: bool, name: str) -> nn.BatchNorm:
        return nn.BatchNorm(use_running_average=not train, momentum=BN_MOMENTUM,
                            epsilon=BN_EPSILON, dtype=self.dtype, axis_name=self.axis_name,
                            name=name)


class Bottleneck(_Layers, nn.Module):
    width: int
    stride: int = 1
    dtype: Any = jnp.float32
    axis_name: Optional[str] = None

    @nn.compact
    def __call__(self, x, train: bool = True):
        out_channels = self.width * EXPANSION
        out = self.conv(self.width, 1, 1, "conv1")(x)
        out = nn.relu(self.norm(train, "bn1")(out))
        out = self.conv(self.width, 3, self.stride, "conv2")(out)  # v1.5: the stride is here
        out = nn.relu(self.norm(train, "bn2")(out))
        out = self.conv(out_channels, 1, 1, "conv3")(out)
        out = self.norm(train, ZERO_INIT_BN)(out)
        identity = x
        if self.stride != 1 or x.shape[-1] != out_channels:
            identity = self.conv(out_channels, 1, self.stride, "downsample_conv")(x)
            identity = self.norm(train, "downsample_bn")(identity)
        return nn.relu(out + identity)


class ResNet50(_Layers, nn.Module):
    num_classes: int = 1000
    dtype: Any = jnp.float32
    axis_name: Optional[str] = None

    @nn.compact
    def __call__(self, x, train: bool = True):
        x = self.conv(64, 7, 2, "conv1")(x)
        x = nn.relu(self.norm(train, "bn1")(x))
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=_padding(3))
        for stage, (width, blocks, stride) in enumerate(STAGES):
            for i in range(blocks):
                x = Bottleneck(width, stride if i == 0 else 1, self.dtype, self.axis_name,
                               name="layer{}_{}".format(stage + 1, i))(x, train)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes, dtype=self.dtype, name="fc")(x)


def _initial(path: Tuple[str, ...], shape: Tuple[int, ...], fc_in: int) -> Tuple[str, float]:
    """PyTorch's initial distribution of one variable: ("normal", std), ("uniform", bound) or
    ("constant", value)."""
    module, name = path[-2], path[-1]
    if module == "fc":  # nn.Linear: weight and bias uniform in +-1/sqrt(fan_in)
        return "uniform", 1.0 / math.sqrt(fc_in)
    if name == "kernel":  # kaiming_normal_(mode="fan_out", nonlinearity="relu"), HWIO kernels
        h, w, _, out = shape
        return "normal", math.sqrt(2.0 / (h * w * out))
    if name == "scale":
        return "constant", 0.0 if module == ZERO_INIT_BN else 1.0
    return "constant", 1.0 if name == "var" else 0.0  # BN shift, running mean and variance


def init(model: ResNet50, key, image_size: int = 224) -> Dict[str, Any]:
    """{'params': ..., 'batch_stats': ...} with PyTorch's initial values, for NHWC images.

    Flax gives the structure (traced, not run); the values are cut from one normal and one
    uniform vector: XLA compiles one random-number kernel per variable otherwise, which takes
    ~15 s on a small CPU. Jit-able; float32 throughout.
    """
    x = jnp.zeros((1, image_size, image_size, 3), jnp.float32)
    shapes = jax.eval_shape(partial(model.init, train=False), key, x)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(shapes)
    fc_in = shapes["params"]["fc"]["kernel"].shape[0]
    specs = [_initial(tuple(k.key for k in path), leaf.shape, fc_in) for path, leaf in leaves]
    sizes = {kind: sum(int(leaf.size) for (_, leaf), (k, _) in zip(leaves, specs) if k == kind)
             for kind in ("normal", "uniform")}
    k_normal, k_uniform = jax.random.split(key)
    pools = {"normal": jax.random.normal(k_normal, (sizes["normal"],), jnp.float32),
             "uniform": jax.random.uniform(k_uniform, (sizes["uniform"],), jnp.float32, -1.0, 1.0)}
    used = {"normal": 0, "uniform": 0}
    values = []
    for (_, leaf), (kind, scale) in zip(leaves, specs):
        if kind == "constant":
            values.append(jnp.full(leaf.shape, scale, jnp.float32))
            continue
        start, used[kind] = used[kind], used[kind] + int(leaf.size)
        values.append(pools[kind][start:used[kind]].reshape(leaf.shape) * scale)
    return jax.tree_util.tree_unflatten(treedef, values)


def count(tree) -> int:
    return sum(int(leaf.size) for leaf in jax.tree_util.tree_leaves(tree))


def layers(model: ResNet50, variables, image_size: int = 64) -> List[Dict[str, Any]]:
    """Every conv, BN and dense layer in call order: path, stride (convs: input / output size),
    and its trainable shapes in PyTorch's convention (OIHW kernels, (out, in) dense weights)."""
    found = []

    def record(next_fun, args, kwargs, context):
        out = next_fun(*args, **kwargs)
        module = context.module
        if context.method_name == "__call__" and isinstance(module, (nn.Conv, nn.BatchNorm, nn.Dense)):
            entry = {"path": "/".join(module.path), "kind": type(module).__name__}
            if isinstance(module, nn.Conv):
                entry["stride"] = args[0].shape[1] // out.shape[1]
                entry["kernel"] = list(module.variables["params"]["kernel"].shape)  # HWIO
            found.append(entry)
        return out

    x = jnp.zeros((1, image_size, image_size, 3), jnp.float32)
    with nn.intercept_methods(record):
        jax.eval_shape(lambda v: model.apply(v, x, train=False), variables)
    params = variables["params"]
    for entry in found:
        node = params
        for part in entry["path"].split("/"):
            node = node[part]
        entry["shapes"] = _torch_shapes(entry["kind"], node)
    return found


def _torch_shapes(kind: str, params) -> List[List[int]]:
    if kind == "Conv":
        h, w, i, o = params["kernel"].shape
        return [[o, i, h, w]]
    if kind == "Dense":
        i, o = params["kernel"].shape
        return [[o, i], list(params["bias"].shape)]
    return [list(params["scale"].shape), list(params["bias"].shape)]
