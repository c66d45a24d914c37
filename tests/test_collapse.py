"""Collapsed runs: a run that ends at chance level, or whose weights stopped turning, counts as diverged (Yun et al.
Sec. 5.1 leave diverged runs out of a cell's mean), both when it is recorded and when an older record is read."""
import math
from pathlib import Path

import pandas as pd

from repro_lib.results import tables
from repro_lib.runs import sweep
from repro_lib.store import Store
from repro_lib.train import collapse_reason, judge_collapse

LN10 = math.log(10)
FIXTURES = Path(__file__).resolve().parent / "data" / "collapsed_runs"


def _hist(loss, acc, angle, epochs=20):
    return [{"epoch": e + 1, "train_loss": loss, "test_acc": acc, "angular_update": angle} for e in range(epochs)]


def test_chance_level_or_frozen_weights_collapse_and_a_learning_run_does_not():
    assert collapse_reason(_hist(LN10 + 0.002, 10.0, 0.05), 10).startswith("collapsed to chance")
    assert collapse_reason(_hist(1.2, 55.0, 3e-6), 10).startswith("weights stopped turning")
    assert collapse_reason(_hist(1.2, 55.0, 0.05), 10) == ""
    assert collapse_reason(_hist(LN10 + 0.05, 10.0, 0.05), 10) == ""  # loss not at ln C: still learning
    assert collapse_reason(_hist(LN10, 13.0, 0.05), 10) == ""  # accuracy 3 points above chance
    assert collapse_reason(_hist(math.log(100), 1.0, 0.05), 100).startswith("collapsed to chance")
    assert collapse_reason([], 10) == ""
    frozen_late = _hist(1.2, 55.0, 0.05, epochs=18) + _hist(1.2, 55.0, 1e-7, epochs=2)
    assert collapse_reason(frozen_late, 10).startswith("weights stopped turning")  # the last 10 % of 20 epochs


def test_judge_collapse_turns_a_finished_record_into_a_diverged_one():
    hist = _hist(LN10, 10.0, 1e-7)
    res = judge_collapse({"status": "finished", "diverged_epoch": None, "test_acc": 10.0}, hist, 10)
    assert res["status"] == "diverged" and math.isnan(res["test_acc"]) and res["diverged_epoch"] == 20
    assert "chance" in res["diverged_reason"]
    kept = {"status": "finished", "diverged_epoch": None, "test_acc": 60.0}
    assert judge_collapse(kept, _hist(1.0, 60.0, 0.1), 10) is kept
    nan_run = {"status": "diverged", "diverged_epoch": 3, "test_acc": math.nan}
    assert judge_collapse(nan_run, hist, 10) is nan_run


def test_published_collapsed_runs_are_read_as_diverged_without_retraining():
    """Three runs of an earlier cpu shrink of Table 7 (η = 1.6 at B = 32, 4x the paper's η/B; the records kept in
    ``tests/data/collapsed_runs``) ended at 10.00 % with the training loss at ln 10: recorded as finished before the
    rule, they are read back as diverged, and the table cell says so instead of averaging."""
    import dataclasses

    from repro_lib.papers.yun2022 import grids

    e = grids.get("yun2022_table7")
    earlier = dataclasses.replace(e.profiles["cpu"], b_scale=1 / 4, rescale="weight_decay")
    plan = dataclasses.replace(e, profiles={**e.profiles, "cpu": earlier}).plan("cpu", dataset="cifar10-jpeg")
    res = sweep.run_sweep(plan, Store(FIXTURES), collect=True, progress=False)
    assert set(res[res.lr != 1.6].status) == {"missing"}
    col = res[res.lr == 1.6]
    assert len(col) == 3 and (col.status == "diverged").all(), col[["status", "test_acc"]]
    assert col.diverged_reason.str.startswith("collapsed to chance").all()
    html, _ = tables.table_report(res, col="n")
    assert "diverged" in html


def test_a_cell_with_some_diverged_seeds_says_how_many_were_left_out():
    cells = pd.DataFrame({"lr": [0.1, 0.2], "weight_decay": [1e-4, 1e-4], "n": [1000, 1000], "yellow": [True, False],
                          "test_acc": [50.0, math.nan], "diverged": [1, 3], "missing": [0, 0]})
    grid, yellow = tables.pivot_cells(cells, "test_acc")
    html = tables.style_grid(grid, yellow).to_html()
    assert "50.00 (1 diverged)" in html and ">diverged<" in html
