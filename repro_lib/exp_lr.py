"""Li & Arora, "An Exponential Learning Rate Schedule for Deep Learning", ICLR 2020 (arXiv:1910.07454).

* The maps of Sec. 2 as small functions on algorithm states: ``gd`` (GD_ρ of Sec. 2.1 on (θ, η)),
  ``gd_momentum`` (GD_ρ of Sec. 2.2 on (θ, η, θ', η')), the scalings ``pi1``…``pi4`` (Π₁…Π₄), the
  canonicalization ``canonicalize`` (N of Lemma B.3) and ``compose``.
* Float64 helpers for the exact-equivalence experiments: ``ScaleInvariantMLP`` (a small net whose loss is exactly
  scale-invariant in all trainable weights: BN without ε and without affine, fixed random head), ``make_batches``,
  ``run_sgd`` (``torch.optim.SGD`` driven by a ``repro_lib.schedules`` schedule, recording the weights) and
  ``equivalence_error`` (max over steps of ‖P_s θ_s − θ̃_s‖/‖θ̃_s‖).
* The BN + WD toy of Sec. 3 (``bn_wd_toy``) and the iteration bound of Thm 3.1 (``thm31_iteration_bound``).

Momentum form: the paper's Def. 1.2 is PyTorch's (v ← γv + ∇(L + λ/2‖θ‖²), θ ← θ − ηv), so a state
(θ, η, θ', η') corresponds to PyTorch's (param θ, LR η, momentum buffer v = (θ' − θ)/η').
"""
from __future__ import annotations

import copy
import math
from typing import Callable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

# ------------------------------------------------------------------------------------------------------------
# The maps of Sec. 2 (states are tuples; θ a tensor, η a float)
# ------------------------------------------------------------------------------------------------------------
GradFn = Callable[[torch.Tensor, int], torch.Tensor]  # (θ, t) -> ∇L_t(θ)


def gd(rho: float, grad_fn: GradFn, t: int):
    """GD_ρ^t of Sec. 2.1: (θ, η) ↦ (ρθ − η∇L_t(θ), η). ρ = 1 − λη is GD with weight decay λ, ρ = 1 plain GD."""

    def step(state):
        theta, eta = state
        return rho * theta - eta * grad_fn(theta, t), eta

    return step


def gd_momentum(rho: float, gamma: float, grad_fn: GradFn, t: int):
    """GD_ρ^t of Sec. 2.2: (θ, η, θ', η') ↦ (ρθ + η(γ(θ − θ')/η' − ∇L_t(θ)), η, θ, η)."""

    def step(state):
        theta, eta, theta_b, eta_b = state
        new = rho * theta + eta * (gamma * (theta - theta_b) / eta_b - grad_fn(theta, t))
        return new, eta, theta, eta

    return step


def _scale(i: int, c: float):
    def f(state):
        s = list(state)
        s[i] = c * s[i]
        return tuple(s)

    return f


def pi1(c: float):
    """Π₁^c: scale the current parameters θ by c."""
    return _scale(0, c)


def pi2(c: float):
    """Π₂^c: scale the current LR η by c."""
    return _scale(1, c)


def pi3(c: float):
    """Π₃^c: scale the buffered parameters θ' by c (4-component states only)."""
    return _scale(2, c)


def pi4(c: float):
    """Π₄^c: scale the buffered LR η' by c (4-component states only)."""
    return _scale(3, c)


def canonicalize(state):
    """N of Lemma B.3: (θ, η, θ', η') ↦ (θ, η, θ − (η/η')(θ − θ'), η): same velocity (θ − θ')/η', buffered LR = η."""
    theta, eta, theta_b, eta_b = state
    return theta, eta, theta - (eta / eta_b) * (theta - theta_b), eta


def compose(*maps):
    """compose(F, G, H)(x) = F(G(H(x))), the paper's F ∘ G ∘ H."""

    def f(state):
        for m in reversed(maps):
            state = m(state)
        return state

    return f


def equivalent_scaling(c: float, momentum: bool = True):
    """Π₁^c ∘ Π₂^{c²} (∘ Π₃^c ∘ Π₄^{c²} with momentum): Definitions 2.3 / 2.6."""
    if momentum:
        return compose(pi1(c), pi2(c * c), pi3(c), pi4(c * c))
    return compose(pi1(c), pi2(c * c))


