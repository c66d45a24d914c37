"""CutMix (Yun, Han, Oh, Chun, Choe, Yoo — *CutMix: Regularization Strategy to Train Strong Classifiers with
Localizable Features*, ICCV 2019, Sec. 3.1, Eq. 1 and Algorithm A1), the regularizer of the "ResNet-50 + CutMix"
row of Table 2 of Heo et al. 2021 (AdamP).

One CutMix draw per **batch**, as the CutMix paper's reference code: λ ~ Beta(β, β) (β = 1, i.e. Uniform(0, 1));
a box of size (H√(1−λ), W√(1−λ)) centred at a uniform random pixel, clipped to the image; the pixels inside the box
come from a random permutation of the batch; λ is then **recomputed from the clipped box area**
(λ = 1 − box area / (H·W)) so the label weight equals the pixel fraction exactly. Loss: λ·CE(out, y) +
(1 − λ)·CE(out, y[perm]). The CutMix paper's ImageNet recipe applies it with probability 1 (``cutmix_prob=1.0``,
β = 1) — our default.

Everything is a batched tensor op: the box is one broadcast (H, W) mask and ``torch.where`` over the batch; the
random numbers come from an optional ``torch.Generator`` (deterministic given its seed).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

#: The CutMix paper's ImageNet recipe (its reference code: ``--beta 1.0 --cutmix_prob 1.0``).
CUTMIX_BETA = 1.0
CUTMIX_PROB = 1.0


def _uniform(generator, device=None) -> float:
    return float(torch.rand((), generator=generator))


def _beta(beta: float, generator) -> float:
    """λ ~ Beta(β, β) from a generator: Beta(a, a) = X/(X+Y) with X, Y ~ Gamma(a) (β = 1: a uniform)."""
    if beta == 1.0:
        return _uniform(generator)
    g = torch._standard_gamma(torch.full((2,), float(beta)), generator=generator)
    return float(g[0] / g.sum())


def rand_box(height: int, width: int, lam: float, generator=None) -> tuple[int, int, int, int]:
    """(y1, y2, x1, x2) of the CutMix box for mixing ratio ``lam`` (CutMix Sec. 3.1: r_w = W√(1−λ),
    r_h = H√(1−λ), centre uniform over the image, clipped at the borders)."""
    cut = math.sqrt(1.0 - lam)
    ch, cw = int(height * cut), int(width * cut)
    cy = int(torch.randint(height, (), generator=generator))
    cx = int(torch.randint(width, (), generator=generator))
    y1, y2 = max(cy - ch // 2, 0), min(cy + ch // 2, height)
    x1, x2 = max(cx - cw // 2, 0), min(cx + cw // 2, width)
    return y1, y2, x1, x2


def cutmix_batch(x: torch.Tensor, y: torch.Tensor, beta: float = CUTMIX_BETA, prob: float = CUTMIX_PROB,
                 generator: torch.Generator | None = None):
    """Apply CutMix to a batch ``x`` (B, C, H, W) with integer labels ``y`` (B,).

    Returns ``(x_mixed, y_a, y_b, lam)``: ``x_mixed`` is a new tensor (``x`` is not modified), ``y_a = y``,
    ``y_b = y[perm]`` and ``lam`` the weight of ``y_a`` (= fraction of pixels that are still ``x``'s own).
    With probability ``1 − prob`` the batch is returned unchanged with ``lam = 1``. The generator lives on the
    CPU (scalar draws only); the mask is built on ``x.device``."""
    if not 0 <= prob <= 1:
        raise ValueError(f"prob: must be in [0, 1], got {prob!r}")
    if beta <= 0:
        raise ValueError(f"beta: must be > 0, got {beta!r}")
    if prob < 1 and _uniform(generator) >= prob:
        return x, y, y, 1.0
    b, _, h, w = x.shape
    lam = _beta(beta, generator)
    perm = torch.randperm(b, generator=generator).to(x.device)
    y1, y2, x1, x2 = rand_box(h, w, lam, generator)
    rows = torch.arange(h, device=x.device)
    cols = torch.arange(w, device=x.device)
    box = ((rows >= y1) & (rows < y2))[:, None] & ((cols >= x1) & (cols < x2))[None, :]
    mixed = torch.where(box, x[perm], x)
    lam = 1.0 - (y2 - y1) * (x2 - x1) / (h * w)
    return mixed, y, y[perm.to(y.device)], lam


def cutmix_loss(logits: torch.Tensor, y_a: torch.Tensor, y_b: torch.Tensor, lam: float,
                label_smoothing: float = 0.0) -> torch.Tensor:
    """λ·CE(logits, y_a) + (1 − λ)·CE(logits, y_b) (CutMix Eq. 1 with the mixed one-hot target)."""
    return (lam * F.cross_entropy(logits, y_a, label_smoothing=label_smoothing)
            + (1.0 - lam) * F.cross_entropy(logits, y_b, label_smoothing=label_smoothing))


def mixed_targets(y_a: torch.Tensor, y_b: torch.Tensor, lam: float, num_classes: int) -> torch.Tensor:
    """The soft target λ·onehot(y_a) + (1 − λ)·onehot(y_b) (CutMix Eq. 1), shape (B, num_classes)."""
    return lam * F.one_hot(y_a, num_classes).float() + (1.0 - lam) * F.one_hot(y_b, num_classes).float()
