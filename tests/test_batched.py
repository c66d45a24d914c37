"""``batched.fit_many`` against separate ``train.fit`` runs.

Exactness is checked in float64 (``torch.set_default_dtype`` inside the fixture): the stacked model sums its
grouped convolutions in a different order than a plain convolution, so float32 results differ by rounding, which
these tiny chaotic nets amplify over epochs. The float32 tolerance is stated by ``test_float32_one_step``: one
step agrees to 1e-4 relative (the same size as ``fit`` vs ``fit`` with a different thread count, ~1e-5).
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from repro_lib import batched, train
from repro_lib.config import RunConfig
from repro_lib.store import Store

BASE = RunConfig(model="resnet18", scale_invariant=True, width=4, dataset="cifar10", synthetic=True, n=256,
                 n_test=20, batch_size=64, num_epochs=3, ghost_batch=24, schedule="cosine", device="cpu",
                 profile="smoke")
# three different (lr, wd, momentum, seed, schedule) cells and one that blows up in epoch 2: with ηλ = 1e45 the
# coupled L2 term multiplies the weights by ~-ηλ per step (1e180 after four steps), so the float64 BN variance of
# the activations of step 4 (the first step of epoch 2, N/B = 4) overflows and the loss becomes NaN
CONFIGS = [BASE.replace(lr=0.1, weight_decay=5e-4, momentum=0.9, seed=0),
           BASE.replace(lr=0.3, weight_decay=1e-3, momentum=0.5, seed=1, schedule="step"),
           BASE.replace(lr=0.05, weight_decay=0.0, momentum=0.0, seed=2),
           BASE.replace(lr=1.0, weight_decay=1e45, momentum=0.9, seed=3)]
HIST_KEYS = ("lr", "train_loss", "train_acc", "angular_update", "weight_norm", "effective_lr",
             "effective_lr_epoch", "test_loss", "test_acc")


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: single-threaded for tiny tensors


def _fit_vs_fit_many(cfgs):
    """Separate ``fit`` runs (capturing each final model) and one ``fit_many`` over the same configs, in float64.
    Returns (fit results, fit models, fit_many results)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    build = train.build_model
    models = []

    def capture(cfg, num_classes):
        models.append(build(cfg, num_classes))
        return models[-1]

    try:
        train.build_model = capture
        refs = [train.fit(c, progress=False) for c in cfgs]
        train.build_model = build
        many = batched.fit_many(cfgs, progress=False, keep_states=True)
    finally:
        train.build_model = build
        torch.set_default_dtype(old)
    return refs, models, many


@pytest.fixture(scope="module")
def runs(one_thread):
    return _fit_vs_fit_many(CONFIGS)


def _close(a, b, rel=1e-9, abs_=1e-12):
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_) or (math.isnan(a) and math.isnan(b))


def test_members_equal_separate_fits(runs):
    """M = 3 members: parameters, running statistics, num_batches_tracked and every tracker value of every
    epoch equal those of three separate ``fit`` runs (float64, relative 1e-9)."""
    refs, models, many = runs
    for ref, model, res in zip(refs[:3], models[:3], many[:3]):
        assert ref["status"] == res["status"] == "finished"
        sd, got = model.state_dict(), res["state_dict"]
        assert set(sd) == set(got)
        running = [k for k in sd if "running" in k]
        assert len(running) == 2 * 21  # 20 conv BNs + the pooled-feature BN, mean and var each
        for k, v in sd.items():
            assert got[k].shape == v.shape, k
            scale = float(v.double().abs().max()) + 1e-30
            assert float((got[k].double() - v.double()).abs().max()) <= 1e-9 * scale, k
        assert len(ref["history"]) == len(res["history"]) == 3
        for hr, hm in zip(ref["history"], res["history"]):
            for k in HIST_KEYS:
                assert _close(hr[k], hm[k]), (hr["epoch"], k, hr[k], hm[k])
            for name, v in hr["angular_update_per_tensor"].items():
                assert _close(v, hm["angular_update_per_tensor"][name]), name
        for k in ("test_acc", "test_loss", "train_loss", "epochs_run", "tuning_factor", "data", "config"):
            assert ref[k] == res[k] or _close(ref[k], res[k]), k
    # the runs really differ from each other (a test that cannot fail is a defect)
    assert len({round(r["history"][-1]["angular_update"], 6) for r in many[:3]}) == 3


