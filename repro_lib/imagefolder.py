"""Streaming ImageFolder data for the ImageNet-scale runs: Yun et al. 2022 Sec. 6 (EfficientNet-B0 on ImageNet,
Fig. 8) and Heo et al. 2021 (AdamP) Tables 1-2.

ImageNet (1.28M JPEGs) cannot live in memory as one uint8 tensor the way ``repro_lib.data`` holds CIFAR, so images
are decoded per sample by ``DataLoader`` workers:

* layout: ``<root>/<dataset>/<split>/<class>/*.JPEG`` (``.jpg``/``.jpeg``/``.png`` too), classes sorted by folder
  name (torchvision ``ImageFolder`` order). For ImageNet: ``<root>/imagenet/train/<wnid>/*.JPEG`` and
  ``<root>/imagenet/val/<wnid>/*.JPEG`` (the validation images sorted into wnid folders). The root is a
  parameter, else ``$REPRO_DATA_ROOT``, else ``./data`` (``repro_lib.data.data_root``).
* training transform (Yun et al. Sec. 6): ``RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3))`` +
  horizontal flip with probability 1/2, bilinear, exactly torchvision's sampling algorithm
  (``RandomResizedCrop.get_params``: 10 tries, then a centre crop clamped to the ratio range) but drawn from a
  ``random.Random`` seeded by ``(seed, epoch, image index)``: an image's crop in an epoch does not depend on
  the number of ranks, workers or on the batch it falls in, and a resumed run sees the same crops.
* evaluation transform: ``Resize(round(size / 0.875))`` (256 for 224) on the short side + ``CenterCrop(size)``.
* samples are uint8 C×H×W tensors (4× less inter-process traffic than float); normalization (ImageNet mean/std,
  or the dataset's own in ``repro_lib.data.DATASETS``) happens on the training device with
  ``repro_lib.data.normalize``.
* ``subset``: a seeded subset of ``n`` images, drawn either ``"uniform"`` (:func:`uniform_subset`: ``n`` images
  uniformly without replacement from the whole split, so class counts follow the split's class sizes in
  expectation; Yun et al. Sec. 6, paper line 366: "We first find the tuning factor with 80k randomly sampled
  data, which is 1/16 of the entire sample", the draw ``papers.yun2022.section6.section6_plan`` uses) or ``"balanced"``
  (``repro_lib.data.balanced_subset``: ``n // C`` per class; the default of :meth:`ImageFolderDataset.subset`,
  used for shrunk profiles of full-data experiments and for evaluation subsets).
* ``make_loader``: ``DistributedSampler`` per-rank shards for training (``set_epoch`` reshuffles; the global batch
  of ``B`` images is split into ``B / world_size`` per rank, see :func:`make_loader` for what makes a K-process
  run equal to a 1-process run) and a contiguous, unpadded shard per rank for evaluation.
"""
from __future__ import annotations

import itertools
import math
import os
import random
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler

from .data import _IMAGENET_MEAN, _IMAGENET_STD, DATASETS, DataNotFoundError, balanced_subset, data_root

IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
RRC_SCALE = (0.08, 1.0)  # Yun et al. Sec. 6: "resizing ratio between 0.08 and 1"
RRC_RATIO = (3 / 4, 4 / 3)  # "aspect ratio between 3/4 and 4/3"
EVAL_CROP_FRACTION = 0.875  # Resize(256) + CenterCrop(224)


def _missing(root: Path, dataset: str, detail: str) -> DataNotFoundError:
    return DataNotFoundError(
        f"image folder {dataset!r} not found under data root {str(root)!r}: {detail}.\n"
        f"Expected <root>/{dataset}/train/<class>/*.JPEG and <root>/{dataset}/<val split>/<class>/*.JPEG "
        f"(for ImageNet: <root>/imagenet/train/n01440764/*.JPEG, ... and the 50,000 validation images sorted into "
        f"the same wnid folders under <root>/imagenet/val/).\n"
        f"Set the notebook parameter data_root or the environment variable REPRO_DATA_ROOT to <root>.")


def split_dir(dataset: str, split: str, root=None) -> Path:
    """``<root>/<dataset>/<split>``, checked to exist (a ``DataNotFoundError`` saying what to put where)."""
    r = data_root(root)
    d = r / dataset / split
    if not d.is_dir():
        raise _missing(r, dataset, f"no folder {str(d)!r}")
    return d


def list_images(d: Path) -> tuple[list[str], torch.Tensor, list[str]]:
    """(files, labels, classes) of an ImageFolder split; classes = sorted sub-folder names, files sorted within
    each class (``os.scandir``: listing ImageNet's 1.28M files takes seconds, not minutes)."""
    classes = sorted(e.name for e in os.scandir(d) if e.is_dir())
    files, labels = [], []
    for c, name in enumerate(classes):
        fs = sorted(e.path for e in os.scandir(d / name) if e.name.lower().endswith(IMAGE_SUFFIXES))
        files += fs
        labels += [c] * len(fs)
    if not files:
        raise DataNotFoundError(f"no images found in {str(d)!r} (expected <class>/*.JPEG folders)")
    return files, torch.tensor(labels, dtype=torch.int64), classes


