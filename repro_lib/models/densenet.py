"""DenseNet-BC-100 for CIFAR (Huang et al., CVPR 2017) and its scale-invariant version, as used by Yun et al.,
*On the Angular Update and Hyperparameter Tuning of a Scale-Invariant Network*, ECCV 2022, Appendix B
(Tables 8 and 10: "scale-invariant DenseNet-100 [11] trained on CIFAR-100").

Our reading of "DenseNet-100": DenseNet-BC (bottleneck + compression) with depth L = 100 and growth rate k = 12,
compression 0.5 -- the 0.8M-parameter CIFAR model of Huang et al. Table 2 (the only depth-100 DenseNet there
besides the 27M-parameter k=24 one; the plain DenseNet of that table has depth 100 only at k=24, which is too big
for the paper's 5x5x3x7 grids of 300-epoch runs). Structure:

* 3x3 conv, 3 -> 2k channels;
* 3 dense blocks of n = (L - 4) / 6 = 16 bottleneck layers
  ``BN-ReLU-Conv1x1(4k)-BN-ReLU-Conv3x3(k)``, each output concatenated to the block's features;
* between blocks a transition ``BN-ReLU-Conv1x1(floor(0.5 c))-AvgPool2``;
* final ``BN-ReLU-global AvgPool-FC``. Convs have no bias; no dropout (Huang et al. use none with augmentation).
  Channel counts for k = 12: 24 -> 216 | 108 -> 300 | 150 -> 342. Conv layers 1 + 3*16*2 + 2 = 99, + FC = 100.

Width: ``width`` (the family-wide base-width knob, 64 = paper size) scales the growth rate:
``growth = max(1, round(12 * width / 64))`` (64 -> 12, 32 -> 6, 16 -> 3, 8 -> 2). ``depth`` (default 100,
``depth % 6 == 4``) and ``compression`` (0.5) are extra keywords.

Pre-activation: each BN sits *before* a conv, so a conv weight's scale-invariance comes from the BNs that *consume*
its output channels. In a dense block a layer's k output channels are concatenated to the features and are read
only through BNs (every later layer's first BN, the transition's BN, or the final BN), each of which normalizes per
channel, so rescaling one conv's weight rescales only its own output channels and cancels in every consumer. The
bottleneck 1x1 conv is followed by the layer's second BN, the transition conv's (average-pooled) output feeds the
next block's BNs, and the last block's features go through the final BN. Hence, with non-affine BNs, every conv
weight is scale-invariant; with affine BNs (unmodified net) every conv weight still is, the BN affine and the FC are
not.

Scale-invariant (``scale_invariant=True``), made so as the ResNet of Sec. 3.1: every BN is
``GhostBatchNorm(ghost_batch=64, affine=False)``, a non-affine GBN over the pooled features after global average
pooling, and a fixed FC (``FixedLinear``: ``nn.Linear`` init, never trained). ``scale_invariant_names`` = all
trainable tensors (the 99 conv weights). Unmodified: affine ``nn.BatchNorm2d`` and trainable FC;
``scale_invariant_names`` = the 99 conv weights.

Initialisation: PyTorch defaults (as the ResNet file); Huang et al.'s Torch code used He-normal, the paper we
reproduce does not say.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._registry import register_model
from .layers import FixedLinear, norm_layer


class Bottleneck(nn.Module):
    """``BN-ReLU-Conv1x1(4k)-BN-ReLU-Conv3x3(k)``; returns ``cat([x, new], 1)``."""

    def __init__(self, cin: int, growth: int, norm):
        super().__init__()
        self.bn1 = norm(cin)
        self.conv1 = nn.Conv2d(cin, 4 * growth, 1, bias=False)
        self.bn2 = norm(4 * growth)
        self.conv2 = nn.Conv2d(4 * growth, growth, 3, 1, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(out)))
        return torch.cat([x, out], 1)


class Transition(nn.Module):
    """``BN-ReLU-Conv1x1(cout)-AvgPool2``."""

    def __init__(self, cin: int, cout: int, norm):
        super().__init__()
        self.bn = norm(cin)
        self.conv = nn.Conv2d(cin, cout, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(self.conv(F.relu(self.bn(x))), 2)


class DenseNetBC(nn.Module):
    def __init__(self, depth: int = 100, growth: int = 12, compression: float = 0.5, num_classes: int = 100,
                 scale_invariant: bool = False, ghost_batch: int = 64, in_channels: int = 3):
        super().__init__()
        if (depth - 4) % 6 != 0 or depth < 10:
            raise ValueError(f"densenet: DenseNet-BC depth must be 6n+4 (n >= 1), got {depth}")
        if not 0.0 < compression <= 1.0:
            raise ValueError(f"densenet: compression must be in (0, 1], got {compression}")
        n = (depth - 4) // 6

        def norm(c: int) -> nn.Module:
            return norm_layer(c, scale_invariant, ghost_batch)

        self.scale_invariant, self.depth, self.growth = scale_invariant, depth, growth
        c = 2 * growth
        self.conv1 = nn.Conv2d(in_channels, c, 3, 1, 1, bias=False)
        stages = []
        for b in range(3):
            layers = []
            for _ in range(n):
                layers.append(Bottleneck(c, growth, norm))
                c += growth
            stages.append(nn.Sequential(*layers))
            if b < 2:
                cout = int(math.floor(c * compression))
                stages.append(Transition(c, cout, norm))
                c = cout
        self.features = nn.Sequential(*stages)
        self.bn_final = norm(c)
        self.num_features = c
        if scale_invariant:
            self.pool_norm = norm_layer(c, True, ghost_batch, dim=1)
            self.fc = FixedLinear(c, num_classes)
            self.scale_invariant_names = [nm for nm, p in self.named_parameters() if p.requires_grad]
        else:
            self.pool_norm = nn.Identity()
            self.fc = nn.Linear(c, num_classes)
            self.scale_invariant_names = [f"{nm}.weight" for nm, m in self.named_modules() if isinstance(m, nn.Conv2d)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.features(self.conv1(x))
        out = F.relu(self.bn_final(out))
        out = torch.flatten(F.adaptive_avg_pool2d(out, 1), 1)
        return self.fc(self.pool_norm(out))


def growth_for_width(width: int) -> int:
    """Growth rate for the family-wide ``width`` knob: ``max(1, round(12 * width / 64))`` (64 -> the paper's 12)."""
    if width < 1:
        raise ValueError(f"densenet: width must be >= 1, got {width}")
    return max(1, round(12 * width / 64))


@register_model("densenet100")
def densenet100(num_classes: int, scale_invariant: bool = False, width: int = 64, ghost_batch: int = 64,
                **kw) -> nn.Module:
    """DenseNet-BC-100 (k = 12 at ``width=64``); extra keywords ``depth`` (100), ``compression`` (0.5),
    ``in_channels`` (3)."""
    bad = set(kw) - {"depth", "compression", "in_channels"}
    if bad:
        raise TypeError(f"densenet100: unexpected keyword(s) {sorted(bad)}; accepted: depth, compression, in_channels")
    return DenseNetBC(kw.get("depth", 100), growth_for_width(width), kw.get("compression", 0.5), num_classes,
                      scale_invariant, ghost_batch, kw.get("in_channels", 3))
