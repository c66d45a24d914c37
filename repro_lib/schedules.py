"""Learning-rate schedules: pure "LR at global step t" objects (no hidden counters).

``build_schedule(cfg, steps_per_epoch)`` builds ``cfg.schedule`` with ``cfg.schedule_kwargs``.
Milestones are fractions of training, so a profile that shortens training compresses the schedule.
"""
from __future__ import annotations

import math
from typing import Callable

_SCHEDULES: dict[str, Callable] = {}


def register_schedule(name: str):
    """Decorator registering ``build(cfg, steps_per_epoch) -> Schedule``."""

    def deco(fn):
        if name in _SCHEDULES:
            raise ValueError(f"schedule {name!r} registered twice")
        _SCHEDULES[name] = fn
        return fn

    return deco


def list_schedules() -> list[str]:
    return sorted(_SCHEDULES)


def build_schedule(cfg, steps_per_epoch: int) -> "Schedule":
    if cfg.schedule not in _SCHEDULES:
        raise ValueError(f"schedule: unknown schedule {cfg.schedule!r}; known: {list_schedules()}")
    return _SCHEDULES[cfg.schedule](cfg, steps_per_epoch)


class Schedule:
    """Base class: subclasses implement ``lr(step)``; ``apply`` writes it into every param group."""

    def lr(self, step: int) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def apply(self, optimizer, step: int) -> None:
        lr = self.lr(step)
        for g in optimizer.param_groups:
            g["lr"] = lr * g.get("lr_scale", 1.0)


class StepDecay(Schedule):
    """Step decay (Def. 2.11 of Li & Arora 2020; Yun et al. 2022 App. B): LR = lr · factor^k after the k-th
    milestone. ``milestones`` are fractions of the total number of steps (0.5, 0.75 = epochs 150 and 225 of
    300); the LR changes at the first step of the milestone epoch."""

    def __init__(self, lr: float, total_steps: int, steps_per_epoch: int, milestones=(0.5, 0.75), factor=0.1):
        ms = [float(m) for m in milestones]
        if any(not 0 < m <= 1 for m in ms) or ms != sorted(ms):
            raise ValueError(f"schedule_kwargs: milestones must be increasing fractions of training in (0, 1] "
                             f"(epochs 150 and 225 of 300 are 0.5, 0.75), got {list(milestones)}")
        if not 0 < float(factor) <= 1:
            raise ValueError(f"schedule_kwargs: factor must be in (0, 1], got {factor!r}")
        self.base = lr
        self.factor = factor
        total_epochs = total_steps // steps_per_epoch
        # milestone epochs, rounded to whole epochs as the papers state them
        self.milestone_steps = [round(m * total_epochs) * steps_per_epoch for m in milestones]

    def lr(self, step: int) -> float:
        k = sum(step >= m for m in self.milestone_steps)
        return self.base * self.factor ** k


class Cosine(Schedule):
    """Cosine annealing from ``lr`` to 0 over all steps, evaluated per iteration (Yun et al. Table 6)."""

    def __init__(self, lr: float, total_steps: int):
        self.base, self.total = lr, total_steps

    def lr(self, step: int) -> float:
        return 0.5 * self.base * (1 + math.cos(math.pi * min(step, self.total) / self.total))


class Constant(Schedule):
    def __init__(self, lr: float):
        self.base = lr

    def lr(self, step: int) -> float:
        return self.base


def _check_kwargs(cfg, allowed: set[str]) -> dict:
    """``cfg.schedule_kwargs`` as a dict, after rejecting options the schedule does not read (a typo would
    otherwise train the default silently)."""
    kw = dict(cfg.schedule_kwargs)
    unknown = sorted(set(kw) - allowed)
    if unknown:
        raise ValueError(f"schedule_kwargs: unknown option {unknown[0]!r} for schedule {cfg.schedule!r} "
                         f"(known: {sorted(allowed)})")
    return kw


@register_schedule("step")
def _build_step(cfg, steps_per_epoch):
    _check_kwargs(cfg, {"milestones", "factor"})
    return _step_base(cfg, steps_per_epoch)


@register_schedule("cosine")
def _build_cosine(cfg, steps_per_epoch):
    _check_kwargs(cfg, set())
    return Cosine(cfg.lr, cfg.num_epochs * steps_per_epoch)


