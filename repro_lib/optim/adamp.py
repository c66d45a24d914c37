"""AdamP (Algorithm 2 of Heo, Chun, Oh, Han, Yun, Kim, Uh, Ha — *AdamP: Slowing Down the Slowdown for Momentum
Optimizers on Scale-invariant Weights*, ICLR 2021), plus the multi-tensor scale-invariance test and projection
(Eq. 10–11) that ``sgdp.py`` reuses. Original code: github.com/clovaai/AdamP (MIT); timm ships the same algorithm
as ``timm.optim.AdamP``, against which ``tests/test_sgdp_adamp.py`` checks us.

Semantics (the authors' code, which the paper defers to in Appendix E):

* Candidates are tensors with ``ndim > 1``. On the **raw gradient** g and the current weight w (before weight
  decay), the absolute cosine similarity is tested first channel-wise (rows ``w.view(out_channels, -1)``: all
  rows must satisfy ``|cos| < delta / sqrt(row_len)``) and, if that fails, layer-wise (``w.view(1, -1)``,
  ``|cos| < delta / sqrt(numel)``). Eq. 11 of the paper lacks the absolute value; the code has it and the authors
  confirmed the code. ``cos = g·w / (max(|g|, eps) · max(|w|, eps))`` (``F.cosine_similarity``).
* On a hit the update is projected onto the tangent space of w (Eq. 10), row-wise for a channel hit and over the
  whole tensor for a layer hit, with ``ŵ = w / (|w| + eps)``; weight decay on that tensor is multiplied by
  ``wd_ratio``.
* Weight decay is decoupled (Loshchilov & Hutter): AdamP shrinks ``w <- w (1 - lr·wd·r)`` before the step
  (r = wd_ratio on projected tensors, 1 elsewhere) — the AdamW convention, so the paper's "wd 1e-4" at lr 1e-3
  (AdamW-paper notation, a shrink of 1e-4 per step) is ``weight_decay=0.1`` here.

Speed: every elementwise pass is a ``torch._foreach_*`` call over the whole param group; per tensor only the
three row reductions of the test (and two ops on projected tensors) remain, and all small per-row statistics are
concatenated so that the decision for the whole group costs one host sync.
"""
from __future__ import annotations

import math

import torch

from ._registry import register_optimizer, trainable

NO_HIT, CHANNEL_HIT, LAYER_HIT = 0, 1, 2


def _rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as (out_channels, -1): the authors' ``_channel_view`` (read-only use: may copy if not contiguous)."""
    return x.reshape(x.shape[0], -1)


