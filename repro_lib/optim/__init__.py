"""Optimizers, one file each, and a dict registry used by ``train.fit``.

``build_optimizer(cfg, model)`` looks up ``cfg.optimizer``. Each builder documents its weight-decay
convention (coupled L2 vs decoupled, whether wd is multiplied by lr) and momentum form.
"""
from __future__ import annotations

import torch

from ._registry import build_optimizer, list_optimizers, register_optimizer, trainable


@register_optimizer("sgd")
def _build_sgd(cfg, model):
    """``torch.optim.SGD`` exactly: coupled L2 (``g <- g + λx`` before momentum), Sutskever momentum
    ``v <- μv + g, x <- x − ηv``, weight decay on every trainable tensor (Yun et al. 2022, Li & Arora 2020).
    ``weight_decay_mode="decoupled"`` is rejected here: plain SGD in these papers is coupled."""
    if cfg.weight_decay_mode != "coupled":
        raise ValueError("weight_decay_mode: optimizer 'sgd' implements coupled L2 only")
    if cfg.optimizer_kwargs:
        raise ValueError(f"optimizer_kwargs: optimizer 'sgd' takes none, got {sorted(cfg.optimizer_kwargs)}")
    return torch.optim.SGD(trainable(model), lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov,
                           weight_decay=cfg.weight_decay, foreach=True)


# the other optimizers register themselves when imported
from .adamp import AdamP  # noqa: E402
from .backmatching import LARS, LSALR, ScaleAmendedSGD  # noqa: E402
from .sgdp import SGDP  # noqa: E402

__all__ = ["AdamP", "LARS", "LSALR", "SGDP", "ScaleAmendedSGD", "build_optimizer", "list_optimizers",
           "register_optimizer", "trainable"]