# ------------------------------------------------------------------------------------------------- transforms
def random_resized_crop_params(width: int, height: int, rng: random.Random, scale=RRC_SCALE,
                               ratio=RRC_RATIO) -> tuple[int, int, int, int]:
    """(top, left, h, w) of a random resized crop: torchvision's ``RandomResizedCrop.get_params`` algorithm,
    drawn from ``rng``. Area fraction ~ U(scale), log aspect ratio ~ U(log ratio); 10 tries, then the
    whole image clamped to the ratio range, centred."""
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def train_transform(img, size: int, rng: random.Random):
    """RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3)) + horizontal flip (p = 1/2) → uint8 tensor."""
    import torchvision.transforms.functional as TF
    from torchvision.transforms import InterpolationMode

    top, left, h, w = random_resized_crop_params(img.width, img.height, rng)
    img = TF.resized_crop(img, top, left, h, w, [size, size], interpolation=InterpolationMode.BILINEAR)
    if rng.random() < 0.5:
        img = TF.hflip(img)
    return TF.pil_to_tensor(img)


def eval_transform(img, size: int):
    """Resize(round(size / 0.875)) (short side, bilinear) + CenterCrop(size) → uint8 tensor."""
    import torchvision.transforms.functional as TF
    from torchvision.transforms import InterpolationMode

    img = TF.resize(img, round(size / EVAL_CROP_FRACTION), interpolation=InterpolationMode.BILINEAR)
    return TF.pil_to_tensor(TF.center_crop(img, [size, size]))


# ------------------------------------------------------------------------------------------------- dataset
SUBSET_DRAWS = ("uniform", "balanced")


def uniform_subset(num: int, n: int, seed: int) -> torch.Tensor:
    """Sorted positions of ``n`` of ``num`` items drawn uniformly without replacement, seeded (depends only on
    ``num``, ``n``, ``seed``): the "80k randomly sampled data" of Yun et al. Sec. 6 (paper line 366)."""
    if not 0 < n <= num:
        raise ValueError(f"n: must be in [1, {num}], got {n}")
    g = torch.Generator().manual_seed(10_007 * seed + 29)
    return torch.randperm(num, generator=g)[:n].sort().values


class ImageFolderDataset(Dataset):
    """One split of an ImageFolder, decoded per sample. Item ``k`` is ``(uint8 C×H×W, label, index)`` where
    ``index`` is the image's position in the full (un-subsetted) split (used to seed its augmentation and to
    check sharding). ``subset(n, seed, draw)`` keeps a seeded uniform or class-balanced subset."""

    def __init__(self, dataset: str = "imagenet", split: str = "train", root=None, image_size: int = 224,
                 train: bool = True, seed: int = 0):
        self.dataset, self.split, self.image_size, self.train, self.seed = dataset, split, image_size, train, seed
        self.dir = split_dir(dataset, split, root)
        self.files, self.labels, self.classes = list_images(self.dir)
        self.indices = torch.arange(len(self.files))
        self.epoch = 0
        info = DATASETS.get(dataset)
        self.mean, self.std = (info.mean, info.std) if info else (_IMAGENET_MEAN, _IMAGENET_STD)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def name(self) -> str:
        return f"{self.dataset}/{self.split}"

    def subset(self, n: int, seed: int, draw: str = "balanced") -> "ImageFolderDataset":
        """Keep ``n`` seeded images; ``n = 0`` or ``n >= len`` keeps everything. ``draw``: ``"balanced"``
        (``repro_lib.data.balanced_subset``, ``n // C`` per class) or ``"uniform"`` (:func:`uniform_subset`,
        Yun et al. Sec. 6's "randomly sampled" subset)."""
        if draw not in SUBSET_DRAWS:
            raise ValueError(f"subset_draw: must be one of {SUBSET_DRAWS}, got {draw!r}")
        if n and n < len(self.indices):
            pick = (balanced_subset(self.labels[self.indices], n, seed) if draw == "balanced"
                    else uniform_subset(len(self.indices), n, seed))
            self.indices = self.indices[pick]
        return self

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch's augmentation draws. DataLoader workers are started per epoch
        (``persistent_workers=False``), so they see the value set before ``iter(loader)``."""
        self.epoch = epoch

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, k: int):
        from PIL import Image

        i = int(self.indices[k])
        with Image.open(self.files[i]) as im:
            img = im.convert("RGB")
        if self.train:
            rng = random.Random((self.seed * 1_000_003 + self.epoch) * 10_000_019 + i)
            x = train_transform(img, self.image_size, rng)
        else:
            x = eval_transform(img, self.image_size)
        return x, int(self.labels[i]), i


class ShardSampler(Sampler):
    """Evaluation shard: rank ``r`` of ``w`` gets positions ``r, r + w, r + 2w, …`` — disjoint, covering, no
    padding (so summed metrics over ranks count every image exactly once)."""

    def __init__(self, n: int, rank: int = 0, world_size: int = 1):
        self.n, self.rank, self.world_size = n, rank, world_size

    def __iter__(self):
        return iter(range(self.rank, self.n, self.world_size))

    def __len__(self):
        return len(range(self.rank, self.n, self.world_size))


class _SkipFirst(Sampler):
    """The positions of ``sampler`` after its first ``n`` (the rest of a partly done epoch)."""

    def __init__(self, sampler, n: int):
        self.sampler, self.n = sampler, n

    def __iter__(self):
        return itertools.islice(iter(self.sampler), self.n, None)

    def __len__(self):
        return max(len(self.sampler) - self.n, 0)


def _data_loader(ds, sampler, batch_size: int, num_workers: int, pin_memory: bool) -> DataLoader:
    return DataLoader(ds, batch_size=batch_size, sampler=sampler, num_workers=num_workers, pin_memory=pin_memory,
                      drop_last=False, persistent_workers=False, prefetch_factor=4 if num_workers else None)


@dataclass
class Loader:
    """A DataLoader plus what the training loop needs from it."""

    loader: DataLoader
    dataset: ImageFolderDataset
    sampler: Sampler

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
        self.dataset.set_epoch(epoch)

    def __iter__(self):
        return iter(self.loader)

    def batches_from(self, skip: int):
        """The current epoch's batches (``set_epoch`` first) from its ``skip``-th on: the same loader settings over
        the rest of the sampler's order, the skipped images never decoded (a run resumed mid-epoch)."""
        if not skip:
            return iter(self.loader)
        dl = self.loader
        return iter(_data_loader(self.dataset, _SkipFirst(self.sampler, skip * dl.batch_size), dl.batch_size,
                                 dl.num_workers, dl.pin_memory))

    def __len__(self):
        return len(self.loader)


def make_loader(ds: ImageFolderDataset, batch_size: int, rank: int = 0, world_size: int = 1, seed: int = 0,
                num_workers: int = 0, pin_memory: bool = False) -> Loader:
    """The per-rank loader; ``batch_size`` is the per-rank batch (global batch / world_size).

    Training (``ds.train``): ``DistributedSampler(shuffle=True, seed=seed, drop_last=False)``: one permutation of
    the subset per epoch (seeded by seed + epoch, identical on every rank), rank ``r`` takes positions
    ``r, r + w, …``. Hence the union over ranks of the k-th per-rank batches is positions ``[kB, (k+1)B)`` of the
    permutation: **the global batches are those of a 1-process run with batch B**, and since each rank's loss is
    its batch mean and DDP averages gradients, the update is the 1-process update whenever the per-rank batches
    are equal in size and the model has no cross-sample coupling inside a rank that differs between the two
    (BatchNorm statistics are per rank: B/w images per BN batch; GroupNorm/LayerNorm models are exact). When the
    subset size is not a multiple of ``w``, ``DistributedSampler`` pads with the first images of the permutation
    (a few duplicates per epoch) and the last step's per-rank batches can differ by one image.
    Evaluation: :class:`ShardSampler`, in order, no padding.
    """
    if ds.train:
        sampler = DistributedSampler(ds, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                     drop_last=False)
    else:
        sampler = ShardSampler(len(ds), rank, world_size)
    return Loader(_data_loader(ds, sampler, batch_size, num_workers, pin_memory), ds, sampler)


# ------------------------------------------------------------------------------------------------- synthetic
def write_synthetic_imagefolder(root, name: str = "synthetic-imagefolder", num_classes: int = 4,
                                per_class: int = 8, val_per_class: int = 4, size: int = 32, seed: int = 0) -> Path:
    """Write a small learnable ImageFolder of JPEGs: ``<root>/<name>/{train,val}/c<k>/<i>.JPEG``; each class is a
    fixed smooth colour pattern plus noise (the smoke stand-in for ImageNet; named ``synthetic-…`` so it is never
    mistaken for real data). Existing files are kept (idempotent). Returns ``<root>/<name>``."""
    import numpy as np
    from PIL import Image

    base = Path(root) / name
    g = torch.Generator().manual_seed(1234 + seed)
    low = torch.rand(num_classes, 3, 4, 4, generator=g)
    protos = torch.nn.functional.interpolate(low, size=(size, size), mode="bilinear", align_corners=False)
    for split, count in (("train", per_class), ("val", val_per_class)):
        for c in range(num_classes):
            d = base / split / f"c{c:04d}"
            d.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                f = d / f"{split}_{c:04d}_{i:05d}.JPEG"
                if f.exists():
                    continue
                x = protos[c] + 0.3 * torch.randn(3, size, size, generator=g)
                arr = (x.clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).numpy()
                Image.fromarray(np.ascontiguousarray(arr)).save(f, quality=95)
    return base
