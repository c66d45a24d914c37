"""Yun et al. 2022, Tables 2-11 as experiments: the paper profile is the paper's protocol on every cell, every
shrunk profile keeps each cell's tuning factor N*eta*lambda/(B(1-mu)) (Eq. 27), and the yellow cells are those at
the table's declared factor."""
import math
import re
from collections import Counter

import pytest
import torch

from repro_lib import data as data_mod
from repro_lib import batched
from repro_lib.papers.yun2022 import grids as experiments
from repro_lib.papers import transcribed as paper
from repro_lib.config import PROFILES
from repro_lib.models import create
from repro_lib.schedules import build_schedule

TABLES = [f"yun2022_table{k}" for k in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11)]
# notebook -> the experiments it runs (smoke: at most 4 tiny runs per notebook)
NOTEBOOKS = {"table2": ["yun2022_table2"], "tables3_4": ["yun2022_table3", "yun2022_table4"],
             "table5": ["yun2022_table5"], "table6": ["yun2022_table6"],
             "tables7_11": ["yun2022_table7", "yun2022_table11"], "tables8_10": ["yun2022_table8", "yun2022_table10"],
             "table9": ["yun2022_table9"]}
UNMODIFIED = {"yun2022_table7", "yun2022_table11"}


def _paper_tf(r, momentum):
    return r.paper_n * r.paper_lr * r.paper_weight_decay / (r.paper_batch_size * (1 - momentum))


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", TABLES)
def test_every_profile_keeps_every_cells_tuning_factor(name, profile):
    plan = experiments.get(name).plan(profile)
    assert len(plan) > 0
    n_scale = experiments.get(name).profiles[profile].n_scale
    for _, r in plan.iterrows():  # the paper's, but for N rounded to whole images (Table 5 cpu: 1,562 for 1,562.5)
        rounding = r.cfg.n / (r.paper_n * n_scale)
        assert abs(rounding - 1) <= 0.5 / r.cfg.n
        assert r.cfg.tuning_factor == pytest.approx(_paper_tf(r, r.cfg.momentum) * rounding, rel=1e-9)
        assert r.cfg.profile == profile
        assert r.cfg.batch_size <= r.cfg.n
    target = paper.yellow_factor(name)
    tf = plan.tuning_factor
    assert plan.yellow.any(), "every profile runs at least one yellow cell (the angular figure plots them)"
    assert ((tf / target - 1).abs() < 0.02).eq(plan.yellow).all(), "yellow <=> tuning factor = declared factor"


@pytest.mark.parametrize("name", TABLES)
def test_paper_profile_is_every_cell_with_three_seeds_and_the_papers_protocol(name):
    plan = experiments.get(name).plan("paper")
    table = paper.table(name)
    assert len(plan) == 3 * len(table)
    assert sorted(plan.seed.unique()) == [0, 1, 2]
    epochs = 120 if name == "yun2022_table9" else 300
    for _, r in plan.iterrows():
        c = r.cfg
        assert (c.width, c.num_epochs, c.ghost_batch, c.optimizer, c.weight_decay_mode) == (64, epochs, 64, "sgd", "coupled")
        assert (c.n, c.batch_size, c.lr, c.weight_decay) == (r.paper_n, r.paper_batch_size, r.paper_lr,
                                                               r.paper_weight_decay)
        assert not c.synthetic and c.augment and c.n_test == 0
        assert c.scale_invariant == (name not in UNMODIFIED)
    row = table.iloc[0]
    c = plan.cfg.iloc[0]
    assert (c.model, c.dataset, c.momentum, c.schedule) == (row.model, row.dataset, row.momentum, row.schedule)
    # Table 2 and 4 are plain SGD, Table 6 cosine, Tables 8/10 DenseNet on CIFAR-100, Table 9 Tiny ImageNet
    expect = {"yun2022_table2": ("sgd", 0.0), "yun2022_table4": ("sgd", 0.0)}.get(name, ("sgdm", 0.9))
    assert set(table.optimizer) == {expect[0]} and all(x.momentum == expect[1] for x in plan.cfg)
    assert c.schedule == ("cosine" if name == "yun2022_table6" else "step")
    assert c.model == ("densenet100" if name in ("yun2022_table8", "yun2022_table10") else "resnet18")
    assert c.dataset == {"yun2022_table8": "cifar100", "yun2022_table10": "cifar100",
                         "yun2022_table9": "tiny_imagenet"}.get(name, "cifar10")


