"""Datasets as uint8 tensors, class-balanced subsets, and on-device batched augmentation.

Everything the training loop sees comes from tensors that live on the training device:

* ``load_split(name, split, root)`` returns an :class:`ImageTensors` (``x`` uint8 N×C×H×W, ``y`` int64).
  CIFAR-10/100 come from torchvision (``download=True`` is the real download path), folder datasets (any root of
  ``<class>/*.jpg`` folders, e.g. the CIFAR-10 JPEG mirror; Tiny ImageNet in its official layout) are decoded
  once and cached as a uint8 tensor file so a second load takes well under a second.
* ``synthetic=True`` gives a deterministic, learnable stand-in with the same shape and class count, labelled
  ``synthetic`` everywhere it is shown (``ImageTensors.name`` starts with ``synthetic-``).
* ``balanced_subset(y, n, seed)``: seeded, class-balanced subset; the same for every run sharing (n, seed).
* ``TensorBatches``: per-epoch ``torch.randperm`` shuffling, per-image random crop from a 4-pixel zero padding
  of the *unnormalized* image (torchvision ``RandomCrop(32, padding=4)``) and horizontal flip as batched tensor
  ops, then normalization; ``drop_last=False`` (the last partial batch is used).

The data root is a parameter, else ``$REPRO_DATA_ROOT``, else ``./data``. This module knows no global path.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import torch

_CIFAR10_MEAN, _CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
_CIFAR100_MEAN, _CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)
_IMAGENET_MEAN, _IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class DatasetInfo:
    """Static facts about a dataset. ``kind``: how it is read (torchvision / folder / tinyimagenet)."""

    name: str
    kind: str
    num_classes: int
    image_size: int
    n_train: int
    n_test: int
    mean: tuple
    std: tuple
    folder: str  # directory under the data root
    splits: tuple = ("train", "test")  # folder names of the train and test splits
    help: str = ""


DATASETS: dict[str, DatasetInfo] = {
    "cifar10": DatasetInfo("cifar10", "torchvision", 10, 32, 50000, 10000, _CIFAR10_MEAN, _CIFAR10_STD, "",
                           help="torchvision CIFAR10: <root>/cifar-10-batches-py/ (the 'python version' "
                                "archive cifar-10-python.tar.gz, extracted), or run with download=True"),
    "cifar100": DatasetInfo("cifar100", "torchvision", 100, 32, 50000, 10000, _CIFAR100_MEAN, _CIFAR100_STD, "",
                            help="torchvision CIFAR100: <root>/cifar-100-python/ (cifar-100-python.tar.gz, "
                                 "extracted), or run with download=True"),
    "cifar10-jpeg": DatasetInfo("cifar10-jpeg", "folder", 10, 32, 50000, 10000, _CIFAR10_MEAN, _CIFAR10_STD,
                                "cifar10-jpeg",
                                help="<root>/cifar10-jpeg/{train,test}/<class>/*.jpg: CIFAR-10 re-encoded as JPEG "
                                     "(pixel values differ from CIFAR-10: accuracies are not CIFAR-10 numbers)"),
    # Tiny ImageNet (Yun et al. Table 9): *choices*, the paper says only "padding, random crops and left-right
    # flips": ImageNet mean/std normalization, and the same 4-px crop padding as CIFAR (train.py's pad=4).
    "tiny_imagenet": DatasetInfo("tiny_imagenet", "tiny_imagenet", 200, 64, 100000, 10000, _IMAGENET_MEAN,
                                _IMAGENET_STD, "tiny-imagenet-200", ("train", "val"),
                                help="<root>/tiny-imagenet-200/ as unpacked from tiny-imagenet-200.zip: "
                                     "wnids.txt, train/<wnid>/images/*.JPEG, val/images/*.JPEG and "
                                     "val/val_annotations.txt"),
}


@dataclass
class ImageTensors:
    """Images as uint8 N×C×H×W, labels int64; ``name`` says what they are (``synthetic-…`` for stand-ins)."""

    x: torch.Tensor
    y: torch.Tensor
    name: str
    num_classes: int
    mean: tuple
    std: tuple

    def __len__(self):
        return len(self.y)

    def subset(self, idx: torch.Tensor) -> "ImageTensors":
        return ImageTensors(self.x[idx], self.y[idx], self.name, self.num_classes, self.mean, self.std)

    def to(self, device) -> "ImageTensors":
        return ImageTensors(self.x.to(device), self.y.to(device), self.name, self.num_classes, self.mean, self.std)

    @property
    def synthetic(self) -> bool:
        return self.name.startswith("synthetic-")


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The data root: the argument if given (non-empty), else ``$REPRO_DATA_ROOT``, else ``./data``."""
    return Path(root or os.environ.get("REPRO_DATA_ROOT") or "data").expanduser()


