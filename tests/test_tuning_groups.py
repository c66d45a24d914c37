"""``repro_lib.tuning``'s answers where a first reading goes wrong without a word: normalization with stored
statistics, gradients under the no-gradient floor, jointly invariant groups (found by structure and checked here by
rescaling in float64, independently of the detector), the per-step angle against runs, and the safe defaults."""
import copy
import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from repro_lib import tuning
from repro_lib.angular import AngularTracker, StepTracker

pytestmark = pytest.mark.usefixtures("one_thread")


class Block(nn.Module):
    """A pre-LN transformer block: x + proj(attn(LN(x))), then x + fc2(gelu(fc1(LN(x))))."""

    def __init__(self, d):
        super().__init__()
        self.norm1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.norm2, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        q, k, v = self.qkv(self.norm1(x)).chunk(3, -1)
        x = x + self.proj(torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, -1) @ v)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class PreLN(nn.Module):
    """A tiny pre-LN transformer on 4 tokens of 6 features: the residual stream is written by the embedding, the
    position embedding, and each block's proj and fc2 (weights and biases); every reader goes through a LayerNorm."""

    def __init__(self, d=8, depth=2, tokens=4):
        super().__init__()
        self.embed = nn.Linear(6, d)
        self.pos = nn.Parameter(0.1 * torch.randn(1, tokens, d))
        self.blocks = nn.Sequential(*[Block(d) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 10)

    def forward(self, x):
        return self.head(self.norm(self.blocks(self.embed(x) + self.pos)).mean(1))


WRITERS = ["pos", "embed.weight", "embed.bias"] + [f"blocks.{i}.{m}.{p}" for i in range(2) for m in ("proj", "fc2")
                                                     for p in ("weight", "bias")]


def _tokens(n=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, 6, generator=g), torch.randint(0, 10, (n,), generator=g)


def _images(n=4, size=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, size, size, generator=g), torch.randint(0, 10, (n,), generator=g)


def _float64(model):
    net = copy.deepcopy(model).double()
    for m in net.modules():
        if isinstance(m, tuning.NORM_TYPES):
            m.eps = 1e-30
    return net


@torch.no_grad()
def rescaled_change(model, x, y, names, scales=(1e3, 1e-3, 3.0)):
    """The largest relative change of the float64 loss as the tensors ``names`` are all multiplied by each of
    ``scales`` together (the module modes as in ``model``), on the model and on a copy perturbed here."""
    worst = 0.0
    for perturb in (False, True):
        net = _float64(model)
        if perturb:
            g = torch.Generator().manual_seed(99)
            for p in net.parameters():
                p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=torch.float64))
        params = dict(net.named_parameters())
        base = float(F.cross_entropy(net(x.double()), y))
        keep = {n: params[n].clone() for n in names}
        for c in scales:
            for n in names:
                params[n].copy_(c * keep[n])
            worst = max(worst, abs(float(F.cross_entropy(net(x.double()), y)) - base) / abs(base))
        for n in names:
            params[n].copy_(keep[n])
    return worst


