"""Lemma 1 of Yun et al., *On the Angular Update and Hyperparameter Tuning of a Scale-Invariant Network*, ECCV 2022
(Eqs. 5-6 of the main text, Eqs. 28-29 of the appendix), checked on a network of this package.

For a scale-invariant loss, L(c·w) = L(w) for every c > 0, and therefore

* ∇L(c·w) = ∇L(w) / c          (Eq. 5 / 28: differentiate L(c·w) = L(w) in w),
* ⟨w, ∇L(w)⟩ = 0               (Eq. 6 / 29: differentiate L(c·w) = L(w) in c at c = 1).

:func:`check_scale_invariance` measures both on a model's ``scale_invariant_names`` tensors and one batch.
"""
from __future__ import annotations

import copy

import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["check_scale_invariance"]


def _loss_and_grads(model: nn.Module, names: list[str], x: torch.Tensor, y: torch.Tensor):
    params = dict(model.named_parameters())
    loss = F.cross_entropy(model(x), y)
    grads = torch.autograd.grad(loss, [params[n] for n in names])
    return loss.detach(), grads


_NORMS = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm)


def check_scale_invariance(model: nn.Module, x: torch.Tensor, y: torch.Tensor, c: float = 3.0,
                           bn_eps: float | None = None) -> pd.DataFrame:
    """Lemma 1 on ``model`` and the batch ``(x, y)`` (cross-entropy loss, batch statistics, i.e. training mode).

    Every tensor named in ``model.scale_invariant_names`` is multiplied by ``c`` at once. Returns one row per such
    tensor: ``tensor`` (its name), ``numel``, ``cos_w_grad`` = ⟨w, ∇L(w)⟩ / (‖w‖·‖∇L(w)‖) (≈ 0 by Eq. 6) and
    ``grad_ratio`` = ‖∇L(c·w)‖ / ‖∇L(w)‖ for that tensor (≈ 1/c by Eq. 5). ``df.attrs`` holds ``loss`` = L(w),
    ``loss_scaled`` = L(c·w) (equal) and ``c``. Works on copies: ``model`` itself (weights, BN running statistics,
    mode) is left untouched. The copies run in training mode: the invariance needs batch statistics.

    A normalization layer divides by sqrt(σ² + ε), so the network is scale-invariant only up to ε (1e-5 by
    default): the deviations are of order ε/σ², not rounding. ``bn_eps`` replaces ε in the copies' normalization
    layers (e.g. 1e-20 in float64 leaves rounding error only), to show that ε is the whole residual.
    """
    if c <= 0:
        raise ValueError(f"check_scale_invariance: c must be > 0, got {c}")
    names = list(getattr(model, "scale_invariant_names", []))
    if not names:
        raise ValueError("check_scale_invariance: the model declares no scale_invariant_names")
    base, scaled = copy.deepcopy(model).train(), copy.deepcopy(model).train()
    if bn_eps is not None:
        for m in [*base.modules(), *scaled.modules()]:
            if isinstance(m, _NORMS):
                m.eps = bn_eps
    with torch.no_grad():
        sp = dict(scaled.named_parameters())
        for n in names:
            sp[n].mul_(c)
    loss, grads = _loss_and_grads(base, names, x, y)
    loss_c, grads_c = _loss_and_grads(scaled, names, x, y)
    bp = dict(base.named_parameters())
    rows = []
    for n, g, gc in zip(names, grads, grads_c):
        w = bp[n].detach()
        gn = g.norm()
        rows.append(dict(tensor=n, numel=w.numel(),
                         cos_w_grad=float((w * g).sum() / (w.norm() * gn)),
                         grad_ratio=float(gc.norm() / gn)))
    df = pd.DataFrame(rows)
    df.attrs.update(loss=float(loss), loss_scaled=float(loss_c), c=float(c))
    return df
