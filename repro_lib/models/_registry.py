"""Model registry: one dict, one factory (``create``), as in timm's ``create_model`` but without aliases."""
from __future__ import annotations

from typing import Callable

import torch.nn as nn

_MODELS: dict[str, Callable[..., nn.Module]] = {}


def register_model(name: str):
    """Decorator registering ``builder(num_classes, scale_invariant=False, width=64, **kw) -> nn.Module``."""

    def deco(fn):
        if name in _MODELS:
            raise ValueError(f"model {name!r} registered twice")
        _MODELS[name] = fn
        return fn

    return deco


def list_models() -> list[str]:
    return sorted(_MODELS)


def create(name: str, num_classes: int, scale_invariant: bool = False, width: int = 64, **kw) -> nn.Module:
    """Build a registered model.

    Every returned model carries ``model.scale_invariant_names``: the parameter names the angular tracker
    treats as scale-invariant (see each model file for which ones and why).
    """
    if name not in _MODELS:
        raise ValueError(f"model: unknown model {name!r}; known: {', '.join(list_models())}")
    model = _MODELS[name](num_classes=num_classes, scale_invariant=scale_invariant, width=width, **kw)
    if not hasattr(model, "scale_invariant_names"):
        raise TypeError(f"model {name!r} does not declare scale_invariant_names")
    return model


def scale_invariant_params(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """The (name, parameter) pairs of ``model.scale_invariant_names``, in ``named_parameters`` order."""
    names = set(model.scale_invariant_names)
    return [(n, p) for n, p in model.named_parameters() if n in names]
