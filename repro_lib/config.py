"""One training run, described by one frozen dataclass.

``RunConfig`` names every hyperparameter that can change a result, validates itself on construction (a
``ValueError`` naming the parameter, before any data is loaded) and has a stable content hash that keys the
results store. ``ImageFolderConfig`` (at the end) does the same for the ImageNet-scale runs of
``repro_lib.distributed``.

Conventions that silently change results are explicit fields:

* ``weight_decay_mode="coupled"``: L2 added to the gradient before momentum, exactly ``torch.optim.SGD``'s
  ``weight_decay`` (the convention of Yun et al. 2022 and Li & Arora 2020). ``"decoupled"``: the weight is
  shrunk by ``lr * weight_decay`` outside the momentum (AdamW / SGDP style; the optimizer documents its form).
* momentum is PyTorch's form ``v <- mu v + g; x <- x - lr v`` (Sutskever et al.), not ``v <- mu v + lr g``;
  with a fixed LR the two are identical, they differ only at an LR change.
* ``drop_last`` is False: the last partial batch of an epoch is used (Sec. 4 of Yun et al. counts
  ``ceil(N/B)`` steps per epoch only approximately; the paper's tables include B = 2048 with N = 3125), except a
  last batch of a single image (``N mod B == 1``, e.g. Table 5's N = 3125 at B = 2 and 4), which batch norm cannot
  normalize: it is dropped, ``floor(N/B)`` steps over N - 1 images (``data.train_steps``).
* ``ghost_batch``: ghost-batch-norm chunk size of the scale-invariant models (64 in Yun et al. Sec. 3.1).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, ClassVar, Mapping

PROFILES = ("smoke", "cpu", "gpu", "paper")
WEIGHT_DECAY_MODES = ("coupled", "decoupled")
DEVICES = ("auto", "cpu", "cuda")
# Fields that do not change what is computed (where and how it is shown); excluded from the hash.
_NOT_HASHED = ("device", "profile", "eval_every", "channels_last", "cudnn_benchmark", "compile", "cuda_graphs",
               "checkpoint_every_s")
PRECISIONS = ("fp32", "bf16")
#: Version of the training numerics, part of every run hash. Bump it in any change that alters what a run computes
#: (the training arithmetic, data order, augmentation, evaluation) without changing a config field: every stored
#: run then has a hash the current code no longer asks for, so a published store (``reports/``) that was not
#: re-run is visibly stale (``tests/test_reports.py``) instead of silently describing other code.
RESULTS_VERSION = 1


def _freeze(d: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(sorted((d or {}).items())))


class ConfigBase:
    """What every run description shares (``RunConfig`` and ``ImageFolderConfig``): frozen mappings,
    a type check of every field that names it, ``to_dict``/``from_dict``/``replace`` that reject unknown names,
    and a stable content hash over the fields that change the computation."""

    _NOT_HASHED: ClassVar[tuple] = _NOT_HASHED
    _HASH_KIND: ClassVar[str | None] = None  # mixed into the hash so different config kinds never collide
    # fields added after results were stored: hashed only when they differ from their default, so every hash
    # stored before they existed stays valid
    _HASHED_IF_SET: ClassVar[tuple] = ()

    def _freeze_and_check_types(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type == "Mapping[str, Any]" and isinstance(v, Mapping):
                object.__setattr__(self, f.name, _freeze(v))
                continue
            ok = {
                "str": isinstance(v, str),
                "bool": isinstance(v, bool),
                "int": isinstance(v, int) and not isinstance(v, bool),
                "float": isinstance(v, (int, float)) and not isinstance(v, bool),
                "Mapping[str, Any]": False,
            }[f.type]
            if not ok:
                raise ValueError(f"{f.name}: expected {f.type}, got {type(v).__name__} {v!r}")
            if f.type == "float" and not isinstance(v, float):  # lr=1 and lr=1.0 are one run: one hash
                object.__setattr__(self, f.name, float(v))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (dict(v) if isinstance(v, Mapping) else v)
                for f in fields(self) for v in [getattr(self, f.name)]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]):
        """Build from a mapping; an unknown key is a ``ValueError`` naming it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown parameter (known: {sorted(known)})")
        return cls(**d)

    def replace(self, **changes):
        known = {f.name for f in fields(self)}
        for k in changes:
            if k not in known:
                raise ValueError(f"{k}: unknown parameter (known: {sorted(known)})")
        return dataclasses.replace(self, **changes)

    @property
    def hash(self) -> str:
        """Stable content hash (16 hex) over every field that changes the computation and ``RESULTS_VERSION``."""
        defaults = {f.name: f.default for f in fields(self)}
        d = {k: v for k, v in self.to_dict().items() if k not in self._NOT_HASHED
             and not (k in self._HASHED_IF_SET and v == defaults[k])}
        if self._HASH_KIND is not None:
            d = {"kind": self._HASH_KIND, **d}
        d["results_version"] = RESULTS_VERSION
        blob = json.dumps(d, sort_keys=True, default=repr, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunConfig(ConfigBase):
    """Everything that defines one training run. Units: lr per step, weight_decay per step, epochs."""

    model: str = "resnet18"  # registered model name (repro_lib.models.list_models())
    scale_invariant: bool = True  # build the scale-invariant variant of the model
    width: int = 64  # base width (64 = the paper's ResNet-18)
    dataset: str = "cifar10"  # repro_lib.data.DATASETS
    synthetic: bool = False  # synthetic images of the dataset's shape (smoke profile)
    n: int = 50000  # training samples (class-balanced seeded subset when < dataset size)
    n_test: int = 0  # test samples used for evaluation (0 = full test set)
    batch_size: int = 128
    lr: float = 0.1
    weight_decay: float = 1e-4
    weight_decay_mode: str = "coupled"
    momentum: float = 0.9
    nesterov: bool = False
    optimizer: str = "sgd"  # repro_lib.optim registry
    optimizer_kwargs: Mapping[str, Any] = field(default_factory=dict)
    schedule: str = "step"  # repro_lib.schedules registry
    schedule_kwargs: Mapping[str, Any] = field(default_factory=dict)
    num_epochs: int = 300
    ghost_batch: int = 64
    augment: bool = True  # random crop (4-px zero padding) + horizontal flip
    seed: int = 0
    device: str = "auto"
    profile: str = "paper"
    eval_every: int = 1  # evaluate every k epochs (and always at the last); 0 = auto, see ``eval_interval``
    # GPU fast path. Same optimization; only ``precision`` changes the arithmetic, and it is hashed.
    precision: str = "fp32"  # "bf16": autocast forward/loss in bfloat16, fp32 master weights, fp32 optimizer math
    channels_last: bool = True  # CUDA only: NHWC model and batches (ignored on CPU)
    cudnn_benchmark: bool = True  # CUDA only: torch.backends.cudnn.benchmark
    compile: bool = False  # torch.compile the forward pass (pays off only for long runs)
    cuda_graphs: bool = False  # static-shape step: forward+backward captured once as a CUDA graph (train.StaticStep)
    checkpoint_every_s: float = 0.0  # write the resume checkpoint at most this often (0 = every epoch)

    _HASHED_IF_SET: ClassVar[tuple] = ("precision",)

    def __post_init__(self):
        self._freeze_and_check_types()
        self._validate()

    def _validate(self):
        for name in ("lr", "batch_size", "num_epochs", "n", "width", "ghost_batch"):
            v = getattr(self, name)
            if not (v > 0 and math.isfinite(v)):
                raise ValueError(f"{name}: must be positive, got {v!r}")
        if self.weight_decay < 0 or not math.isfinite(self.weight_decay):
            raise ValueError(f"weight_decay: must be >= 0, got {self.weight_decay!r}")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"momentum: must be in [0, 1), got {self.momentum!r}")
        if self.eval_every < 0:
            raise ValueError(f"eval_every: must be >= 0 (0 = auto), got {self.eval_every!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision: must be one of {PRECISIONS}, got {self.precision!r}")
        if self.cuda_graphs and self.compile:
            raise ValueError("cuda_graphs: not together with compile=True (choose one; see train.StaticStep)")
        if self.checkpoint_every_s < 0 or not math.isfinite(self.checkpoint_every_s):
            raise ValueError(f"checkpoint_every_s: must be >= 0, got {self.checkpoint_every_s!r}")
        if self.n_test < 0:
            raise ValueError(f"n_test: must be >= 0, got {self.n_test!r}")
        if self.batch_size > self.n:
            raise ValueError(f"batch_size: {self.batch_size} is larger than n={self.n}")
        if self.weight_decay_mode not in WEIGHT_DECAY_MODES:
            raise ValueError(f"weight_decay_mode: must be one of {WEIGHT_DECAY_MODES}, got {self.weight_decay_mode!r}")
        if self.device not in DEVICES:
            raise ValueError(f"device: must be one of {DEVICES}, got {self.device!r}")
        if self.profile not in PROFILES:
            raise ValueError(f"profile: must be one of {PROFILES}, got {self.profile!r}")
        # Registries are imported lazily: config must stay importable without torch-heavy modules.
        from . import data, models, optim, schedules

        if self.model not in models.list_models():
            raise ValueError(f"model: unknown model {self.model!r}; known: {models.list_models()}")
        if self.dataset not in data.DATASETS:
            raise ValueError(f"dataset: unknown dataset {self.dataset!r}; known: {sorted(data.DATASETS)}")
        if not self.synthetic and self.n > data.DATASETS[self.dataset].n_train:
            raise ValueError(f"n: {self.n} exceeds the {data.DATASETS[self.dataset].n_train} training images of {self.dataset}")
        if self.optimizer not in optim.list_optimizers():
            raise ValueError(f"optimizer: unknown optimizer {self.optimizer!r}; known: {optim.list_optimizers()}")
        if self.schedule not in schedules.list_schedules():
            raise ValueError(f"schedule: unknown schedule {self.schedule!r}; known: {schedules.list_schedules()}")
        schedules.build_schedule(self, 1)  # schedule_kwargs (unknown keys, milestones) fail here, not mid-sweep
        _check_optimizer(self)

    def eval_interval(self, n_train: int, n_test: int) -> int:
        """Epochs between test evaluations. ``eval_every = 0`` (auto, the gpu/paper profiles): every
        ``ceil(n_test / n_train)`` epochs, so that evaluating (a forward pass over ``n_test`` images) costs at
        most about a third of the training in between (forward + backward over ``n_train`` images per epoch) --
        at N = 3125 with the 10k CIFAR test set that is every 4th epoch instead of a 3x-the-training-set pass
        per epoch. The last epoch is always evaluated (the tables report final test accuracy)."""
        return self.eval_every or max(1, math.ceil(n_test / n_train))

    @property
    def tuning_factor(self) -> float:
        """N·η·λ / (B·(1−μ)) (Eq. 27 of Yun et al. 2022)."""
        return self.n * self.lr * self.weight_decay / (self.batch_size * (1 - self.momentum))


