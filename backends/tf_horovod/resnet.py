"""ResNet v1.5 in Keras (tf.keras, Keras 2 or 3): the same networks as caffe2_torch/resnet.py.

Stride on the 3x3 conv, no conv biases, BN momentum 0.9 / epsilon 1e-5, zero-initialised gamma of
the last BN in each residual branch, PyTorch's explicit (symmetric) padding, 1000 classes.
ResNet-50: 25,557,032 trainable parameters (Keras also keeps the 53,120 BN moving statistics as
non-trainable weights; compare trainable counts); ResNet-152, the same code with blocks
(3, 8, 36, 3): 60,192,808.
"""
import math

import tensorflow as tf

from ..networks import RESNET_EXPANSION as EXPANSION
from ..networks import resnet_stages

layers = tf.keras.layers

BN_MOMENTUM = 0.9  # Keras convention: decay of the moving average (PyTorch's momentum 0.1)
BN_EPSILON = 1e-5


def _conv_init():
    # torchvision's kaiming_normal_(mode="fan_out", nonlinearity="relu"); a fresh initializer per
    # layer: Keras hands an unseeded instance that is reused the same values every time
    return tf.keras.initializers.VarianceScaling(2.0, "fan_out", "untruncated_normal")


def _conv(x, filters, kernel, stride, name, data_format):
    # PyTorch pads symmetrically (padding=k//2); Keras "same" pads a stride-2 conv asymmetrically
    if kernel > 1:
        x = layers.ZeroPadding2D(kernel // 2, data_format=data_format, name=name + "_pad")(x)
    return layers.Conv2D(filters, kernel, strides=stride, padding="valid", use_bias=False,
                         kernel_initializer=_conv_init(), data_format=data_format, name=name)(x)


def _bn(x, name, axis, zero_init=False):
    # zero gamma on the last BN of a residual branch: each block starts as the identity
    return layers.BatchNormalization(axis=axis, momentum=BN_MOMENTUM, epsilon=BN_EPSILON,
                                     gamma_initializer="zeros" if zero_init else "ones",
                                     name=name)(x)


def _bottleneck(x, width, stride, name, data_format, axis):
    out_channels = width * EXPANSION
    in_channels = x.shape[axis]
    identity = x
    if stride != 1 or in_channels != out_channels:
        identity = _conv(x, out_channels, 1, stride, name + "_down_conv", data_format)
        identity = _bn(identity, name + "_down_bn", axis)
    out = _conv(x, width, 1, 1, name + "_conv1", data_format)
    out = layers.ReLU(name=name + "_relu1")(_bn(out, name + "_bn1", axis))
    out = _conv(out, width, 3, stride, name + "_conv2", data_format)  # v1.5: stride here
    out = layers.ReLU(name=name + "_relu2")(_bn(out, name + "_bn2", axis))
    out = _conv(out, out_channels, 1, 1, name + "_conv3", data_format)
    out = _bn(out, name + "_bn3", axis, zero_init=True)
    return layers.ReLU(name=name + "_out")(layers.Add(name=name + "_add")([out, identity]))


def images(image_size, data_format):
    """(the Input layer, the channel axis) for square images in `data_format`."""
    axis = -1 if data_format == "channels_last" else 1
    shape = (image_size, image_size, 3) if axis == -1 else (3, image_size, image_size)
    return layers.Input(shape=shape, name="images"), axis


def resnet(stages, num_classes, image_size, data_format, name):
    """The functional Keras model: images (NHWC or NCHW) -> float32 logits."""
    inputs, axis = images(image_size, data_format)
    x = _conv(inputs, 64, 7, 2, "conv1", data_format)
    x = layers.ReLU(name="relu1")(_bn(x, "bn1", axis))
    # zero padding is safe for max pooling after a ReLU: every value is >= 0
    x = layers.ZeroPadding2D(1, data_format=data_format, name="pool_pad")(x)
    x = layers.MaxPooling2D(3, strides=2, data_format=data_format, name="pool")(x)
    for stage, (width, blocks, stride) in enumerate(stages, start=1):
        for block in range(blocks):
            x = _bottleneck(x, width, stride if block == 0 else 1,
                            "layer{}_{}".format(stage, block), data_format, axis)
    x = layers.GlobalAveragePooling2D(data_format=data_format, name="avgpool")(x)
    return tf.keras.Model(inputs, logits(x, num_classes), name=name)


def logits(x, num_classes, kernel_initializer=None, bias_initializer=None):
    """The fc layer, initialised as given, else as torch.nn.Linear's default (weight and bias
    uniform(+-1/sqrt(fan_in))). Float32 logits under a mixed policy, as the Keras mixed-precision
    guide advises."""
    bound = 1.0 / math.sqrt(x.shape[-1])
    x = layers.Dense(num_classes, name="fc",
                     kernel_initializer=kernel_initializer or
                     tf.keras.initializers.VarianceScaling(1.0 / 3.0, "fan_in", "uniform"),
                     bias_initializer=bias_initializer or
                     tf.keras.initializers.RandomUniform(-bound, bound))(x)
    return layers.Activation("linear", dtype="float32", name="logits")(x)


def resnet50(num_classes=1000, image_size=224, data_format="channels_last"):
    return resnet(resnet_stages("resnet50"), num_classes, image_size, data_format, "resnet50_v1_5")


def resnet152(num_classes=1000, image_size=224, data_format="channels_last"):
    return resnet(resnet_stages("resnet152"), num_classes, image_size, data_format,
                  "resnet152_v1_5")

