"""repro_lib.tuning (the tuning rule of Yun et al. 2022 as a tool), ``python -m repro_lib tune`` and the plan of the
tutorial notebook, with the paper's own numbers as expected values."""
import math
import warnings

import pandas as pd
import pytest
import torch
import torch.nn as nn

from repro_lib import tuning

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: single-threaded for tiny tensors

PAPER = dict(n=50_000, batch_size=128, lr=0.1, momentum=0.9)  # Table 1 (b): the yellow cell has λ = 2e-4


# ---------------------------------------------------------------- the rule (Eq. 27)
def test_tuning_factor_is_the_papers():
    assert tuning.tuning_factor(weight_decay=2e-4, **PAPER) == pytest.approx(10 / 128, rel=1e-12)
    assert tuning.tuning_factor(50_000, 128, 0.2, 1e-4, 0.9) == pytest.approx(10 / 128, rel=1e-12)  # Table 1 (a)
    assert tuning.tuning_factor(3125, 128, 3.2, 1e-4, 0.9) == pytest.approx(10 / 128, rel=1e-12)  # N = 3,125
    assert tuning.tuning_factor(50_000, 128, 1.0, 1e-4, 0.0) == pytest.approx(tuning.tuning_factor(
        50_000, 128, 0.1, 1e-4, 0.9))  # Eq. 18 (plain SGD) is Eq. 27 with μ = 0


def test_weight_decay_for_the_papers_factor_and_times_four_at_four_times_the_batch():
    assert tuning.weight_decay_for(10 / 128, **PAPER) == pytest.approx(2e-4, rel=1e-12)
    wd = tuning.weight_decay_for(10 / 128, **{**PAPER, "batch_size": 4 * 128})
    assert wd == pytest.approx(4 * 2e-4, rel=1e-12)  # λ × 4 when B × 4 (Table 3's weight-decay scaling)
    # Sec. 6: the λ tuned on 80k ImageNet images predicts the full-data one, 0.0016 · 80k / 1.28M = 1e-4
    tf = tuning.tuning_factor(80_000, 512, 0.1, 0.0016, 0.9)
    assert tuning.weight_decay_for(tf, 1_280_000, 512, 0.1, 0.9) == pytest.approx(1e-4, rel=1e-12)
    # other momentum: 1 − μ enters linearly
    assert tuning.weight_decay_for(10 / 128, 50_000, 128, 0.1, 0.0) == pytest.approx(2e-3, rel=1e-12)


def test_lr_for_inverts_the_factor():
    assert tuning.lr_for(10 / 128, 50_000, 128, 2e-4, 0.9) == pytest.approx(0.1, rel=1e-12)
    assert tuning.lr_for(10 / 128, 50_000, 512, 2e-4, 0.9) == pytest.approx(0.4, rel=1e-12)  # the LR scaling rule
    for n, b, lr, wd, mu in [(1024, 16, 0.025, 0.01, 0.9), (3125, 2048, 3.2, 1e-4, 0.0)]:
        tf = tuning.tuning_factor(n, b, lr, wd, mu)
        assert tuning.lr_for(tf, n, b, wd, mu) == pytest.approx(lr, rel=1e-12)
        assert tuning.weight_decay_for(tf, n, b, lr, mu) == pytest.approx(wd, rel=1e-12)


def test_relaxation_time_and_angular_update():
    assert tuning.relaxation_epochs(10 / 128) == pytest.approx(3.2)  # 1/(4 TF): the linearized norm dynamics
    assert tuning.relaxation_epochs(10 / 128, optimizer="adamw") == pytest.approx(6.4)  # 1/(2 TF)
    assert tuning.relaxation_epochs(0.0) == math.inf
    assert tuning.angular_update_per_epoch(10 / 128) == pytest.approx(math.acos(1 - 10 / 128), rel=1e-15)
    assert tuning.angular_update_per_epoch(0.0) == 0.0
    assert tuning.angular_update_per_epoch(2.0) == pytest.approx(math.pi)


