"""The maps of Sec. 2 of Li & Arora (ICLR 2020) and the BN + WD toy of Sec. 3, float64.

Lemmas 2.2, 2.4, 2.7, 2.8, B.3 as identities between maps on a scale-invariant loss; Thm 2.1 and 2.9 as compositions
of maps; the map GD_ρ of Sec. 2.2 is torch.optim.SGD's update (so the theorems apply to torch as is); the toy's three
cases and the iteration bound of Thm 3.1."""
import math

import pytest
import torch
import torch.nn.functional as F

from repro_lib.papers.li_arora import exp_lr as E
from repro_lib import schedules as S


@pytest.fixture(scope="module")
def grad_fn():
    """∇L_t(θ) of ScaleInvariantMLP on fixed batches, θ flat (both weight matrices jointly)."""
    torch.set_num_threads(1)
    model, batches = E.ScaleInvariantMLP(seed=3), E.make_batches(seed=3)
    shapes = [p.shape for p in model.parameters()]
    theta0 = E.flat_params(model)

    def grad(theta, t):
        ws = [w.view(s).requires_grad_(True) for w, s in zip(theta.detach().clone().split([s.numel() for s in shapes]), shapes)]
        x, y = batches[t % len(batches)]
        z = F.relu(model._bn(x @ ws[0].T))
        z = F.relu(model._bn(z @ ws[1].T))
        loss = F.cross_entropy(z @ model.head.T, y)
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, ws)])

    return grad, theta0


def _close(a, b, tol=1e-11):
    for u, v in zip(a, b):
        if isinstance(u, torch.Tensor):
            assert (u - v).norm() <= tol * max(v.norm(), 1.0)
        else:
            assert u == pytest.approx(v, rel=tol)


def test_lemma13_on_the_toy_net(grad_fn):
    grad, th = grad_fn
    g = grad(th, 0)
    assert abs(g @ th) < 1e-12 * g.norm() * th.norm()
    assert torch.allclose(grad(3.0 * th, 0) * 3.0, g, rtol=1e-10, atol=1e-14)


def test_lemma22_and_lemma24(grad_fn):
    grad, th = grad_fn
    rho, eta, c = 0.97, 0.1, 2.3
    state = (th, eta)
    # Lemma 2.2: GD_ρ = Π₁^ρ ∘ Π₂^ρ ∘ GD ∘ Π₂^{1/ρ}
    _close(E.gd(rho, grad, 0)(state), E.compose(E.pi1(rho), E.pi2(rho), E.gd(1.0, grad, 0), E.pi2(1 / rho))(state))
    # Lemma 2.4: GD_ρ commutes with the equivalent scaling Π₁^c ∘ Π₂^{c²} (needs scale invariance)
    sc = E.equivalent_scaling(c, momentum=False)
    _close(E.gd(rho, grad, 0)(sc(state)), sc(E.gd(rho, grad, 0)(state)))


def test_thm21_as_maps(grad_fn):
    """GD with WD for t steps ~ plain GD with LR η(1−λη)^{−2s−1}: θ̃_t = ρ^{−t} θ_t."""
    grad, th = grad_fn
    eta, lam, T = 0.1, 0.05, 60
    rho = 1 - lam * eta
    wd, ex = (th, eta), E.pi2(1 / rho)((th, eta))  # first LR ρ^{−1}η
    for t in range(T):
        wd = E.gd(rho, grad, t)(wd)
        ex = E.gd(1.0, grad, t)(ex)
        ex = E.pi2(rho ** -2)(ex)
    assert (rho ** -T * wd[0] - ex[0]).norm() < 1e-10 * ex[0].norm()


