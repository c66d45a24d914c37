"""The GPU cost (``repro_lib.profiles``): estimated from throughput benchmarks until ``benchmarks/bench_paper_rate.py``
has measured the paper protocol, then measured -- the rates of the path the GPU window trains with (the fastest
complete, validated fp32 row of the largest group), only rows of the package's own paths, never a CPU's."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from repro_lib import profiles
from repro_lib.config import RunConfig


def _row(path, members, images_per_s, train_images_per_s, **kw):
    return {**dict(path=path, precision="fp32", members=members, images_per_s=images_per_s,
                   train_images_per_s=train_images_per_s, complete=True, valid=True,
                   statuses=["finished"] * members), **kw}


ROWS = [_row("paper", 1, 14e3, 18e3), _row("paper", 8, 15e3, 19e3),
        _row("onegraph", 1, 16e3, 20e3), _row("onegraph", 8, 48e3, 60e3),
        _row("streams", 8, 60e3, 70e3, valid=None),  # not validated: never taken
        _row("streams", 4, 90e3, 95e3),  # a smaller group
        dict(_row("onegraph", 8, 99e3, 99e3), complete=False),  # cut
        dict(_row("onegraph", 8, 99e3, 99e3), precision="bf16"),
        dict(path="plain", precision="fp32", members=8, images_per_s=15e3, complete=True, valid=None)]


def _write(folder, gpu="h100", rows=ROWS, device="NVIDIA H100 80GB HBM3"):
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / f"results_paper_rate_{gpu}.json"
    f.write_text(json.dumps({"device": device, "protocol": {"batch_size": 128, "width": 64}, "rows": rows}))
    return f


def test_without_results_the_cost_is_estimated(tmp_path):
    assert profiles.measured_rate(tmp_path) is None and profiles.gpu_rate_basis(tmp_path) == "estimated"
    assert profiles.gpu_hours_label(tmp_path) == "one H200, estimated"
    assert profiles.seconds_per_image(128, source=tmp_path) == profiles.SECONDS_PER_IMAGE_FIT[128]
    assert profiles.seconds_per_image(128, stacked=True, source=tmp_path) == profiles.SECONDS_PER_IMAGE_STACKED
    _write(tmp_path, gpu="cpu", device="cpu")  # a CPU's smoke-size results are not a GPU rate
    assert profiles.gpu_rate_basis(tmp_path) == "estimated"


def test_measured_rate_is_the_windows_path(tmp_path):
    f = _write(tmp_path)
    rate = profiles.measured_rate(tmp_path)
    assert rate.path == "onegraph" and rate.file == str(f) and rate.device == "NVIDIA H100 80GB HBM3"
    assert rate.seconds == {1: 1 / 20e3, 8: 1 / 60e3}  # training rates (evaluation excluded), the usable rows only
    assert profiles.measured_rate(f) == rate  # a file or its folder
    assert profiles.measured_rate(tmp_path, path="paper").seconds == {1: 1 / 18e3, 8: 1 / 19e3}
    assert profiles.measured_rate(tmp_path, path="streams").seconds == {4: 1 / 95e3}
    assert profiles.measured_rate(tmp_path, precision="bf16").seconds == {8: 1 / 99e3}  # its own rows
    assert profiles.gpu_rate_basis(tmp_path) == "measured"
    assert profiles.gpu_hours_label(tmp_path) == "one NVIDIA H100 80GB HBM3, measured, onegraph path"
    _write(tmp_path, gpu="h200", rows=[_row("paper", 8, 20e3, 25e3)], device="NVIDIA H200")
    assert profiles.measured_rate(tmp_path).device == "NVIDIA H200"  # the H200's results first


def test_group_sizes_between_and_beyond_the_measured_ones(tmp_path):
    rate = profiles.measured_rate(_write(tmp_path))
    assert rate.per_image(1) == 1 / 20e3 and rate.per_image(8) == rate.per_image(16) == 1 / 60e3
    s4 = rate.per_image(4)  # geometric in K: 2/3 of the way from 1 to 8 in log K
    assert s4 == pytest.approx((1 / 20e3) * (20e3 / 60e3) ** (2 / 3))
    assert rate.per_image(8) < s4 < rate.per_image(1)


def test_seconds_per_image_and_gpu_hours_take_the_measured_rate(tmp_path):
    _write(tmp_path)
    est = profiles.estimated_seconds_per_image
    assert profiles.seconds_per_image(128, source=tmp_path) == 1 / 20e3
    assert profiles.seconds_per_image(128, stacked=True, source=tmp_path) == 1 / 60e3
    assert profiles.seconds_per_image(128, members=4, source=tmp_path) == pytest.approx(
        profiles.measured_rate(tmp_path).per_image(4))
    # other batch sizes: scaled from the measured B as the estimate scales
    assert profiles.seconds_per_image(1024, source=tmp_path) == pytest.approx(1 / 20e3 * est(1024) / est(128))
    cfg = RunConfig(model="resnet18", scale_invariant=True, width=64, dataset="cifar10", n=3125, batch_size=128,
                    num_epochs=300)
    plan = pd.DataFrame({"cfg": [cfg] * 21})
    plan.attrs["max_members"] = 8
    assert profiles.estimate_gpu_hours(plan, source=tmp_path) == pytest.approx(21 * 3125 * 300 / 60e3 / 3600)
    assert profiles.estimate_gpu_hours(plan, max_members=1, source=tmp_path) == pytest.approx(
        21 * 3125 * 300 / 20e3 / 3600)
    assert math.isclose(profiles.estimate_gpu_hours(plan, source=tmp_path / "none"),
                        21 * 3125 * 300 * profiles.SECONDS_PER_IMAGE_STACKED / 3600)
