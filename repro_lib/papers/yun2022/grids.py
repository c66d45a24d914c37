"""Experiments: a paper table's grid of runs, and how each profile shrinks it (data, not branches).

A grid experiment takes its cells from the paper's own table (``repro_lib.papers.transcribed.table(name)``: one row per cell
with lr, weight_decay, n, batch_size, momentum, model, dataset, schedule, epochs), so "reproduce Table k" means
"train every cell of Table k". A profile (:class:`Shrink`) then changes only sizes:

* ``keep``: which cells run (e.g. sub-table (a) only, two of the N columns, three LR rows);
* ``n_scale`` / ``b_scale``: N and B are multiplied by these; the LR is multiplied by ``b_scale / n_scale`` so that
  the **tuning factor N·η·λ/(B(1−μ)) of every cell is the paper's** (Eq. 27) and the yellow cells stay yellow
  (``rescale="weight_decay"``: the WD is multiplied instead, for nets with non-scale-invariant parameters);
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

from ...config import PROFILES, RunConfig
from ...profiles import check_profile
from .. import transcribed


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
    max_members: int = 1  # runs trained together as one stacked model by batched.fit_many (sweep.run_sweep)
    # which hyperparameter absorbs the factor b_scale / n_scale that keeps the tuning factor (Eq. 27): "lr"
    # (default: LR x b_scale / n_scale), "weight_decay" (WD x b_scale / n_scale) or "eta_over_b" (LR x b_scale, so
    # that eta / B is the paper's, and WD x 1 / n_scale: for nets with non-scale-invariant parameters -- BN affine,
    # trainable FC -- whose SGD noise scales with eta / B; the scale-invariant weights see the paper's tuning
    # factor in every mode)
    rescale: str = "lr"


@dataclass(frozen=True)
class Experiment:
    """A grid of ``fit`` runs (by default a paper table's cells), with its four profiles."""

    table: str  # name; the repro_lib.papers.transcribed table whose cells are the grid unless ``cells_fn`` is given
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
        return transcribed.table(self.table)

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
        scale = shrink.b_scale / shrink.n_scale
        scales = {"lr": (scale, 1.0), "weight_decay": (1.0, scale), "eta_over_b": (shrink.b_scale, 1 / shrink.n_scale)}
        if shrink.rescale not in scales:
            raise ValueError(f"rescale: must be one of {sorted(scales)}, got {shrink.rescale!r}")
        lr_scale, wd_scale = scales[shrink.rescale]
        rows = []
        for _, c in cells.iterrows():
            n = int(round(c["n"] * shrink.n_scale))
            b = int(round(c["batch_size"] * shrink.b_scale))
            for seed in (seeds if seeds is not None else shrink.seeds):
                fields_ = dict(
                    model=c["model"], scale_invariant=bool(c["scale_invariant"]), dataset=c["dataset"],
                    n=n, batch_size=b, lr=float(c["lr"]) * lr_scale, weight_decay=float(c["weight_decay"]) * wd_scale,
                    momentum=float(c["momentum"]), optimizer="sgd", schedule=c["schedule"],
                    num_epochs=int(c["num_epochs"]), seed=int(seed), profile=profile)
                fields_.update(self.base)
                fields_.update(shrink.overrides)
                fields_.update(params)
                if fields_.get("compile") and "cuda_graphs" not in params:
                    fields_["cuda_graphs"] = False  # an explicit compile=True takes the place of the profile's graphs
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
        plan.attrs["max_members"] = shrink.max_members
        return plan


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-3)
    return a == b


# ------------------------------------------------------------------------------------------- experiments
_SMOKE = dict(synthetic=True, width=4, num_epochs=3, n_test=200, device="cpu")

EXPERIMENTS: dict[str, Experiment] = {}

