"""Inception-v3 and -v4 in Keras, built from the layer tables of backends/networks.py: the same
networks as caffe2_torch/inception.py (Inception-v3: torchvision's inception_v3 without the
auxiliary head, BN with scale, eps 0.001, 23,834,568 trainable parameters; Inception-v4: timm's,
42,679,816). keras.applications' InceptionV3 is not used: its BN has no scale. Explicit zero
padding as PyTorch pads; "avg" pools count the padding, as PyTorch's do, "avg_nopad" pools are
Keras's "same" pools.
"""
import tensorflow as tf

from ..networks import INCEPTION3, INCEPTION4, INCEPTION_BN_EPSILON
from .resnet import BN_MOMENTUM, images, logits

layers = tf.keras.layers


def _init():
    # torchvision: trunc_normal_(std=0.1, a=-2, b=2), a cut at 20 std: a plain normal. A fresh
    # initializer per layer (an unseeded instance reused gives every layer the same values)
    return tf.keras.initializers.RandomNormal(0.0, 0.1)


def _pad(x, padding, data_format, name):
    if padding == (0, 0):
        return x
    ph, pw = padding
    return layers.ZeroPadding2D(((ph, ph), (pw, pw)), data_format=data_format, name=name)(x)


def _layers(x, table, name, data_format, axis):
    for i, layer in enumerate(table):
        n = "{}_{}".format(name, i)
        if layer[0] == "conv":
            _, out, kernel, stride, padding = layer
            x = layers.Conv2D(out, kernel, strides=stride, use_bias=False, data_format=data_format,
                              kernel_initializer=_init(),
                              name=n)(_pad(x, padding, data_format, n + "_pad"))
            x = layers.BatchNormalization(axis=axis, momentum=BN_MOMENTUM, name=n + "_bn",
                                          epsilon=INCEPTION_BN_EPSILON)(x)
            x = layers.ReLU(name=n + "_relu")(x)
        elif layer[0] == "concat":
            x = layers.Concatenate(axis=axis, name=n)([
                _layers(x, branch, "{}_{}".format(n, j), data_format, axis)
                for j, branch in enumerate(layer[1])])
        elif layer[0] == "avg_nopad":  # stride 1, padding k // 2: Keras's "same"
            x = layers.AveragePooling2D(layer[1], layer[2], padding="same",
                                        data_format=data_format, name=n)(x)
        else:
            kind, kernel, stride, padding = layer
            pool = layers.MaxPooling2D if kind == "max" else layers.AveragePooling2D
            x = pool(kernel, stride, data_format=data_format,
                     name=n)(_pad(x, padding, data_format, n + "_pad"))
    return x


def inception(table, num_classes, image_size, data_format, name):
    """The functional Keras model: images (NHWC or NCHW) -> float32 logits."""
    inputs, axis = images(image_size, data_format)
    x = _layers(inputs, table, "layer", data_format, axis)
    x = layers.GlobalAveragePooling2D(data_format=data_format, name="avgpool")(x)
    return tf.keras.Model(inputs, logits(x, num_classes, _init()), name=name)


def inception3(num_classes=1000, image_size=299, data_format="channels_last"):
    return inception(INCEPTION3, num_classes, image_size, data_format, "inception3")


def inception4(num_classes=1000, image_size=299, data_format="channels_last"):
    return inception(INCEPTION4, num_classes, image_size, data_format, "inception4")
