"""The ImageNet experiments of Heo, Chun, Oh, Han, Yun, Kim, Uh, Ha — *AdamP: Slowing Down the Slowdown for
Momentum Optimizers on Scale-invariant Weights*, ICLR 2021: Table 1 (norm growth of the scale-invariant weights of
ResNet-18 under SGD/SGDP/AdamW/AdamP and several weight decays) and Table 2 (top-1 of MobileNetV2, ResNet-18,
ResNet-50 and ResNet-50 + CutMix under SGD, SGDP, Adam, AdamW, AdamP), declared as data for the four profiles and
trained with ``repro_lib.distributed.fit_imagefolder`` (one process or ``torchrun``/DDP).

Settings (Appendix E.2, "standard settings" of He et al. 2016 with the cosine schedule of Sec. 4.1):

* SGD / SGDP: LR 0.1, momentum 0.9 **with Nesterov**, weight decay 1e-4, batch 256.
* Adam family: LR 1e-3, β = (0.9, 0.999), ε = 1e-8, weight decay 1e-4, batch 256.
* cosine LR to 0 (we anneal per iteration, ``schedule="cosine"``; E.2 does not say per epoch or per step; no
  warm-up is mentioned, none is used); 100 epochs (ResNet-18, ResNet-50), 150 epochs (MobileNetV2, ResNet-50 +
  CutMix); MobileNetV2 additionally with label smoothing and batch 1024; SGDP/AdamP δ = 0.1, wd_ratio = 0.1.
* Reported numbers are means of three seeds (Appendix H, Table H.1): the ``paper`` profile runs seeds 0, 1, 2.

**Weight-decay notation** (conventions that silently change results; :func:`torch_weight_decay`):

* ``sgd``: ``torch.optim.SGD`` coupled L2 (g ← g + λx): the paper's number as is.
* ``sgdp``: decoupled, the authors' SGDP ``x ← x(1 − η·λ·r/(1−μ))``: the paper's number as is.
* ``adam``: ``torch.optim.Adam`` coupled L2: the paper's number as is.
* ``adamw`` / ``adamp``: the paper writes them in the AdamW paper's notation (a shrink of λ per step at the peak
  LR); torch's AdamW (and our AdamP) shrink by η·λ_torch, so λ_torch = λ_paper / η: "wd 1e-4" at LR 1e-3 is
  ``weight_decay=0.1``. In both notations the shrink follows the cosine schedule.

**Choices where the paper is silent or inconsistent** (listed in the notebook):

* MobileNetV2: E.2 says its LR and WD were "searched" per optimizer but gives no values. We scale the LR linearly
  with the batch (0.4 for SGD/SGDP, 4e-3 for the Adam family at B = 1024), use weight decay 4e-5 (Sandler et al.
  2018) for every optimizer (paper notation) and label smoothing 0.1 (its usual value).
* Table 2's weight decays: E.2 states 1e-4 for all optimizers (``wd_source="E.2"``, the default), but the captions
  of Figs. F.2 / F.4 say the Table 2 runs of SGDP used 1e-5 and of AdamP 1e-6 (``wd_source="F"``).
* Initialization: "standard settings" of He et al. 2016, i.e. torchvision's: the timm ResNets are built with
  ``zero_init_last=False`` (every BN weight starts at 1; timm's default zeroes each residual branch's last BN),
  MobileNetV2 as timm defines it (BN weights 1); see ``repro_lib.models.timm_models``.
* Table 1's "norm" is not defined further than "norm of the scale-invariant weights"; we log the tracker's norm
  of the concatenation of all scale-invariant tensors (``weight_norm``) and the mean per-tensor norm; neither
  matches the paper's absolute scale (≈1.3 at epoch 1), so compare the change Norm^last − Norm¹ in relative terms.

Every row of Tables 1 and 2 runs under the ``gpu`` / ``paper`` profiles: the **Adam** column is
``repro_lib.optim``'s ``"adam"`` (``torch.optim.Adam``, coupled L2) and **ResNet-50 + CutMix** (150 epochs, E.2)
sets ``cutmix_prob=1.0``, ``cutmix_beta=1.0`` (``repro_lib.cutmix``: the CutMix paper's ImageNet recipe, since
neither Table 2 nor E.2 gives CutMix's settings); every other row has ``cutmix_prob=0``. Only the ``cpu`` profile
declares its rows unavailable (``PlannedRun.reason``; ImageNet does not fit a CPU).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...cutmix import CUTMIX_BETA, CUTMIX_PROB
from ...distributed import REFERENCE_IMAGES_PER_GPU_SECOND, ImageFolderConfig, training_images
from ...models import timm_imagenet
from .. import transcribed

if TYPE_CHECKING:
    import pandas as pd

#: imported for its effect: importing ``models.timm_imagenet`` registers ``resnet18_imagenet``
MODEL_MODULES = (timm_imagenet,)

SGD_FAMILY = ("sgd", "sgdp")
ADAM_FAMILY = ("adam", "adamw", "adamp")
DECOUPLED = ("sgdp", "adamw", "adamp")

#: Appendix E.2, per optimizer family (weight decay in the paper's notation).
E2_SETTINGS: dict[str, dict[str, Any]] = {
    "sgd_family": dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4, batch_size=256),
    "adam_family": dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-4, batch_size=256),
}
#: our choice for MobileNetV2 (E.2: "searched", values not given): LR ×4 for B = 1024, WD 4e-5, smoothing 0.1.
MOBILENET_SETTINGS: dict[str, Any] = dict(batch_size=1024, lr_sgd=0.4, lr_adam=4e-3, weight_decay=4e-5,
                                          label_smoothing=0.1, num_epochs=150)
SGDP_ADAMP_KWARGS = dict(delta=0.1, wd_ratio=0.1)

#: Table 2's architectures: label -> (registered model, epochs, cutmix)
TABLE2_MODELS: dict[str, tuple[str, int, bool]] = {
    "mobilenetv2": ("mobilenetv2_100", 150, False),
    "resnet18": ("resnet18_imagenet", 100, False),
    "resnet50": ("resnet50", 100, False),
    "resnet50+cutmix": ("resnet50", 150, True),
}
TABLE2_OPTIMIZERS = ("sgd", "sgdp", "adam", "adamw", "adamp")
#: Table 2's weight decay (paper notation) by source: E.2's text, or the captions of Figs. F.2/F.4.
TABLE2_WD = {"E.2": {o: 1e-4 for o in TABLE2_OPTIMIZERS},
             "F": {"sgd": 1e-4, "sgdp": 1e-5, "adam": 1e-4, "adamw": 1e-4, "adamp": 1e-6}}
#: Table 1 (ImageNet ResNet-18, 100 epochs, E.2 settings): (optimizer, weight decay in the paper's notation).
TABLE1_ROWS: tuple[tuple[str, float], ...] = (
    ("sgd", 0.0), ("sgd", 1e-6), ("sgd", 1e-5), ("sgd", 1e-4),
    ("sgdp", 0.0), ("sgdp", 1e-6), ("sgdp", 1e-5), ("adamw", 0.0), ("adamp", 0.0))

_IMAGENET = dict(dataset="imagenet", val_split="val", image_size=224, n=0, n_val=0, schedule="cosine",
                 schedule_kwargs={}, num_workers=8, amp=False)

#: The profiles as data. ``model_map``: the paper's model -> the model run; ``table1_rows`` / ``table2_models``:
#: which rows are planned (None = all); ``runnable``: False declares the profile unavailable with ``reason``.
PROFILES: dict[str, dict[str, Any]] = {
    # synthetic ImageFolder written into results_dir, timm's tiny test EfficientNet, 32 px, 1 epoch: a pipeline
    # check of Table 1's two headline rows (SGD wd 1e-4 vs SGDP wd 1e-5); the numbers mean nothing
    "smoke": dict(runnable=True, reason="", seeds=[0],
                  base=dict(dataset="synthetic-imagefolder", val_split="val", image_size=32, n=0, n_val=0,
                            schedule="cosine", schedule_kwargs={}, num_workers=0, device="cpu", amp=False),
                  size=dict(batch_size=16, num_epochs=1),
                  model_map={"resnet18": "test_efficientnet"},
                  table1_rows=[("sgd", 1e-4), ("sgdp", 1e-5)], table2_models=[],
                  synthetic=dict(num_classes=4, per_class=16, val_per_class=4, size=32)),
    # ImageNet at 224 px does not fit a CPU (one ResNet-18 epoch ≈ 1.3M images); the CPU version of the same
    # comparison (SGD vs SGDP, AdamW vs AdamP, norm growth) is notebooks/adamp_cifar.ipynb on CIFAR-10
    "cpu": dict(runnable=False,
                reason=("the cpu profile does not train: ImageNet Tables 1-2 need GPUs (see the GPU-hour "
                        "estimate); run notebooks/adamp_cifar.ipynb for the CPU-sized SGD/SGDP and AdamW/AdamP "
                        "comparison on CIFAR-10"),
                seeds=[0], base=dict(_IMAGENET), size={}, model_map={}, table1_rows=None, table2_models=None,
                synthetic=None),
    # the paper's settings, one seed
    "gpu": dict(runnable=True, reason="", seeds=[0], base=dict(_IMAGENET), size={}, model_map={},
                table1_rows=None, table2_models=None, synthetic=None),
    # the paper's settings, three seeds (Appendix H)
    "paper": dict(runnable=True, reason="", seeds=[0, 1, 2], base=dict(_IMAGENET), size={}, model_map={},
                  table1_rows=None, table2_models=None, synthetic=None),
}


def torch_weight_decay(optimizer: str, wd_paper: float, lr: float) -> tuple[float, str]:
    """(``weight_decay`` for our optimizer builder, ``weight_decay_mode``) for the paper's ``wd_paper`` at peak LR
    ``lr`` (see the module docstring): ×1 for sgd/sgdp/adam, ÷lr for adamw/adamp (AdamW-paper notation)."""
    if optimizer in ("adamw", "adamp"):
        wd = wd_paper / lr
    elif optimizer in ("sgd", "sgdp", "adam"):
        wd = wd_paper
    else:
        raise ValueError(f"optimizer: not an optimizer of the AdamP ImageNet tables: {optimizer!r}")
    return wd, "decoupled" if optimizer in DECOUPLED else "coupled"


def optimizer_settings(optimizer: str, model_label: str, wd_paper: float | None = None) -> dict[str, Any]:
    """ImageFolderConfig fields of ``optimizer`` on the paper's ``model_label`` (E.2; MobileNetV2: our choice)."""
    adam = optimizer in ADAM_FAMILY
    fam = E2_SETTINGS["adam_family" if adam else "sgd_family"]
    mobile = model_label == "mobilenetv2"
    lr = (MOBILENET_SETTINGS["lr_adam" if adam else "lr_sgd"]) if mobile else fam["lr"]
    if wd_paper is None:
        wd_paper = MOBILENET_SETTINGS["weight_decay"] if mobile else fam["weight_decay"]
    wd, mode = torch_weight_decay(optimizer, wd_paper, lr)
    kw: dict[str, Any] = {}
    if adam:
        kw.update(betas=list(fam["betas"]), eps=fam["eps"])
    if optimizer in ("sgdp", "adamp"):
        kw.update(SGDP_ADAMP_KWARGS)
    return dict(optimizer=optimizer, lr=lr, weight_decay=wd, weight_decay_mode=mode,
                momentum=0.9, nesterov=not adam, optimizer_kwargs=kw,
                batch_size=MOBILENET_SETTINGS["batch_size"] if mobile else fam["batch_size"],
                label_smoothing=MOBILENET_SETTINGS["label_smoothing"] if mobile else 0.0)


