"""Experiments: a paper table's grid of runs, and how each profile shrinks it (data, not branches).

A grid experiment takes its cells from the paper's own table (``repro_lib.paper.table(name)``: one row per cell
with lr, weight_decay, n, batch_size, momentum, model, dataset, schedule, epochs), so "reproduce Table k" means
"train every cell of Table k". A profile (:class:`Shrink`) then changes only sizes:

* ``keep``: which cells run (e.g. sub-table (a) only, two of the N columns, three LR rows);
* ``n_scale`` / ``b_scale``: N and B are multiplied by these; the LR is multiplied by ``b_scale / n_scale`` so that
  the **tuning factor N·η·λ/(B(1−μ)) of every cell is the paper's** (Eq. 27) and the yellow cells stay yellow;
* ``overrides``: RunConfig fields (dataset, synthetic data, width, epochs — the step schedule's milestones are
  fractions, so fewer epochs compress it proportionally —, test subset, evaluation interval);
* ``seeds``.

``Experiment.plan(profile, **params)`` returns a DataFrame, one row per (cell, seed), with the paper's coordinates
(``paper_n``, ``paper_lr``, …), the run's values and a ``cfg`` column; bad parameters raise ``ValueError`` naming
them before anything is trained.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping

import pandas as pd

from .config import PROFILES, RunConfig
from .profiles import check_profile

# Reference cost used for the GPU-hour estimate printed before a gpu/paper sweep: seconds per training image of
# ResNet-18 (width 64, CIFAR 32×32) in "a typical PyTorch CIFAR script on a modern GPU" (~15 s per 50k-image
# epoch, the figure quoted in the throughput issue). Other widths scale with width², 64×64 images ×4.
REFERENCE_SECONDS_PER_IMAGE = 15.0 / 50000


@dataclass(frozen=True)
class Shrink:
    """How one profile shrinks a grid experiment (see module docstring)."""

    overrides: Mapping[str, Any] = field(default_factory=dict)
    seeds: tuple = (0, 1, 2)
    keep: Mapping[str, tuple] = field(default_factory=dict)
    n_scale: float = 1.0
    b_scale: float = 1.0
    tuning_factor_band: tuple | None = None  # keep cells with tuning factor in [lo, hi] (after ``keep``)
    tuning_factors: tuple | None = None  # keep cells whose tuning factor is one of these (within 2 %)


@dataclass(frozen=True)
class Experiment:
    """A grid of ``fit`` runs (by default a paper table's cells), with its four profiles."""

    table: str  # name; the repro_lib.paper table whose cells are the grid unless ``cells_fn`` is given
    profiles: Mapping[str, Shrink]
    base: Mapping[str, Any] = field(default_factory=dict)  # RunConfig fields common to every cell
    cells_fn: Callable[[], pd.DataFrame] | None = None  # a grid the paper describes in words, not as a table

    def __post_init__(self):
        missing = [p for p in PROFILES if p not in self.profiles]
        if missing:
            raise ValueError(f"profiles: {self.table} does not declare {missing}")

    def cells(self) -> pd.DataFrame:
        if self.cells_fn is not None:
            return self.cells_fn()
        from . import paper

        return paper.table(self.table)

    def plan(self, profile: str, seeds: tuple | list | None = None, **params) -> pd.DataFrame:
        """One row per (cell, seed) for ``profile``. ``params``: RunConfig fields overriding the profile's
        (e.g. ``num_epochs``, ``width``, ``dataset``, ``device``); an unknown name is a ``ValueError``."""
        check_profile(profile)
        shrink = self.profiles[profile]
        known = {f.name for f in fields(RunConfig)}
        for k in params:
            if k not in known:
                raise ValueError(f"{k}: unknown parameter (RunConfig fields: {sorted(known)})")
        cells = self.cells()
        for col, values in shrink.keep.items():
            if col not in cells.columns:
                raise ValueError(f"keep: {col!r} is not a column of {self.table}")
            cells = cells[cells[col].apply(lambda v: any(_same(v, w) for w in values))]
        tf = cells["n"] * cells["lr"] * cells["weight_decay"] / (cells["batch_size"] * (1 - cells["momentum"]))
        if shrink.tuning_factor_band is not None:
            lo, hi = shrink.tuning_factor_band
            cells = cells[(tf >= lo * (1 - 1e-3)) & (tf <= hi * (1 + 1e-3))]
        if shrink.tuning_factors is not None:
            cells = cells[tf.apply(lambda t: any(abs(t / w - 1) < 0.02 for w in shrink.tuning_factors))]
        if cells.empty:
            raise ValueError(f"keep: profile {profile!r} keeps no cell of {self.table}")
        lr_scale = shrink.b_scale / shrink.n_scale
        rows = []
        for _, c in cells.iterrows():
            n = int(round(c["n"] * shrink.n_scale))
            b = int(round(c["batch_size"] * shrink.b_scale))
            for seed in (seeds if seeds is not None else shrink.seeds):
                fields_ = dict(
                    model=c["model"], scale_invariant=bool(c["scale_invariant"]), dataset=c["dataset"],
                    n=n, batch_size=b, lr=float(c["lr"]) * lr_scale, weight_decay=float(c["weight_decay"]),
                    momentum=float(c["momentum"]), optimizer="sgd", schedule=c["schedule"],
                    num_epochs=int(c["num_epochs"]), seed=int(seed), profile=profile)
                fields_.update(self.base)
                fields_.update(shrink.overrides)
                fields_.update(params)
                rows.append({
                    **{k: c[k] for k in ("combination",) if k in c},
                    "subtable": c.get("subtable"), "row": c.get("row"), "col": c.get("col"),
                    "paper_n": int(c["n"]), "paper_batch_size": int(c["batch_size"]), "paper_lr": float(c["lr"]),
                    "paper_weight_decay": float(c["weight_decay"]), "paper_accuracy": c["accuracy"],
                    "yellow": bool(c["yellow"]) if "yellow" in c else False,
                    "n": n, "batch_size": b, "lr": fields_["lr"], "weight_decay": fields_["weight_decay"],
                    "seed": int(seed), "cfg": RunConfig(**fields_)})
        plan = pd.DataFrame(rows)
        plan["tuning_factor"] = [c.tuning_factor for c in plan["cfg"]]
        return plan


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-3)
    return a == b


