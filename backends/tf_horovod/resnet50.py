"""ResNet-50 v1.5 in Keras (tf.keras, Keras 2 or 3): the same network as caffe2_torch/resnet50.py.

Stride on the 3x3 conv, no conv biases, BN momentum 0.9 / epsilon 1e-5, zero-initialised gamma of
the last BN in each residual branch, PyTorch's explicit (symmetric) padding, 1000 classes:
25,557,032 trainable parameters. Keras also keeps the 53,120 BN moving statistics as
non-trainable weights; compare trainable counts.
"""
import math

import tensorflow as tf

layers = tf.keras.layers

BN_MOMENTUM = 0.9  # Keras convention: decay of the moving average (PyTorch's momentum 0.1)
BN_EPSILON = 1e-5
STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, stride)
EXPANSION = 4


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


def resnet50(num_classes=1000, image_size=224, data_format="channels_last"):
    """The functional Keras model: images (NHWC or NCHW) -> float32 logits."""
    axis = -1 if data_format == "channels_last" else 1
    shape = (image_size, image_size, 3) if axis == -1 else (3, image_size, image_size)
    inputs = layers.Input(shape=shape, name="images")
    x = _conv(inputs, 64, 7, 2, "conv1", data_format)
    x = layers.ReLU(name="relu1")(_bn(x, "bn1", axis))
    # zero padding is safe for max pooling after a ReLU: every value is >= 0
    x = layers.ZeroPadding2D(1, data_format=data_format, name="pool_pad")(x)
    x = layers.MaxPooling2D(3, strides=2, data_format=data_format, name="pool")(x)
    for stage, (width, blocks, stride) in enumerate(STAGES, start=1):
        for block in range(blocks):
            x = _bottleneck(x, width, stride if block == 0 else 1,
                            "layer{}_{}".format(stage, block), data_format, axis)
    x = layers.GlobalAveragePooling2D(data_format=data_format, name="avgpool")(x)
    # torch.nn.Linear's default init: uniform(+-1/sqrt(fan_in)) for weight and bias
    bound = 1.0 / math.sqrt(x.shape[-1])
    x = layers.Dense(num_classes, name="fc",
                     kernel_initializer=tf.keras.initializers.VarianceScaling(
                         1.0 / 3.0, "fan_in", "uniform"),
                     bias_initializer=tf.keras.initializers.RandomUniform(-bound, bound))(x)
    # logits in float32 under a mixed policy, as the Keras mixed-precision guide advises
    logits = layers.Activation("linear", dtype="float32", name="logits")(x)
    return tf.keras.Model(inputs, logits, name="resnet50_v1_5")


def trainable_parameters(model):
    return int(sum(math.prod(int(d) for d in v.shape) for v in model.trainable_weights))


def non_trainable_parameters(model):
    return int(sum(math.prod(int(d) for d in v.shape) for v in model.non_trainable_weights))
