"""The tuning rule of Yun et al., *On the Angular Update and Hyperparameter Tuning of a Scale-Invariant Network*,
ECCV 2022, as a tool for one's own training.

For the scale-invariant weights of a network (those in front of a normalization layer), SGD with momentum μ,
coupled L2 weight decay λ, learning rate η, batch size B and N training images turns the weights by an angle per
epoch that depends on these five numbers only through the *tuning factor* N·η·λ/(B(1−μ)) (Eqs. 26-27). Tune that
factor, not η and λ separately, and keep it when N, B, η or μ change (Sec. 5-6). The recipe::

    from repro_lib import tuning
    from repro_lib.angular import StepTracker
    found = tuning.detect(model, x, y)          # 1. the tensors the rule is about (Lemma 1), and the joint groups
    wd = tuning.weight_decay_for(10 / 128, n=50_000, batch_size=512, lr=0.1, momentum=0.9)   # 8e-4 at B = 512
    groups = tuning.param_groups(model, found, weight_decay=wd, other_weight_decay=2e-4)     # 2. the rest: as tuned
    opt = torch.optim.SGD(groups, lr=0.1, momentum=0.9)
    tracker = StepTracker(opt, model, found, steps_per_epoch=math.ceil(50_000 / 512))          # 3. Δθ per epoch
    ... train as usual ...;  tracker.history                      # 4. compare with angular_update_per_epoch(10/128)

* :func:`tuning_factor`, :func:`weight_decay_for`, :func:`lr_for` -- Eq. 27 and the value that keeps it, for SGD
  (``optimizer="sgd"``: N·η·λ/(B(1−μ))) and AdamW (``optimizer="adamw"``: decoupled decay, N·η·λ/B);
* :func:`relaxation_epochs` -- the epochs the weight norm takes to settle (derived below),
  :func:`angular_update_per_step` -- the angle a step turns the weights at equilibrium, sqrt(2ηλ/(1+μ)) (derived
  below), and :func:`angular_update_per_epoch` -- arccos(1 − TF), the Δθ the first-order reading of Eq. 27 expects;
* :func:`detect` (:class:`Detection`), :func:`scale_invariant_parameters` and :func:`scale_invariance` -- Lemma 1
  (Eqs. 5-6) measured on one batch: the scale-invariant tensors of any ``torch.nn.Module`` without a hand-made list,
  and the groups of tensors invariant only together;
* :func:`param_groups` -- the optimizer's parameter groups: λ on the invariant tensors and groups, the decay the rest
  was tuned with on the rest.

Which numbers to put in. **B** is the global batch: the images behind one optimizer step (per-device batch ×
devices × gradient-accumulation steps). **η** is the initial (peak) learning rate of a schedule -- after warmup,
before cosine or step decay -- as the paper's Table 6 (cosine) and Tables 1-5 (step decay) quote it; the factor
describes the phase before the first decay. **N** is the number of training images one epoch sees.

**Relaxation time (derivation).** Write a = η·λ/(1−μ) for the weight decay's shrink per step and s = ‖w‖² for a
scale-invariant tensor w. By Lemma 1, ∇L(w) ⟂ w and ‖∇L(w)‖ = ‖∇L(ŵ)‖/‖w‖ (Eqs. 5-6). Over times longer than
1/(1−μ) steps, SGD(M) moves w by −(η/(1−μ))(∇L(w) + λ·w) per step, so s changes per step by

    Δs ≈ −2a·s + β/s,

where −2a·s is the decay and β/s (β > 0) the second-order growth from the gradient steps, whose squared length
scales as 1/‖w‖². The equilibrium is s*² = β/(2a). Linearized around it, d(Δs)/ds = −2a − β/s*² = −4a: deviations of
‖w‖² from equilibrium decay as e^{−4a·t} (t in steps). In this model the relaxation is even exact for s²:
Δ(s²) = 2s·Δs = −4a·(s² − s*²), so ‖w‖⁴ − ‖w*‖⁴ ∝ e^{−4a·t} (from far below equilibrium the first steps are large,
η/‖w‖², and real runs settle faster than that). With N/B steps per epoch,
4a·N/B = 4·TF: the **relaxation time is 1/(4·TF) epochs**. Far above equilibrium the gradient term is negligible
and ‖w‖² shrinks by weight decay alone, e^{−2·TF} per epoch (time 1/(2·TF), the unit ``repro_lib.profiles``' shrink
rule 3 counts in: its "3 of 1/(2·TF)" are 6 relaxation times). AdamW is different: its step η·m̂/(√v̂ + ε) has a
size independent of ‖w‖ (Adam divides the 1/‖w‖ gradient by its own root mean square), so Δs ≈ −2ηλ·s + β' with
β' constant: linear, **1/(2·TF) epochs** with TF = N·η·λ/B. ``tests/test_tuning_relaxation.py`` measures both on
small runs.

**Angular update per step (derivation).** Write d_t = w_{t+1} − w_t for a step of ``torch.optim.SGD``:
d_t = μ·d_{t−1} − η(∇L(w_t) + λ·w_t). At equilibrium E‖w_t‖² = S stays put, so with D = E‖d_t‖² and
p = E⟨w_t, d_t⟩: (i) 2p + D = 0 (‖w_{t+1}‖² − ‖w_t‖² = 2⟨w_t, d_t⟩ + ‖d_t‖²); (ii) ⟨w_t, ∇L(w_t)⟩ = 0 (Lemma 1,
Eq. 6) and ⟨w_t, d_{t−1}⟩ = ⟨w_{t−1}, d_{t−1}⟩ + ‖d_{t−1}‖², so p = μ(p + D) − ηλ·S. Together: ηλ·S = D(1 + μ)/2,
and a step turns w by δ with **δ² = D/S = 2ηλ/(1+μ)** (the step is tangential up to δ²/2). Nothing is assumed
about the gradients beyond Lemma 1 and the equilibrium; ``tests/test_tuning_groups.py`` measures it on runs.
(2ηλ/(1−μ), i.e. 2a, is the per-step angle only with μ = 0: momentum carries part of the previous steps into each
one.) For AdamW (d_t = −η·m̂_t/√v̂_t − ηλ·w_t, β1 its momentum) the same bookkeeping, with v̂ slowly varying and
⟨w, m̂/√v̂⟩ from the momentum alone, gives δ² ≈ 2ηλ(1−β1)/(1+β1): :func:`angular_update_per_step`.

**Angular update per epoch.** The velocity d_t carries μ of d_{t−1}, so over many steps the displacements add like a
random walk of the velocity with the long-run factor (1+μ)/(1−μ): Δθ² ≈ (N/B)·δ²·(1+μ)/(1−μ) = 2·TF per epoch, i.e.
arccos(1 − TF) (Eq. 27) to first order, a statement for TF ≪ 1 (at TF of order 1 the first-order cosine 1 − TF is
no longer a small-angle reading). Eq. 25 holds the gradient fixed over the epoch and Eq. 27 drops Eq. 26's velocity
term; in a real epoch the gradient turns with the weights and partly pulls them back toward where they were, so
successive steps cancel in part and runs measure less than arccos(1 − TF) per epoch (the tutorial
``tuning_rule.ipynb`` measures it): a reference to compare settings with, not a prediction of the value. The
per-step angle above does not depend on that cancellation.

**Jointly invariant groups.** Some tensors are invariant only when rescaled together: the tensors that write into the
residual stream of a pre-norm transformer (patch embedding, position embedding, class token, each block's attention
and MLP output projections with their biases: every LayerNorm reads the stream, the classifier reads it through the
final norm), or a weight with its bias in front of a normalization layer (ConvNeXt's stem). Such a group is one
scale-invariant vector: Lemma 1 holds for the concatenation, and the rule (λ, the per-step angle) is about that
vector. :func:`detect` finds them (:attr:`Detection.groups`); :func:`param_groups` and ``angular.StepTracker`` take
them as one vector each.

Every function raises ``ValueError`` whose message starts with the name of the bad argument.
"""
from __future__ import annotations