# ------------------------------------------------------------------------------------------------------------
# A small exactly scale-invariant network, float64
# ------------------------------------------------------------------------------------------------------------
class ScaleInvariantMLP(nn.Module):
    """x → W1 → BN → ReLU → W2 → BN → ReLU → fixed head. BN uses batch statistics, no affine, ε = 0, so the loss is
    exactly invariant to scaling W1 and W2 (each, hence jointly): L(cθ) = L(θ) (Lemma 1.3). The head is a buffer
    (fixed, as the last FC of Li & Arora Sec. 4)."""

    def __init__(self, d_in: int = 8, hidden: int = 16, num_classes: int = 4, seed: int = 0,
                 dtype=torch.float64):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w1 = nn.Parameter(torch.randn(hidden, d_in, generator=g, dtype=dtype) / math.sqrt(d_in))
        self.w2 = nn.Parameter(torch.randn(hidden, hidden, generator=g, dtype=dtype) / math.sqrt(hidden))
        self.register_buffer("head", torch.randn(num_classes, hidden, generator=g, dtype=dtype) / math.sqrt(hidden))
        self.scale_invariant_names = ["w1", "w2"]

    @staticmethod
    def _bn(z):
        return (z - z.mean(0)) / z.var(0, unbiased=False).sqrt()

    def forward(self, x):
        z = F.relu(self._bn(x @ self.w1.T))
        z = F.relu(self._bn(z @ self.w2.T))
        return z @ self.head.T


def make_batches(n_batches: int = 8, batch_size: int = 32, d_in: int = 8, num_classes: int = 4, seed: int = 0,
                 dtype=torch.float64):
    """Fixed batches (x, y) of a random teacher task: x ~ N(0, I), y = argmax of a random linear map."""
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(n_batches, batch_size, d_in, generator=g, dtype=dtype)
    teacher = torch.randn(d_in, num_classes, generator=g, dtype=dtype)
    return [(x[i], (x[i] @ teacher).argmax(1)) for i in range(n_batches)]


def flat_params(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters() if p.requires_grad])


def run_sgd(model: nn.Module, batches, steps: int, schedule, *, weight_decay: float = 0.0,
            momentum: float = 0.0, weight_decay_fn: Callable[[int], float] | None = None) -> dict:
    """Train a copy of ``model`` with ``torch.optim.SGD`` (coupled L2, PyTorch momentum form) for ``steps`` steps on
    ``batches`` (step s uses batch s mod len), calling ``schedule.apply(opt, s)`` before each step exactly as
    ``train.fit`` does; ``weight_decay_fn(s)`` (optional) sets a step-dependent weight decay (Thm B.2 runs).

    Returns ``theta`` (steps+1, P) trainable weights after each step (row 0 = initial), ``log2_rescale`` (steps+1,)
    the overflow-rescale exponent k active after each step (the stored weights are 2^−k θ̃), ``lr`` (steps,) the
    LRs used and ``loss`` (steps,)."""
    model = copy.deepcopy(model)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=1.0, momentum=momentum, weight_decay=weight_decay, foreach=True)
    thetas, ks, lrs, losses = [flat_params(model)], [0], [], []
    for s in range(steps):
        opt.zero_grad(set_to_none=True)
        schedule.apply(opt, s)
        if weight_decay_fn is not None:
            for g in opt.param_groups:
                g["weight_decay"] = weight_decay_fn(s)
        x, y = batches[s % len(batches)]
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        thetas.append(flat_params(model))
        ks.append(int(opt.param_groups[0].get("exp_lr_log2_rescale", 0)))
        lrs.append(opt.param_groups[0]["lr"])
        losses.append(loss.item())
    return {"theta": torch.stack(thetas), "log2_rescale": torch.tensor(ks), "lr": torch.tensor(lrs, dtype=torch.float64),
            "loss": torch.tensor(losses, dtype=torch.float64), "model": model}


def equivalence_error(theta_wd: torch.Tensor, theta_exp: torch.Tensor, log_scale: Sequence[float],
                      log2_rescale=None) -> torch.Tensor:
    """Per step s: ‖P_s θ_s − θ̃_s‖ / ‖θ̃_s‖ with P_s = exp(log_scale[s]) (Thm 2.13: θ̃_s = P_s θ_s; Thm 2.9: P_s = α^−s)
    and θ̃_s = 2^{k_s} × the stored exponential-run weights when overflow rescaling was active."""
    p = torch.tensor(list(log_scale), dtype=torch.float64).exp()[:, None]
    exp = theta_exp.to(torch.float64)
    if log2_rescale is not None:
        exp = exp * (2.0 ** log2_rescale.to(torch.float64))[:, None]
    return ((p * theta_wd - exp).norm(dim=1) / exp.norm(dim=1))


def direction_error(model: nn.Module, theta_a: torch.Tensor, theta_b: torch.Tensor) -> torch.Tensor:
    """Per step: the largest ‖θ_a/‖θ_a‖ − θ_b/‖θ_b‖‖ over the trainable tensors (scale-invariant nets: the function is
    a function of these directions only)."""
    sizes = [p.numel() for p in model.parameters() if p.requires_grad]
    errs = []
    for a, b in zip(theta_a.split(sizes, dim=1), theta_b.split(sizes, dim=1)):
        errs.append((a / a.norm(dim=1, keepdim=True) - b / b.norm(dim=1, keepdim=True)).norm(dim=1))
    return torch.stack(errs).amax(0)


