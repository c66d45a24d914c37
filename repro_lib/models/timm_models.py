"""timm ImageNet models for Yun et al. 2022 Sec. 6 (EfficientNet-B0, Fig. 8) and Heo et al. 2021 (AdamP)
Table 2 (ResNet-50, MobileNetV2), built with ``timm.create_model(name, pretrained=False, num_classes=…)``.

These are the *unmodified* networks (trainable BN affine parameters, trainable classifier, scale-variant parts
such as EfficientNet's squeeze-and-excitation convs). Their ``scale_invariant_names`` are, as in Yun et al.
Sec. 5.2 / Sec. 6, the conv weights **directly followed by a normalization layer** (found by
:func:`conv_norm_pairs`): for such a conv, ``norm(conv_{cW}(x)) = norm(conv_W(x))`` for every c > 0 (BatchNorm in
training mode normalizes each output channel with its own batch statistics; a conv bias is removed by the mean
subtraction). The SE convs, the classifier and all BN affine parameters are not scale-invariant.

Registered names: ``efficientnet_b0``, ``resnet50``, ``mobilenetv2_100`` (the papers' models) and timm's tiny
test networks ``test_efficientnet`` (BN) and ``test_efficientnet_gn`` (GroupNorm: per-sample normalization, so
a K-rank DDP run equals a 1-rank run exactly — used by the distributed tests and smoke profiles), and
``test_byobnet`` (BN; one each of timm's edge, dark, basic and bottleneck blocks, squeeze-and-excitation convs with
biases; none of the papers' networks: the tutorial ``notebooks/tuning_rule.ipynb`` applies the tuning rule to it).

``scale_invariant=True`` is rejected (these papers use the unmodified timm nets); ``width`` and ``ghost_batch``
(the CIFAR models' options) are ignored: the timm architecture fixes its widths.

**Initialization.** timm's ResNets zero-initialize the last BatchNorm weight of every residual branch by default
(``zero_init_last=True``, Goyal et al. 2017), which torchvision (``zero_init_residual=False``) and He et al. 2016
do not. The AdamP paper trains ResNet with "the training hyperparameters in (He et al., 2016)" (Sec. 4.1, App.
E.2) and says nothing about zero-init, so we build ``resnet50`` (and ``resnet18_imagenet``) with
``zero_init_last=False`` (:data:`TIMM_DEFAULTS`): every BN weight starts at 1, as in torchvision. Zero-init would
also change Table 1's norms and make the first gradient of each block's last conv exactly zero. timm's
MobileNetV2 / EfficientNet (TF-style ``_init_weight_goog``: BN weight 1, conv N(0, 2/fan_out)) have no such
option and zero nothing; they are built as timm defines them. ``test_byobnet`` is built without zero-init too, so
that every conv weight gets a gradient from the first step (``repro_lib.tuning.scale_invariance`` can only test a
tensor that does). A caller's explicit ``zero_init_last`` wins.

**EfficientNet-B0 regularizers and BatchNorm (Yun et al. Sec. 6): timm's defaults, a choice.** ``efficientnet_b0``
is ``timm.create_model("efficientnet_b0")`` as timm defines it (checked on timm 1.0.31): ``drop_rate=0.0`` (no
dropout before the classifier), ``drop_path_rate=0.0`` (no drop-connect / stochastic depth), PyTorch BatchNorm
``eps=1e-5``, ``momentum=0.1``. The original EfficientNet-B0 (Tan & Le 2019) trains with dropout 0.2,
drop-connect 0.2 and TF-style BN (``eps=1e-3``, decay 0.99, i.e. PyTorch ``momentum=0.01``). Sec. 6 (paper line
366) gives SGD, B = 512, η = 0.1, μ = 0.9, 200 epochs and the augmentation, and says nothing about dropout,
drop-connect or BN settings (it replaces the original RMSprop recipe with SGDM and tunes only λ); we keep timm's
plain defaults rather than import half of the original recipe. Dropout/drop-path are other regularizers next
to the weight decay being searched, so the λ optimum of Fig. 8 may move with them. A direct caller can pass
``drop_rate``/``drop_path_rate``/``bn_eps``/``bn_momentum`` through ``create(..., **kw)`` to timm
(``config.ImageFolderConfig`` has no field for them, so ``fit_imagefolder`` always trains timm's defaults).
"""
from __future__ import annotations

import torch.nn as nn

from ._registry import register_model

#: normalization layers whose input conv is scale-invariant. timm's BatchNormAct2d / GroupNormAct subclass these.
NORM_TYPES = (nn.modules.batchnorm._BatchNorm, nn.GroupNorm)
CONV_TYPES = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)


def _is_norm(m: nn.Module) -> bool:
    return isinstance(m, NORM_TYPES)