import copy
import math
import numbers
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import angular

__all__ = ["tuning_factor", "weight_decay_for", "lr_for", "relaxation_epochs", "angular_update_per_epoch",
           "angular_update_per_step", "first_order_caveat", "FIRST_ORDER_TF", "joint_groups",
           "param_groups", "detect", "Detection", "TuningWarning", "scale_invariance", "scale_invariant_parameters",
           "NORM_TYPES", "OPTIMIZERS", "INVARIANT", "STATE_ONLY", "NOT_INVARIANT", "UNDECIDED"]

#: the weight-decay conventions the factor is written for: SGD with coupled L2 and PyTorch momentum
#: (``torch.optim.SGD``), and AdamW's decoupled decay w ← w(1 − η·λ) (``torch.optim.AdamW``)
OPTIMIZERS = ("sgd", "adamw")


# ------------------------------------------------------------------------------------------- the rule (Eq. 27)
def _positive(**values) -> None:
    for name, v in values.items():
        if not (isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name}: must be a finite number > 0, got {v!r}")


def _count(**values) -> None:
    for name, v in values.items():
        _positive(**{name: v})
        if not (float(v).is_integer() and v >= 1):
            raise ValueError(f"{name}: must be a whole number >= 1, got {v!r}")


def _momentum(momentum, optimizer: str = "sgd") -> float:
    """μ checked; required for SGD (a left-out μ read as 0 would give 10× the weight decay at μ = 0.9), 0 for AdamW."""
    if momentum is None:
        if optimizer == "adamw":
            return 0.0
        raise ValueError("momentum: required with optimizer='sgd' (the factor divides by 1 - momentum: 0.9 and 0 "
                         "differ tenfold); pass 0 for plain SGD")
    if not (isinstance(momentum, numbers.Real) and not isinstance(momentum, bool) and 0.0 <= momentum < 1.0):
        raise ValueError(f"momentum: must be a number in [0, 1), got {momentum!r}")
    if optimizer == "adamw" and momentum != 0:
        raise ValueError(f"momentum: AdamW's decoupled decay w(1 - lr*wd) does not involve momentum (its beta1); "
                         f"leave it 0, got {momentum!r}")
    return float(momentum)


def _optimizer(optimizer) -> None:
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer: one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")


def _tf(tf) -> None:
    if not (isinstance(tf, numbers.Real) and not isinstance(tf, bool) and math.isfinite(tf) and tf >= 0):
        raise ValueError(f"tuning_factor: must be a finite number >= 0, got {tf!r}")


def _sizes(n, batch_size) -> None:
    _count(n=n, batch_size=batch_size)
    if batch_size > n:
        raise ValueError(f"batch_size: larger than n ({batch_size!r} > {n!r}): an epoch would be less than one step")


def _keep(momentum: float, optimizer: str) -> float:
    """The denominator's 1 − μ (SGD) or 1 (AdamW)."""
    return 1.0 if optimizer == "adamw" else 1.0 - momentum


def _stable(shrink: float, name: str) -> None:
    """The per-step shrink η·λ/(1−μ) (SGD) or η·λ (AdamW) must be < 1: otherwise one step flips or zeroes w."""
    if not (math.isfinite(shrink) and shrink < 1):
        raise ValueError(f"{name}: the weight decay's shrink per step lr*wd/(1-momentum) = {shrink:.3g} must be < 1 "
                         "(each step would zero or flip the weights)")


def tuning_factor(n: float, batch_size: float, lr: float, weight_decay: float, momentum: float | None = None,
                  optimizer: str = "sgd") -> float:
    """The tuning factor of Yun et al. Eq. 27 (Eq. 18 with μ = 0), dimensionless: N·η·λ/(B(1−μ)) for SGD
    (``optimizer="sgd"``: coupled L2, ``torch.optim.SGD``'s ``weight_decay``, PyTorch momentum μ) and N·η·λ/B for
    AdamW (``"adamw"``: decoupled decay, momentum must be 0: β1 does not enter the decay). ``n`` training images,
    ``batch_size`` B (global: the images behind one optimizer step), ``lr`` η per step (a schedule's initial or peak
    value), ``weight_decay`` λ. The paper's yellow cells: N = 50,000, B = 128, η = 0.1, λ = 2e-4, μ = 0.9 give
    10/128. A per-step shrink η·λ/(1−μ) of 1 or more is refused (it would zero or flip the weights). ``momentum`` is
    required for SGD (0 for plain SGD): left out, it would silently read μ = 0, a factor ten times off at μ = 0.9."""
    _optimizer(optimizer)
    _sizes(n, batch_size)
    _positive(lr=lr)
    if not (isinstance(weight_decay, numbers.Real) and math.isfinite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"weight_decay: must be a finite number >= 0, got {weight_decay!r}")
    momentum = _momentum(momentum, optimizer)
    _stable(lr * weight_decay / _keep(momentum, optimizer), "weight_decay")
    tf = angular.tuning_factor(n, batch_size, lr, weight_decay, momentum)
    _tf(tf)
    return tf


