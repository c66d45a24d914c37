"""Toy problems and norm-growth identities of Heo et al., *AdamP: Slowing Down the Slowdown for Momentum
Optimizers on Scale-invariant Weights* (ICLR 2021), and the |cos(grad, w)| statistics of Appendix C.

* ``toy2d`` — Fig. 1 / Appendix B, Eq. B.1: maximise cos(w, w*) with w* = (0, −1) from w0 = (0.001, 1).
* ``rosenbrock3d`` — Fig. 3 / Fig. H.1 / Appendix B, Eq. B.2: the scale-invariant 3D Rosenbrock;
  ``rosenbrock_search`` / ``rosenbrock_budgets`` (the paper's learning-rate search, at one or several iteration
  budgets), ``rosenbrock_cos_score`` (is AdamP's projection on along a run), ``PrintedAdamP`` (Algorithm 2 exactly
  as printed: no bias correction).
* ``lemma_check`` / ``norm_growth_ratio`` — Lemma 2.1 (Eq. 6), Lemma 2.2 (Eq. 8), Corollary 2.3 (Eq. 9).
* ``geodesic_residual`` — Proposition 3.1.
* ``cos_statistics`` / ``detection_table`` — Appendix C and Table B.1 (δ sensitivity) on a real network.

Every optimizer here is the real one (``torch.optim.SGD/Adam/AdamW`` and ``repro_lib.optim``'s SGDP/AdamP) run
on a (1, d) parameter in float64, so the toys exercise the same code as training; the one addition is
``PrintedAdamP``, Algorithm 2 as the paper prints it, to show what Adam's bias correction changes on the toy.
Choices where the paper is silent are stated in each docstring. The paper's own numbers for the toys are the
``PAPER_*`` constants below, each with its place in the paper.
"""
from __future__ import annotations

import itertools
import math
import os
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np
import pandas as pd
import torch
import torch.nn as nn

from ...optim.adamp import AdamP, project_, scale_invariance_test
from ...optim.sgdp import SGDP
from ...store import load_torch_checkpoint, save_torch_atomic

# ----------------------------------------------------------------------------------------------------- the paper's
#: Appendix B (Fig. 1): "maximum norm 2.93 when momentum is 0.9, and 27.87 when momentum is 0.99" (momentum GD, Eq. B.1)
PAPER_FIG1_MAX_NORM = {0.9: 2.93, 0.99: 27.87}
#: Sec. 3.2 (Fig. 3): the radius r on the 3D Rosenbrock from r = 1.0: "r = 1.0 → 3.2" (momentum GD), "1.0 → 2.53"
#: (momentum GD + WD, its initial surge), "1.0 → 1.12" (SGDP)
PAPER_FIG3_R = {"sgd": 3.2, "sgd_wd": 2.53, "sgdp": 1.12}
#: Appendix B: "we have exhaustively searched the optimal initial learning rates between 0.001 and 0.1" (Figs 3, H.1)
PAPER_LR_RANGE = (1e-3, 0.1)
#: Appendix B: "For all optimizers, we set the momentum to 0.9"
PAPER_MOMENTUM = 0.9
#: Appendix C: 99 % intervals of |cos(grad, w)| (Eq. 11) during ImageNet ResNet-18 training with AdamP, for
#: scale-invariant (True) and scale-variant (False) weights
PAPER_COS_INTERVALS = {True: (5.5e-10, 4.4e-6), False: (0.0028, 0.5660)}

# ----------------------------------------------------------------------------------------------------- optimizers
TOY_OPTIMIZERS = ("gd", "sgd", "sgd_wd", "sgdp", "sgdp_inplace", "adam", "adamw", "adamp", "adam_printed",
                  "adamp_printed")


