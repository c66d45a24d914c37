"""PreResNet-32 (Li & Arora 2020 Sec. 4, App. E): structure, joint scale invariance of the scale-invariant net and the
Lemma 1.3 identities ⟨∇L, θ⟩ = 0 and ∇L(cθ) = ∇L(θ)/c in float64 (BN ε = 1e-30: torch refuses ε = 0; so they hold to rounding)."""
import pytest
import torch
import torch.nn.functional as F

from repro_lib.models import create, scale_invariant_params


def _model(si=True, width=4, dtype=torch.float64, **kw):
    torch.manual_seed(0)
    return create("preresnet32", num_classes=10, scale_invariant=si, width=width, **kw).to(dtype)


def _data(n=16, dtype=torch.float64):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 3, 16, 16, generator=g, dtype=dtype), torch.randint(0, 10, (n,), generator=g)


def _scaled(model, c, names=None):
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.requires_grad and (names is None or n in names):
                p.mul_(c)


def _loss_grads(model, x, y):
    model.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


def test_structure_and_parameter_count():
    si = create("preresnet32", num_classes=10, scale_invariant=True, width=16)
    plain = create("preresnet32", num_classes=10, scale_invariant=False, width=16)
    trainable = [n for n, p in si.named_parameters() if p.requires_grad]
    assert len(trainable) == 33 and all(n.endswith("weight") and "conv" in n or "shortcut.1" in n for n in trainable)
    # 3·16·9 stem + stage convs + two 1x1 shortcut projections
    n_conv = 3 * 16 * 9 + 9 * (10 * 16 * 16 + (16 * 32 + 9 * 32 * 32) + (32 * 64 + 9 * 64 * 64)) + 16 * 32 + 32 * 64
    assert sum(p.numel() for p in si.parameters() if p.requires_grad) == n_conv == 463792
    assert sorted(si.scale_invariant_names) == sorted(trainable)
    assert "fc.weight" in dict(si.named_buffers()) and not any("bn" in n for n in trainable)
    assert len(plain.scale_invariant_names) == 15 and plain.fc.weight.requires_grad
    assert all(n.endswith("conv1.weight") for n, _ in scale_invariant_params(plain))
    shortcuts = [i for i, b in enumerate(si.blocks) if b.shortcut is not None]
    assert shortcuts == [5, 10]  # first block of stages 2 and 3: BN → 1x1 conv (App. E)
    assert si(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    with pytest.raises(ValueError, match="6n\\+2"):
        create("preresnet32", num_classes=10, depth=30)
    assert len(create("preresnet32", num_classes=10, depth=20).blocks) == 9


@pytest.mark.parametrize("ghost_batch", [64, 4])
def test_joint_scale_invariance_float64(ghost_batch):
    model = _model(ghost_batch=ghost_batch, bn_eps=1e-30)
    x, y = _data()
    out = model(x)
    _scaled(model, 3.7)
    assert torch.allclose(model(x), out, rtol=1e-12, atol=1e-12)
    # scaling one stream-writing tensor alone is *not* invariant (only joint scaling is)
    _scaled(model, 5.0, names={"blocks.0.conv2.weight"})
    assert (model(x) - out).abs().max() > 1e-3


def test_lemma13_identities_float64():
    model = _model(bn_eps=1e-30)
    x, y = _data()
    _, g = _loss_grads(model, x, y)
    params = dict(model.named_parameters())
    dot = sum((g[n] * params[n]).sum() for n in g)
    gn = torch.sqrt(sum((v ** 2).sum() for v in g.values()))
    pn = torch.sqrt(sum((params[n] ** 2).sum() for n in g))
    assert abs(dot) < 1e-11 * gn * pn  # (1) ⟨∇L, θ⟩ = 0 jointly
    for i in range(15):  # the first conv of each block is individually scale-invariant
        n = f"blocks.{i}.conv1.weight"
        assert abs((g[n] * params[n]).sum()) < 1e-11 * g[n].norm() * params[n].norm()
    assert abs((g["blocks.0.conv2.weight"] * params["blocks.0.conv2.weight"]).sum()) > 1e-6 * gn * pn
    c = 2.5
    _scaled(model, c)
    _, gc = _loss_grads(model, x, y)
    for n in g:  # (2) ∇L(cθ) = ∇L(θ)/c
        assert torch.allclose(gc[n] * c, g[n], rtol=1e-9, atol=1e-12 * gn.item())


def test_default_eps_is_approximately_invariant_and_plain_net_is_not():
    x, y = _data()
    model = _model()  # ε = 1e-5: invariance holds up to ε / Var
    out = model(x)
    _scaled(model, 10.0)
    assert (model(x) - out).abs().max() < 1e-4
    plain = _model(si=False)
    out = plain(x)
    _scaled(plain, 3.0)  # affine BN and trainable FC: not scale-invariant jointly
    assert (plain(x) - out).abs().max() > 1e-2


def test_eval_mode_and_float32_forward_backward():
    model = _model(dtype=torch.float32, width=8)
    x, y = _data(dtype=torch.float32)
    loss, g = _loss_grads(model, x, y)
    assert torch.isfinite(torch.tensor(loss)) and all(torch.isfinite(v).all() for v in g.values())
    model.eval()
    assert model(x).shape == (16, 10)


def test_sec4_plan_runs_exact_and_schedule_only_variants():
    """Every profile runs TEXP and exp-cosine both exact (momentum correction + initial velocity) and as the paper's
    schedule alone (no correction, zero initial velocity); the construction column says which is which."""
    from repro_lib.papers.li_arora import exp_lr as E
    from repro_lib import schedules as S

    for profile in ("smoke", "cpu", "gpu", "paper"):
        plan = E.preresnet_plan(profile).drop_duplicates("label").set_index("label")
        for exact, bare in (("TEXP", "TEXP (no correction)"), ("exp-cosine", "exp-cosine (no correction)")):
            assert plan.construction[exact] == "exact" and plan.construction[bare] == "schedule only"
            a, b = plan.cfg[exact], plan.cfg[bare]
            assert a.schedule == b.schedule and a.replace(schedule_kwargs=b.schedule_kwargs) == b
            assert dict(b.schedule_kwargs).items() >= {"momentum_correction": False, "init_velocity": False}.items()
            sa, sb = S.build_schedule(a, 16), S.build_schedule(b, 16)
            assert sb.correction_steps() == [] and sa.correction_steps()[0] == 0 and len(sa.correction_steps()) > 1
            assert sa.lr(100) == sb.lr(100)  # the same LR schedule
        assert plan.construction["step decay + WD"] == "weight decay" and plan.construction["TEXP--"] == "exact"
    assert len(E.preresnet_plan("paper")) == 27  # 9 runs x 3 seeds


def test_cpu_plan_gives_more_seeds_to_the_noisy_contrasts():
    """cpu: every run on seeds 0..6 at least; ``seeds_by_run`` extends the schedules of the contrasts whose per-seed
    differences spread most, always as one run of seeds from 0, so that every contrast pairs the seeds both runs
    share; every other profile has one seed list for all runs."""
    from repro_lib.papers.li_arora import exp_lr as E
    from repro_lib.papers.li_arora import report as R

    plan = E.preresnet_plan("cpu")
    seeds = plan.groupby("label").seed.apply(sorted).to_dict()
    assert all(s == list(range(len(s))) and len(s) >= 7 for s in seeds.values())
    assert {k: len(v) for k, v in seeds.items()} == {
        "step decay + WD": 19, "cosine + WD": 19, "TEXP": 15, "TEXP--": 15, "exp-cosine": 9,
        "TEXP (no correction)": 15, "exp-cosine (no correction)": 7}
    for _, a, b, _rel in R.CLAIMS:  # the seed pairs of a contrast: the shorter run's seeds
        if a in seeds and b in seeds:
            assert set(seeds[a]) & set(seeds[b]) == set(range(min(len(seeds[a]), len(seeds[b]))))
    assert len(plan) == 99 and len(plan.drop_duplicates("cfg")) == 99
    for profile in ("smoke", "gpu", "paper"):
        assert E.preresnet_plan(profile).groupby("label").seed.nunique().nunique() == 1


def test_overflow_rescaling_in_the_papers_setting():
    """With the default threshold 2^60 the rescaling never triggers for TEXP, TEXP-- and exp-cosine over 160 epochs
    but does for the fixed-exponent runs of Fig. 4 (pure schedule arithmetic)."""
    from repro_lib.papers.li_arora import exp_lr as E

    t = E.exponential_rescale_table("gpu").set_index("run")
    for run in ("TEXP", "TEXP (no correction)", "TEXP--", "exp-cosine", "exp-cosine (no correction)"):
        assert t.loc[run, "final k"] == 0 and t.loc[run, "peak log2(η̃/η_0)"] < 48
    assert t.loc["exp (fixed exponent)", "peak log2(η̃/η_0)"] == pytest.approx(90.7, abs=0.05)
    assert t.loc["exp (fixed exponent) + ÷10", "peak log2(η̃/η_0)"] == pytest.approx(84.0, abs=0.05)
    assert t.loc["exp (fixed exponent)", "first rescaled epoch"] == 107
    assert t.loc["exp (fixed exponent) + ÷10", "first rescaled epoch"] == 113
    assert (t.loc[["exp (fixed exponent)", "exp (fixed exponent) + ÷10"], "final k"] == 30).all()
