"""Inception-v3 and -v4 in PyTorch, built from the layer tables of backends/networks.py.

Inception-v3: torchvision's inception_v3(aux_logits=False), i.e. no auxiliary head, every conv
without bias followed by BatchNorm (with scale, eps 0.001) and ReLU: 23,834,568 trainable
parameters, in torchvision's order. Inception-v4: timm's inception_v4, 42,679,816. Dropout before
the fc layer left out (networks.py says why). Initialised as torchvision initialises Inception-v3
(truncated normal, std 0.1, for convs and the fc weight).
"""
import torch
from torch import nn

from ..networks import INCEPTION3, INCEPTION4, INCEPTION_BN_EPSILON


class Concat(nn.Module):
    """Branches applied to the same input, their outputs concatenated along the channels."""

    def __init__(self, branches):
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([branch(x) for branch in self.branches], 1)


def _build(layers, channels: int):
    """(nn.Sequential of `layers`, its output channels) for an input of `channels`."""
    modules = []
    for layer in layers:
        if layer[0] == "conv":
            _, out, kernel, stride, padding = layer
            modules.append(nn.Sequential(
                nn.Conv2d(channels, out, kernel, stride, padding, bias=False),
                nn.BatchNorm2d(out, eps=INCEPTION_BN_EPSILON), nn.ReLU(inplace=True)))
            channels = out
        elif layer[0] == "concat":
            built = [_build(branch, channels) for branch in layer[1]]
            modules.append(Concat([b for b, _ in built]))
            channels = sum(c for _, c in built)
        elif layer[0] == "max":
            modules.append(nn.MaxPool2d(layer[1], layer[2], layer[3]))
        else:
            modules.append(nn.AvgPool2d(layer[1], layer[2], layer[3],
                                        count_include_pad=layer[0] == "avg"))
    return nn.Sequential(*modules), channels


class Inception(nn.Module):
    def __init__(self, table, num_classes: int = 1000):
        super().__init__()
        self.features, channels = _build(table, 3)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, mean=0.0, std=0.1, a=-2, b=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.avgpool(self.features(x)), 1))


def Inception3(num_classes: int = 1000) -> Inception:
    return Inception(INCEPTION3, num_classes)


def Inception4(num_classes: int = 1000) -> Inception:
    return Inception(INCEPTION4, num_classes)
