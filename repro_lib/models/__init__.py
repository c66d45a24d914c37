"""Models, registered by name. ``create(name, num_classes, scale_invariant=False, width=64)``.

Each family lives in its own file and registers itself on import.
"""
from ._registry import create, list_models, register_model, scale_invariant_params
from . import resnet, preresnet, vgg, densenet, timm_models, timm_imagenet  # noqa: F401  (register the families)

__all__ = ["create", "list_models", "register_model", "scale_invariant_params"]
