"""The optimizer registry (``register_optimizer`` / ``build_optimizer``), apart from the optimizer files that
register into it, so that they import it without importing the package that imports them."""
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
