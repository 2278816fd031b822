"""The networks this backend trains, by name (backends/networks.py lists them): name -> class."""
from torch import nn

from .. import networks
from ..protocol import Unsupported
from .inception import Inception3, Inception4
from .resnet import ResNet50, ResNet152
from .vgg import VGG16

MODELS = {"resnet50": ResNet50, "resnet152": ResNet152, "inception3": Inception3,
          "inception4": Inception4, "vgg16": VGG16}


def build(name: str, num_classes: int = 1000) -> nn.Module:
    """The network called `name`; Unsupported (a recorded result) with the reason otherwise."""
    if name not in MODELS:
        raise Unsupported(networks.why_not(name))
    return MODELS[name](num_classes)


def trainable_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
