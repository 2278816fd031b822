"""Inception-v3 and -v4 in Flax (linen), NHWC, built from the layer tables of backends/networks.py:
the twins of backends/caffe2_torch/inception.py (Inception-v3: torchvision's inception_v3 without
the auxiliary head, BN with scale, eps 0.001, 23,834,568 trainable parameters; Inception-v4:
timm's, 42,679,816). `initial`: torchvision's Inception-v3 init.
"""
import math
from typing import Any, Optional, Tuple

import jax.numpy as jnp
from flax import linen as nn

from ..networks import INCEPTION_BN_EPSILON, INCEPTIONS
from .resnet import BN_MOMENTUM


def _layers(m: "Inception", x, table, name: str, train: bool):
    """Apply the table's layers to `x`, inside m's compact __call__ (submodules named by place)."""
    for i, layer in enumerate(table):
        n = "{}_{}".format(name, i)
        if layer[0] == "conv":
            _, out, kernel, stride, (ph, pw) = layer
            x = nn.Conv(out, kernel, strides=stride, padding=((ph, ph), (pw, pw)), use_bias=False,
                        dtype=m.dtype, name=n)(x)
            x = nn.BatchNorm(use_running_average=not train, momentum=BN_MOMENTUM,
                             epsilon=INCEPTION_BN_EPSILON, dtype=m.dtype, axis_name=m.axis_name,
                             name=n + "_bn")(x)
            x = nn.relu(x)
        elif layer[0] == "concat":
            x = jnp.concatenate([_layers(m, x, branch, "{}_{}".format(n, j), train)
                                 for j, branch in enumerate(layer[1])], axis=-1)
        else:
            kind, kernel, stride, (ph, pw) = layer
            padding = ((ph, ph), (pw, pw))
            if kind == "max":
                x = nn.max_pool(x, kernel, strides=stride, padding=padding)
            else:  # "avg" counts the zero padding too, as PyTorch's avg_pool2d does
                x = nn.avg_pool(x, kernel, strides=stride, padding=padding,
                                count_include_pad=kind == "avg")
    return x


class Inception(nn.Module):
    num_classes: int = 1000
    dtype: Any = jnp.float32
    axis_name: Optional[str] = None
    network: str = "inception3"  # a key of networks.INCEPTIONS

    @nn.compact
    def __call__(self, x, train: bool = True):
        x = _layers(self, x, INCEPTIONS[self.network], "layer", train)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes, dtype=self.dtype, name="fc")(x)

    @staticmethod
    def initial(path: Tuple[str, ...], shape: Tuple[int, ...], fc_in: int) -> Tuple[str, float]:
        """torchvision's Inception3 init: trunc_normal_(std=0.1, a=-2, b=2) for conv and fc
        weights (a cut at 20 std: a plain normal), nn.Linear's uniform fc bias, BN at 1 and 0."""
        if path[-1] == "kernel":
            return "normal", 0.1
        if path[-2] == "fc":
            return "uniform", 1.0 / math.sqrt(fc_in)
        return "constant", 1.0 if path[-1] in ("scale", "var") else 0.0


class Inception3(Inception):
    """Inception-v3: the default table."""


class Inception4(Inception):
    network: str = "inception4"