def _detect(model, x, y, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = tuning.detect(model, x, y, **kw)
    return found, [str(w.message) for w in caught if issubclass(w.category, tuning.TuningWarning)]


# ------------------------------------------------------------------------------------------- joint groups
def test_the_residual_writers_of_a_pre_ln_transformer_are_one_group_and_nothing_else_is():
    torch.manual_seed(0)
    model = PreLN()
    x, y = _tokens()
    found, said = _detect(model, x, y)
    assert found.invariant == [] and found.groups == [WRITERS] and found.applies and not said
    # independent check: the group rescaled together changes nothing; every member alone, and the group without
    # any one member, changes the loss
    assert rescaled_change(model, x, y, WRITERS) < 1e-12
    for n in WRITERS:
        assert rescaled_change(model, x, y, [n]) > 1e-4
        assert rescaled_change(model, x, y, [m for m in WRITERS if m != n]) > 1e-4
    # a tensor outside the stream joined to it breaks it: the group is exactly the writers
    assert rescaled_change(model, x, y, WRITERS + ["head.weight"]) > 1e-4
    assert "1 jointly invariant group (11 tensors)" in found.summary()
    assert tuning.joint_groups(model, x, y) == [WRITERS]


def test_a_weight_with_its_bias_before_a_layer_norm_is_a_group_the_weight_alone_only_in_this_state():
    class Stem(nn.Module):  # ConvNeXt's stem: a conv with bias, then a LayerNorm over channels
        def __init__(self):
            super().__init__()
            self.conv, self.norm, self.fc = nn.Conv2d(3, 4, 2, stride=2), nn.GroupNorm(1, 4), nn.Linear(4, 10)
            nn.init.zeros_(self.conv.bias)

        def forward(self, x):
            return self.fc(self.norm(self.conv(x)).mean((2, 3)))

    x, y = _images()
    found, said = _detect(Stem(), x, y)
    assert found.state_only == ["conv.weight"] and found.groups == [["conv.weight", "conv.bias"]]
    assert rescaled_change(Stem(), x, y, ["conv.weight", "conv.bias"]) < 1e-12
    assert any("only in the model's present state" in s for s in said)
    assert not any("does not apply" in s for s in said)


def test_a_rescaling_that_is_not_a_common_one_is_not_a_group():
    # LN gain and shift up, the next linear map down: the output does not change, but this is no scale invariance
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.Linear(8, 10))
    x, y = torch.randn(8, 6), torch.randint(0, 10, (8,))
    net = _float64(model)
    with torch.no_grad():  # the rescaling that changes nothing: gain and shift × 3, the head's weight ÷ 3
        net[1].weight.mul_(3), net[1].bias.mul_(3), net[2].weight.div_(3)
    assert torch.allclose(net(x.double()), _float64(model)(x.double()), rtol=1e-12, atol=1e-12)
    found, said = _detect(model, x, y)
    assert found.groups == [["0.weight", "0.bias"]] and found.invariant == []  # the weight with its bias only
    # tanh between them: not homogeneous, no group (ReLU would keep one: it commutes with a positive scale)
    found, said = _detect(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.LayerNorm(8), nn.Linear(8, 10)), x, y)
    assert found.groups == [] and said[-1].startswith("the rule does not apply to this model")
    assert "alone or in a group" in said[-1]


def test_deit_tiny_residual_writers_are_found_as_one_group():
    # timm's deit_tiny at 32 px with 4 of its 12 blocks (the cost of the search grows with the tensors; the tutorial
    # finds the same group in the whole model)
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model("deit_tiny_patch16_224", pretrained=False, img_size=32, num_classes=10, depth=4)
    x, y = _images(4, 32)
    found, said = _detect(model, x, y)
    writers = ["cls_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias"] + [
        f"blocks.{i}.{m}.{p}" for i in range(4) for m in ("attn.proj", "mlp.fc2") for p in ("weight", "bias")]
    assert found.groups == [writers] and found.invariant == [] and not said
    assert rescaled_change(model, x, y, writers, scales=(1e3, 0.5)) < 1e-10
    assert rescaled_change(model, x, y, writers[1:], scales=(1e3,)) > 1e-4


def test_param_groups_and_trackers_take_a_group_as_one_vector():
    torch.manual_seed(0)
    model = PreLN()
    x, y = _tokens()
    found = tuning.detect(model, x, y)
    groups = tuning.param_groups(model, found, weight_decay=0.01, other_weight_decay=1e-4)
    assert groups[0]["names"] == WRITERS and groups[0]["joint"] and groups[0]["weight_decay"] == 0.01
    assert groups[-1]["weight_decay"] == 1e-4 and not set(groups[-1]["names"]) & set(WRITERS)
    assert len(groups) == 2  # no tensor invariant alone: the group and the rest
    opt = torch.optim.SGD(groups, lr=0.1, momentum=0.9)
    tracker = StepTracker(opt, model, found, steps_per_epoch=1)
    before = [p.detach().clone() for n, p in model.named_parameters() if n in WRITERS]
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    after = [p.detach() for n, p in model.named_parameters() if n in WRITERS]
    a = torch.cat([t.flatten().double() for t in before])
    b = torch.cat([t.flatten().double() for t in after])
    direct = float(torch.arccos((a @ b) / (a.norm() * b.norm())))
    rec = tracker.history[-1]
    assert tracker.groups == [WRITERS]
    assert rec["angular_update_per_group"] == [pytest.approx(direct, rel=1e-6)]
    assert rec["angular_update"] == pytest.approx(direct, rel=1e-6)  # the group is all it tracks
    assert rec["weight_norm_per_group"] == [pytest.approx(float(b.norm()), rel=1e-9)]
    # names and groups given apart: the same
    other = AngularTracker(model, ["embed.weight"], groups=[WRITERS[:3]])
    assert other.names == ["pos", "embed.weight", "embed.bias"] and other.groups == [WRITERS[:3]]
    with pytest.raises(ValueError, match="^groups: "):
        tuning.param_groups(model, [], weight_decay=0.1, groups=["pos"])
    with pytest.raises(ValueError, match="^groups: "):
        tuning.param_groups(model, [], weight_decay=0.1, groups=[["nope"]])


