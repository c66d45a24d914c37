"""Angular update, tuning factor and the per-epoch tracker of Yun et al. ECCV 2022 (Eq. 9-11, 18, 27)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from repro_lib.angular import AngularTracker, angle, predicted_angular_update, tuning_factor
from repro_lib.models import create


def _rotated(a: torch.Tensor, theta: float, seed: int = 0) -> torch.Tensor:
    """A float64 vector at exactly ``theta`` from ``a`` (and of a different norm)."""
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(a.shape, generator=g, dtype=torch.float64)
    u -= (u.flatten() @ a.flatten()) / (a.flatten() @ a.flatten()) * a
    return 2.5 * (math.cos(theta) * a / a.norm() + math.sin(theta) * u / u.norm())


# ---------------------------------------------------------------- angle


def test_angle_identities():
    g = torch.Generator().manual_seed(0)
    a = [torch.randn(4, 3, 3, 3, generator=g), torch.randn(10, generator=g)]
    assert angle(a, a) == 0.0
    assert angle(a, [-t for t in a]) == pytest.approx(math.pi, abs=1e-12)
    # orthogonal collections: disjoint supports
    b = [torch.zeros_like(a[0]), torch.randn(10, generator=g)]
    c = [torch.randn(4, 3, 3, 3, generator=g), torch.zeros(10)]
    assert angle(b, c) == pytest.approx(math.pi / 2, abs=1e-12)
    # invariant to scaling each argument
    d = [torch.randn_like(t) for t in a]
    base = angle(a, d)
    assert angle([4.0 * t for t in a], [0.125 * t for t in d]) == pytest.approx(base, rel=1e-12)  # exact in fp32
    assert angle([3.0 * t for t in a], [0.01 * t for t in d]) == pytest.approx(base, rel=1e-6)
    # a tensor and a list of tensors both work; the collection is flattened and concatenated
    flat_a, flat_d = torch.cat([t.flatten() for t in a]), torch.cat([t.flatten() for t in d])
    assert angle(flat_a, flat_d) == pytest.approx(base, rel=1e-12)
    ref = math.acos(float(flat_a.double() @ flat_d.double() / (flat_a.double().norm() * flat_d.double().norm())))
    assert base == pytest.approx(ref, rel=1e-10)  # Eq. 11 at a moderate angle


@pytest.mark.parametrize("theta", [1e-9, 1e-6, 1e-3, 0.5, 2.0, math.pi - 1e-6])
def test_angle_float64_accuracy(theta):
    a = torch.randn(3000, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    b = _rotated(a, theta)
    assert angle(a, b) == pytest.approx(theta, rel=1e-8)
    # the same vectors split into tensors of different norms: concatenation, not an average of per-tensor angles
    assert angle([a[:1000], a[1000:]], [b[:1000], b[1000:]]) == pytest.approx(theta, rel=1e-8)


def test_angle_beats_naive_arccos_for_tiny_angles():
    a = torch.randn(3000, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    b = _rotated(a, 1e-9)
    naive = math.acos(min(1.0, float(a @ b / (a.norm() * b.norm()))))
    assert abs(naive - 1e-9) > 1e-10          # arccos of Eq. 11 loses the angle in float64 ...
    assert angle(a, b) == pytest.approx(1e-9, rel=1e-6)  # ... Kahan's formula does not


def test_angle_errors():
    with pytest.raises(ValueError):
        angle([torch.ones(3)], [torch.ones(4)])
    with pytest.raises(ValueError):
        angle(torch.zeros(3), torch.ones(3))


# ---------------------------------------------------------------- tuning factor (Eq. 27)


def test_tuning_factor_paper_values():
    # base cell of every table: N=50k, B=128, lr 0.1, wd 1e-4, momentum 0.9
    assert tuning_factor(50000, 128, 0.1, 1e-4, 0.9) == pytest.approx(0.0390625, rel=1e-12)  # 5/128
    # yellow cells of Table 1 (10/128): N=50000 with lr 0.2; N=3125 with lr 3.2
    assert tuning_factor(50000, 128, 0.2, 1e-4, 0.9) == pytest.approx(10 / 128, rel=1e-12)
    assert tuning_factor(3125, 128, 3.2, 1e-4, 0.9) == pytest.approx(10 / 128, rel=1e-12)
    # Sec. 5: plain SGD with lr 1 has the same tuning factor as SGDM with lr 0.1
    assert tuning_factor(50000, 128, 1.0, 1e-4, 0.0) == pytest.approx(tuning_factor(50000, 128, 0.1, 1e-4, 0.9))
    # Table 9 (Tiny ImageNet, B=256): the yellow 5/32 at N=100000 is lr 0.4
    assert tuning_factor(100000, 256, 0.8, 1e-4, 0.9) == pytest.approx(5 / 16)  # lr 0.8 -> 2x the yellow 5/32
    assert tuning_factor(100000, 256, 0.4, 1e-4, 0.9) == pytest.approx(5 / 32)
    for bad in [dict(n=0), dict(batch_size=0), dict(momentum=1.0), dict(lr=-1.0)]:
        kw = dict(n=50000, batch_size=128, lr=0.1, weight_decay=1e-4, momentum=0.9) | bad
        with pytest.raises(ValueError):
            tuning_factor(**kw)


def test_predicted_angular_update():
    tf = 10 / 128
    assert predicted_angular_update(tf) == pytest.approx(math.acos(1 - tf), rel=1e-15)
    assert predicted_angular_update(0.0) == 0.0
    out = predicted_angular_update([0.1, 1.0, 2.5])
    assert out[0] == pytest.approx(math.acos(0.9)) and out[1] == pytest.approx(math.pi / 2) and np.isnan(out[2])


# ---------------------------------------------------------------- tracker


def _train_steps(model, steps, lr=0.5, wd=5e-3, momentum=0.9, seed=0):
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr, momentum=momentum,
                          weight_decay=wd)
    for _ in range(steps):
        x = torch.randn(24, 3, 8, 8, generator=g)
        y = torch.randint(0, 5, (24,), generator=g)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()


def _direct(before, after):
    a = torch.cat([t.double().flatten() for t in before])
    b = torch.cat([t.double().flatten() for t in after])
    return math.acos(float(a @ b / (a.norm() * b.norm()))), float(b.norm())


@pytest.mark.parametrize("si", [True, False])
def test_tracker_against_direct_computation(si):
    torch.manual_seed(0)
    model = create("resnet18", num_classes=5, scale_invariant=si, width=4, ghost_batch=8)
    tracker = AngularTracker(model)
    assert tracker.names == model.scale_invariant_names
    named = dict(model.named_parameters())
    tracker.start_epoch()
    before = [named[n].detach().clone() for n in tracker.names]
    _train_steps(model, 4)
    after = [named[n].detach().clone() for n in tracker.names]
    rec = tracker.end_epoch(lr=0.5, n=96, batch_size=24)
    theta, norm = _direct(before, after)
    assert rec["angular_update"] == pytest.approx(theta, rel=1e-6) and rec["angular_update"] > 1e-3
    assert rec["weight_norm"] == pytest.approx(norm, rel=1e-10)
    assert rec["effective_lr"] == pytest.approx(0.5 / norm ** 2, rel=1e-10)               # Eq. 9
    assert rec["effective_lr_epoch"] == pytest.approx(0.5 * 96 / (norm ** 2 * 24), rel=1e-10)  # Eq. 10
    assert list(rec["angular_update_per_tensor"]) == tracker.names
    for n, b, a in zip(tracker.names, before, after):
        assert rec["angular_update_per_tensor"][n] == pytest.approx(_direct([b], [a])[0], rel=1e-6)
    # the snapshot is a copy, not a view of the live parameters
    tracker.start_epoch()
    _train_steps(model, 1, seed=1)
    assert tracker.end_epoch(0.5, 96, 24)["angular_update"] > 0


def test_tracker_names_subset_state_dict_and_errors():
    torch.manual_seed(0)
    model = create("resnet18", num_classes=5, scale_invariant=True, width=4, ghost_batch=8)
    names = model.scale_invariant_names[:3]
    tracker = AngularTracker(model, names=names)
    assert tracker.names == names
    with pytest.raises(RuntimeError):
        tracker.end_epoch(0.1, 10, 2)
    with pytest.raises(ValueError):
        AngularTracker(model, names=["nope.weight"])
    tracker.start_epoch()
    _train_steps(model, 2)
    state = tracker.state_dict()
    resumed = AngularTracker(model, names=names)
    resumed.load_state_dict(state)            # resume mid-epoch: same start snapshot
    _train_steps(model, 2, seed=1)
    r1, r2 = tracker.end_epoch(0.1, 100, 10), resumed.end_epoch(0.1, 100, 10)
    assert r1 == r2
    with pytest.raises(ValueError):
        AngularTracker(model).load_state_dict(state)
    # a DataParallel wrapper is unwrapped: same names, same (shared) tensors
    wrapped = AngularTracker(torch.nn.DataParallel(model))
    assert wrapped.names == model.scale_invariant_names
    assert all(a is b for a, b in zip(wrapped.params, AngularTracker(model).params))