def test_lemma27_lemma28_b3(grad_fn):
    grad, th = grad_fn
    gamma, rho, eta, c = 0.9, 0.998, 0.1, 1.7
    th_b = th + 0.01 * torch.randn(th.shape, generator=torch.Generator().manual_seed(0), dtype=th.dtype)
    state = (th, eta, th_b, eta)
    # Lemma 2.7: GD_ρ commutes with Π₁^c ∘ Π₂^{c²} ∘ Π₃^c ∘ Π₄^{c²}
    sc = E.equivalent_scaling(c)
    _close(E.gd_momentum(rho, gamma, grad, 0)(sc(state)), sc(E.gd_momentum(rho, gamma, grad, 0)(state)))
    # Lemma 2.8: α + γ/α = ρ + γ ⇒ GD_ρ = Π₁^α ∘ Π₂^α ∘ Π₄^α ∘ GD ∘ Π₂^{1/α} ∘ Π₃^α ∘ Π₄^α on states with η' = η
    a = S.exp_lr_alpha(eta, (1 - rho) / eta, gamma)
    assert a + gamma / a == pytest.approx(rho + gamma, rel=1e-14)
    rhs = E.compose(E.pi1(a), E.pi2(a), E.pi4(a), E.gd_momentum(1.0, gamma, grad, 0), E.pi2(1 / a), E.pi3(a), E.pi4(a))
    _close(E.gd_momentum(rho, gamma, grad, 0)(state), rhs(state))
    # Lemma B.3: GD ∘ N = GD, and N keeps the velocity (θ − θ')/η'
    odd = (th, eta, th_b, 0.3)
    _close(E.gd_momentum(rho, gamma, grad, 0)(E.canonicalize(odd)), E.gd_momentum(rho, gamma, grad, 0)(odd))
    n = E.canonicalize(odd)
    assert n[3] == eta and torch.allclose((n[0] - n[2]) / n[3], (th - th_b) / 0.3, rtol=1e-12)


def test_gd_momentum_map_is_torch_sgd(grad_fn):
    """Def. 1.2 = PyTorch's form, also across LR changes: iterate GD_ρ on (θ, η, θ', η') against torch.optim.SGD."""
    grad, th = grad_fn
    gamma, lam = 0.9, 5e-3
    lrs = [0.1] * 20 + [0.01] * 20 + [0.3] * 20
    p = torch.nn.Parameter(th.clone())
    opt = torch.optim.SGD([p], lr=lrs[0], momentum=gamma, weight_decay=lam)
    state = (th.clone(), lrs[0], th.clone(), lrs[0])  # θ_{−1} = θ_0: v_0 = 0
    for t, eta in enumerate(lrs):
        state = (state[0], eta, state[2], state[3])
        state = E.gd_momentum(1 - lam * eta, gamma, grad, t)(state)
        opt.param_groups[0]["lr"] = eta
        opt.zero_grad()
        p.grad = grad(p.detach(), t)
        opt.step()
    assert (p.detach() - state[0]).norm() < 1e-12 * state[0].norm()


def test_thm29_as_maps(grad_fn):
    grad, th = grad_fn
    gamma, eta, lam, T = 0.9, 0.1, 1e-2, 100
    a = S.exp_lr_alpha(eta, lam, gamma)
    wd = (th, eta, th, eta)
    ex = (th, eta / a, a * th, a * eta)  # (θ̃_0, η̃_0, θ̃_{−1}, η̃_{−1}) = Π₂^{1/α} Π₃^α Π₄^α (θ0, η0, θ0, η0)
    for t in range(T):
        wd = E.gd_momentum(1 - lam * eta, gamma, grad, t)(wd)
        ex = E.gd_momentum(1.0, gamma, grad, t)(ex)
        ex = E.pi2(a ** -2)(ex)  # η̃_{t+1} = α^{−2} η̃_t
    assert (a ** -T * wd[0] - ex[0]).norm() < 1e-10 * ex[0].norm()
    assert ex[1] == pytest.approx(eta * a ** (-2 * T - 1), rel=1e-12)


# ---------------------------------------------------------------------------------------------- Sec. 3 toy
def test_bn_wd_toy_three_cases():
    kw = dict(m=10, batch_size=128, lr=0.1, weight_decay=0.1, steps=1200, n_runs=6, seed=0)
    res = {c: E.bn_wd_toy(c, **kw) for c in E.TOY_CASES}
    late = {c: r["error"][-300:].mean().item() for c, r in res.items()}
    assert late["wd"] < 0.02 and late["bn"] < 0.02  # Cases 1 and 2 reach low training error
    assert late["bn+wd"] > 2 * max(late["wd"], late["bn"])  # Case 3 does not
    assert res["bn"]["norm"][-1].min() > 1.0  # BN alone: ‖w‖ grows (Pythagoras, Lemma 1.3)
    assert res["bn+wd"]["norm"][-1].max() < 0.5  # BN + WD: ‖w‖ shrinks to an equilibrium
    eps, delta = 0.06, 0.01
    bound = E.thm31_iteration_bound(0.1, 0.1, eps, res["bn+wd"]["norm"][200].max().item(), 128, 10, delta)
    assert E.longest_run_below(res["bn+wd"]["angle"][200:], eps).max() <= bound
    assert (res["bn+wd"]["angle"][200:] > eps).any(0).all()  # it keeps returning above ε


