"""repro_lib.papers.yun2022.theory: Lemma 1 of Yun et al. 2022 (Eqs. 5-6) on the package's networks."""
import math

import pytest
import torch
import torch.nn as nn

from repro_lib.models import create
from repro_lib.papers.yun2022.theory import check_scale_invariance

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: single-threaded for tiny tensors


def _batch(n=64, dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 3, 32, 32, generator=g, dtype=dtype), torch.randint(0, 10, (n,), generator=g)


@pytest.mark.parametrize("scale_invariant", [True, False])
def test_lemma1_holds_to_rounding_without_bn_eps(scale_invariant):
    torch.manual_seed(0)
    model = create("resnet18", num_classes=10, scale_invariant=scale_invariant, width=4).double()
    x, y = _batch()
    df = check_scale_invariance(model, x, y, c=3.0, bn_eps=1e-20)
    assert list(df.tensor) == list(model.scale_invariant_names)
    assert df.cos_w_grad.abs().max() < 1e-10  # Eq. 6: the gradient is orthogonal to the weight
    assert df.grad_ratio.sub(1 / 3).abs().max() < 1e-10  # Eq. 5: ∇L(3w) = ∇L(w)/3
    assert math.isclose(df.attrs["loss"], df.attrs["loss_scaled"], rel_tol=1e-12)  # L(3w) = L(w)
    assert df.attrs["c"] == 3.0


def test_lemma1_holds_up_to_bn_eps_on_the_trained_network():
    """As trained (float32, BN ε = 1e-5) the identities hold to ~ε/σ²: far below what a scale-variant tensor shows
    (|cos| of a random direction is ~1/√d ≈ 0.01-0.2 for these tensors)."""
    torch.manual_seed(0)
    model = create("resnet18", num_classes=10, scale_invariant=True, width=4)
    df = check_scale_invariance(model, *_batch(dtype=torch.float32), c=3.0)
    assert df.cos_w_grad.abs().max() < 1e-4
    assert df.grad_ratio.sub(1 / 3).abs().max() < 1e-2
    assert math.isclose(df.attrs["loss"], df.attrs["loss_scaled"], rel_tol=1e-4)


def test_model_is_left_untouched():
    torch.manual_seed(0)
    model = create("resnet18", num_classes=10, scale_invariant=True, width=4).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    check_scale_invariance(model, *_batch(dtype=torch.float32))
    assert not model.training
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_tensor_that_is_not_scale_invariant_fails_the_check():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10)).double()
    model.scale_invariant_names = ["1.weight"]  # a plain linear layer: not followed by a normalization
    df = check_scale_invariance(model, *_batch(), c=3.0)
    assert df.cos_w_grad.abs().max() > 1e-3
    assert not math.isclose(df.attrs["loss"], df.attrs["loss_scaled"], rel_tol=1e-6)


def test_bad_arguments():
    model = create("resnet18", num_classes=10, scale_invariant=True, width=4)
    with pytest.raises(ValueError, match="c must be > 0"):
        check_scale_invariance(model, *_batch(dtype=torch.float32), c=0.0)
    with pytest.raises(ValueError, match="scale_invariant_names"):
        check_scale_invariance(nn.Linear(2, 2), torch.zeros(1, 2), torch.zeros(1, dtype=torch.long))
