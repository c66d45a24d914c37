"""Lemma 1 of Yun et al., *On the Angular Update and Hyperparameter Tuning of a Scale-Invariant Network*, ECCV 2022
(Eqs. 5-6 of the main text, Eqs. 28-29 of the appendix), checked on a network of this package.

For a scale-invariant loss, L(c·w) = L(w) for every c > 0, and therefore

* ∇L(c·w) = ∇L(w) / c          (Eq. 5 / 28: differentiate L(c·w) = L(w) in w),
* ⟨w, ∇L(w)⟩ = 0               (Eq. 6 / 29: differentiate L(c·w) = L(w) in c at c = 1).

:func:`check_scale_invariance` measures both on a model's ``scale_invariant_names`` tensors and one batch.
"""
from __future__ import annotations

import pandas as pd
import torch
import torch.nn as nn

from ...tuning import scale_invariance

__all__ = ["check_scale_invariance"]


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

    The measurement is ``repro_lib.tuning.scale_invariance(..., together=True)`` in the model's own precision;
    ``repro_lib.tuning.scale_invariant_parameters`` finds such tensors on any network, one tensor at a time.
    """
    if c <= 0:
        raise ValueError(f"check_scale_invariance: c must be > 0, got {c}")
    names = list(getattr(model, "scale_invariant_names", []))
    if not names:
        raise ValueError("check_scale_invariance: the model declares no scale_invariant_names")
    df = scale_invariance(model, x, y, names=names, c=c, together=True, bn_eps=bn_eps, dtype=None)
    out = df[["tensor", "numel", "cos_w_grad", "grad_ratio"]].copy()
    out.attrs.update(loss=df.attrs["loss"], loss_scaled=df.attrs["loss_scaled"], c=float(c))
    return out