class PrintedAdamP(torch.optim.Optimizer):
    """Algorithm 2 of Heo et al. (2021) exactly as printed, for the toys: m_t = β1 m_{t−1} + (1 − β1) g_t,
    v_t = β2 v_{t−1} + (1 − β2) g_t², p_t = m_t / (√v_t + ε), q_t = Π_w(p_t) (Eq. 10) where Eq. 11 (with |cos|, on
    the raw gradient, channel-wise then layer-wise, ``optim.adamp.scale_invariance_test``) detects a scale-invariant
    weight and ``project`` is set, else q_t = p_t; w_{t+1} = w_t − η q_t. No bias correction (the authors' code,
    ``optim.adamp.AdamP``, and torch's Adam divide m_t by 1 − β1^t and v_t by 1 − β2^t) and no weight decay.
    ``project=False`` is Adam printed the same way. With bias correction the first steps are ≈ η per coordinate;
    without it the first is ≈ η·(1 − β1)/√(1 − β2) ≈ 3.2 η."""

    def __init__(self, params, lr: float, betas=(0.9, 0.999), eps: float = 1e-8, delta: float = 0.1,
                 project: bool = True):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, delta=delta, project=project))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            (b1, b2), eps = group["betas"], group["eps"]
            for w in group["params"]:
                if w.grad is None:
                    continue
                st = self.state[w]
                if not st:
                    st["m"], st["v"] = torch.zeros_like(w), torch.zeros_like(w)
                g = w.grad
                st["m"].mul_(b1).add_(g, alpha=1 - b1)
                st["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
                q = st["m"] / (st["v"].sqrt() + eps)
                if group["project"] and w.ndim > 1:
                    hit = scale_invariance_test([w], [g], group["delta"], eps)["hits"][0]
                    if hit:
                        project_(q, w, hit, eps)
                w.add_(q, alpha=-group["lr"])


def make_optimizer(name: str, params, lr: float, momentum: float = 0.9, weight_decay: float = 0.0):
    """The toy optimizers. ``gd``: no momentum; ``sgd``: torch SGD with (PyTorch-form) momentum; ``sgd_wd``:
    the same with coupled L2 ``weight_decay`` (torch's convention; the paper's "momentum GD + WD" does not say
    which form); ``sgdp``: SGDP as the paper's Algorithm 1 (the step is the projected copy q_t = Π(p_t), the
    momentum buffer p_t is kept whole; ``project_momentum_buffer=False``); ``sgdp_inplace``: the authors' code
    (the buffer itself is projected; ``project_momentum_buffer=True``) — the two differ here because the toys
    use heavy-ball momentum without Nesterov; ``adam``/``adamw``/``adamp``: β1 = ``momentum``, β2 = 0.999,
    AdamW/AdamP decoupled decay ×lr; ``adam_printed``/``adamp_printed``: :class:`PrintedAdamP` (Algorithm 2 as
    printed, no bias correction; no weight decay). δ = 0.1, wd_ratio = 0.1 as in the paper."""
    betas = (momentum, 0.999)
    if name == "gd":
        return torch.optim.SGD(params, lr=lr)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum)
    if name == "sgd_wd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if name in ("sgdp", "sgdp_inplace"):
        return SGDP(params, lr=lr, momentum=momentum, weight_decay=weight_decay,
                    project_momentum_buffer=name == "sgdp_inplace")
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, betas=betas)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay)
    if name == "adamp":
        return AdamP(params, lr=lr, betas=betas, weight_decay=weight_decay)
    if name in ("adam_printed", "adamp_printed"):
        if weight_decay:
            raise ValueError(f"weight_decay: {name!r} (Algorithm 2 as printed) has no weight decay")
        return PrintedAdamP(params, lr=lr, betas=betas, project=name == "adamp_printed")
    raise ValueError(f"optimizer: unknown toy optimizer {name!r}; known: {TOY_OPTIMIZERS}")


def _run(loss_fn: Callable[[torch.Tensor], torch.Tensor], w0, opt_name: str, lr: float, iters: int,
         momentum: float, weight_decay: float = 0.0, linear_decay: bool = False) -> pd.DataFrame:
    """Optimise ``loss_fn(w)`` from ``w0`` (float64, shape (1, d)); one row per iterate (t = 0 … iters) with
    the coordinates, the norm r and the loss. ``linear_decay``: lr_t = lr·(1 − t/iters)."""
    w = torch.tensor([list(w0)], dtype=torch.float64, requires_grad=True)
    opt = make_optimizer(opt_name, [w], lr, momentum, weight_decay)
    traj = np.empty((iters + 1, w.shape[1]))
    losses = np.empty(iters + 1)
    for t in range(iters + 1):
        loss = loss_fn(w[0])
        traj[t] = w.detach().numpy()[0]
        losses[t] = loss.item()
        if t == iters or not math.isfinite(losses[t]):
            traj, losses = traj[:t + 1], losses[:t + 1]
            break
        if linear_decay:
            for g in opt.param_groups:
                g["lr"] = lr * (1 - t / iters)
        opt.zero_grad()
        loss.backward()
        opt.step()
    df = pd.DataFrame(traj, columns=[f"w{i}" for i in range(traj.shape[1])])
    df.insert(0, "t", np.arange(len(df)))
    df["r"] = np.linalg.norm(traj, axis=1)
    df["loss"] = losses
    return df


# ----------------------------------------------------------------------------------------------------- 2D toy
W_STAR_2D = (0.0, -1.0)
W0_2D = (0.001, 1.0)


def toy2d_loss(w: torch.Tensor) -> torch.Tensor:
    """Eq. B.1 as the text describes it, "maximisation of the cosine similarity between w and w*": the loss is
    −ŵ·ŵ* (Eq. B.1 as printed reads min ŵ·ŵ*, which w0 = (0.001, 1) would already solve). Scale-invariant."""
    ws = torch.tensor(W_STAR_2D, dtype=w.dtype)
    return -(w @ ws) / (w.norm() * ws.norm())


def toy2d(opt_name: str, lr: float, iters: int, momentum: float = 0.9) -> pd.DataFrame:
    """Fig. 1: run one optimizer on Eq. B.1 from w0 = (0.001, 1), constant lr (the paper gives no lr or
    iteration count; lr = 0.02 reproduces its max norm 2.93 at momentum 0.9)."""
    return _run(toy2d_loss, W0_2D, opt_name, lr, iters, momentum)


