"""Toys and identities of Heo et al. (ICLR 2021): Eq. B.1 / B.2 toys, Lemma 2.1/2.2, Cor. 2.3, Prop. 3.1, and
the Appendix C |cos| statistics (repro_lib.papers.adamp.toys)."""
import itertools
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn as nn

from repro_lib.papers.adamp import toys as T


pytestmark = pytest.mark.usefixtures("one_thread")


def test_toy2d_max_norms_match_appendix_b():
    """Appendix B: max weight norm 2.93 at momentum 0.9 and 27.87 at 0.99 (lr 0.02, our choice: the paper gives
    none); the projected method (SGDP, Algorithm 1) keeps the norm near 1 at every momentum and reaches
    cos(w, w*) > 0.99 first; the authors' in-place buffer projection lets it grow with the momentum."""
    tab = T.toy2d_table(lr=0.02, iters=800, momenta=(0.9, 0.99)).set_index(["method", "momentum"])
    assert tab.loc[("sgd", 0.9), "max_norm"] == pytest.approx(2.93, rel=0.01)
    assert tab.loc[("sgd", 0.99), "max_norm"] == pytest.approx(27.87, rel=0.03)
    assert tab.loc[("sgdp", 0.9), "max_norm"] < 1.2 and tab.loc[("sgdp", 0.99), "max_norm"] < 1.2
    assert tab.loc[("sgdp_inplace", 0.99), "max_norm"] > 1.5
    assert tab.loc[("sgdp", 0.9), "iters_to_cos_0_99"] < tab.loc[("sgd", 0.9), "iters_to_cos_0_99"]
    assert tab.loc[("sgdp", 0.9), "iters_to_cos_0_99"] < tab.loc[("gd", 0.0), "iters_to_cos_0_99"]


def test_toy2d_loss_is_scale_invariant_with_orthogonal_gradient():
    w = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    T.toy2d_loss(w).backward()
    assert abs(float(w.grad @ w.detach())) < 1e-15  # Eq. 4
    assert float(T.toy2d_loss(w.detach() * 7.0)) == pytest.approx(float(T.toy2d_loss(w.detach())), abs=1e-15)


