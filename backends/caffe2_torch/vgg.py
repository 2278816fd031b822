"""VGG-16 in PyTorch, torchvision's definition (configuration D, no batch norm): 13 3x3 convs with
bias, adaptive average pooling to 7x7 (so the classifier's 25,088 inputs hold at any image size)
and three fully connected layers: 138,357,544 trainable parameters. Dropout left out
(backends/networks.py says why). Initialised as torchvision does.
"""
import torch
from torch import nn

from ..networks import VGG16 as CONFIG
from ..networks import VGG_CLASSIFIER, VGG_POOL


class VGG16(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers, channels = [], 3
        for v in CONFIG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(channels, v, 3, padding=1), nn.ReLU(inplace=True)]
                channels = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(VGG_POOL)
        widths = (channels * VGG_POOL * VGG_POOL,) + VGG_CLASSIFIER
        head = []
        for a, b in zip(widths, widths[1:]):
            head += [nn.Linear(a, b), nn.ReLU(inplace=True)]
        self.classifier = nn.Sequential(*head, nn.Linear(widths[-1], num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))