@register_schedule("constant")
def _build_constant(cfg, steps_per_epoch):
    _check_kwargs(cfg, set())
    return Constant(cfg.lr)


# ======================================================================================================
# Exponential learning-rate schedules of Li & Arora, "An Exponential Learning Rate Schedule for Deep
# Learning", ICLR 2020 (arXiv:1910.07454): Thm 2.9 (exp), Thm 2.12 / Eq. 6 (TEXP), Thm 2.13 / Eq. 7
# (TEXP++), Eq. 8 (TEXP--), Sec. 4.2 (exponential cosine).
#
# Momentum form. The paper's Def. 1.2 / Eq. 4 is PyTorch's form exactly: v_t = γ v_{t-1} + ∇(L + λ/2‖θ‖²),
# θ_t = θ_{t-1} − η_{t-1} v_t, i.e. v_t = (θ_{t-1} − θ_t)/η_{t-1} ("Sutskever", ``torch.optim.SGD`` with
# dampening 0, nesterov False, coupled L2). With this form the velocity does not carry the LR, so the theorems
# hold for ``torch.optim.SGD`` as is, including across LR changes. (The form v ← γv + ηg would differ at every
# LR change and is *not* what the theorems assume.)
#
# Indexing. We use the 0-based optimizer step s; step s turns θ_s into θ_{s+1} with LR η_s (the value the
# step-decay schedule returns for s). In this indexing every schedule below has the form (Thm 2.13)
#       θ̃_s = P_s θ_s,   η̃_s = P_s P_{s+1} η'_s,   P_0 = 1,   P_{s+1} = P_s / α_{s+1},
# where θ_s is the run *with* weight decay and θ̃_s the run *without*; α_{s+1} is the per-step factor and η'_s
# the LR of the equivalent weight-decay run (η_s, or η_0 for TEXP--). The main-text Eq. 6 (Thm 2.12) writes the
# jump as η̃_t = η̃_{t-1} × (η_I/η_{I-1})·α_I^{-1}·α_{I-1}^{-1} at t = T_I, the first step of phase I: exactly
# where it sits here, between the last step of phase I-1 and the first step of phase I, where ``StepDecay``
# changes its LR. Eq. 8 (TEXP--) and the appendix's Eq. 9 (Thm B.2) write the same jump for η̃_{t+1} at t = T_I,
# one index later; we follow Eq. 6, whose placement the exactness tests confirm (tests/test_schedules.py).
# ======================================================================================================


def _one_minus_alpha(lr_wd: float, momentum: float) -> float:
    """1 − α for α the larger root of x² − (1+γ−λη)x + γ = 0 (Eq. 1), computed without cancellation:
    1 − α = 2λη / (1 − γ + λη + √D), D = (1−γ)² − 2(1+γ)λη + (λη)² (Lemma B.1.1)."""
    if lr_wd < 0 or not math.isfinite(lr_wd):
        raise ValueError(f"weight_decay: lr*weight_decay must be finite and >= 0, got {lr_wd!r}")
    if not 0 <= momentum < 1:
        raise ValueError(f"momentum: must be in [0, 1), got {momentum!r}")
    bound = (1 - math.sqrt(momentum)) ** 2
    if lr_wd > bound:
        raise ValueError(f"weight_decay: lr*weight_decay = {lr_wd:.4g} exceeds (1-sqrt(momentum))^2 = {bound:.4g}; "
                         "Eq. 1 of Li & Arora has no real root (Remark 2.10)")
    disc = max((1 - momentum) ** 2 - 2 * (1 + momentum) * lr_wd + lr_wd * lr_wd, 0.0)
    return 2 * lr_wd / (1 - momentum + lr_wd + math.sqrt(disc))


def exp_lr_alpha(lr: float, weight_decay: float, momentum: float) -> float:
    """α of Thm 2.9 of Li & Arora 2020: the larger root of x² − (1 + γ − λη)x + γ = 0 (Eq. 1).

    SGD with momentum γ, weight decay λ and fixed LR η is equivalent to SGD with momentum γ, no weight decay and
    LR η̃_t = η·α^(−2t−1). γ = 0 gives α = 1 − λη (Thm 2.1). Raises ``ValueError`` when λη > (1 − √γ)² (the roots
    are complex, Remark 2.10). Example: η = 0.1, λ = 5e-4, γ = 0.9 gives α^(−2·391) ≈ 1.481 per epoch of 391 steps
    (Fig. 1)."""
    return 1.0 - _one_minus_alpha(lr * weight_decay, momentum)