def cache_dir() -> Path:
    """Where decoded folder datasets are cached: ``$REPRO_CACHE_DIR`` or ``~/.cache/repro_lib``."""
    return Path(os.environ.get("REPRO_CACHE_DIR") or Path.home() / ".cache" / "repro_lib")


class DataNotFoundError(FileNotFoundError):
    pass


def _missing(info: DatasetInfo, root: Path, detail: str = "") -> DataNotFoundError:
    return DataNotFoundError(
        f"dataset {info.name!r} not found under data root {str(root)!r}{': ' + detail if detail else ''}.\n"
        f"Expected: {info.help}.\nSet the notebook parameter data_root or the environment variable "
        f"REPRO_DATA_ROOT to the folder that holds it.")


# ---------------------------------------------------------------------------------------------- loading
def load_split(name: str, split: str, root=None, download: bool = False, synthetic: bool = False,
               synthetic_n: int | None = None) -> ImageTensors:
    """Load one split (``"train"`` or ``"test"``) of a dataset as uint8 tensors (CPU)."""
    if name not in DATASETS:
        raise ValueError(f"dataset: unknown dataset {name!r}; known: {sorted(DATASETS)}")
    if split not in ("train", "test"):
        raise ValueError(f"split: must be 'train' or 'test', got {split!r}")
    info = DATASETS[name]
    if synthetic:
        n = synthetic_n or (info.n_train if split == "train" else info.n_test)
        return synthetic_split(info, split, n)
    root = data_root(root)
    if info.kind == "torchvision":
        x, y = _load_torchvision(info, split, root, download)
    elif info.kind == "folder":
        x, y = _cached(info, split, root, lambda: _decode_folder(_split_dir(info, split, root)))
    elif info.kind == "tiny_imagenet":
        x, y = _cached(info, split, root, lambda: _decode_tinyimagenet(info, split, root))
    else:  # pragma: no cover
        raise AssertionError(info.kind)
    return ImageTensors(x, y, name, info.num_classes, info.mean, info.std)


def _load_torchvision(info: DatasetInfo, split: str, root: Path, download: bool):
    import torchvision

    cls = {"cifar10": torchvision.datasets.CIFAR10, "cifar100": torchvision.datasets.CIFAR100}[info.name]
    try:
        ds = cls(str(root), train=(split == "train"), download=download)
    except RuntimeError as e:  # torchvision: "Dataset not found or corrupted"
        raise _missing(info, root, str(e)) from None
    except OSError as e:  # offline download
        raise _missing(info, root, f"download failed ({e})") from None
    x = torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous()
    y = torch.tensor(ds.targets, dtype=torch.int64)
    return x, y


def _split_dir(info: DatasetInfo, split: str, root: Path) -> Path:
    d = root / info.folder / info.splits[0 if split == "train" else 1]
    if not d.is_dir():
        raise _missing(info, root, f"no folder {str(d)!r}")
    return d


def _list_folder(d: Path):
    classes = sorted(p.name for p in d.iterdir() if p.is_dir())
    files, labels = [], []
    for c, cls in enumerate(classes):
        fs = sorted(f for f in (d / cls).iterdir() if f.suffix.lower() in (".jpg", ".jpeg", ".png"))
        files += fs
        labels += [c] * len(fs)
    return files, labels


def _decode_folder(d: Path):
    files, labels = _list_folder(d)
    if not files:
        raise DataNotFoundError(f"no images found in {str(d)!r} (expected <class>/*.jpg folders)")
    return _decode_files(files), torch.tensor(labels, dtype=torch.int64)


def _decode_tinyimagenet(info: DatasetInfo, split: str, root: Path):
    """Official Tiny ImageNet layout: class ids in ``wnids.txt``; train/<wnid>/images/*.JPEG; the validation
    split (our test split) is val/images/*.JPEG labelled by val/val_annotations.txt (file, wnid, box)."""
    base = root / info.folder
    if not (base / "wnids.txt").is_file():
        raise _missing(info, root, f"no file {str(base / 'wnids.txt')!r}")
    wnids = sorted((base / "wnids.txt").read_text().split())
    index = {w: i for i, w in enumerate(wnids)}
    files, labels = [], []
    if split == "train":
        for w in wnids:
            fs = sorted((base / "train" / w / "images").glob("*.JPEG"))
            files += fs
            labels += [index[w]] * len(fs)
    else:
        for line in (base / "val" / "val_annotations.txt").read_text().splitlines():
            parts = line.split("\t")
            if len(parts) >= 2:
                files.append(base / "val" / "images" / parts[0])
                labels.append(index[parts[1]])
    if not files:
        raise _missing(info, root, f"no images for split {split!r}")
    return _decode_files(files), torch.tensor(labels, dtype=torch.int64)


def _decode_one(path) -> "np.ndarray":  # noqa: F821
    import numpy as np
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8)


