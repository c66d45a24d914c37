"""The shrink rules (``repro_lib.profiles.shrink_rules``): every cpu plan keeps the dynamics the papers' claims
depend on -- at least 16 steps per epoch (or the paper's count), the paper's η/B for nets with scale-variant
parameters, the first LR decay after enough relaxation times 1/(2 TF) -- and trains within the 45-minute cap (90 where the notebook says why); the
relaxation time is the one SGD with coupled L2 actually has, and the cost model agrees with the published runs."""
import dataclasses
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from repro_lib import profiles
from repro_lib.config import RunConfig
from repro_lib.papers import registry
from repro_lib.papers.yun2022 import grids

REPORTS = Path(__file__).resolve().parents[1] / "reports"


def _cpu_and_paper(name):
    return registry.plans(name, "cpu", {}), registry.plans(name, "paper", {})


@pytest.mark.parametrize("name", registry.with_plans())
def test_every_cpu_plan_keeps_the_rules(name):
    """A paper's protocol shrunk keeps the rules against its own paper plan; a notebook with a protocol of its own
    (the registry's ``rules``) keeps those."""
    own = registry.get(name).rules
    if own is not None:
        assert not [b for cpu in registry.plans(name, "cpu", {}) for b in own(cpu)], name
        return
    breaks = [b for cpu, paper in zip(*_cpu_and_paper(name)) for b in profiles.shrink_breaks(cpu, paper)]
    assert not breaks, f"{name}: {breaks}"


@pytest.mark.parametrize("name", registry.with_plans())
def test_every_paper_plan_keeps_the_rules_it_sets(name):
    """The paper's own protocol is the reference: it cannot break a rule (its never-settling TF/64 cells set the
    bar for themselves)."""
    plans = registry.plans(name, "paper", {})
    assert all(not profiles.shrink_breaks(p, p) for p in plans)


@pytest.mark.parametrize("name", registry.with_plans())
def test_every_cpu_notebook_trains_within_the_cap(name):
    """Within 45 minutes on 2 threads, or the registry's longer caps for the notebooks that say why (90: two tables,
    Sec. 3's 54 runs, 24 unstacked runs, back-matching's long VGG11 runs; 240: Li & Arora's 7 to 19 seeds)."""
    minutes = profiles.estimate_cpu_minutes(registry.plans(name, "cpu", {}))
    cap = registry.get(name).cpu_cap
    assert cap in (profiles.CPU_CAP_MINUTES, registry.LONG_CAP, registry.SEEDS_CAP)
    assert 0 < minutes <= cap, f"{name}: ~{minutes:.0f} min (cap {cap:g})"


def test_the_rules_catch_the_shrinks_that_tested_the_shrink():
    """The cpu shrinks these rules replaced: Table 2 at B = 128 (8 steps per epoch), Table 7 keeping η while B was
    divided by 4 (4x the paper's η/B), Table 11 at 40 epochs (first decay before one relaxation time of its TF/4
    cell)."""
    def old(name, **changes):
        e = grids.get(name)
        shrink = dataclasses.replace(e.profiles["cpu"], **changes)
        return dataclasses.replace(e, profiles={**e.profiles, "cpu": shrink}).plan("cpu"), e.plan("paper")

    assert profiles.shrink_breaks(*old("yun2022_table2", b_scale=1.0)) == ["8 steps per epoch (at least 16)"]
    t7 = profiles.shrink_breaks(*old("yun2022_table7", b_scale=1 / 4, rescale="weight_decay"))
    assert t7 and all(b.startswith("η/B") for b in t7)
    over = dict(grids.get("yun2022_table11").profiles["cpu"].overrides, num_epochs=40, eval_every=40)
    t11 = profiles.shrink_breaks(*old("yun2022_table11", overrides=over))
    assert t11 == ["first LR decay after 0.78 relaxation times 1/(2 TF) (at least 1)"]


def test_relaxation_time_is_that_of_sgd_with_coupled_weight_decay():
    """With no gradient, torch SGD (momentum μ, coupled L2 λ) shrinks ‖w‖² by e after (1−μ)/(2ηλ) steps (up to the
    ~μ/(1−μ) steps momentum takes to build up); per epoch of N/B steps that is 1/(2 TF), TF = Nηλ/(B(1−μ))."""
    lr, wd, mu, n, b = 0.1, 1e-3, 0.9, 1000, 50
    w = torch.nn.Parameter(torch.ones(100, dtype=torch.float64))
    opt = torch.optim.SGD([w], lr=lr, momentum=mu, weight_decay=wd)
    steps = round((1 - mu) / (2 * lr * wd))
    for _ in range(steps):
        w.grad = torch.zeros_like(w)
        opt.step()
    assert (w.detach().pow(2).sum() / 100).item() == pytest.approx(math.exp(-1), rel=0.04)
    tf = RunConfig(n=n, batch_size=b, lr=lr, weight_decay=wd, momentum=mu).tuning_factor
    assert profiles.relaxation_epochs(tf) == pytest.approx(steps / (n / b), rel=1e-9)


