"""Plans of AdamP (Heo et al. 2021) Tables 1-2 on ImageNet: Appendix E.2 settings, the weight-decay notation
mapping, the tiny smoke plan, and ResNet-18 as registered for ImageNet."""
import math

import pytest
import torch

from repro_lib.papers.adamp import imagenet as A
from repro_lib.models import create


def test_wd_notation_mapping():
    # AdamW-paper notation: "wd 1e-4" at lr 1e-3 is torch AdamW(weight_decay=0.1); per-step shrink lr·wd = 1e-4
    assert A.torch_weight_decay("adamw", 1e-4, 1e-3) == (pytest.approx(0.1), "decoupled")
    assert A.torch_weight_decay("adamp", 1e-4, 1e-3) == (pytest.approx(0.1), "decoupled")
    assert A.torch_weight_decay("sgd", 1e-4, 0.1) == (1e-4, "coupled")
    assert A.torch_weight_decay("sgdp", 1e-4, 0.1) == (1e-4, "decoupled")
    assert A.torch_weight_decay("adam", 1e-4, 1e-3) == (1e-4, "coupled")
    with pytest.raises(ValueError, match="optimizer"):
        A.torch_weight_decay("lars", 1e-4, 0.1)
    # the torch AdamW built from the plan shrinks a weight by exactly the paper's 1e-4 in one step at peak LR
    cfg = next(r.config for r in A.plan("paper").runs if r.table == "table2" and r.optimizer == "adamw"
               and r.model == "resnet18")
    from repro_lib.optim import build_optimizer

    m = torch.nn.Linear(3, 1, bias=False)
    m.weight.data.fill_(1.0)
    opt = build_optimizer(cfg, m)
    m.weight.grad = torch.zeros_like(m.weight)
    opt.step()
    assert torch.allclose(m.weight, torch.full_like(m.weight, 1 - 1e-4))


def test_paper_profile_equals_appendix_e2():
    p = A.plan("paper")
    by = {}
    for r in p.runs:
        assert r.seed in (0, 1, 2)
        by.setdefault((r.table, r.model, r.optimizer, r.wd_paper, r.cutmix), []).append(r)
    assert all(len(v) == 3 for v in by.values())  # three seeds (Appendix H)
    for r in p.runs:
        c = r.config
        assert (c.dataset, c.image_size, c.n, c.schedule) == ("imagenet", 224, 0, "cosine")
        if r.model == "mobilenetv2":
            assert c.batch_size == 1024 and c.label_smoothing > 0 and c.num_epochs == 150
            assert c.model == "mobilenetv2_100"
            continue
        assert c.batch_size == 256 and c.label_smoothing == 0
        assert c.num_epochs == (150 if r.cutmix else 100)
        assert c.model == {"resnet18": "resnet18_imagenet"}.get(r.model, "resnet50")
        if r.optimizer in ("sgd", "sgdp"):
            assert (c.lr, c.momentum, c.nesterov) == (0.1, 0.9, True)
            assert c.weight_decay == r.wd_paper
        else:
            assert c.lr == 1e-3 and not c.nesterov
            assert tuple(c.optimizer_kwargs["betas"]) == (0.9, 0.999) and c.optimizer_kwargs["eps"] == 1e-8
            if r.optimizer == "adam":  # coupled L2: the paper's number
                assert c.weight_decay == r.wd_paper and c.weight_decay_mode == "coupled"
            else:  # AdamW notation: torch shrink lr·wd equals the paper's wd
                assert math.isclose(c.weight_decay * c.lr, r.wd_paper)
        if r.optimizer in ("sgdp", "adamp"):
            assert c.optimizer_kwargs["delta"] == 0.1 and c.optimizer_kwargs["wd_ratio"] == 0.1
            assert c.weight_decay_mode == "decoupled"
    t1 = [(r.optimizer, r.wd_paper) for r in p.runs if r.table == "table1" and r.seed == 0]
    assert t1 == list(A.TABLE1_ROWS)
    assert {r.wd_paper for r in p.runs if r.table == "table2" and r.model != "mobilenetv2"} == {1e-4}
    f = A.plan("paper", wd_source="F")
    wd = {(r.model, r.optimizer): r.wd_paper for r in f.runs if r.table == "table2"}
    assert wd[("resnet18", "sgdp")] == 1e-5 and wd[("resnet18", "adamp")] == 1e-6
    # ResNet-18 Table 2 SGD = Table 1 SGD wd 1e-4: one config, counted once
    assert len(p.configs()) == len({c.hash for c in p.configs()}) < sum(r.runnable for r in p.runs)
    assert 500 < A.gpu_hours(p) < 10000


def _tiny_bn_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, bias=False), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3))


