"""Angular update, effective learning rates and the tuning factor of Yun et al., *On the Angular Update and
Hyperparameter Tuning of a Scale-Invariant Network*, ECCV 2022 (Sec. 3.1 Eq. 9-11, Sec. 4 Eq. 18 and 27).

* :func:`tuning_factor` -- ``N·η·λ / (B·(1−μ))`` (Eq. 27; with μ = 0 it is the ``Nηλ/B`` of Eq. 18).
* :func:`predicted_angular_update` -- ``arccos(1 − tuning factor)``: Eq. 27 (SGDM) / Eq. 18 (SGD) give
  ``<Y_t, Y_{t+η}> ≈ 1 − Nηλ/(B(1−μ))`` for the unit weight direction ``Y`` over one epoch (the rescaled SDE time
  η is N/B SGD steps), so the predicted angular update per epoch is its arccos. Undefined (``nan``) when the
  tuning factor exceeds 2 (the first-order approximation has broken down there).
* :func:`angle` -- the angle of Eq. 11 between two parameter collections, flattened and concatenated.
* :class:`StepTracker` -- the same, driven by an optimizer step hook: no change to the training loop (a plain loop,
  Lightning, Accelerate or the HF Trainer all call ``optimizer.step()``).
* :class:`AngularTracker` -- per-epoch recorder of Δθ (Eq. 11, concatenated and per tensor), ‖x‖, η_eff = η/‖x‖²
  (Eq. 9) and η_epoch = η·N/(‖x‖²·B) (Eq. 10) over the model's scale-invariant parameters.

Numerics: angles are computed in float64 with Kahan's formula ``∠(a, b) = 2·atan2(‖â − b̂‖, ‖â + b̂‖)`` (â = a/‖a‖),
which is accurate for every angle, including the tiny ones, where ``arccos(<a,b>/(‖a‖‖b‖))`` loses half the digits
(cos θ = 1 − θ²/2 rounds away for θ below ~1e-8 even in float64). It equals the arccos of Eq. 11 exactly in exact
arithmetic and lies in [0, π] by construction (no clamping needed).
"""
from __future__ import annotations

import math
import numbers
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn

__all__ = ["tuning_factor", "predicted_angular_update", "angle", "AngularTracker", "StepTracker"]


def tuning_factor(n: float, batch_size: float, lr: float, weight_decay: float, momentum: float = 0.0) -> float:
    """The tuning factor ``N·η·λ / (B·(1−μ))`` of Yun et al. Eq. 27 (coupled L2 weight decay λ, PyTorch SGD
    momentum μ; μ = 0 gives plain SGD, Eq. 18). Paper base cell: N=50000, B=128, η=0.1, λ=1e-4, μ=0.9 -> 5/128.
    A bad value is a ``ValueError`` whose message starts with the argument's name."""
    for name, v in (("n", n), ("batch_size", batch_size)):
        if not (_real(v) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name}: must be a finite number > 0, got {v!r}")
    for name, v in (("lr", lr), ("weight_decay", weight_decay)):
        if not (_real(v) and math.isfinite(v) and v >= 0):
            raise ValueError(f"{name}: must be a finite number >= 0, got {v!r}")
    if not (_real(momentum) and 0.0 <= momentum < 1.0):
        raise ValueError(f"momentum: must be a number in [0, 1), got {momentum!r}")
    return n * lr * weight_decay / (batch_size * (1.0 - momentum))


def _real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def predicted_angular_update(tf):
    """Predicted angular update per epoch, ``arccos(1 − tf)`` in radians (Yun et al. Eq. 27 / Eq. 18).

    Accepts a float or an array; returns ``nan`` where ``tf`` is outside [0, 2]."""
    t = np.asarray(tf, dtype=np.float64)
    c = 1.0 - t
    out = np.where((c >= -1.0) & (c <= 1.0), np.arccos(np.clip(c, -1.0, 1.0)), np.nan)
    return float(out) if out.ndim == 0 else out


def _as_list(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x.detach()]
    return [t.detach() for t in x]