@pytest.mark.parametrize("name, epochs, milestones", [("yun2022_table3", 300, (150, 225)),
                                                        ("yun2022_table9", 120, (60, 90))])
def test_step_schedule_divides_by_ten_at_the_papers_epochs(name, epochs, milestones):
    cfg = experiments.get(name).plan("paper", seeds=[0]).cfg.iloc[0]
    sched = build_schedule(cfg, steps_per_epoch=3)
    assert cfg.num_epochs == epochs
    lrs = [sched.lr(3 * e) for e in range(epochs)]
    drops = [e for e in range(1, epochs) if not math.isclose(lrs[e], lrs[e - 1])]
    assert drops == list(milestones)
    assert lrs[-1] == pytest.approx(cfg.lr / 100)


@pytest.mark.parametrize("name", TABLES)
def test_rescaled_hyperparameter(name):
    """Shrunk profiles multiply the LR by b_scale/n_scale, except for the unmodified ResNet-18 (Tables 7, 11),
    whose LR follows B (the paper's η/B for its non-scale-invariant BN affine and FC) and whose WD takes the rest
    of the factor (1/n_scale), so that the tuning factor is the paper's all the same."""
    for profile in ("smoke", "cpu"):
        plan = experiments.get(name).plan(profile)
        if name in UNMODIFIED:
            ratio = (plan.lr / plan.batch_size) / (plan.paper_lr / plan.paper_batch_size)
            assert ((ratio - 1).abs() < 1e-9).all()
            assert ((plan.weight_decay / plan.paper_weight_decay - plan.paper_n / plan.n).abs() < 1e-6).all()
        else:
            shrink = experiments.get(name).profiles[profile]
            assert (plan.weight_decay == plan.paper_weight_decay).all()
            assert ((plan.lr / plan.paper_lr - shrink.b_scale / shrink.n_scale).abs() < 1e-9).all()


def test_unknown_rescale_is_rejected():
    e = experiments.get("yun2022_table2")
    bad = experiments.Experiment(table=e.table, profiles={**e.profiles, "smoke": experiments.Shrink(rescale="wd")})
    with pytest.raises(ValueError, match="^rescale:"):
        bad.plan("smoke")


@pytest.mark.parametrize("nb, names", NOTEBOOKS.items())
def test_smoke_is_tiny_and_synthetic_cpu_is_real(nb, names):
    plans = [experiments.get(n).plan("smoke") for n in names]
    assert sum(len(p) for p in plans) <= 4
    assert all(c.synthetic and c.num_epochs <= 3 and c.width == 4 for p in plans for c in p.cfg)
    cpu = [experiments.get(n).plan("cpu") for n in names]
    assert not any(c.synthetic for p in cpu for c in p.cfg)  # the cpu budget: tests/test_shrink_rules.py


@pytest.mark.parametrize("name", ["yun2022_table1", *TABLES])
def test_cpu_verdicts_can_decide(name):
    """Every column of a cpu grid has its yellow cell interior -- two cells of smaller and two of larger tuning
    factor (x1/4, x1/2, x2, x4), each keeping its paper tuning factor --, 3 seeds per cell, and the final accuracy on
    the full test set (n_test = 0)."""
    plan = experiments.get(name).plan("cpu")
    yellow = paper.yellow_factor(name)
    assert all(c.n_test == 0 for c in plan.cfg)
    assert plan.groupby(["lr", "weight_decay", "n", "batch_size"]).seed.nunique().min() >= 3
    b_grid = name in ("yun2022_table3", "yun2022_table4", "yun2022_table10", "yun2022_table11")
    for _, g in plan.groupby("paper_batch_size" if b_grid else "paper_n"):
        ratios = sorted({math.log2(t / yellow) for t in g.tuning_factor})
        rounding = math.log2(1 + 0.5 / g.n.min()) + 1e-9  # N rounded to whole images
        assert [round(x) for x in ratios] == [-2, -1, 0, 1, 2] and all(abs(x - round(x)) <= rounding for x in ratios), \
            (name, ratios)
        assert g.yellow.any()