# gpu / paper (chosen by measurement on an H200, benchmarks/README.md): every full training batch replayed
# as one CUDA graph (cuda_graphs=True: the eager step's arithmetic, bit-identical with deterministic kernels; 2.0x
# faster for a single run at B = 128, 1.5x at B = 1024; on CPU the same static path without capture; not hashed);
# runs that differ only in LR, WD, momentum and seed train up to 16 at a time as one stacked model (fit_many: 2.7x
# the throughput of sequential eager runs at N = 3125, 1.25x that of sequential graphed runs); evaluation every
# ceil(n_test/N) epochs (eval_every=0) instead of every epoch, which at N = 3125 would cost more than the training;
# the resume checkpoint at most once a minute (writing ~90 MB per run per 0.4 s epoch would double a small-N run).
# fp32 stays the default (the papers' arithmetic): bf16 autocast (precision="bf16", -p precision bf16; new run
# hashes) gives a further 1.35x (single run, B = 128) to 1.6x (16-member stack) with graphs on.
_FAST = dict(eval_every=0, checkpoint_every_s=60.0, cuda_graphs=True)
_TF = 10 / 128


def _around(tf: float = _TF) -> tuple:
    """The yellow tuning factor and two factors of 2 either side (x1/4, x1/2, x1, x2, x4): a cpu grid column whose
    yellow cell is interior, so that "the yellow cell is best" can be told apart from "the largest LR won"."""
    return tuple(tf * 2.0 ** k for k in (-2, -1, 0, 1, 2))


# cpu profile of every Yun et al. grid (Tables 1-11): each kept column holds the five paper cells at tuning factors
# x1/4 ... x4 around the yellow one (the paper's own cells, each keeping its paper tuning factor), 3 seeds trained
# together as one stacked model (fit_many), and one evaluation, after the last epoch, on the full 10,000-image test
# set (the figures use the per-epoch angular update, not test curves; at N = 500 one evaluation of a 3-member stack
# costs about 15 training epochs, so evaluating every quarter of the training took about a third of a group's time;
# eval_every is not hashed). Width 8. A column is the paper column whose five cells all exist in the paper's table.
# compile=True (not hashed; the eager arithmetic to float tolerance, which 60-100 epochs of SGD amplify to about
# the seed spread) where a notebook trains one batch shape in several stacked groups: on 2 CPU threads a 3-member
# stack of the width-8 ResNet-18 trains 1.24x faster per epoch after a one-off compile of about a minute per batch
# shape (seconds once the inductor cache holds it; benchmarks/README.md, "torch.compile on CPU"). Off where a
# notebook trains too few epochs per batch shape to pay the compile back (Table 5; the earlier 12-run Sec. 3: 622 s
# eager vs 670 s compiled for the whole notebook) and for DenseNet-100 (Tables 8/10: unmeasured).
_CPU = dict(width=8, n_test=0, dataset="cifar10")
_CPU_SEEDS = (0, 1, 2)


def _cpu(epochs: int, *, max_members: int = 3, tf: float = _TF, compile: bool = True,
         tuning_factors: tuple | None = None, **kw) -> Shrink:
    """The cpu profile above: the five cells ``_around(tf)``, or the given ``tuning_factors``."""
    over = dict(_CPU, num_epochs=epochs, eval_every=epochs, compile=compile, **kw.pop("overrides", {}))
    return Shrink(overrides=over, seeds=_CPU_SEEDS, max_members=max_members,
                  tuning_factors=tuning_factors or _around(tf), **kw)


def _gpu(epochs: int = 100, max_members: int = 16) -> Shrink:
    return Shrink(overrides=dict(_FAST, num_epochs=epochs), seeds=(0,), max_members=max_members)


def _paper(max_members: int = 16) -> Shrink:
    return Shrink(overrides=_FAST, max_members=max_members)


def _register(e: Experiment) -> Experiment:
    EXPERIMENTS[e.table] = e
    return e


