"""VGG-16 in Keras: the same network as caffe2_torch/vgg.py (torchvision's vgg16, dropout left
out): 13 3x3 convs with bias ("same" padding is PyTorch's padding=1 at stride 1), adaptive average
pooling to 7x7, three fully connected layers: 138,357,544 trainable parameters at any image size.
"""
import tensorflow as tf

from ..networks import VGG16 as CONFIG
from ..networks import VGG_CLASSIFIER, VGG_POOL, pooling_matrix
from .resnet import _conv_init, images, logits

layers = tf.keras.layers


class AdaptiveAveragePooling(layers.Layer):
    """PyTorch's AdaptiveAvgPool2d(size) for the static input size Keras knows: one matrix product
    per spatial axis (backends/networks.py: pooling_matrix); the identity at size x size."""

    def __init__(self, size, data_format, **kwargs):
        super().__init__(**kwargs)
        self.size, self.data_format = size, data_format

    def call(self, x):
        last = self.data_format == "channels_last"
        h, w = (x.shape[1], x.shape[2]) if last else (x.shape[2], x.shape[3])
        if (h, w) == (self.size, self.size):
            return x
        rows = tf.constant(pooling_matrix(self.size, h), x.dtype)
        cols = tf.constant(pooling_matrix(self.size, w), x.dtype)
        return tf.einsum("oh,pw,bhwc->bopc" if last else "oh,pw,bchw->bcop", rows, cols, x)


def _dense_init():
    return tf.keras.initializers.RandomNormal(0.0, 0.01)  # torchvision's nn.Linear init in VGG


def vgg16(num_classes=1000, image_size=224, data_format="channels_last"):
    """The functional Keras model: images (NHWC or NCHW) -> float32 logits."""
    inputs, _ = images(image_size, data_format)
    x = inputs
    for i, v in enumerate(CONFIG):
        if v == "M":
            x = layers.MaxPooling2D(2, 2, data_format=data_format, name="pool{}".format(i))(x)
        else:
            x = layers.Conv2D(v, 3, padding="same", activation="relu", data_format=data_format,
                              kernel_initializer=_conv_init(), name="conv{}".format(i))(x)
    x = AdaptiveAveragePooling(VGG_POOL, data_format, name="avgpool")(x)
    x = layers.Flatten(name="flatten")(x)
    for i, width in enumerate(VGG_CLASSIFIER):
        x = layers.Dense(width, activation="relu", kernel_initializer=_dense_init(),
                         name="fc{}".format(i + 1))(x)
    return tf.keras.Model(inputs, logits(x, num_classes, _dense_init(), "zeros"), name="vgg16")
