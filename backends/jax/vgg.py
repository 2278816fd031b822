"""VGG-16 in Flax (linen), NHWC: the twin of backends/caffe2_torch/vgg.py (torchvision's vgg16,
dropout left out): 13 3x3 convs with bias, adaptive average pooling to 7x7 (one matrix product per
spatial axis, networks.pooling_matrix), three dense layers: 138,357,544 trainable parameters at
any image size; no batch norm, so no `batch_stats`. `initial`: torchvision's VGG init.
"""
import math
from typing import Any, Optional, Tuple

import jax.numpy as jnp
from flax import linen as nn

from ..networks import VGG16 as CONFIG
from ..networks import VGG_CLASSIFIER, VGG_POOL, pooling_matrix


def adaptive_average_pool(x, size: int):
    """PyTorch's AdaptiveAvgPool2d(size) on NHWC `x` (static shapes); the identity at size."""
    h, w = x.shape[1], x.shape[2]
    if (h, w) == (size, size):
        return x
    rows = jnp.asarray(pooling_matrix(size, h), x.dtype)
    cols = jnp.asarray(pooling_matrix(size, w), x.dtype)
    return jnp.einsum("oh,pw,bhwc->bopc", rows, cols, x)


class VGG16(nn.Module):
    num_classes: int = 1000
    dtype: Any = jnp.float32
    axis_name: Optional[str] = None  # no batch norm: accepted for models.build's one signature

    @nn.compact
    def __call__(self, x, train: bool = True):
        for i, v in enumerate(CONFIG):
            if v == "M":
                x = nn.max_pool(x, (2, 2), strides=(2, 2))
            else:
                x = nn.relu(nn.Conv(v, (3, 3), padding=((1, 1), (1, 1)), dtype=self.dtype,
                                    name="conv{}".format(i))(x))
        x = adaptive_average_pool(x, VGG_POOL)
        x = x.reshape((x.shape[0], -1))
        for i, width in enumerate(VGG_CLASSIFIER):
            x = nn.relu(nn.Dense(width, dtype=self.dtype, name="fc{}".format(i + 1))(x))
        return nn.Dense(self.num_classes, dtype=self.dtype, name="fc")(x)

    @staticmethod
    def initial(path: Tuple[str, ...], shape: Tuple[int, ...], fc_in: int) -> Tuple[str, float]:
        """torchvision's VGG init: kaiming_normal_(fan_out) convs, normal(0, 0.01) linear
        weights, zero biases."""
        if path[-1] == "bias":
            return "constant", 0.0
        if len(shape) == 4:  # HWIO
            h, w, _, out = shape
            return "normal", math.sqrt(2.0 / (h * w * out))
        return "normal", 0.01
