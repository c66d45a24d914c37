"""The four profiles as data: how each one shrinks an experiment.

* ``smoke``: synthetic data, tiny widths, seconds; what the tests and CI execute.
* ``cpu``: real images, reduced models and grids, minutes on a 2-core laptop; the tutorial.
* ``gpu``: paper models, shortened schedules, 1 seed; hours on one GPU.
* ``paper``: exactly the paper's protocol.

A profile never changes the code path, only sizes. ``resolve(profile, sizes)`` picks one profile's sizes from a
dict declared by a notebook; a paper's grid declares its own (``repro_lib.papers.yun2022.grids.Experiment``).

What a plan costs on a GPU before it is run: ``estimate_gpu_hours(plan)`` from the measured rates below
(``seconds_per_image``).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd

from .config import PROFILES

# Measured training cost (benchmarks/bench_gpu.py --only graphs on one NVIDIA H200, torch 2.11, fp32 with
# cuda_graphs, channels_last and cudnn.benchmark -- the gpu/paper defaults; benchmarks/results_h200_graphs.json),
# seconds per training image of the scale-invariant ResNet-18 (width 64, 32x32), evaluation excluded:
#   fit, B = 128: 2.23 s per 50k-image epoch; fit, B = 1024: 1.75 s; fit_many with 16 members, B = 128: 27.0k img/s.
# The estimate interpolates geometrically in B between 128 and 1024 (B < 128 scales as sqrt(128/B), unmeasured);
# other widths scale with width^2, 64x64 images x4; DenseNet-100 (not stackable) is costed as ResNet-18 x 2
# (unmeasured on GPU; ~6x on CPU at width 8 where its narrow layers dominate less).
SECONDS_PER_IMAGE_FIT = {128: 2.234 / 50000, 1024: 1.749 / 50000}
SECONDS_PER_IMAGE_STACKED = 1 / 26955  # B = 128, 16 members


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise ValueError(f"profile: must be one of {PROFILES}, got {profile!r}")
    return profile


def resolve(profile: str, sizes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Return ``sizes[profile]`` after checking that the profile is known and that every profile declares
    the same keys (a profile only changes sizes, never which quantities exist)."""
    check_profile(profile)
    missing = [p for p in PROFILES if p not in sizes]
    if missing:
        raise ValueError(f"profile: sizes for {missing} are not declared")
    keys = set(sizes["paper"])
    for p in PROFILES:
        if set(sizes[p]) != keys:
            raise ValueError(f"profile: {p!r} declares keys {sorted(sizes[p])}, paper declares {sorted(keys)}")
    return dict(sizes[profile])


# ------------------------------------------------------------------------------------------- cost
def seconds_per_image(batch_size: int, stacked: bool = False) -> float:
    """Measured H200 training seconds per image of the width-64 ResNet-18 at ``batch_size`` (see the constants)."""
    if stacked:
        return SECONDS_PER_IMAGE_STACKED * seconds_per_image(batch_size) / SECONDS_PER_IMAGE_FIT[128]
    lo, hi = SECONDS_PER_IMAGE_FIT[128], SECONDS_PER_IMAGE_FIT[1024]
    if batch_size <= 128:
        return lo * math.sqrt(128 / batch_size)
    if batch_size >= 1024:
        return hi
    return lo * (hi / lo) ** (math.log(batch_size / 128) / math.log(8))


def estimate_gpu_hours(plan: pd.DataFrame, max_members: int | None = None) -> float:
    """GPU-hours of a plan on one H200-class GPU from the measured rates above: Σ n · epochs · s/image(B) ·
    (width/64)² · (image area / 32²), with the stacked (``fit_many``) rate when the plan's profile groups runs
    (``max_members`` > 1; default: ``plan.attrs["max_members"]`` set by ``Experiment.plan``). An estimate from
    throughput benchmarks, not a timed run; evaluation adds ~10 % (auto interval)."""
    from .data import DATASETS

    members = plan.attrs.get("max_members", 1) if max_members is None else max_members
    total = 0.0
    for cfg in plan["cfg"]:
        area = (DATASETS[cfg.dataset].image_size / 32) ** 2
        model = 2.0 if cfg.model.startswith("densenet") else 1.0
        stacked = members > 1 and not cfg.model.startswith("densenet")
        total += (cfg.n * cfg.num_epochs * seconds_per_image(cfg.batch_size, stacked) * (cfg.width / 64) ** 2
                  * area * model)
    return total / 3600
