"""Datasets as uint8 tensors, class-balanced subsets, and on-device batched augmentation.

Everything the training loop sees comes from tensors that live on the training device:

* ``load_split(name, split, root)`` returns an :class:`ImageTensors` (``x`` uint8 N×C×H×W, ``y`` int64).
  CIFAR-10/100 come from torchvision (``download=True`` is the real download path), folder datasets (any root of
  ``<class>/*.jpg`` folders, e.g. the CIFAR-10 JPEG stand-in that ``repro_lib.data_build`` writes; Tiny ImageNet in
  its official layout) are decoded once and cached as a uint8 tensor file so a second load takes well under a
  second.
* ``synthetic=True`` gives a deterministic, learnable stand-in with the same shape and class count, labelled
  ``synthetic`` everywhere it is shown (``ImageTensors.name`` starts with ``synthetic-``).
* ``balanced_subset(y, n, seed)``: seeded, class-balanced subset; the same for every run sharing (n, seed).
* ``TensorBatches``: per-epoch ``torch.randperm`` shuffling, per-image random crop from a 4-pixel zero padding
  of the *unnormalized* image (torchvision ``RandomCrop(32, padding=4)``) and horizontal flip as batched tensor
  ops, then normalization; ``drop_last=False`` (the last partial batch is used) except for a last training batch
  of a single image, which is dropped (:func:`train_steps`: batch norm cannot normalize one sample).

The data root is a parameter, else ``$REPRO_DATA_ROOT``, else ``./data``. This module knows no global path.
``require(name, root, download)`` checks (and for CIFAR downloads) a dataset before anything trains on it; a missing
dataset is one ``DataNotFoundError`` saying which dataset, which folder, and how to get it there.
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
    help: str = ""  # the expected layout under the data root
    source: str = ""  # where to get it: the archive's URL (torchvision kinds), else what to do


DATASETS: dict[str, DatasetInfo] = {
    "cifar10": DatasetInfo("cifar10", "torchvision", 10, 32, 50000, 10000, _CIFAR10_MEAN, _CIFAR10_STD,
                           "cifar-10-batches-py",
                           help="torchvision CIFAR10: <root>/cifar-10-batches-py/ (the 'python version' "
                                "archive cifar-10-python.tar.gz, extracted)",
                           source="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"),
    "cifar100": DatasetInfo("cifar100", "torchvision", 100, 32, 50000, 10000, _CIFAR100_MEAN, _CIFAR100_STD,
                            "cifar-100-python",
                            help="torchvision CIFAR100: <root>/cifar-100-python/ (cifar-100-python.tar.gz, "
                                 "extracted)",
                            source="https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"),
    # only when asked for (dataset="cifar10-jpeg"): no profile trains on it by default
    "cifar10-jpeg": DatasetInfo("cifar10-jpeg", "folder", 10, 32, 50000, 10000, _CIFAR10_MEAN, _CIFAR10_STD,
                                "cifar10-jpeg",
                                help="<root>/cifar10-jpeg/{train,test}/<class>/*.jpg: CIFAR-10 re-encoded as JPEG "
                                     "(pixel values differ from CIFAR-10: accuracies are not CIFAR-10 numbers)",
                                source="build it from CIFAR-10 with `python -m repro_lib data cifar10-jpeg "
                                       "--root <data root>` (or `make data`: into ./data), which downloads "
                                       "CIFAR-10 with torchvision (MD5-checked) and encodes every image as JPEG "
                                       "as the published files were; `python -m repro_lib data verify "
                                       "cifar10-jpeg --root <data root>` compares the result with the folder the "
                                       "published records trained on. Dataset cifar10 is CIFAR-10 itself"),
    # Tiny ImageNet (Yun et al. Table 9): *choices*, the paper says only "padding, random crops and left-right
    # flips": ImageNet mean/std normalization, and the same 4-px crop padding as CIFAR (train.py's pad=4).
    "tiny_imagenet": DatasetInfo("tiny_imagenet", "tiny_imagenet", 200, 64, 100000, 10000, _IMAGENET_MEAN,
                                _IMAGENET_STD, "tiny-imagenet-200", ("train", "val"),
                                help="<root>/tiny-imagenet-200/ as unpacked from tiny-imagenet-200.zip: "
                                     "wnids.txt, train/<wnid>/images/*.JPEG, val/images/*.JPEG and "
                                     "val/val_annotations.txt",
                                source="get http://cs231n.stanford.edu/tiny-imagenet-200.zip and unzip it into "
                                       "the data root"),
}
#: Datasets too large to hold in memory, streamed by ``repro_lib.imagefolder`` (not loadable by ``load_split``);
#: listed here so that :func:`require` can say where to get them.
STREAMED: dict[str, DatasetInfo] = {
    "imagenet": DatasetInfo("imagenet", "imagefolder", 1000, 224, 1281167, 50000, _IMAGENET_MEAN, _IMAGENET_STD,
                            "imagenet", ("train", "val"),
                            help="<root>/imagenet/train/<wnid>/*.JPEG (1,281,167 images in 1000 folders such as "
                                 "n01440764) and <root>/imagenet/val/<wnid>/*.JPEG (the 50,000 validation images "
                                 "sorted into the same wnid folders)",
                            source="get ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar from "
                                   "https://image-net.org/download-images.php (free registration); untar the per-class "
                                   "archives of the training tar into train/<wnid>/, and sort the validation images "
                                   "into val/<wnid>/ with the ground-truth labels (e.g. the valprep.sh script of "
                                   "the PyTorch ImageNet example)"),
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


DATA_ROOT_ENV = "REPRO_DATA_ROOT"  # the data root when no folder is given


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The data root: the argument if given (non-empty), else ``$REPRO_DATA_ROOT``, else ``./data``."""
    return Path(root or os.environ.get(DATA_ROOT_ENV) or "data").expanduser()