def estimate_gpu_hours(plan: pd.DataFrame) -> float:
    """Rough GPU-hours of a plan from ``REFERENCE_SECONDS_PER_IMAGE`` (a typical-script figure, not a
    measurement of this package): Σ n · epochs · s/image · (width/64)² · (image area / 32²)."""
    from .data import DATASETS

    total = 0.0
    for cfg in plan["cfg"]:
        area = (DATASETS[cfg.dataset].image_size / 32) ** 2
        total += cfg.n * cfg.num_epochs * REFERENCE_SECONDS_PER_IMAGE * (cfg.width / 64) ** 2 * area
    return total / 3600


# ------------------------------------------------------------------------------------------- experiments
_SMOKE = dict(synthetic=True, width=4, num_epochs=3, n_test=200, device="cpu")

EXPERIMENTS: dict[str, Experiment] = {}


def _register(e: Experiment) -> Experiment:
    EXPERIMENTS[e.table] = e
    return e


# Yun et al. 2022, Table 1 (+ Fig. 3): scale-invariant ResNet-18, CIFAR-10, SGDM μ = 0.9, B = 128, N grid.
# cpu: the paper's two largest N columns divided by 50 (500 and 1000 images), LR ×50 so every cell keeps the
# paper's tuning factor; sub-table (a), three LR rows around the yellow diagonal; width 8; 100 epochs (the
# cpu-scale probe: 20 epochs never reach the equilibrium angular update, 100 epochs at N = 1000 do).
_register(Experiment(
    table="yun2022_table1",
    profiles={
        "smoke": Shrink(overrides=_SMOKE, seeds=(0,), n_scale=1 / 100,
                        keep={"subtable": ("a",), "n": (25000, 50000), "row": (5, 6)}),
        "cpu": Shrink(overrides=dict(width=8, num_epochs=100, n_test=2000, eval_every=10, dataset="cifar10"),
                      seeds=(0,), n_scale=1 / 50, keep={"subtable": ("a",), "n": (25000, 50000),
                                                        "lr": (0.1, 0.2, 0.4)}),
        "gpu": Shrink(overrides=dict(num_epochs=100), seeds=(0,)),
        "paper": Shrink(),
    }))


