"""The runs of ``notebooks/tuning_rule.ipynb``: Yun et al.'s tuning rule (ECCV 2022, Eq. 27; Sec. 5.1, Tables
3-4: "not only the LR linear scaling rule but also a WD linear scaling rule is possible as batch size changes")
applied to a network none of the papers used, timm's ``test_byobnet`` (BN, squeeze-and-excitation convs; see
``repro_lib.models.timm_models``), unmodified: its BN affine parameters, SE convs and classifier are scale-variant.

The protocol, the one a user of the rule follows:

1. tune the weight decay λ at one batch size B (the searched values :data:`SIZES` ``weight_decays``, the LR η and
   momentum μ fixed);
2. move to a batch 4× larger (:data:`BATCH_FACTOR`) and set λ by the rule, ``repro_lib.tuning.weight_decay_for``
   (the same tuning factor: λ × 4), or, as the control, keep λ unchanged (the factor falls to a quarter).

Both choices are in the plan for every searched λ (the runs at 4B are the union of the searched values and the
rule's values), so the plan does not depend on which λ wins: the notebook picks the tuned λ from the runs at B and
reads the rule's and the control's runs at 4B (``tuning_rule_report``). Every run: SGD with coupled L2 and PyTorch
momentum, one ÷10 LR decay at 3/4 of training (:data:`MILESTONES`), random crop + flip, the last partial batch
kept, a class-balanced subset of N images drawn by the seed.

**cpu**: N = 1,024 images, B = 16 and 64 (64 and 16 steps per epoch: the shrink rules' minimum of 16 at the larger
batch), η = 0.025 (η/B brackets the paper's 0.1/128: ×2 at B = 16, ×1/2 at B = 64), λ ∈ {0.005, 0.01, 0.02} at
B = 16, the tuning factors 0.08, 0.16 and 0.32 (10/128 is 0.078), 26 epochs with the decay at epoch 20: at least
3.2 of the weight decay's times 1/(2·TF) (6.4 relaxation times 1/(4·TF)) of every searched setting at B, whichever
wins (shrink rule 3), 3 seeds.
**gpu** / **paper**: all 50,000 images at B = 128 and 512 with the paper's η = 0.1, μ = 0.9 and λ ∈ {2e-4, 4e-4,
8e-4} (the factors 10/128, 20/128, 40/128), 100 epochs and 1 seed / 300 epochs and 3 seeds. **smoke**: synthetic
images, 3 epochs, 2 seeds (a pipeline check).
"""
from __future__ import annotations

import math

import pandas as pd

from ... import profiles, tuning
from ...config import RunConfig
from ...profiles import resolve

#: the network (none of the papers used it) and how much larger the second batch is
MODEL = "test_byobnet"
BATCH_FACTOR = 4
#: the ÷10 LR decay, as a fraction of training (one, late: the searched settings settle before it)
MILESTONES = (0.75,)

#: sizes per profile: N, test images (0: the whole test set), the first batch size B, η, μ, the searched λ at B,
#: epochs, evaluation interval (not hashed)
SIZES = {
    "smoke": dict(synthetic=True, n=128, n_test=128, batch_size=16, lr=0.025, momentum=0.9,
                  weight_decays=(0.005, 0.01, 0.02), num_epochs=3, eval_every=3),
    "cpu": dict(synthetic=False, n=1024, n_test=0, batch_size=16, lr=0.025, momentum=0.9,
                weight_decays=(0.005, 0.01, 0.02), num_epochs=26, eval_every=26),
    "gpu": dict(synthetic=False, n=50000, n_test=0, batch_size=128, lr=0.1, momentum=0.9,
                weight_decays=(2e-4, 4e-4, 8e-4), num_epochs=100, eval_every=0),
    "paper": dict(synthetic=False, n=50000, n_test=0, batch_size=128, lr=0.1, momentum=0.9,
                  weight_decays=(2e-4, 4e-4, 8e-4), num_epochs=300, eval_every=0),
}
#: seeds per profile (three for a claim on real images)
SEEDS = {"smoke": (0, 1), "cpu": (0, 1, 2), "gpu": (0,), "paper": (0, 1, 2)}

