"""The runs of ``notebooks/adamp_cifar.ipynb``: the norm-growth mechanism of Heo et al. 2021 (Sec. 3.2, Table 1)
and Table 2's direction on CIFAR-10 ResNet-18, for users without ImageNet -- SGD vs SGDP, AdamW vs AdamP with the
paper's ImageNet hyperparameters (Appendix E.2), the weight-decay convention of each optimizer explicit.

The AdamP paper has no CIFAR experiment, so no profile here is a protocol from the paper: ``paper`` is the largest,
closest-to-E.2 setting of this stand-in (E.2's batch 256, 100 epochs, LR, WD and cosine schedule on all 50,000
images). The network is the unmodified ResNet-18 of the model registry (BN affine and FC trained, so not
scale-invariant as a whole; its 20 BN-preceded conv weights are the scale-invariant ones the tracker follows).

**Smaller profiles keep that setting's dynamics** (``repro_lib.profiles.shrink_rules``, as the Yun et al. grids with
``rescale="eta_over_b"``): η is multiplied by B / 256, keeping E.2's η/B (the net has scale-variant parameters, whose
SGD noise scales with η/B), and λ by 50,000 / N, so that every optimizer's weight decay relaxes the scale-invariant
weights' norm in the same number of epochs (``profiles.relaxation_tuning_factor``: N·η·λ(·r)/(B(1−μ)) for SGD and
SGDP, N·η·λ(·r)/B for AdamW and AdamP). ``cpu``: 1,024 images at B = 64 (16 steps per epoch), η / 4, λ × 48.8,
E.2's 100 epochs, 3 seeds: the cosine schedule halves the LR after 1.95 relaxation times of SGD's and AdamW's decay
(0.195 of SGDP's and AdamP's, whose decay is scaled by wd_ratio = 0.1 on the weights they project), as at 50,000
images. Whether the linear η/B rule is the right one for Adam is not settled in the literature; it is the rule the
package applies to every net with scale-variant parameters.

``plan(profile, seed, dataset)`` gives the runs as the notebook trains them (``repro_lib.papers.registry`` builds
cluster sweeps and the stale-run check from the same call, so the store keys agree).
"""
from __future__ import annotations

import pandas as pd

from ...config import RunConfig
from ...profiles import resolve

#: the setting the smaller profiles keep the dynamics of: E.2's batch on all of CIFAR-10's training images
REFERENCE_N, REFERENCE_B = 50_000, 256

#: sizes per profile (``eval_every``: epochs between test evaluations, 0 = auto; not part of a run's hash)
SIZES = {
    "smoke": dict(synthetic=True, width=4, n=256, n_test=256, batch_size=64, num_epochs=2, eval_every=1),
    "cpu": dict(synthetic=False, width=8, n=1024, n_test=0, batch_size=64, num_epochs=100, eval_every=25),
    "gpu": dict(synthetic=False, width=64, n=50000, n_test=0, batch_size=128, num_epochs=100, eval_every=0),
    "paper": dict(synthetic=False, width=64, n=50000, n_test=0, batch_size=256, num_epochs=100, eval_every=0),
}
#: seeds per profile (E.2's results are means of three seeds)
SEEDS = {"smoke": (0,), "cpu": (0, 1, 2), "gpu": (0,), "paper": (0, 1, 2)}

#: optimizer -> the paper's settings (Appendix E.2) at the reference N and B, the weight-decay convention explicit
SETTINGS = {
    "sgd": dict(optimizer="sgd", lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4,
                weight_decay_mode="coupled"),
    "sgdp": dict(optimizer="sgdp", lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4,
                 weight_decay_mode="decoupled"),  # w <- w(1 - lr*wd*r/(1-mu)): SGD's coupled decay at equilibrium
    # the paper's "wd 1e-4" in AdamW notation (a shrink of 1e-4 per step at the peak LR): torch's lr*wd, wd = 0.1
    "adamw": dict(optimizer="adamw", lr=1e-3, weight_decay=0.1, weight_decay_mode="decoupled"),
    "adamp": dict(optimizer="adamp", lr=1e-3, weight_decay=0.1, weight_decay_mode="decoupled"),
}


def sizes(profile: str) -> dict:
    """The sizes of ``profile`` (:data:`SIZES`; an unknown profile is a ``ValueError``)."""
    return resolve(profile, SIZES)


def plan(profile: str, seed: int = 0, dataset: str = "cifar10", **overrides) -> pd.DataFrame:
    """The runs of ``profile`` (columns ``optimizer``, ``seed``, ``cfg``; the profile's :data:`SEEDS` offset by
    ``seed``): ResNet-18 (unmodified), cosine LR, the :data:`SETTINGS` of each optimizer with η × B / 256 and
    λ × 50,000 / N (see the module docstring), on ``dataset`` (``cifar10``, or a stand-in such as ``cifar10-jpeg``).
    ``overrides``: further ``RunConfig`` fields of every run (``device``, ``precision``, ``cuda_graphs``)."""
    size = sizes(profile)
    lr_scale, wd_scale = size["batch_size"] / REFERENCE_B, REFERENCE_N / size["n"]
    common = dict(model="resnet18", scale_invariant=False, dataset=dataset, schedule="cosine", profile=profile,
                  **size, **overrides)
    rows = []
    for s in SEEDS[profile]:
        for name, v in SETTINGS.items():
            fields = dict(v, lr=v["lr"] * lr_scale, weight_decay=v["weight_decay"] * wd_scale)
            rows.append(dict(optimizer=name, seed=seed + s, cfg=RunConfig(**common, **fields, seed=seed + s)))
    return pd.DataFrame(rows)