def _decode_files(files) -> torch.Tensor:
    """Decode image files to one uint8 N×3×H×W tensor (a process pool: decoding is the slow part)."""
    import numpy as np
    from concurrent.futures import ProcessPoolExecutor

    workers = max(1, min(8, os.cpu_count() or 1))
    if workers > 1 and len(files) > 2000:
        with ProcessPoolExecutor(workers) as ex:
            arrs = list(ex.map(_decode_one, files, chunksize=512))
    else:
        arrs = [_decode_one(f) for f in files]
    return torch.from_numpy(np.stack(arrs)).permute(0, 3, 1, 2).contiguous()


def _cached(info: DatasetInfo, split: str, root: Path, decode):
    """Decode once, then load the uint8 tensors from ``cache_dir()`` (keyed by the resolved folder path)."""
    key = hashlib.sha256(f"{root.resolve()}|{info.name}|{split}".encode()).hexdigest()[:12]
    path = cache_dir() / f"{info.name}-{split}-{key}.pt"
    if path.is_file():
        d = torch.load(path, weights_only=True)
        return d["x"], d["y"]
    x, y = decode()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save({"x": x, "y": y}, tmp)
    os.replace(tmp, path)
    return x, y


def synthetic_split(info: DatasetInfo, split: str, n: int) -> ImageTensors:
    """Deterministic, learnable synthetic images with the dataset's shape and class count.

    Each class has a fixed smooth colour pattern (seeded by the class index); an image is its class pattern,
    shifted by a random offset, plus noise. Train and test images are drawn from disjoint seeds. Labelled
    ``synthetic-<name>`` so they are never mistaken for real data.
    """
    c, s = info.num_classes, info.image_size
    g = torch.Generator().manual_seed(1234)
    low = torch.rand(c, 3, 4, 4, generator=g)
    protos = torch.nn.functional.interpolate(low, size=(s, s), mode="bilinear", align_corners=False)
    g = torch.Generator().manual_seed(1 if split == "train" else 2)
    y = torch.arange(n) % c
    y = y[torch.randperm(n, generator=g)]
    shift = torch.randint(-3, 4, (2,), generator=g).tolist()
    x = torch.roll(protos[y], shifts=shift, dims=(2, 3))
    x = x + 0.35 * torch.randn(n, 3, s, s, generator=g)
    x = (x.clamp(0, 1) * 255).round().to(torch.uint8)
    return ImageTensors(x, y.to(torch.int64), f"synthetic-{info.name}", c, info.mean, info.std)


