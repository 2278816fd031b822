"""VGG-16 as a Gluon HybridBlock: the same network as caffe2_torch/vgg.py (torchvision's vgg16,
dropout left out): 13 3x3 convs with bias, adaptive average pooling to 7x7 (MXNet's
contrib.AdaptiveAvgPooling2D, NCHW: an NHWC network transposes around it), three fully connected
layers with every input size given: 138,357,544 trainable parameters at any image size.
"""
import mxnet as mx
from mxnet.gluon import nn

from ..networks import VGG16 as CONFIG
from ..networks import VGG_CLASSIFIER, VGG_POOL
from .resnet import CONV_INIT, check_layout

DENSE_INIT = mx.init.Normal(0.01)  # torchvision's nn.Linear init in VGG (biases zero)


class VGG16(nn.HybridBlock):
    def __init__(self, num_classes: int = 1000, layout: str = "NCHW", **kwargs):
        super().__init__(**kwargs)
        check_layout(layout)
        self.layout = layout
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            channels = 3
            for v in CONFIG:
                if v == "M":
                    self.features.add(nn.MaxPool2D(2, 2, layout=layout))
                else:
                    self.features.add(nn.Conv2D(v, 3, padding=1, in_channels=channels,
                                                activation="relu", layout=layout,
                                                weight_initializer=CONV_INIT))
                    channels = v
            self.classifier = nn.HybridSequential(prefix="")
            widths = (channels * VGG_POOL * VGG_POOL,) + VGG_CLASSIFIER + (num_classes,)
            for i, (a, b) in enumerate(zip(widths, widths[1:])):
                last = i == len(widths) - 2
                self.classifier.add(nn.Dense(b, in_units=a, activation=None if last else "relu",
                                             weight_initializer=DENSE_INIT))

    def hybrid_forward(self, F, x):
        x = self.features(x)
        if self.layout == "NHWC":
            x = F.transpose(x, axes=(0, 3, 1, 2))
        return self.classifier(F.contrib.AdaptiveAvgPooling2D(x, output_size=VGG_POOL))
