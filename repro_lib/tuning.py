"""The tuning rule of Yun et al., *On the Angular Update and Hyperparameter Tuning of a Scale-Invariant Network*,
ECCV 2022, as a tool for one's own training.

For the scale-invariant weights of a network (those in front of a normalization layer), SGD with momentum μ,
coupled L2 weight decay λ, learning rate η, batch size B and N training images turns the weights by an angle per
epoch that depends on these five numbers only through the *tuning factor* N·η·λ/(B(1−μ)) (Eqs. 26-27). Tune that
factor, not η and λ separately, and keep it when N, B, η or μ change (Sec. 5-6). The recipe::

    from repro_lib import tuning
    from repro_lib.angular import StepTracker
    names = tuning.scale_invariant_parameters(model, x, y)      # 1. the tensors the rule is about (Lemma 1)
    wd = tuning.weight_decay_for(10 / 128, n=50_000, batch_size=512, lr=0.1, momentum=0.9)   # 8e-4 at B = 512
    opt = torch.optim.SGD(tuning.param_groups(model, names, weight_decay=wd), lr=0.1, momentum=0.9)  # 2.
    tracker = StepTracker(opt, model, names, steps_per_epoch=math.ceil(50_000 / 512))           # 3. Δθ per epoch
    ... train as usual ...;  tracker.history                      # 4. compare with angular_update_per_epoch(10/128)

* :func:`tuning_factor`, :func:`weight_decay_for`, :func:`lr_for` -- Eq. 27 and the value that keeps it, for SGD
  (``optimizer="sgd"``: N·η·λ/(B(1−μ))) and AdamW (``optimizer="adamw"``: decoupled decay, N·η·λ/B);
* :func:`relaxation_epochs` -- the epochs the weight norm takes to settle (derived below), and
  :func:`angular_update_per_epoch` -- arccos(1 − TF), the Δθ the first-order reading of Eq. 27 expects;
* :func:`detect` (:class:`Detection`), :func:`scale_invariant_parameters` and :func:`scale_invariance` -- Lemma 1
  (Eqs. 5-6) measured on one batch: the scale-invariant tensors of any ``torch.nn.Module`` without a hand-made list;
* :func:`param_groups` -- the optimizer's parameter groups: λ on the invariant tensors, a stated choice on the rest.

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

**Angular update.** At equilibrium a step turns w by δ with δ² = β/s*² = 2a, and if the N/B steps of an epoch added
like a random walk, Δθ² ≈ 2·TF per epoch, i.e. arccos(1 − TF) (Eq. 27) to first order. Eq. 25 holds the gradient
fixed over the epoch and Eq. 27 drops Eq. 26's velocity term; in a real epoch the gradient turns with the weights
and partly pulls them back toward where they were, so successive steps cancel in part and runs measure less than
arccos(1 − TF) (the tutorial ``tuning_rule.ipynb`` measures it): a reference to compare settings with, not a
prediction of the value.

Every function raises ``ValueError`` whose message starts with the name of the bad argument.
"""
from __future__ import annotations

import copy
import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Callable, Sequence

import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import angular