def test_thm31_bound_formula():
    b = E.thm31_iteration_bound(0.1, 0.1, 0.05, 1.0, 1000, 10, 0.01)
    t1 = math.log(64 * 0.05 * math.sqrt(1000) / (0.1 * math.sqrt(8))) / (2 * (0.01 - 0.005))
    assert b == pytest.approx(t1 + 9 * math.log(100), rel=1e-12)
    with pytest.raises(ValueError, match="2 eps"):
        E.thm31_iteration_bound(0.1, 0.01, 0.1, 1.0, 1000, 10, 0.01)
    with pytest.raises(ValueError, match="case"):
        E.bn_wd_toy("both")
    assert E.longest_run_below(torch.tensor([[0.1], [0.0], [0.0], [0.2], [0.0]]), 0.05).tolist() == [2]


def test_bn_eval_scale_bias_matches_torch_running_stats():
    """Feed BN inputs growing by α^−1 per step (the exponential schedule's weights) through nn.BatchNorm1d in training
    mode; the running variance then underestimates the next step's variance by the factor of bn_eval_scale_bias."""
    alpha, steps = 0.98, 400
    bn = torch.nn.BatchNorm1d(3, momentum=0.1, eps=0.0 + 1e-30).double()
    g = torch.Generator().manual_seed(0)
    z = torch.randn(256, 3, generator=g, dtype=torch.float64)
    z = (z - z.mean(0)) / z.std(0)  # unbiased variance exactly 1 per channel
    for t in range(steps):
        bn(z * alpha ** (-t))
    true_var = alpha ** (-2 * steps)  # the weights after the last step
    ratio = (true_var / bn.running_var).sqrt()
    assert torch.allclose(ratio, torch.full_like(ratio, E.bn_eval_scale_bias(alpha, 0.1)), rtol=1e-9)
    assert E.bn_eval_scale_bias(S.exp_lr_alpha(0.1, 5e-4, 0.9)) == pytest.approx(1.005, abs=1e-3)  # paper: negligible
    assert E.bn_eval_scale_bias(1.0) == 1.0


def test_bn_eval_scale_bias_of_the_cpu_profile():
    """The numbers the docstring quotes for the cpu profile of the PreResNet notebook (η 0.1, λ 0.0122, γ 0.9)."""
    cfg = E.preresnet_plan("cpu").cfg.iloc[0]
    a = S.exp_lr_alpha(cfg.lr, cfg.weight_decay, cfg.momentum)
    assert cfg.weight_decay == pytest.approx(5e-4 * 50_000 / 2_048)
    assert a == pytest.approx(0.98601, abs=5e-6)
    assert E.bn_eval_scale_bias(a) == pytest.approx(1.134, abs=5e-4)


# ---------------------------------------------------------------------------------------------- fit + rescaling
# λη = 2e-3 and 16 steps per epoch: the LR grows 2.36x per epoch, so with rescale_above = 4 fit rescales at the
# starts of epochs 3 and 5 (k = 1, then 2)
RESCALING = dict(model="preresnet32", width=4, synthetic=True, n=128, n_test=50, batch_size=8, ghost_batch=8,
                 lr=0.1, weight_decay=0.02, momentum=0.9, schedule="exp", schedule_kwargs={"rescale_above": 4.0},
                 num_epochs=5, device="cpu", profile="smoke")