# ------------------------------------------------------------------------------------------- normalization modes
def _bn_net():
    return nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 10))


def test_batch_norm_with_stored_statistics_is_not_invariant_and_is_named():
    torch.manual_seed(0)
    x, y = _images()
    frozen = _bn_net()
    frozen[1].eval()  # BN statistics frozen while fine-tuning
    assert rescaled_change(frozen, x, y, ["0.weight"]) > 1e-3  # ground truth: an affine map there
    found, said = _detect(frozen, x, y)
    assert found.invariant == [] and found.stored_statistics == ["1"] and found.mode == "mixed"
    assert any(s.startswith("1 normalization layers normalize with stored statistics") and "(1)" in s for s in said)
    evaluated = _bn_net().eval()
    found, said = _detect(evaluated, x, y)
    assert found.invariant == [] and found.mode == "eval"
    assert found.summary().startswith("checked in eval mode, as the model is: ")
    assert any("call model.train()" in s for s in said)
    found, said = _detect(evaluated.train(), x, y)
    assert found.invariant == ["0.weight"] and found.mode == "training" and not said


def test_detect_leaves_the_models_modes_alone():
    model = _bn_net().eval()
    _detect(model, *_images())
    assert not any(m.training for m in model.modules())


# ------------------------------------------------------------------------------------------- the floor
def test_a_gradient_under_the_floor_is_measured_and_detect_agrees_with_scale_invariance():
    class Net(nn.Module):  # an invariant branch behind a fixed 1e-9: its gradient is under sqrt(eps) of the largest
        def __init__(self):
            super().__init__()
            self.main = nn.Linear(12, 10)
            self.conv, self.bn = nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4)
            self.register_buffer("scale", torch.tensor(1e-9))

        def forward(self, x):
            branch = self.bn(self.conv(x)).mean((2, 3))
            return self.main(torch.cat([x.mean((2, 3)), self.scale * branch, x.std((2, 3)), x.amax((2, 3))], 1)
                             [:, :12])

    torch.manual_seed(0)
    x, y = _images()
    found = tuning.detect(Net(), x, y, groups=False)
    lemma = tuning.scale_invariance(Net(), x, y)
    grads = dict(zip(lemma.tensor, lemma.grad_norm))
    assert 0 < grads["conv.weight"] < math.sqrt(torch.finfo(torch.float64).eps) * max(grads.values())
    kinds = dict(zip(found.table.tensor, found.table.kind))
    assert kinds["conv.weight"] == tuning.INVARIANT and found.undecided == []
    assert dict(zip(found.table.tensor, found.table.verdict)) == dict(zip(lemma.tensor, lemma.verdict))


# ------------------------------------------------------------------------------------------- one-line errors
def test_a_batch_of_one_under_batch_norm_and_an_output_the_loss_cannot_take_are_one_line_errors():
    mlp = nn.Sequential(nn.Linear(4, 8, bias=False), nn.BatchNorm1d(8), nn.Linear(8, 3))
    with pytest.raises(ValueError, match="^x: a batch of 1: BatchNorm") as e:
        tuning.detect(mlp, torch.randn(1, 4), torch.tensor([0]))
    assert "\n" not in str(e.value) and e.value.__cause__ is None and e.value.__suppress_context__
    maps = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.Conv2d(8, 10, 1))
    x, y = _images()
    for fn in (tuning.detect, tuning.scale_invariance):
        with pytest.raises(ValueError, match=r"^loss_fn: the default cross-entropy cannot take the model's output "
                                             r"\(a tensor of shape \(4, 10, 6, 6\)\)") as e:
            fn(maps, x, y)
        assert "\n" not in str(e.value) and e.value.__suppress_context__
    found = tuning.detect(maps, x, y, loss_fn=lambda out, t: F.cross_entropy(out.mean((2, 3)), t))
    assert found.invariant == ["0.weight"]
    with pytest.raises(ValueError, match="^loss_fn: must return a scalar"):
        tuning.detect(maps, x, y, loss_fn=lambda out, t: out)


