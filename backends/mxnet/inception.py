"""Inception-v3 and -v4 as Gluon HybridBlocks, built from the layer tables of backends/networks.py:
the same networks as caffe2_torch/inception.py (Inception-v3: torchvision's inception_v3 without
the auxiliary head, BN with scale, eps 0.001, 23,834,568 trainable parameters; Inception-v4:
timm's, 42,679,816). Gluon's model zoo inception_v3 is not used: it pools with a fixed 8x8 window,
so it runs at 299 px only.
"""
import mxnet as mx
from mxnet.gluon import nn

from ..networks import INCEPTION3, INCEPTION4, INCEPTION_BN_EPSILON
from .resnet import BN_MOMENTUM, check_layout, linear_init

# torchvision: trunc_normal_(std=0.1, a=-2, b=2), a cut at 20 std: a plain normal
INIT = mx.init.Normal(0.1)


class Concat(nn.HybridBlock):
    """Branches applied to the same input, their outputs concatenated along the channels."""

    def __init__(self, branches, axis: int, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis
        with self.name_scope():
            for branch in branches:
                self.register_child(branch)

    def hybrid_forward(self, F, x):
        return F.concat(*[branch(x) for branch in self._children.values()], dim=self.axis)


def _build(table, channels: int, layout: str):
    """(nn.HybridSequential of the table's layers, its output channels)."""
    seq, axis = nn.HybridSequential(prefix=""), layout.index("C")
    for layer in table:
        if layer[0] == "conv":
            _, out, kernel, stride, padding = layer
            seq.add(nn.Conv2D(out, kernel, stride, padding, use_bias=False, in_channels=channels,
                              layout=layout, weight_initializer=INIT),
                    nn.BatchNorm(axis=axis, momentum=BN_MOMENTUM, epsilon=INCEPTION_BN_EPSILON,
                                 in_channels=out),
                    nn.Activation("relu"))
            channels = out
        elif layer[0] == "concat":
            built = [_build(branch, channels, layout) for branch in layer[1]]
            seq.add(Concat([b for b, _ in built], axis))
            channels = sum(c for _, c in built)
        elif layer[0] == "max":
            seq.add(nn.MaxPool2D(layer[1], layer[2], layer[3], layout=layout))
        else:
            seq.add(nn.AvgPool2D(layer[1], layer[2], layer[3], layout=layout,
                                 count_include_pad=layer[0] == "avg"))
    return seq, channels


class Inception(nn.HybridBlock):
    def __init__(self, table, num_classes: int = 1000, layout: str = "NCHW", **kwargs):
        super().__init__(**kwargs)
        check_layout(layout)
        self.layout = layout
        with self.name_scope():
            self.features, channels = _build(table, 3, layout)
            self.features.add(nn.GlobalAvgPool2D(layout=layout))
            self.fc = nn.Dense(num_classes, in_units=channels, weight_initializer=INIT,
                               bias_initializer=linear_init(channels))

    def hybrid_forward(self, F, x):
        return self.fc(self.features(x))


class Inception3(Inception):  # its own class: Gluon names the parameters after it
    def __init__(self, num_classes: int = 1000, layout: str = "NCHW", **kwargs):
        super().__init__(INCEPTION3, num_classes, layout, **kwargs)


class Inception4(Inception):
    def __init__(self, num_classes: int = 1000, layout: str = "NCHW", **kwargs):
        super().__init__(INCEPTION4, num_classes, layout, **kwargs)