def test_datasets_are_the_papers():
    """Every profile but smoke trains on the paper's own dataset; the JPEG stand-in only when asked for."""
    for name in ("yun2022_table8", "yun2022_table10"):
        assert {c.dataset for c in experiments.get(name).plan("cpu").cfg} == {"cifar100"}
    assert {c.dataset for c in experiments.get("yun2022_table9").plan("cpu").cfg} == {"tiny_imagenet"}
    assert {c.dataset for c in experiments.get("yun2022_table9").plan("smoke").cfg} == {"tiny_imagenet"}
    for name in TABLES:
        assert "cifar10-jpeg" not in {c.dataset for c in experiments.get(name).plan("cpu").cfg}
    stand_in = experiments.get("yun2022_table1").plan("cpu", dataset="cifar10-jpeg")
    assert {c.dataset for c in stand_in.cfg} == {"cifar10-jpeg"}


@pytest.mark.parametrize("name", sorted(UNMODIFIED))
def test_unmodified_resnet_tracks_only_conv_weights_followed_by_bn(name):
    cfg = experiments.get(name).plan("smoke").cfg.iloc[0]
    m = create(cfg.model, num_classes=10, scale_invariant=cfg.scale_invariant, width=cfg.width)
    trainable = {n for n, p in m.named_parameters() if p.requires_grad}
    tracked = set(m.scale_invariant_names)
    assert tracked < trainable
    assert all(n.endswith("weight") and m.get_parameter(n).ndim == 4 for n in tracked)
    assert any(m.get_parameter(n).ndim == 1 for n in trainable - tracked)  # BN affine is trained, not tracked


def test_large_batch_small_n_keeps_the_last_partial_batch():
    """Table 5's B = 2048, N = 3125 cell: two steps per epoch, the second of 1077 images."""
    cell = experiments.get("yun2022_table5").plan("paper", seeds=[0])
    cfg = cell[(cell.n == 3125) & (cell.batch_size == 2048)].cfg.iloc[0]
    x = torch.zeros(cfg.n, 3, 2, 2, dtype=torch.uint8)
    d = data_mod.ImageTensors(x, torch.zeros(cfg.n, dtype=torch.int64), "t", 10, (0, 0, 0), (1, 1, 1))
    sizes = [len(y) for _, y in data_mod.TensorBatches(d, cfg.batch_size, train=True, augment=False).epoch(0)]
    assert sizes == [2048, 1077]


@pytest.mark.parametrize("name", sorted(n for n in experiments.EXPERIMENTS if n.startswith("yun2022_")))
def test_cpu_profile_compiles_where_a_batch_shape_recurs(name):
    """compile=True (a compile of about a minute per batch shape, then 1.24x per epoch on 2 CPU threads) only where
    every batch shape of the cpu plan is trained by at least two stacked groups; never for DenseNet-100 or Table 5
    (five batch sizes, one group each); Sec. 3 (three batch shapes, 3-9 groups each) compiles; the gpu/paper
    profiles use CUDA graphs instead (the two are exclusive)."""
    plan = experiments.get(name).plan("cpu")
    cfgs = list(plan.cfg)
    groups = batched.group_configs(cfgs, max_members=plan.attrs.get("max_members", 3))
    shapes = Counter((cfgs[g[0]].batch_size, len(g)) for g in groups)
    on = {c.compile for c in cfgs}
    assert len(on) == 1, f"{name}: one compile setting per notebook grid"
    if on == {True}:
        assert all(c.model == "resnet18" for c in cfgs) and min(shapes.values()) >= 2, shapes
    if name in ("yun2022_table5", "yun2022_table8", "yun2022_table10"):
        assert on == {False}
    if name in ("yun2022_section3", "yun2022_table1", "yun2022_table2", "yun2022_table6"):
        assert on == {True}
    assert not any(c.compile for c in experiments.get(name).plan("paper").cfg)