#: the recipe at the top of the tutorial (a plain PyTorch loop on timm's resnet18 as created, at B and at
#: BATCH_FACTOR·B with the rule's λ): N images, the batch B, η, μ, the tuning factor, epochs, and the images Lemma 1
#: is measured on. A demonstration of the tools, short in every profile; the claim itself is the plan's.
RECIPE = {
    "smoke": dict(n=64, batch_size=8, lr=0.05, momentum=0.9, tuning_factor=10 / 128, epochs=1, detect_images=8),
    "cpu": dict(n=1024, batch_size=32, lr=0.05, momentum=0.9, tuning_factor=10 / 128, epochs=3, detect_images=32),
    "gpu": dict(n=50000, batch_size=128, lr=0.1, momentum=0.9, tuning_factor=10 / 128, epochs=10, detect_images=64),
    "paper": dict(n=50000, batch_size=128, lr=0.1, momentum=0.9, tuning_factor=10 / 128, epochs=10,
                  detect_images=64),
}


#: the joint group of the tutorial: timm's ``deit_tiny_patch16_224`` at 32 px (``depth`` blocks: 12 is deit_tiny
#: itself, fewer only in smoke), its residual-stream writers found as one group and trained with SGD for ``steps``
#: steps of ``batch_size`` images with λ on the group and ``other_weight_decay`` on the rest; the group's angle per
#: step is measured after ``settle`` steps (the norm first falls from its initialization: about ln(S0/S*)/(2a)
#: steps with a = ηλ/(1−μ), then relaxes in 1/(4a)) and set beside sqrt(2ηλ/(1+μ)).
GROUP_RUN = {
    "smoke": dict(depth=2, steps=16, batch_size=8, lr=0.02, momentum=0.9, weight_decay=0.1,
                  other_weight_decay=5e-4, settle=8, detect_images=4),
    "cpu": dict(depth=12, steps=400, batch_size=16, lr=0.02, momentum=0.9, weight_decay=0.1,
                other_weight_decay=5e-4, settle=200, detect_images=4),
    "gpu": dict(depth=12, steps=400, batch_size=16, lr=0.02, momentum=0.9, weight_decay=0.1,
                other_weight_decay=5e-4, settle=200, detect_images=4),
    "paper": dict(depth=12, steps=400, batch_size=16, lr=0.02, momentum=0.9, weight_decay=0.1,
                  other_weight_decay=5e-4, settle=200, detect_images=4),
}


def group_run(profile: str) -> dict:
    """The joint-group demonstration's sizes in ``profile`` (:data:`GROUP_RUN`)."""
    return resolve(profile, GROUP_RUN)


def recipe(profile: str) -> dict:
    """The recipe's sizes in ``profile`` (:data:`RECIPE`; an unknown profile is a ``ValueError``)."""
    return resolve(profile, RECIPE)


def sizes(profile: str) -> dict:
    """The sizes of ``profile`` (:data:`SIZES`; an unknown profile is a ``ValueError``)."""
    return resolve(profile, SIZES)


def _clean(v: float) -> float:
    """A weight decay rounded to 12 significant digits, so that 4 × 0.005 is the searched 0.02 (one run, one hash)."""
    return float(f"{v:.12g}")


def rule_weight_decay(weight_decay: float, n: int, batch_size: int, to_batch_size: int, lr: float,
                      momentum: float) -> float:
    """The rule's λ at ``to_batch_size`` for a λ tuned at ``batch_size``: the one that keeps the tuning factor
    (``repro_lib.tuning.weight_decay_for``; λ × to_batch_size / batch_size), rounded as the plan's values are."""
    tf = tuning.tuning_factor(n, batch_size, lr, weight_decay, momentum)
    return _clean(tuning.weight_decay_for(tf, n, to_batch_size, lr, momentum))


