"""SGDP (Algorithm 1 of Heo, Chun, Oh, Han, Yun, Kim, Uh, Ha — *AdamP: Slowing Down the Slowdown for Momentum
Optimizers on Scale-invariant Weights*, ICLR 2021). Original code: github.com/clovaai/AdamP (MIT); timm ships it
as ``timm.optim.SGDP``. The scale-invariance test and projection (Eq. 10–11) live in ``adamp.py``.

Update, per tensor (PyTorch momentum form, decoupled weight decay as in the authors' code):

* ``b <- μ b + (1 − dampening) g`` (Eq. 7's ``p_t``); the update is ``d = g + μ b`` (Nesterov) or ``d = b``;
* on an Eq. 11 hit (raw gradient vs current weight, channel-wise then layer-wise) ``d <- Π_w(d)`` and r =
  wd_ratio, else r = 1;
* ``w <- w (1 − lr·wd·r / (1 − μ))`` — the authors divide by (1 − μ) so that the decay matches the momentum's
  long-run step size; weight decay is *not* added to the gradient;
* ``w <- w − lr·d``.

Without Nesterov, ``d`` and the momentum buffer ``b`` are the same tensor, and the two implementations differ:
the authors' ``adamp`` package projects ``b`` **in place** (the radial component is removed from the momentum
history too), timm projects a **copy** (``buf.clone()``; the buffer keeps its radial component). The choice is
the explicit argument ``project_momentum_buffer`` (True = authors, False = timm). Default: True, the paper
authors' code. With Nesterov ``d`` is a new tensor and both choices coincide.
"""
from __future__ import annotations

import torch

from . import register_optimizer, trainable
from .adamp import _check_kwargs, _collect, _test_candidates, project_


class SGDP(torch.optim.Optimizer):
    """Algorithm 1 of Heo et al. (2021); see the module docstring for the exact update and
    ``project_momentum_buffer``."""

    def __init__(self, params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, eps=1e-8,
                 delta=0.1, wd_ratio=0.1, project_momentum_buffer=True):
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
            hits, norms = _test_candidates(ps, gs, group["delta"], eps)  # raw gradient, weight before decay

            bufs = [st["momentum"] for st in sts]
            torch._foreach_mul_(bufs, mu)
            torch._foreach_add_(bufs, gs, alpha=1.0 - group["dampening"])
            if group["nesterov"]:
                ds = torch._foreach_add(gs, bufs, alpha=mu)
            else:
                ds = list(bufs)
                if not group["project_momentum_buffer"]:  # timm: project a copy, keep the buffer radial
                    for i, h in enumerate(hits):
                        if h:
                            ds[i] = bufs[i].clone()
            for i, h in enumerate(hits):
                if h:
                    project_(ds[i], ps[i], h, norms[i][0], norms[i][1], eps)
            if wd != 0:
                torch._foreach_mul_(ps, [1.0 - lr * wd * (group["wd_ratio"] if h else 1.0) / (1.0 - mu)
                                         for h in hits])
            torch._foreach_add_(ps, ds, alpha=-lr)
        return loss


@register_optimizer("sgdp")
def _build_sgdp(cfg, model):
    """SGDP on all trainable parameters: ``cfg.lr``, ``cfg.momentum``, ``cfg.nesterov``, ``cfg.weight_decay``
    (decoupled, ``w <- w(1 − lr·wd·r/(1−μ))``; ``weight_decay_mode`` must be "decoupled" when wd > 0);
    ``optimizer_kwargs``: delta (0.1), wd_ratio (0.1), eps (1e-8), dampening (0), project_momentum_buffer
    (True = authors' in-place projection of the buffer, False = timm's copy)."""
    kw = _check_kwargs(cfg, "sgdp", {"delta", "wd_ratio", "eps", "dampening", "project_momentum_buffer"})
    return SGDP(trainable(model), lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov,
                weight_decay=cfg.weight_decay, **kw)
