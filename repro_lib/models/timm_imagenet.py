"""timm ResNet-18 for ImageNet, the network of Heo et al. 2021 (AdamP) Table 1 (norm growth) and Table 2
(ResNet18 row): timm ``resnet18`` (torchvision-style BasicBlock ResNet-18, 7×7 stem + max-pool, 11.7M parameters
with 1000 classes), built with ``timm.create_model("resnet18", pretrained=False, num_classes=…,
zero_init_last=False)``.

Registered as ``resnet18_imagenet`` so that it is not confused with the CIFAR ``resnet18`` of
``repro_lib/models/resnet.py`` (3×3 stem, no max-pool). Built through ``timm_models._timm``: the unmodified network,
``scale_invariant_names`` = the conv weights directly followed by a BatchNorm (every conv of ResNet-18, the
downsample 1×1 convs included; the classifier and BN affine parameters are not scale-invariant).

Initialization as torchvision / He et al. 2016 (the paper's "standard settings", Sec. 4.1 and App. E.2): convs
Kaiming-normal (fan-out), **every** BN weight 1 and bias 0. timm's default ``zero_init_last=True`` (the second BN
of each BasicBlock starts at 0, Goyal et al. 2017) is turned off (``timm_models.TIMM_DEFAULTS``): the paper does
not mention it, it shifts Table 1's norms, and it makes the first-step gradient of every block's ``conv2`` zero.
"""
from __future__ import annotations

import torch.nn as nn

from ._registry import register_model
from .timm_models import _timm

#: registered name -> timm architecture name
TIMM_IMAGENET_MODELS = {"resnet18_imagenet": "resnet18"}


def _register(name: str, timm_name: str):
    @register_model(name)
    def build(num_classes: int, scale_invariant: bool = False, width: int = 64, **kw) -> nn.Module:
        return _timm(timm_name, num_classes, scale_invariant, **kw)

    build.__doc__ = (f"timm ``{timm_name}`` (pretrained=False, zero_init_last=False: every BN weight starts at 1); "
                     f"scale_invariant_names = conv weights followed by a norm.")
    return build


for _name, _timm_name in TIMM_IMAGENET_MODELS.items():
    _register(_name, _timm_name)