@pytest.mark.parametrize("beta", [0.0, 0.9])
def test_lemma_2_1_and_2_2(beta):
    """Eq. 6 (GD, β = 0) and Eq. 8 (momentum) hold step by step on a scale-invariant objective, and the
    induction identity w_t·p_t = −η Σ β^{t−k}|p_k|² of the proof; Eq. 6 fails once momentum is on."""
    f = T.scale_invariant_quadratic(6, seed=1)
    w0 = torch.randn(6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    df = T.lemma_check(f, w0, lr=0.1, beta=beta, iters=40)
    np.testing.assert_allclose(df["norm2_next"], df["eq8_rhs"], rtol=1e-12)
    np.testing.assert_allclose(df["w_dot_p"], df["w_dot_p_pred"], atol=1e-12)
    gap = (df["norm2_next"] - df["eq6_rhs"]).abs().max()
    assert gap < 1e-12 if beta == 0 else gap > 1e-3


def test_projection_restores_eq6_growth():
    """Eq. 12: with Algorithm 1's projected step the norm grows exactly as in Lemma 2.1 (with q_t), below the
    bound |w_t|² + η²|p_t|² (strictly once the momentum has a radial part), and less than with momentum."""
    f = T.scale_invariant_quadratic(6, seed=1)
    w0 = torch.randn(6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    proj = T.lemma_check(f, w0, lr=0.1, beta=0.9, iters=40, project=True)
    mom = T.lemma_check(f, w0, lr=0.1, beta=0.9, iters=40)
    np.testing.assert_allclose(proj["norm2_next"], proj["eq6_rhs"], rtol=1e-12)
    assert (proj["norm2_next"] <= proj["eq12_bound"] * (1 + 1e-12)).all()
    assert (proj["eq12_bound"] - proj["norm2_next"]).iloc[1:].min() > 0
    assert proj["norm2_next"].iloc[-1] < mom["norm2_next"].iloc[-1]


def test_corollary_2_3_ratio_tends_to_19():
    """Eq. 9 with summable update norms A_k = (k+1)^-2: the ratio tends to 1 + 2β/(1−β) = 19 at β = 0.9; it
    equals the ratio of the two recursions (Eq. 6 vs Eq. 8) evaluated directly."""
    a = 1.0 / (np.arange(4000) + 1.0) ** 2
    r = T.norm_growth_ratio(a, 0.9)
    assert r[-1] == pytest.approx(19.0, rel=2e-3)
    assert r[0] == pytest.approx(1.0)
    t = 30
    gd = a[:t].sum()
    gdm = sum(a[s] + 2 * sum(0.9 ** (s - k) * a[k] for k in range(s)) for s in range(t))
    assert r[t - 1] == pytest.approx(gdm / gd, rel=1e-12)


def test_proposition_3_1_geodesic():
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        w, p = torch.randn(7, generator=g, dtype=torch.float64), torch.randn(7, generator=g, dtype=torch.float64)
        assert T.geodesic_residual(w, p, lr=0.3) < 1e-12
        assert T.is_on_geodesic_arc(w, p, lr=0.3)


def test_rosenbrock_geometry():
    """Eq. B.2: scale-invariant; h(cψ, cφ) = 1209 at the start (−2, 2) and 0 at the optimum (1, 1)."""
    c = T.ROSENBROCK_C
    w0 = torch.tensor(T.rosenbrock_w0(), dtype=torch.float64)
    assert float(w0.norm()) == pytest.approx(1.0)
    assert float(T.rosenbrock_loss(w0)) == pytest.approx(9 + 300 * 4, rel=1e-12)
    assert float(T.rosenbrock_loss(5 * w0)) == pytest.approx(1209, rel=1e-12)
    wopt = torch.tensor(T.from_angles(1 / c, 1 / c), dtype=torch.float64)
    assert float(T.rosenbrock_loss(wopt)) < 1e-20
    psi, phi = T.to_angles(torch.tensor(T.from_angles(0.3, -0.4, 2.0), dtype=torch.float64))
    assert (float(psi), float(phi)) == pytest.approx((0.3, -0.4))


def test_rosenbrock_projection_slows_norm_growth():
    """Fig. 3: with momentum 0.9 the norm r grows from 1 much more for SGD than for SGDP (same lr); the
    authors' in-place buffer projection lets it grow more than Algorithm 1."""
    sgd = T.rosenbrock3d("sgd", 1e-5, 150)
    sgdp = T.rosenbrock3d("sgdp", 1e-5, 150)
    inplace = T.rosenbrock3d("sgdp_inplace", 1e-5, 150)
    assert sgd["r"].iloc[0] == pytest.approx(1.0)
    assert sgd["r"].max() > 2.0 and sgdp["r"].max() < inplace["r"].max() < 1.3
    for df in (sgdp, inplace):
        assert (np.diff(df["r"]) > -1e-12).all()  # Eq. 12: norms never decrease without weight decay


def test_cos_statistics_and_detection_table():
    """Appendix C on a tiny CNN: the BN-preceded convs have |cos|·√d ≈ 0, the linear head does not; at δ = 0.1
    every scale-invariant tensor is detected; at δ = ∞ every scale-variant tensor is (wrongly) detected."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(32, 3, 10, 10, generator=g), torch.randint(0, 10, (32,), generator=g)) for _ in range(3)]
    stats = T.cos_statistics(model, ["0.weight", "3.weight"], nn.functional.cross_entropy, batches)
    assert len(stats) == 9
    assert stats.loc[stats.scale_invariant, "channel_score"].max() < 1e-2  # float32 rounding
    assert stats.loc[~stats.scale_invariant, "layer_score"].min() > 0.1
    tab = T.detection_table(stats, [0.1, math.inf]).set_index("delta")
    assert tab.loc[0.1, "scale_invariant_detection"] == 100.0
    assert tab.loc[0.1, "scale_variant_detection"] == 100.0
    assert tab.loc[math.inf, "scale_variant_detection"] == 0.0


def test_delta_statistics_stream_an_imagefolder(tmp_path):
    """The gpu/paper path of Table B.1: ImageNet-style folders streamed through repro_lib.imagefolder, the
    statistics taken lazily step by step (a tiny synthetic folder and timm's tiny test model here)."""
    from repro_lib.papers.adamp import toys as T
    from repro_lib import imagefolder as imf
    from repro_lib.models import create

    imf.write_synthetic_imagefolder(tmp_path, name="imagenet", num_classes=3, per_class=4, val_per_class=1, size=32)
    stream = T.imagefolder_batches("imagenet", tmp_path, 32, 4, 0, 0, "cpu", num_workers=0)
    x, y = next(stream)
    assert x.shape == (4, 3, 32, 32) and x.dtype == torch.float32 and abs(float(x.mean())) < 3
    model = create("test_efficientnet", 3)
    stats = T.adamp_cos_run(model, stream, steps=5)  # 5 steps > 3 batches per epoch: the stream reshuffles
    assert sorted(stats.step.unique()) == [0, 1, 2, 3, 4]
    si = stats[stats.scale_invariant]
    assert len(si) and si.cos_layer.max() < 1e-3 < stats[~stats.scale_invariant].cos_layer.max()
    assert set(T.DELTA_SIZES) == {"smoke", "cpu", "gpu", "paper"}
    paper = T.DELTA_SIZES["paper"]
    assert paper["source"] == "imagefolder" and paper["image_size"] == 224 and paper["batch_size"] == 256
    # Table 2's AdamP recipe (wd 1e-4 in AdamW notation at lr 1e-3, cosine) over 100 ImageNet epochs
    assert (paper["lr"], paper["weight_decay"], paper["schedule"]) == (1e-3, 0.1, "cosine")
    assert paper["steps"] == 100 * math.ceil(1_281_167 / 256)


def test_adamp_cos_run_follows_the_schedule_and_samples_at_intervals():
    """The cosine LR over the run and decoupled decay act on the model; statistics are taken every
    ``record_every`` steps (and at the last) on the gradient before that step, the LR of that step alongside."""
    from repro_lib.schedules import Cosine

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    model.scale_invariant_names = ["0.weight"]
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(16, 3, 8, 8, generator=g), torch.randint(0, 10, (16,), generator=g)) for _ in range(7)]
    stats = T.adamp_cos_run(model, batches, steps=7, lr=1e-2, weight_decay=0.1, schedule="cosine",
                            record_every=3)
    assert sorted(stats.step.unique()) == [0, 3, 6]
    lrs = stats.groupby("step")["lr"].first()
    assert lrs.tolist() == pytest.approx([Cosine(1e-2, 7).lr(t) for t in (0, 3, 6)])
    assert lrs.iloc[0] == pytest.approx(1e-2) and lrs.iloc[-1] < 1e-3
    assert stats[stats.scale_invariant].cos_layer.max() < 1e-3 < stats[~stats.scale_invariant].cos_layer.max()
    with pytest.raises(ValueError, match="schedule"):
        T.adamp_cos_run(model, batches, steps=2, schedule="step")
    late = T.adamp_cos_run(model, batches, steps=7, record_every=2, record_from=3)  # the later steps only
    assert sorted(late.step.unique()) == [3, 5, 6]
    with pytest.raises(ValueError, match="record_from"):
        T.adamp_cos_run(model, batches, steps=7, record_from=7)


def _smoke_run_setup(seed: int = 0):
    """The smoke profile's in-memory data and model (synthetic CIFAR-size images, ResNet-18 width 4) with a dropout
    on the logits, so that the run consumes the global RNG and a resume must restore it."""
    from repro_lib import data, models

    torch.manual_seed(seed)
    train = data.load_split("cifar10-jpeg", "train", synthetic=True, synthetic_n=256)
    batches = data.TensorBatches(train, 48, train=True, seed=seed)  # 6 batches per epoch, the last one short
    net = models.create("resnet18", train.num_classes, width=4)
    model = nn.Sequential(net, nn.Dropout(0.5))
    model.scale_invariant_names = [f"0.{n}" for n in net.scale_invariant_names]
    return model, T.epoch_batches(batches.epoch, len(batches))


def test_adamp_cos_run_resumes_bit_identically_and_does_not_rerun_a_finished_run(tmp_path):
    """Nothing lost: a run killed after 7 of 10 steps (checkpoints every 4) resumes mid-epoch from step 4 and ends
    with the rows and weights of an uninterrupted run, bit for bit (model, AdamP state, RNG and the batch stream's
    position restored); the finished run is then read back, not recomputed; another run's file is refused."""
    kw = dict(steps=10, lr=1e-2, weight_decay=0.1, schedule="cosine", record_every=3)
    model, stream = _smoke_run_setup()
    ref = T.adamp_cos_run(model, stream, **kw)
    ref_state = {k: v.clone() for k, v in model.state_dict().items()}

    starts = []

    def killed_after(k):
        def factory(start):
            starts.append(start)
            for i, b in enumerate(stream(start), start):
                if i == k:
                    raise KeyboardInterrupt("killed")
                yield b
        return factory

    ckpt = tmp_path / "run" / "cos_run.pt"
    model, _ = _smoke_run_setup()
    with pytest.raises(KeyboardInterrupt):
        T.adamp_cos_run(model, killed_after(7), checkpoint=ckpt, checkpoint_every=4, **kw)
    saved = torch.load(ckpt, weights_only=False)
    assert not saved["finished"] and saved["step"] == 4 and sorted({r["step"] for r in saved["rows"]}) == [0, 3]
    assert [p.name for p in ckpt.parent.iterdir()] == ["cos_run.pt"]  # no temporary file left behind

    model, _ = _smoke_run_setup(seed=1)  # a different initialisation and RNG state: the checkpoint overrides both
    out = T.adamp_cos_run(model, killed_after(10**9), checkpoint=ckpt, checkpoint_every=4, **kw)
    assert starts == [0, 4]  # resumed at step 4, not from the start
    pd.testing.assert_frame_equal(out, ref, check_exact=True)
    assert sorted(out.step.unique()) == [0, 3, 6, 9]
    assert all(torch.equal(v, ref_state[k]) for k, v in model.state_dict().items())

    saved = torch.load(ckpt, weights_only=False)
    assert saved["finished"] and "optimizer" not in saved  # the resume state is gone, the result stays
    model, _ = _smoke_run_setup(seed=1)
    again = T.adamp_cos_run(model, killed_after(0), checkpoint=ckpt, checkpoint_every=4, **kw)  # trains nothing
    assert starts == [0, 4]
    pd.testing.assert_frame_equal(again, ref, check_exact=True)
    assert all(torch.equal(v, ref_state[k]) for k, v in model.state_dict().items())

    with pytest.raises(ValueError, match="another run"):
        T.adamp_cos_run(model, stream, checkpoint=ckpt, **{**kw, "steps": 11})

    # keep_weights=False: the finished record holds the rows only; read back, it returns them and leaves the model
    light = tmp_path / "light" / "cos_run.pt"
    model, _ = _smoke_run_setup()
    rows = T.adamp_cos_run(model, stream, checkpoint=light, keep_weights=False, **kw)
    pd.testing.assert_frame_equal(rows, ref, check_exact=True)
    saved = torch.load(light, weights_only=False)
    assert saved["finished"] and "model" not in saved and light.stat().st_size < ckpt.stat().st_size
    model, _ = _smoke_run_setup(seed=1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    again = T.adamp_cos_run(model, killed_after(0), checkpoint=light, keep_weights=False, **kw)  # trains nothing
    assert starts == [0, 4]
    pd.testing.assert_frame_equal(again, ref, check_exact=True)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    with pytest.raises(ValueError, match="callable"):
        T.adamp_cos_run(model, list(itertools.islice(stream(0), 10)), checkpoint=tmp_path / "x.pt", **kw)


def test_imagefolder_batches_start_step_continues_the_stream(tmp_path):
    """``imagefolder_batches(start_step=s)`` yields exactly the batches from step s of a fresh stream, mid-epoch
    and across epoch boundaries (12 images, batch 5: 3 batches per epoch, the last of 2 images)."""
    from repro_lib import imagefolder as imf

    imf.write_synthetic_imagefolder(tmp_path, name="imagenet", num_classes=3, per_class=4, val_per_class=1, size=32)
    fresh = list(itertools.islice(T.imagefolder_batches("imagenet", tmp_path, 24, 5, 0, 0, "cpu", num_workers=0), 8))
    assert [len(y) for _, y in fresh] == [5, 5, 2] * 2 + [5, 5]
    assert not torch.equal(fresh[0][0], fresh[3][0])  # reshuffled and re-augmented per epoch
    for s in (1, 3, 5):
        resumed = T.imagefolder_batches("imagenet", tmp_path, 24, 5, 0, 0, "cpu", num_workers=0, start_step=s)
        for (x, y), (x0, y0) in zip(itertools.islice(resumed, 8 - s), fresh[s:], strict=True):
            assert torch.equal(x, x0) and torch.equal(y, y0)


# ----------------------------------------------------------------------------------------------------- Fig. H.1
def _algorithm_2(loss_fn, w0, lr, iters, betas=(0.9, 0.999), eps=1e-8, delta=0.1, bias_correction=True,
                 project=True):
    """Algorithm 2 of the paper written out by hand for a (d,) weight, with the lr decayed linearly as in
    Appendix B: m, v, p = m/(√v + ε) (bias-corrected as in the authors' code when ``bias_correction``), the Eq. 11
    test |cos(g, w)| < δ/√d (a 1-row weight: channel- and layer-wise are the same test), q = p − (ŵ·p)ŵ with
    ŵ = w/(|w| + ε), w ← w − η q. Returns the iterates (iters + 1, d)."""
    b1, b2 = betas
    w = torch.tensor(w0, dtype=torch.float64)
    m, v = torch.zeros_like(w), torch.zeros_like(w)
    out = [w.clone()]
    for t in range(1, iters + 1):
        wg = w.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(loss_fn(wg), wg)
        eta = lr * (1 - (t - 1) / iters)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if bias_correction:
            p, step = m / (v.sqrt() / math.sqrt(1 - b2 ** t) + eps), eta / (1 - b1 ** t)
        else:
            p, step = m / (v.sqrt() + eps), eta
        cos = abs(float(g @ w)) / (max(float(g.norm()), eps) * max(float(w.norm()), eps))
        if project and cos < delta / math.sqrt(w.numel()):
            u = w / (w.norm() + eps)
            p = p - (u @ p) * u
        w = w - step * p
        out.append(w.clone())
    return torch.stack(out).numpy()


@pytest.mark.parametrize("method, bias_correction, project", [("adamp", True, True), ("adam", True, False),
                                                              ("adamp_printed", False, True),
                                                              ("adam_printed", False, False)])
def test_the_toy_adam_family_is_algorithm_2_step_by_step(method, bias_correction, project):
    """Fig. H.1: the library's AdamP (authors' code: bias-corrected) on the 3D Rosenbrock follows a hand-written
    Algorithm 2 to float64 rounding, as does torch's Adam without the projection; the printed variants
    (``PrintedAdamP``) are Algorithm 2 without bias correction. No bug in the toy's AdamP path."""
    iters = 150
    df = T.rosenbrock3d(method, 0.1, iters)
    ref = _algorithm_2(T.rosenbrock_loss, T.rosenbrock_w0(), 0.1, iters, bias_correction=bias_correction,
                       project=project)
    np.testing.assert_allclose(df[["w0", "w1", "w2"]].to_numpy(), ref, rtol=0, atol=1e-12)


def test_adamp_projects_every_step_of_the_rosenbrock_run():
    """Eq. B.2 depends on the direction of w only: ∇h ⊥ w, so Eq. 11's statistic stays at rounding (≪ δ = 0.1)
    and AdamP's r only grows by the second-order term (Eq. 12 with q ⊥ w)."""
    df = T.rosenbrock3d("adamp", 0.1, 100)
    assert T.rosenbrock_cos_score(df) < 1e-12
    assert (np.diff(df["r"]) > -1e-12).all()


def test_fig_h1_adam_norm_grows_then_comes_back_with_bias_correction_and_stays_without():
    """What decides Fig. H.1's verdict: with bias correction Adam's r rises early (more than AdamP's) and then
    falls back (Adam's per-coordinate scaling gives its step a radial part of either sign); as printed (no bias
    correction) the first steps are ≈ 3× larger and Adam's r jumps to several times 1 and stays there."""
    adam = T.rosenbrock3d("adam", 0.1, 1000)
    adamp = T.rosenbrock3d("adamp", 0.1, 1000)
    assert adam["r"].max() > 1.3 > 1.05 > adamp["r"].max()
    assert adam["r"].iloc[-1] < 1.0 < adamp["r"].iloc[-1]  # Adam's r ends below AdamP's, which never shrinks
    printed = T.rosenbrock3d("adam_printed", 0.1, 150)
    assert printed["r"].max() > 4 and printed["r"].iloc[-1] > 0.9 * printed["r"].max()
    assert T.rosenbrock3d("adamp_printed", 0.1, 150)["r"].max() < 1.5


def test_printed_adamp_has_no_weight_decay_and_budgets_label_their_runs():
    w = torch.zeros(1, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match="no weight decay"):
        T.make_optimizer("adamp_printed", [w], 0.1, weight_decay=0.1)
    s = T.rosenbrock_budgets(["adam", "adamw"], [0.01, 0.1], [5, 10], weight_decays=[0.1, 1.0])
    assert sorted(s.iters.unique()) == [5, 10] and len(s) == 2 * (2 + 4)
    best = T.best_runs(s, ("method", "iters"))
    assert len(best) == 4 and set(best.iters) == {5, 10}


def test_rosenbrock_start_gradient_is_far_beyond_the_papers_lr_range():
    """Why the SGD family is run below the paper's lr range: |∇h̃| ≈ 3·10⁴ at the start, so lr 0.001 moves w by
    ≈ 30 (the start has r = 1)."""
    g = T.rosenbrock_start_grad_norm()
    assert 2e4 < g < 4e4