# Yun et al. 2022, Table 1 (+ Fig. 3): scale-invariant ResNet-18, CIFAR-10, SGDM μ = 0.9, B = 128, N grid.
# cpu: the paper's columns N = 12,500 and 25,000 divided by 25 (500 and 1000 images; the two largest columns whose
# yellow cell has two paper cells on either side), B /4 (32: 16 and 31 steps per epoch, the shrink rules' floor),
# LR x6.25 so every cell keeps the paper's tuning factor; sub-table (a), the five LR rows x1/4 ... x4 around the
# yellow cell; 3 seeds; width 8; 60 epochs (the first decay, at epoch 30, after one relaxation time 1/(2 TF) of the
# x1/4 cell and four of the yellow one).
_register(Experiment(
    table="yun2022_table1",
    profiles={
        "smoke": Shrink(overrides=_SMOKE, seeds=(0,), n_scale=1 / 100,
                        keep={"subtable": ("a",), "n": (25000, 50000), "row": (5, 6)}),
        "cpu": _cpu(60, n_scale=1 / 25, b_scale=1 / 4, keep={"subtable": ("a",), "n": (12500, 25000)}),
        "gpu": _gpu(100),
        "paper": _paper(),
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


# Yun et al. 2022, Sec. 3.2 (Figs 1-2). cpu: N /25, B /8 (LR x3.125 keeps every tuning factor; combination 3, the
# smallest count, takes 2000 / 128 = 16 steps per epoch, the shrink rules' floor), three searched values per
# combination -- the one at the paper's tuning factor 10/128, a quarter of it and four times it, so that "the best
# value has the tuning factor 10/128" is tested against a neighbour on either side --, width 8, 60 epochs (the first
# decay after 4.7 relaxation times 1/(2 TF) of the yellow value, 1.2 of the quarter one), 3 seeds stacked per value
# (fit_many), compiled (three batch shapes, each in 3-9 groups of 60 epochs: on 2 threads a 3-member stack's epoch
# took 1.5x less than eager at B = 16, 1.3x at B = 32 and 1.1x at B = 128, after a compile of about a minute per
# shape), one evaluation after the last epoch on the full test set. 54 runs of six sizes, ``registry.LONG_CAP``: from
# an empty store the notebook took 90 minutes on 2 threads, 79 of them training (benchmarks/README.md).
_register(Experiment(
    table="yun2022_section3", cells_fn=section3_cells,
    profiles={
        "smoke": Shrink(overrides=_SMOKE, seeds=(0,), n_scale=1 / 100, b_scale=1 / 4,
                        tuning_factor_band=(10 / 128 / 2, 10 / 128)),
        "cpu": _cpu(60, n_scale=1 / 25, b_scale=1 / 8, tuning_factors=(_TF / 4, _TF, _TF * 4)),
        "gpu": _gpu(100),
        "paper": _paper(),
    }))


# ---------------------------------------------------------------- Yun et al. 2022, Tables 2-11 (Sec. 5, App. B)
# Conventions shared by the declarations below (each notebook restates them):
# * paper: every cell of the paper's table x 3 seeds, the paper's protocol (300 epochs, LR /10 at 150 and 225 --
#   Tiny ImageNet 120 epochs, /10 at 60 and 90: the same fractions 0.5, 0.75 of the step schedule; Table 6 cosine);
# * gpu: every cell, 1 seed, a third of the epochs (the schedule compressed proportionally);
# * cpu: N (and B) divided, the LR (Tables 7/11: the WD) multiplied by b_scale/n_scale so that every kept cell keeps
#   the paper's tuning factor; one or two columns, each with the five cells x1/4 ... x4 around the yellow one
#   (``_cpu``); width 8; 3 seeds trained as one stacked model; the full test set. Costs are
#   quoted as image-epochs (ResNet-18 width 8: ~1.5 s per 1000 image-epochs on one core; DenseNet-100 width 8
#   measured ~6x that);
# * smoke: synthetic images, width 4, at most 4 tiny runs per notebook.


# Table 2: scale-invariant ResNet-18, CIFAR-10, plain SGD (mu = 0), B = 128, N grid; LR grid 1..64, base LR 1.
# cpu: one column -- N 25000 /25 (1000 images), B /2 (64: 16 steps per epoch, the shrink rules' floor; at B = 128
# the 8 steps per epoch were shorter than the time scale of plain SGD's equilibrium), LR x12.5, sub-table (a), rows
# LR 1 ... 16 (x1/4 ... x4 around the yellow LR 4), 3 seeds, 100 epochs: 15 x 1000 x 100 = 1.5M image-epochs.
_register(Experiment(
    table="yun2022_table2",
    profiles={
        "smoke": Shrink(overrides=_SMOKE, seeds=(0,), n_scale=1 / 100,
                        keep={"subtable": ("a",), "n": (25000, 50000), "row": (5, 6)}),
        "cpu": _cpu(100, n_scale=1 / 25, b_scale=1 / 2, keep={"subtable": ("a",), "n": (25000,)}),
        "gpu": _gpu(),
        "paper": _paper(),
    }))

# Tables 3 (SGDM) and 4 (SGD): N = 50k, B in {128 ... 2048}. cpu: two B columns 4x apart, so that the yellow cell
# is seen to move with B (its LR 4x) while its tuning factor stays put: N /50 = 1000, B /16 (paper B 256 -> 16 and
# 1,024 -> 64, the two columns 4x apart whose yellow cell has two paper cells on either side; 63 and 16 steps per
# epoch), LR x3.125; sub-table (a), the five cells x1/4 ... x4 around each yellow one; 3 seeds; 60 epochs:
# 30 x 1000 x 60 = 1.8M image-epochs per table.
for _name, _lrs in (("yun2022_table3", (0.4,)), ("yun2022_table4", (4,))):
    _register(Experiment(
        table=_name,
        profiles={
            "smoke": Shrink(overrides=_SMOKE, seeds=(0,), n_scale=1 / 100, b_scale=1 / 8,
                            keep={"subtable": ("a",), "batch_size": (256, 2048), "lr": _lrs}),
            "cpu": _cpu(60, n_scale=1 / 50, b_scale=1 / 16, keep={"subtable": ("a",), "batch_size": (256, 1024)}),
            "gpu": _gpu(),
            "paper": _paper(),
        }))

# Table 5: eta = 0.1, lambda = 0.0016 fixed, B in {32 ... 2048} x N in {3125 ... 50000}; yellow B = 0.02048 N.
# cpu: the paper's column N = 25,000 with N and B both /16 (N 1,562, B 8 ... 128), so every cell keeps the paper's
# own steps per epoch (196, 98, 49, 25 and 13: B varies 16x within the column, so the x1/4 cell's 13 steps bound
# B_min at N / 196) and, with eta and lambda unchanged, the paper's tuning factor (0.03 % lower: N = 1,562.5 is
# rounded to whole images); the column's five B cells x1/4 ... x4 in tuning factor around the yellow B = 32
# (paper B = 512); 3 seeds; 52 epochs (LR /10 at epoch 26: one relaxation time 1/(2 TF) of the x1/4 cell, four of
# the yellow one).
_register(Experiment(
    table="yun2022_table5",
    profiles={
        "smoke": Shrink(overrides=_SMOKE, seeds=(0,), n_scale=1 / 100, b_scale=1 / 8,
                        keep={"n": (25000, 50000), "batch_size": (512, 1024)}),
        "cpu": _cpu(52, n_scale=1 / 16, b_scale=1 / 16, keep={"n": (25000,)}, compile=False),  # 5 batch sizes
        "gpu": _gpu(),
        "paper": _paper(),
    }))

# Table 6: as Table 1 (B = 128, N grid) with the cosine LR schedule (the CSV's schedule column). cpu: one column,
# N 25000 /25 (1000 images), B /2 (64: 16 steps per epoch, the shrink rules' floor -- Table 2's shrink), LR x12.5,
# five LR rows around the yellow one, 3 seeds, 100 epochs.
_register(Experiment(
    table="yun2022_table6",
    profiles={
        "smoke": Shrink(overrides=_SMOKE, seeds=(0,), n_scale=1 / 100,
                        keep={"subtable": ("a",), "n": (25000, 50000), "row": (5, 6)}),
        "cpu": _cpu(100, n_scale=1 / 25, b_scale=1 / 2, keep={"subtable": ("a",), "n": (25000,)}),
        "gpu": _gpu(),
        "paper": _paper(),
    }))

# Tables 7 (B = 128, N grid) and 11 (N = 50k, B grid): the *unmodified* ResNet-18 (scale_invariant=False in the
# CSVs; its BN affine and FC are trained and are not scale-invariant). Shrunk profiles keep the paper's eta / B
# (rescale="eta_over_b": LR x b_scale, WD x 1/n_scale, the tuning factor unchanged): the scale-variant parameters'
# SGD noise scales with eta / B, and the paper's own stability limit moves with B (its Table 11 B = 128 column
# diverges at eta = 6.4 where its B = 1024 column trains); a shrink that kept eta while dividing B trained them at
# 4x / 8x the paper's eta / B and collapsed from the yellow LR on.
# cpu Table 7: N 25000 /25 (1000), B /2 (64, 16 steps per epoch), LR /2, WD x25, (a) rows paper LR 0.1 ... 1.6
# (x1/4 ... x4 around the yellow LR 0.4), 3 seeds, 60 epochs: 0.9M image-epochs.
# cpu Table 11: N /50 = 1000, B /16 (paper B 256 -> 16 and 1,024 -> 64: two columns 4x apart, 63 and 16 steps per
# epoch, as Tables 3-4), LR /16, WD x50, (a) the five cells around each yellow one (LR 0.4 and 1.6), 3 seeds, 60
# epochs (LR /10 at epoch 30: one relaxation time 1/(2 TF) of the smallest tuning factor): 1.8M image-epochs.
_register(Experiment(
    table="yun2022_table7",
    profiles={
        "smoke": Shrink(overrides=_SMOKE, seeds=(0,), n_scale=1 / 100, b_scale=1 / 4, rescale="eta_over_b",
                        keep={"subtable": ("a",), "n": (50000,), "row": (5, 6)}),
        "cpu": _cpu(60, n_scale=1 / 25, b_scale=1 / 2, rescale="eta_over_b",
                    keep={"subtable": ("a",), "n": (25000,)}),
        "gpu": _gpu(),
        "paper": _paper(),
    }))
_register(Experiment(
    table="yun2022_table11",
    profiles={
        "smoke": Shrink(overrides=_SMOKE, seeds=(0,), n_scale=1 / 100, b_scale=1 / 8, rescale="eta_over_b",
                        keep={"subtable": ("a",), "batch_size": (256, 2048), "lr": (0.4,)}),
        "cpu": _cpu(60, n_scale=1 / 50, b_scale=1 / 16, rescale="eta_over_b",
                    keep={"subtable": ("a",), "batch_size": (256, 1024)}),
        "gpu": _gpu(),
        "paper": _paper(),
    }))

# Tables 8 (B = 128, N grid) and 10 (N = 50k, B grid): scale-invariant DenseNet-BC-100 (k = 12) on CIFAR-100.
# Every profile trains on the paper's CIFAR-100 (250 images at cpu scale are 2-3 per class: a small-problem run,
# not a reproduction of the paper's accuracies). DenseNet-100 at width 8 (k = 2) costs ~6x ResNet-18 width 8 per
# image and does not stack (DenseNet concatenates channels), so cpu trains 250 images: 52 epochs (the first decay,
# at epoch 26, after one relaxation time 1/(2 TF) of the x1/4 cell and four of the yellow one) at B = 16 (16
# steps per epoch, the shrink rules' floor).
# cpu Table 8: N 25000 /100 (250), B /8 (16), LR x12.5, (a) rows LR 0.1 ... 1.6 around the yellow LR 0.4, 3 seeds.
# cpu Table 10: N /200 = 250, B /32 (paper 512 -> 16), LR x6.25, (a) the five cells around the yellow LR 0.8: the
# same runs as Table 8's (same N, B, LR and WD), published as one verdict.
_SMOKE_DN = dict(_SMOKE, n_test=100)
_CPU_DN = dict(dataset="cifar100")
_register(Experiment(
    table="yun2022_table8",
    profiles={
        "smoke": Shrink(overrides=_SMOKE_DN, seeds=(0,), n_scale=1 / 200, b_scale=1 / 4,
                        keep={"subtable": ("a",), "n": (50000,), "lr": (0.2,)}),
        "cpu": _cpu(52, max_members=1, n_scale=1 / 100, b_scale=1 / 8, overrides=_CPU_DN, compile=False,
                    keep={"subtable": ("a",), "n": (25000,)}),
        "gpu": _gpu(max_members=1),  # DenseNet concatenates channels: not stackable
        "paper": _paper(max_members=1),
    }))
_register(Experiment(
    table="yun2022_table10",
    profiles={
        "smoke": Shrink(overrides=_SMOKE_DN, seeds=(0,), n_scale=1 / 200, b_scale=1 / 16,
                        keep={"subtable": ("a",), "batch_size": (2048,), "lr": (3.2,)}),
        "cpu": _cpu(52, max_members=1, n_scale=1 / 200, b_scale=1 / 32, overrides=_CPU_DN, compile=False,
                    keep={"subtable": ("a",), "batch_size": (512,)}),
        "gpu": _gpu(max_members=1),  # DenseNet concatenates channels: not stackable
        "paper": _paper(max_members=1),
    }))

# Table 9: scale-invariant ResNet-18 on Tiny ImageNet (200 classes, 64x64), B = 256, N in {12500 ... 100000},
# 120 epochs, LR /10 at 60 and 90; yellow tuning factor 5/32. Every profile trains on Tiny ImageNet (a folder:
# see data.DATASETS). cpu: N 50000 /100 (500), B /8 (32: 16 steps per epoch, the shrink rules' floor), LR x12.5,
# (a) rows LR 0.2 ... 3.2 (x1/4 ... x4 around the yellow LR 0.8; ours 2.5 ... 40), 3 seeds, 60 epochs:
# 15 x 500 x 60 = 0.45M image-epochs (64x64 images cost 4x).
_register(Experiment(
    table="yun2022_table9",
    profiles={
        "smoke": Shrink(overrides=dict(_SMOKE, num_epochs=2), seeds=(0,), n_scale=1 / 400, b_scale=1 / 4,
                        keep={"subtable": ("a",), "n": (100000,), "lr": (0.4, 0.8)}),
        "cpu": _cpu(60, tf=5 / 32, n_scale=1 / 100, b_scale=1 / 8, overrides=dict(dataset="tiny_imagenet"),
                    keep={"subtable": ("a",), "n": (50000,)}),
        "gpu": _gpu(40),
        "paper": _paper(),
    }))


def get(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise ValueError(f"experiment: unknown experiment {name!r}; known: {sorted(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def plans(names, profile: str, seed: int = 0, device: str = "auto", dataset: str = "", num_epochs: int = 0,
          precision: str = "", cuda_graphs: bool = False) -> dict[str, pd.DataFrame]:
    """``{name: get(name).plan(...)}`` for the notebook's parameters: the profile's seeds each offset
    by ``seed``; ``dataset``, ``num_epochs``, ``precision``, ``cuda_graphs`` override the profile only when set
    (``""``, 0, False: the profile's), so at their defaults every config, and hence every store key, is the
    profile's own."""
    overrides = {k: v for k, v in dict(dataset=dataset, num_epochs=num_epochs, precision=precision,
                                       cuda_graphs=cuda_graphs).items() if v}
    out = {}
    for name in names:
        exp = get(name)
        out[name] = exp.plan(profile, seeds=[seed + s for s in exp.profiles[profile].seeds], device=device,
                             **overrides)
    return out


# ============================================================================================== the GPU window's queue
# What the budgeted GPU window (``repro_lib.runs.window``, ``python -m repro_lib window``) trains, in this order:
# Table 1 and Table 2 at the paper's own protocol (the ``paper`` profile: scale-invariant ResNet-18 width 64, ghost
# BN 64, B = 128, 300 epochs, LR /10 at 150 and 225, coupled L2 weight decay, fp32, CUDA graphs, the full test set),
# ``Experiment.plan("paper", seeds=..., dataset=...)`` filtered on ``subtable`` and ``paper_n``. The window reads
# it through ``repro_lib.papers.registry.window_queue`` (``repro_lib.runs`` imports nothing else of the papers).

#: (label, experiment, sub-tables, paper column N, paper LRs (empty: every row), precision (empty: the profile's,
#: fp32)), in training order: Table 1 (a) N = 3,125 (21 runs); the bf16 check of that column (6 runs, see
#: :data:`PRECISION_CHECK`); Table 1 (b) and (c) N = 3,125 (36 runs; their base row LR 0.1, WD 1e-4 is (a)'s, the
#: same content hash, trained once); Table 1 (a) N = 6,250 (21 runs); Table 2 (plain SGD) (a)-(c) N = 3,125 (57 runs)
PAPER_QUEUE = (
    ("table1 (a) N=3125", "yun2022_table1", ("a",), 3125, (), ""),
    ("table1 (a) bf16 check", "yun2022_table1", ("a",), 3125, (3.2, 0.8), "bf16"),
    ("table1 (b)+(c) N=3125", "yun2022_table1", ("b", "c"), 3125, (), ""),
    ("table1 (a) N=6250", "yun2022_table1", ("a",), 6250, (), ""),
    ("table2 (a)-(c) N=3125", "yun2022_table2", ("a", "b", "c"), 3125, (), ""),
)
#: The bf16 check: before the ``paper`` profile trains in bf16 (autocast, fp32 master weights; 1.35-1.6x faster on
#: an H200, benchmarks/README.md), two cells of Table 1 (a) at N = 3,125 -- η = 3.2 (yellow) and η = 0.8, the cells
#: an independent implementation also ran -- train in bf16 with the fp32 runs' seeds, and each cell's bf16 mean must
#: lie within the larger seed sd of the two precisions (``table_notebook.precision_check``). Its own run hashes.
PRECISION_CHECK = "table1 (a) bf16 check"
PAPER_QUEUE_SEEDS = (0, 1, 2)
PAPER_QUEUE_DATASET = "cifar10-jpeg"  # a stand-in, never CIFAR-10
PAPER_QUEUE_TINY_ROWS = (5, 6)  # the window's smoke size (``--tiny``) keeps the two smallest-LR rows of every sub-table


def queue_plan(label: str, profile: str = "paper", seeds=PAPER_QUEUE_SEEDS, tiny: bool = False,
               **params) -> pd.DataFrame:
    """The runs of the :data:`PAPER_QUEUE` item ``label``: ``get(name).plan(profile, seeds=seeds, **params)``
    with the item's precision (where it sets one), restricted to its sub-tables, paper column N and paper LRs
    (``tiny``: and to the rows :data:`PAPER_QUEUE_TINY_ROWS`). ``params``: RunConfig overrides (e.g. ``dataset``);
    an unknown label is a ``ValueError``."""
    items = {item[0]: item for item in PAPER_QUEUE}
    if label not in items:
        raise ValueError(f"label: {label!r} is not an item of PAPER_QUEUE ({list(items)})")
    _, name, subtables, n, lrs, precision = items[label]
    plan = get(name).plan(profile, seeds=tuple(seeds), **({"precision": precision} if precision else {}), **params)
    keep = plan["subtable"].isin(subtables) & (plan["paper_n"] == n)
    if lrs:
        keep &= plan["paper_lr"].apply(lambda v: any(_same(v, w) for w in lrs))
    if tiny:
        keep &= plan["row"].isin(PAPER_QUEUE_TINY_ROWS)
    return plan[keep]


def paper_queue(seeds=PAPER_QUEUE_SEEDS, dataset: str = PAPER_QUEUE_DATASET,
                tiny: bool = False) -> list[tuple[str, str, pd.DataFrame]]:
    """The GPU window's queue: ``[(label, experiment name, plan), ...]`` in :data:`PAPER_QUEUE` order, each plan
    :func:`queue_plan` of the ``paper`` profile on ``dataset`` (an item whose rows ``tiny`` leaves out is empty).
    Rows shared between items (the same config) are left in; the caller de-duplicates by hash."""
    return [(label, name, queue_plan(label, seeds=seeds, tiny=tiny, dataset=dataset))
            for label, name, *_ in PAPER_QUEUE]
