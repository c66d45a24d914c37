"""``benchmarks/bench_paper_rate.py`` (the package's paths next to K plain PyTorch processes) at smoke size on the
CPU: the JSON it writes has one complete row per path and group size with positive rates, the plain rows come from K
processes, the paper rows from ``fit`` / ``fit_many`` with the ``paper`` profile's configs, the lockstep rows
(``onegraph``, ``streams``) from ``lockstep.fit_lockstep`` after a validation against ``fit`` that a CPU passes only
bit for bit, in fp32 and bf16; the profile table is written, the window's choice of path takes only complete and
validated rows, and a spent budget skips instead of measuring. The plain worker runs no package code per step."""
from __future__ import annotations

import ast
import json
import math
import sys
import time
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))
import bench_paper_rate as bpr  # noqa: E402
import plain_loop  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny tensors

# a budget far above what the smoke-size work takes, so that no measurement is cut or skipped on a slow or loaded
# machine (a spent budget has its own test, with "--budget-s 0" after these)
TINY = ["--device", "cpu", "--width", "4", "--n", "32", "--n-test", "64", "--batch-size", "16", "--epochs", "1",
        "--budget-s", "3600"]
MEMBERS = (1, 2)
REQUIRED = ("path", "precision", "members", "images_per_s", "tflops", "valid")
PATHS = ("paper", "onegraph", "streams", "plain")


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("paper_rate")
    data = bpr.main([*TINY, "--members", *map(str, MEMBERS), "--out", str(out)])
    return out, data


def test_json_header_and_file(bench):
    out, data = bench
    on_disk = json.loads((out / "results_paper_rate_cpu.json").read_text())
    assert on_disk["rows"] == json.loads(json.dumps(data["rows"]))
    assert data["device"] == "cpu" and data["torch"] == torch.__version__ and data["cpus"] >= 1
    assert data["errors"] == [] and data["skipped"] == []
    # n_test / N = 2: the cadence is every 2nd epoch, and --epochs 1 is rounded up to one cadence
    assert data["protocol"]["eval_interval"] == 2 and data["protocol"]["measured_epochs"] == 2
    assert data["gflop_per_image"] > 0


def test_one_complete_row_per_path_and_group_size(bench):
    _, data = bench
    rows = data["rows"]
    assert [(r["path"], r["members"]) for r in rows] == [(p, m) for p in PATHS for m in MEMBERS]
    for r in rows:
        assert all(k in r for k in REQUIRED), r
        assert r["precision"] == "fp32"
        assert r["images_per_s"] > 0 and r["tflops"] > 0 and math.isfinite(r["images_per_s"])
        assert r["complete"] and r["epochs_measured"] == 2
        # TFLOP/s is the training FLOPs per image times the rate
        assert r["tflops"] == pytest.approx(data["gflop_per_image"] * 1e9 * r["images_per_s"] / 1e12)


def test_plain_rows_are_k_processes(bench):
    _, data = bench
    for r in (r for r in data["rows"] if r["path"] == "plain"):
        assert len(r["per_process_images_per_s"]) == r["members"] and r["runner"] == f"plain_loop.py x {r['members']}"
        assert r["images_per_s"] == pytest.approx(sum(r["per_process_images_per_s"]))
        assert r["images_per_s_span"] > 0 and all(r["finite"])
        assert r["seeds"] == list(range(r["members"]))  # member i is the plan's run i


def test_paper_rows_come_from_fit_and_fit_many(bench):
    _, data = bench
    for r in (r for r in data["rows"] if r["path"] == "paper"):
        assert r["runner"] == ("fit" if r["members"] == 1 else "fit_many")
        assert r["statuses"] == ["finished"] * r["members"]
        # one stacked epoch of all members: M x N images per s_per_epoch
        assert r["images_per_s"] * r["s_per_epoch"] == pytest.approx(r["members"] * 32)
        assert 0 < r["train_s_per_epoch"] <= r["s_per_epoch"] * 1.5


def test_lockstep_rows_come_from_fit_lockstep_after_an_exact_validation(bench):
    _, data = bench
    for path in ("onegraph", "streams"):
        v = data["validation"][f"{path}/fp32"]
        assert v["passed"] is True and v["tol"] == 0.0 and v["runs"] == 3 and v["steps"] == 3
        assert v["max_rel_update"] == v["max_rel_running_stats"] == v["max_rel_loss"] == 0.0  # bit-identical
        for r in (r for r in data["rows"] if r["path"] == path):
            assert r["runner"] == f"fit_lockstep({path})" and r["valid"] is True
            assert r["statuses"] == ["finished"] * r["members"]
            assert r["images_per_s"] * r["s_per_epoch"] == pytest.approx(r["members"] * 32)
            assert r["train_images_per_s"] >= r["images_per_s"]  # training alone, without the evaluation
    assert all(r["valid"] is True for r in data["rows"] if r["path"] == "paper")
    assert all(r["valid"] is None for r in data["rows"] if r["path"] == "plain")