def _norm2_after(opt_cls, steps: int, w0: torch.Tensor, x: torch.Tensor, **kw) -> float:
    """‖w‖² after ``steps`` steps of ``opt_cls`` on a scale-invariant loss of the one-row weight w (w/‖w‖ applied to
    fixed inputs), relative to the start: its gradient is orthogonal to w, as for a conv weight before BN (a 2-D
    tensor: SGDP and AdamP project only those)."""
    w = torch.nn.Parameter(w0.clone())
    opt = opt_cls([w], **kw)
    for _ in range(steps):
        opt.zero_grad()
        ((x @ (w / w.norm()).T) - 1).pow(2).mean().backward()
        opt.step()
    return (w.detach().pow(2).sum() / w0.pow(2).sum()).item()


def test_relaxation_time_of_the_decoupled_and_projected_optimizers():
    """torch's AdamW shrinks w by (1 − ηλ) per step, so ‖w‖² by e after 1/(2ηλ) steps, no momentum in the shrink;
    SGDP and AdamP shrink a weight they project (a scale-invariant one) by wd_ratio × that (SGDP: ηλr/(1−μ)). The
    relaxation_tuning_factor of each puts that time at 1/(2 TF) epochs. Small η: the gradient steps' own norm growth
    (second order in η) stays under a percent of the decay."""
    from repro_lib.optim.adamp import AdamP
    from repro_lib.optim.sgdp import SGDP

    torch.manual_seed(0)
    w0, x = 10 * torch.randn(1, 256, dtype=torch.float64), torch.randn(64, 256, dtype=torch.float64)
    n, b, lr = 1000, 50, 1e-4
    cases = [  # (optimizer, its RunConfig fields, torch class, its kwargs)
        ("adamw", dict(weight_decay=20.0), torch.optim.AdamW, dict(lr=lr, weight_decay=20.0)),
        ("adamp", dict(weight_decay=200.0), AdamP, dict(lr=lr, weight_decay=200.0)),
        ("sgdp", dict(weight_decay=20.0, momentum=0.9), SGDP, dict(lr=lr, weight_decay=20.0, momentum=0.9)),
    ]
    for name, fields, cls, kw in cases:
        cfg = RunConfig(n=n, batch_size=b, lr=lr, optimizer=name, weight_decay_mode="decoupled", **fields)
        steps = round(profiles.relaxation_epochs(profiles.relaxation_tuning_factor(cfg)) * n / b)
        assert _norm2_after(cls, steps, w0, x, **kw) == pytest.approx(math.exp(-1), rel=0.02), name
    sgdp = RunConfig(n=n, batch_size=b, lr=lr, optimizer="sgdp", weight_decay_mode="decoupled", weight_decay=20.0,
                     momentum=0.9, optimizer_kwargs={"wd_ratio": 0.5})
    assert profiles.relaxation_tuning_factor(sgdp) == pytest.approx(n * lr * 20.0 * 0.5 / (b * 0.1))
    with pytest.raises(ValueError, match="^optimizer:"):
        profiles.relaxation_tuning_factor(RunConfig(optimizer="adam", lr=1e-3, weight_decay=1e-4))


def test_first_decay_epoch_by_schedule():
    step = RunConfig(num_epochs=60)
    assert profiles.first_decay_epoch(step) == 30
    assert profiles.first_decay_epoch(RunConfig(num_epochs=60, schedule_kwargs={"milestones": (0.25, 0.5)})) == 15
    assert profiles.first_decay_epoch(RunConfig(num_epochs=100, schedule="cosine")) == 50
    assert profiles.first_decay_epoch(RunConfig(num_epochs=100, schedule="constant")) is None


def test_steps_rule_asks_for_the_papers_count_where_it_is_lower():
    """Table 5's B = 2,048 cell at N = 25,000 takes 13 steps per epoch in the paper: 13 is enough for ours. A
    Table 5 shrink of N by 12.5 and B by 16 (N = 2,000, B = 8 ... 128, 60 epochs) keeps every rule."""
    e = grids.get("yun2022_table5")
    over = dict(e.profiles["cpu"].overrides, num_epochs=60, eval_every=60)
    shrink = dataclasses.replace(e.profiles["cpu"], n_scale=2 / 25, b_scale=1 / 16, overrides=over)
    plan = dataclasses.replace(e, profiles={**e.profiles, "cpu": shrink}).plan("cpu")
    rules = profiles.shrink_rules(plan, e.plan("paper"))
    low = rules[rules.paper_steps < profiles.MIN_STEPS_PER_EPOCH]
    assert len(low) and (low.min_steps == low.paper_steps).all() and (low.steps >= low.min_steps).all()
    assert not profiles.shrink_breaks(plan, e.plan("paper"))
    old = dataclasses.replace(e.profiles["cpu"], n_scale=1 / 25, b_scale=1 / 4)  # the shrink N / 25, B / 4 did not
    old = dataclasses.replace(e, profiles={**e.profiles, "cpu": old}).plan("cpu")
    assert profiles.shrink_breaks(old, e.plan("paper")) == ["2 steps per epoch (at least 13)",
                                                            "4 steps per epoch (at least 16)",
                                                            "8 steps per epoch (at least 16)"]


