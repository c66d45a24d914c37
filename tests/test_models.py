"""Models of Yun et al. ECCV 2022: CIFAR ResNet-18 (Sec. 3.1, 5.2) and DenseNet-BC-100 (App. B), unmodified and
scale-invariant; Lemma 1 (App. A, Eq. 28-29) checked numerically on the whole training objective.

Lemma 1 is checked in *training* mode (batch statistics). In eval mode the BNs use running statistics, which were
accumulated for the old scale: rescaling weights then changes the output unless the running statistics are
rescaled too -- the invariance is a property of the training objective.

BN adds eps (1e-5) to the variance, so the invariance is exact only up to a relative ~eps/Var(pre-BN activation);
the identity tests set eps = 1e-30 (float64) to check it to rounding error. With eps = 1e-5 the small-width test
nets deviate by ~1e-7 relative (measured), which is immaterial for training.
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from repro_lib.models import create, list_models, scale_invariant_params
from repro_lib.models.layers import FixedLinear, GhostBatchNorm

ALPHAS = (0.1, 3.0, 50.0)


def _build(name, si, eps=1e-30, **kw):
    torch.manual_seed(0)
    small = dict(resnet18=dict(width=4), densenet100=dict(width=11))[name]  # densenet: growth 2, depth 100
    model = create(name, num_classes=5, scale_invariant=si, ghost_batch=8, **small, **kw).double()
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._NormBase):
            m.eps = eps
    return model


def _batch(n=20, size=8):  # 20 = 2 ghost batches of 8 + a ragged one of 4
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 3, size, size, generator=g, dtype=torch.float64), torch.randint(0, 5, (n,), generator=g)


def _loss_grads(model, x, y, names):
    model.train()
    model.zero_grad(set_to_none=True)
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    params = dict(model.named_parameters())
    return loss.detach(), logits.detach(), {n: params[n].grad.detach().clone() for n in names}


def _scale(model, factors: dict):
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n in factors:
                p.mul_(factors[n])


# ---------------------------------------------------------------- architecture


def test_registered():
    assert {"resnet18", "densenet100"} <= set(list_models())
    with pytest.raises(TypeError):
        create("resnet18", 10, widht=8)


def test_resnet18_unmodified_architecture():
    m = create("resnet18", num_classes=10)
    assert sum(p.numel() for p in m.parameters()) == 11_173_962  # the usual CIFAR ResNet-18 count
    convs = [mod for mod in m.modules() if isinstance(mod, nn.Conv2d)]
    assert len(convs) == 20 and all(c.bias is None for c in convs)  # stem + 16 block convs + 3 projections
    assert m.conv1.kernel_size == (3, 3) and m.conv1.stride == (1, 1)
    assert not any(isinstance(mod, nn.MaxPool2d) for mod in m.modules())
    assert [m.layer1[0].conv1.out_channels, m.layer2[0].conv1.out_channels, m.layer3[0].conv1.out_channels,
            m.layer4[0].conv1.out_channels] == [64, 128, 256, 512]
    assert all(isinstance(mod, nn.BatchNorm2d) and mod.affine for mod in m.modules()
               if isinstance(mod, nn.modules.batchnorm._NormBase))
    assert m.fc.weight.requires_grad
    assert m.scale_invariant_names == [f"{n}.weight" for n, mod in m.named_modules() if isinstance(mod, nn.Conv2d)]
    assert m(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_resnet18_scale_invariant_architecture():
    m = create("resnet18", num_classes=10, scale_invariant=True, width=8)
    norms = [mod for mod in m.modules() if isinstance(mod, nn.modules.batchnorm._NormBase)]
    assert len(norms) == 21 and all(isinstance(b, GhostBatchNorm) and not b.affine and b.ghost_batch == 64
                                    for b in norms)  # 20 conv BNs + the one after pooling
    assert isinstance(m.pool_norm, GhostBatchNorm) and isinstance(m.fc, FixedLinear)
    trainable = [n for n, p in m.named_parameters() if p.requires_grad]
    assert m.scale_invariant_names == trainable and all(n.endswith(".weight") for n in trainable)
    assert len(trainable) == 20
    assert [n for n, _ in scale_invariant_params(m)] == trainable
    assert m(torch.randn(130, 3, 32, 32)).shape == (130, 10)
    assert create("resnet18", 10, scale_invariant=True, ghost_batch=32).bn1.ghost_batch == 32


def test_densenet100_architecture():
    m = create("densenet100", num_classes=100)
    convs = [mod for mod in m.modules() if isinstance(mod, nn.Conv2d)]
    linears = [mod for mod in m.modules() if isinstance(mod, nn.Linear)]
    assert len(convs) + len(linears) == 100  # "depth 100": 99 convs + FC
    assert m.conv1.out_channels == 24 and m.growth == 12
    assert [mod.conv.out_channels for mod in m.modules() if type(mod).__name__ == "Transition"] == [108, 150]
    assert m.num_features == 342
    assert sum(p.numel() for p in m.parameters()) == 800_032  # the 0.8M of Huang et al. Table 2 (k=12, C100)
    assert len(m.scale_invariant_names) == 99
    si = create("densenet100", num_classes=100, scale_invariant=True)
    assert all(isinstance(b, GhostBatchNorm) and not b.affine for b in si.modules()
               if isinstance(b, nn.modules.batchnorm._NormBase))
    assert si.scale_invariant_names == [n for n, p in si.named_parameters() if p.requires_grad]
    assert len(si.scale_invariant_names) == 99 and isinstance(si.fc, FixedLinear)
    assert create("densenet100", 10, width=32).growth == 6 and create("densenet100", 10, width=1).growth == 1
    with pytest.raises(ValueError):
        create("densenet100", 10, depth=50)


@pytest.mark.parametrize("name", ["resnet18_imagenet", "resnet50", "mobilenetv2_100"])
def test_timm_imagenet_nets_have_torchvision_bn_init(name):
    """AdamP (Heo et al. 2021) Table 1/2 nets start as torchvision / He et al. 2016: every BN weight 1, bias 0 --
    no zero-init of the last BN of a residual branch (timm's ResNet default ``zero_init_last=True``)."""
    from repro_lib.models import timm_imagenet, timm_models  # noqa: F401  (register the timm models)

    m = create(name, num_classes=10)
    bns = [(n, b) for n, b in m.named_modules() if isinstance(b, nn.modules.batchnorm._BatchNorm)]
    assert len(bns) > 10
    for n, b in bns:
        assert torch.all(b.weight == 1) and torch.all(b.bias == 0), n
    if name.startswith("resnet"):  # the caller can still ask for timm's zero-init explicitly
        z = create(name, num_classes=10, zero_init_last=True)
        assert torch.all(z.layer1[0].get_submodule("bn3" if name == "resnet50" else "bn2").weight == 0)


# ---------------------------------------------------------------- Lemma 1 (Eq. 28-29)


@pytest.mark.parametrize("name", ["resnet18", "densenet100"])
def test_lemma1_scale_invariant_net(name):
    model = _build(name, True)
    x, y = _batch()
    names = model.scale_invariant_names
    assert names == [n for n, p in model.named_parameters() if p.requires_grad]
    loss0, logits0, g0 = _loss_grads(model, x, y, names)
    params = dict(model.named_parameters())
    # Eq. 29: <x, grad L(x)> = 0 for every trainable tensor (relative to |x| |grad|)
    for n in names:
        dot = (params[n].detach() * g0[n]).sum()
        assert abs(float(dot)) <= 1e-9 * float(params[n].detach().norm() * g0[n].norm()) + 1e-300, n
        assert float(g0[n].norm()) > 0, n  # the test would be vacuous with zero gradients
    for alpha in ALPHAS:
        _scale(model, {n: alpha for n in names})
        loss, logits, g = _loss_grads(model, x, y, names)
        torch.testing.assert_close(loss, loss0, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(logits, logits0, rtol=1e-9, atol=1e-10)
        for n in names:  # Eq. 28: grad L(alpha x) = grad L(x) / alpha
            torch.testing.assert_close(g[n], g0[n] / alpha, rtol=1e-7, atol=1e-12 * float(g0[n].abs().max()) / alpha)
        _scale(model, {n: 1 / alpha for n in names})
    # each tensor separately: a different factor per tensor leaves the loss unchanged
    gen = torch.Generator().manual_seed(2)
    _scale(model, {n: float(torch.empty(1).uniform_(0.05, 20, generator=gen)) for n in names})
    loss, logits, _ = _loss_grads(model, x, y, names)
    torch.testing.assert_close(logits, logits0, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", ["resnet18", "densenet100"])
def test_unmodified_net_not_scale_invariant_but_its_conv_weights_are(name):
    model = _build(name, False)
    x, y = _batch()
    all_names = [n for n, p in model.named_parameters() if p.requires_grad]
    si = model.scale_invariant_names
    assert set(si) < set(all_names)
    loss0, logits0, g0 = _loss_grads(model, x, y, all_names)
    params = dict(model.named_parameters())
    # the whole objective is not scale-invariant (BN affine, FC): the Lemma 1 test can fail
    _scale(model, {n: 3.0 for n in all_names})
    loss, _, _ = _loss_grads(model, x, y, all_names)
    assert abs(float(loss - loss0)) > 1e-3
    _scale(model, {n: 1 / 3.0 for n in all_names})
    off = [n for n in all_names if n not in si]
    dots = [abs(float((params[n].detach() * g0[n]).sum())) / float(params[n].detach().norm() * g0[n].norm() + 1e-300) for n in off]
    assert max(dots) > 1e-3  # Eq. 29 fails for the scale-variant tensors
    # ... but every listed conv weight is scale-invariant
    for n in si:
        assert abs(float((params[n].detach() * g0[n]).sum())) <= 1e-9 * float(params[n].detach().norm() * g0[n].norm()), n
    _scale(model, {n: 7.0 for n in si})
    loss, logits, _ = _loss_grads(model, x, y, all_names)
    torch.testing.assert_close(logits, logits0, rtol=1e-9, atol=1e-10)


def test_eval_mode_not_invariant_without_rescaled_running_stats():
    """Documents the caveat: with running statistics (eval), rescaling the weights changes the output."""
    model = _build("resnet18", True)
    x, y = _batch()
    model.train()
    with torch.no_grad():
        model(x)
    model.eval()
    with torch.no_grad():
        out0 = model(x)
        _scale(model, {n: 3.0 for n in model.scale_invariant_names})
        out1 = model(x)
    assert (out0 - out1).abs().max() > 1e-3
