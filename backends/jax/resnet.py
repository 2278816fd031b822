"""ResNet v1.5 in Flax (linen), NHWC: the twin of backends/caffe2_torch/resnet.py.

Stride on the 3x3 conv, no conv biases, PyTorch's symmetric padding, BN momentum and epsilon as
PyTorch's. ResNet-50: 25,557,032 trainable parameters (`params`) and 53,120 BN running statistics
(`batch_stats`); ResNet-152, the same code with blocks (3, 8, 36, 3): 60,192,808. `initial` gives
PyTorch's initial values to models.init: kaiming fan_out normal convs, nn.Linear's uniform fc,
the last BN of each residual branch starting at zero (Flax's own `model.init` values are not
used). Submodules are called in PyTorch's registration order (the downsample branch last), so
models.layers() lists them in the order torch's `parameters()` does.
"""
import math
from typing import Any, Optional, Tuple

import jax.numpy as jnp
from flax import linen as nn

from ..networks import RESNET_EXPANSION as EXPANSION
from ..networks import resnet_stages

BN_MOMENTUM = 0.9  # Flax's decay convention: PyTorch's momentum 0.1
BN_EPSILON = 1e-5
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


class ResNet(_Layers, nn.Module):
    num_classes: int = 1000
    dtype: Any = jnp.float32
    axis_name: Optional[str] = None
    stages: Tuple[Tuple[int, int, int], ...] = resnet_stages("resnet50")

    @nn.compact
    def __call__(self, x, train: bool = True):
        x = self.conv(64, 7, 2, "conv1")(x)
        x = nn.relu(self.norm(train, "bn1")(x))
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=_padding(3))
        for stage, (width, blocks, stride) in enumerate(self.stages):
            for i in range(blocks):
                x = Bottleneck(width, stride if i == 0 else 1, self.dtype, self.axis_name,
                               name="layer{}_{}".format(stage + 1, i))(x, train)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes, dtype=self.dtype, name="fc")(x)

    @staticmethod
    def initial(path: Tuple[str, ...], shape: Tuple[int, ...], fc_in: int) -> Tuple[str, float]:
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


class ResNet50(ResNet):
    """ResNet-50: the default stages."""


class ResNet152(ResNet):
    stages: Tuple[Tuple[int, int, int], ...] = resnet_stages("resnet152")
