"""The four profiles as data: how each one shrinks an experiment.

* ``smoke``: synthetic data, tiny widths, seconds; what the tests and CI execute.
* ``cpu``: real images, reduced models and grids, minutes on a 2-core laptop; the tutorial.
* ``gpu``: paper models, shortened schedules, 1 seed; hours on one GPU.
* ``paper``: exactly the paper's protocol.

A profile never changes the code path, only sizes. ``resolve(profile, sizes)`` picks one profile's sizes from a
dict declared by a notebook or experiment; ``Experiment`` does the same for a grid of training runs.
"""
from __future__ import annotations

from typing import Any, Mapping

from .config import PROFILES


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