# ------------------------------------------------------------------------------------------------------------
# The BN + WD toy of Sec. 3 (Thm 3.1, Appendix B.6)
# ------------------------------------------------------------------------------------------------------------
TOY_CASES = ("wd", "bn", "bn+wd")


def bn_wd_toy(case: str, *, m: int = 10, batch_size: int = 1000, lr: float = 0.1, weight_decay: float = 0.1,
              steps: int = 2000, n_runs: int = 8, w0_norm: float = 1.0, seed: int = 0) -> dict:
    """SGD without momentum on logistic regression, x ~ N(0, I_m), y = sign(x₁), last layer only (Sec. 3).

    ``case``: ``"wd"`` (u = xᵀw, weight decay λ; Case 1), ``"bn"`` (u = xᵀw/‖w‖, the BN layer with scale 1 and bias 0
    in the large-batch form the paper analyses, no weight decay; Case 2), ``"bn+wd"`` (both; Case 3, Thm 3.1).
    Update (App. B.6): w ← (1 − λη)w − η (1/B) Σ_b ∇_w ln(1 + exp(−u_b y_b)); ``n_runs`` independent runs batched.

    Returns ``error`` (steps+1, n_runs): the population training error arccos(w₁/‖w‖)/π (Sec. 3), ``angle``
    ∠(e₁, w) in radians, and ``norm`` ‖w‖."""
    if case not in TOY_CASES:
        raise ValueError(f"case: must be one of {TOY_CASES}, got {case!r}")
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n_runs, m, generator=g, dtype=torch.float64)
    w = w0_norm * w / w.norm(dim=1, keepdim=True)
    wd = weight_decay if case != "bn" else 0.0
    bn = case != "wd"
    angles, norms = [], []

    def record(w):
        angles.append(torch.arccos((w[:, 0] / w.norm(dim=1)).clamp(-1, 1)))
        norms.append(w.norm(dim=1))

    record(w)
    for _ in range(steps):
        x = torch.randn(n_runs, batch_size, m, generator=g, dtype=torch.float64)
        y = torch.sign(x[..., 0])
        nrm = w.norm(dim=1, keepdim=True)
        u = torch.einsum("rbm,rm->rb", x, w / nrm if bn else w)
        coef = -y * torch.sigmoid(-u * y)  # d/du ln(1 + exp(−uy))
        grad = torch.einsum("rb,rbm->rm", coef, x) / batch_size
        if bn:  # ∇_w of u = xᵀw/‖w‖: (I − ŵŵᵀ) x / ‖w‖  (Lemma 1.3: orthogonal to w)
            wh = w / nrm
            grad = (grad - (grad * wh).sum(1, keepdim=True) * wh) / nrm
        w = (1 - lr * wd) * w - lr * grad
        record(w)
    angle = torch.stack(angles)
    return {"error": angle / math.pi, "angle": angle, "norm": torch.stack(norms)}


def thm31_iteration_bound(lr: float, weight_decay: float, eps: float, w_norm: float, batch_size: int, m: int,
                          delta: float) -> float:
    """Thm 3.1: with BN and WD, from any iteration T₀ the angle ∠(e₁, w_t) exceeds ``eps`` (training error > eps/π, the
    proof's convention in App. B.6) at least once within
        T₁ + T₂ = 1/(2(ηλ − 2ε²)) · ln(64‖w_{T₀}‖² ε √B / (η √(m − 2))) + 9 ln(1/δ)
    consecutive iterations, with probability 1 − δ. Requires ηλ > 2ε² and m ≥ 3."""
    if not lr * weight_decay > 2 * eps * eps:
        raise ValueError(f"eps: Thm 3.1 needs lr*weight_decay > 2 eps^2, got {lr * weight_decay} <= {2 * eps * eps}")
    if m < 3:
        raise ValueError(f"m: Thm 3.1 needs m >= 3, got {m}")
    t1 = math.log(64 * w_norm ** 2 * eps * math.sqrt(batch_size) / (lr * math.sqrt(m - 2))) / (
        2 * (lr * weight_decay - 2 * eps * eps))
    return max(t1, 0.0) + 9 * math.log(1 / delta)


def longest_run_below(error: torch.Tensor, threshold: float) -> torch.Tensor:
    """Per run (column): the longest number of consecutive iterations with ``error`` ≤ ``threshold``."""
    below = (error <= threshold).to(torch.int64)
    best = torch.zeros(error.shape[1], dtype=torch.int64)
    cur = torch.zeros_like(best)
    for row in below:
        cur = (cur + 1) * row
        best = torch.maximum(best, cur)
    return best