# ---------------------------------------------------------------------------------------------- subsets
def balanced_subset(y: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """Sorted indices of a seeded class-balanced subset of size ``n``: ``n // C`` per class, the remainder
    ``n % C`` going one each to the lowest class indices. Depends only on (labels, n, seed)."""
    classes = int(y.max()) + 1
    g = torch.Generator().manual_seed(10_007 * seed + 17)
    picks = []
    for c in range(classes):
        k = n // classes + (1 if c < n % classes else 0)
        members = (y == c).nonzero().flatten()
        if k > len(members):
            raise ValueError(f"n: {n} needs {k} images of class {c}, only {len(members)} available")
        picks.append(members[torch.randperm(len(members), generator=g)[:k]])
    return torch.cat(picks).sort().values


# ---------------------------------------------------------------------------------------------- batches
def crop_flip_draws(b: int, pad: int, generator: torch.Generator, flip: bool = True):
    """The random draws of torchvision's ``RandomCrop(size, padding=pad)`` + ``RandomHorizontalFlip()`` for ``b``
    images, in this generator order: row offsets, column offsets (each uniform in [0, 2·pad]), flip coins
    (``rand < 0.5``; None without ``flip``). Returned on the generator's device."""
    dev = generator.device
    dy = torch.randint(0, 2 * pad + 1, (b,), generator=generator, device=dev)
    dx = torch.randint(0, 2 * pad + 1, (b,), generator=generator, device=dev)
    do = (torch.rand(b, generator=generator, device=dev) < 0.5) if flip else None
    return dy, dx, do


def gather_crop_flip(x: torch.Tensor, idx: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor, do, pad: int):
    """Images ``idx`` of an already zero-padded uint8 tensor (N×C×(H+2p)×(W+2p)), each cropped back to H×W at
    offsets (``dy``, ``dx``) and mirrored where ``do`` (None: no flip): one advanced-indexing gather, no per-image
    Python."""
    dev = x.device
    c, hp, wp = x.shape[1:]
    h, w = hp - 2 * pad, wp - 2 * pad
    rows = (dy.to(dev)[:, None] + torch.arange(h, device=dev))[:, None, :, None]
    cols = dx.to(dev)[:, None] + torch.arange(w, device=dev)
    if do is not None:
        cols = torch.where(do.to(dev)[:, None], cols.flip(1), cols)
    cols = cols[:, None, None, :]
    return x[idx.to(dev)[:, None, None, None], torch.arange(c, device=dev)[None, :, None, None], rows, cols]


def random_crop_flip(x: torch.Tensor, pad: int, generator: torch.Generator, flip: bool = True) -> torch.Tensor:
    """Per-image random crop of an already zero-padded uint8 batch (B×C×(H+2p)×(W+2p)) back to H×W, and a
    per-image horizontal flip with probability 1/2. Offsets are uniform in [0, 2p] for rows and columns
    independently, as torchvision's ``RandomCrop(size, padding=p)``. All batched tensor ops."""
    dy, dx, do = crop_flip_draws(x.shape[0], pad, generator, flip)
    return gather_crop_flip(x, torch.arange(x.shape[0], device=x.device), dy, dx, do, pad)


def normalize(x: torch.Tensor, mean, std) -> torch.Tensor:
    """uint8 → float32 in [0,1] → per-channel standardization (``mean``/``std``: sequences, made tensors of the
    default dtype, or such tensors already on ``x``'s device, as :class:`TensorBatches` caches them)."""
    m = torch.as_tensor(mean, device=x.device).view(1, -1, 1, 1)
    s = torch.as_tensor(std, device=x.device).view(1, -1, 1, 1)
    return (x.float().div_(255) - m) / s


def crop_normalize(x: torch.Tensor, idx: torch.Tensor, crop, pad: int, mean, std) -> torch.Tensor:
    """Images ``idx`` of ``x`` (zero-padded when ``crop = (dy, dx, do)`` is given: :func:`gather_crop_flip`; else
    plain indexing), normalized (:func:`normalize`)."""
    xb = gather_crop_flip(x, idx, *crop, pad) if crop is not None else x[idx]
    return normalize(xb, mean, std)


class TensorBatches:
    """Mini-batches from device-resident uint8 tensors.

    Training (``train=True``): a fresh ``torch.randperm`` per epoch from a generator seeded by (seed, epoch),
    so an epoch's order and augmentation draws are reproducible without saving RNG state (a resumed run sees
    the same batches); per-image crop/flip (``augment``); ``drop_last=False``. Evaluation: fixed order.

    ``draws(epoch)`` yields each batch as its random draws (indices, crop/flip draws) and ``batch(...)`` turns
    them into images; ``epoch(epoch)`` is the two together. ``batched.fit_many`` uses the split to build the
    batches of M runs with one gather.
    """

    def __init__(self, data: ImageTensors, batch_size: int, train: bool, augment: bool = True, pad: int = 4,
                 seed: int = 0):
        self.data, self.batch_size, self.train, self.augment, self.pad, self.seed = (
            data, batch_size, train, augment and train, pad, seed)
        self.x = data.x
        if self.augment:  # pad once, as airbench does: zero = black in pixel space (RandomCrop's fill=0)
            self.x = torch.nn.functional.pad(data.x, (pad, pad, pad, pad))
        self._stats: tuple | None = None

    def __len__(self):
        return -(-len(self.data) // self.batch_size)

    def generator(self, epoch: int) -> torch.Generator:
        dev = self.x.device
        return torch.Generator(device=dev).manual_seed(1_000_003 * self.seed + epoch)

    def norm_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The dataset's mean and std as (1, C, 1, 1) tensors of the default dtype on the data's device (made
        once per device and dtype)."""
        dt = torch.get_default_dtype()
        if self._stats is None or self._stats[0].device != self.x.device or self._stats[0].dtype != dt:
            self._stats = tuple(torch.tensor(v, dtype=dt, device=self.x.device).view(1, -1, 1, 1)
                                for v in (self.data.mean, self.data.std))
        return self._stats

    def draws(self, epoch: int = 0):
        """Per batch ``(idx, crop)``: the images' indices and ``crop = (dy, dx, do)`` (:func:`crop_flip_draws`;
        None without augmentation). Generator order: the epoch's permutation, then per batch rows, columns,
        flips."""
        n = len(self.data)
        if self.train:
            g = self.generator(epoch)
            order = torch.randperm(n, generator=g, device=self.x.device)
        else:
            g, order = None, torch.arange(n, device=self.x.device)
        for i in range(0, n, self.batch_size):
            idx = order[i:i + self.batch_size]
            yield idx, (crop_flip_draws(len(idx), self.pad, g) if self.augment else None)

    def batch(self, idx: torch.Tensor, crop) -> tuple[torch.Tensor, torch.Tensor]:
        """The normalized float32 images and the labels of one batch of :meth:`draws`."""
        return crop_normalize(self.x, idx, crop, self.pad, *self.norm_stats()), self.data.y[idx]

    def epoch(self, epoch: int = 0):
        for idx, crop in self.draws(epoch):
            yield self.batch(idx, crop)