__all__ = ["tuning_factor", "weight_decay_for", "lr_for", "relaxation_epochs", "angular_update_per_epoch",
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


def _momentum(momentum, optimizer: str = "sgd") -> None:
    if not (isinstance(momentum, numbers.Real) and not isinstance(momentum, bool) and 0.0 <= momentum < 1.0):
        raise ValueError(f"momentum: must be a number in [0, 1), got {momentum!r}")
    if optimizer == "adamw" and momentum != 0:
        raise ValueError(f"momentum: AdamW's decoupled decay w(1 - lr*wd) does not involve momentum (its beta1); "
                         f"leave it 0, got {momentum!r}")


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


def tuning_factor(n: float, batch_size: float, lr: float, weight_decay: float, momentum: float = 0.0,
                  optimizer: str = "sgd") -> float:
    """The tuning factor of Yun et al. Eq. 27 (Eq. 18 with μ = 0), dimensionless: N·η·λ/(B(1−μ)) for SGD
    (``optimizer="sgd"``: coupled L2, ``torch.optim.SGD``'s ``weight_decay``, PyTorch momentum μ) and N·η·λ/B for
    AdamW (``"adamw"``: decoupled decay, momentum must be 0: β1 does not enter the decay). ``n`` training images,
    ``batch_size`` B (global: the images behind one optimizer step), ``lr`` η per step (a schedule's initial or peak
    value), ``weight_decay`` λ. The paper's yellow cells: N = 50,000, B = 128, η = 0.1, λ = 2e-4, μ = 0.9 give
    10/128. A per-step shrink η·λ/(1−μ) of 1 or more is refused (it would zero or flip the weights)."""
    _optimizer(optimizer)
    _sizes(n, batch_size)
    _positive(lr=lr)
    if not (isinstance(weight_decay, numbers.Real) and math.isfinite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"weight_decay: must be a finite number >= 0, got {weight_decay!r}")
    _momentum(momentum, optimizer)
    _stable(lr * weight_decay / _keep(momentum, optimizer), "weight_decay")
    tf = angular.tuning_factor(n, batch_size, lr, weight_decay, momentum)
    _tf(tf)
    return tf


def weight_decay_for(tuning_factor: float, n: float, batch_size: float, lr: float, momentum: float = 0.0,
                     optimizer: str = "sgd") -> float:
    """The weight decay λ = TF·B(1−μ)/(N·η) (AdamW: TF·B/(N·η)) that gives ``tuning_factor`` at ``n``,
    ``batch_size``, ``lr`` and ``momentum`` (Eq. 27 solved for λ): the λ that keeps a tuned factor when N, B, η or μ
    change. λ grows with B and shrinks with N (Sec. 6: 0.0016 on 80k ImageNet images is 1e-4 on all 1.28M)."""
    _optimizer(optimizer)
    _tf(tuning_factor)
    _sizes(n, batch_size)
    _positive(lr=lr)
    _momentum(momentum, optimizer)
    wd = tuning_factor * batch_size * _keep(momentum, optimizer) / (n * lr)
    _stable(lr * wd / _keep(momentum, optimizer), "tuning_factor")
    return wd


def lr_for(tuning_factor: float, n: float, batch_size: float, weight_decay: float, momentum: float = 0.0,
           optimizer: str = "sgd") -> float:
    """The learning rate η = TF·B(1−μ)/(N·λ) (AdamW: TF·B/(N·λ)) that gives ``tuning_factor`` at ``n``,
    ``batch_size``, ``weight_decay`` and ``momentum`` (Eq. 27 solved for η; the other way to keep a factor).
    Changing η also changes what the scale-variant parameters (BN affine, classifier) see, which the tuning factor
    does not describe."""
    _optimizer(optimizer)
    _tf(tuning_factor)
    _sizes(n, batch_size)
    _positive(weight_decay=weight_decay)
    _momentum(momentum, optimizer)
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


def param_groups(model: nn.Module, invariant: Sequence[str], weight_decay: float,
                 other_weight_decay: float | None = None) -> list[dict]:
    """Parameter groups for any ``torch.optim`` optimizer: ``[{"params": the invariant tensors, "weight_decay":
    weight_decay, "names": …}, {"params": every other trainable tensor, "weight_decay": other_weight_decay,
    "names": …}]`` (an empty group left out; each group's ``names`` in ``named_parameters`` order).

    ``invariant``: the names :func:`scale_invariant_parameters` found; the tuning factor is about these, and
    ``weight_decay`` is the λ that sets it (:func:`weight_decay_for`). The other tensors (BN/LN scales and shifts,
    biases, squeeze-and-excitation convs, the classifier, layer-scales, positional embeddings) are not described by
    the factor; ``other_weight_decay`` is their λ, by default the same ``weight_decay``: the paper's runs use one λ for
    every parameter (``torch.optim.SGD(model.parameters(), weight_decay=λ)``, Sec. 5.2 and the appendix), and so do
    this package's. Pass 0 to exempt them, a common choice for normalization and bias parameters, which then grow or
    move freely (the rule makes no claim about it either way)."""
    if not (isinstance(weight_decay, numbers.Real) and math.isfinite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"weight_decay: must be a finite number >= 0, got {weight_decay!r}")
    other = weight_decay if other_weight_decay is None else other_weight_decay
    if not (isinstance(other, numbers.Real) and math.isfinite(other) and other >= 0):
        raise ValueError(f"other_weight_decay: must be a finite number >= 0, got {other_weight_decay!r}")
    if isinstance(invariant, str):
        raise ValueError("invariant: a list of parameter names, not one string")
    params = {n: p for n, p in angular._unwrap(model).named_parameters() if p.requires_grad}
    unknown = [n for n in invariant if n not in params]
    if unknown:
        raise ValueError(f"invariant: not trainable parameters of the model: {unknown[:5]}")
    want = set(invariant)
    groups = [dict(params=[p for n, p in params.items() if n in want], weight_decay=float(weight_decay),
                   names=[n for n in params if n in want]),
              dict(params=[p for n, p in params.items() if n not in want], weight_decay=float(other),
                   names=[n for n in params if n not in want])]
    return [g for g in groups if g["params"]]


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
    if not (isinstance(rtol, numbers.Real) and rtol > 0):
        raise ValueError(f"rtol: must be > 0, got {rtol!r}")
    net, x = _prepared_copy(model, x, dtype, bn_eps)
    return _measure(net, x, y, names, c, together, loss_fn or F.cross_entropy, rtol)


def _prepared_copy(model: nn.Module, x: torch.Tensor, dtype, bn_eps):
    """A copy of ``model`` in training mode, in ``dtype``, its normalization layers' ε set to ``bn_eps``; and ``x`` in
    that dtype."""
    net = copy.deepcopy(angular._unwrap(model)).train()
    if dtype is not None:
        net = net.to(dtype)
        x = x.to(dtype) if torch.is_floating_point(x) else x
    if bn_eps is not None:
        for m in net.modules():
            if isinstance(m, NORM_TYPES):
                m.eps = bn_eps
    return net, x


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
    invariant; a gradient below sqrt(rounding unit) of the largest tensor's is rounding, "no gradient"), then every screened tensor is multiplied by its own factor (``c``
    raised to a distinct power in (−1, 1)) at once and checked by Eq. 5 and the loss; a tensor that fails there is
    measured alone (:func:`_measure`)."""
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
    rows, candidates = {}, []
    for n, g, gn in zip(names, grads, norms):
        w = weights[n]
        wn = float(w.norm())
        silent = gn <= floor
        cos = float((w * g).sum()) / (wn * gn) if gn > 0 and wn > 0 else math.nan
        rows[n] = dict(tensor=n, numel=w.numel(), grad_norm=gn, cos_w_grad=cos, grad_ratio=math.nan,
                       grad_error=math.nan, loss_change=math.nan,
                       verdict="no gradient" if silent else "not invariant")
        if not silent and abs(cos) <= screen:
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
        if failed:
            alone = _measure(net, x, y, failed, c, False, loss_fn, rtol)
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
    order); ``applies``: whether any tensor is invariant (the rule is about those alone)."""

    table: pd.DataFrame

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
        return bool(self.invariant)

    def counts(self) -> dict:
        """Tensors per kind, every kind listed (0 where none)."""
        return {k: int((self.table.kind == k).sum()) for k in (INVARIANT, STATE_ONLY, NOT_INVARIANT, UNDECIDED)}

    def summary(self) -> str:
        """One line: the counts per kind, and whether the rule applies."""
        counts = ", ".join(f"{v} {k}" for k, v in self.counts().items() if v)
        return (f"{len(self.table)} tensors checked: {counts}" if self.applies else
                f"the rule does not apply to this model: none of its {len(self.table)} tensors is scale-invariant "
                f"({counts})")

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
           loss_fn: Callable | None = None, rtol: float = 1e-3, seed: int = 0, warn: bool = True) -> Detection:
    """Which tensors of ``model`` are scale-invariant, by Lemma 1 (:func:`scale_invariance`, whose keywords it takes)
    measured twice on the batch ``(x, y)``: on the model as it is and on a copy whose 1-D parameters (norm scales and
    shifts, biases, layer-scales) get noise and whose all-zero tensors get random values (``seed``). The second pass
    decides what the first cannot (a zero-initialized branch gives its tensors no gradient: timm's ResNets with
    ``zero_init_last``) and exposes an invariance that holds only at the present values (a conv with bias before a
    LayerNorm, as in ConvNeXt, is invariant while the bias is 0); :class:`Detection` gives the classes.

    With ``warn`` (default) a :class:`TuningWarning` names the tensors found invariant only in this state and those
    it could not decide, and says "the rule does not apply to this model" when no tensor is invariant (a ViT, a
    ConvNeXt: every weight feeds a residual stream or a LayerNorm through a bias). The model itself is left untouched.
    Cost: two forward and backward passes per tensor on the batch."""
    if not (isinstance(c, numbers.Real) and math.isfinite(c) and c > 0 and c != 1):
        raise ValueError(f"c: must be a finite number > 0 other than 1, got {c!r}")
    if not (isinstance(rtol, numbers.Real) and rtol > 0):
        raise ValueError(f"rtol: must be > 0, got {rtol!r}")
    loss_fn = loss_fn or F.cross_entropy
    net, x = _prepared_copy(model, x, dtype, bn_eps)
    params = dict(net.named_parameters())
    if names is None:
        names = [n for n, p in params.items() if p.requires_grad and p.ndim >= 2]
    names = list(names)
    unknown = [n for n in names if n not in params]
    if unknown:
        raise ValueError(f"names: not parameters of the model: {unknown[:5]}")
    if not names:
        raise ValueError("names: no tensor to check (the model has no trainable tensor with 2 or more dimensions)")
    now = _measure_screened(net, x, y, names, c, loss_fn, rtol)
    _randomize(net, seed)
    rnd = _measure_screened(net, x, y, names, c, loss_fn, rtol)
    table = now[["tensor", "numel", "verdict", "grad_error", "loss_change"]].assign(
        verdict_randomized=rnd.verdict.values, grad_error_randomized=rnd.grad_error.values,
        loss_change_randomized=rnd.loss_change.values)
    table["kind"] = [_kind(a, b) for a, b in zip(table.verdict, table.verdict_randomized)]
    found = Detection(table)
    if warn:
        _warn(found)
    return found


