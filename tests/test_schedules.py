"""Exactness of Li & Arora's exponential LR schedules (ICLR 2020, Sec. 2) with torch.optim.SGD in float64.

A run with momentum γ, weight decay λ and a step-decay / constant / per-epoch-cosine LR must give the same network
function as the run without weight decay under the matching exponential schedule: θ̃_s = P_s θ_s (Thm 2.9: P_s = α^−s).
All checks compare the exponential run against P_s × the weight-decay run to 1e-9 relative over hundreds of steps.
"""
import math
from types import SimpleNamespace

import pytest
import torch

from repro_lib.papers.li_arora import exp_lr as E
from repro_lib import schedules as S

LR, WD, MOM, STEPS = 0.1, 1e-2, 0.9, 300
TOL = 1e-9


@pytest.fixture(scope="module")
def problem():
    torch.set_num_threads(1)
    return E.ScaleInvariantMLP(seed=0), E.make_batches(seed=0)


def _err(wd_run, exp_run, sched, steps):
    return E.equivalence_error(wd_run["theta"], exp_run["theta"],
                               [sched.log_weight_scale(s) for s in range(steps + 1)], exp_run["log2_rescale"])


@pytest.fixture(scope="module")
def step_decay(problem):
    model, batches = problem
    base = S.StepDecay(LR, STEPS, 1, milestones=(0.4, 0.7), factor=0.1)
    etas = [base.lr(s) for s in range(STEPS)]
    return etas, E.run_sgd(model, batches, STEPS, base, weight_decay=WD, momentum=MOM)


# ---------------------------------------------------------------------------------------------- α (Eq. 1)
def test_alpha_is_the_larger_root_and_matches_fig1():
    for lr, wd, mom in [(0.1, 5e-4, 0.9), (0.1, 1e-2, 0.9), (0.3, 1e-3, 0.5), (0.1, 1e-2, 0.0)]:
        a = S.exp_lr_alpha(lr, wd, mom)
        assert abs(a * a - (1 + mom - lr * wd) * a + mom) < 1e-15
        assert math.sqrt(mom) <= a <= 1  # Lemma B.1.4 (the larger root of z1 z2 = γ)
    assert S.exp_lr_alpha(0.1, 1e-2, 0.0) == pytest.approx(1 - 0.1 * 1e-2, abs=1e-16)  # Thm 2.1
    # Fig. 1: 0.1 × 1.481^t (t in epochs of 391 steps) = α^(−2·391)
    assert S.exp_lr_alpha(0.1, 5e-4, 0.9) ** (-2 * 391) == pytest.approx(1.481, abs=5e-4)
    with pytest.raises(ValueError, match="Remark 2.10"):
        S.exp_lr_alpha(0.1, 0.03, 0.9)  # λη = 3e-3 > (1 − √0.9)² ≈ 2.6e-3


def test_lr_formulas_eq6_eq8():
    etas = [0.1] * 10 + [0.01] * 10
    texp = S.TaperedExponential(etas, 5e-3, 0.9, mode="texp")
    tmm = S.TaperedExponential(etas, 5e-3, 0.9, mode="texp--")
    a0, a1 = S.exp_lr_alpha(0.1, 5e-3, 0.9), S.exp_lr_alpha(0.01, 5e-3, 0.9)
    assert texp.lr(0) == pytest.approx(0.1 / a0, rel=1e-14)  # η̃_0 = η_0 α^−1 (Thm 2.9)
    assert texp.lr(7) == pytest.approx(0.1 * a0 ** (-15), rel=1e-13)  # η α^(−2t−1)
    assert texp.lr(5) / texp.lr(4) == pytest.approx(a0 ** -2, rel=1e-13)
    assert texp.lr(10) / texp.lr(9) == pytest.approx(0.1 / (a1 * a0), rel=1e-13)  # Eq. 6 jump
    assert texp.lr(15) / texp.lr(14) == pytest.approx(a1 ** -2, rel=1e-13)
    assert tmm.lr(10) / tmm.lr(9) == pytest.approx(1 / (a1 * a0), rel=1e-13)  # Eq. 8: no instant decay
    fixed = S.TaperedExponential(etas, 5e-3, 0.9, mode="fixed")  # Fig. 4: first exponent, instant decay kept
    assert fixed.lr(10) / fixed.lr(9) == pytest.approx(0.1 * a0 ** -2, rel=1e-13)
    assert fixed.lr(15) / fixed.lr(14) == pytest.approx(a0 ** -2, rel=1e-13) and fixed.correction_steps() == [0]
    assert texp.correction_steps() == [0, 10]
    # beyond the precomputed steps the last phase continues; lr() never raises
    assert texp.lr(25) / texp.lr(24) == pytest.approx(a1 ** -2, rel=1e-12)
    assert S.TaperedExponential([0.1], 2e-2, 0.9).lr(10 ** 7) == math.inf