@pytest.mark.parametrize("fn, kw, name", [
    (tuning.tuning_factor, dict(n=0, batch_size=128, lr=0.1, weight_decay=2e-4, momentum=0.9), "n"),
    (tuning.tuning_factor, dict(n=50_000, batch_size=-1, lr=0.1, weight_decay=2e-4, momentum=0.9), "batch_size"),
    (tuning.tuning_factor, dict(n=50_000, batch_size=128, lr=0.1, weight_decay=-1e-4, momentum=0.9), "weight_decay"),
    (tuning.tuning_factor, dict(n=50_000, batch_size=128, lr=-0.1, weight_decay=2e-4, momentum=0.9), "lr"),
    (tuning.tuning_factor, dict(n=50_000, batch_size=128, lr=0.1, weight_decay=2e-4, momentum=1.0), "momentum"),
    (tuning.tuning_factor, dict(n=50_000, batch_size=128, lr=0.1, weight_decay=2e-4, momentum=-0.1), "momentum"),
    (tuning.tuning_factor, dict(n=math.nan, batch_size=128, lr=0.1, weight_decay=2e-4), "n"),
    (tuning.weight_decay_for, dict(tuning_factor=-0.1, n=50_000, batch_size=128, lr=0.1), "tuning_factor"),
    (tuning.weight_decay_for, dict(tuning_factor=0.1, n=50_000, batch_size=0, lr=0.1), "batch_size"),
    (tuning.weight_decay_for, dict(tuning_factor=0.1, n=50_000, batch_size=128, lr=0.0), "lr"),
    (tuning.weight_decay_for, dict(tuning_factor=0.1, n=50_000, batch_size=128, lr=0.1, momentum=1.5), "momentum"),
    (tuning.lr_for, dict(tuning_factor=0.1, n=-5, batch_size=128, weight_decay=2e-4), "n"),
    (tuning.lr_for, dict(tuning_factor=0.1, n=50_000, batch_size=128, weight_decay=0.0), "weight_decay"),
    (tuning.relaxation_epochs, dict(tuning_factor=-1.0), "tuning_factor"),
    (tuning.angular_update_per_epoch, dict(tuning_factor=2.5), "tuning_factor"),
    (tuning.angular_update_per_epoch, dict(tuning_factor=math.inf), "tuning_factor"),
])
def test_bad_values_are_refused_by_name(fn, kw, name):
    with pytest.raises(ValueError, match=rf"^{name}: "):
        fn(**kw)


# ---------------------------------------------------------------- Lemma 1 on a batch
def _batch(n=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, 32, 32, generator=g), torch.randint(0, 10, (n,), generator=g)


def test_a_timm_resnet18_conv_weights_are_scale_invariant_and_its_classifier_is_not():
    from repro_lib.models import create

    torch.manual_seed(0)
    model = create("resnet18_imagenet", num_classes=10)  # timm resnet18, zero_init_last=False
    convs = [n for n, p in model.named_parameters() if p.ndim == 4]
    found = tuning.scale_invariant_parameters(model, *_batch())
    assert found == convs  # every conv weight, each directly followed by a BN (downsample 1x1 convs included)
    assert "fc.weight" not in found and len(found) == 20
    assert found == list(model.scale_invariant_names)  # the structural reading (torch.fx) agrees


def test_the_measurement_separates_the_two_kinds_clearly():
    import timm

    torch.manual_seed(0)
    model = timm.create_model("test_byobnet", num_classes=10, zero_init_last=False)
    df = tuning.scale_invariance(model, *_batch(16))
    inv, other = df[df.verdict == "invariant"], df[df.verdict == "not invariant"]
    assert inv.grad_error.max() < 1e-9 and inv.loss_change.max() < 1e-9 and inv.cos_w_grad.abs().max() < 1e-9
    assert inv.grad_ratio.sub(0.5).abs().max() < 1e-9  # Eq. 5 with c = 2
    assert other.grad_error.min() > 0.1  # SE convs (with biases) and the classifier
    assert {t.split(".")[-2] for t in other.tensor} == {"fc1", "fc2", "fc"}


def test_zero_initialized_branches_have_no_gradient_to_measure():
    import timm

    torch.manual_seed(0)
    model = timm.create_model("resnet18", num_classes=10)  # timm's default zero_init_last=True
    df = tuning.scale_invariance(model, *_batch())
    silent = df[df.verdict == "no gradient"]
    assert len(silent) and all(".conv" in t for t in silent.tensor)
    assert "fc.weight" in set(df.tensor[df.verdict == "not invariant"])