@dataclass
class PlannedRun:
    """One row (one seed) of Table 1 or 2: the paper's labels and the config that trains it (``reason`` set when
    the profile declares it unavailable: the ``cpu`` profile)."""

    table: str  # "table1" | "table2"
    model: str  # the paper's architecture label
    optimizer: str
    wd_paper: float  # weight decay in the paper's notation
    cutmix: bool
    seed: int
    config: ImageFolderConfig
    reason: str = ""

    @property
    def runnable(self) -> bool:
        return not self.reason


@dataclass
class Plan:
    profile: str
    runs: list[PlannedRun]
    sizes: dict[str, Any] = field(default_factory=dict)

    def configs(self) -> list[ImageFolderConfig]:
        """The distinct runnable configs (Table 1's SGD wd 1e-4 row is Table 2's ResNet-18 SGD cell)."""
        seen, out = set(), []
        for r in self.runs:
            if r.runnable and r.config.hash not in seen:
                seen.add(r.config.hash)
                out.append(r.config)
        return out

    def blocked(self) -> list[PlannedRun]:
        """The rows the profile declares unavailable (every row of ``cpu``; none of the others)."""
        return [r for r in self.runs if not r.runnable]


def _config(sizes, model_label, optimizer, wd_paper, cutmix, epochs, seed, profile, overrides):
    model = sizes["model_map"].get(model_label, TABLE2_MODELS[model_label][0])
    fields = {**sizes["base"], **optimizer_settings(optimizer, model_label, wd_paper), "model": model,
              "num_epochs": epochs, "seed": seed, "profile": profile, **sizes["size"]}
    fields.update(cutmix_prob=CUTMIX_PROB if cutmix else 0.0, cutmix_beta=CUTMIX_BETA)
    fields.update({k: v for k, v in overrides.items() if v not in (None, "", 0)})
    return ImageFolderConfig.from_dict(fields)