def cache_dir() -> Path:
    """Where decoded folder datasets are cached: ``$REPRO_CACHE_DIR`` or ``~/.cache/repro_lib``."""
    return Path(os.environ.get("REPRO_CACHE_DIR") or Path.home() / ".cache" / "repro_lib")


class DataNotFoundError(FileNotFoundError):
    """A dataset is not where it is looked for; the message says which dataset, which folder, and how to get it."""


def _fetch_commands() -> str:
    """How to run with ``download=True``: for every notebook, for one notebook, or inside Jupyter."""
    nb = os.environ.get("REPRO_NOTEBOOK") or "notebooks/<notebook>.ipynb"
    return (f"  make reproduce                                  (every notebook: it downloads unless told "
            f"-p download False)\n"
            f"  python -m repro_lib run {nb} -p download True\n"
            f"  or, in Jupyter, download = True in the notebook's parameters cell")


def _missing(info: DatasetInfo, root: Path, detail: str = "", download_failed: bool = False) -> DataNotFoundError:
    """The one error of a missing dataset: what, where it was looked for, and how to get it there."""
    where = os.path.abspath(root)
    lines = [f"dataset {info.name!r} not found under the data root {where!r}{': ' + detail if detail else ''}."]
    if info.kind == "torchvision":
        if download_failed:
            lines.append(f"The download needs internet access. Without it, download {info.source} elsewhere and "
                         f"extract it into {where!r} (it unpacks to {info.folder}/).")
        else:
            lines += ["Fetch it once (torchvision downloads the archive, checks its MD5 checksum and extracts it "
                      "into the data root):", _fetch_commands(),
                      f"or download {info.source} yourself and extract it into {where!r}."]
    else:
        lines.append(f"It is not downloaded automatically: {info.source}.")
    lines += [f"Expected layout: {info.help}.",
              "Set the notebook parameter data_root or the environment variable REPRO_DATA_ROOT to the folder that "
              "holds it."]
    return DataNotFoundError("\n".join(lines))