def test_cost_model_counts_a_shared_run_once_and_refuses_an_unknown_model():
    t8, t10 = grids.get("yun2022_table8").plan("cpu"), grids.get("yun2022_table10").plan("cpu")
    assert {c.hash for c in t8.cfg} == {c.hash for c in t10.cfg}
    assert profiles.estimate_cpu_minutes([t8, t10]) == pytest.approx(profiles.estimate_cpu_minutes(t8))
    odd = pd.DataFrame({"cfg": [RunConfig(model="test_efficientnet", n=256, num_epochs=1)]})
    with pytest.raises(ValueError, match="^model:"):
        profiles.estimate_cpu_minutes(odd)


def test_cost_model_prices_compiled_resnet_runs_by_their_own_records():
    """A compiled ResNet-18 stack at B = 32 costs what the compiled records say (CPU_COMPILED_BATCH_FACTOR_BY_MODEL),
    less than an eager one; at B = 16, 64 and 128, where the two kinds of record agree, the same; other models
    ignore the flag."""
    def minutes(**kw):
        plan = pd.DataFrame({"cfg": [RunConfig(model="resnet18", scale_invariant=True, n=1000, num_epochs=10, **kw)]})
        plan.attrs["max_members"] = 3
        return profiles.estimate_cpu_minutes(plan)

    for b, factor in profiles.CPU_COMPILED_BATCH_FACTOR_BY_MODEL["resnet18"].items():
        eager, compiled = minutes(batch_size=b), minutes(batch_size=b, compile=True)
        assert compiled == pytest.approx(eager * factor / profiles.CPU_BATCH_FACTOR[b]) and compiled < eager
    for b in (16, 64, 128):
        assert minutes(batch_size=b, compile=True) == pytest.approx(minutes(batch_size=b))
    vgg = [profiles.estimate_cpu_minutes(pd.DataFrame({"cfg": [RunConfig(model="vgg11_bn", n=1000, batch_size=16,
                                                                       compile=c)]})) for c in (False, True)]
    assert vgg[0] == vgg[1]


@pytest.mark.skipif(not (REPORTS / "runs").exists(), reason="no published store")
@pytest.mark.parametrize("name", registry.with_plans())
def test_cost_model_agrees_with_the_published_runs(name):
    """The estimate of the runs a published cpu notebook trained is within a factor of 2 of their recorded training
    time (2 threads; the machine's speed varied about that much between the days the records were made)."""
    plans = registry.plans(name, "cpu", {"dataset": "cifar10-jpeg"})
    cfgs, seconds = [], 0.0
    for c in {c.hash: c for p in plans for c in p.cfg}.values():
        f = REPORTS / "runs" / f"{c.hash}.json"
        if f.exists():
            rec = json.loads(f.read_text())
            if rec["status"] == "finished" and rec["env"].get("num_threads") == 2:
                cfgs.append(c)
                seconds += rec["result"]["train_seconds"]
    if len(cfgs) < 5:
        pytest.skip(f"{name}: {len(cfgs)} published runs of the current plan")
    done = pd.DataFrame({"cfg": cfgs})
    done.attrs["max_members"] = registry.get(name).max_members("cpu")  # stacked as the notebook stacks them
    ratio = profiles.estimate_cpu_minutes(done) * 60 / seconds
    assert 0.5 < ratio < 2.0, f"{name}: estimate / measured = {ratio:.2f}"


def test_the_notebooks_print_the_rules_with_the_grid(tmp_path, capsys):
    """The set-up cell of a Yun et al. notebook prints the rules beside the grid: kept for Table 2's cpu shrink,
    broken -- with the rule named -- for a Table 5 shrink that divides B less than N (N / 25, B / 4: 2-8 steps per
    epoch in its large-B cells)."""
    from repro_lib.papers.yun2022.table_notebook import YunTables, rules_text

    t2 = rules_text(grids.get("yun2022_table2").plan("cpu"), grids.get("yun2022_table2").plan("paper"))
    assert t2.startswith("shrink rules: 16 steps per epoch (paper 196; at least 16)") and t2.endswith("-- kept")
    t5 = grids.get("yun2022_table5")
    t5 = dataclasses.replace(t5, profiles={**t5.profiles, "cpu": grids._cpu(80, n_scale=1 / 25, b_scale=1 / 4,
                                                                            keep={"n": (25000,)}, compile=False)})
    t5 = rules_text(t5.plan("cpu"), t5.plan("paper"))
    assert t5.endswith("BROKEN: 2 steps per epoch (at least 13); 4 steps per epoch (at least 16); 8 steps per epoch "
                       "(at least 16)")
    YunTables("yun2022_tables7_11", ["yun2022_table7", "yun2022_table11"], profile="cpu",
              results_dir=tmp_path).summary()
    out = capsys.readouterr().out
    assert out.count("-- kept") == 2 and "η/B 0.000391–0.00625 (paper 0.000391–0.00625)" in out