def _angles64(a: list[torch.Tensor], b: list[torch.Tensor], parts: Sequence[Sequence[int]] | None = None):
    """Float64 per-tensor angles, the concatenated angle, and the norms, with foreach ops.

    Returns ``(per_tensor: Tensor[k], total: Tensor[], norms_a: Tensor[k], norms_b: Tensor[k])``, and with ``parts``
    (lists of tensor indices) a fifth item: the angle of each part's concatenation."""
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        raise ValueError("angle: the two collections must hold tensors of the same shapes")
    if not a:
        raise ValueError("angle: empty parameter collection")
    a64 = [t.to(torch.float64, copy=True) for t in a]  # copies: normalised in place below
    b64 = [t.to(torch.float64, copy=True) for t in b]
    na = torch.stack(torch._foreach_norm(a64))
    nb = torch.stack(torch._foreach_norm(b64))
    A, B = torch.linalg.vector_norm(na), torch.linalg.vector_norm(nb)
    if float(A) == 0.0 or float(B) == 0.0:
        raise ValueError("angle: undefined for a zero vector")
    # per tensor: u_i = a_i/|a_i|, v_i = b_i/|b_i|; d_i = |u_i - v_i|, s_i = |u_i + v_i| (a zero tensor -> nan)
    torch._foreach_div_(a64, [max(v, 1e-300) for v in na.tolist()])
    torch._foreach_div_(b64, [max(v, 1e-300) for v in nb.tolist()])
    d = torch.stack(torch._foreach_norm(torch._foreach_sub(a64, b64)))
    torch._foreach_add_(a64, b64)
    s = torch.stack(torch._foreach_norm(a64))
    per = 2.0 * torch.atan2(d, s)
    per = torch.where((na == 0) | (nb == 0), torch.full_like(per, float("nan")), per)
    total = _joined(d, s, na, nb)
    if parts is None:
        return per, total, na, nb
    return per, total, na, nb, [_joined(d[i], s[i], na[i], nb[i]) for i in parts]


def _joined(d, s, na, nb):
    """The angle of the concatenation of some tensors from their own d_i = |u_i - v_i|, s_i = |u_i + v_i| and norms,
    without another pass: with p_i = |a_i|/|a|, q_i = |b_i|/|b|, |p_i u_i - q_i v_i|^2 = (p_i - q_i)^2 + p_i q_i d_i^2
    and |p_i u_i + q_i v_i|^2 = (p_i - q_i)^2 + p_i q_i s_i^2 (both sums of non-negative terms: no cancellation for
    tiny angles)."""
    A, B = torch.linalg.vector_norm(na), torch.linalg.vector_norm(nb)
    if float(A) == 0.0 or float(B) == 0.0:
        return torch.tensor(float("nan"), dtype=torch.float64)
    pa, qb = na / A, nb / B
    base = (pa - qb) ** 2
    d_tot = torch.sqrt((base + pa * qb * d * d).sum())
    s_tot = torch.sqrt((base + pa * qb * s * s).sum())
    return 2.0 * torch.atan2(d_tot, s_tot)


def angle(a, b) -> float:
    """Angle in radians between two parameter collections (a tensor or a sequence of tensors each), flattened and
    concatenated -- ``∠(x_a, x_b)`` of Yun et al. Eq. 11 -- computed in float64 (see the module docstring)."""
    _, total, _, _ = _angles64(_as_list(a), _as_list(b))
    return float(total)


def _unwrap(model: nn.Module) -> nn.Module:
    """The module whose parameter names ``scale_invariant_names`` refers to (through DDP / DataParallel /
    ``torch.compile`` wrappers, which share the parameters)."""
    while True:
        if hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
            model = model.module
        else:
            return model