def weight_decay_for(tuning_factor: float, n: float, batch_size: float, lr: float, momentum: float | None = None,
                     optimizer: str = "sgd") -> float:
    """The weight decay λ = TF·B(1−μ)/(N·η) (AdamW: TF·B/(N·η)) that gives ``tuning_factor`` at ``n``,
    ``batch_size``, ``lr`` and ``momentum`` (Eq. 27 solved for λ): the λ that keeps a tuned factor when N, B, η or μ
    change. λ grows with B and shrinks with N (Sec. 6: 0.0016 on 80k ImageNet images is 1e-4 on all 1.28M).
    ``momentum`` is required for SGD (0 for plain SGD), as on the command line."""
    _optimizer(optimizer)
    _tf(tuning_factor)
    _sizes(n, batch_size)
    _positive(lr=lr)
    momentum = _momentum(momentum, optimizer)
    wd = tuning_factor * batch_size * _keep(momentum, optimizer) / (n * lr)
    _stable(lr * wd / _keep(momentum, optimizer), "tuning_factor")
    return wd


def lr_for(tuning_factor: float, n: float, batch_size: float, weight_decay: float, momentum: float | None = None,
           optimizer: str = "sgd") -> float:
    """The learning rate η = TF·B(1−μ)/(N·λ) (AdamW: TF·B/(N·λ)) that gives ``tuning_factor`` at ``n``,
    ``batch_size``, ``weight_decay`` and ``momentum`` (Eq. 27 solved for η; the other way to keep a factor).
    Changing η also changes what the scale-variant parameters (BN affine, classifier) see, which the tuning factor
    does not describe. ``momentum`` is required for SGD (0 for plain SGD)."""
    _optimizer(optimizer)
    _tf(tuning_factor)
    _sizes(n, batch_size)
    _positive(weight_decay=weight_decay)
    momentum = _momentum(momentum, optimizer)
    lr = tuning_factor * batch_size * _keep(momentum, optimizer) / (n * weight_decay)
    _stable(lr * weight_decay / _keep(momentum, optimizer), "tuning_factor")
    return lr


def relaxation_epochs(tuning_factor: float, optimizer: str = "sgd") -> float:
    """The relaxation time of the scale-invariant weights' squared norm, and with it of the angular update, in
    epochs: 1/(4·TF) for SGD(M) with coupled L2, 1/(2·TF) for AdamW (the module docstring derives both). ``inf`` for
    TF = 0 (no weight decay: the norm only grows)."""
    _optimizer(optimizer)
    _tf(tuning_factor)
    if tuning_factor == 0:
        return math.inf
    return 1.0 / ((4.0 if optimizer == "sgd" else 2.0) * tuning_factor)


def angular_update_per_epoch(tuning_factor: float) -> float:
    """arccos(1 − TF) in radians: the angular update per epoch Δθ (Eq. 11) that the first-order reading of Eqs.
    26-27 gives at equilibrium, ⟨Y_t, Y_{t+η}⟩ ≈ 1 − TF. A reference, not an exact prediction (Eq. 26's velocity
    term is dropped, the gradient held fixed over the epoch: runs measure less, see the module docstring);
    undefined, a ``ValueError``, above TF = 2 (``repro_lib.angular.predicted_angular_update``)."""
    _tf(tuning_factor)
    if tuning_factor > 2:
        raise ValueError(f"tuning_factor: arccos(1 - TF) is undefined above 2, got {tuning_factor!r}")
    return float(angular.predicted_angular_update(tuning_factor))


#: above this tuning factor the first-order cosine 1 − TF of Eq. 27 is no small-angle reading (arccos(1 − 0.5) is
#: already 60°): :func:`first_order_caveat` says so
FIRST_ORDER_TF = 0.5


def first_order_caveat(tuning_factor: float) -> str:
    """'' where arccos(1 − TF) is a fair first-order reading (TF ≤ :data:`FIRST_ORDER_TF`), else one sentence why it
    is not: Eq. 27 expands ⟨Y_t, Y_{t+η}⟩ to first order in TF, a statement for TF ≪ 1."""
    _tf(tuning_factor)
    if tuning_factor <= FIRST_ORDER_TF:
        return ""
    return (f"TF = {tuning_factor:.3g} is not small: Eq. 27's cosine 1 - TF is a first-order expansion for TF << 1, "
            "so arccos(1 - TF) is no estimate of the angle here; the per-step angle at equilibrium still is")


def angular_update_per_step(lr: float, weight_decay: float, momentum: float | None = None, optimizer: str = "sgd",
                            beta1: float = 0.9) -> float:
    """The angle in radians one optimizer step turns a scale-invariant tensor (or jointly invariant group) by at
    equilibrium: sqrt(2ηλ/(1+μ)) for SGD with coupled L2 and PyTorch momentum μ (exact in expectation at
    equilibrium: derived in the module docstring from Lemma 1 alone), sqrt(2ηλ(1−β1)/(1+β1)) for AdamW with
    decoupled decay λ and first-moment decay ``beta1`` (an approximation: Adam's per-coordinate scaling keeps
    ⟨w, step⟩ = 0 only approximately). ``momentum`` is required for SGD, unused for AdamW."""
    _optimizer(optimizer)
    _positive(lr=lr)
    if not (isinstance(weight_decay, numbers.Real) and math.isfinite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"weight_decay: must be a finite number >= 0, got {weight_decay!r}")
    momentum = _momentum(momentum, optimizer)
    if optimizer == "adamw":
        if not (isinstance(beta1, numbers.Real) and 0.0 <= beta1 < 1.0):
            raise ValueError(f"beta1: must be a number in [0, 1), got {beta1!r}")
        return math.sqrt(2.0 * lr * weight_decay * (1.0 - beta1) / (1.0 + beta1))
    _stable(lr * weight_decay / (1.0 - momentum), "weight_decay")
    return math.sqrt(2.0 * lr * weight_decay / (1.0 + momentum))


