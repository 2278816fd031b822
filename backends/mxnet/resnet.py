"""ResNet v1.5 as Gluon HybridBlocks: stride on the 3x3 conv, no conv biases, 1000 classes.

The same networks as backends/caffe2_torch/resnet.py: ResNet-50 25,557,032 trainable parameters,
ResNet-152 (the same code with blocks (3, 8, 36, 3)) 60,192,808. Gluon also lists the BN running
statistics as parameters (grad_req 'null'; 53,120 in ResNet-50); models.trainable_parameters
leaves them out, as torchvision's count does. `layout` "NCHW" (default) or "NHWC" (channels last:
convolution and pooling layouts, BatchNorm over axis 3; MXNet runs NHWC convolutions with cuDNN
only, so on GPUs).
"""
import math

import mxnet as mx
from mxnet.gluon import nn

from ..networks import RESNET_EXPANSION as EXPANSION
from ..networks import resnet_stages

BN_MOMENTUM = 0.9  # Gluon convention: decay of the running statistics (= PyTorch momentum 0.1)
BN_EPSILON = 1e-5
# kaiming_normal_(mode="fan_out", nonlinearity="relu"), as the PyTorch model initialises convs
CONV_INIT = mx.init.Xavier(rnd_type="gaussian", factor_type="out", magnitude=2)


LAYOUTS = ("NCHW", "NHWC")


def _conv(layout: str, in_channels: int, channels: int, kernel: int, stride: int = 1,
          padding: int = 0) -> nn.Conv2D:
    # in_channels given, so every shape is known before the first batch (no deferred init)
    return nn.Conv2D(channels, kernel, strides=stride, padding=padding, use_bias=False,
                     in_channels=in_channels, weight_initializer=CONV_INIT, layout=layout)


def _bn(layout: str, channels: int, zero_init: bool = False) -> nn.BatchNorm:
    # last BN of each residual branch starts at zero: the block starts as identity
    return nn.BatchNorm(axis=layout.index("C"), momentum=BN_MOMENTUM, epsilon=BN_EPSILON,
                        in_channels=channels, gamma_initializer="zeros" if zero_init else "ones")


class Bottleneck(nn.HybridBlock):
    def __init__(self, in_channels: int, width: int, stride: int, layout: str = "NCHW", **kwargs):
        super().__init__(**kwargs)
        out_channels = width * EXPANSION
        with self.name_scope():
            self.body = nn.HybridSequential(prefix="")
            self.body.add(_conv(layout, in_channels, width, 1), _bn(layout, width),
                          nn.Activation("relu"),
                          _conv(layout, width, width, 3, stride, 1),  # v1.5: stride here
                          _bn(layout, width), nn.Activation("relu"),
                          _conv(layout, width, out_channels, 1),
                          _bn(layout, out_channels, zero_init=True))
            self.downsample = None
            if stride != 1 or in_channels != out_channels:
                self.downsample = nn.HybridSequential(prefix="")
                self.downsample.add(_conv(layout, in_channels, out_channels, 1, stride),
                                    _bn(layout, out_channels))

    def hybrid_forward(self, F, x):
        identity = x if self.downsample is None else self.downsample(x)
        return F.Activation(self.body(x) + identity, act_type="relu")


def check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError("layout {!r}: choose from {}".format(layout, ", ".join(LAYOUTS)))


def linear_init(fan_in: int):
    """PyTorch's nn.Linear default for weight and bias: uniform(+-1/sqrt(fan_in))."""
    return mx.init.Uniform(1.0 / math.sqrt(fan_in))


class ResNet(nn.HybridBlock):
    def __init__(self, stages, num_classes: int = 1000, layout: str = "NCHW", **kwargs):
        super().__init__(**kwargs)
        check_layout(layout)
        self.layout = layout
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(_conv(layout, 3, 64, 7, 2, 3), _bn(layout, 64), nn.Activation("relu"),
                              nn.MaxPool2D(3, 2, 1, layout=layout))
            in_channels = 64
            for width, blocks, stride in stages:
                for i in range(blocks):
                    self.features.add(Bottleneck(in_channels, width, stride if i == 0 else 1,
                                                 layout))
                    in_channels = width * EXPANSION
            self.features.add(nn.GlobalAvgPool2D(layout=layout))
            self.fc = nn.Dense(num_classes, in_units=in_channels,
                               weight_initializer=linear_init(in_channels),
                               bias_initializer=linear_init(in_channels))

    def hybrid_forward(self, F, x):
        return self.fc(self.features(x))


class ResNet50(ResNet):  # its own class: Gluon names the parameters after it ("resnet500_...")
    def __init__(self, num_classes: int = 1000, layout: str = "NCHW", **kwargs):
        super().__init__(resnet_stages("resnet50"), num_classes, layout, **kwargs)


class ResNet152(ResNet):
    def __init__(self, num_classes: int = 1000, layout: str = "NCHW", **kwargs):
        super().__init__(resnet_stages("resnet152"), num_classes, layout, **kwargs)