def _per_row(c: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A per-row (R,) vector shaped to broadcast over ``like`` (R, ...), for in-place updates of any layout."""
    return c.view((-1,) + (1,) * (like.ndim - 1))


def _rowdot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise dot product of two (R, C) views. (A batched-BLAS ``bmm`` avoids the temporary but measured
    slower on CPU for ResNet-18's shapes; ``linalg.vecdot`` was in between.)"""
    return (a * b).sum(1)


def scale_invariance_test(params: list[torch.Tensor], grads: list[torch.Tensor], delta: float, eps: float):
    """Eq. 11 detection (with |cos|) for a list of ``ndim > 1`` tensors, channel-wise then layer-wise.

    Returns a dict: ``hits`` (python ints NO_HIT / CHANNEL_HIT / LAYER_HIT, one host sync for the whole list);
    concatenated over all rows of all tensors: ``gw`` (g·w), ``w_norm`` (|w|), ``cos_rows`` (channel |cos|);
    per tensor (T,): ``w_layer_norm``, ``cos_layer`` (layer |cos|), ``cos_channel_max``; ``counts`` (rows per
    tensor). ``cos = g·w / (max(|g|, eps) · max(|w|, eps))`` as ``F.cosine_similarity``.
    """
    if not params:
        e = torch.zeros(0)
        return dict(hits=[], gw=e, w_norm=e, cos_rows=e, w_layer_norm=e, cos_layer=e, cos_channel_max=e, counts=[])
    gw, gn, wn, counts, ncols = [], [], [], [], []
    for p, g in zip(params, grads):
        w2, g2 = _rows(p), _rows(g)
        gw.append(_rowdot(g2, w2))
        gn.append(torch.linalg.vector_norm(g2, dim=1))
        wn.append(torch.linalg.vector_norm(w2, dim=1))
        counts.append(w2.shape[0])
        ncols.append(w2.shape[1])
    dev, T = params[0].device, len(params)
    dt = torch.float64 if any(p.dtype == torch.float64 for p in params) else torch.float32  # statistics' dtype
    GW, GN, WN = (torch.cat([v.to(dt) for v in vs]) for vs in (gw, gn, wn))
    counts_t = torch.tensor(counts, device=dev)
    ncols_t = torch.tensor(ncols, device=dev, dtype=GW.dtype)
    seg = torch.repeat_interleave(torch.arange(T, device=dev), counts_t, output_size=sum(counts))  # no sync
    cos_rows = GW.abs() / (GN.clamp_min(eps) * WN.clamp_min(eps))
    zeros = torch.zeros(T, device=dev, dtype=GW.dtype)
    cmax = zeros.clone().scatter_reduce_(0, seg, cos_rows, "amax", include_self=False)
    lgw = zeros.clone().index_add_(0, seg, GW)
    lgn = zeros.clone().index_add_(0, seg, GN * GN).sqrt_()
    lwn = zeros.clone().index_add_(0, seg, WN * WN).sqrt_()
    cos_layer = lgw.abs() / (lgn.clamp_min(eps) * lwn.clamp_min(eps))
    channel = cmax < delta / ncols_t.sqrt()
    layer = ~channel & (cos_layer < delta / (ncols_t * counts_t).sqrt())
    hits = (channel.to(torch.int8) * CHANNEL_HIT + layer.to(torch.int8) * LAYER_HIT).tolist()
    return dict(hits=hits, gw=GW, w_norm=WN, cos_rows=cos_rows, w_layer_norm=lwn, cos_layer=cos_layer,
                cos_channel_max=cmax, counts=counts)


def projection_coef(hit: int, wd_rows: torch.Tensor, row_norm: torch.Tensor, layer_norm: torch.Tensor,
                    eps: float) -> torch.Tensor:
    """Per-row coefficient c of Eq. 10 written as ``Π_w(d) = d − c ⊙ w`` (c broadcast along each row), from the
    row dot products ``wd_rows = w·d``: ``c = (w·d) / (|w| + eps)²`` row-wise for CHANNEL_HIT, one scalar
    ``Σ(w·d) / (|w| + eps)²`` for LAYER_HIT (the authors' ``ŵ = w / (|w| + eps)``)."""
    if hit == CHANNEL_HIT:
        return wd_rows / (row_norm + eps).square()
    return (wd_rows.sum() / (layer_norm + eps).square()).expand_as(wd_rows)


def project_(d: torch.Tensor, w: torch.Tensor, hit: int = CHANNEL_HIT, eps: float = 1e-8) -> torch.Tensor:
    """In place ``d <- Π_w(d) = d − (ŵ·d) ŵ`` (Eq. 10), channel-wise (CHANNEL_HIT) or layer-wise (LAYER_HIT).
    Reference form used by the toys and tests; the optimizers fold the same coefficient into their update."""
    d2, w2 = _rows(d), _rows(w)
    wn = torch.linalg.vector_norm(w2, dim=1)
    c = projection_coef(hit, (w2 * d2).sum(1), wn, torch.linalg.vector_norm(wn), eps)
    return d.addcmul_(w, _per_row(c, w), value=-1.0)


def _collect(group, state, init):
    """Params with a gradient, their grads and state (initialised by ``init(p, st)`` on first sight)."""
    ps, gs, sts = [], [], []
    for p in group["params"]:
        if p.grad is None:
            continue
        if p.grad.is_sparse:
            raise RuntimeError("SGDP/AdamP do not support sparse gradients")
        st = state[p]
        if len(st) == 0:
            init(p, st)
        ps.append(p)
        gs.append(p.grad)
        sts.append(st)
    return ps, gs, sts


def _test_candidates(ps, gs, delta, eps):
    """Eq. 11 on the ``ndim > 1`` tensors of a group (raw gradient, weight before decay). Returns ``hits`` per
    tensor (NO_HIT for ndim <= 1) and, for each hit, ``(g·w rows, |w| rows, |w|)``; None elsewhere."""
    idx = [i for i, p in enumerate(ps) if p.ndim > 1 and p.numel() > 0]
    st = scale_invariance_test([ps[i] for i in idx], [gs[i] for i in idx], delta, eps)
    hits, info = [NO_HIT] * len(ps), [None] * len(ps)
    n0 = 0
    for k, i in enumerate(idx):
        R = ps[i].shape[0]
        hits[i] = st["hits"][k]
        if hits[i]:
            info[i] = (st["gw"][n0:n0 + R], st["w_norm"][n0:n0 + R], st["w_layer_norm"][k])
        n0 += R
    return hits, info


def _add_scaled_(ps: list[torch.Tensor], ds: list[torch.Tensor], scales: list[float]):
    """``p += s·d`` for each tensor: one foreach call when all scales agree (the usual case)."""
    if not ps:
        return
    if all(s == scales[0] for s in scales):
        torch._foreach_add_(ps, ds, alpha=scales[0])
    else:
        torch._foreach_add_(ps, torch._foreach_mul(ds, scales))


class AdamP(torch.optim.Optimizer):
    """Algorithm 2 of Heo et al. (2021) with the authors' code semantics (module docstring).

    ``m <- β1 m + (1−β1) g``; ``v <- β2 v + (1−β2) g²``; ``p = m / (sqrt(v)/sqrt(1−β2^t) + eps)`` (Nesterov:
    ``β1 m + (1−β1) g`` in the numerator); ``q = Π_w(p)`` on an Eq. 11 hit, else ``q = p``;
    ``w <- w (1 − lr·wd·r)``; ``w <- w − lr/(1−β1^t) · q``. Defaults as in the paper / authors' code.

    Implementation: on a hit ``w_new = (1 − lr·wd·r)·w − s·(p − c⊙w) = (1 − lr·wd·r + s·c)⊙w − s·p`` (s the
    bias-corrected step, c from ``projection_coef``), so the projection costs one row-dot pass and a row-scaled
    multiply instead of a separate pass over the update.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, delta=0.1,
                 wd_ratio=0.1, nesterov=False):
        if lr <= 0 or weight_decay < 0 or not 0 <= betas[0] < 1 or not 0 <= betas[1] < 1:
            raise ValueError(f"AdamP: invalid lr={lr}, weight_decay={weight_decay} or betas={betas}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, delta=delta,
                        wd_ratio=wd_ratio, nesterov=nesterov)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        def init(p, st):
            st["step"] = 0
            st["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)

        for group in self.param_groups:
            ps, gs, sts = _collect(group, self.state, init)
            if not ps:
                continue
            lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            hits, info = _test_candidates(ps, gs, group["delta"], eps)

            ms = [st["exp_avg"] for st in sts]
            vs = [st["exp_avg_sq"] for st in sts]
            for st in sts:
                st["step"] += 1
            step_size = [lr / (1 - b1 ** st["step"]) for st in sts]
            torch._foreach_mul_(ms, b1)
            torch._foreach_add_(ms, gs, alpha=1 - b1)
            torch._foreach_mul_(vs, b2)
            torch._foreach_addcmul_(vs, gs, gs, value=1 - b2)
            denom = torch._foreach_sqrt(vs)
            torch._foreach_div_(denom, [math.sqrt(1 - b2 ** st["step"]) for st in sts])
            torch._foreach_add_(denom, eps)
            shrink = [1.0 - lr * wd * (group["wd_ratio"] if h else 1.0) for h in hits]

            if group["nesterov"]:  # p = (β1 m + (1−β1) g) / denom for every tensor
                pert = torch._foreach_mul(ms, b1)
                torch._foreach_add_(pert, gs, alpha=1 - b1)
                torch._foreach_div_(pert, denom)
                full = list(range(len(ps)))
            else:  # p = m / denom materialised (in the denom buffer) only where it is projected
                pert = denom
                full = [i for i, h in enumerate(hits) if h]
                for i in full:
                    torch.div(ms[i], denom[i], out=denom[i])
            plain = []
            for i, h in enumerate(hits):
                if h:
                    gw, wn, lwn = info[i]
                    c = projection_coef(h, _rowdot(_rows(ps[i]), _rows(pert[i])), wn, lwn, eps)
                    ps[i].mul_(_per_row(c.mul(step_size[i]).add_(shrink[i]), ps[i]))
                elif wd > 0:
                    plain.append(i)
            if plain:
                torch._foreach_mul_([ps[i] for i in plain], [shrink[i] for i in plain])
            _add_scaled_([ps[i] for i in full], [pert[i] for i in full], [-step_size[i] for i in full])
            full_set = set(full)
            rest = [i for i in range(len(ps)) if i not in full_set]
            if rest:
                torch._foreach_addcdiv_([ps[i] for i in rest], [ms[i] for i in rest], [denom[i] for i in rest],
                                        [-step_size[i] for i in rest])
        return loss


@register_optimizer("adamp")
def _build_adamp(cfg, model):
    """AdamP on all trainable parameters. ``cfg.lr``, ``cfg.weight_decay`` (decoupled, ×lr: AdamW convention),
    ``cfg.nesterov``; ``optimizer_kwargs``: betas (default (0.9, 0.999); ``cfg.momentum`` is not used), eps,
    delta (0.1), wd_ratio (0.1). ``weight_decay_mode`` must be "decoupled" when weight_decay > 0."""
    kw = _check_kwargs(cfg, "adamp", {"betas", "eps", "delta", "wd_ratio"})
    return AdamP(trainable(model), lr=cfg.lr, weight_decay=cfg.weight_decay, nesterov=cfg.nesterov, **kw)


@register_optimizer("adamw")
def _build_adamw(cfg, model):
    """``torch.optim.AdamW(foreach=True)``: decoupled weight decay multiplied by lr (``w <- w(1 − lr·wd)``), on
    every trainable tensor. ``optimizer_kwargs``: betas, eps. The AdamP paper's "wd 1e-4" at lr 1e-3 is
    ``weight_decay=0.1`` here (see module docstring)."""
    kw = _check_kwargs(cfg, "adamw", {"betas", "eps"})
    if cfg.nesterov:
        raise ValueError("nesterov: torch AdamW has no Nesterov variant")
    return torch.optim.AdamW(trainable(model), lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=True, **kw)


def _check_kwargs(cfg, name: str, allowed: set[str]) -> dict:
    kw = dict(cfg.optimizer_kwargs)
    unknown = sorted(set(kw) - allowed)
    if unknown:
        raise ValueError(f"optimizer_kwargs: {unknown[0]!r} is not an option of {name!r} (known: {sorted(allowed)})")
    if cfg.weight_decay > 0 and cfg.weight_decay_mode != "decoupled":
        raise ValueError(f"weight_decay_mode: optimizer {name!r} implements decoupled weight decay only; "
                         f"set weight_decay_mode='decoupled'")
    if "betas" in kw:
        kw["betas"] = tuple(kw["betas"])
    return kw


@register_optimizer("adam")
def _build_adam(cfg, model):
    """``torch.optim.Adam(foreach=True)`` with coupled L2 (``g <- g + λx`` before the moments): the "Adam"
    column of AdamP Table 2 (Heo et al. 2021), whose weight decay is the paper's number as is."""
    kw = dict(cfg.optimizer_kwargs)
    unknown = sorted(set(kw) - {"betas", "eps"})
    if unknown:
        raise ValueError(f"optimizer_kwargs: unknown options {unknown} for optimizer 'adam'")
    if cfg.weight_decay_mode != "coupled":
        raise ValueError("weight_decay_mode: optimizer 'adam' implements coupled L2 only")
    return torch.optim.Adam(trainable(model), lr=cfg.lr, betas=tuple(kw.get("betas", (0.9, 0.999))),
                            eps=kw.get("eps", 1e-8), weight_decay=cfg.weight_decay, foreach=True)