def test_texp_pp_close_to_texp_thm_b8():
    """Thm B.8: TEXP++'s per-step growth approaches TEXP's geometrically inside each phase (paper's setting)."""
    spe, lr, wd, mom = 391, 0.1, 5e-4, 0.9
    etas = [lr] * spe + [lr / 10] * spe + [lr / 100] * spe
    texp = S.TaperedExponential(etas, wd, mom, mode="texp")
    tpp = S.TaperedExponential(etas, wd, mom, mode="texp++")
    zmin = S.exp_lr_alpha(lr, wd, mom)
    for start in (0, spe, 2 * spe):
        for t in range(start + 1, start + spe):
            r = (tpp.lr(t) / tpp.lr(t - 1)) / (texp.lr(t) / texp.lr(t - 1)) - 1
            assert abs(r) <= 3 * lr * wd / (1 - mom) * (mom / zmin) ** (t - start - 1) + 1e-13
        assert abs(tpp.alpha(start + spe - 1) - texp.alpha(start + spe - 1)) < 1e-12  # converged to the root


# ---------------------------------------------------------------------------------------------- exactness
def test_thm29_fixed_lr_wd_equals_exponential_lr(problem):
    model, batches = problem
    wd_run = E.run_sgd(model, batches, STEPS, S.Constant(LR), weight_decay=WD, momentum=MOM)
    sched = S.TaperedExponential([LR] * STEPS, WD, MOM, rescale_above=None)
    exp_run = E.run_sgd(model, batches, STEPS, sched, momentum=MOM)
    a = S.exp_lr_alpha(LR, WD, MOM)
    assert math.exp(sched.log_weight_scale(STEPS)) == pytest.approx(a ** -STEPS, rel=1e-12)
    assert a ** -STEPS > 20  # the weights really grew
    assert _err(wd_run, exp_run, sched, STEPS).max() < TOL
    assert E.direction_error(model, wd_run["theta"], exp_run["theta"]).max() < TOL
    # the initial condition θ̃_{−1} = α θ_{−1} (non-zero initial velocity) is needed
    no_v0 = S.TaperedExponential([LR] * STEPS, WD, MOM, init_velocity=False, rescale_above=None)
    assert _err(wd_run, E.run_sgd(model, batches, STEPS, no_v0, momentum=MOM), no_v0, STEPS).max() > 1e-3


def test_thm21_momentum_free(problem, step_decay):
    model, batches = problem
    etas, _ = step_decay
    wd_run = E.run_sgd(model, batches, STEPS, S.StepDecay(LR, STEPS, 1, milestones=(0.4, 0.7)), weight_decay=WD)
    sched = S.TaperedExponential(etas, WD, 0.0, rescale_above=None)
    assert sched.alpha(0) == pytest.approx(1 - LR * WD, abs=1e-16)  # η̃_t = η(1 − λη)^(−2t−1)
    assert sched.lr(5) == pytest.approx(LR * (1 - LR * WD) ** -11, rel=1e-13)
    assert _err(wd_run, E.run_sgd(model, batches, STEPS, sched), sched, STEPS).max() < TOL


def test_thm213_step_decay_equals_texp_pp(problem, step_decay):
    model, batches = problem
    etas, wd_run = step_decay
    sched = S.TaperedExponential(etas, WD, MOM, mode="texp++", rescale_above=None)
    assert sched.correction_steps() == []
    assert _err(wd_run, E.run_sgd(model, batches, STEPS, sched, momentum=MOM), sched, STEPS).max() < TOL


def test_thm212_step_decay_equals_texp_with_correction(problem, step_decay):
    model, batches = problem
    etas, wd_run = step_decay
    sched = S.TaperedExponential(etas, WD, MOM, mode="texp", rescale_above=None)
    assert sched.correction_steps() == [0, 120, 210]
    assert _err(wd_run, E.run_sgd(model, batches, STEPS, sched, momentum=MOM), sched, STEPS).max() < TOL
    # without the correction term: exact up to the first phase change, broken after it
    bare = S.TaperedExponential(etas, WD, MOM, mode="texp", momentum_correction=False, rescale_above=None)
    err = _err(wd_run, E.run_sgd(model, batches, STEPS, bare, momentum=MOM), bare, STEPS)
    assert err[:121].max() < TOL
    assert err[122:].max() > 1e-4


