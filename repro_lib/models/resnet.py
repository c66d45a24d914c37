"""CIFAR ResNet-18 of He et al. (CVPR 2016) and its scale-invariant version of Yun et al., *On the Angular Update
and Hyperparameter Tuning of a Scale-Invariant Network*, ECCV 2022, Sec. 3.1.

Unmodified (``scale_invariant=False``, Yun et al. Sec. 5.2 / Tables 7, 11): the usual CIFAR ResNet-18 -- 3x3 stem
conv (stride 1, no max-pool), BasicBlocks [2, 2, 2, 2] with widths w, 2w, 4w, 8w (w = ``width`` = 64 in the paper),
strides 1, 2, 2, 2, a 1x1 conv + BN projection shortcut where the shape changes, global average pooling and a
trainable FC with bias. Convs have no bias; BN is ``nn.BatchNorm2d`` with affine (gamma=1, beta=0 at init).
11,173,962 parameters for 10 classes. ``scale_invariant_names``: every conv weight -- each conv is directly
followed by a BN (stem, block convs, shortcut convs; 20 tensors), Sec. 5.2 "only scale-invariant weights".

Scale-invariant (``scale_invariant=True``, Sec. 3.1): every BN becomes ``GhostBatchNorm(ghost_batch=64,
affine=False)``; after global average pooling a non-affine normalization over the pooled features is added, and the
FC is fixed (:class:`~repro_lib.models.layers.FixedLinear`, ``nn.Linear`` init, never trained). Our reading of
"normalization without affine transform after global average pooling": the same ghost batch norm (ghost batch 64,
no affine) applied to the (B, 8w) pooled vector -- the paper says GBN is used "as the normalization layers", so the
added one is a GBN too. The only trainable tensors are then the 20 conv weights, each followed by a non-affine BN,
and the loss is invariant to rescaling each of them (training mode, i.e. batch statistics -- in eval mode the
running statistics would have to be rescaled too; exact up to BN's eps = 1e-5 added to the variance; tested in
``tests/test_models.py``); ``scale_invariant_names`` lists all of them.

Initialisation: PyTorch defaults (conv: kaiming-uniform with a=sqrt(5); FC: ``nn.Linear``), as in the widely used
``kuangliu/pytorch-cifar`` ResNet-18; the paper does not state its initialisation.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._registry import register_model
from .layers import FixedLinear, norm_layer


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, norm):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = norm(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = norm(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), norm(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """CIFAR-style ResNet with BasicBlocks; any input size (global average pooling)."""

    def __init__(self, num_blocks=(2, 2, 2, 2), num_classes: int = 10, width: int = 64,
                 scale_invariant: bool = False, ghost_batch: int = 64, in_channels: int = 3):
        super().__init__()

        def norm(c: int) -> nn.Module:
            return norm_layer(c, scale_invariant, ghost_batch)

        self.scale_invariant = scale_invariant
        self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        self.bn1 = norm(width)
        layers, cin = [], width
        for i, n in enumerate(num_blocks):
            cout = width * 2 ** i
            blocks = []
            for j in range(n):
                blocks.append(BasicBlock(cin, cout, (1 if i == 0 else 2) if j == 0 else 1, norm))
                cin = cout
            layers.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.num_features = cin
        if scale_invariant:
            self.pool_norm = norm_layer(cin, True, ghost_batch, dim=1)  # non-affine GBN after pooling (Sec. 3.1)
            self.fc = FixedLinear(cin, num_classes)
        else:
            self.pool_norm = nn.Identity()
            self.fc = nn.Linear(cin, num_classes)
        if scale_invariant:
            self.scale_invariant_names = [n for n, p in self.named_parameters() if p.requires_grad]
        else:  # conv weights directly followed by a BN (Yun et al. Sec. 5.2)
            self.scale_invariant_names = [n for n, m in self.named_modules() if isinstance(m, nn.Conv2d)]
            self.scale_invariant_names = [f"{n}.weight" for n in self.scale_invariant_names]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        out = torch.flatten(F.adaptive_avg_pool2d(out, 1), 1)
        return self.fc(self.pool_norm(out))


def _check_kw(name: str, kw: dict, allowed: set[str]) -> None:
    bad = set(kw) - allowed
    if bad:
        raise TypeError(f"{name}: unexpected keyword(s) {sorted(bad)}; accepted extras: {sorted(allowed)}")


@register_model("resnet18")
def resnet18(num_classes: int, scale_invariant: bool = False, width: int = 64, ghost_batch: int = 64,
             **kw) -> nn.Module:
    """CIFAR ResNet-18 (widths ``width``·{1,2,4,8}); extra keyword: ``in_channels`` (default 3)."""
    _check_kw("resnet18", kw, {"in_channels"})
    if width < 1:
        raise ValueError(f"resnet18: width must be >= 1, got {width}")
    return ResNet((2, 2, 2, 2), num_classes, width, scale_invariant, ghost_batch, **kw)