class TaperedExponential(Schedule):
    """Exponential LR without weight decay equivalent to a piecewise-constant LR with weight decay
    (Li & Arora 2020, Sec. 2). One class, four variants (``mode``):

    * ``"texp"`` — Thm 2.12 / Eq. 6 (and Thm 2.9 when ``base_lrs`` is constant, Sec. 4.2 on a per-epoch cosine):
      α_{s+1} = α*(λη_s) (Eq. 1 root of the current phase), η̃_s = P_s² η_s / α_{s+1}; within a phase the LR grows
      by α^(−2) per step, at a phase start it jumps by (η_I/η_{I−1}) α_I^{−1} α_{I−1}^{−1}.
      Exact only with the one-time momentum correction at every phase start (``momentum_correction``, done in
      ``apply``): v ← v + (κ_I − κ_{I−1}) θ̃/P², κ_I = (1 − 1/α_I)/η_I, κ_{−1} = 0. At step 0 this is the initial
      condition θ̃_{−1} = α θ_{−1} of Thm 2.9 (a non-zero initial velocity v_0 = (α − 1) θ_0/(α η_0)).
      Derivation (our notation, PyTorch form): from θ̃ = Pθ, ṽ_{s+1} = (v_{s+1} + (α_{s+1} − 1)θ_s/η_s)/P_s for
      all steps inside a phase; entering phase I the buffer must equal (v_s + (1 − 1/α_I)θ_s/η_I)/P_s but holds
      (v_s + (1 − 1/α_{I−1})θ_s/η_{I−1})/P_s; the difference is the correction.
    * ``"texp++"`` — Thm 2.13 / Eq. 7: α_0 = α_{−1} = 1 and α_{s+1} = 1 − λη_s + (η_s/η_{s−1}) γ (1 − 1/α_s);
      exact for any LR sequence with no correction (and zero initial velocity). α_s converges to the phase root
      within a phase (Thm B.8), so TEXP++ ≈ TEXP.
    * ``"texp--"`` — Eq. 8: TEXP without the instant LR decay at phase starts (η̃_s = P_s² η_0 / α_{s+1}); with the
      same momentum correction it is exactly constant LR η_0 with weight decay λ_I = λ η_I/η_0 in phase I
      (Thm B.2, Fig. 6).
    * ``"fixed"`` — Fig. 4 (orange): the exponent of the first phase throughout (α_{s+1} = α*(λη_0)) but the instant
      LR decays η_I/η_{I−1} of ``base_lrs`` at phase starts, η̃_s = P_s² η_s / α_{s+1}; no momentum correction (it is
      equivalent to no weight-decay run; only the step-0 initial velocity of Thm 2.9 is kept). With a constant
      ``base_lrs`` it is Thm 2.9 (Fig. 4, blue).

    ``base_lrs[s]`` is the LR of the weight-decay run at step s (0-based; a step-decay or per-epoch cosine
    sequence), ``weight_decay`` the λ it is folded into, ``momentum`` γ. Beyond ``len(base_lrs)`` steps the last
    phase continues.

    ``apply(optimizer, step)`` (call before every ``optimizer.step()``) requires ``torch.optim.SGD`` with momentum
    γ, dampening 0, no Nesterov. It treats *every trainable parameter in the optimizer as scale-invariant* (the
    theorems need this: Li & Arora fix BN scale/bias and the last FC layer) and

    1. sets ``weight_decay = 0`` in every param group (the schedule replaces it);
    2. at each phase start (``texp``/``texp--``, and step 0 when ``init_velocity``) adds the momentum correction to
       the momentum buffers;
    3. overflow guard (Lemma 2.7): when the applied LR exceeds ``rescale_above`` × η_0 at the first step of an
       epoch, multiplies the weights by c = 2^−k, momentum buffers and gradients by 2^k, and from then on the LR by
       c² (k is kept as ``exp_lr_log2_rescale`` in the param groups, i.e. in the optimizer's checkpoint). The state
       (cθ, c²η, cθ', c²η') is an equivalent state of (θ, η, θ', η') so the trajectory in function space is the
       same; a power of two makes the scaling exact in floating point. Rescaling only at epoch starts leaves BN
       running statistics (which see activations scaled by c) a whole epoch to re-adapt before evaluation.
       ``rescale_above=None`` disables it. Default 2^60: the first float32 limit is the BN variance of activations,
       ∝ ‖w‖² ∝ LR ratio, against float32's max ≈ 2^128; 2^60 leaves a 2^68 margin. In the paper's setting (η 0.1,
       λ 5e-4, γ 0.9, 391 steps/epoch, 160 epochs, ÷10 at epochs 80/120) the LR ratio peaks at 2^45.3 (TEXP),
       2^47.8 (TEXP--) and 2^41.7 (exp-cosine), so it never triggers for them; the fixed-exponent runs of Fig. 4
       grow ≈ 2^0.57 per epoch for all 160 epochs (``exp`` to 2^90.7, ``exp_decay`` to 2^84.0) and rescale from
       epoch 107 and 113 on (``exponential_rescale_table`` in ``repro_lib.papers.li_arora.exp_lr``). ``train.fit`` logs k per epoch
       as ``exp_lr_log2_rescale``; the LR and weight norms it logs are the rescaled ones, η̃ = 4^k × the logged LR
       and ‖θ̃‖ = 2^k × the logged norm (``repro_lib.papers.li_arora.exp_lr.unscale_history``). ``log2_rescale(step)`` gives k as
       a pure function of the step.
    4. writes LR = η̃_s · 4^−k · ``group.get("lr_scale", 1)`` into every group.

    One-time actions (2, 3) are guarded by ``exp_lr_done_step`` in the param groups, so calling ``apply`` twice for
    the same step is harmless; the schedule object itself holds no counters.
    """

    MODES = ("texp", "texp++", "texp--", "fixed")

    def __init__(self, base_lrs, weight_decay: float, momentum: float, *, mode: str = "texp",
                 momentum_correction: bool = True, init_velocity: bool = True,
                 rescale_above: float | None = 2.0 ** 60, steps_per_epoch: int = 1):
        import numpy as np

        if mode not in self.MODES:
            raise ValueError(f"schedule_kwargs: mode must be one of {self.MODES}, got {mode!r}")
        eta = np.asarray(list(base_lrs), dtype=np.float64)
        if eta.ndim != 1 or len(eta) == 0 or not (eta > 0).all():
            raise ValueError("schedule: base_lrs must be a non-empty sequence of positive LRs")
        if rescale_above is not None and not rescale_above >= 4:
            raise ValueError(f"schedule_kwargs: rescale_above must be >= 4 or None, got {rescale_above!r}")
        self.mode, self.weight_decay, self.momentum = mode, float(weight_decay), float(momentum)
        self.momentum_correction, self.init_velocity = bool(momentum_correction), bool(init_velocity)
        self.rescale_above, self.steps_per_epoch = rescale_above, max(int(steps_per_epoch), 1)
        self.base_lrs = eta
        n = len(eta)
        # d[s] = 1 − α_{s+1}: the factor of step s
        if mode == "texp++":
            d = np.empty(n)
            prev = 0.0  # 1 − α_0 = 0 (α_0 = α_{−1} = 1, Thm B.8)
            for s in range(n):
                ratio = eta[s] / eta[s - 1] if s > 0 else 1.0
                _one_minus_alpha(self.weight_decay * eta[s], self.momentum)  # validates λη_s ≤ (1 − √γ)²
                prev = self.weight_decay * eta[s] + ratio * self.momentum * prev / (1.0 - prev)
                d[s] = prev
        elif mode == "fixed":
            d = np.full(n, _one_minus_alpha(self.weight_decay * eta[0], self.momentum))
        else:
            roots = {v: _one_minus_alpha(self.weight_decay * v, self.momentum) for v in np.unique(eta)}
            d = np.array([roots[v] for v in eta])
        self._d = d
        self._eta_equiv = eta if mode != "texp--" else np.full(n, eta[0])  # LR of the equivalent WD run
        log_alpha = np.log1p(-d)
        self._log_p = np.concatenate([[0.0], -np.cumsum(log_alpha)])  # log P_s, s = 0..n
        self._log_lr = 2 * self._log_p[:-1] + np.log(self._eta_equiv) - log_alpha
        # momentum corrections: step -> coefficient Δκ (times θ̃/P²)
        self._corrections: dict[int, float] = {}
        if mode != "texp++":
            kappa = -d / ((1 - d) * self._eta_equiv)  # κ = (1 − 1/α)/η'
            if self.init_velocity:
                self._corrections[0] = float(kappa[0])
            if self.momentum_correction and mode != "fixed":
                for s in np.nonzero(eta[1:] != eta[:-1])[0] + 1:
                    self._corrections[int(s)] = float(kappa[s] - kappa[s - 1])

    # ------------------------------------------------------------------ pure functions of the step
    def log_lr(self, step: int) -> float:
        """log η̃_s (natural log; η̃ itself overflows float64 after long enough training)."""
        n = len(self._log_lr)
        if step < n:
            return float(self._log_lr[step])
        return float(self._log_lr[-1] - 2 * math.log1p(-self._d[-1]) * (step - n + 1))

    def log_lrs(self):
        """log η̃_s for every precomputed step (a numpy array; plotting whole schedules without a Python loop)."""
        return self._log_lr.copy()

    def lr(self, step: int) -> float:
        """η̃_s, the LR of step s *before* any overflow rescaling (``apply`` multiplies by 4^−k)."""
        try:
            return math.exp(self.log_lr(step))
        except OverflowError:
            return math.inf

    def log_weight_scale(self, step: int) -> float:
        """log P_s, with θ̃_s = P_s θ_s after ``step`` optimizer steps (Thm 2.13; P_s = α^−s for Thm 2.9)."""
        n = len(self._log_lr)
        if step <= n:
            return float(self._log_p[step])
        return float(self._log_p[-1] - math.log1p(-self._d[-1]) * (step - n))

    def alpha(self, step: int) -> float:
        """α_{s+1}, the per-step factor of step s (P_{s+1} = P_s/α_{s+1})."""
        return 1.0 - float(self._d[min(step, len(self._d) - 1)])

    def correction_steps(self) -> list[int]:
        return sorted(self._corrections)

    def log2_rescale(self, step: int) -> int:
        """k in force at ``step`` (after ``apply(optimizer, step)``): the rule of ``apply`` replayed over the epoch
        starts 0, spe, …, ≤ step, as a pure function of the step (0 with ``rescale_above=None``)."""
        k = 0
        for s in range(0, step + 1, self.steps_per_epoch):
            k += self._rescale_increment(s, k)
        return k

    def _rescale_increment(self, step: int, k: int) -> int:
        """The overflow guard's rule (3. above): at the first step of an epoch whose LR, with 4^k already taken
        off, exceeds ``rescale_above`` × η_0, the number of further factors of 4 to take off; else 0."""
        if self.rescale_above is None or step % self.steps_per_epoch:
            return 0
        excess = self.log_lr(step) - 2 * k * math.log(2) - math.log(self.base_lrs[0])
        return int(excess / (2 * math.log(2))) if excess > math.log(self.rescale_above) else 0

    # ------------------------------------------------------------------ the optimizer side
    def apply(self, optimizer, step: int) -> None:
        import torch

        groups = optimizer.param_groups
        for g in groups:
            if g.get("momentum", 0.0) != self.momentum or g.get("dampening", 0.0) != 0 or g.get("nesterov", False):
                raise ValueError(f"schedule: exponential schedules need torch.optim.SGD with momentum={self.momentum}, "
                                 f"dampening=0, nesterov=False; got momentum={g.get('momentum')}, "
                                 f"dampening={g.get('dampening')}, nesterov={g.get('nesterov')}")
            g["weight_decay"] = 0.0  # folded into the LR (Thm 2.9 / 2.12 / 2.13)
        k = int(groups[0].get("exp_lr_log2_rescale", 0))
        log_lr = self.log_lr(step)
        if step > groups[0].get("exp_lr_done_step", -1):
            params = [p for g in groups for p in g["params"] if p.requires_grad]
            coef = self._corrections.get(step)
            if coef is not None and self.momentum > 0 and coef != 0.0:
                # Δκ θ̃/P² with the stored θ = cθ̃ and the applied LR c²η̃_s = c² P_s² η'_s/α_{s+1}
                applied = math.exp(log_lr - 2 * k * math.log(2))
                c = coef * float(self._eta_equiv[min(step, len(self._d) - 1)]) / ((1 - self._d[min(step, len(self._d) - 1)]) * applied)
                bufs = []
                with torch.no_grad():
                    for p in params:
                        st = optimizer.state[p]
                        if st.get("momentum_buffer") is None:
                            st["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                        bufs.append(st["momentum_buffer"])
                    torch._foreach_add_(bufs, [p.detach() for p in params], alpha=c)
            inc = self._rescale_increment(step, k)
            if inc:
                self._rescale(optimizer, params, inc)
                k += inc
            for g in groups:
                g["exp_lr_log2_rescale"] = k
                g["exp_lr_done_step"] = step
        lr = math.exp(log_lr - 2 * k * math.log(2))
        for g in groups:
            g["lr"] = lr * g.get("lr_scale", 1.0)

    @staticmethod
    def _rescale(optimizer, params, inc: int) -> None:
        """Equivalent scaling [Π₁^c ∘ Π₂^{c²} ∘ Π₃^c ∘ Π₄^{c²}] of Lemma 2.7 with c = 2^−inc, in PyTorch's form:
        θ ← cθ, v = (θ' − θ)/η' ← v/c, ∇L(cθ) = ∇L(θ)/c (Lemma 1.3); the LR factor c² is applied by the caller."""
        import torch

        if inc <= 0:
            return
        c = 2.0 ** (-inc)
        with torch.no_grad():
            torch._foreach_mul_([p.data for p in params], c)
            bufs = [optimizer.state[p]["momentum_buffer"] for p in params
                    if optimizer.state[p].get("momentum_buffer") is not None]
            if bufs:
                torch._foreach_mul_(bufs, 1.0 / c)
            grads = [p.grad for p in params if p.grad is not None]
            if grads:
                torch._foreach_mul_(grads, 1.0 / c)


class EpochCosine(Schedule):
    """Cosine LR constant within an epoch (Sec. 4.2 of Li & Arora 2020): η at epoch e is η_0 (1 + cos(eπ/E))/2,
    e = 0..E−1. The base of the exponential-cosine schedule; the per-iteration ``Cosine`` is a different schedule."""

    def __init__(self, lr: float, num_epochs: int, steps_per_epoch: int):
        self.base, self.epochs, self.spe = lr, num_epochs, steps_per_epoch

    def lr(self, step: int) -> float:
        e = min(step // self.spe, self.epochs - 1)
        return 0.5 * self.base * (1 + math.cos(math.pi * e / self.epochs))


_EXP_KWARGS = {"momentum_correction", "init_velocity", "rescale_above", "weight_decay"}


def _exp_from_cfg(cfg, steps_per_epoch: int, base: Schedule, mode: str, allowed: set[str]):
    """Shared builder: checks the optimizer convention and the scale invariance the theorems need and folds
    ``weight_decay`` (default ``cfg.weight_decay``; ``schedule_kwargs["weight_decay"]`` overrides) into the LR.

    ``cfg.scale_invariant`` must be true (a config without the field counts as not scale-invariant): ``apply``
    treats every trainable parameter as scale-invariant and drops its weight decay, so on an unmodified net the
    BN affine parameters and the last layer would lose their weight decay and get an exponentially growing LR that
    no theorem of Li & Arora covers (they fix BN scale/bias and the last FC layer, Sec. 4)."""
    kw = _check_kwargs(cfg, allowed)
    if getattr(cfg, "optimizer", "sgd") != "sgd" or getattr(cfg, "weight_decay_mode", "coupled") != "coupled" \
            or getattr(cfg, "nesterov", False):
        raise ValueError(f"schedule: {cfg.schedule!r} is derived for torch SGD with coupled L2 and no Nesterov "
                         "(Def. 1.2 of Li & Arora)")
    if not getattr(cfg, "scale_invariant", False):
        raise ValueError(f"scale_invariant: schedule {cfg.schedule!r} needs a scale-invariant model "
                         "(scale_invariant=True): it drops the weight decay of, and grows the LR of, every trainable "
                         "parameter, which is equivalent to weight decay only for scale-invariant ones (Li & Arora Sec. 2)")
    wd = float(kw.get("weight_decay", cfg.weight_decay))
    total = cfg.num_epochs * steps_per_epoch
    return TaperedExponential([base.lr(s) for s in range(total)], wd, cfg.momentum, mode=mode,
                              momentum_correction=kw.get("momentum_correction", True),
                              init_velocity=kw.get("init_velocity", True),
                              rescale_above=kw.get("rescale_above", 2.0 ** 60), steps_per_epoch=steps_per_epoch)


def _step_base(cfg, steps_per_epoch):
    kw = dict(cfg.schedule_kwargs)
    return StepDecay(cfg.lr, cfg.num_epochs * steps_per_epoch, steps_per_epoch,
                     milestones=tuple(kw.get("milestones", (0.5, 0.75))), factor=kw.get("factor", 0.1))


@register_schedule("exp")
def _build_exp(cfg, steps_per_epoch):
    """Thm 2.9: η̃_t = η α^(−2t−1), no weight decay, initial velocity (α−1)θ_0/(αη)."""
    return _exp_from_cfg(cfg, steps_per_epoch, Constant(cfg.lr), "texp", _EXP_KWARGS - {"momentum_correction"})


@register_schedule("texp")
def _build_texp(cfg, steps_per_epoch):
    """Thm 2.12 / Eq. 6 on ``step`` (same ``milestones``/``factor`` options). Exact by default; with
    ``momentum_correction=False, init_velocity=False`` it is Eq. 6 as an LR schedule alone (stock SGD state), the
    variant whose effect Sec. 4 of the paper explores ("ignoring the correction term does not change performance
    much", Sec. 2.3)."""
    return _exp_from_cfg(cfg, steps_per_epoch, _step_base(cfg, steps_per_epoch), "texp",
                         _EXP_KWARGS | {"milestones", "factor"})


@register_schedule("texp++")
def _build_texp_pp(cfg, steps_per_epoch):
    """Thm 2.13 / Eq. 7 on ``step``: exact, no momentum correction."""
    return _exp_from_cfg(cfg, steps_per_epoch, _step_base(cfg, steps_per_epoch), "texp++",
                         {"rescale_above", "weight_decay", "milestones", "factor"})


@register_schedule("texp--")
def _build_texp_mm(cfg, steps_per_epoch):
    """Eq. 8 on ``step``: TEXP without the instant LR decay at phase starts."""
    return _exp_from_cfg(cfg, steps_per_epoch, _step_base(cfg, steps_per_epoch), "texp--",
                         _EXP_KWARGS | {"milestones", "factor"})


@register_schedule("exp_decay")
def _build_exp_decay(cfg, steps_per_epoch):
    """Fig. 4 (orange): the first phase's exponent throughout, with the instant ÷``factor`` LR decays of ``step`` at
    its milestones; no momentum correction. Not equivalent to a weight-decay run."""
    return _exp_from_cfg(cfg, steps_per_epoch, _step_base(cfg, steps_per_epoch), "fixed",
                         {"init_velocity", "rescale_above", "weight_decay", "milestones", "factor"})


@register_schedule("cosine_epoch")
def _build_cosine_epoch(cfg, steps_per_epoch):
    _check_kwargs(cfg, set())
    return EpochCosine(cfg.lr, cfg.num_epochs, steps_per_epoch)


@register_schedule("exp_cosine")
def _build_exp_cosine(cfg, steps_per_epoch):
    """Sec. 4.2: TEXP (Eq. 6, with the momentum correction every epoch) on the per-epoch cosine schedule;
    ``momentum_correction=False, init_velocity=False``: the LR schedule alone, as Sec. 4.2 defines it."""
    return _exp_from_cfg(cfg, steps_per_epoch, EpochCosine(cfg.lr, cfg.num_epochs, steps_per_epoch), "texp",
                         _EXP_KWARGS)