def test_a_lone_last_image_is_dropped_by_fit_and_fit_many_alike():
    """n mod B = 1 (257 images, B = 64): the scale-invariant ResNet-18 normalizes its pooled features, (B, C),
    so a last batch of one image cannot train; both trainers drop it (``data.train_steps``), agree with each
    other, and average the train accuracy over the 256 images an epoch sees."""
    cfgs = [BASE.replace(n=257, num_epochs=2, lr=0.1, weight_decay=5e-4, momentum=0.9, seed=s) for s in (0, 1)]
    refs, _, many = _fit_vs_fit_many(cfgs)
    for ref, res in zip(refs, many):
        assert ref["status"] == res["status"] == "finished"
        for hr, hm in zip(ref["history"], res["history"]):
            assert (hr["train_acc"] * 256 / 100) == pytest.approx(round(hr["train_acc"] * 256 / 100), abs=1e-6)
            for k in HIST_KEYS:
                assert _close(hr[k], hm[k]), (hr["epoch"], k, hr[k], hm[k])


def test_diverged_member_is_frozen_and_others_finish(runs):
    """The 4th member diverges in epoch 2 exactly as its ``fit`` does; it is recorded and dropped while the
    three others finish (and still equal their ``fit`` runs: checked above, after the stack was rebuilt)."""
    refs, _, many = runs
    ref, res = refs[3], many[3]
    assert ref["status"] == res["status"] == "diverged"
    assert ref["diverged_epoch"] == res["diverged_epoch"] == 2
    assert len(res["history"]) == 2 and math.isnan(res["test_acc"])
    assert _close(ref["history"][0]["angular_update"], res["history"][0]["angular_update"])
    assert math.isnan(res["history"][-1]["train_loss"])
    assert [r["status"] for r in many[:3]] == ["finished"] * 3
    assert [h["group_size"] for h in many[0]["history"]] == [4, 4, 3]  # the stack shrank after epoch 2


def test_float32_one_step():
    """Stated float32 tolerance, one forward/backward of the stacked float32 model against a float64 evaluation
    of the same step: logits within 10x (+1e-6 relative) of the member model's own float32 error (measured ~1e-6),
    gradients (all tensors concatenated) within 1e-2 relative. Measured gradient errors: ~1e-6 for a well-
    conditioned step, up to ~1e-2 where a ghost-BN channel of the 4-wide net has almost no variance (there ``fit``'s
    own float32 gradient is off by ~1e-3 too): float32 runs agree to rounding, amplified by training."""
    import copy

    from repro_lib.data import TensorBatches

    cfgs = [BASE.replace(seed=s) for s in range(2)]
    tr, _ = train.load_data(cfgs[0])
    models = [train.build_model(c, 10) for c in cfgs]
    refs = [copy.deepcopy(m) for m in models]
    st = batched._Stack(models, [[torch.zeros_like(p) for p in m.parameters()] for m in models], cfgs,
                        batched._lr_table(cfgs, 4))
    xs, ys = zip(*(next(TensorBatches(tr, 64, train=True, seed=c.seed).epoch(0)) for c in cfgs))
    out = st.net(torch.cat(xs, 1)).view(64, 2, -1)
    F.cross_entropy(out.transpose(1, 2), torch.stack(ys, 1), reduction="none").mean(0).sum().backward()

    def rel(a, b):
        a, b = a.detach().double().flatten(), b.detach().double().flatten()
        return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))

    for m in range(2):
        r64 = copy.deepcopy(refs[m]).double()
        o64 = r64(xs[m].double())
        F.cross_entropy(o64, ys[m]).backward()
        r = refs[m](xs[m])
        assert rel(out[:, m], o64) <= 10 * rel(r, o64) + 1e-6
        g = torch.cat([p.grad.view(2, -1)[m] for p in st.params])
        g64 = torch.cat([q.grad.flatten() for q in r64.parameters()])
        assert rel(g, g64) <= 1e-2