class AngularTracker:
    """Per-epoch angular-update recorder (Yun et al. Sec. 3.1, Eq. 9-11).

    ``names`` defaults to ``model.scale_invariant_names`` (a DDP / DataParallel / compiled wrapper is unwrapped) (all trainable tensors of a scale-invariant net; the conv
    weights directly followed by BN of an unmodified net, Sec. 5.2); a ``repro_lib.tuning.Detection`` gives its
    invariant tensors and its joint groups. Usage::

        tracker = AngularTracker(model)
        tracker.start_epoch()                  # snapshot x_{(e-1)N/B}
        ... one epoch of SGD ...
        rec = tracker.end_epoch(lr, n, batch_size)

    ``rec`` holds ``angular_update`` (Δθ of Eq. 11 over the concatenated tensors, radians),
    ``angular_update_per_tensor`` (name -> Δθ of that tensor alone), ``weight_norm`` (‖x‖ of the concatenation at
    the end of the epoch), ``weight_norm_per_tensor`` (name -> ‖x_i‖), with ``groups`` (jointly invariant groups,
    ``repro_lib.tuning.joint_groups``: lists of names, each tracked as one vector) ``angular_update_per_group`` and
    ``weight_norm_per_group`` (one value per group, in the order of ``tracker.groups``: the angle and norm of the
    group's concatenation; its members' own angles mean nothing alone), ``effective_lr`` = lr/‖x‖² (Eq. 9) and ``effective_lr_epoch`` = lr·n/(‖x‖²·batch_size)
    (Eq. 10, n/B exactly as in the paper, not the rounded number of steps). ``lr`` is the learning rate the caller
    says was used in the epoch (with a schedule that changes within an epoch, pass the one to report).

    Cost: the snapshot is one ``torch._foreach_copy_`` into buffers allocated once (same device and dtype as the
    parameters); ``end_epoch`` is a handful of float64 foreach passes over the tracked tensors -- nothing runs per
    training step, so the overhead is a few ms per epoch.
    """

    def __init__(self, model: nn.Module, names: Sequence[str] | None = None,
                 groups: Sequence[Sequence[str]] | None = None):
        model = _unwrap(model)
        if hasattr(names, "invariant") and hasattr(names, "groups"):  # a repro_lib.tuning.Detection
            groups = names.groups if groups is None else groups
            names = names.invariant
        if names is None:
            names = getattr(model, "scale_invariant_names", None)
            if names is None:
                raise ValueError("AngularTracker: model has no scale_invariant_names; pass names=")
        if isinstance(groups, str) or any(isinstance(g, str) for g in (groups or [])):
            raise ValueError("groups: a list of groups, each a list of parameter names")
        groups = [list(g) for g in (groups or []) if len(g)]
        params = dict(model.named_parameters())
        missing = [n for n in list(names) + [n for g in groups for n in g] if n not in params]
        if missing:
            raise ValueError(f"AngularTracker: unknown parameter names {missing[:5]}")
        if not names and not groups:
            raise ValueError("AngularTracker: no parameters to track")
        want = set(names) | {n for g in groups for n in g}
        self.names = [n for n in params if n in want]  # named_parameters order
        self.params = [params[n] for n in self.names]
        index = {n: i for i, n in enumerate(self.names)}
        self.groups = [[n for n in self.names if n in set(g)] for g in groups]
        self._parts = [[index[n] for n in g] for g in self.groups]
        self._prev: list[torch.Tensor] | None = None
        self._has_snapshot = False

    def _current(self) -> list[torch.Tensor]:
        return [p.detach() for p in self.params]

    @torch.no_grad()
    def start_epoch(self) -> None:
        """Snapshot the tracked parameters (start of the epoch)."""
        cur = self._current()
        if self._prev is None or any(b.shape != p.shape or b.device != p.device for b, p in zip(self._prev, cur)):
            self._prev = [torch.empty_like(p) for p in cur]
        torch._foreach_copy_(self._prev, cur)
        self._has_snapshot = True

    @torch.no_grad()
    def end_epoch(self, lr: float, n: int, batch_size: int) -> dict:
        """Measure against the snapshot of :meth:`start_epoch`; see the class docstring for the keys."""
        for name, v in (("lr", lr), ("n", n), ("batch_size", batch_size)):
            if not (_real(v) and math.isfinite(v) and (v >= 0 if name == "lr" else v > 0)):
                raise ValueError(f"{name}: must be a finite number {'>=' if name == 'lr' else '>'} 0, got {v!r}")
        if not self._has_snapshot:
            raise RuntimeError("AngularTracker.end_epoch called without start_epoch")
        per, total, _, nb, joint = _angles64(self._prev, self._current(), self._parts)
        wn2 = float((nb * nb).sum())
        rec = {
            "angular_update": float(total),
            "angular_update_per_tensor": dict(zip(self.names, per.tolist())),
            "weight_norm": math.sqrt(wn2),
            "weight_norm_per_tensor": dict(zip(self.names, nb.tolist())),
            "effective_lr": lr / wn2,
            "effective_lr_epoch": lr * n / (wn2 * batch_size),
        }
        if self._parts:
            rec["angular_update_per_group"] = [float(a) for a in joint]
            rec["weight_norm_per_group"] = [float(torch.linalg.vector_norm(nb[i])) for i in self._parts]
        return rec

    def weight_norm(self) -> float:
        """‖x‖ of the tracked parameters now (float64)."""
        nb = torch.stack(torch._foreach_norm([p.to(torch.float64) for p in self._current()]))
        return float(torch.linalg.vector_norm(nb))

    def state_dict(self) -> dict:
        """The snapshot (CPU copies) and names, so that a run resumed mid-epoch measures from the same start."""
        return {"names": list(self.names),
                "snapshot": [t.detach().cpu().clone() for t in self._prev] if self._has_snapshot else None}

    def load_state_dict(self, state: dict) -> None:
        if list(state["names"]) != self.names:
            raise ValueError("AngularTracker.load_state_dict: tracked names differ")
        snap = state["snapshot"]
        if snap is None:
            self._prev, self._has_snapshot = None, False
            return
        cur = self._current()
        if any(s.shape != p.shape for s, p in zip(snap, cur)):
            raise ValueError("AngularTracker.load_state_dict: snapshot shapes differ")
        self._prev = [s.to(device=p.device, dtype=p.dtype).clone() for s, p in zip(snap, cur)]
        self._has_snapshot = True