def test_texp_mm_equals_constant_lr_with_phase_wd(problem, step_decay):
    """Thm B.2 / Fig. 6: TEXP-- (Eq. 8) with the correction = constant LR η_0 and WD λη_I/η_0 in phase I."""
    model, batches = problem
    etas, _ = step_decay
    ref = E.run_sgd(model, batches, STEPS, S.Constant(LR), weight_decay=WD, momentum=MOM,
                    weight_decay_fn=lambda s: WD * etas[s] / etas[0])
    sched = S.TaperedExponential(etas, WD, MOM, mode="texp--", rescale_above=None)
    assert _err(ref, E.run_sgd(model, batches, STEPS, sched, momentum=MOM), sched, STEPS).max() < TOL


def test_exp_cosine_equals_epoch_cosine_with_wd(problem):
    """Sec. 4.2: TEXP on the per-epoch cosine (a momentum correction at every epoch start) is exact."""
    model, batches = problem
    spe, epochs = 10, 20
    base = S.EpochCosine(LR, epochs, spe)
    wd_run = E.run_sgd(model, batches, spe * epochs, base, weight_decay=WD, momentum=MOM)
    sched = S.TaperedExponential([base.lr(s) for s in range(spe * epochs)], WD, MOM, rescale_above=None)
    assert len(sched.correction_steps()) == epochs
    assert _err(wd_run, E.run_sgd(model, batches, spe * epochs, sched, momentum=MOM), sched, spe * epochs).max() < TOL


def test_rescaling_keeps_function_space_trajectory(problem):
    """Lemma 2.7: (cθ, c²η, cθ', c²η') is equivalent; with c = 2^−k the rescaled run matches the plain one."""
    model, batches = problem
    plain_s = S.TaperedExponential([LR] * STEPS, WD, MOM, rescale_above=None)
    resc_s = S.TaperedExponential([LR] * STEPS, WD, MOM, rescale_above=4.0, steps_per_epoch=10)
    plain = E.run_sgd(model, batches, STEPS, plain_s, momentum=MOM)
    resc = E.run_sgd(model, batches, STEPS, resc_s, momentum=MOM)
    assert resc["log2_rescale"][-1] >= 2  # it did rescale, several times
    assert len(set(resc["log2_rescale"].tolist())) >= 3
    assert resc["theta"][-1].norm() < 0.5 * plain["theta"][-1].norm()
    assert E.direction_error(model, plain["theta"], resc["theta"]).max() < 1e-12
    back = resc["theta"] * (2.0 ** resc["log2_rescale"].double())[:, None]
    assert ((back - plain["theta"]).norm(dim=1) / plain["theta"].norm(dim=1)).max() < 1e-12


@pytest.mark.parametrize("mode", ["texp", "texp--", "texp++"])
def test_rescaling_with_momentum_correction_stays_exact(problem, mode):
    """Lemma 2.7 rescaling together with the momentum corrections (and TEXP++'s per-step α). λη = 2.5e-3, close to
    Remark 2.10's bound, grows the LR ≈ 2^14 in phase 1, so with rescale_above = 4 the run rescales 5-7 times before
    the first phase change, the corrections land on rescaled states (for TEXP-- a rescaling and a correction fall on
    the same step, 120), and it still equals P_s × the weight-decay run (step decay; constant LR with WD λη_I/η_0
    for TEXP--, Thm B.2) to float64 rounding."""
    model, batches = problem
    wd = 2.5e-2
    base = S.StepDecay(LR, STEPS, 1, milestones=(0.4, 0.7), factor=0.1)
    etas = [base.lr(s) for s in range(STEPS)]
    if mode == "texp--":
        wd_run = E.run_sgd(model, batches, STEPS, S.Constant(LR), weight_decay=wd, momentum=MOM,
                           weight_decay_fn=lambda s: wd * etas[s] / etas[0])
    else:
        wd_run = E.run_sgd(model, batches, STEPS, base, weight_decay=wd, momentum=MOM)
    sched = S.TaperedExponential(etas, wd, MOM, mode=mode, rescale_above=4.0, steps_per_epoch=10)
    run = E.run_sgd(model, batches, STEPS, sched, momentum=MOM)
    ks = run["log2_rescale"]  # ks[s + 1]: k in force at step s
    assert ks[120] >= 5  # several rescalings before the first phase change
    if mode == "texp--":
        assert ks[121] > ks[120] and 120 in sched.correction_steps()  # rescaling and correction on one step
    # log2_rescale(s) replays apply's rule as a pure function of the step
    assert [sched.log2_rescale(s) for s in range(STEPS)] == ks[1:].tolist()
    scale = [sched.log_weight_scale(s) for s in range(STEPS + 1)]
    assert E.equivalence_error(wd_run["theta"], run["theta"], scale, ks).max() < 1e-12
    # ... and without undoing the 2^-k the comparison fails: the rescaling really happened
    assert E.equivalence_error(wd_run["theta"], run["theta"], scale).max() > 0.5


