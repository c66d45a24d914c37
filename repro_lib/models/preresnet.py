"""Pre-activation ResNet-32 for CIFAR (He et al., "Identity Mappings in Deep Residual Networks", ECCV 2016) as used
by Li & Arora, "An Exponential Learning Rate Schedule for Deep Learning", ICLR 2020 (Sec. 4, App. E, Fig. 11).

Architecture (depth 6n+2, n = 5 for 32): 3x3 stem conv (``width`` channels, stride 1) → three stages of n
pre-activation basic blocks with widths w, 2w, 4w and strides 1, 2, 2 → BN → ReLU → global average pooling → FC.
A block is BN → ReLU → conv3x3(stride) → BN → ReLU → conv3x3, added to the shortcut. Convs have no bias.

Shortcut projections (where the shape changes, the first block of stages 2 and 3): BN → 1x1 conv (stride 2). The
extra BN is Li & Arora's App. E / Fig. 11 ("we add an additional normalization layer in the shortcut before
downsampling"): a projection of the raw residual stream would be 2-homogeneous in the weights while the residual
branch is 1-homogeneous, so the net would not be scale-invariant; with the BN every summand of the stream is
1-homogeneous and the final BN makes the output 0-homogeneous. The same architecture is used in both modes.

``scale_invariant=True`` (Li & Arora Sec. 4: "We fix all the scalar and bias of BN ... We fix the parameters in the
last fully connected layer"): every BN is a non-affine ``GhostBatchNorm`` (i.e. scale 1 and bias 0, not trainable),
the FC is :class:`~repro_lib.models.layers.FixedLinear` (random ``nn.Linear`` init, buffers). The trainable tensors
are the 33 conv weights (stem + 30 block 3x3 convs + 2 shortcut 1x1 convs); the loss is invariant to
rescaling *all of them jointly* (Def. in Sec. 1.2; tested in ``tests/test_preresnet.py``), which is what Thm
2.9–2.13 need. Individually, only the first conv of each block (directly followed by BN) is scale-invariant; the stem,
second convs and shortcut convs are invariant only jointly, because they add into the same residual stream.
``scale_invariant_names`` = all trainable tensors (DEVELOPERS.md convention for scale-invariant nets).

``scale_invariant=False``: affine ``nn.BatchNorm2d`` and a trainable ``nn.Linear``; ``scale_invariant_names`` = the
weights of the first conv of each block (the only convs directly followed by a BN).

``ghost_batch``: ghost batch size of the scale-invariant BNs (Li & Arora use plain BN: pass ``ghost_batch`` ≥ the
batch size). ``bn_eps`` (default 1e-5) is exposed because ε breaks exact scale invariance (tests use ε = 1e-30; torch refuses 0).
Initialisation: conv weights ~ N(0, 2/(k²·out_channels)) (He et al. 2015, as in the widely used
``bearpaw/pytorch-classification`` PreResNet); Li & Arora do not state theirs.
Width 16: 463,792 trainable parameters (scale-invariant); 466,810 with affine BN and trainable FC.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._registry import register_model
from .layers import FixedLinear, GhostBatchNorm


class PreActBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, norm):
        super().__init__()
        self.bn1 = norm(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = norm(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = None
        if stride != 1 or cin != cout:  # App. E: normalization before the downsampling projection
            self.shortcut = nn.Sequential(norm(cin), nn.Conv2d(cin, cout, 1, stride, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(out)))
        return out + (x if self.shortcut is None else self.shortcut(x))


class PreResNet(nn.Module):
    def __init__(self, depth: int = 32, num_classes: int = 10, width: int = 16, scale_invariant: bool = False,
                 ghost_batch: int = 64, bn_eps: float = 1e-5, in_channels: int = 3):
        super().__init__()
        if depth < 8 or (depth - 2) % 6:
            raise ValueError(f"depth: PreResNet depth must be 6n+2 (8, 14, 20, 32, ...), got {depth}")
        n = (depth - 2) // 6

        def norm(c: int) -> nn.Module:
            if scale_invariant:
                return GhostBatchNorm(c, ghost_batch=ghost_batch, eps=bn_eps, affine=False)
            return nn.BatchNorm2d(c, eps=bn_eps)

        self.scale_invariant = scale_invariant
        self.conv = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        blocks, cin = [], width
        for stage, (w, stride) in enumerate([(width, 1), (2 * width, 2), (4 * width, 2)]):
            for i in range(n):
                blocks.append(PreActBlock(cin, w, stride if i == 0 else 1, norm))
                cin = w
        self.blocks = nn.Sequential(*blocks)
        self.bn = norm(cin)
        self.fc = FixedLinear(cin, num_classes) if scale_invariant else nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                k = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / k))
        if scale_invariant:
            self.scale_invariant_names = [name for name, p in self.named_parameters() if p.requires_grad]
        else:
            self.scale_invariant_names = [f"blocks.{i}.conv1.weight" for i in range(len(blocks))]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.blocks(self.conv(x))
        out = F.relu(self.bn(out))
        return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))


@register_model("preresnet32")
def preresnet32(num_classes: int, scale_invariant: bool = False, width: int = 16, ghost_batch: int = 64,
                **kw) -> nn.Module:
    """PreResNet-32 (Li & Arora 2020 Sec. 4); ``width`` = first-stage width (16 in the paper). ``kw``: ``depth``
    (6n+2, default 32), ``bn_eps``, ``in_channels``."""
    return PreResNet(depth=kw.pop("depth", 32), num_classes=num_classes, width=width,
                     scale_invariant=scale_invariant, ghost_batch=ghost_batch, **kw)
