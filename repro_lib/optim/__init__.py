"""Optimizers, one file each, and a dict registry used by ``train.fit``.

``build_optimizer(cfg, model)`` looks up ``cfg.optimizer``. Each builder documents its weight-decay
convention (coupled L2 vs decoupled, whether wd is multiplied by lr) and momentum form.
"""
from __future__ import annotations

from typing import Callable

import torch

_OPTIMIZERS: dict[str, Callable] = {}


def register_optimizer(name: str):
    """Decorator registering ``build(cfg: RunConfig, model: nn.Module) -> torch.optim.Optimizer``."""

    def deco(fn):
        if name in _OPTIMIZERS:
            raise ValueError(f"optimizer {name!r} registered twice")
        _OPTIMIZERS[name] = fn
        return fn

    return deco


def list_optimizers() -> list[str]:
    return sorted(_OPTIMIZERS)


def build_optimizer(cfg, model: torch.nn.Module) -> torch.optim.Optimizer:
    if cfg.optimizer not in _OPTIMIZERS:
        raise ValueError(f"optimizer: unknown optimizer {cfg.optimizer!r}; known: {list_optimizers()}")
    return _OPTIMIZERS[cfg.optimizer](cfg, model)


def trainable(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


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


from . import sgdp, adamp, backmatching  # noqa: E402,F401  (register the other optimizers)
from .adamp import AdamP  # noqa: E402
from .backmatching import LARS, LSALR, ScaleAmendedSGD  # noqa: E402
from .sgdp import SGDP  # noqa: E402

__all__ = ["AdamP", "LARS", "LSALR", "SGDP", "ScaleAmendedSGD", "build_optimizer", "list_optimizers",
           "register_optimizer", "trainable"]