def dataset_info(name: str) -> DatasetInfo:
    """The :class:`DatasetInfo` of ``name`` (``DATASETS`` or ``STREAMED``); ``ValueError`` naming ``dataset``."""
    if name in DATASETS:
        return DATASETS[name]
    if name in STREAMED:
        return STREAMED[name]
    raise ValueError(f"dataset: unknown dataset {name!r}; known: {sorted({**DATASETS, **STREAMED})}")


def require(name: str, root=None, download: bool = False) -> Path:
    """Make sure dataset ``name`` is under the data root (:func:`data_root`) before anything trains on it, and
    return that root. CIFAR-10/100 (torchvision) are downloaded there when ``download`` (torchvision checks the
    archive's MD5 checksum); any other missing dataset, or a CIFAR one without ``download``, raises one
    :class:`DataNotFoundError` naming the dataset, the folder and how to get it there (the commands that download,
    or where to get a folder dataset and its layout). Cheap when the data is there: folders are only looked at
    (a dataset already decoded into the cache counts as present), the CIFAR files are checksummed."""
    info = dataset_info(name)
    root = data_root(root)
    if info.kind == "torchvision":
        if not download and not (root / info.folder).is_dir():
            raise _missing(info, root, f"no folder {str(root / info.folder)!r}")
        _torchvision(info, "test", root, download)
    elif info.kind == "folder":
        if not all(_cache_path(info, s, root).is_file() for s in ("train", "test")):
            for split in ("train", "test"):
                _split_dir(info, split, root)
    elif info.kind == "tiny_imagenet":
        if not all(_cache_path(info, s, root).is_file() for s in ("train", "test")):
            base = root / info.folder
            for f in (base / "wnids.txt", base / "val" / "val_annotations.txt"):
                if not f.is_file():
                    raise _missing(info, root, f"no file {str(f)!r}")
            if not (base / "train").is_dir():
                raise _missing(info, root, f"no folder {str(base / 'train')!r}")
    else:  # streamed image folders
        for split in info.splits:
            d = root / info.folder / split
            if not d.is_dir():
                raise _missing(info, root, f"no folder {str(d)!r}")
    return root


def require_for(configs, root=None, download: bool = False) -> None:
    """:func:`require` for every real (not synthetic) dataset the run configs train on, once each: what a notebook
    calls before its sweep, so a missing dataset stops it with one message before anything trains."""
    for name in dict.fromkeys(c.dataset for c in configs if not getattr(c, "synthetic", False)):
        require(name, root, download)


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


def _torchvision(info: DatasetInfo, split: str, root: Path, download: bool):
    """The torchvision dataset object; a missing, corrupted or undownloadable one is one ``DataNotFoundError``
    (torchvision's own exception is not chained: its advice names torchvision's arguments, not ours)."""
    import torchvision

    cls = {"cifar10": torchvision.datasets.CIFAR10, "cifar100": torchvision.datasets.CIFAR100}[info.name]
    try:
        return cls(str(root), train=(split == "train"), download=download)
    except RuntimeError as e:  # torchvision: "Dataset not found or corrupted", or a download failing its MD5 check
        detail = (f"the files in {str(root / info.folder)!r} are missing or fail their MD5 checksum"
                  if (root / info.folder).is_dir() else f"no folder {str(root / info.folder)!r}")
        raise _missing(info, root, f"{detail} ({e})") from None
    except OSError as e:  # offline download (URLError is an OSError)
        raise _missing(info, root, f"the download failed ({type(e).__name__}: {e})", download_failed=True) from None


def _load_torchvision(info: DatasetInfo, split: str, root: Path, download: bool):
    if not download and not (root / info.folder).is_dir():
        raise _missing(info, root, f"no folder {str(root / info.folder)!r}")
    ds = _torchvision(info, split, root, download)
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


def _cache_path(info: DatasetInfo, split: str, root: Path) -> Path:
    key = hashlib.sha256(f"{root.resolve()}|{info.name}|{split}".encode()).hexdigest()[:12]
    return cache_dir() / f"{info.name}-{split}-{key}.pt"