def plan(profile: str, seed: int = 0, wd_source: str = "E.2", **overrides) -> Plan:
    """Every planned run of Tables 1 and 2 for ``profile`` (``seed`` is added to the profile's seeds).
    ``wd_source``: Table 2's weight decays, "E.2" (text) or "F" (Figs. F.2/F.4 captions). ``overrides``: config
    fields applied to every run (``device``, ``num_workers``, ``num_epochs``; a falsy value = the profile's).
    Raises ``ValueError`` naming a bad parameter."""
    from ...profiles import check_profile

    check_profile(profile)
    if wd_source not in TABLE2_WD:
        raise ValueError(f"wd_source: must be one of {sorted(TABLE2_WD)}, got {wd_source!r}")
    sizes = PROFILES[profile]
    runs: list[PlannedRun] = []

    def add(table, label, opt, wd, cutmix, epochs):
        for s in sizes["seeds"]:
            cfg = _config(sizes, label, opt, wd, cutmix, epochs, seed + s, profile, overrides)
            runs.append(PlannedRun(table, label, opt, wd, cutmix, seed + s, cfg,
                                   "" if sizes["runnable"] else sizes["reason"]))

    rows1 = TABLE1_ROWS if sizes["table1_rows"] is None else [tuple(r) for r in sizes["table1_rows"]]
    for opt, wd in rows1:
        add("table1", "resnet18", opt, wd, False, TABLE2_MODELS["resnet18"][1])
    models2 = TABLE2_MODELS if sizes["table2_models"] is None else sizes["table2_models"]
    for label in models2:
        _, epochs, cutmix = TABLE2_MODELS[label]
        for opt in TABLE2_OPTIMIZERS:
            wd = MOBILENET_SETTINGS["weight_decay"] if label == "mobilenetv2" else TABLE2_WD[wd_source][opt]
            add("table2", label, opt, wd, cutmix, epochs)
    return Plan(profile, runs, dict(sizes))


#: training images per second on one modern GPU at 224 px (round reference figures, not measurements)
IMAGES_PER_GPU_SECOND = {**REFERENCE_IMAGES_PER_GPU_SECOND, "resnet18_imagenet": 2000.0}
IMAGENET_TRAIN_IMAGES = 1_281_167


def gpu_hours(p: Plan, include_blocked: bool = True) -> float:
    """Σ (N·epochs + evaluation) / reference throughput over the distinct runs (rows the profile declares
    unavailable counted unless ``include_blocked=False``; CutMix costs nothing extra), in GPU-hours at 224 px,
    ImageNet-1k's N when ``n == 0``, evaluation as ``distributed.training_images`` counts it. The throughput
    is the paper's model's (``TABLE2_MODELS``), also when a profile maps it to another."""
    total, seen = 0.0, set()
    for r in p.runs:
        if (not include_blocked and not r.runnable) or r.config.hash in seen:
            continue
        seen.add(r.config.hash)
        ips = IMAGES_PER_GPU_SECOND.get(TABLE2_MODELS[r.model][0], 1000.0) * (224 / r.config.image_size) ** 2
        total += training_images(r.config, IMAGENET_TRAIN_IMAGES) / ips
    return total / 3600


# ----------------------------------------------------------------------------------------------- tables
def _norms(history: list[dict]) -> dict[str, float]:
    recs = [h for h in history if "weight_norm" in h]
    if not recs:
        return dict(norm_first=math.nan, norm_last=math.nan, tensor_norm_first=math.nan,
                    tensor_norm_last=math.nan)

    def mean_tensor(h):
        per = h.get("weight_norm_per_tensor") or {}
        return sum(per.values()) / len(per) if per else math.nan

    return dict(norm_first=recs[0]["weight_norm"], norm_last=recs[-1]["weight_norm"],
                tensor_norm_first=mean_tensor(recs[0]), tensor_norm_last=mean_tensor(recs[-1]))


def results_frame(p: Plan, results: dict[str, dict]) -> "pd.DataFrame":  # noqa: F821
    """One row per planned run: the paper's labels, status, top-1, Norm¹ / Norm^last (concatenated and mean
    per-tensor). ``results``: config hash -> ``fit_imagefolder`` result (with ``history``)."""
    import pandas as pd

    rows = []
    for r in p.runs:
        res = results.get(r.config.hash) if r.runnable else None
        row = dict(table=r.table, model=r.model, optimizer=r.optimizer, weight_decay=r.wd_paper, cutmix=r.cutmix,
                   seed=r.seed, status=res["status"] if res else ("unavailable" if r.reason else "not run"),
                   reason=r.reason, test_acc=res["test_acc"] if res else math.nan,
                   epochs=res.get("epochs_run") if res else math.nan,
                   **_norms(res.get("history", []) if res else []))
        rows.append(row)
    df = pd.DataFrame(rows)
    df["norm_change"] = df.norm_last - df.norm_first
    return df


def table1_beside_paper(df) -> "pd.DataFrame":  # noqa: F821
    """Table 1 (ImageNet ResNet-18 rows): ours (seed mean) beside the paper's Norm¹, Norm^last, score."""
    ref = transcribed.table("adamp_table1")
    ref = ref[ref.task == "imagenet_classification"][["optimizer", "weight_decay", "norm_first", "norm_last",
                                                       "norm_change", "score"]]
    ref = ref.rename(columns={c: f"paper_{c}" for c in ("norm_first", "norm_last", "norm_change", "score")})
    ours = (df[df.table == "table1"].groupby(["optimizer", "weight_decay"], sort=False)
            .agg(status=("status", "first"), test_acc=("test_acc", "mean"), norm_first=("norm_first", "mean"),
                 norm_last=("norm_last", "mean"), norm_change=("norm_change", "mean"),
                 tensor_norm_first=("tensor_norm_first", "mean"), tensor_norm_last=("tensor_norm_last", "mean"))
            .reset_index())
    ours["norm_ratio"] = ours.norm_last / ours.norm_first
    ref = ref.assign(paper_norm_ratio=ref.paper_norm_last / ref.paper_norm_first)
    return ref.merge(ours, on=["optimizer", "weight_decay"], how="left")


def table2_beside_paper(df) -> "pd.DataFrame":  # noqa: F821
    """Table 2: one row per (architecture, optimizer): the paper's top-1 (mean of 3 seeds) and ours (seed
    mean), with the gain over the baseline (SGDP − SGD, AdamP − AdamW) for both."""
    ref = transcribed.table("adamp_table2")
    ref = ref.assign(model=[f"{m}+cutmix" if c else m for m, c in zip(ref.model, ref.cutmix)])
    ref = ref[["model", "optimizer", "top1"]].rename(columns={"top1": "paper_top1"})
    t2 = df[df.table == "table2"]
    ours = (t2.groupby(["model", "optimizer"], sort=False)
            .agg(status=("status", "first"), our_top1=("test_acc", "mean"), weight_decay=("weight_decay", "first"))
            .reset_index())
    out = ref.merge(ours, on=["model", "optimizer"], how="left")
    base = {"sgdp": "sgd", "adamp": "adamw"}
    for col in ("paper_top1", "our_top1"):
        idx = out.set_index(["model", "optimizer"])[col]
        out[col.replace("top1", "gain")] = [idx.get((m, base[o]), math.nan) if o in base else math.nan
                                           for m, o in zip(out.model, out.optimizer)]
        out[col.replace("top1", "gain")] = out[col] - out[col.replace("top1", "gain")]
    return out


def norm_curves(p: Plan, results: dict[str, dict]) -> "pd.DataFrame":  # noqa: F821
    """Long frame (run, optimizer, weight_decay, epoch, weight_norm, lr) of Table 1's runs, for the figure."""
    import pandas as pd

    rows = []
    for r in p.runs:
        if r.table != "table1" or not r.runnable or r.config.hash not in results:
            continue
        for h in results[r.config.hash].get("history", []):
            if "weight_norm" in h:
                rows.append(dict(run=f"{r.optimizer} wd={r.wd_paper:g}", optimizer=r.optimizer,
                                 weight_decay=r.wd_paper, seed=r.seed, epoch=h["epoch"],
                                 weight_norm=h["weight_norm"], lr=h["lr"]))
    return pd.DataFrame(rows)
