"""SGDP (Algorithm 1 of Heo, Chun, Oh, Han, Yun, Kim, Uh, Ha — *AdamP: Slowing Down the Slowdown for Momentum
Optimizers on Scale-invariant Weights*, ICLR 2021). Original code: github.com/clovaai/AdamP (MIT); timm ships it
as ``timm.optim.SGDP``. The scale-invariance test and projection (Eq. 10–11) live in ``adamp.py``.

Update, per tensor (PyTorch momentum form, decoupled weight decay, as in the authors' code):

* ``b <- μ b + (1 − dampening) g`` (Eq. 7's ``p_t``); the update is ``d = g + μ b`` (Nesterov) or ``d = b``;
* on an Eq. 11 hit (|cos| of the raw gradient and the current weight, channel-wise then layer-wise)
  ``d <- Π_w(d)`` (Eq. 10) and r = wd_ratio, else r = 1;
* ``w <- w (1 − lr·wd·r / (1 − μ))`` — the authors divide by (1 − μ) so that the decay matches the momentum's
  long-run step; weight decay is *not* added to the gradient (no coupled L2);
* ``w <- w − lr·d``.

Without Nesterov, ``d`` and the momentum buffer ``b`` are the same tensor, and the paper and the authors' code
differ (argument ``project_momentum_buffer``):

* ``False`` (**the default: the paper's Algorithm 1**, "2: p_t ← βp_{t−1} + ∇f_t(w_t)  3: Compute q_t with
  equation 11.  4: w_{t+1} ← w_t − ηq_t"): the step is a projected **copy** q_t = Π_w(p_t); the buffer p_t keeps
  its radial component (Eq. 12's remark "the updates p_t are not identical between equation 8 and equation 12").
  timm's ``SGDP`` does the same (``buf.clone()``).
* ``True`` (the authors' ``adamp`` package, github.com/clovaai/AdamP): Π_w is applied to the buffer **in place**,
  so the radial component is also removed from the momentum history.

With Nesterov, ``d = g + μ b`` is a new tensor and the buffer is never projected: both choices give the same
update. The ImageNet runs of Table 2 (SGDP with Nesterov, Appendix E.2) are therefore unaffected by the choice;
it matters for non-Nesterov SGDP, e.g. the toys of Fig. 1 and Fig. 3 (``repro_lib.papers.adamp.toys``), where the
in-place variant lets the norm grow more (3D Rosenbrock at lr 1e-5: r_max 1.20 in place vs 1.14 Alg. 1).

Implementation: on a hit ``w_new = (1 − lr·wd·r/(1−μ))·w − lr·(d − c⊙w)``, i.e. the projection is folded into a
row-scaled decay multiply; ``c`` needs only ``w·b`` (``w·g`` comes from the test). Every other pass is a
``torch._foreach_*`` call over the param group, and no update tensor is materialised.
"""
from __future__ import annotations

import torch

from ._registry import register_optimizer, trainable
from .adamp import _check_kwargs, _collect, _per_row, _rowdot, _rows, _test_candidates, projection_coef


class SGDP(torch.optim.Optimizer):
    """Algorithm 1 of Heo et al. (2021) (``project_momentum_buffer=False``, the default); ``True`` is the authors'
    in-place buffer projection. See the module docstring for the exact update."""

    def __init__(self, params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, eps=1e-8,
                 delta=0.1, wd_ratio=0.1, project_momentum_buffer=False):
        if lr <= 0 or weight_decay < 0 or not 0 <= momentum < 1:
            raise ValueError(f"SGDP: invalid lr={lr}, weight_decay={weight_decay} or momentum={momentum}")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, eps=eps, delta=delta, wd_ratio=wd_ratio,
                        project_momentum_buffer=project_momentum_buffer)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        def init(p, st):
            st["momentum"] = torch.zeros_like(p, memory_format=torch.preserve_format)

        for group in self.param_groups:
            ps, gs, sts = _collect(group, self.state, init)
            if not ps:
                continue
            lr, mu, wd, eps = group["lr"], group["momentum"], group["weight_decay"], group["eps"]
            nesterov, in_place = group["nesterov"], group["project_momentum_buffer"]
            hits, info = _test_candidates(ps, gs, group["delta"], eps)

            bufs = [st["momentum"] for st in sts]
            torch._foreach_mul_(bufs, mu)
            torch._foreach_add_(bufs, gs, alpha=1.0 - group["dampening"])
            shrink = [1.0 - lr * wd * (group["wd_ratio"] if h else 1.0) / (1.0 - mu) for h in hits]
            plain = []  # tensors whose weight is only shrunk by a scalar
            for i, h in enumerate(hits):
                if not h:
                    plain.append(i)
                    continue
                gw, wn, lwn = info[i]
                wb = _rowdot(_rows(ps[i]), _rows(bufs[i]))
                c = projection_coef(h, gw + mu * wb if nesterov else wb, wn, lwn, eps)
                if in_place and not nesterov:  # authors: project the momentum buffer itself
                    bufs[i].addcmul_(ps[i], _per_row(c, ps[i]), value=-1.0)
                    plain.append(i)
                else:  # fold Π into the decay: (shrink + lr c) ⊙ w
                    ps[i].mul_(_per_row(c.mul(lr).add_(shrink[i]), ps[i]))
            if wd != 0 and plain:
                torch._foreach_mul_([ps[i] for i in plain], [shrink[i] for i in plain])
            if nesterov:
                torch._foreach_add_(ps, gs, alpha=-lr)
                torch._foreach_add_(ps, bufs, alpha=-lr * mu)
            else:
                torch._foreach_add_(ps, bufs, alpha=-lr)
        return loss


@register_optimizer("sgdp")
def _build_sgdp(cfg, model):
    """SGDP on all trainable parameters: ``cfg.lr``, ``cfg.momentum``, ``cfg.nesterov``, ``cfg.weight_decay``
    (decoupled, ``w <- w(1 − lr·wd·r/(1−μ))``; ``weight_decay_mode`` must be "decoupled" when wd > 0);
    ``optimizer_kwargs``: delta (0.1), wd_ratio (0.1), eps (1e-8), dampening (0), project_momentum_buffer
    (False, the default = the paper's Algorithm 1 = timm's copy; True = the authors' in-place projection of the
    buffer; irrelevant with Nesterov)."""
    kw = _check_kwargs(cfg, "sgdp", {"delta", "wd_ratio", "eps", "dampening", "project_momentum_buffer"})
    return SGDP(trainable(model), lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov,
                weight_decay=cfg.weight_decay, **kw)