def test_lockstep_paths_in_bf16(tmp_path):
    data = bpr.main([*TINY, "--members", "2", "--paths", "onegraph", "streams", "--precisions", "bf16",
                     "--no-profile", "--out", str(tmp_path)])
    assert data["errors"] == [] and [(r["path"], r["precision"]) for r in data["rows"]] == [
        ("onegraph", "bf16"), ("streams", "bf16")]
    assert all(r["complete"] and r["valid"] is True for r in data["rows"])
    assert all(v["passed"] and v["max_rel_update"] == 0.0 for v in data["validation"].values())


def test_fastest_takes_complete_validated_rows_of_the_largest_group():
    row = dict(precision="fp32", complete=True, valid=True, statuses=["finished"])
    rows = [dict(row, path="paper", members=8, images_per_s=15e3),
            dict(row, path="onegraph", members=8, images_per_s=40e3, valid=None),  # not validated
            dict(row, path="streams", members=8, images_per_s=30e3, complete=False),  # cut
            dict(row, path="streams", members=1, images_per_s=90e3),  # a smaller group
            dict(row, path="onegraph", members=8, images_per_s=35e3, precision="bf16"),
            dict(row, path="plain", members=8, images_per_s=99e3, valid=None)]
    assert bpr.fastest(rows)["path"] == "paper"
    rows.append(dict(row, path="streams", members=8, images_per_s=20e3))
    assert bpr.fastest(rows)["path"] == "streams"
    rows.append(dict(row, path="onegraph", members=8, images_per_s=25e3, statuses=["finished", "diverged"]))
    assert bpr.fastest(rows)["path"] == "streams"
    assert bpr.fastest([]) is None


def test_profile_of_the_fastest_group(bench):
    out, data = bench
    prof = data["profile"]
    assert prof["members"] == max(MEMBERS) and prof["precision"] == "fp32" and prof["epoch"] == 3
    assert prof["path"] == bpr.fastest(data["rows"])["path"]
    text = (out / prof["file"]).read_text()
    assert "top 25 ops by self_cpu_time_total" in text and "aten::convolution" in text


def test_spent_budget_skips_every_measurement(tmp_path):
    data = bpr.main([*TINY, "--members", "1", "--budget-s", "0", "--out", str(tmp_path)])
    assert data["rows"] == [] and data["errors"] == []
    assert sorted(s["path"] for s in data["skipped"]) == ["onegraph", "paper", "paper", "plain", "streams"]  # 4 rows
    # and the profile
    assert all(s["reason"].startswith("budget") for s in data["skipped"])


def test_paper_configs_are_the_paper_profile():
    cfgs = bpr.paper_configs(bpr.parse_args([]))
    assert len(cfgs) == 21 and [c.lr for c in cfgs[:3]] == [6.4] * 3 and [c.seed for c in cfgs[:3]] == [0, 1, 2]
    c = cfgs[0]
    assert (c.model, c.scale_invariant, c.width, c.ghost_batch, c.n, c.batch_size) == ("resnet18", True, 64, 64,
                                                                                        3125, 128)
    assert (c.momentum, c.weight_decay, c.weight_decay_mode, c.optimizer) == (0.9, 1e-4, "coupled", "sgd")
    assert c.cuda_graphs and c.profile == "paper" and c.precision == "fp32" and c.synthetic
    assert c.n_test == 10000 and c.eval_interval(c.n, c.n_test) == 4


def test_epoch_clock_measures_after_warmup_and_stops_at_the_deadline():
    clock = bpr.EpochClock(deadline=time.monotonic() + 60, cuda=False)
    for _ in range(5):
        assert clock.due() is False
    clock.times = [1.0, 2.0, 4.0, 7.0, 11.0]
    assert clock.span(warmup=2, epochs=2) == (2, 5.0)  # epochs 3 and 4: from the end of epoch 2 to that of 4
    assert clock.span(warmup=2, epochs=10) == (3, 9.0)  # cut: what was stamped
    with pytest.raises(bpr.OutOfTime):
        clock.span(warmup=5, epochs=2)
    late = bpr.EpochClock(deadline=time.monotonic() - 1, cuda=False)
    with pytest.raises(bpr.OutOfTime):
        late.due()


def test_device_slug():
    assert bpr.device_slug("NVIDIA H100 80GB HBM3") == "h100"
    assert bpr.device_slug("NVIDIA H200") == "h200"
    assert bpr.device_slug("NVIDIA A100-SXM4-80GB") == "a100"
    assert bpr.device_slug("cpu") == "cpu"


def test_plain_worker_imports_only_the_model_constructor():
    tree = ast.parse((BENCH / "plain_loop.py").read_text())
    mods = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    mods |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert {m for m in mods if m.startswith("repro_lib")} == {"repro_lib.models"}


def test_plain_crop_flip_is_a_window_of_the_padded_image():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (6, 3, 8, 8), dtype=torch.uint8, generator=g)
    xp = torch.nn.functional.pad(x, (4,) * 4)
    out = plain_loop.crop_flip(xp, torch.arange(6), g)
    assert out.shape == x.shape
    for i in range(6):
        windows = [w for dy in range(9) for dx in range(9) for w in (xp[i, :, dy:dy + 8, dx:dx + 8],)]
        assert any(torch.equal(out[i], w) or torch.equal(out[i], w.flip(-1)) for w in windows)