def plan(profile: str, seed: int = 0, dataset: str = "cifar10", **overrides) -> pd.DataFrame:
    """The runs of ``profile``: one row per run with ``stage`` ("tune" at B, "transfer" at 4B), ``batch_size``,
    ``weight_decay``, ``tuning_factor``, ``seed`` (the profile's :data:`SEEDS` offset by ``seed``) and ``cfg``; on
    ``dataset`` (``cifar10``, or a stand-in such as ``cifar10-jpeg``). ``overrides``: further ``RunConfig`` fields of
    every run (``device``, ``precision``, ``cuda_graphs``, ``num_epochs``)."""
    size = sizes(profile)
    b, lr, mu, n = size["batch_size"], size["lr"], size["momentum"], size["n"]
    searched = [_clean(w) for w in size["weight_decays"]]
    big = BATCH_FACTOR * b
    transfer = sorted(set(searched) | {rule_weight_decay(w, n, b, big, lr, mu) for w in searched})
    common = dict(model=MODEL, scale_invariant=False, width=8, dataset=dataset, synthetic=size["synthetic"], n=n,
                  n_test=size["n_test"], lr=lr, momentum=mu, optimizer="sgd", schedule="step",
                  schedule_kwargs={"milestones": list(MILESTONES)}, num_epochs=size["num_epochs"],
                  eval_every=size["eval_every"], profile=profile)
    common.update(overrides)
    rows = []
    for s in SEEDS[profile]:
        for stage, batch, grid in (("tune", b, searched), ("transfer", big, transfer)):
            for wd in grid:
                cfg = RunConfig(**common, batch_size=batch, weight_decay=wd, seed=seed + s)
                rows.append(dict(stage=stage, batch_size=batch, weight_decay=wd, tuning_factor=cfg.tuning_factor,
                                 seed=seed + s, cfg=cfg))
    return pd.DataFrame(rows)


def protocol(plan_: pd.DataFrame) -> pd.DataFrame:
    """The shrink rules in spirit, one row per searched λ at B: its tuning factor, the relaxation time of the weight
    norm 1/(4·TF) in epochs (``repro_lib.tuning.relaxation_epochs``), the first LR decay, ``settle``: the first
    decay's epoch in units of the weight decay's own time 1/(2·TF) (``profiles.relaxation_epochs``, the unit of the
    shrink rules; at least ``profiles.SETTLE_YELLOW`` for the setting that wins the search: twice as many relaxation
    times), and the steps per epoch at B and at 4B (at least ``profiles.MIN_STEPS_PER_EPOCH``); the rule's λ at 4B
    and the control's factor beside them."""
    rows = []
    first = plan_[plan_.seed == plan_.seed.min()]
    big = first[first.stage == "transfer"].batch_size.iloc[0]
    for cfg in first[first.stage == "tune"].cfg:
        decay = profiles.first_decay_epoch(cfg)
        relax = tuning.relaxation_epochs(cfg.tuning_factor)
        decay_time = profiles.relaxation_epochs(cfg.tuning_factor)
        rows.append(dict(weight_decay=cfg.weight_decay, tuning_factor=cfg.tuning_factor, relaxation_epochs=relax,
                         first_decay=decay, settle=math.inf if decay is None else decay / decay_time,
                         steps=profiles.steps_per_epoch(cfg.n, cfg.batch_size),
                         steps_4b=profiles.steps_per_epoch(cfg.n, big),
                         rule_weight_decay=rule_weight_decay(cfg.weight_decay, cfg.n, cfg.batch_size, big, cfg.lr,
                                                             cfg.momentum),
                         control_tuning_factor=tuning.tuning_factor(cfg.n, big, cfg.lr, cfg.weight_decay,
                                                                    cfg.momentum)))
    return pd.DataFrame(rows)


def breaks(plan_: pd.DataFrame) -> list[str]:
    """The shrink rules a plan breaks, in words ([] when it keeps them): fewer than 16 steps per epoch at 4B, or a
    searched setting that would not settle for ``profiles.SETTLE_YELLOW`` relaxation times before the first decay."""
    p = protocol(plan_)
    out = []
    if (p.steps_4b < profiles.MIN_STEPS_PER_EPOCH).any():
        out.append(f"{int(p.steps_4b.min())} steps per epoch at {BATCH_FACTOR}B (at least "
                   f"{profiles.MIN_STEPS_PER_EPOCH})")
    short = p[p.settle < profiles.SETTLE_YELLOW * (1 - 1e-9)]
    if len(short):
        out.append("first LR decay after " + ", ".join(f"{s:.2g}" for s in short.settle)
                   + f" times 1/(2 TF) for λ = {', '.join(f'{w:g}' for w in short.weight_decay)} "
                   f"(at least {profiles.SETTLE_YELLOW:g})")
    return out
