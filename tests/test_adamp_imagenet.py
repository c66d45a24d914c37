"""Plans of AdamP (Heo et al. 2021) Tables 1-2 on ImageNet: Appendix E.2 settings, the weight-decay notation
mapping, the tiny smoke plan, and ResNet-18 as registered for ImageNet."""
import math

import pytest
import torch

from repro_lib import adamp_imagenet as A
from repro_lib.distributed import ImageFolderConfig
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
        if r.config is None:
            continue
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


def test_blocked_rows_are_declared():
    p = A.plan("gpu")
    for r in p.runs:
        expect_blocked = (r.optimizer == "adam" and "adam" not in __import__("repro_lib.optim").optim
                          .list_optimizers()) or (r.cutmix and "cutmix_prob" not in
                                                  ImageFolderConfig.__dataclass_fields__)
        assert (not r.runnable) == expect_blocked
        assert bool(r.reason) == expect_blocked
    cpu = A.plan("cpu")
    assert cpu.runs and not any(r.runnable for r in cpu.runs)
    assert all("adamp_cifar" in r.reason for r in cpu.runs)


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