def _invariant_pair(conv: nn.Module, norm: nn.Module) -> bool:
    """A bias before GroupNorm is not removed (a group mixes channels with different biases): require none."""
    if isinstance(norm, nn.GroupNorm) and getattr(conv, "bias", None) is not None:
        return False
    return True


def _pairs_fx(model: nn.Module) -> list[tuple[str, str]]:
    import torch.fx as fx

    class Tracer(fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, CONV_TYPES) or _is_norm(m) or super().is_leaf_module(m, qualname)

    graph = Tracer().trace(model)
    mods = dict(model.named_modules())
    pairs = []
    for node in graph.nodes:
        if node.op != "call_module" or not isinstance(mods[node.target], CONV_TYPES):
            continue
        users = list(node.users)
        if (len(users) == 1 and users[0].op == "call_module" and _is_norm(mods[users[0].target])
                and users[0].args and users[0].args[0] is node
                and _invariant_pair(mods[node.target], mods[users[0].target])):
            pairs.append((node.target, users[0].target))
    return pairs


def _pairs_module_order(model: nn.Module) -> list[tuple[str, str]]:
    mods = [(n, m) for n, m in model.named_modules() if isinstance(m, CONV_TYPES) or _is_norm(m)]
    return [(a, b) for (a, ma), (b, mb) in zip(mods, mods[1:])
            if isinstance(ma, CONV_TYPES) and _is_norm(mb) and a.rsplit(".", 1)[:-1] == b.rsplit(".", 1)[:-1]
            and _invariant_pair(ma, mb)]


def conv_norm_pairs(model: nn.Module, method: str = "auto") -> list[tuple[str, str]]:
    """(conv module name, norm module name) for every conv/linear whose output goes *only* and *directly* into a
    normalization layer (BatchNorm*, incl. timm's BatchNormAct2d, or GroupNorm).

    ``method="fx"``: trace the forward with ``torch.fx`` (convs and norms as leaves) and keep a conv node whose
    single user is a norm module called on it — exact data flow, so a conv feeding an activation, an SE gate, a
    residual sum or two consumers is excluded. ``"order"``: registration order: a conv immediately followed by a
    norm in ``named_modules()`` within the same parent (the timm/torchvision convention ``convK`` → ``bnK``;
    wrong for a model that registers modules out of execution order). ``"auto"``: fx, falling back to order when
    the model cannot be traced symbolically.
    """
    if method not in ("auto", "fx", "order"):
        raise ValueError(f"method: must be 'auto', 'fx' or 'order', got {method!r}")
    if method == "order":
        return _pairs_module_order(model)
    try:
        return _pairs_fx(model)
    except Exception:  # noqa: BLE001 - untraceable control flow: fall back to the documented heuristic
        if method == "fx":
            raise
        return _pairs_module_order(model)


def conv_bn_weight_names(model: nn.Module, method: str = "auto") -> list[str]:
    """Parameter names (``named_parameters`` order) of the weights of :func:`conv_norm_pairs`' convs."""
    convs = {c for c, _ in conv_norm_pairs(model, method)}
    return [n for n, _ in model.named_parameters() if n.endswith(".weight") and n[: -len(".weight")] in convs]


#: timm architecture -> ``create_model`` keyword defaults (see "Initialization" in the module docstring):
#: the ResNets without timm's zero-init of each residual branch's last BN (torchvision / He et al. 2016 init).
TIMM_DEFAULTS: dict[str, dict] = {"resnet18": dict(zero_init_last=False), "resnet50": dict(zero_init_last=False),
                                  "test_byobnet": dict(zero_init_last=False)}


def _import_timm():
    """``timm``, imported without the warning its progress bars (tqdm.auto, through huggingface_hub) print into a
    notebook when ipywidgets is not installed; the text bars are used then, and nothing here downloads."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        import timm
    return timm


def _timm(name: str, num_classes: int, scale_invariant: bool, **kw) -> nn.Module:
    timm = _import_timm()

    if scale_invariant:
        raise ValueError(f"scale_invariant: {name} is the unmodified timm network (scale_invariant=False)")
    kw.pop("width", None)
    kw.pop("ghost_batch", None)
    kw = {**TIMM_DEFAULTS.get(name, {}), **kw}
    model = timm.create_model(name, pretrained=False, num_classes=num_classes, **kw)
    model.scale_invariant_names = conv_bn_weight_names(model)
    return model


def _register(name: str):
    @register_model(name)
    def build(num_classes: int, scale_invariant: bool = False, width: int = 64, **kw) -> nn.Module:
        return _timm(name, num_classes, scale_invariant, **kw)

    build.__doc__ = f"timm ``{name}`` (pretrained=False); scale_invariant_names = conv weights followed by a norm."
    return build


for _name in ("efficientnet_b0", "resnet50", "mobilenetv2_100", "test_efficientnet", "test_efficientnet_gn",
              "test_byobnet"):
    _register(_name)