def param_groups(model: nn.Module, invariant, weight_decay: float, other_weight_decay: float = 0.0,
                 groups: Sequence[Sequence[str]] | None = None) -> list[dict]:
    """Parameter groups for any ``torch.optim`` optimizer: ``[{"params": the invariant tensors, "weight_decay":
    weight_decay, "names": …}, one such dict per jointly invariant group (``"joint": True``), {"params": every other
    trainable tensor, "weight_decay": other_weight_decay, "names": …}]`` (an empty group left out; each group's
    ``names`` in ``named_parameters`` order; a tensor in two joint groups goes into the first).

    ``invariant``: a :class:`Detection` (its invariant tensors and its :attr:`Detection.groups`), or the names
    :func:`scale_invariant_parameters` found with ``groups`` the joint groups (lists of names). The tuning factor is
    about these, and ``weight_decay`` is the λ that sets it (:func:`weight_decay_for`); a joint group is one
    scale-invariant vector and gets the same λ.

    ``other_weight_decay`` is the λ of every other tensor (BN/LN gains and shifts, biases, squeeze-and-excitation
    convs, the classifier, layer-scales): pass the value they were tuned with and **keep it when the rule moves
    ``weight_decay``**. The factor does not describe them: their scale is the function itself (a norm gain sets the
    size of its layer's output, the classifier's the logits' confidence), so weight decay on them is a
    regularizer tuned with the rest, not a step size, and moving it with the rule changes the function. Moved ×4
    with the rule at 4× the batch, the decay pulls the gains and the classifier toward 0 four times harder and a
    network can collapse to a constant output. The default, 0, does not move with λ (the common choice of exempting
    norm and bias parameters); if you tuned with one λ on every tensor (the paper's runs:
    ``torch.optim.SGD(model.parameters(), weight_decay=λ)``), pass that tuned λ here at the new setting."""
    if not (isinstance(weight_decay, numbers.Real) and math.isfinite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"weight_decay: must be a finite number >= 0, got {weight_decay!r}")
    other = other_weight_decay
    if not (isinstance(other, numbers.Real) and not isinstance(other, bool) and math.isfinite(other) and other >= 0):
        raise ValueError(f"other_weight_decay: must be a finite number >= 0, got {other_weight_decay!r}")
    if isinstance(invariant, Detection):
        groups = invariant.groups if groups is None else groups
        invariant = invariant.invariant
    if isinstance(invariant, str):
        raise ValueError("invariant: a list of parameter names, not one string")
    if isinstance(groups, str) or any(isinstance(g, str) for g in (groups or [])):
        raise ValueError("groups: a list of groups, each a list of parameter names")
    groups = [list(g) for g in (groups or [])]
    params = {n: p for n, p in angular._unwrap(model).named_parameters() if p.requires_grad}
    unknown = [n for n in invariant if n not in params]
    if unknown:
        raise ValueError(f"invariant: not trainable parameters of the model: {unknown[:5]}")
    unknown = [n for g in groups for n in g if n not in params]
    if unknown:
        raise ValueError(f"groups: not trainable parameters of the model: {unknown[:5]}")
    taken = set(invariant)
    out = [dict(params=[p for n, p in params.items() if n in taken], weight_decay=float(weight_decay),
                names=[n for n in params if n in taken])]
    for g in groups:
        mine = [n for n in params if n in set(g) and n not in taken]
        taken |= set(mine)
        out.append(dict(params=[params[n] for n in mine], weight_decay=float(weight_decay), names=mine, joint=True))
    out.append(dict(params=[p for n, p in params.items() if n not in taken], weight_decay=float(other),
                    names=[n for n in params if n not in taken]))
    return [g for g in out if g["params"]]


# ------------------------------------------------------------------------------------------- Lemma 1 on a batch
#: normalization layers (``eps`` replaced by ``bn_eps`` in :func:`scale_invariance`'s copies)
NORM_TYPES = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm)


def _forward(model: nn.Module, x):
    """``model(x)``, with torch's refusal of a batch of one under BatchNorm in training mode as one line naming ``x``."""
    try:
        return model(x)
    except ValueError as e:
        if "Expected more than 1 value per channel" not in str(e):
            raise
        raise ValueError(f"x: a batch of {len(x)}: BatchNorm in training mode computes its statistics over the batch "
                         "and needs more than one value per channel; pass at least 2 images (Lemma 1 is measured "
                         "on the batch statistics training uses)") from None


def _describe(out) -> str:
    if isinstance(out, torch.Tensor):
        return f"a tensor of shape {tuple(out.shape)}"
    return f"a {type(out).__name__}"