def _listed(names: list[str], most: int = 6) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _warn(found: Detection) -> None:
    if found.state_only:
        warnings.warn(f"{len(found.state_only)} tensors are scale-invariant only in the model's present state (not "
                      f"once its biases, norm scales or layer-scales move), not counted: {_listed(found.state_only)}",
                      TuningWarning, stacklevel=3)
    if found.undecided:
        warnings.warn(f"{len(found.undecided)} tensors could not be decided (no gradient on this batch, not even on a "
                      f"randomized copy), not counted: {_listed(found.undecided)}", TuningWarning, stacklevel=3)
    if not found.applies:
        warnings.warn(found.summary() + ": the tuning factor describes none of its weights (tune η and λ directly)",
                      TuningWarning, stacklevel=3)


def scale_invariant_parameters(model: nn.Module, x: torch.Tensor, y: torch.Tensor, **kw) -> list[str]:
    """The names (``named_parameters`` order) of the tensors whose loss is invariant to their own scale, by
    :func:`detect` (whose keywords ``kw`` takes, and whose warnings it gives): the ``"invariant"`` ones, those the
    tuning factor is about and :func:`param_groups` and ``repro_lib.angular.AngularTracker`` take. On a timm ResNet
    with BN, every conv weight (each is directly followed by a BN, zero-initialized branches included) and not the
    classifier; [] for a ViT (with a warning that the rule does not apply)."""
    return detect(model, x, y, **kw).invariant
