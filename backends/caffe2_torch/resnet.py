"""ResNet v1.5 in PyTorch: stride on the 3x3 conv, no conv biases, 1000 classes.

ResNet-50: 25,557,032 trainable parameters (torchvision's count), 53,120 BN running statistics
besides; ResNet-152 is the same bottleneck code with blocks (3, 8, 36, 3): 60,192,808.
The Keras, Gluon and Flax definitions in the other backends are the same networks.
"""
import torch
from torch import nn

from ..networks import RESNET_EXPANSION as EXPANSION
from ..networks import resnet_stages

BN_MOMENTUM = 0.1  # PyTorch convention (= 0.9 decay in Keras/Gluon terms)
BN_EPSILON = 1e-5


def _bn(channels: int, zero_init: bool = False) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(channels, eps=BN_EPSILON, momentum=BN_MOMENTUM)
    if zero_init:  # last BN of each residual branch starts at zero: the block starts as identity
        nn.init.zeros_(bn.weight)
    return bn


class Bottleneck(nn.Module):
    def __init__(self, in_channels: int, width: int, stride: int):
        super().__init__()
        out_channels = width * EXPANSION
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = _bn(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)  # v1.5
        self.bn2 = _bn(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = _bn(out_channels, zero_init=True)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                _bn(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, stages, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = _bn(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        layers, in_channels = [], 64
        for width, blocks, stride in stages:
            stage = []
            for i in range(blocks):
                stage.append(Bottleneck(in_channels, width, stride if i == 0 else 1))
                in_channels = width * EXPANSION
            layers.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def ResNet50(num_classes: int = 1000) -> ResNet:
    return ResNet(resnet_stages("resnet50"), num_classes)


def ResNet152(num_classes: int = 1000) -> ResNet:
    return ResNet(resnet_stages("resnet152"), num_classes)