def test_the_model_is_left_untouched_and_bad_arguments_named():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 10)).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with warnings.catch_warnings(record=True) as said:  # eval mode: BN is an affine map there
        warnings.simplefilter("always")
        assert tuning.scale_invariant_parameters(model, *_batch()) == []
    assert any("stored statistics" in str(w.message) for w in said)
    assert not model.training and all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert tuning.scale_invariant_parameters(model.train(), *_batch()) == ["0.weight"]
    model.eval()
    assert next(model.parameters()).dtype == torch.float32
    with pytest.raises(ValueError, match="^c: "):
        tuning.scale_invariance(model, *_batch(), c=1.0)
    with pytest.raises(ValueError, match="^names: "):
        tuning.scale_invariance(model, *_batch(), names=["nope"])


def test_the_tracker_follows_what_lemma_1_finds():
    from repro_lib.angular import AngularTracker

    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 10))
    tracker = AngularTracker(model, tuning.scale_invariant_parameters(model, *_batch()))
    assert tracker.names == ["0.weight"]


# ---------------------------------------------------------------- python -m repro_lib tune
def test_cli_prints_the_factor_and_the_weight_decay_that_keeps_it(capsys):
    from repro_lib.__main__ import main

    assert main(["tune", "--n", "50000", "--batch-size", "128", "--lr", "0.1", "--momentum", "0.9",
                 "--tuning-factor", "10/128"]) == 0
    out = capsys.readouterr().out
    assert "weight decay = 0.0002" in out and "0.078125 (10/128" in out and "3.2 epochs" in out
    assert "19.2 epochs" in out and "rad" in out and "per epoch" in out  # units on every number
    assert main(["tune", "--n", "50000", "--batch-size", "128", "--lr", "0.1", "--momentum", "0.9",
                 "--weight-decay", "2e-4", "--to-batch-size", "512"]) == 0
    out = capsys.readouterr().out
    assert "weight decay 0.0008" in out and "learning rate 0.4" in out and "B = 512" in out


@pytest.mark.parametrize("args, option", [
    (["--batch-size", "0"], "--batch-size"), (["--momentum", "1"], "--momentum"), (["--n", "-5"], "--n"),
    (["--to-momentum", "1.2"], "--to-momentum"), (["--to-batch-size", "0"], "--to-batch-size"),
    (["--lr", "-0.1"], "--lr"),
])
def test_cli_refuses_a_bad_value_by_name_without_traceback(args, option, capsys):
    from repro_lib.__main__ import main

    base = {"--n": "50000", "--batch-size": "128", "--lr": "0.1", "--momentum": "0.9", "--weight-decay": "2e-4"}
    argv = ["tune"]
    for k, v in {**base, **dict(zip(args[::2], args[1::2]))}.items():
        argv += [k, v]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: {option}: ") and "Traceback" not in captured.err
    assert captured.out == ""  # nothing half-printed