class StepTracker:
    """:class:`AngularTracker` run by ``optimizer``'s step hooks (``torch.optim.Optimizer.register_step_pre_hook`` /
    ``register_step_post_hook``): a snapshot before the first step of every epoch and a record after its last, every
    ``steps_per_epoch`` steps (ceil(N/B) with B the global batch: one step per accumulated batch), with no change to
    the training loop. ``tracker.history`` holds one dict per epoch: ``epoch`` (1, 2, …), ``lr`` (the first param
    group holding a tracked tensor, at the epoch's last step), and :meth:`AngularTracker.end_epoch`'s keys, with
    ``effective_lr_epoch`` = lr·steps_per_epoch/‖x‖². A step the optimizer skips (an AMP ``GradScaler`` after an
    overflow) calls no hook and is not counted. ``names`` may be a ``repro_lib.tuning.Detection``: its jointly
    invariant groups are then tracked as one vector each (``angular_update_per_group``; ``groups`` gives them
    otherwise); ``steps_per_epoch=1`` records the angle of every step. :meth:`remove` detaches it. Usage::

        found = tuning.detect(model, x, y)
        opt = torch.optim.SGD(tuning.param_groups(model, found, weight_decay=wd, other_weight_decay=wd_tuned),
                              lr=0.1, momentum=0.9)
        tracker = StepTracker(opt, model, found, steps_per_epoch=len(loader))
        ... any training loop that calls opt.step() ...
        tracker.history[-1]["angular_update"]      # Δθ of the last full epoch, radians (Eq. 11)
    """

    def __init__(self, optimizer: torch.optim.Optimizer, model: nn.Module, names: Sequence[str] | None = None,
                 steps_per_epoch: int = 1, groups: Sequence[Sequence[str]] | None = None):
        if not (isinstance(steps_per_epoch, numbers.Integral) and not isinstance(steps_per_epoch, bool)
                and steps_per_epoch >= 1):
            raise ValueError(f"steps_per_epoch: must be a whole number >= 1, got {steps_per_epoch!r}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            optimizer = getattr(optimizer, "optimizer", optimizer)  # Accelerate's / Lightning's wrapper
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ValueError(f"optimizer: not a torch.optim.Optimizer, got {type(optimizer).__name__}")
        self.tracker = AngularTracker(model, names, groups)
        ids = {id(p) for p in self.tracker.params}
        held = {id(p) for g in optimizer.param_groups for p in g["params"]}
        if not ids <= held:
            missing = [n for n, p in zip(self.tracker.names, self.tracker.params) if id(p) not in held]
            raise ValueError(f"names: tensors the optimizer does not update: {missing[:5]}")
        self.optimizer, self.steps_per_epoch = optimizer, int(steps_per_epoch)
        self.names, self.groups = self.tracker.names, self.tracker.groups
        self.steps = 0
        self.history: list[dict] = []
        self._handles = [optimizer.register_step_pre_hook(self._before),
                         optimizer.register_step_post_hook(self._after)]

    def _lr(self) -> float:
        ids = {id(p) for p in self.tracker.params}
        for g in self.optimizer.param_groups:
            if any(id(p) in ids for p in g["params"]):
                return float(g["lr"])
        return math.nan

    def _before(self, optimizer, args, kwargs) -> None:
        if self.steps % self.steps_per_epoch == 0:
            self.tracker.start_epoch()

    def _after(self, optimizer, args, kwargs) -> None:
        self.steps += 1
        if self.steps % self.steps_per_epoch == 0:
            lr = self._lr()
            rec = self.tracker.end_epoch(lr, self.steps_per_epoch, 1)
            self.history.append({"epoch": self.steps // self.steps_per_epoch, "lr": lr, **rec})

    def remove(self) -> None:
        """Detach the hooks (the history stays)."""
        for h in self._handles:
            h.remove()
        self._handles = []