def forget_cached(name: str, root=None) -> None:
    """Drop the decoded copy of folder dataset ``name`` under ``root`` from the cache (after its folder was
    replaced: the cache is keyed by the folder's path, not its contents)."""
    info = dataset_info(name)
    for split in ("train", "test"):
        _cache_path(info, split, data_root(root)).unlink(missing_ok=True)


def _cached(info: DatasetInfo, split: str, root: Path, decode):
    """Decode once, then load the uint8 tensors from ``cache_dir()`` (keyed by the resolved folder path)."""
    path = _cache_path(info, split, root)
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
    ``synthetic-<name>`` so they are never mistaken for real data. Drawn in float32 whatever the default dtype,
    so a run (or a float64 test) sees the same images however it is started.
    """
    c, s, f32 = info.num_classes, info.image_size, torch.float32
    g = torch.Generator().manual_seed(1234)
    low = torch.rand(c, 3, 4, 4, generator=g, dtype=f32)
    protos = torch.nn.functional.interpolate(low, size=(s, s), mode="bilinear", align_corners=False)
    g = torch.Generator().manual_seed(1 if split == "train" else 2)
    y = torch.arange(n) % c
    y = y[torch.randperm(n, generator=g)]
    shift = torch.randint(-3, 4, (2,), generator=g).tolist()
    x = torch.roll(protos[y], shifts=shift, dims=(2, 3))
    x = x + 0.35 * torch.randn(n, 3, s, s, generator=g, dtype=f32)
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


def train_steps(n: int, batch_size: int) -> tuple[int, int]:
    """``(steps, images)`` of one training epoch over ``n`` images in batches of ``batch_size``.

    The convention: ``drop_last=False`` -- the last partial batch is used, ``ceil(n / B)`` steps -- except when
    ``n mod B == 1``: that last batch would be a single image, which batch norm cannot normalize in training mode
    where a layer has no spatial extent (the scale-invariant ResNet-18 normalizes its pooled features, a (B, C)
    tensor: PyTorch raises "Expected more than 1 value per channel"). That image is dropped: ``floor(n / B)``
    steps over ``n - 1`` images. The epoch's permutation is drawn over all ``n`` images, so the dropped image is
    a different one each epoch. Every trainer takes its steps per epoch and the images its train loss and
    accuracy average over from here (through :class:`TensorBatches`)."""
    if n < 1 or batch_size < 1:
        raise ValueError(f"n and batch_size: must be >= 1, got n={n}, batch_size={batch_size}")
    if batch_size > 1 and n % batch_size == 1:
        return n // batch_size, n - 1
    return -(-n // batch_size), n


class TensorBatches:
    """Mini-batches from device-resident uint8 tensors.

    Training (``train=True``): a fresh ``torch.randperm`` per epoch from a generator seeded by (seed, epoch),
    so an epoch's order and augmentation draws are reproducible without saving RNG state (a resumed run sees
    the same batches); per-image crop/flip (``augment``); ``drop_last=False`` except that a last batch of one
    image is dropped (:func:`train_steps`; :attr:`images` is what an epoch sees). Evaluation: fixed order, every
    image.

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
        return train_steps(len(self.data), self.batch_size)[0] if self.train else -(-len(self.data) // self.batch_size)

    @property
    def images(self) -> int:
        """Images one epoch's batches hold: ``len(data)``, less a dropped lone last training image."""
        return train_steps(len(self.data), self.batch_size)[1] if self.train else len(self.data)

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
        for i in range(0, self.images, self.batch_size):
            idx = order[i:min(i + self.batch_size, self.images)]
            yield idx, (crop_flip_draws(len(idx), self.pad, g) if self.augment else None)

    def batch(self, idx: torch.Tensor, crop) -> tuple[torch.Tensor, torch.Tensor]:
        """The normalized float32 images and the labels of one batch of :meth:`draws`."""
        return crop_normalize(self.x, idx, crop, self.pad, *self.norm_stats()), self.data.y[idx]

    def epoch(self, epoch: int = 0):
        for idx, crop in self.draws(epoch):
            yield self.batch(idx, crop)
