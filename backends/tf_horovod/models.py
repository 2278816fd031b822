"""The networks this backend trains, by name (backends/networks.py lists them): name -> builder
of a functional Keras model (num_classes, image_size, data_format)."""
import math

from .. import networks
from ..protocol import Unsupported
from .inception import inception3, inception4
from .resnet import resnet50, resnet152
from .vgg import vgg16

MODELS = {"resnet50": resnet50, "resnet152": resnet152, "inception3": inception3,
          "inception4": inception4, "vgg16": vgg16}


def build(name, num_classes=1000, image_size=224, data_format="channels_last"):
    """The network called `name`; Unsupported (a recorded result) with the reason otherwise."""
    if name not in MODELS:
        raise Unsupported(networks.why_not(name))
    return MODELS[name](num_classes, image_size, data_format)


def trainable_parameters(model):
    return int(sum(math.prod(int(d) for d in v.shape) for v in model.trainable_weights))


def non_trainable_parameters(model):
    return int(sum(math.prod(int(d) for d in v.shape) for v in model.non_trainable_weights))