def test_summary_prints_the_grid_the_profile_trains(tmp_path, capsys):
    """The set-up cell's description of a profile comes from its plan: every cell with the paper's (N, B, η, λ)
    beside ours, the seeds and the test set, so the notebook cannot describe a grid it does not train."""
    from repro_lib.papers.yun2022.table_notebook import YunTables, grid

    plan = experiments.get("yun2022_table1").plan("cpu")
    g = grid(plan)
    assert len(g) == 10 and set(g.seeds) == {3} and g.yellow.sum() == 2
    # ours keeps the paper's tuning factor, N·η·λ/(B(1−μ)) with μ = 0.9
    ours = g["N"] * g["η"] * g["λ"] / (g["B"] * 0.1)
    theirs = g["paper N"] * g["paper η"] * g["paper λ"] / (g["paper B"] * 0.1)
    assert ((ours / g.TF - 1).abs() < 1e-9).all() and ((theirs / g.TF - 1).abs() < 1e-9).all()
    YunTables("yun2022_table1", ["yun2022_table1"], profile="cpu", results_dir=tmp_path).summary()
    out = capsys.readouterr().out
    assert "seeds [0, 1, 2] (10 cells)" in out and "the full test set" in out and "1.35M image-epochs" in out
    assert len(re.findall(r"True +3\n", out)) == 2 and "paper η" in out  # the two yellow cells, 3 seeds each
    YunTables("yun2022_table1", ["yun2022_table1"], profile="smoke", results_dir=tmp_path).summary()
    assert "test images: 200 class-balanced" in capsys.readouterr().out


def test_findings_table_is_short_and_readable():
    """The findings shown in a Yun et al. notebook: one row per column, at most 8 columns, seeds as "lo–hi",
    the yellow cell as "mean ± sd", no column empty throughout; the paper profile's summary does not print its
    whole grid."""
    import math

    import pandas as pd

    from repro_lib.papers.yun2022.table_notebook import FINDINGS_SHOWN, findings_view

    found = pd.DataFrame([
        dict(subtable="a", n=3125, cells=7, seeds=0, seeds_max=3, rank="best", verdict="holds", reason="",
             yellow_mean=74.14, yellow_sd=0.55, best_other=74.08, best_other_tf=0.1, margin=0.06, spread=0.55,
             ci_lo=-1.2, ci_hi=1.32, pairs=2, peak_tf=math.nan, peak_lo=math.nan, peak_hi=math.nan, yellow_tf=0.078,
             missing=4, diverged=1, settled=True, best_tf=0.078, paper_best_tf=0.078, rank_corr=0.8),
        dict(subtable="a", n=6250, cells=7, seeds=0, seeds_max=0, rank="n/a", verdict="undecided",
             reason="21 runs missing", yellow_mean=math.nan, yellow_sd=math.nan, best_other=math.nan,
             best_other_tf=math.nan, margin=math.nan, spread=math.nan, ci_lo=math.nan, ci_hi=math.nan, pairs=0,
             peak_tf=math.nan, peak_lo=math.nan, peak_hi=math.nan, yellow_tf=0.078, missing=21, diverged=0,
             settled=None, best_tf=math.nan, paper_best_tf=math.nan, rank_corr=math.nan)])
    v = findings_view(found, "n")
    assert len(v.columns) <= FINDINGS_SHOWN
    assert v.iloc[0].tolist()[:4] == ["(a) 3,125", "0–3", "holds", "74.14 ± 0.55 (best)"]
    assert v.iloc[1]["yellow cell"] == "" and v.iloc[0]["Δθ settled"] == "yes" and v.iloc[1]["Δθ settled"] == ""
    assert v.iloc[0]["runs left out"] == "1 diverged, 4 missing" and v.iloc[1]["runs left out"] == "21 missing"
    assert v.iloc[0]["yellow − best other [95 %]"] == "+0.06 [-1.20, +1.32]" and v.iloc[1]["yellow − best other [95 %]"] == ""
    assert v.iloc[0]["vs paper's ranking"] == "same best, ρ 0.80"


def test_paper_profile_summary_counts_the_grid_instead_of_printing_it(tmp_path, capsys):
    from repro_lib.papers.yun2022.table_notebook import SHOW_CELLS, YunTables

    YunTables("yun2022_table1", ["yun2022_table1"], profile="paper", results_dir=tmp_path).summary()
    out = capsys.readouterr().out
    assert out.startswith("yun2022_table1 so far: 0 of 315 runs in the store; 0 of 15 columns checked (with runs)")
    assert "105 cells, none with a run in the store yet" in out
    assert "minutes on 2 CPU threads" not in out  # the cpu estimate belongs to the cpu profile
    assert len(out.splitlines()) < SHOW_CELLS