def toy2d_table(lr: float, iters: int, momenta=(0.9, 0.95, 0.99),
                projected=("sgdp", "sgdp_inplace")) -> pd.DataFrame:
    """Max weight norm and final cos(w, w*) for GD, GD+momentum at each momentum, and each ``projected`` method
    (SGDP as Algorithm 1, and the authors' in-place variant) at each momentum."""
    rows = []
    runs = [("gd", 0.0)] + [(name, m) for name in ("sgd",) + tuple(projected) for m in momenta]
    for name, m in runs:
        df = toy2d(name, lr, iters, m)
        hit = np.nonzero(-df["loss"].to_numpy() > 0.99)[0]
        rows.append(dict(method=name, momentum=m, lr=lr, iters=iters, max_norm=df["r"].max(),
                         final_cos=-df["loss"].iloc[-1], iters_to_cos_0_99=int(hit[0]) if len(hit) else None))
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------- 3D Rosenbrock
ROSENBROCK_C = 1.5
ROSENBROCK_START = (-2.0, 2.0)  # (cψ, cφ) on r = 1
ROSENBROCK_OPT = (1.0, 1.0)


def to_angles(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. B.2's spherical transform (ψ, φ) of (x, y, z): φ = asin(y/r) and ψ = atan(x/z) on the hemisphere
    z > 0 (the printed ``cos⁻¹(x/z)`` cannot be right: x/z is unbounded; atan keeps ψ in (−π/2, π/2) as the text
    requires). Both depend only on the direction of w (scale-invariant)."""
    x, y, z = w[..., 0], w[..., 1], w[..., 2]
    r = torch.sqrt(x * x + y * y + z * z)
    return torch.atan2(x, z), torch.asin((y / r).clamp(-1, 1))


def from_angles(psi: float, phi: float, r: float = 1.0) -> tuple[float, float, float]:
    """Inverse of ``to_angles``: (x, y, z) = r (cos φ sin ψ, sin φ, cos φ cos ψ)."""
    return (r * math.cos(phi) * math.sin(psi), r * math.sin(phi), r * math.cos(phi) * math.cos(psi))


def rosenbrock_h(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """h(a, b) = (1 − a)² + 300 (b − a²)² (Sec. 3.2), evaluated at (a, b) = (cψ, cφ)."""
    return (1 - a) ** 2 + 300 * (b - a * a) ** 2


def rosenbrock_loss(w: torch.Tensor, c: float = ROSENBROCK_C) -> torch.Tensor:
    """Eq. B.2: h̃(r, ψ, φ) = h(cψ, cφ) optimised in Cartesian coordinates; minimum 0 at (cψ, cφ) = (1, 1)."""
    psi, phi = to_angles(w)
    return rosenbrock_h(c * psi, c * phi)


def rosenbrock_w0(c: float = ROSENBROCK_C) -> tuple[float, float, float]:
    return from_angles(ROSENBROCK_START[0] / c, ROSENBROCK_START[1] / c, 1.0)


def rosenbrock3d(opt_name: str, lr: float, iters: int, momentum: float = 0.9, weight_decay: float = 0.0,
                 c: float = ROSENBROCK_C) -> pd.DataFrame:
    """Fig. 3 / H.1: one run from (cψ, cφ) = (−2, 2) on r = 1, lr decayed linearly per iteration to 0 (the
    paper's "decayed linearly at every iteration"; the end point is our choice). Adds cψ, cφ columns."""
    df = _run(lambda w: rosenbrock_loss(w, c), rosenbrock_w0(c), opt_name, lr, iters, momentum, weight_decay,
              linear_decay=True)
    psi, phi = to_angles(torch.tensor(df[["w0", "w1", "w2"]].to_numpy()))
    df["c_psi"], df["c_phi"] = c * psi.numpy(), c * phi.numpy()
    return df


def rosenbrock_search(opt_names: Iterable[str], lrs: Iterable[float], iters: int, momentum: float = 0.9,
                      weight_decays: Iterable[float] = (0.0,), c: float = ROSENBROCK_C) -> pd.DataFrame:
    """The paper's "exhaustively searched the optimal initial learning rates between 0.001 and 0.1": final
    loss of every (optimizer, lr, weight decay); weight decay only for the ``*_wd``/``adamw`` and projected
    methods' decay variants (a non-decay method is run once with wd = 0). One row per run."""
    rows = []
    for name in opt_names:
        wds = list(weight_decays) if name in ("sgd_wd", "adamw") else [0.0]
        for wd in wds:
            for lr in lrs:
                df = rosenbrock3d(name, lr, iters, momentum, wd, c)
                final = df["loss"].iloc[-1] if len(df) == iters + 1 else float("inf")
                rows.append(dict(method=name, lr=lr, weight_decay=wd, final_loss=final, r_max=df["r"].max(),
                                 r_final=df["r"].iloc[-1]))
    return pd.DataFrame(rows)


def rosenbrock_budgets(opt_names: Iterable[str], lrs: Iterable[float], budgets: Iterable[int],
                       momentum: float = 0.9, weight_decays: Iterable[float] = (0.0,),
                       c: float = ROSENBROCK_C) -> pd.DataFrame:
    """:func:`rosenbrock_search` at each iteration budget of ``budgets`` (the paper does not give its iteration
    count, and with the lr decayed linearly to 0 over the run the budget changes every step), one row per run with
    its ``iters``."""
    lrs, weight_decays = list(lrs), list(weight_decays)
    return pd.concat([rosenbrock_search(opt_names, lrs, n, momentum, weight_decays, c).assign(iters=n)
                      for n in budgets], ignore_index=True)


def best_runs(search: pd.DataFrame, by=("method",)) -> pd.DataFrame:
    """The best (lowest final loss) lr / weight decay per method (per ``by``: e.g. ``("method", "iters")`` for
    :func:`rosenbrock_budgets`)."""
    return search.loc[search.groupby(list(by))["final_loss"].idxmin()].reset_index(drop=True)


def rosenbrock_cos_score(run: pd.DataFrame, c: float = ROSENBROCK_C) -> float:
    """The largest Eq. 11 statistic |cos(∇h(w_t), w_t)|·√d (d = 3) over the iterates of a :func:`rosenbrock3d` run:
    below δ (0.1), AdamP's test projects every step. Eq. B.2 depends on the direction of w only, so its gradient
    is orthogonal to w and the statistic sits at float64 rounding."""
    w = torch.tensor(run[["w0", "w1", "w2"]].to_numpy(), dtype=torch.float64, requires_grad=True)
    rosenbrock_loss(w, c).sum().backward()
    g, w = w.grad, w.detach()
    cos = (g * w).sum(1).abs() / (g.norm(dim=1).clamp_min(1e-300) * w.norm(dim=1))
    return float(cos.max()) * math.sqrt(w.shape[1])


def rosenbrock_start_grad_norm(c: float = ROSENBROCK_C) -> float:
    """|∇h̃| at the start (cψ, cφ) = (−2, 2) on r = 1: why the SGD family needs lrs far below the paper's range
    (one step moves w by lr·|∇h̃|)."""
    w = torch.tensor(rosenbrock_w0(c), dtype=torch.float64, requires_grad=True)
    rosenbrock_loss(w, c).backward()
    return float(w.grad.norm())


# ----------------------------------------------------------------------------------------------------- lemmas
def scale_invariant_quadratic(d: int, seed: int = 0) -> Callable[[torch.Tensor], torch.Tensor]:
    """A synthetic scale-invariant objective f(w) = ŵᵀAŵ (A random symmetric, float64): f(cw) = f(w), so
    w·∇f(w) = 0 (Eq. 4)."""
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(d, d, generator=g, dtype=torch.float64)
    a = (m + m.T) / 2

    def f(w: torch.Tensor) -> torch.Tensor:
        u = w / w.norm()
        return u @ a @ u

    return f


def lemma_check(f: Callable[[torch.Tensor], torch.Tensor], w0: torch.Tensor, lr: float, beta: float,
                iters: int, project: bool = False) -> pd.DataFrame:
    """Run Eq. 7 (p_t = β p_{t−1} + ∇f(w_t), w_{t+1} = w_t − η p_t; β = 0 is vanilla GD, Eq. 3) on a
    scale-invariant f, or, with ``project``, Algorithm 1 (the step is q_t = Π_{w_t}(p_t), Eq. 10–11, while the
    momentum p_t is kept whole), and record per step |w_{t+1}|² together with the right-hand sides of Eq. 6 /
    Eq. 12 (|w_t|² + η²|step_t|², step = p_t or q_t), Eq. 8 (|w_t|² + η²|p_t|² + 2η² Σ_{k<t} β^{t−k} |p_k|²;
    momentum only) and Eq. 12's bound |w_t|² + η²|p_t|²."""
    w = w0.clone().to(torch.float64)
    p = torch.zeros_like(w)
    sq = []  # |p_k|²
    rows = []
    for t in range(iters):
        wg = w.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(f(wg), wg)
        p = beta * p + g
        step = p - (w @ p) * w / (w @ w) if project else p
        sq.append(float(p @ p))
        w_next = w - lr * step
        n2 = float(w @ w)
        acc = sum(beta ** (t - k) * sq[k] for k in range(t))
        rows.append(dict(t=t, norm2_next=float(w_next @ w_next), eq6_rhs=n2 + lr ** 2 * float(step @ step),
                         eq8_rhs=n2 + lr ** 2 * sq[t] + 2 * lr ** 2 * acc, eq12_bound=n2 + lr ** 2 * sq[t],
                         w_dot_p=float(w @ p), w_dot_p_pred=-lr * acc))
        w = w_next
    return pd.DataFrame(rows)


def norm_growth_ratio(update_sq_norms: Iterable[float], beta: float) -> np.ndarray:
    """Corollary 2.3 / Eq. A.6–A.7: with the same update norms A_k = |p_k|² for GD and GD+momentum,
    (|w_t^GDM|² − |w_0|²) / (|w_t^GD|² − |w_0|²) = 1 + 2 Σ_k (Σ_{l=1}^{t−1−k} β^l) A_k / Σ_k A_k, for t = 1, 2, …
    (tends to 1 + 2β/(1−β) when Σ A_k < ∞)."""
    a = np.asarray(list(update_sq_norms), dtype=np.float64)
    # C_t = Σ_{k<t} (Σ_{l=1}^{t−1−k} β^l) A_k obeys C_{t+1} = C_t + β D_t with D_t = Σ_{k<t} β^{t−1−k} A_k,
    # D_{t+1} = β D_t + A_t: O(T) instead of the double sum.
    out = np.empty(len(a))
    c = d = s = 0.0
    for t in range(len(a)):
        c, d, s = c + beta * d, beta * d + a[t], s + a[t]
        out[t] = 1 + 2 * c / s
    return out


def geodesic_residual(w: torch.Tensor, p: torch.Tensor, lr: float) -> float:
    """Proposition 3.1: distance of ŵ^p_{t+1} (after the projected step w − η Π_w(p)) from span(w, p), i.e.
    from the great circle through ŵ_t and ŵ^o_{t+1}; 0 up to rounding."""
    w, p = w.to(torch.float64).flatten(), p.to(torch.float64).flatten()
    q = p - (w @ p) * w / (w @ w)
    wp = w - lr * q
    u = wp / wp.norm()
    basis = torch.linalg.qr(torch.stack([w, p], 1)).Q
    return float((u - basis @ (basis.T @ u)).norm())


def is_on_geodesic_arc(w: torch.Tensor, p: torch.Tensor, lr: float) -> bool:
    """Whether ŵ^p lies on the arc between ŵ_t and ŵ^o_{t+1} (same side, shorter angle): the projected step
    moves the same way on the sphere, only by a different amount (Sec. 3.1)."""
    w, p = w.to(torch.float64).flatten(), p.to(torch.float64).flatten()
    u0 = w / w.norm()
    uo = (w - lr * p) / (w - lr * p).norm()
    q = p - (w @ p) * w / (w @ w)
    up = (w - lr * q) / (w - lr * q).norm()
    ang = lambda a, b: float(torch.arccos((a @ b).clamp(-1, 1)))  # noqa: E731
    return abs(ang(u0, up) + ang(up, uo) - ang(u0, uo)) < 1e-9 or abs(ang(u0, uo) + ang(uo, up) - ang(u0, up)) < 1e-9


# ----------------------------------------------------------------------------------------------------- real networks
def _cos_rows(step: int, named, si: set, extra: dict | None = None) -> list[dict]:
    """The Eq. 11 statistics of the gradients currently in ``named`` [(name, param)], one row per tensor."""
    ps = [p.detach() for _, p in named]
    res = scale_invariance_test(ps, [p.grad for _, p in named], delta=0.1, eps=1e-8)
    rows = []
    for k, (n, p) in enumerate(named):
        d = p[0].numel()
        rows.append(dict(step=step, **(extra or {}), name=n, scale_invariant=n in si, rows=p.shape[0], row_len=d,
                         cos_channel_max=float(res["cos_channel_max"][k]), cos_layer=float(res["cos_layer"][k]),
                         # Eq. 11's thresholds are δ/√d: the statistic to compare with δ is |cos|·√d
                         channel_score=float(res["cos_channel_max"][k]) * math.sqrt(d),
                         layer_score=float(res["cos_layer"][k]) * math.sqrt(p.numel())))
    return rows


def cos_statistics(model: nn.Module, scale_invariant_names: Iterable[str], loss_fn, batches,
                   step_fn=None) -> pd.DataFrame:
    """Appendix C: for each batch, the |cos(grad, w)| of every ``ndim > 1`` parameter — channel-wise maximum
    and layer-wise — as Eq. 11 tests them, labelled scale-invariant or not by ``scale_invariant_names``
    (e.g. ``model.scale_invariant_names`` of the model registry). ``step_fn()`` (e.g. an optimizer step) runs
    after each measurement, so that the statistics follow training. One row per (step, parameter)."""
    si = set(scale_invariant_names)
    named = [(n, p) for n, p in model.named_parameters() if p.ndim > 1 and p.requires_grad]
    rows = []
    for step, (x, y) in enumerate(batches):
        model.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        rows += _cos_rows(step, named, si)
        if step_fn is not None:
            step_fn()
    return pd.DataFrame(rows)


def epoch_batches(epoch: Callable[[int], Iterable], steps_per_epoch: int) -> Callable[[int], Iterator]:
    """A resumable batch stream for :func:`adamp_cos_run` from a per-epoch source whose batches depend only on the
    epoch (e.g. ``data.TensorBatches(...).epoch``, seeded by (seed, epoch)): ``stream(start)`` yields the batches
    of global steps ``start, start + 1, …`` — epoch ``start // steps_per_epoch`` from its
    ``start % steps_per_epoch``-th batch on, then the following epochs without end."""
    if steps_per_epoch < 1:
        raise ValueError(f"steps_per_epoch: must be >= 1, got {steps_per_epoch}")

    def stream(start: int = 0) -> Iterator:
        ep, skip = divmod(start, steps_per_epoch)
        while True:
            yield from itertools.islice(epoch(ep), skip, None)
            ep, skip = ep + 1, 0

    return stream


def _rng_state() -> dict:
    return dict(cpu=torch.get_rng_state(),
                cuda=torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["cpu"])
    if state["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def adamp_cos_run(model: nn.Module, batches, steps: int, lr: float = 1e-3, weight_decay: float = 0.0,
                  delta: float = 0.1, schedule: str = "constant", record_every: int = 1, record_from: int = 0,
                  progress: bool = False, checkpoint: str | os.PathLike | None = None,
                  checkpoint_every: int = 1000, run_key: dict | None = None,
                  keep_weights: bool = True) -> pd.DataFrame:
    """Appendix C / Table B.1 measurement ("Based on ImageNet training with ResNet18"): train ``model`` with
    AdamP (β = (0.9, 0.999), ε = 1e-8, decoupled wd ×lr as torch's AdamW: Table 2's "wd 1e-4" at lr 1e-3 is
    ``weight_decay=0.1``) for ``steps`` batches of (x, y), the LR ``schedule`` ("constant", or "cosine":
    per-iteration cosine annealing to 0 over the ``steps``, Sec. 4.1 / Appendix E.2) and record the
    ``cos_statistics`` of every ``ndim > 1`` tensor on the gradient of every ``record_every``-th step from step
    ``record_from`` on (and the last one) before that step is taken (labels from ``model.scale_invariant_names``).
    The paper does not say at which steps its statistics were taken; sampling at regular intervals is our reading
    (over the whole run at ImageNet scale; a short run records only its later part, ``record_from``, since near
    chance the scale-variant gradients are still nearly random in direction). Rows carry the step and its LR.

    ``batches``: an iterable of (x, y), read lazily (ImageNet batches are not all kept in memory), or a callable
    ``batches(start)`` returning the batches of steps ``start, start + 1, …`` (:func:`epoch_batches`,
    :func:`imagefolder_batches` with ``start_step``); only the callable form can resume.

    ``checkpoint`` (a file path; needs callable ``batches``): nothing lost. Every ``checkpoint_every`` steps the
    step reached, model and optimizer state dicts, the rows recorded so far and the torch (CPU and CUDA) RNG
    states are written there atomically (temporary file, fsync, ``os.replace``); a call that finds the file
    resumes from it, so a killed run loses at most ``checkpoint_every`` steps and the resumed run's rows and
    weights are those of an uninterrupted run: the batches of a step are a function of the step, the schedule is
    pure, and the RNG state (unused by the ResNets here, used by e.g. dropout) is restored — bit-identical where
    the kernels are deterministic (CPU; on CUDA, cuDNN's nondeterministic backward already makes two
    uninterrupted runs differ in the last bits). When the run finishes the file is replaced (atomically) by the
    finished record — the rows and the final model state dict, no optimizer state — and a later call returns
    those rows and loads those weights into ``model`` without training. ``keep_weights=False`` leaves the
    weights out of the finished record (the rows only, a tenth of the size for the cpu model) for a caller that
    reads only the statistics; a later call then returns the rows and leaves ``model`` as it is. The file
    records the run's arguments plus ``run_key`` (what the caller's model and data depend on, e.g. profile sizes,
    seed, dataset); a file of another run raises ``ValueError`` rather than be overwritten or reused. A
    ``batches`` that ends before ``steps`` raises ``ValueError`` (nothing short is recorded as finished)."""
    from ...schedules import Constant, Cosine

    if schedule not in ("constant", "cosine"):
        raise ValueError(f"schedule: {schedule!r} is not 'constant' or 'cosine'")
    if steps < 1 or record_every < 1 or checkpoint_every < 1:
        raise ValueError(f"steps ({steps}), record_every ({record_every}) and checkpoint_every "
                         f"({checkpoint_every}) must be >= 1")
    if not 0 <= record_from < steps:
        raise ValueError(f"record_from: must be in [0, steps = {steps}), got {record_from}")
    if checkpoint is not None and not callable(batches):
        raise ValueError("checkpoint: resuming needs batches as a callable start_step -> iterable "
                         "(epoch_batches, imagefolder_batches(start_step=...)), got a plain iterable")
    model.train()
    opt = AdamP(model.parameters(), lr=lr, weight_decay=weight_decay, delta=delta)
    sched = Cosine(lr, steps) if schedule == "cosine" else Constant(lr)
    si = set(model.scale_invariant_names)
    named = [(n, p) for n, p in model.named_parameters() if p.ndim > 1 and p.requires_grad]
    key = dict(steps=steps, lr=lr, weight_decay=weight_decay, delta=delta, schedule=schedule,
               record_every=record_every, **({"record_from": record_from} if record_from else {}),
               params=[(n, tuple(p.shape)) for n, p in model.named_parameters()],
               run_key=run_key)
    rows, start = [], 0
    path = Path(checkpoint) if checkpoint is not None else None
    state = load_torch_checkpoint(path, "cpu") if path is not None else None
    if state is not None:
        if state["key"] != key:
            diff = sorted(k for k in key if state["key"].get(k) != key[k])
            raise ValueError(f"checkpoint: {path} belongs to another run (differs in {diff}); delete it or pass "
                             f"another path")
        if "model" in state:  # a finished record written with keep_weights=False has none
            model.load_state_dict(state["model"])
        if state["finished"]:
            return pd.DataFrame(state["rows"])
        opt.load_state_dict(state["optimizer"])
        _set_rng_state(state["rng"])
        rows, start = state["rows"], state["step"]
        if progress:
            print(f"resumed from {path} at step {start}/{steps}", flush=True)
    elif path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    stream = batches(start) if callable(batches) else batches
    taken = itertools.islice(iter(stream), steps - start)
    done = start
    for step, (x, y) in enumerate(taken, start):
        sched.apply(opt, step)
        model.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        if step >= record_from and ((step - record_from) % record_every == 0 or step == steps - 1):
            rows += _cos_rows(step, named, si, dict(lr=opt.param_groups[0]["lr"]))
            if progress and step % (record_every * 100) == 0:
                print(f"step {step}/{steps}", flush=True)
        opt.step()
        done = step + 1
        if path is not None and done % checkpoint_every == 0 and done < steps:
            save_torch_atomic(path, dict(finished=False, key=key, step=done, model=model.state_dict(),
                                    optimizer=opt.state_dict(), rows=rows, rng=_rng_state()))
    if done < steps:
        raise ValueError(f"batches: ran out after {done} of {steps} steps")
    if path is not None:
        weights = dict(model=model.state_dict()) if keep_weights else {}
        save_torch_atomic(path, dict(finished=True, key=key, step=steps, rows=rows, **weights))
    return pd.DataFrame(rows)


# Table B.1 / Appendix C measurement sizes per profile (data, not branches). ``source``: "tensors" reads a
# repro_lib.data dataset into memory (CIFAR ResNet-18); "imagefolder" streams ImageNet with the paper's model
# (timm ResNet-18, 224 px, RandomResizedCrop + flip) as the paper measured it. Every profile trains with Table 2's
# AdamP recipe (Appendix E.2: lr 1e-3, wd 1e-4 in AdamW notation = torch weight_decay 0.1, batch 256 on ImageNet,
# cosine annealing over the whole run; E.2's 1e-4, not the 1e-6 of the Fig. F.4 caption, as ``papers.adamp.imagenet``'s
# default ``wd_source="E.2"``); they differ in data, model width and the length of the run, which the cosine is
# compressed to. ``paper``: 100 epochs of ImageNet-1k = 100 × ⌈1,281,167 / 256⌉ = 500,500 steps (the
# loader keeps the last, short batch of each epoch), statistics every 250 steps (2,003 samples per tensor).
_ADAMP_RECIPE = dict(lr=1e-3, weight_decay=0.1, schedule="cosine")
DELTA_SIZES = {
    "smoke": dict(source="tensors", model="resnet18", synthetic=True, width=4, image_size=32, n=256,
                  batch_size=32, steps=4, record_every=1, record_from=0, seeds=(0,), **_ADAMP_RECIPE),
    "cpu": dict(source="tensors", model="resnet18", synthetic=False, width=16, image_size=32, n=5000,
                batch_size=128, steps=400, record_every=1, record_from=200, seeds=(0, 1, 2), **_ADAMP_RECIPE),
    "gpu": dict(source="imagefolder", model="resnet18_imagenet", synthetic=False, width=64, image_size=224,
                n=0, batch_size=256, steps=5005, record_every=5, record_from=0, seeds=(0,), **_ADAMP_RECIPE),
    "paper": dict(source="imagefolder", model="resnet18_imagenet", synthetic=False, width=64, image_size=224,
                  n=0, batch_size=256, steps=500_500, record_every=250, record_from=0, seeds=(0,),
                  **_ADAMP_RECIPE),
}


def imagefolder_batches(dataset: str, root, image_size: int, batch_size: int, n: int, seed: int, device,
                        num_workers: int = 8, start_step: int = 0):
    """Endless normalized (x, y) training batches streamed from an ImageFolder split (``repro_lib.imagefolder``:
    RandomResizedCrop + flip, class-balanced subset of ``n`` images, 0 = all), reshuffled every epoch, from global
    step ``start_step`` on (what :func:`adamp_cos_run` resumes with). The loader's order and augmentation draws
    depend only on (seed, epoch) (``loader.set_epoch``) and its batches are consecutive slices of the epoch's
    permutation (the last one short), so step ``s`` is batch ``s % L`` of epoch ``s // L`` (L = batches per
    epoch): a resumed stream starts that epoch's sampler ``(s % L) · batch_size`` positions in, without decoding
    the skipped images, and yields exactly the batches an uninterrupted stream would."""
    from ... import imagefolder
    from ...data import normalize

    if start_step < 0:
        raise ValueError(f"start_step: must be >= 0, got {start_step}")
    ds = imagefolder.ImageFolderDataset(dataset, "train", root, image_size=image_size, train=True, seed=seed)
    ds = ds.subset(n, seed)
    loader = imagefolder.make_loader(ds, batch_size, seed=seed, num_workers=num_workers,
                                     pin_memory=str(device).startswith("cuda"))
    epoch, skip = divmod(start_step, len(loader))
    while True:
        loader.set_epoch(epoch)
        for x, y, _ in loader.batches_from(skip):
            yield normalize(x.to(device, non_blocking=True), ds.mean, ds.std), y.to(device, non_blocking=True)
        epoch, skip = epoch + 1, 0


def cos_intervals(stats: pd.DataFrame, coverage: float = 0.99) -> pd.DataFrame:
    """Appendix C's "99% confidence intervals" of |cos(grad, w)|, read as the central ``coverage`` range of the
    measured values (channel-wise max and layer-wise) for scale-invariant vs scale-variant tensors."""
    lo, hi = (1 - coverage) / 2, 1 - (1 - coverage) / 2
    rows = []
    for si, d in stats.groupby("scale_invariant"):
        for col in ("cos_channel_max", "cos_layer"):
            rows.append(dict(scale_invariant=bool(si), statistic=col, n=len(d), low=d[col].quantile(lo),
                             high=d[col].quantile(hi)))
    return pd.DataFrame(rows)


def detection_table(stats: pd.DataFrame, deltas: Iterable[float]) -> pd.DataFrame:
    """Table B.1: for each δ, the share of (step, tensor) pairs detected correctly by Eq. 11 (channel-wise
    score < δ, else layer-wise score < δ): "scale-invariant detection" = detected among scale-invariant ones,
    "scale-variant detection" = not detected among the others. In %, with the number of (step, tensor) decisions
    behind each rate (``scale_variant_n``, ``scale_invariant_n``)."""
    rows = []
    for delta in deltas:
        hit = (stats["channel_score"] < delta) | (stats["layer_score"] < delta)
        si = stats["scale_invariant"]
        rows.append(dict(delta=delta, scale_variant_detection=100 * float((~hit[~si]).mean()) if (~si).any() else np.nan,
                         scale_invariant_detection=100 * float(hit[si].mean()) if si.any() else np.nan,
                         scale_variant_n=int((~si).sum()), scale_invariant_n=int(si.sum())))
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------- figures
def plot_toy2d(runs: dict[str, pd.DataFrame], path=None):
    """Fig. 1-style figure: the trajectories of w in R² (with the unit circle and w*) and the norm ‖w‖ over the
    iterations, one line per run (``runs``: label -> :func:`toy2d` frame); the legend beside the right panel."""
    import matplotlib.pyplot as plt

    from ...results.figures import legend_outside

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw=dict(width_ratios=(1, 1.6)))
    th = np.linspace(0, 2 * np.pi, 200)
    ax0.plot(np.cos(th), np.sin(th), "k:", lw=0.8)
    ax0.plot(*W_STAR_2D, "k*", ms=12)
    for label, df in runs.items():
        ax0.plot(df["w0"], df["w1"], lw=1)
        ax1.plot(df["t"], df["r"], label=label)
    ax0.set_aspect("equal")
    ax0.set_xlabel("w₁ (first coordinate of w)")
    ax0.set_ylabel("w₂ (second coordinate of w)")
    ax0.set_title("trajectories of w (dotted: unit circle, ★: w*)", fontsize=9)
    ax1.set_yscale("log")
    ax1.set_xlabel("iteration")
    ax1.set_ylabel("weight norm ‖w‖ (log scale)")
    ax1.set_title("weight norm over the iterations", fontsize=9)
    ax1.legend()
    legend_outside(ax1, title="optimizer (momentum)")
    fig.suptitle("Fig. 1 toy (Eq. B.1): maximise cos(w, w*) from w₀ = (0.001, 1)", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig


def plot_rosenbrock(runs: dict[str, pd.DataFrame], path=None, c: float = ROSENBROCK_C, title: str = ""):
    """Fig. 3 / H.1-style figure: one column per run (``runs``: panel title -> :func:`rosenbrock3d` frame), its
    path on the (cψ, cφ) loss surface (upper row, colour: log10 of the loss) and the radius r = ‖w‖ over the
    iterations (lower row, its maximum and final loss in the panel title)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    n = len(runs)
    fig, axes = plt.subplots(2, n, figsize=(3.6 * n + 1.6, 6.8), squeeze=False)
    a, b = np.meshgrid(np.linspace(-2.3, 2.3, 200), np.linspace(-2.3, 2.3, 200))
    h = rosenbrock_h(torch.tensor(a), torch.tensor(b)).numpy()
    cs = None
    for k, (label, df) in enumerate(runs.items()):
        ax = axes[0, k]
        cs = ax.contourf(a, b, np.log10(h + 1e-3), levels=30, cmap="viridis")
        ax.plot(df["c_psi"], df["c_phi"], "w.-", ms=2, lw=0.7)
        ax.plot(*ROSENBROCK_START, "ro")
        ax.plot(*ROSENBROCK_OPT, "r*", ms=12)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("cψ (scaled azimuth, rad)")
        ax.set_ylabel("cφ (scaled elevation, rad)")
        ax.grid(False)
        axes[1, k].plot(df["t"], df["r"])
        axes[1, k].set_xlabel("iteration")
        axes[1, k].set_ylabel("radius r = ‖w‖")
        axes[1, k].set_title(f"r: 1.0 → max {df['r'].max():.3g}, final loss {df['loss'].iloc[-1]:.3g}", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.95) if title else None)
    if cs is not None:
        fig.colorbar(cs, ax=list(axes[0]), label="log10 loss h(cψ, cφ)", fraction=0.04, pad=0.02)
    marks = [Line2D([], [], color="r", marker="o", ls="", label="start (−2, 2)"),
             Line2D([], [], color="r", marker="*", ms=10, ls="", label="optimum (1, 1)"),
             Line2D([], [], color="w", marker=".", mec="k", ls="-", label="path of the run")]
    axes[1, -1].legend(handles=marks, loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=9, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig


def plot_radius_and_loss(runs: dict[str, pd.DataFrame], path=None, title: str = ""):
    """Two panels over the iterations for several :func:`rosenbrock3d` runs (``runs``: label -> frame): the
    radius r = ‖w‖ and the loss (log scale); the legend beside the right panel."""
    import matplotlib.pyplot as plt

    from ...results.figures import legend_outside

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.8))
    for label, df in runs.items():
        ax0.plot(df["t"], df["r"], label=label)
        ax1.plot(df["t"], df["loss"].clip(lower=1e-30), label=label)
    ax0.set_xlabel("iteration")
    ax0.set_ylabel("radius r = ‖w‖")
    ax0.set_title("norm of w (the larger r, the smaller the step on the sphere)", fontsize=9)
    ax1.set_yscale("log")
    ax1.set_xlabel("iteration")
    ax1.set_ylabel("loss h(cψ, cφ) (log scale)")
    ax1.set_title("loss", fontsize=9)
    ax1.legend()
    legend_outside(ax1, title="optimizer, lr")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig
