"""Yun et al. 2022, Sec. 6 (Fig. 8): tune the weight decay of EfficientNet-B0 on a random 1/16 of ImageNet, then
predict the full-data weight decay from the tuning factor N·η·λ/(B(1−μ)) (Eq. 27) instead of searching again.

``section6_plan(profile)`` gives the subset and full-data runs (``ImageFolderConfig``, trained by
``repro_lib.distributed``), ``wd_search`` ranks a weight-decay grid, ``predict_weight_decay`` is the prediction.
"""
from __future__ import annotations

import math
from typing import Any

from ... import data as data_mod
from ...angular import tuning_factor
from ...config import ImageFolderConfig


def predict_weight_decay(wd_subset: float, n_subset: int, n_full: int, batch_size: int, lr: float,
                         momentum: float, batch_size_full: int | None = None, lr_full: float | None = None,
                         momentum_full: float | None = None) -> float:
    """The weight decay on ``n_full`` images with the subset run's tuning factor (Yun et al. Sec. 6, Eq. 27):
    λ_full = TF_subset · B_full (1 − μ_full) / (N_full η_full). With η, B, μ unchanged: λ_subset · N_subset/N_full
    (Sec. 6: 0.0016 · 80k / 1.28M = 1e-4)."""
    tf = tuning_factor(n_subset, batch_size, lr, wd_subset, momentum)
    b = batch_size_full or batch_size
    eta = lr_full or lr
    mu = momentum if momentum_full is None else momentum_full
    return tf * b * (1 - mu) / (n_full * eta)


# Sec. 6 grids: Fig. 8 is a plot (its exact λ grid is not in the text); our reading is a ×2 grid around the
# reported optima (subset: 0.0016; full data: 5e-5 best, 1e-4 second). Subsets are uniform draws (line 366: "80k
# randomly sampled data"), world_size 1 unless the caller overrides it (section6_plan(..., world_size=8)).
_PAPER_SUB_WD = [0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064]
_PAPER_FULL_WD = [1.25e-5, 2.5e-5, 5e-5, 1e-4, 2e-4, 4e-4]
_SEC6_BASE = dict(model="efficientnet_b0", dataset="imagenet", val_split="val", image_size=224, batch_size=512,
                  subset_draw="uniform", lr=0.1, momentum=0.9, num_epochs=200, schedule="step",
                  schedule_kwargs={"milestones": [0.5, 0.75, 0.9]}, num_workers=8)

#: Yun et al. 2022 Sec. 6 (Fig. 8) for each profile, as data. ``n_subset`` / ``n_full``: training images of the
#: WD search on the subset and on the full set (0 = the whole training split; ImageNet: 1,281,167).
SECTION6_PROFILES: dict[str, dict[str, Any]] = {
    # synthetic ImageFolder (written by the notebook), timm's tiny test EfficientNet, 32 px: a pipeline check
    "smoke": dict(base={**_SEC6_BASE, "model": "test_efficientnet", "dataset": "synthetic-imagefolder",
                        "image_size": 32, "batch_size": 16, "num_epochs": 2, "num_workers": 0, "device": "cpu"},
                  n_subset=16, n_full=64, subset_wd=[0.0016, 0.0064], full_wd=[1e-4, 4e-4],
                  synthetic=dict(num_classes=4, per_class=16, val_per_class=4, size=32), seeds=[0]),
    # CPU stand-in: CIFAR-10 (torchvision, 32 px, held in memory), timm's tiny test EfficientNet (BN, SE, SiLU),
    # B = 32 so the subset still takes 8 steps per epoch, N ratio 16 as in the paper; full-data grid = subset grid / 16;
    # 3 seeds (a seed draws the initialisation, the data order and the subset), so that the full-data gap between
    # the predicted λ and the best one has a seed-paired interval
    "cpu": dict(base={**_SEC6_BASE, "model": "test_efficientnet", "dataset": "cifar10", "val_split": "test",
                      "image_size": 32, "batch_size": 32, "num_epochs": 20, "n_val": 2000, "eval_every": 10,
                      "num_workers": 0, "device": "cpu"},
                n_subset=250, n_full=4000, subset_wd=[0.0004, 0.0016, 0.0064, 0.0256],
                full_wd=[2.5e-5, 1e-4, 4e-4, 1.6e-3], synthetic=None, seeds=[0, 1, 2]),
    # paper models and batch, 50 epochs (milestones compress proportionally), 1 seed
    "gpu": dict(base={**_SEC6_BASE, "num_epochs": 50}, n_subset=80000, n_full=0, subset_wd=_PAPER_SUB_WD,
                full_wd=_PAPER_FULL_WD[1:5], synthetic=None, seeds=[0]),
    "paper": dict(base=dict(_SEC6_BASE), n_subset=80000, n_full=0, subset_wd=_PAPER_SUB_WD,
                  full_wd=_PAPER_FULL_WD, synthetic=None, seeds=[0]),
}


def evaluation_split(dataset: str) -> str:
    """The evaluation split of ``dataset``: ``"test"`` for the datasets of ``repro_lib.data`` (CIFAR, its JPEG mirror,
    Tiny ImageNet's validation images), else ``"val"`` (ImageNet's layout)."""
    return "test" if dataset in data_mod.DATASETS else "val"


def section6_plan(profile: str, seed: int = 0, **overrides) -> tuple[list[ImageFolderConfig],
                                                                     list[ImageFolderConfig], dict]:
    """(subset configs, full-data configs, profile sizes) of Sec. 6 for ``profile``; ``seed`` is added to the
    profile's seeds; ``overrides``: config fields applied to every run (e.g. ``dataset`` -- its evaluation split
    follows (:func:`evaluation_split`) unless ``val_split`` is given too --, ``device``, ``num_workers``,
    ``num_epochs``, ``world_size`` = processes per run; a falsy value means "the profile's")."""
    from ...profiles import check_profile

    check_profile(profile)
    sizes = SECTION6_PROFILES[profile]
    overrides = {k: v for k, v in overrides.items() if v not in (None, "", 0)}
    if "dataset" in overrides and "val_split" not in overrides:
        overrides["val_split"] = evaluation_split(overrides["dataset"])
    base = {**sizes["base"], "profile": profile, **overrides}
    sub = [ImageFolderConfig.from_dict({**base, "n": sizes["n_subset"], "weight_decay": wd, "seed": seed + s})
           for s in sizes["seeds"] for wd in sizes["subset_wd"]]
    full = [ImageFolderConfig.from_dict({**base, "n": sizes["n_full"], "weight_decay": wd, "seed": seed + s})
            for s in sizes["seeds"] for wd in sizes["full_wd"]]
    return sub, full, sizes


def wd_search(cfgs, results, predicted: float | None = None) -> "pd.DataFrame":  # noqa: F821
    """One row per weight decay: mean test accuracy over the non-diverged seeds (NaN when all diverged, the
    paper's rule), ``rank`` (1 = best), N, tuning factor, diverged count; with ``predicted``, a boolean column
    ``nearest_prediction`` marking the grid λ nearest to it in log scale."""
    import pandas as pd

    rows = [{"weight_decay": c.weight_decay, "seed": c.seed, "n_train": r.get("n_train", c.n),
             "status": r["status"], "test_acc": r["test_acc"], "tuning_factor": r.get("tuning_factor")}
            for c, r in zip(cfgs, results)]
    df = pd.DataFrame(rows)
    ok = df[df.status == "finished"]
    out = df.groupby("weight_decay").agg(n_train=("n_train", "first"), tuning_factor=("tuning_factor", "first"),
                                         runs=("seed", "size"),
                                         diverged=("status", lambda s: int((s == "diverged").sum())))
    out["test_acc"] = ok.groupby("weight_decay").test_acc.mean()
    out["rank"] = out.test_acc.rank(ascending=False, method="min")
    out = out.reset_index()
    if predicted is not None:
        dist_log = (out.weight_decay / predicted).map(lambda r: abs(math.log(r)))
        out["nearest_prediction"] = dist_log == dist_log.min()
    return out
