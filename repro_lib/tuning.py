"""The tuning rule of Yun et al., *On the Angular Update and Hyperparameter Tuning of a Scale-Invariant Network*,
ECCV 2022, as a tool for one's own training.

For the scale-invariant weights of a network (those in front of a normalization layer), SGD with momentum μ,
coupled L2 weight decay λ, learning rate η, batch size B and N training images turns the weights by an angle per
epoch that depends on these five numbers only through the *tuning factor* N·η·λ/(B(1−μ)) (Eqs. 26-27). Tune that
factor, not η and λ separately, and keep it when N, B, η or μ change (Sec. 5-6)::

    from repro_lib import tuning
    tf = tuning.tuning_factor(n=50_000, batch_size=128, lr=0.1, weight_decay=2e-4, momentum=0.9)  # 10/128
    wd = tuning.weight_decay_for(tf, n=50_000, batch_size=512, lr=0.1, momentum=0.9)             # 8e-4
    names = tuning.scale_invariant_parameters(model, x, y)   # the tensors the rule is about (Lemma 1)
    tracker = AngularTracker(model, names)                   # repro_lib.angular: Δθ per epoch, to compare with
    tuning.angular_update_per_epoch(tf)                      # arccos(1 − TF), Eq. 27

* :func:`tuning_factor`, :func:`weight_decay_for`, :func:`lr_for` -- Eq. 27 and the value that keeps it;
* :func:`relaxation_epochs` -- 1/(2·TF), the epochs the weight norm takes to settle (``repro_lib.profiles``' shrink
  rule 3), and :func:`angular_update_per_epoch` -- arccos(1 − TF), the Δθ the first-order reading of Eq. 27 expects;
* :func:`scale_invariance` and :func:`scale_invariant_parameters` -- Lemma 1 (Eqs. 5-6) measured on one batch, to find
  the scale-invariant tensors of any ``torch.nn.Module`` without a hand-made list.

Every function raises ``ValueError`` whose message starts with the name of the bad argument.
"""
from __future__ import annotations

import copy
import math
import numbers
from typing import Callable, Sequence

import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import angular, profiles

__all__ = ["tuning_factor", "weight_decay_for", "lr_for", "relaxation_epochs", "angular_update_per_epoch",
           "scale_invariance", "scale_invariant_parameters", "NORM_TYPES"]


# ------------------------------------------------------------------------------------------- the rule (Eq. 27)
def _positive(**values) -> None:
    for name, v in values.items():
        if not (isinstance(v, numbers.Real) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name}: must be a finite number > 0, got {v!r}")


def _momentum(momentum) -> None:
    if not (isinstance(momentum, numbers.Real) and 0.0 <= momentum < 1.0):
        raise ValueError(f"momentum: must be in [0, 1), got {momentum!r}")


def _tf(tf) -> None:
    if not (isinstance(tf, numbers.Real) and math.isfinite(tf) and tf >= 0):
        raise ValueError(f"tuning_factor: must be a finite number >= 0, got {tf!r}")


def tuning_factor(n: float, batch_size: float, lr: float, weight_decay: float, momentum: float = 0.0) -> float:
    """The tuning factor N·η·λ/(B(1−μ)) of Yun et al. Eq. 27 (Eq. 18 with μ = 0), dimensionless: ``n`` training
    images, ``batch_size`` B, ``lr`` η per step, ``weight_decay`` λ (coupled L2, ``torch.optim.SGD``'s), ``momentum``
    μ (PyTorch's form). The paper's yellow cells: N = 50,000, B = 128, η = 0.1, λ = 2e-4, μ = 0.9 give 10/128.
    (``repro_lib.angular.tuning_factor``, which checks the arguments.)"""
    return angular.tuning_factor(n, batch_size, lr, weight_decay, momentum)


def weight_decay_for(tuning_factor: float, n: float, batch_size: float, lr: float, momentum: float = 0.0) -> float:
    """The weight decay λ = TF·B(1−μ)/(N·η) that gives ``tuning_factor`` at ``n``, ``batch_size``, ``lr`` and
    ``momentum`` (Eq. 27 solved for λ): the λ that keeps a tuned factor when N, B, η or μ change. λ grows with B
    and shrinks with N (Sec. 6: 0.0016 on 80k ImageNet images is 1e-4 on all 1.28M)."""
    _tf(tuning_factor)
    _positive(n=n, batch_size=batch_size, lr=lr)
    _momentum(momentum)
    return tuning_factor * batch_size * (1.0 - momentum) / (n * lr)


