"""CIFAR VGG-BN models: shapes, parameter counts against torchvision, scale-invariant weights."""
import pytest
import torch
import torch.nn.functional as F
import torchvision

from repro_lib.models import create, list_models, scale_invariant_params

NAMES = ["vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn"]
N_CONV = {"vgg11_bn": 8, "vgg13_bn": 10, "vgg16_bn": 13, "vgg19_bn": 16}


@pytest.mark.parametrize("name", NAMES)
def test_registered_and_shapes(name):
    assert name in list_models()
    m = create(name, num_classes=7, width=8)
    assert m(torch.randn(3, 3, 32, 32)).shape == (3, 7)
    assert m.classifier.in_features == 64  # 512 * 8 / 64


@pytest.mark.parametrize("name", NAMES)
def test_features_match_torchvision(name):
    """Same conv/BN stack as torchvision's ImageNet VGG-BN (which keeps a conv bias we drop)."""
    ours = create(name, num_classes=10)
    ref = getattr(torchvision.models, name)(weights=None)
    conv_ours = [tuple(m.weight.shape) for m in ours.features if isinstance(m, torch.nn.Conv2d)]
    conv_ref = [tuple(m.weight.shape) for m in ref.features if isinstance(m, torch.nn.Conv2d)]
    assert conv_ours == conv_ref and len(conv_ours) == N_CONV[name]
    n_ref = sum(p.numel() for p in ref.features.parameters())
    n_bias = sum(m.bias.numel() for m in ref.features if isinstance(m, torch.nn.Conv2d))
    assert sum(p.numel() for p in ours.features.parameters()) == n_ref - n_bias
    pools = [type(m).__name__ for m in ours.features if isinstance(m, torch.nn.MaxPool2d)]
    assert len(pools) == 5


def test_vgg16_param_count():
    # kuangliu/pytorch-cifar VGG16 (conv bias, Linear(512, 10)) has 14,728,266 parameters; we drop 4,224 conv biases
    assert sum(p.numel() for p in create("vgg16_bn", 10).parameters()) == 14_728_266 - 4_224


@pytest.mark.parametrize("name", ["vgg11_bn", "vgg19_bn"])
def test_scale_invariant_names(name):
    torch.manual_seed(0)
    m = create(name, num_classes=10, width=8).double().train()
    for bn in m.modules():
        if isinstance(bn, torch.nn.BatchNorm2d):
            bn.eps = 1e-300  # BN's eps breaks exact invariance (by ~1e-7 at init)
    names = m.scale_invariant_names
    assert len(names) == N_CONV[name] and all(n.startswith("features.") for n in names)
    x, y = torch.randn(16, 3, 32, 32, dtype=torch.float64), torch.randint(0, 10, (16,))
    F.cross_entropy(m(x), y).backward()
    params = dict(m.named_parameters())
    for n, p in scale_invariant_params(m):
        rel = (p * p.grad).sum() / (p.norm() * p.grad.norm())
        assert abs(rel) < 1e-10, (n, rel)
    w = params["classifier.weight"]
    assert abs((w * w.grad).sum() / (w.norm() * w.grad.norm())) > 1e-3  # not scale-invariant: the test can fail
    # rescaling one of them leaves the train-mode loss unchanged
    with torch.no_grad():
        before = F.cross_entropy(m(x), y)
        params[names[3]].mul_(3.7)
        assert torch.allclose(F.cross_entropy(m(x), y), before, rtol=1e-12, atol=0)


def test_scale_invariant_variant_not_provided():
    with pytest.raises(NotImplementedError):
        create("vgg11_bn", num_classes=10, scale_invariant=True)
