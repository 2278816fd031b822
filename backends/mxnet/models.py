"""The networks this backend trains, by name (backends/networks.py lists them): name -> Gluon
HybridBlock class (num_classes, layout)."""
import math

from mxnet.gluon import nn

from .. import networks
from ..protocol import Unsupported
from .inception import Inception3, Inception4
from .resnet import ResNet50, ResNet152
from .vgg import VGG16

MODELS = {"resnet50": ResNet50, "resnet152": ResNet152, "inception3": Inception3,
          "inception4": Inception4, "vgg16": VGG16}


def build(name: str, num_classes: int = 1000, layout: str = "NCHW") -> nn.HybridBlock:
    """The network called `name`; Unsupported (a recorded result) with the reason otherwise."""
    if name not in MODELS:
        raise Unsupported(networks.why_not(name))
    return MODELS[name](num_classes, layout)


def conv_layout(net: nn.Block) -> str:
    """The layout the built network's first convolution really uses ('NCHW' or 'NHWC')."""
    blocks = [net]
    while blocks:
        block = blocks.pop(0)
        if isinstance(block, nn.Conv2D):
            return block._kwargs["layout"]
        blocks = list(block._children.values()) + blocks
    raise ValueError("{} has no convolution".format(type(net).__name__))


def trainable_parameters(net: nn.Block) -> int:
    """Count parameters that receive gradients (the BN running statistics have grad_req 'null')."""
    total = 0
    for param in net.collect_params().values():
        if param.grad_req != "null":
            total += int(math.prod(param.shape))
    return total