def section3_cells() -> pd.DataFrame:
    """The six (N, B, η, λ) combinations of Yun et al. 2022 Sec. 3.2 and their searches, as grid cells.

    1. (50000, 256, η, 1e-4)   2. (50000, 256, 0.1, λ)   3. (50000, 1024, η, λ)
    4. (25000, 128, η, 1e-4)   5. (12500, 128, 0.1, λ)   6. (6250, 128, η, λ)
    η ∈ {0.1, 0.2, …, 3.2}; λ ∈ {1e-4, …, 3.2e-3}; (η, λ) from (0.1, 1e-4) to (0.8, 8e-4) by factors of √2.
    SGDM μ = 0.9, 300 epochs, LR ÷10 at 150 and 225, scale-invariant ResNet-18, CIFAR-10.
    """
    lrs = [0.1 * 2 ** k for k in range(6)]
    wds = [1e-4 * 2 ** k for k in range(6)]
    both = [(0.1 * 2 ** (k / 2), 1e-4 * 2 ** (k / 2)) for k in range(7)]
    combos = [(1, 50000, 256, [(lr, 1e-4) for lr in lrs]), (2, 50000, 256, [(0.1, wd) for wd in wds]),
              (3, 50000, 1024, both), (4, 25000, 128, [(lr, 1e-4) for lr in lrs]),
              (5, 12500, 128, [(0.1, wd) for wd in wds]), (6, 6250, 128, both)]
    rows = []
    for k, n, b, search in combos:
        for r, (lr, wd) in enumerate(search):
            rows.append(dict(combination=k, subtable=str(k), row=r, col=0, model="resnet18", scale_invariant=True,
                             dataset="cifar10", schedule="step", num_epochs=300, momentum=0.9, n=n, batch_size=b,
                             lr=lr, weight_decay=wd, accuracy=float("nan")))
    cells = pd.DataFrame(rows)
    tf = cells.n * cells.lr * cells.weight_decay / (cells.batch_size * (1 - cells.momentum))
    cells["yellow"] = (tf / (10 / 128) - 1).abs() < 0.02
    return cells


# Yun et al. 2022, Sec. 3.2 (Figs 1-2). cpu: N /50, B /4 (LR ×12.5 keeps every tuning factor), two searched values
# per combination -- the one at the paper's tuning factor 10/128 and the one at a quarter of it --, width 8, 60 epochs.
_register(Experiment(
    table="yun2022_section3", cells_fn=section3_cells,
    profiles={
        "smoke": Shrink(overrides=_SMOKE, seeds=(0,), n_scale=1 / 100, b_scale=1 / 4,
                        tuning_factor_band=(10 / 128 / 2, 10 / 128)),
        "cpu": Shrink(overrides=dict(width=8, num_epochs=60, n_test=2000, eval_every=10, dataset="cifar10"),
                      seeds=(0,), n_scale=1 / 50, b_scale=1 / 4, tuning_factors=(10 / 128 / 4, 10 / 128)),
        "gpu": Shrink(overrides=dict(num_epochs=100), seeds=(0,)),
        "paper": Shrink(),
    }))


def get(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise ValueError(f"experiment: unknown experiment {name!r}; known: {sorted(EXPERIMENTS)}")
    return EXPERIMENTS[name]
