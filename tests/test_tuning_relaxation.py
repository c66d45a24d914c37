"""The relaxation time ``repro_lib.tuning.relaxation_epochs`` derives (1/(4·TF) epochs for SGD with momentum and
coupled L2, 1/(2·TF) for AdamW), measured by ``repro_lib.angular.StepTracker`` on small runs: a linear layer in
front of a BatchNorm (a scale-invariant weight, Lemma 1) trained on random labels, whose gradient noise stays
about constant, started with its norm above equilibrium (from far below, the first steps are large and the norm settles faster
than the linear model says). The squared norm per epoch is fitted with the model's
own solution, ‖w‖⁴ − ‖w*‖⁴ ∝ e^{−t/τ} (SGD) and ‖w‖² − ‖w*‖² ∝ e^{−t/τ} (AdamW), and τ must lie within ±30 % of
the formula."""
import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy.optimize import curve_fit

from repro_lib import tuning
from repro_lib.angular import StepTracker

pytestmark = pytest.mark.usefixtures("one_thread")

N, B, D, K = 2048, 32, 32, 10


def _run(optimizer: str, tf: float, epochs: int, start: float, seed: int = 0):
    """‖w‖² at the start and after each epoch of a run that starts at ‖w‖² = ``start``; every batch is drawn afresh
    (random images, random labels: nothing to learn, so the gradient noise at unit norm stays the same)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(D, K, bias=False), nn.BatchNorm1d(K, affine=False))
    with torch.no_grad():
        model[0].weight.mul_(math.sqrt(start) / model[0].weight.norm())
    names = tuning.scale_invariant_parameters(model, torch.randn(256, D, generator=g),
                                              torch.randint(0, K, (256,), generator=g))
    assert names == ["0.weight"]
    if optimizer == "sgd":
        lr, mu = 0.1, 0.9
        wd = tuning.weight_decay_for(tf, n=N, batch_size=B, lr=lr, momentum=mu)
        opt = torch.optim.SGD(tuning.param_groups(model, names, weight_decay=wd), lr=lr, momentum=mu)
    else:
        lr = 1e-2
        wd = tuning.weight_decay_for(tf, n=N, batch_size=B, lr=lr, optimizer="adamw")
        opt = torch.optim.AdamW(tuning.param_groups(model, names, weight_decay=wd), lr=lr)
    tracker = StepTracker(opt, model, names, steps_per_epoch=N // B)  # no change to the loop below
    s0 = float(model[0].weight.detach().norm()) ** 2
    for _ in range(epochs * (N // B)):
        opt.zero_grad()
        F.cross_entropy(model(torch.randn(B, D, generator=g)), torch.randint(0, K, (B,), generator=g)).backward()
        opt.step()
    assert [h["epoch"] for h in tracker.history] == list(range(1, epochs + 1))
    s = np.array([s0] + [h["weight_norm"] ** 2 for h in tracker.history])
    return np.arange(epochs + 1, dtype=float), s


def _fit(t, v):
    (v_eq, amp, tau), _ = curve_fit(lambda t, a, b, c: a + b * np.exp(-t / c), t, v, p0=(v[-1], v[0] - v[-1], 2.0),
                                    maxfev=20000)
    return tau


def test_sgd_weight_norm_relaxes_in_one_over_four_tf_epochs():
    tf = 0.125
    expected = tuning.relaxation_epochs(tf)
    assert expected == pytest.approx(2.0)  # 1/(4 TF); the weight decay alone would give 1/(2 TF) = 4
    t, s = _run("sgd", tf, epochs=12, start=150.0)  # about 3x the equilibrium ‖w*‖² (48 here): from above
    tau = _fit(t, s ** 2)  # ‖w‖⁴: exactly exponential in the model of the derivation
    assert tau == pytest.approx(expected, rel=0.3)
    assert abs(tau - 2 * expected) > abs(tau - expected)  # 1/(4 TF), not the decay-only 1/(2 TF)


def test_adamw_weight_norm_relaxes_in_one_over_two_tf_epochs():
    tf = 0.125
    expected = tuning.relaxation_epochs(tf, optimizer="adamw")
    assert expected == pytest.approx(4.0)  # 1/(2 TF): Adam's step does not grow as the norm shrinks
    t, s = _run("adamw", tf, epochs=20, start=60.0)
    tau = _fit(t, s)
    assert tau == pytest.approx(expected, rel=0.3)


def test_the_step_tracker_measures_what_the_epoch_tracker_does():
    from repro_lib.angular import AngularTracker

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 4, bias=False), nn.BatchNorm1d(4), nn.Linear(4, 3))
    opt = torch.optim.SGD(tuning.param_groups(model, ["0.weight"], weight_decay=1e-3), lr=0.1, momentum=0.9)
    hooked = StepTracker(opt, model, ["0.weight"], steps_per_epoch=5)
    by_hand = AngularTracker(model, ["0.weight"])
    x, y = torch.randn(40, 8), torch.randint(0, 3, (40,))
    records = []
    for epoch in range(3):
        by_hand.start_epoch()
        for i in range(5):
            opt.zero_grad()
            F.cross_entropy(model(x[8 * i:8 * i + 8]), y[8 * i:8 * i + 8]).backward()
            opt.step()
        records.append(by_hand.end_epoch(0.1, 40, 8))
    assert len(hooked.history) == 3
    for h, r in zip(hooked.history, records):
        assert h["angular_update"] == r["angular_update"] and h["weight_norm"] == r["weight_norm"]
        assert h["effective_lr_epoch"] == pytest.approx(r["effective_lr_epoch"]) and h["lr"] == 0.1
    hooked.remove()
    opt.step()
    assert len(hooked.history) == 3 and hooked.steps == 15


def test_the_step_tracker_refuses_what_it_cannot_follow():
    model = nn.Sequential(nn.Linear(8, 4, bias=False), nn.BatchNorm1d(4))
    opt = torch.optim.SGD([model[1].weight], lr=0.1)
    with pytest.raises(ValueError, match="^names: "):
        StepTracker(opt, model, ["0.weight"], steps_per_epoch=2)
    with pytest.raises(ValueError, match="^steps_per_epoch: "):
        StepTracker(torch.optim.SGD(model.parameters(), lr=0.1), model, ["0.weight"], steps_per_epoch=0)
    assert math.isfinite(tuning.relaxation_epochs(1e-3))