def test_cli_help_gives_the_papers_example(capsys):
    from repro_lib.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(["tune", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--tuning-factor 10/128" in out and "weight decay 0.0002" in out and "N = 50,000" in out


def test_cli_refuses_a_malformed_number_by_name(capsys):
    from repro_lib.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(["tune", "--n", "50000", "--batch-size", "128", "--lr", "fast", "--momentum", "0.9",
              "--weight-decay", "2e-4"])
    assert e.value.code == 2 and "argument --lr" in capsys.readouterr().err


# ---------------------------------------------------------------- the tutorial's plan
def test_the_tutorial_plan_keeps_the_rule_and_the_shrink_rules():
    from repro_lib import profiles
    from repro_lib.papers import registry
    from repro_lib.papers.yun2022 import tuning_rule

    plan = tuning_rule.plan("cpu", dataset="cifar10-jpeg")
    assert tuning_rule.breaks(plan) == []
    assert len(plan) == 24 and sorted(set(plan.seed)) == [0, 1, 2]
    tune, transfer = plan[plan.stage == "tune"], plan[plan.stage == "transfer"]
    assert set(transfer.batch_size) == {4 * b for b in set(tune.batch_size)}
    for wd in set(tune.weight_decay):  # both the rule's λ (× 4) and the control (λ kept) are run at 4B
        assert wd in set(transfer.weight_decay) and 4 * wd in set(transfer.weight_decay)
        tf = tune[tune.weight_decay == wd].tuning_factor.iloc[0]
        assert transfer[transfer.weight_decay == 4 * wd].tuning_factor.iloc[0] == pytest.approx(tf, rel=1e-12)
    assert {c.model for c in plan.cfg} == {"test_byobnet"} and len({c.hash for c in plan.cfg}) == len(plan)
    assert profiles.estimate_cpu_minutes(plan) <= 30  # the cpu notebook's training budget on 2 threads
    assert [c.hash for c in registry.plans("tuning_rule", "cpu", {"dataset": "cifar10-jpeg"})[0].cfg] == \
        [c.hash for c in plan.cfg]  # what a sweep or the stale-run check asks for is what the notebook reads


def test_paired_interval_is_students_t():
    from repro_lib.papers.yun2022.tuning_rule_report import paired_interval

    iv = paired_interval([1.0, 2.0, 3.0])
    assert iv["mean"] == 2.0 and iv["n"] == 3
    assert iv["half"] == pytest.approx(4.302652729911275 * 1.0 / math.sqrt(3), rel=1e-9)  # t(0.975, 2) · sd/√n
    assert math.isnan(paired_interval([1.0])["lo"]) and paired_interval([])["n"] == 0


def test_the_papers_own_table_read_with_the_tutorial_protocol():
    from repro_lib.papers.yun2022.tuning_rule_report import paper_protocol

    pp = paper_protocol()  # Table 3 (b): tuned at B = 128, the rule's and the kept λ at B = 512
    assert (pp["tuned_wd"], pp["rule_wd"]) == (4e-4, 1.6e-3)
    assert (pp["tuned"], pp["rule"], pp["control"]) == (95.13, 95.02, 94.76) and pp["rank"] == 2


def _fake_results(rule_gain: float, seed_noise=(0.0, 0.3, -0.2)):
    """The cpu plan with made-up outcomes: accuracy peaks at the tuning factor 0.16 whatever B is, Δθ per epoch is
    arccos(1 − TF) before the LR decay; ``rule_gain`` is added to the runs at 4B."""
    from repro_lib.papers.yun2022 import tuning_rule

    plan = tuning_rule.plan("cpu", dataset="cifar10-jpeg")
    rows = []
    for _, r in plan.iterrows():
        tf, c = r.tuning_factor, r.cfg
        acc = 60 - 20 * math.log(tf / 0.16) ** 2 + seed_noise[r.seed] + (rule_gain if r.stage == "transfer" else 0)
        hist = [dict(epoch=e, lr=c.lr if e <= 20 else c.lr / 10, angular_update=math.acos(1 - tf) * (1 + 0.01 * e / 26))
                for e in range(1, c.num_epochs + 1)]
        rows.append(dict(status="finished", test_acc=acc, history=hist, seconds=1.0))
    return pd.concat([plan.reset_index(drop=True), pd.DataFrame(rows)], axis=1)


def test_the_verdicts_of_a_rule_that_works():
    from repro_lib.papers.yun2022 import tuning_rule_report as report

    res = _fake_results(rule_gain=0.0)
    assert report.tuned_weight_decay(res) == 0.01
    a = report.arms(res)
    assert set(a.setting) == set(report.ARMS) and len(a) == 9
    assert set(a[a.setting == "rule at 4B"].weight_decay) == {0.04}
    assert set(a[a.setting == "control at 4B"].weight_decay) == {0.01}
    found = report.findings(res).set_index("claim")
    assert list(found.word) == ["holds"] * 4, found.verdict.tolist()
    assert found.attrs["regime"]["settled"]
    text = report.what_we_found(found.reset_index(), res, "CIFAR-10 JPEG stand-in (not CIFAR-10 numbers)")
    assert "λ = 0.01" in text and "λ = 0.04" in text and "*holds" in text


def test_the_verdicts_of_a_rule_that_loses_accuracy():
    from repro_lib.papers.yun2022 import tuning_rule_report as report

    found = report.findings(_fake_results(rule_gain=-30.0))  # every run at 4B far below the tuned one at B
    words = dict(zip(found.claim, found.word))
    assert words["the rule's weight decay at 4B recovers the tuned accuracy at B"] == "no"
    assert words["the rule's weight decay at 4B recovers the angular update per epoch of the tuned setting at B"] == \
        "holds"


def test_a_claim_against_the_rule_is_not_judged_while_the_rules_angular_update_still_drifts():
    """A Δθ shortfall of the rule's runs at 4B counts as *no* only where both compared runs settled before the LR
    decay; where the rule's Δθ still climbs, it is *not judged* and the text says which run drifted."""
    from repro_lib.papers.yun2022 import tuning_rule_report as report

    res = _fake_results(rule_gain=0.0)
    for i, r in res.iterrows():  # the rule's runs at 4B: Δθ well below the tuned one's, still climbing 8 % an epoch
        if r.stage == "transfer" and r.weight_decay == 0.04:
            res.at[i, "history"] = [dict(h, angular_update=h["angular_update"] * 0.1 * 1.08 ** min(h["epoch"], 20))
                                    for h in r.history]
    found = report.findings(res)
    dtheta = found.set_index("claim").loc[
        "the rule's weight decay at 4B recovers the angular update per epoch of the tuned setting at B"]
    assert dtheta.word == "not judged" and dtheta.reason == "before the regime settled; the interval points against the claim"
    assert dtheta.interval["gate_ok"] is False and dtheta.interval["to_decide"].startswith("the regime")
    assert found.attrs["regime"]["settled"] and not found.attrs["regime_rule"]["settled"]
    assert "The rule's Δθ at B = 64 is still drifting" in report.what_we_found(found, res, "CIFAR-10 JPEG stand-in")
    fresh = _fake_results(rule_gain=0.0)  # a shortfall of the same size where the rule's Δθ settled: no
    fresh["history"] = [[dict(h, angular_update=h["angular_update"] * 0.5) for h in r.history]
                        if r.stage == "transfer" and r.weight_decay == 0.04 else r.history for r in fresh.itertuples()]
    assert report.findings(fresh).set_index("claim").loc[dtheta.name, "word"] == "no"


# ---------------------------------------------------------------- AdamW, parameter groups, the edges of the CLI
def test_adamw_factor_is_n_lr_wd_over_b_and_its_inverses():
    tf = tuning.tuning_factor(50_000, 128, 1e-3, 0.05, optimizer="adamw")
    assert tf == pytest.approx(50_000 * 1e-3 * 0.05 / 128, rel=1e-12)
    assert tuning.weight_decay_for(tf, 50_000, 512, 1e-3, optimizer="adamw") == pytest.approx(0.2, rel=1e-12)
    assert tuning.lr_for(tf, 50_000, 512, 0.05, optimizer="adamw") == pytest.approx(4e-3, rel=1e-12)
    with pytest.raises(ValueError, match="^momentum: "):
        tuning.tuning_factor(50_000, 128, 1e-3, 0.05, momentum=0.9, optimizer="adamw")
    with pytest.raises(ValueError, match="^optimizer: "):
        tuning.tuning_factor(50_000, 128, 1e-3, 0.05, optimizer="adam")


@pytest.mark.parametrize("kw, name", [
    (dict(momentum=None), "momentum"), (dict(batch_size=0.5), "batch_size"), (dict(batch_size=60_000), "batch_size"),
    (dict(lr=0.0), "lr"), (dict(lr=100.0, weight_decay=0.5), "weight_decay"), (dict(n=float("inf")), "n"),
])
def test_the_rules_edges_are_value_errors_naming_the_argument(kw, name):
    with pytest.raises(ValueError, match=f"^{name}: "):
        tuning.tuning_factor(**{**PAPER, "weight_decay": 2e-4, **kw})


def test_param_groups_put_the_factor_on_the_invariant_tensors_and_say_the_rest():
    model = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(4, 10))
    groups = tuning.param_groups(model, ["0.weight"], weight_decay=8e-4)
    assert [g["names"] for g in groups] == [["0.weight"], ["1.weight", "1.bias", "5.weight", "5.bias"]]
    assert [g["weight_decay"] for g in groups] == [8e-4, 0.0]  # the rest: a decay that does not move with λ
    groups = tuning.param_groups(model, ["0.weight"], weight_decay=8e-4, other_weight_decay=2e-4)
    assert [g["weight_decay"] for g in groups] == [8e-4, 2e-4]  # the paper's setting tuned at 2e-4, kept
    groups = tuning.param_groups(model, ["0.weight"], weight_decay=8e-4, other_weight_decay=0.0)
    assert [g["weight_decay"] for g in groups] == [8e-4, 0.0]
    for opt in (torch.optim.SGD(groups, lr=0.1, momentum=0.9), torch.optim.AdamW(groups, lr=1e-3)):
        assert [g["weight_decay"] for g in opt.param_groups] == [8e-4, 0.0]
    assert tuning.param_groups(model, [], weight_decay=1e-4)[0]["names"][0] == "0.weight"  # one group: the rest
    with pytest.raises(ValueError, match="^invariant: "):
        tuning.param_groups(model, ["nope"], weight_decay=1e-4)
    with pytest.raises(ValueError, match="^other_weight_decay: "):
        tuning.param_groups(model, ["0.weight"], weight_decay=1e-4, other_weight_decay=-1.0)


def test_the_tracker_refuses_a_zero_batch_by_name():
    from repro_lib.angular import AngularTracker

    model = nn.Sequential(nn.Linear(4, 4, bias=False), nn.BatchNorm1d(4))
    tracker = AngularTracker(model, ["0.weight"])
    tracker.start_epoch()
    with pytest.raises(ValueError, match="^batch_size: "):
        tracker.end_epoch(0.1, 100, 0)
    with pytest.raises(ValueError, match="^n: "):
        tracker.end_epoch(0.1, -1, 8)


@pytest.mark.parametrize("change, option", [
    ({"--tuning-factor": "1e400", "--weight-decay": None}, "--tuning-factor"),
    ({"--weight-decay": "-2e-4"}, "--weight-decay"),
    ({"--weight-decay": "1e308"}, "--weight-decay"),
    ({"--lr": "0"}, "--lr"),
    ({"--batch-size": "0.5"}, "--batch-size"),
    ({"--batch-size": "60000"}, "--batch-size"),
    ({"--lr": "100", "--weight-decay": "0.5"}, "--weight-decay"),
    ({"--to-batch-size": "80000"}, "--to-batch-size"),
    ({"--momentum": None}, "--momentum"),
    ({"--n": "nan"}, "--n"),
])
def test_cli_edges_are_one_line_naming_the_option(change, option, capsys):
    from repro_lib.__main__ import main

    args = {"--n": "50000", "--batch-size": "128", "--lr": "0.1", "--momentum": "0.9", "--weight-decay": "2e-4",
            **change}
    argv = ["tune"]
    for k, v in args.items():
        argv += [k, v] if v is not None else []
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err
    assert option in captured.err.split(":")[0] + captured.err.split(":")[1]


def test_cli_adamw(capsys):
    from repro_lib.__main__ import main

    assert main(["tune", "--optimizer", "adamw", "--n", "50000", "--batch-size", "128", "--lr", "1e-3",
                 "--weight-decay", "0.05", "--to-batch-size", "512"]) == 0
    out = capsys.readouterr().out
    assert "N*lr*wd/B" in out and "0.0195312" in out and "1/(2 TF) = 25.6 epochs" in out
    assert "weight decay 0.2 " in out and "learning rate 0.004" in out
    assert main(["tune", "--optimizer", "adamw", "--n", "50000", "--batch-size", "128", "--lr", "1e-3",
                 "--momentum", "0.9", "--weight-decay", "0.05"]) == 2
    assert capsys.readouterr().err.startswith("error: --momentum: ")


def test_cli_sets_the_first_order_angle_beside_what_the_published_runs_measured(tmp_path, monkeypatch, capsys):
    import pandas as pd

    from repro_lib.__main__ import main
    from repro_lib.papers.yun2022 import tuning_rule_report as report

    measured = pd.DataFrame({"setting": ["tuned at B"], "tuning factor": [0.08], "arccos(1 − TF) (rad)": [0.4027],
                             "measured Δθ (rad)": [0.2126], "measured / arccos(1 − TF)": [0.2126 / 0.4027]})
    measured.to_csv(tmp_path / "angles.csv", index=False)
    monkeypatch.setattr(report, "PUBLISHED_ANGLES", tmp_path / "angles.csv")
    assert main(["tune", "--n", "50000", "--batch-size", "128", "--lr", "0.1", "--momentum", "0.9",
                 "--weight-decay", "2e-4"]) == 0
    out = capsys.readouterr().out
    assert "first-order reading of Eq. 27" in out and "tuned at B (TF 0.08) 0.53" in out
    assert report.published_angle_ratios(tmp_path / "missing.csv") == ""
