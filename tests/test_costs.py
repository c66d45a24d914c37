"""The README's cost table (``repro_lib.runs.costs``): runs, image-epochs and estimated minutes from the plans
the published notebook asks for, trained minutes from exactly those runs' published records."""
import json

import pytest

from repro_lib import profiles
from repro_lib.papers import registry
from repro_lib.results import publish
from repro_lib.runs import costs, published

NAME = "yun2022_section3"
PARAMS = {"dataset": "cifar10-jpeg"}


@pytest.fixture(scope="module")
def fake_reports(tmp_path_factory):
    """A store with the Sec. 3 notebook published on the stand-in and two of its runs' records (60 s and 120 s on 2
    threads), plus a record of a run no plan asks for (it must not count)."""
    root = tmp_path_factory.mktemp("costs") / "reports"
    (root / "cpu").mkdir(parents=True)
    (root / "runs").mkdir()
    meta = {"papermill": {"parameters": {"profile": "cpu", "results_dir": "reports", **PARAMS}}}
    (root / "cpu" / f"{NAME}.ipynb").write_text(json.dumps({"cells": [], "metadata": meta}))
    cfgs = list({c.hash: c for p in registry.plans(NAME, "cpu", PARAMS) for c in p["cfg"]}.values())
    for cfg, seconds in zip(cfgs, (60.0, 120.0)):
        (root / "runs" / f"{cfg.hash}.json").write_text(json.dumps(
            {"hash": cfg.hash, "env": {"num_threads": 2}, "result": {"train_seconds": seconds}}))
    (root / "runs" / "0000000000000000.json").write_text(json.dumps(
        {"env": {"num_threads": 4}, "result": {"train_seconds": 999.0}}))
    return root, cfgs


@pytest.fixture(scope="module")
def rows(fake_reports):
    return {r["notebook"]: r for r in costs.cost_rows(fake_reports[0])}


def test_one_row_per_registered_notebook(rows):
    assert sorted(rows) == registry.with_plans()
    assert all(r["trained_min"] is None for n, r in rows.items() if n != NAME)  # not published in this store


def test_sizes_and_estimate_come_from_the_published_parameters(fake_reports, rows):
    _, cfgs = fake_reports
    r = rows[NAME]
    assert r["runs"] == len(cfgs)
    assert r["image_epochs"] == sum(c.n * c.num_epochs for c in cfgs)
    assert r["estimated_min"] == pytest.approx(profiles.estimate_cpu_minutes(registry.plans(NAME, "cpu", PARAMS)))
    assert all(c.dataset == "cifar10-jpeg" for c in cfgs)


def test_trained_minutes_are_the_plan_runs_records_only(rows):
    r = rows[NAME]
    assert r["trained_min"] == pytest.approx(3.0) and r["recorded"] == 2 and r["threads"] == [2]


def test_gpu_hours_only_where_the_cost_model_has_a_rate(rows):
    assert rows[NAME]["gpu_hours"] > 0 and rows[NAME]["paper_hours"] > rows[NAME]["gpu_hours"]
    assert rows["backmatching_vgg"]["gpu_hours"] is None and rows["li_arora_preresnet32"]["paper_hours"] is None


def test_table_row_says_what_is_missing(fake_reports, rows):
    table = costs.cost_table(fake_reports[0]).splitlines()
    (line,) = [x for x in table if x.startswith(f"| `{NAME}`")]
    assert f"| 3 (2 threads, 2 of {rows[NAME]['runs']} runs) |" in line
    assert "| not published |" in next(x for x in table if x.startswith("| `yun2022_table1`"))


def test_readme_cost_block_round_trip(fake_reports, tmp_path):
    root, _ = fake_reports
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{publish.BEGIN}\n{publish.END}\n\n{costs.BEGIN}\nold\n{costs.END}\ntail\n")
    assert published.main([str(root), "--readme", str(readme), "--check"]) == 1
    assert published.main([str(root), "--readme", str(readme)]) == 0
    assert published.main([str(root), "--readme", str(readme), "--check"]) == 0
    text = readme.read_text()
    assert f"| `{NAME}` |" in text and text.endswith(f"{costs.END}\ntail\n") and "old" not in text
