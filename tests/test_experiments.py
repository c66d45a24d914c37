"""Profiles shrink an experiment's sizes only; every shrunk cell keeps the paper's tuning factor."""
import pytest

from repro_lib.papers.yun2022 import grids as experiments
from repro_lib.papers import transcribed as paper
from repro_lib.config import PROFILES
from repro_lib.profiles import resolve


@pytest.mark.parametrize("profile", PROFILES)
def test_table1_plan_keeps_the_papers_tuning_factor(profile):
    exp = experiments.get("yun2022_table1")
    plan = exp.plan(profile)
    assert len(plan) > 0
    for _, r in plan.iterrows():
        paper_tf = r.paper_n * r.paper_lr * r.paper_weight_decay / (r.paper_batch_size * (1 - 0.9))
        assert r.cfg.tuning_factor == pytest.approx(paper_tf, rel=1e-9)
        assert r.cfg.profile == profile
    # the yellow cells are the ones at 10/128
    assert all(abs(tf - 10 / 128) / (10 / 128) < 0.02 for tf in plan[plan.yellow].tuning_factor)


def test_paper_profile_is_the_whole_table_with_three_seeds():
    plan = experiments.get("yun2022_table1").plan("paper")
    table = paper.table("yun2022_table1")
    assert len(plan) == 3 * len(table)
    c = plan.cfg.iloc[0]
    assert (c.width, c.num_epochs, c.batch_size, c.momentum, c.ghost_batch, c.schedule) == (64, 300, 128, 0.9, 64, "step")
    assert c.scale_invariant and not c.synthetic and c.dataset == "cifar10"


def test_smoke_is_synthetic_and_cpu_is_real():
    exp = experiments.get("yun2022_table1")
    assert all(c.synthetic for c in exp.plan("smoke").cfg)
    assert not any(c.synthetic for c in exp.plan("cpu").cfg)


def test_bad_parameters_fail_before_training():
    exp = experiments.get("yun2022_table1")
    with pytest.raises(ValueError, match="^profile:"):
        exp.plan("laptop")
    with pytest.raises(ValueError, match="^learning_rate: unknown parameter"):
        exp.plan("smoke", learning_rate=0.1)
    with pytest.raises(ValueError, match="^dataset: unknown dataset"):
        exp.plan("smoke", dataset="mnist")
    with pytest.raises(ValueError, match="^experiment:"):
        experiments.get("table99")


def test_resolve_requires_all_profiles_with_the_same_keys():
    sizes = {p: {"steps": i} for i, p in enumerate(PROFILES)}
    assert resolve("cpu", sizes) == {"steps": 1}
    with pytest.raises(ValueError, match="^profile:"):
        resolve("cpu", {"cpu": {"steps": 1}})
    with pytest.raises(ValueError, match="^profile:"):
        resolve("cpu", {**sizes, "gpu": {"iters": 3}})