@pytest.mark.parametrize("profile", ["gpu", "paper"])
def test_every_table_row_runs(profile):
    """Every row of Tables 1-2 (Adam column and ResNet-50 + CutMix included) has a config that fit_imagefolder
    can use: registered model, optimizer built from the config's kwargs, schedule, one optimizer step."""
    from repro_lib.models import list_models
    from repro_lib.optim import build_optimizer
    from repro_lib.schedules import build_schedule

    p = A.plan(profile)
    assert p.runs and not p.blocked()
    assert {(r.table, r.model, r.optimizer) for r in p.runs} >= {("table2", m, o) for m in A.TABLE2_MODELS
                                                                 for o in A.TABLE2_OPTIMIZERS}
    x, y = torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 2, 0])
    for cfg in {r.config.hash: r.config for r in p.runs if r.runnable}.values():
        assert cfg.model in list_models()
        model = _tiny_bn_net()
        opt = build_optimizer(cfg, model)
        sched = build_schedule(cfg, steps_per_epoch=10)
        assert sched.lr(0) == pytest.approx(cfg.lr)
        before = [q.detach().clone() for q in model.parameters()]
        torch.nn.functional.cross_entropy(model(x), y).backward()
        sched.apply(opt, 0)
        opt.step()
        assert all(torch.isfinite(q).all() for q in model.parameters())
        assert any(not torch.equal(a, q) for a, q in zip(before, model.parameters())), cfg.optimizer
    assert all(r.reason == "" for r in p.runs)


def test_cutmix_only_on_the_papers_cutmix_row():
    """Table 2's "ResNet50 + CutMix" row (E.2: 150 epochs) is the only one trained with CutMix, at probability 1
    and β = 1 (the CutMix paper's ImageNet recipe); every other row of Tables 1-2 has cutmix_prob = 0."""
    from repro_lib.papers import transcribed as paper

    ref = paper.table("adamp_table2")
    paper_cutmix = {(f"{m}+cutmix" if c else m, o) for m, o, c in zip(ref.model, ref.optimizer, ref.cutmix) if c}
    assert paper_cutmix == {("resnet50+cutmix", o) for o in A.TABLE2_OPTIMIZERS}
    for profile in ("gpu", "paper"):
        runs = A.plan(profile).runs
        cut = {(r.model, r.optimizer) for r in runs if r.config.cutmix_prob > 0}
        assert cut == paper_cutmix
        for r in runs:
            c = r.config
            assert r.cutmix == (r.table == "table2" and (r.model, r.optimizer) in paper_cutmix)
            assert c.cutmix_prob == (1.0 if r.cutmix else 0.0)
            if r.cutmix:
                assert c.cutmix_beta == 1.0 and c.model == "resnet50" and c.num_epochs == 150


def test_cpu_profile_is_declared_unavailable():
    cpu = A.plan("cpu")
    assert cpu.runs and not any(r.runnable for r in cpu.runs) and cpu.blocked() == cpu.runs
    assert all("adamp_cifar" in r.reason for r in cpu.runs)
    assert not cpu.configs() and A.gpu_hours(cpu, include_blocked=False) == 0
    assert A.gpu_hours(cpu) == pytest.approx(A.gpu_hours(A.plan("gpu")))
    df = A.results_frame(cpu, {})
    assert set(df.status) == {"unavailable"}


def test_smoke_plan_is_tiny_and_bad_parameters_raise():
    p = A.plan("smoke")
    cfgs = p.configs()
    assert [c.optimizer for c in cfgs] == ["sgd", "sgdp"]
    for c in cfgs:
        assert c.model == "test_efficientnet" and c.num_epochs == 1 and c.image_size == 32
        assert c.dataset == "synthetic-imagefolder" and c.device == "cpu" and c.num_workers == 0
    assert p.sizes["synthetic"]["per_class"] * p.sizes["synthetic"]["num_classes"] <= 64
    with pytest.raises(ValueError, match="profile"):
        A.plan("huge")
    with pytest.raises(ValueError, match="wd_source"):
        A.plan("smoke", wd_source="G")
    assert A.plan("smoke", seed=5).configs()[0].seed == 5


def test_resnet18_imagenet_is_timm_resnet18():
    import timm

    m = create("resnet18_imagenet", num_classes=1000)
    ref = timm.create_model("resnet18", pretrained=False, num_classes=1000)
    assert [(n, p.shape) for n, p in m.named_parameters()] == [(n, p.shape) for n, p in ref.named_parameters()]
    assert abs(sum(p.numel() for p in m.parameters()) / 1e6 - 11.7) < 0.05  # Table 2: 11.7M
    convs = [n + ".weight" for n, mod in m.named_modules() if isinstance(mod, torch.nn.Conv2d)]
    assert m.scale_invariant_names == convs  # every conv of ResNet-18 feeds a BatchNorm
    assert "fc.weight" not in m.scale_invariant_names