def test_fit_logs_the_rescale_exponent_and_unscaled_curves_are_continuous():
    """A fit run that rescales (Lemma 2.7) logs k per epoch; ``unscale_history`` turns its LR and ‖w‖ into those of
    the same run without rescaling: the LR is exactly η̃ of the schedule, ‖w‖ equal up to BN's ε (which breaks exact
    scale invariance slightly) -- while the logged values drop by 4^k and 2^k. A run without an exponential schedule
    has no such key."""
    import pandas as pd

    from repro_lib.config import RunConfig
    from repro_lib.train import fit

    cfg = RunConfig(**RESCALING)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        resc = pd.DataFrame(fit(cfg, progress=False)["history"])
        plain = pd.DataFrame(fit(cfg.replace(schedule_kwargs={"rescale_above": None}), progress=False)["history"])
        step = pd.DataFrame(fit(cfg.replace(schedule="step", schedule_kwargs={}, num_epochs=1), progress=False)["history"])
    finally:
        torch.set_default_dtype(old)
    assert resc.exp_lr_log2_rescale.tolist() == [0, 0, 1, 1, 2]
    assert plain.exp_lr_log2_rescale.tolist() == [0] * 5
    assert "exp_lr_log2_rescale" not in step  # other schedules keep their history keys
    sched = S.build_schedule(cfg, 16)
    assert [sched.log2_rescale(16 * e) for e in range(5)] == resc.exp_lr_log2_rescale.tolist()
    u, p = E.unscale_history(resc), E.unscale_history(plain)
    eta = [sched.lr(16 * e + 15) for e in range(5)]  # η̃ at the last step of each epoch
    assert u.lr.tolist() == pytest.approx(eta, rel=1e-12) and p.lr.tolist() == pytest.approx(eta, rel=1e-12)
    assert (u.lr.iloc[1:].values / u.lr.iloc[:-1].values) == pytest.approx([eta[1] / eta[0]] * 4, rel=1e-12)
    # the epoch after the first rescaling agrees to 1e-3; later the tiny ε differences grow (chaotic training), but
    # a wrong k would be off by a factor 2^±1
    assert u.weight_norm[:3].tolist() == pytest.approx(p.weight_norm[:3].tolist(), rel=1e-3)
    assert u.weight_norm.tolist() == pytest.approx(p.weight_norm.tolist(), rel=0.1)
    raw_ratio = resc.weight_norm.iloc[1:].values / resc.weight_norm.iloc[:-1].values
    assert raw_ratio.min() < 0.7  # the logged norm drops at a rescaling ...
    assert (u.weight_norm.iloc[1:].values / u.weight_norm.iloc[:-1].values).min() > 1.0  # ... the unscaled one grows
    # η/‖w‖² needs no unscaling: the logged value is also η̃/‖θ̃‖²
    assert resc.effective_lr.tolist() == pytest.approx((u.lr / u.weight_norm ** 2).tolist(), rel=1e-12)
    assert E.unscale_history(step).lr.tolist() == step.lr.tolist()


def test_fit_resumes_an_exponential_schedule_exactly(tmp_path, killed_at_epoch):
    """Interrupted after epoch 3 (one rescaling done, its k in the optimizer checkpoint) and resumed, the run rescales
    once more and its history equals the uninterrupted run's bit for bit (apart from wall-clock seconds)."""
    from repro_lib.config import RunConfig
    from repro_lib.store import Store
    from repro_lib.train import fit

    cfg = RunConfig(**RESCALING)
    ref = fit(cfg, progress=False)
    store = Store(tmp_path)
    with killed_at_epoch(4):
        fit(cfg, store=store, progress=False)
    ck = store.load_checkpoint(cfg)
    assert ck["epoch"] == 3 and ck["optimizer"]["param_groups"][0]["exp_lr_log2_rescale"] == 1
    resumed = fit(cfg, store=store, progress=False)
    assert [h["exp_lr_log2_rescale"] for h in resumed["history"]] == [0, 0, 1, 1, 2]
    strip = lambda hs: [{k: v for k, v in h.items() if k != "seconds"} for h in hs]  # noqa: E731
    assert strip(resumed["history"]) == strip(ref["history"])
    assert resumed["test_acc"] == ref["test_acc"]


def test_compare_to_weight_decay_pairs_runs_by_seed_and_epoch():
    import pandas as pd

    rows = []
    for label, acc, elr in (("step decay + WD", 50.0, 1e-3), ("TEXP", 52.5, 2e-3), ("TEXP (no correction)", 47.0, 1e-3),
                            ("TEXP--", 10.0, 1.0)):
        for seed in (0, 1):
            for e in (1, 2):
                rows.append({"label": label, "seed": seed, "epoch": e, "train_acc": acc + e * seed,
                             "test_acc": acc + 1 if e == 2 else float("nan"), "effective_lr": elr})
    rows.append({"label": "TEXP", "seed": 2, "epoch": 1, "train_acc": 0.0, "test_acc": 0.0, "effective_lr": 1.0})
    t = E.compare_to_weight_decay(pd.DataFrame(rows))
    assert t[["run", "seed"]].values.tolist() == [["TEXP", 0], ["TEXP", 1], ["TEXP (no correction)", 0],
                                                  ["TEXP (no correction)", 1]]  # seed 2 has no partner
    assert t["max |Δ train acc|"].tolist() == [2.5, 2.5, 3.0, 3.0]
    assert t["Δ final test acc"].tolist() == [2.5, 2.5, -3.0, -3.0]
    assert t["max |log η/‖w‖² ratio|"].tolist() == pytest.approx([math.log(2)] * 2 + [0.0] * 2)