def _loss(model: nn.Module, x, y, loss_fn):
    """The scalar loss of the batch; an output the loss cannot take is a one-line ``ValueError`` naming
    ``loss_fn``."""
    out = _forward(model, x)
    default = loss_fn is F.cross_entropy
    try:
        loss = loss_fn(out, y)
    except (RuntimeError, ValueError, TypeError, IndexError, AttributeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        what = "the default cross-entropy" if default else "loss_fn"
        raise ValueError(f"loss_fn: {what} cannot take the model's output ({_describe(out)}) with y "
                         f"({_describe(y)}): {first}" + ("; pass loss_fn=a function (output, y) -> scalar" if default
                                                         else "")) from None
    if not (isinstance(loss, torch.Tensor) and loss.numel() == 1 and torch.is_floating_point(loss)):
        raise ValueError(f"loss_fn: must return a scalar floating tensor, got {_describe(loss)}")
    return loss.reshape(())


def _loss_and_grads(model: nn.Module, names: Sequence[str], x, y, loss_fn):
    """L and ∇L with respect to ``names`` on one batch, with the dropout draws of the seed fixed, so that two calls
    differ only by the weights."""
    params = dict(model.named_parameters())
    with torch.random.fork_rng(devices=[x.device] if x.device.type == "cuda" else []):
        torch.manual_seed(0)
        loss = _loss(model, x, y, loss_fn)
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

    Invariance needs batch statistics: the measurement runs on a copy with every module in the mode it has in
    ``model`` (call ``model.train()`` first to measure what training sees; a normalization layer in eval mode uses
    stored statistics, an affine map, and nothing in front of it is invariant there; ``model`` itself, its weights,
    running statistics and mode, is left untouched), in ``dtype`` (float64 by default: rounding far below
    the effects measured; None keeps the model's), with the same dropout draws in every pass. A normalization layer
    divides by sqrt(σ² + ε), so with the model's ε (1e-5 in PyTorch) an invariant tensor deviates by ~ε/σ², in the
    gradient up to a few % where σ² is small; the copy's layers therefore use ``bn_eps`` (1e-20: the architecture's
    invariance, rounding only; with c a power of two the scaled passes are often exact; None keeps the model's ε).
    ``loss_fn(output, y)``: cross-entropy unless given.

    Cost: one forward and backward pass, plus one per tensor (one in all with ``together``), on the batch.
    """
    if not (isinstance(c, numbers.Real) and math.isfinite(c) and c > 0 and c != 1):
        raise ValueError(f"c: must be a finite number > 0 other than 1, got {c!r}")
    if not (isinstance(rtol, numbers.Real) and rtol > 0):
        raise ValueError(f"rtol: must be > 0, got {rtol!r}")
    net, x = _prepared_copy(model, x, dtype, bn_eps)
    return _measure(net, x, y, names, c, together, loss_fn or F.cross_entropy, rtol)


def _prepared_copy(model: nn.Module, x: torch.Tensor, dtype, bn_eps):
    """A copy of ``model`` with every module in the mode it is in (a normalization layer in eval mode keeps using its
    stored statistics, as it does in the model), in ``dtype``, its normalization layers' ε set to ``bn_eps``; and ``x``
    in that dtype."""
    net = copy.deepcopy(angular._unwrap(model))
    if dtype is not None:
        net = net.to(dtype)
        x = x.to(dtype) if torch.is_floating_point(x) else x
    if bn_eps is not None:
        for m in net.modules():
            if isinstance(m, NORM_TYPES):
                m.eps = bn_eps
    return net, x


def stored_statistics(model: nn.Module) -> list[str]:
    """The normalization layers of ``model`` that normalize with stored statistics rather than the batch's, by module
    name: BatchNorm in eval mode with running statistics (a model in ``eval()``, or BN frozen while fine-tuning) and
    frozen-BN modules (``FrozenBatchNorm2d`` of torchvision and timm). The tensors in front of them are not
    scale-invariant: the layer is an affine map there."""
    out = []
    for name, m in angular._unwrap(model).named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            if not m.training and m.track_running_stats and m.running_mean is not None:
                out.append(name)
        elif "FrozenBatchNorm" in type(m).__name__:
            out.append(name)
    return out


def _measure(net: nn.Module, x, y, names, c, together, loss_fn, rtol) -> pd.DataFrame:
    """:func:`scale_invariance` on the prepared copy ``net`` (changed in place only transiently)."""
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


def _measure_screened(net: nn.Module, x, y, names, c, loss_fn, rtol) -> pd.DataFrame:
    """:func:`_measure`'s verdicts at the cost of two passes where it can: Eq. 6 from one backward pass screens the
    tensors (a tensor with |cos(w, ∇L)| above :data:`SCREEN`, or 1000 rounding units of the dtype if more, is not
    invariant; a gradient of exactly 0 is "no gradient", as in :func:`_measure`), then every screened tensor is
    multiplied by its own factor (``c`` raised to a distinct power in (−1, 1)) at once and checked by Eq. 5 and the
    loss; a tensor that fails there, and one whose gradient is below sqrt(rounding unit) of the largest tensor's
    (where the cosine is rounding), is measured alone (:func:`_measure`, the check of :func:`scale_invariance`: the
    two never disagree)."""
    params = dict(net.named_parameters())
    names = list(names)
    for p in params.values():
        p.requires_grad_(False)
    for n in names:
        params[n].requires_grad_(True)
    loss, grads = _loss_and_grads(net, names, x, y, loss_fn)
    weights = {n: params[n].detach().clone() for n in names}
    norms = [float(g.norm()) for g in grads]
    floor = math.sqrt(torch.finfo(grads[0].dtype).eps) * max(norms) if grads else 0.0
    screen = min(rtol, max(SCREEN, 1e3 * torch.finfo(grads[0].dtype).eps)) if grads else rtol
    rows, candidates, below = {}, [], []
    for n, g, gn in zip(names, grads, norms):
        w = weights[n]
        wn = float(w.norm())
        cos = float((w * g).sum()) / (wn * gn) if gn > 0 and wn > 0 else math.nan
        rows[n] = dict(tensor=n, numel=w.numel(), grad_norm=gn, cos_w_grad=cos, grad_ratio=math.nan,
                       grad_error=math.nan, loss_change=math.nan,
                       verdict="no gradient" if gn == 0.0 else "not invariant")
        if 0.0 < gn <= floor:
            below.append(n)  # the cosine is rounding here: the direct rescaling check decides
        elif gn > 0.0 and abs(cos) <= screen:
            candidates.append(n)
    if candidates:
        factor = {n: float(c) ** (2 * (k + 1) / (len(candidates) + 1) - 1) for k, n in enumerate(candidates)}
        with torch.no_grad():
            for n in candidates:
                params[n].mul_(factor[n])
        loss_c, grads_c = _loss_and_grads(net, candidates, x, y, loss_fn)
        with torch.no_grad():
            for n in candidates:
                params[n].copy_(weights[n])
        change = abs(loss_c - loss) / max(abs(loss), 1e-300)
        failed = []
        g_of = dict(zip(names, grads))
        for n, gc in zip(candidates, grads_c):
            g, gn = g_of[n], rows[n]["grad_norm"]
            err = float((factor[n] * gc - g).norm()) / gn
            rows[n].update(grad_ratio=float(gc.norm()) / gn,
                           grad_error=err, loss_change=change)
            if err <= rtol and change <= rtol:
                rows[n]["verdict"] = "invariant"
            else:
                failed.append(n)
    else:
        failed = []
    if failed or below:
        alone = _measure(net, x, y, failed + below, c, False, loss_fn, rtol)
        for r in alone.to_dict("records"):
            rows[r["tensor"]].update(r)
    df = pd.DataFrame([rows[n] for n in names])
    df.attrs.update(loss=loss, c=float(c))
    return df


#: :func:`detect`'s Eq. 6 screen in float64: an invariant tensor has cos(w, ∇L) at rounding level (~1e-16), a
#: random direction ~1/sqrt(numel); one invariant only approximately (behind a 1e-6 layer-scale) falls outside
SCREEN = 1e-6
#: the classes :func:`detect` gives a tensor
INVARIANT, STATE_ONLY, NOT_INVARIANT, UNDECIDED = ("invariant", "invariant only in this state", "not invariant",
                                                   "undecided")


class TuningWarning(UserWarning):
    """What :func:`detect` could not decide, found only in the model's present state, or: the rule does not apply."""


@dataclass
class Detection:
    """What :func:`detect` saw. ``table``: one row per tensor checked, with ``tensor``, ``numel``, ``verdict`` (on the
    model as it is: ``"invariant"``, ``"not invariant"``, ``"no gradient"``), ``verdict_randomized`` (the same on a
    copy whose zero tensors and 1-D parameters are randomized), ``grad_error`` / ``loss_change`` of both, and
    ``kind``, one of

    * ``"invariant"`` -- invariant on the model and on the randomized copy, or with no gradient on the model (a
      zero-initialized branch) and invariant on the copy: the tensors the tuning factor is about;
    * ``"invariant only in this state"`` -- invariant on the model, not on the copy: the invariance rests on a value
      training moves (a conv *with bias* before a LayerNorm, invariant while the bias is 0; a branch scaled by a
      near-zero layer-scale). Not counted: training leaves the state within steps;
    * ``"not invariant"`` -- not invariant on the model (or with no gradient there, not invariant on the copy);
    * ``"undecided"`` -- no gradient on either (an unused tensor, a branch the batch never reaches).

    ``invariant``, ``state_only``, ``not_invariant``, ``undecided``: the names of each kind (``named_parameters``
    order). ``groups``: the jointly invariant groups (:func:`joint_groups`: each a list of names, invariant only
    when rescaled together, e.g. the residual-stream writers of a pre-norm transformer); a group is one
    scale-invariant vector. ``applies``: whether any tensor or group is invariant (the rule is about those alone).
    ``mode``: ``"training"``, ``"eval"`` or ``"mixed"``, the modes the model's modules were checked in (as they are
    in the model); ``stored_statistics``: the normalization layers that used stored statistics there
    (:func:`stored_statistics`)."""

    table: pd.DataFrame
    groups: list = field(default_factory=list)
    mode: str = "training"
    stored_statistics: list = field(default_factory=list)
    searched_groups: bool = True

    def names(self, kind: str) -> list[str]:
        return list(self.table.tensor[self.table.kind == kind])

    @property
    def invariant(self) -> list[str]:
        return self.names(INVARIANT)

    @property
    def state_only(self) -> list[str]:
        return self.names(STATE_ONLY)

    @property
    def not_invariant(self) -> list[str]:
        return self.names(NOT_INVARIANT)

    @property
    def undecided(self) -> list[str]:
        return self.names(UNDECIDED)

    @property
    def applies(self) -> bool:
        return bool(self.invariant) or bool(self.groups)

    @property
    def grouped(self) -> list[str]:
        """Every tensor of a joint group (``named_parameters`` order of the groups, each once)."""
        return list(dict.fromkeys(n for g in self.groups for n in g))

    def counts(self) -> dict:
        """Tensors per kind, every kind listed (0 where none)."""
        return {k: int((self.table.kind == k).sum()) for k in (INVARIANT, STATE_ONLY, NOT_INVARIANT, UNDECIDED)}

    def summary(self) -> str:
        """One line: the counts per kind, and whether the rule applies."""
        counts = ", ".join(f"{v} {k}" for k, v in self.counts().items() if v)
        mode = "" if self.mode == "training" else f"checked in {self.mode} mode, as the model is: "
        if self.groups:
            sizes = ", ".join(str(len(g)) for g in self.groups[:6]) + (" …" if len(self.groups) > 6 else "")
            counts += (f"; {len(self.groups)} jointly invariant group{'s' if len(self.groups) > 1 else ''} "
                       f"({sizes} tensors)")
        if self.applies:
            return mode + f"{len(self.table)} tensors checked: {counts}"
        if not self.searched_groups:
            return mode + (f"none of its {len(self.table)} tensors is scale-invariant alone ({counts}); groups "
                           "invariant together were not looked for (detect(..., groups=True))")
        return mode + (f"the rule does not apply to this model: none of its {len(self.table)} tensors is "
                       f"scale-invariant, alone or in a group ({counts})")

    def __repr__(self) -> str:
        return f"Detection({self.summary()})"


def _randomize(net: nn.Module, seed: int) -> None:
    """In place: every 1-D parameter gets Gaussian noise of sd 0.5 added (BN/LN scales and shifts, biases,
    layer-scales: the values training moves), every all-zero parameter of 2 or more dimensions a Gaussian of sd
    1/sqrt(fan-in) (a zero-initialized weight)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            if p.ndim <= 1:
                p.add_(0.5 * torch.randn(p.shape, generator=g, dtype=torch.float64).to(p))
            elif not p.any():
                fan_in = max(1, p[0].numel())
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64).to(p) / math.sqrt(fan_in))


def _kind(now: str, randomized: str) -> str:
    if now == "invariant":
        return STATE_ONLY if randomized == "not invariant" else INVARIANT
    if now == "not invariant":
        return NOT_INVARIANT
    return {"invariant": INVARIANT, "not invariant": NOT_INVARIANT}.get(randomized, UNDECIDED)


def detect(model: nn.Module, x: torch.Tensor, y: torch.Tensor, names: Sequence[str] | None = None,
           c: float = 2.0, bn_eps: float | None = 1e-20, dtype: torch.dtype | None = torch.float64,
           loss_fn: Callable | None = None, rtol: float = 1e-3, seed: int = 0, warn: bool = True,
           groups: bool = True) -> Detection:
    """Which tensors of ``model`` are scale-invariant, by Lemma 1 (:func:`scale_invariance`, whose keywords it takes)
    measured twice on the batch ``(x, y)``: on the model as it is and on a copy whose 1-D parameters (norm scales and
    shifts, biases, layer-scales) get noise and whose all-zero tensors get random values (``seed``). The second pass
    decides what the first cannot (a zero-initialized branch gives its tensors no gradient: timm's ResNets with
    ``zero_init_last``) and exposes an invariance that holds only at the present values (a conv with bias before a
    LayerNorm, as in ConvNeXt, is invariant while the bias is 0); :class:`Detection` gives the classes. With
    ``groups`` (default) it then looks for the tensors invariant only when rescaled together (:func:`joint_groups`:
    the residual-stream writers of a pre-norm transformer, a weight with its bias before a norm).

    Every module is checked in the mode it is in: a normalization layer in eval mode (a model in ``eval()``, BN
    frozen while fine-tuning) normalizes with stored statistics, an affine map, and the tensors in front of it are not
    invariant there. Call ``model.train()`` first to check the model as training runs it; ``Detection.mode`` and
    its summary say which mode was checked.

    With ``warn`` (default) a :class:`TuningWarning` names the normalization layers that use stored statistics, the
    tensors found invariant only in this state and those it could not decide, and says "the rule does not apply to
    this model" when no tensor and no group is invariant. The model itself is left untouched. A batch of one under
    BatchNorm in training mode, or an output ``loss_fn`` (cross-entropy unless given) cannot take, is a one-line
    ``ValueError``. Cost: two forward and backward passes per tensor on the batch, plus, with ``groups``, one per
    tensor not invariant alone (1-D ones included) and 16 more."""
    if not (isinstance(c, numbers.Real) and math.isfinite(c) and c > 0 and c != 1):
        raise ValueError(f"c: must be a finite number > 0 other than 1, got {c!r}")
    if not (isinstance(rtol, numbers.Real) and rtol > 0):
        raise ValueError(f"rtol: must be > 0, got {rtol!r}")
    loss_fn = loss_fn or F.cross_entropy
    net, x = _prepared_copy(model, x, dtype, bn_eps)
    params = dict(net.named_parameters())
    trainable = [n for n, p in params.items() if p.requires_grad]
    if names is None:
        names = [n for n in trainable if params[n].ndim >= 2]
    names = list(names)
    unknown = [n for n in names if n not in params]
    if unknown:
        raise ValueError(f"names: not parameters of the model: {unknown[:5]}")
    if not names:
        raise ValueError("names: no tensor to check (the model has no trainable tensor with 2 or more dimensions)")
    now = _measure_screened(net, x, y, names, c, loss_fn, rtol)
    rnd_net = copy.deepcopy(net)
    _randomize(rnd_net, seed)
    rnd = _measure_screened(rnd_net, x, y, names, c, loss_fn, rtol)
    table = now[["tensor", "numel", "verdict", "grad_error", "loss_change"]].assign(
        verdict_randomized=rnd.verdict.values, grad_error_randomized=rnd.grad_error.values,
        loss_change_randomized=rnd.loss_change.values)
    table["kind"] = [_kind(a, b) for a, b in zip(table.verdict, table.verdict_randomized)]
    invariant = set(table.tensor[table.kind == INVARIANT])
    found_groups = []
    if groups:
        candidates = [n for n in trainable if n not in invariant]
        found_groups = _joint_groups(net, rnd_net, x, y, candidates, loss_fn, rtol, c, seed)
    modes = {m.training for m in net.modules()}
    mode = "mixed" if len(modes) > 1 else "training" if modes == {True} else "eval"
    found = Detection(table, groups=found_groups, mode=mode, stored_statistics=stored_statistics(model),
                      searched_groups=bool(groups))
    if warn:
        _warn(found)
    return found


#: inputs per row of :func:`joint_groups`' system (each row a new mix of the batch's inputs)
ROW_BATCH = 4
#: rows beyond the candidates' count in :func:`joint_groups`' system (a margin against chance null directions)
EXTRA_ROWS = 16
#: a direction of :func:`joint_groups`' column-normalized system is null when its singular value is below this
#: fraction of the largest (an exact invariance leaves float64 rounding, ~1e-14; a real effect is far above)
NULL_TOL = 1e-9


def joint_groups(model: nn.Module, x: torch.Tensor, y: torch.Tensor, names: Sequence[str] | None = None,
                 c: float = 2.0, bn_eps: float | None = 1e-20, dtype: torch.dtype | None = torch.float64,
                 loss_fn: Callable | None = None, rtol: float = 1e-3, seed: int = 0) -> list[list[str]]:
    """The groups of tensors of ``model`` that are scale-invariant only when rescaled together: L(c·w_G) = L(w_G)
    for the concatenation w_G of the group's tensors and every c > 0, though not for any one of them alone. Each
    group is minimal (no smaller subset is invariant), its names in ``named_parameters`` order.

    Found by structure, not by names: a common rescale of the tensors with weights v_t (w_t → c^{v_t}·w_t) leaves
    the output unchanged for every c exactly when Σ_t v_t·⟨w_t, ∇_t f⟩ = 0 for every output f, every input and every
    state (Euler's identity for the group). One backward pass per row measures the radial derivatives ⟨w_t, ∇_t f⟩
    of a random projection f of the output on a random mix of the batch's inputs, on a copy whose 1-D parameters and
    zero tensors are randomized (``seed``; so that no invariance of the present values counts); the null space of
    that matrix (one row more than a candidate, plus :data:`EXTRA_ROWS`) holds the invariances. A group is a
    nonnegative null vector of minimal support (a vertex of the linear program min Σv, v ≥ 0, v_t = 1, one per
    tensor not yet grouped) whose weights are equal (a common rescale; unequal ones, such as a norm gain up and the
    next linear map down, are rescalings that change nothing but are not a scale invariance). Every group is then
    verified by the direct check of :func:`scale_invariance` (``together=True``, factor ``c``, Eq. 5 and the loss
    to ``rtol``) on the randomized copy (on the batch's first 8 inputs).

    ``names``: the candidates (default: every trainable tensor, 1-D ones included, that is not invariant alone by
    :func:`scale_invariance`). Groups that share a tensor are found from the tensors not yet in a group, so two
    overlapping groups are both found only when each has a tensor of its own. Cost: one forward and backward pass
    per candidate, and :data:`EXTRA_ROWS` more, on the batch."""
    if not (isinstance(c, numbers.Real) and math.isfinite(c) and c > 0 and c != 1):
        raise ValueError(f"c: must be a finite number > 0 other than 1, got {c!r}")
    loss_fn = loss_fn or F.cross_entropy
    net, x = _prepared_copy(model, x, dtype, bn_eps)
    params = dict(net.named_parameters())
    if names is None:
        alone = _measure(net, x, y, [n for n, p in params.items() if p.requires_grad], c, False, loss_fn, rtol)
        names = list(alone.tensor[alone.verdict != "invariant"])
    names = list(names)
    unknown = [n for n in names if n not in params]
    if unknown:
        raise ValueError(f"names: not parameters of the model: {unknown[:5]}")
    rnd_net = copy.deepcopy(net)
    _randomize(rnd_net, seed)
    return _joint_groups(net, rnd_net, x, y, names, loss_fn, rtol, c, seed)


def _mix(x, y, g: torch.Generator):
    """Another batch from ``(x, y)`` of at most :data:`ROW_BATCH` inputs: each a random convex mix of two of the
    batch's, plus a little noise (floating inputs), or the batch's inputs drawn with replacement (token ids and other
    integer inputs)."""
    b = len(x)
    i = torch.randint(0, b, (min(b, ROW_BATCH),), generator=g)
    yi = y[i] if isinstance(y, torch.Tensor) and y.ndim >= 1 and len(y) == b else y
    if not torch.is_floating_point(x):
        return x[i], yi
    j = torch.randint(0, b, (len(i),), generator=g)
    a = torch.rand((len(i),) + (1,) * (x.ndim - 1), generator=g, dtype=torch.float64).to(x)
    noise = torch.randn((len(i),) + tuple(x.shape[1:]), generator=g, dtype=torch.float64).to(x)
    return a * x[i] + (1 - a) * x[j] + 0.1 * float(x.std()) * noise, yi


def _radial_rows(net: nn.Module, x, y, names: list[str], loss_fn, seed: int):
    """The matrix (numpy, rows × len(names)) of radial derivatives ⟨w_t, ∇_t f⟩, one row per backward pass."""
    import numpy as np

    params = dict(net.named_parameters())
    for p in params.values():
        p.requires_grad_(False)
    for n in names:
        params[n].requires_grad_(True)
    g = torch.Generator().manual_seed(10_007 + seed)
    rows = []
    for k in range(len(names) + EXTRA_ROWS):
        xk, yk = _mix(x, y, g)
        with torch.random.fork_rng(devices=[x.device] if x.device.type == "cuda" else []):
            torch.manual_seed(k)
            out = _forward(net, xk)
            if isinstance(out, torch.Tensor) and torch.is_floating_point(out):
                f = (out * torch.randn(out.shape, generator=g, dtype=torch.float64).to(out)).sum()
            else:
                f = _loss(net, xk, yk, loss_fn)
        grads = torch.autograd.grad(f, [params[n] for n in names], allow_unused=True)
        used = [k for k, gr in enumerate(grads) if gr is not None]
        row = torch.zeros(len(names), dtype=torch.float64)
        if used:
            dots = torch._foreach_mul([params[names[k]].detach() for k in used], [grads[k] for k in used])
            row[used] = torch.stack([d.sum() for d in dots]).to(device="cpu", dtype=torch.float64)
        rows.append(row)
    return torch.stack(rows).numpy()


def _joint_groups(net: nn.Module, rnd_net: nn.Module, x, y, names: list[str], loss_fn, rtol, c,
                  seed: int) -> list[list[str]]:
    """:func:`joint_groups` on the prepared copy ``net`` and its randomized copy ``rnd_net``."""
    import numpy as np
    from scipy.optimize import linprog

    if len(names) < 2:
        return []
    order = {n: k for k, n in enumerate(dict(net.named_parameters()))}
    R = _radial_rows(rnd_net, x, y, names, loss_fn, seed)
    scale = np.linalg.norm(R, axis=0)
    live = [k for k in range(len(names)) if scale[k] > 0 and math.isfinite(scale[k])]
    if len(live) < 2:
        return []
    Rn = R[:, live] / scale[live]
    _, sv, vt = np.linalg.svd(Rn, full_matrices=True)
    sv = np.concatenate([sv, np.zeros(len(live) - len(sv))]) if len(sv) < len(live) else sv
    null = vt[sv <= NULL_TOL * sv[0]].T  # live × k, in the normalized coordinates u_t = scale_t·v_t
    if null.shape[1] == 0:
        return []
    M = null / scale[live][:, None]  # v = M z
    few = min(len(x), 2 * ROW_BATCH)  # the verification's batch: exactness does not need many inputs
    xv, yv = (x[:few], y[:few]) if isinstance(y, torch.Tensor) and y.ndim >= 1 and len(y) == len(x) else (x, y)
    found, covered = [], set()
    for t in range(len(live)):
        if t in covered or np.linalg.norm(null[t]) < 1e-6:
            continue
        res = linprog(M.sum(axis=0), A_ub=-M, b_ub=np.zeros(len(live)), A_eq=M[t:t + 1], b_eq=[1.0],
                      bounds=[(None, None)] * M.shape[1], method="highs-ds")
        if res.status != 0:
            continue
        v = M @ res.x
        support = [i for i in range(len(live)) if v[i] > 1e-6]
        if len(support) < 2 or np.ptp(v[support]) > 1e-4 * float(v[support].max()):
            continue  # a single tensor (rounding) or unequal weights: not a common rescale
        group = sorted((names[live[i]] for i in support), key=order.get)
        if group in found or not _verified(rnd_net, xv, yv, group, c, loss_fn, rtol):
            continue
        found.append(group)
        covered |= set(support)
    return sorted(found, key=lambda g: order[g[0]])


def _verified(rnd_net, x, y, group, c, loss_fn, rtol) -> bool:
    """The common rescale of ``group`` by ``c`` passes :func:`scale_invariance`'s check (``together=True``: Eq. 5 for
    every member and the loss, to ``rtol``) on the randomized copy, where no invariance of the present values can
    pass for a structural one."""
    df = _measure(rnd_net, x, y, group, c, True, loss_fn, rtol)
    return bool((df.verdict == "invariant").all() and (df.loss_change <= rtol).all())


def _listed(names: list[str], most: int = 6) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _warn(found: Detection) -> None:
    if found.stored_statistics:
        warnings.warn(f"{len(found.stored_statistics)} normalization layers normalize with stored statistics, not the "
                      f"batch's ({_listed(found.stored_statistics)}): an affine map there, so the tensors in front of "
                      "them are not scale-invariant"
                      + ("; the model is in eval mode: call model.train() to check it as training runs it"
                         if found.mode == "eval" else ""), TuningWarning, stacklevel=3)
    if found.state_only:
        warnings.warn(f"{len(found.state_only)} tensors are scale-invariant only in the model's present state (not "
                      f"once its biases, norm scales or layer-scales move), not counted: {_listed(found.state_only)}",
                      TuningWarning, stacklevel=3)
    if found.undecided:
        warnings.warn(f"{len(found.undecided)} tensors could not be decided (no gradient on this batch, not even on a "
                      f"randomized copy), not counted: {_listed(found.undecided)}", TuningWarning, stacklevel=3)
    if not found.applies:
        warnings.warn(found.summary() + (": the tuning factor describes none of its weights (tune η and λ directly)"
                                         if found.searched_groups else ""), TuningWarning, stacklevel=3)


def scale_invariant_parameters(model: nn.Module, x: torch.Tensor, y: torch.Tensor, **kw) -> list[str]:
    """The names (``named_parameters`` order) of the tensors whose loss is invariant to their own scale, by
    :func:`detect` (whose keywords ``kw`` takes, and whose warnings it gives): the ``"invariant"`` ones, those the
    tuning factor is about and :func:`param_groups` and ``repro_lib.angular.AngularTracker`` take. On a timm ResNet
    with BN, every conv weight (each is directly followed by a BN, zero-initialized branches included) and not the
    classifier; [] for a ViT, whose residual-stream writers are invariant only as a group (:func:`detect` finds
    the groups; here they are not looked for unless ``groups=True``)."""
    kw.setdefault("groups", False)
    return detect(model, x, y, **kw).invariant