def lr_for(tuning_factor: float, n: float, batch_size: float, weight_decay: float, momentum: float = 0.0) -> float:
    """The learning rate η = TF·B(1−μ)/(N·λ) that gives ``tuning_factor`` at ``n``, ``batch_size``,
    ``weight_decay`` and ``momentum`` (Eq. 27 solved for η; the other way to keep a factor). Changing η also changes
    what the scale-variant parameters (BN affine, classifier) see, which the tuning factor does not describe."""
    _tf(tuning_factor)
    _positive(n=n, batch_size=batch_size, weight_decay=weight_decay)
    _momentum(momentum)
    return tuning_factor * batch_size * (1.0 - momentum) / (n * weight_decay)


def relaxation_epochs(tuning_factor: float) -> float:
    """1/(2·TF) epochs: the time constant with which the squared norm of the scale-invariant weights, and with it
    the angular update, settles to its equilibrium (coupled L2 shrinks ‖w‖² by (1 − ηλ/(1−μ))² per step, i.e. by
    e^{−2·TF} per epoch). ``inf`` for TF = 0 (no weight decay: the norm only grows). The quantity the shrunk
    profiles keep (``repro_lib.profiles.relaxation_epochs``, shrink rule 3)."""
    _tf(tuning_factor)
    return profiles.relaxation_epochs(tuning_factor)


def angular_update_per_epoch(tuning_factor: float) -> float:
    """arccos(1 − TF) in radians: the angular update per epoch Δθ (Eq. 11) that the first-order reading of Eqs.
    26-27 gives at equilibrium, ⟨Y_t, Y_{t+η}⟩ ≈ 1 − TF. A reference, not an exact prediction (Eq. 26's velocity
    term is dropped); undefined, a ``ValueError``, above TF = 2 (``repro_lib.angular.predicted_angular_update``)."""
    _tf(tuning_factor)
    if tuning_factor > 2:
        raise ValueError(f"tuning_factor: arccos(1 - TF) is undefined above 2, got {tuning_factor!r}")
    return float(angular.predicted_angular_update(tuning_factor))


# ------------------------------------------------------------------------------------------- Lemma 1 on a batch
#: normalization layers (``eps`` replaced by ``bn_eps`` in :func:`scale_invariance`'s copies)
NORM_TYPES = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm)


def _loss_and_grads(model: nn.Module, names: Sequence[str], x, y, loss_fn):
    """L and ∇L with respect to ``names`` on one batch, with the dropout draws of the seed fixed, so that two calls
    differ only by the weights."""
    params = dict(model.named_parameters())
    with torch.random.fork_rng(devices=[x.device] if x.device.type == "cuda" else []):
        torch.manual_seed(0)
        loss = loss_fn(model(x), y)
    grads = torch.autograd.grad(loss, [params[n] for n in names], allow_unused=True)
    grads = [torch.zeros_like(params[n]) if g is None else g.detach() for n, g in zip(names, grads)]
    return float(loss.detach()), grads