def test_store_resume_and_rejections(tmp_path, killed_at_epoch):
    """With a Store: one result and one history per run; a group interrupted after epoch 1 resumes from the
    per-member checkpoints and ends exactly (bit-identically) where an uninterrupted group ends; a finished run
    is read back, not retrained. Incompatible configs are rejected with the field's name."""
    cfgs = [BASE.replace(n=128, num_epochs=2, width=2, lr=lr, seed=s) for lr, s in ((0.1, 0), (0.2, 1))]
    plain = batched.fit_many(cfgs, progress=False)
    store = Store(tmp_path / "r")
    with killed_at_epoch(2):
        batched.fit_many(cfgs, store=store, progress=False)
    assert all(store.load_checkpoint(c)["epoch"] == 1 for c in cfgs)
    resumed = batched.fit_many(cfgs, store=store, progress=False)
    for a, b in zip(plain, resumed):
        assert [h["train_loss"] for h in a["history"]] == [h["train_loss"] for h in b["history"]]
        assert a["test_acc"] == b["test_acc"]
    assert [store.status(c) for c in cfgs] == ["finished", "finished"]
    assert [len(store.history(c)) for c in cfgs] == [2, 2]
    again = batched.fit_many(cfgs, store=store, progress=False)  # from the store
    assert [r["train_loss"] for r in again] == [r["train_loss"] for r in resumed]
    assert batched.group_configs(cfgs + [cfgs[0].replace(width=4)], max_members=1) == [[0], [1], [2]]
    with pytest.raises(ValueError, match="width"):
        batched.fit_many([cfgs[0], cfgs[0].replace(width=4)], progress=False)
    with pytest.raises(ValueError, match="schedule"):
        batched.fit_many([cfgs[0].replace(schedule="exp")], progress=False)


def test_unmodified_net_and_nesterov_equal_fit():
    """The unmodified ResNet-18 (affine BN, trainable FC) and a Nesterov member: parameters and BN statistics
    equal separate ``fit`` runs (float64), i.e. the stacked affine BN / linear layers and the Nesterov update."""
    cfg = BASE.replace(scale_invariant=False, width=2, n=128, num_epochs=2, schedule="step")
    cfgs = [cfg.replace(lr=0.1, seed=0, nesterov=True), cfg.replace(lr=0.2, weight_decay=1e-3, momentum=0.8, seed=1)]
    refs, models, many = _fit_vs_fit_many(cfgs)
    for model, ref, res in zip(models, refs, many):
        sd = model.state_dict()
        assert "fc.weight" in sd and "bn1.weight" in sd
        for k, v in sd.items():
            assert float((res["state_dict"][k] - v).abs().max()) <= 1e-9 * (float(v.abs().max()) + 1e-30), k
        assert _close(ref["history"][-1]["angular_update"], res["history"][-1]["angular_update"])


def test_checkpoints_interchangeable_with_fit(tmp_path, killed_at_epoch):
    """A run interrupted in ``fit_many`` resumes in ``fit`` and one interrupted in ``fit`` resumes in ``fit_many``
    (the checkpoint format is fit's); both end where an uninterrupted ``fit`` ends (float64, relative 1e-9)."""
    cfgs = [BASE.replace(n=128, num_epochs=2, width=2, lr=lr, seed=s) for lr, s in ((0.1, 0), (0.2, 1))]
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        plain = [train.fit(c, progress=False) for c in cfgs]
        s1, s2 = Store(tmp_path / "a"), Store(tmp_path / "b")
        with killed_at_epoch(2):
            batched.fit_many(cfgs, store=s1, progress=False)
        with killed_at_epoch(2):
            train.fit(cfgs[0], store=s2, progress=False)
        via_fit = train.fit(cfgs[0], store=s1, progress=False)  # fit_many's checkpoint, resumed by fit
        via_many = batched.fit_many(cfgs, store=s2, progress=False)  # fit's checkpoint (run 0) + a fresh run 1
    finally:
        torch.set_default_dtype(old)
    assert s1.load_checkpoint(cfgs[0]) is None and s2.status(cfgs[0]) == "finished"
    for got in (via_fit, via_many[0]):
        for hp, hg in zip(plain[0]["history"], got["history"]):
            for k in ("train_loss", "angular_update", "weight_norm", "test_loss"):
                assert _close(hp[k], hg[k]), k
    assert _close(plain[1]["history"][-1]["angular_update"], via_many[1]["history"][-1]["angular_update"])


def test_fit_grouped_groups_and_falls_back():
    """``fit_grouped`` stacks compatible configs, trains the rest with ``fit`` and keeps the order."""
    c = BASE.replace(n=128, num_epochs=1, width=2, n_test=20)
    cfgs = [c.replace(seed=0), c.replace(schedule="exp"), c.replace(seed=1, lr=0.2), c.replace(width=4)]
    assert [batched.stackable(x) for x in cfgs] == [True, False, True, True]
    res = batched.fit_grouped(cfgs, progress=False)
    assert [r["config"]["seed"] for r in res] == [0, 0, 1, 0]
    assert [r["history"][0].get("group_size") for r in res] == [2, None, 2, None]  # fit has no group_size