def _check_optimizer(cfg) -> None:
    """Build ``cfg``'s optimizer on a tiny conv + BN + linear net, so that an option the optimizer rejects
    (``optimizer_kwargs`` typos, Nesterov without momentum, a weight-decay mode it does not implement) fails when
    the config is made -- before a sweep trains its first cell -- with the field named."""
    import torch.nn as nn

    from . import optim

    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(4, 2))
    try:
        optim.build_optimizer(cfg, net)
    except ValueError as e:
        if str(e).split(":")[0] in {f.name for f in fields(cfg)}:
            raise  # already names its field
        raise ValueError(f"optimizer: {cfg.optimizer!r} rejects this config ({e})") from e


@dataclass(frozen=True)
class ImageFolderConfig(ConfigBase):
    """One ImageFolder training run. Defaults: Yun et al. 2022 Sec. 6 (EfficientNet-B0, ImageNet, SGDM B = 512,
    η = 0.1, μ = 0.9, 200 epochs, LR ÷10 at epochs 100/150/180). Field names match ``RunConfig`` where they mean
    the same thing, so ``repro_lib.optim.build_optimizer`` and ``repro_lib.schedules.build_schedule`` take it."""

    model: str = "efficientnet_b0"  # registered model name
    dataset: str = "imagenet"  # folder under the data root: <root>/<dataset>/{train,<val_split>}/<class>/*, or a
    # repro_lib.data dataset held in memory (cifar10, cifar100, tiny_imagenet: TensorImageDataset)
    val_split: str = "val"  # evaluation split folder ("val" for ImageNet, "test" for CIFAR and its JPEG mirror)
    image_size: int = 224  # training crop / evaluation centre crop
    n: int = 0  # seeded training subset of n images, drawn as subset_draw says (0 = every training image)
    subset_draw: str = "balanced"  # "uniform" (Yun et al. Sec. 6: "randomly sampled") | "balanced" (n // C per class)
    n_val: int = 0  # class-balanced evaluation subset (0 = the whole split)
    batch_size: int = 512  # GLOBAL batch (per rank: batch_size / world_size)
    lr: float = 0.1
    weight_decay: float = 1e-4
    weight_decay_mode: str = "coupled"
    momentum: float = 0.9
    nesterov: bool = False
    optimizer: str = "sgd"
    optimizer_kwargs: Mapping[str, Any] = field(default_factory=dict)
    schedule: str = "step"
    schedule_kwargs: Mapping[str, Any] = field(default_factory=lambda: {"milestones": [0.5, 0.75, 0.9]})
    num_epochs: int = 200
    label_smoothing: float = 0.0
    cutmix_prob: float = 0.0  # CutMix (Yun et al. 2019) probability per batch; AdamP Table 2 ResNet-50 + CutMix: 1.0
    cutmix_beta: float = 1.0  # λ ~ Beta(β, β)
    world_size: int = 1  # processes (GPUs) the run is trained on; checked against torchrun's WORLD_SIZE at launch
    sync_bn: bool = False  # SyncBatchNorm across ranks (CUDA only)
    amp: bool = False  # bf16 autocast on CUDA (not in the paper; off by default)
    seed: int = 0
    num_workers: int = 8  # DataLoader decoding workers per rank
    device: str = "auto"
    profile: str = "paper"
    eval_every: int = 1

    _NOT_HASHED: ClassVar[tuple] = ("device", "profile", "eval_every", "num_workers")
    _HASH_KIND: ClassVar[str] = "imagefolder"
    # added after runs were stored: hashed when not at their default, so earlier (1-process, balanced) hashes hold
    _HASHED_IF_SET: ClassVar[tuple] = ("subset_draw", "world_size")

    def __post_init__(self):
        self._freeze_and_check_types()
        self._validate()

    def _validate(self):
        for name in ("lr", "batch_size", "num_epochs", "image_size", "eval_every", "world_size"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: must be positive, got {getattr(self, name)!r}")
        for name in ("n", "n_val", "num_workers"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)!r}")
        if self.weight_decay < 0 or not math.isfinite(self.weight_decay):
            raise ValueError(f"weight_decay: must be >= 0, got {self.weight_decay!r}")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"momentum: must be in [0, 1), got {self.momentum!r}")
        if not 0 <= self.cutmix_prob <= 1:
            raise ValueError(f"cutmix_prob: must be in [0, 1], got {self.cutmix_prob!r}")
        if not self.cutmix_beta > 0:
            raise ValueError(f"cutmix_beta: must be positive, got {self.cutmix_beta!r}")
        if not 0 <= self.label_smoothing < 1:
            raise ValueError(f"label_smoothing: must be in [0, 1), got {self.label_smoothing!r}")
        if self.batch_size % self.world_size:
            raise ValueError(f"batch_size: {self.batch_size} is not divisible by world_size={self.world_size} "
                             f"(batch_size is the global batch, split evenly over the processes)")
        from .imagefolder import SUBSET_DRAWS

        if self.subset_draw not in SUBSET_DRAWS:
            raise ValueError(f"subset_draw: must be one of {SUBSET_DRAWS}, got {self.subset_draw!r}")
        if self.n and self.batch_size > self.n:
            raise ValueError(f"batch_size: {self.batch_size} is larger than n={self.n}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device: must be auto, cpu or cuda, got {self.device!r}")
        if self.profile not in PROFILES:
            raise ValueError(f"profile: must be one of {PROFILES}, got {self.profile!r}")
        from . import models, optim, schedules
        from .models import timm_models  # noqa: F401  (registers the timm models)

        if self.model not in models.list_models():
            raise ValueError(f"model: unknown model {self.model!r}; known: {models.list_models()}")
        if self.optimizer not in optim.list_optimizers():
            raise ValueError(f"optimizer: unknown optimizer {self.optimizer!r}; known: {optim.list_optimizers()}")
        if self.schedule not in schedules.list_schedules():
            raise ValueError(f"schedule: unknown schedule {self.schedule!r}; known: {schedules.list_schedules()}")

    def tuning_factor(self, n: int) -> float:
        """N·η·λ/(B(1−μ)) (Yun et al. Eq. 27) for N = ``n`` training images (the subset size actually used)."""
        from .angular import tuning_factor

        return tuning_factor(n, self.batch_size, self.lr, self.weight_decay, self.momentum)
