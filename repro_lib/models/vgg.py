"""VGG with batch normalization, CIFAR variant (32×32 inputs).

Simonyan & Zisserman, *Very Deep Convolutional Networks for Large-Scale Image Recognition* (ICLR 2015),
configurations A/B/D/E (VGG11/13/16/19), with BN after every convolution (Ioffe & Szegedy 2015), as used in
Table 1 of the back-matching supplement (Zhang, Chen, Liu, arXiv 1802.09750, App. D).

CIFAR variant (the common one, e.g. kuangliu/pytorch-cifar): ``[conv3×3(pad 1) → BN → ReLU]`` stacks with
a 2×2 max-pool closing each of the 5 stages (32 → 1), then a single ``Linear(8·width, num_classes)`` on the
flattened 1×1 map (no 4096-wide FC layers, no dropout). ``width`` scales every channel count by
``width/64`` (64 = the standard 64-128-256-512-512).

Choices: convolutions have no bias (a bias directly followed by train-mode BN is cancelled by the mean
subtraction; torchvision keeps one); ``ghost_batch`` is accepted for the common builder signature and
ignored (plain BN, as in the paper). ``scale_invariant=True`` raises ``NotImplementedError``: the back-matching
paper trains the standard net, and VGG's classifier and BN affine parameters are not scale-invariant.

``scale_invariant_names``: every conv weight (each is directly followed by BN, so the loss is invariant to
rescaling it in train mode); the classifier and BN γ/β are not.
"""
from __future__ import annotations

import torch.nn as nn

from ._registry import register_model

CFGS = {
    "vgg11_bn": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg13_bn": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg16_bn": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "vgg19_bn": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
                 512, 512, 512, 512, "M"],
}


class VGG(nn.Module):
    def __init__(self, cfg: list, num_classes: int, width: int = 64, in_channels: int = 3):
        super().__init__()
        layers: list[nn.Module] = []
        c_in = in_channels
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                c = max(1, v * width // 64)
                layers += [nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
                c_in = c
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(c_in, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        self.scale_invariant_names = [n for n, p in self.named_parameters()
                                      if n.startswith("features.") and p.ndim == 4]

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def _builder(name: str):
    def build(num_classes: int, scale_invariant: bool = False, width: int = 64, ghost_batch: int = 64, **kw):
        if scale_invariant:
            raise NotImplementedError(f"{name}: no scale-invariant variant (use scale_invariant=False)")
        if kw:
            raise TypeError(f"{name}: unexpected arguments {sorted(kw)}")
        return VGG(CFGS[name], num_classes, width)

    build.__name__ = f"build_{name}"
    build.__doc__ = f"{name}: CIFAR VGG with BN (module docstring); ``width`` scales channels by width/64."
    return register_model(name)(build)


for _name in CFGS:
    _builder(_name)