def scale_invariance(model: nn.Module, x: torch.Tensor, y: torch.Tensor, names: Sequence[str] | None = None,
                     c: float = 2.0, together: bool = False, bn_eps: float | None = 1e-20,
                     dtype: torch.dtype | None = torch.float64, loss_fn: Callable | None = None,
                     rtol: float = 1e-3) -> pd.DataFrame:
    """Lemma 1 of Yun et al. (Eqs. 5-6; appendix Eqs. 28-29) measured on ``model`` and one batch ``(x, y)``.

    A loss is scale-invariant in a tensor w when L(c·w) = L(w) for every c > 0; then ∇L(c·w) = ∇L(w)/c (Eq. 5) and
    ⟨w, ∇L(w)⟩ = 0 (Eq. 6). Each tensor of ``names`` (default: every trainable tensor with two or more dimensions:
    conv and linear weights; a 1-D tensor such as a BN scale γ can be invariant at special points only, e.g. while the
    following β is 0 at initialization) is multiplied by ``c`` -- alone, or with ``together=True`` all at once --
    and one row per tensor gives ``tensor``, ``numel``, ``grad_norm`` = ‖∇L(w)‖, ``cos_w_grad`` = ⟨w, ∇L⟩/(‖w‖‖∇L‖)
    (≈ 0 by Eq. 6), ``grad_ratio`` = ‖∇L(c·w)‖/‖∇L(w)‖ (≈ 1/c by Eq. 5), ``grad_error`` = ‖c·∇L(c·w) − ∇L(w)‖ /
    ‖∇L(w)‖ (≈ 0), ``loss_change`` = |L(c·w) − L(w)| / |L(w)| (≈ 0) and ``verdict``: ``"invariant"`` when
    ``grad_error`` and ``loss_change`` are at most ``rtol``, ``"not invariant"`` otherwise, ``"no gradient"`` when
    ∇L(w) = 0 on this batch (nothing to measure: a zero-initialized branch such as timm's ``zero_init_last``; try a
    model after a few steps). ``df.attrs``: ``loss`` = L(w), ``c``, and with ``together`` ``loss_scaled``.

    Invariance needs batch statistics: the measurement runs on a copy in training mode (``model`` itself, its
    weights, running statistics and mode, is left untouched), in ``dtype`` (float64 by default: rounding far below
    the effects measured; None keeps the model's), with the same dropout draws in every pass. A normalization layer
    divides by sqrt(σ² + ε), so with the model's ε (1e-5 in PyTorch) an invariant tensor deviates by ~ε/σ², in the
    gradient up to a few % where σ² is small; the copy's layers therefore use ``bn_eps`` (1e-20: the architecture's
    invariance, rounding only; with c a power of two the scaled passes are often exact; None keeps the model's ε).
    ``loss_fn(output, y)``: cross-entropy unless given.

    Cost: one forward and backward pass, plus one per tensor (one in all with ``together``), on the batch.
    """
    if not (isinstance(c, numbers.Real) and math.isfinite(c) and c > 0 and c != 1):
        raise ValueError(f"c: must be a finite number > 0 other than 1, got {c!r}")
    if not rtol > 0:
        raise ValueError(f"rtol: must be > 0, got {rtol!r}")
    loss_fn = loss_fn or F.cross_entropy
    net = copy.deepcopy(angular._unwrap(model)).train()
    if dtype is not None:
        net = net.to(dtype)
        x = x.to(dtype) if torch.is_floating_point(x) else x
    if bn_eps is not None:
        for m in net.modules():
            if isinstance(m, NORM_TYPES):
                m.eps = bn_eps
    params = dict(net.named_parameters())
    if names is None:
        names = [n for n, p in params.items() if p.requires_grad and p.ndim >= 2]
    names = list(names)
    unknown = [n for n in names if n not in params]
    if unknown:
        raise ValueError(f"names: not parameters of the model: {unknown[:5]}")
    if not names:
        raise ValueError("names: no tensor to check (the model has no trainable tensor with 2 or more dimensions)")
    for p in params.values():
        p.requires_grad_(False)
    for n in names:
        params[n].requires_grad_(True)
    loss, grads = _loss_and_grads(net, names, x, y, loss_fn)
    weights = {n: params[n].detach().clone() for n in names}

    def scaled(group):
        with torch.no_grad():
            for n in group:
                params[n].mul_(c)
        out = _loss_and_grads(net, names if together else group, x, y, loss_fn)
        with torch.no_grad():
            for n in group:
                params[n].copy_(weights[n])
        return out

    if together:
        loss_c, grads_c = scaled(names)
        per = [(loss_c, g) for g in grads_c]
    else:
        per = [(lambda lc, gc: (lc, gc[0]))(*scaled([n])) for n in names]
    rows = []
    for n, g, (loss_c, gc) in zip(names, grads, per):
        w = weights[n]
        gn, wn = float(g.norm()), float(w.norm())
        change = abs(loss_c - loss) / max(abs(loss), 1e-300)
        if gn == 0.0:
            cos = ratio = err = math.nan
            verdict = "no gradient"
        else:
            cos = float((w * g).sum()) / (wn * gn) if wn > 0 else math.nan
            ratio = float(gc.norm()) / gn
            err = float((c * gc - g).norm()) / gn
            verdict = "invariant" if err <= rtol and change <= rtol else "not invariant"
        rows.append(dict(tensor=n, numel=w.numel(), grad_norm=gn, cos_w_grad=cos, grad_ratio=ratio, grad_error=err,
                         loss_change=change, verdict=verdict))
    df = pd.DataFrame(rows)
    df.attrs.update(loss=loss, c=float(c))
    if together:
        df.attrs["loss_scaled"] = per[0][0]
    return df


def scale_invariant_parameters(model: nn.Module, x: torch.Tensor, y: torch.Tensor, **kw) -> list[str]:
    """The names (``named_parameters`` order) of the tensors whose loss is invariant to their own scale on the batch
    ``(x, y)``, found by Lemma 1 (:func:`scale_invariance`, whose keywords ``kw`` takes): the tensors the tuning
    factor is about and ``repro_lib.angular.AngularTracker(model, names)`` should follow. On a timm ResNet with BN,
    every conv weight (each is directly followed by a BN) and not the classifier."""
    df = scale_invariance(model, x, y, **kw)
    return list(df.tensor[df.verdict == "invariant"])