# ---------------------------------------------------------------------------------------------- apply / registry
def _opt(params, **kw):
    return torch.optim.SGD(params, lr=0.1, momentum=kw.pop("momentum", 0.9), weight_decay=5e-4, **kw)


def test_apply_is_idempotent_and_zeroes_weight_decay():
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(5, dtype=torch.float64))
    sched = S.TaperedExponential([0.1] * 3 + [0.01] * 3, 1e-2, 0.9)
    opt = _opt([p])
    sched.apply(opt, 0)
    buf = opt.state[p]["momentum_buffer"].clone()
    a = sched.alpha(0)
    assert torch.allclose(buf, (a - 1) * p.detach() / (a * 0.1), rtol=1e-14)  # v_0 of Thm 2.9
    sched.apply(opt, 0)  # a second call for the same step must not correct twice
    assert torch.equal(opt.state[p]["momentum_buffer"], buf)
    assert opt.param_groups[0]["weight_decay"] == 0.0
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 / a)
    with pytest.raises(ValueError, match="nesterov"):
        sched.apply(_opt([p], nesterov=True), 0)
    with pytest.raises(ValueError, match="momentum"):
        sched.apply(_opt([p], momentum=0.5), 0)


def _cfg(schedule, **kw):
    base = dict(lr=0.1, weight_decay=5e-4, momentum=0.9, num_epochs=8, schedule=schedule, schedule_kwargs={},
                optimizer="sgd", weight_decay_mode="coupled", nesterov=False, scale_invariant=True)
    base.update(kw)
    return SimpleNamespace(**base)


@pytest.mark.parametrize("name", ["exp", "texp", "texp++", "texp--", "exp_cosine", "exp_decay", "cosine_epoch"])
def test_registry_builds_each_exponential_schedule(name):
    s = S.build_schedule(_cfg(name), steps_per_epoch=5)
    assert math.isfinite(s.lr(39)) and s.lr(39) > 0
    if name != "cosine_epoch":
        assert s.lr(1) > s.lr(0)  # exponential growth inside the first phase


def test_registry_options_and_checks():
    step = S.build_schedule(_cfg("step"), 5)
    texp = S.build_schedule(_cfg("texp", schedule_kwargs={"milestones": (0.25, 0.5)}), 5)
    assert texp.correction_steps() == [0, 10, 20]
    assert step.milestone_steps == [20, 30]  # the existing schedules are unchanged
    assert S.build_schedule(_cfg("texp", schedule_kwargs={"momentum_correction": False}), 5).correction_steps() == [0]
    folded = S.build_schedule(_cfg("exp", weight_decay=0.0, schedule_kwargs={"weight_decay": 5e-4}), 5)
    assert folded.alpha(0) == pytest.approx(S.exp_lr_alpha(0.1, 5e-4, 0.9))
    with pytest.raises(ValueError, match="unknown option"):
        S.build_schedule(_cfg("texp++", schedule_kwargs={"momentum_correction": True}), 5)
    with pytest.raises(ValueError, match="coupled"):
        S.build_schedule(_cfg("texp", optimizer="sgdp"), 5)
    with pytest.raises(ValueError, match="Remark 2.10"):
        S.build_schedule(_cfg("texp", weight_decay=0.1), 5)
    for name in ("exp", "texp", "texp++", "texp--", "exp_decay", "exp_cosine"):  # Li & Arora fix BN affine + FC
        with pytest.raises(ValueError, match="^scale_invariant:"):
            S.build_schedule(_cfg(name, scale_invariant=False), 5)
    no_field = _cfg("texp")
    del no_field.scale_invariant  # a config that does not declare scale invariance is not scale-invariant
    with pytest.raises(ValueError, match="^scale_invariant:"):
        S.build_schedule(no_field, 5)
    assert S.build_schedule(_cfg("step", scale_invariant=False), 5).lr(0) == 0.1  # plain schedules don't care
    bare = S.build_schedule(_cfg("exp_cosine", schedule_kwargs={"momentum_correction": False,
                                                                "init_velocity": False}), 5)
    assert bare.correction_steps() == []  # the schedule-only variant of the PreResNet runs
    cos = S.build_schedule(_cfg("cosine_epoch"), 5)
    assert cos.lr(0) == cos.lr(4) == 0.1 and cos.lr(5) == pytest.approx(0.05 * (1 + math.cos(math.pi / 8)))