# ------------------------------------------------------------------------------------------- the angle per step
def _steady_angle(optimizer, lr, wd, momentum, steps=800, seed=0):
    """RMS angle per step of a BN-fed linear layer over the second half of ``steps`` (equilibrium: the relaxation
    time is ~50 steps here)."""
    g = torch.Generator().manual_seed(seed)
    X, Y = torch.randn(512, 20, generator=g), torch.randint(0, 10, (512,), generator=g)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(20, 64, bias=False), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 10))
    groups = tuning.param_groups(model, ["0.weight"], weight_decay=wd)
    opt = (torch.optim.SGD(groups, lr=lr, momentum=momentum) if optimizer == "sgd"
           else torch.optim.AdamW(groups, lr=lr, betas=(momentum, 0.999)))
    tracker = StepTracker(opt, model, ["0.weight"], steps_per_epoch=1)
    for _ in range(steps):
        i = torch.randint(0, 512, (16,), generator=g)
        opt.zero_grad()
        F.cross_entropy(model(X[i]), Y[i]).backward()
        opt.step()
    a = torch.tensor([h["angular_update"] for h in tracker.history[steps // 2:]], dtype=torch.float64)
    return float(a.pow(2).mean().sqrt())


@pytest.mark.parametrize("momentum, wd", [(0.9, 5e-3), (0.5, 2.5e-2)])
def test_sgd_turns_a_step_by_sqrt_2_lr_wd_over_1_plus_momentum(momentum, wd):
    measured = _steady_angle("sgd", 0.1, wd, momentum)
    assert measured == pytest.approx(tuning.angular_update_per_step(0.1, wd, momentum), rel=0.08)
    assert measured < 0.7 * math.sqrt(2 * 0.1 * wd / (1 - momentum))  # not 2ηλ/(1−μ)


def test_adamw_turns_a_step_by_sqrt_2_lr_wd_1_minus_beta1_over_1_plus_beta1():
    measured = _steady_angle("adamw", 1e-2, 0.5, 0.9)
    assert measured == pytest.approx(tuning.angular_update_per_step(1e-2, 0.5, optimizer="adamw", beta1=0.9),
                                     rel=0.1)


def test_the_per_step_angle_and_its_edges():
    assert tuning.angular_update_per_step(0.1, 5e-4, 0.9) == pytest.approx(math.sqrt(1e-4 / 1.9), rel=1e-12)
    assert tuning.angular_update_per_step(1e-3, 0.05, optimizer="adamw") == pytest.approx(
        math.sqrt(1e-4 * 0.1 / 1.9), rel=1e-12)
    with pytest.raises(ValueError, match="^momentum: required"):
        tuning.angular_update_per_step(0.1, 5e-4)
    with pytest.raises(ValueError, match="^beta1: "):
        tuning.angular_update_per_step(0.1, 5e-4, optimizer="adamw", beta1=1.0)
    assert tuning.first_order_caveat(10 / 128) == ""
    assert tuning.first_order_caveat(1.56).startswith("TF = 1.56 is not small")


# ------------------------------------------------------------------------------------------- safe defaults
def test_momentum_is_required_for_sgd_and_not_for_adamw():
    for fn, first in ((tuning.tuning_factor, dict(lr=0.1, weight_decay=2e-4)),
                      (tuning.weight_decay_for, dict(tuning_factor=10 / 128, lr=0.1)),
                      (tuning.lr_for, dict(tuning_factor=10 / 128, weight_decay=2e-4))):
        with pytest.raises(ValueError, match="^momentum: required"):
            fn(n=50_000, batch_size=128, **first)
        assert fn(n=50_000, batch_size=128, optimizer="adamw", **first) > 0
    assert tuning.weight_decay_for(10 / 128, n=50_000, batch_size=128, lr=0.1, momentum=0.9) == pytest.approx(2e-4)


def test_the_other_tensors_keep_their_decay_when_the_rule_moves_lambda():
    model = _bn_net()
    at_b = tuning.param_groups(model, ["0.weight"], weight_decay=2e-4)
    at_4b = tuning.param_groups(model, ["0.weight"], weight_decay=8e-4)
    assert [g["weight_decay"] for g in at_b] == [2e-4, 0.0] and [g["weight_decay"] for g in at_4b] == [8e-4, 0.0]
    kept = tuning.param_groups(model, ["0.weight"], weight_decay=8e-4, other_weight_decay=2e-4)
    assert [g["weight_decay"] for g in kept] == [8e-4, 2e-4]
    assert "keep it when the rule moves" in tuning.param_groups.__doc__


# ------------------------------------------------------------------------------------------- the command line
def test_cli_gives_the_angle_per_step_and_a_caveat_where_tf_is_not_small(tmp_path, monkeypatch, capsys):
    from repro_lib.__main__ import main
    from repro_lib.papers.yun2022 import tuning_rule_report as report

    monkeypatch.setattr(report, "PUBLISHED_ANGLES", tmp_path / "none.csv")
    monkeypatch.setattr(report, "PUBLISHED_STEP_ANGLES", tmp_path / "none.csv")
    assert main(["tune", "--n", "50000", "--batch-size", "128", "--lr", "0.1", "--momentum", "0.9",
                 "--weight-decay", "2e-4"]) == 0
    out = capsys.readouterr().out
    assert "angle per step at equilibrium sqrt(2 lr wd/(1+momentum)) = 0.004588 rad" in out and "caveat" not in out
    assert main(["tune", "--n", "50000", "--batch-size", "128", "--lr", "0.1", "--momentum", "0.9",
                 "--tuning-factor", "1.56"]) == 0
    out = capsys.readouterr().out
    assert "arccos(1 - TF) = 2.165 rad (124 deg)" in out and "caveat: TF = 1.56 is not small" in out


def test_cli_reference_lines_follow_the_optimizer(tmp_path, monkeypatch, capsys):
    import pandas as pd

    from repro_lib.__main__ import main
    from repro_lib.papers.yun2022 import tuning_rule_report as report

    pd.DataFrame({"setting": ["tuned at B"], "tuning factor": [0.08], "arccos(1 − TF) (rad)": [0.4027],
                  "measured Δθ (rad)": [0.2126], "measured / arccos(1 − TF)": [0.528]}).to_csv(
        tmp_path / "angles.csv", index=False)
    pd.DataFrame({"group": [0], "tensors": [52], "optimizer": ["sgd"], "lr": [0.05], "weight decay": [0.02],
                  "momentum": [0.9], "measured angle per step (rad)": [0.0331], "sqrt(2ηλ/(1+μ)) (rad)": [0.0324],
                  "measured / predicted": [1.02]}).to_csv(tmp_path / "step_angles.csv", index=False)
    monkeypatch.setattr(report, "PUBLISHED_ANGLES", tmp_path / "angles.csv")
    monkeypatch.setattr(report, "PUBLISHED_STEP_ANGLES", tmp_path / "step_angles.csv")
    assert main(["tune", "--n", "50000", "--batch-size", "128", "--lr", "0.1", "--momentum", "0.9",
                 "--weight-decay", "2e-4"]) == 0
    out = capsys.readouterr().out
    assert "tuned at B (TF 0.08) 0.53" in out and "52 residual-stream writers as one group" in out
    assert "0.0331 rad against sqrt(2 lr wd/(1+momentum)) = 0.0324 (ratio 1.02)" in out
    assert main(["tune", "--optimizer", "adamw", "--n", "50000", "--batch-size", "128", "--lr", "1e-3",
                 "--weight-decay", "0.05"]) == 0
    out = capsys.readouterr().out  # AdamW: no line from the SGD runs
    assert "published" not in out and "sqrt(2 lr wd (1-beta1)/(1+beta1)) = 0.00229" in out
    assert main(["tune", "--n", "50000", "--batch-size", "128", "--lr", "0.1", "--momentum", "0.9",
                 "--weight-decay", "2e-4", "--beta1", "0.9"]) == 2
    assert capsys.readouterr().err.startswith("error: --beta1: ")


def test_frozen_batch_norm_modules_are_named_and_nothing_before_them_is_invariant():
    torchvision = pytest.importorskip("torchvision")
    net = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), torchvision.ops.FrozenBatchNorm2d(8), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    found, said = _detect(net, *_images())
    assert found.invariant == [] and found.stored_statistics == ["1"] and found.mode == "training"
    assert any(s.startswith("1 normalization layers normalize with stored statistics, not the batch's (1)") for s in said)
