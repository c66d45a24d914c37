"""Build the CIFAR-10 JPEG stand-in (``cifar10-jpeg``) from CIFAR-10, and check a folder against the published one.

The published ``cpu`` records trained on ``<data root>/cifar10-jpeg/{train,test}/<class>/NNNN.jpg``: CIFAR-10's
50,000 training and 10,000 test images, each encoded once as a JPEG file. This module writes that folder from
CIFAR-10's "python version" batches and compares a folder with a manifest of the published one:

* :func:`build_cifar10_jpeg` (``python -m repro_lib data cifar10-jpeg``): reads ``<root>/cifar-10-batches-py``
  (downloaded with torchvision's MD5-checked download when missing, unless told not to), encodes every image with
  :data:`JPEG_SETTINGS` and writes ``<root>/cifar10-jpeg``. The folder is built as ``<root>/.cifar10-jpeg.partial-<pid>``
  and renamed into place when every file is written, so an interrupted build never leaves a ``cifar10-jpeg``
  folder behind (the next build removes what it left). A second build finds the folder and leaves it alone
  (``force=True`` rebuilds it). The encoder is deterministic: the same input and the same Pillow give the same bytes.
* :func:`verify` (``python -m repro_lib data verify cifar10-jpeg``): a folder against :data:`MANIFEST`, written by
  :func:`write_manifest` from the folder the published records trained on. Per split and class it holds the file
  count, one SHA-256 over the class (:func:`class_digest`: the SHA-256 of ``sha256sum``'s listing of the class
  folder, so ``cd train/airplane && sha256sum *.jpg | sha256sum`` gives it too) and the first 8 hex digits of every
  file's SHA-256 in name order: enough to name the first file that differs without storing 60,000 full digests
  (about 0.5 MB instead of 4 MB; a changed file keeps its 8 digits with probability 2^-32, and then the class
  digest still catches it). It also holds the JPEG header the published files share (:func:`jpeg_header`), so a
  difference can be told apart: other encoder settings, or the same settings with other arithmetic or pixels.

**Layout, names and order.** Class folders are CIFAR-10's label names in ``batches.meta`` (airplane, automobile,
bird, cat, deer, dog, frog, horse, ship, truck). Within a class, files are numbered from ``0000.jpg`` in the order
the images appear in the batches (``data_batch_1`` … ``data_batch_5`` for ``train``, ``test_batch`` for ``test``):
train/frog/0000.jpg is the first image of ``data_batch_1``, train/truck/0000.jpg and 0001.jpg its second and third,
test/cat/0000.jpg the first test image -- as the published files show when looked at.

**Encoder settings, as read from the published files.** Every one of the 60,000 published files carries the same
623 bytes from its start to its scan data (the marker segments, read by :func:`jpeg_header`; :data:`MANIFEST`'s
``jpeg_header``), decoded segment by segment:

* SOI, then APP0 ``JFIF\\0`` version 1.01, density unit 0 (no unit), density 1 × 1, no thumbnail; no EXIF, ICC
  profile, comment or restart markers;
* two DQT segments, 8-bit precision: table 0 is the luminance table of the JPEG standard (Annex K.1) scaled as
  libjpeg scales it for quality 75 (``(q·50 + 50) // 100``; first row 8, 6, 5, 8, 12, 20, 26, 31), table 1 the
  chrominance table the same way (first row 9, 9, 12, 24, 50, 50, 50, 50);
* SOF0: baseline sequential DCT (not progressive), 8 bits, 32 × 32, three components Y (2 × 2 sampling, table 0),
  Cb and Cr (1 × 1, table 1): 4:2:0 chroma subsampling;
* four DHT segments: the standard Huffman tables of Annex K.3 (not optimized per image);
* SOS: three components, spectral selection 0–63, no successive approximation.

That is what Pillow's ``Image.save(f, "JPEG")`` writes by default for an RGB image; :data:`JPEG_SETTINGS` states
the same settings explicitly (``tests/test_data_build.py`` compares the header a build writes with the published
one, byte for byte). The header fixes the settings, not the arithmetic: the colour conversion, downsampling and
DCT of the libjpeg inside Pillow decide the scan data. Whether a build reproduces the published bytes is what
:func:`verify` answers.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import data

DATASET = "cifar10-jpeg"
CIFAR_FOLDER = "cifar-10-batches-py"  # the extracted cifar-10-python.tar.gz
CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
BATCHES = {"train": ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"),
           "test": ("test_batch",)}
META = "batches.meta"
SPLITS = ("train", "test")
#: the file name of the i-th image of a class (from 0)
NAME = "{:04d}.jpg"
#: Pillow's JPEG settings of the published files (read from them: the module docstring): baseline JFIF, libjpeg's
#: standard tables at quality 75, 4:2:0 chroma subsampling, the standard Huffman tables
JPEG_SETTINGS = {"quality": 75, "subsampling": "4:2:0", "progressive": False, "optimize": False}
#: the manifest of the published folder (:func:`write_manifest`)
MANIFEST = Path(__file__).with_name("data_manifests") / f"{DATASET}.json"
PREFIX_HEX = 8  # hex digits kept of each file's SHA-256


def build_command(dataset) -> str:
    """The command that builds ``dataset`` into the default data root ("" for a data set not built here)."""
    return f"python -m repro_lib data {DATASET}" if dataset == DATASET else ""


class BuildError(ValueError):
    """A build or check that cannot proceed; the message is one line naming what is missing or wrong."""


# ------------------------------------------------------------------------------------------------ JPEG
def jpeg_header(b: bytes) -> bytes:
    """The bytes of a JPEG file from its start (SOI) to the end of its first SOS segment: every marker segment
    before the scan data (JFIF header, quantization tables, frame header, Huffman tables, scan header).
    ``ValueError`` on bytes that are not a JPEG file."""
    if b[:2] != b"\xff\xd8":
        raise ValueError("not a JPEG file (no SOI marker)")
    i = 2
    while i + 4 <= len(b):
        if b[i] != 0xFF:
            raise ValueError(f"not a marker at byte {i}")
        marker = b[i + 1]
        length = int.from_bytes(b[i + 2:i + 4], "big")
        i += 2 + length
        if marker == 0xDA:  # SOS: the scan data follows
            return b[:i]
    raise ValueError("no SOS marker (truncated JPEG file)")


def encoder() -> str:
    """The JPEG library inside this Pillow, e.g. "Pillow 13.0.0, libjpeg-turbo 3.2.0"."""
    import PIL
    from PIL import features

    turbo = features.version("libjpeg_turbo")
    lib = f"libjpeg-turbo {turbo}" if turbo else f"libjpeg {features.version('jpg')}"
    return f"Pillow {PIL.__version__}, {lib}"


def encode(rgb) -> bytes:
    """One H×W×3 uint8 RGB image as JPEG bytes with :data:`JPEG_SETTINGS`."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb, "RGB").save(buf, "JPEG", **JPEG_SETTINGS)
    return buf.getvalue()


# ------------------------------------------------------------------------------------------------ CIFAR-10
def _official_md5() -> dict[str, str]:
    """The MD5 of each file of the official batches (torchvision's list)."""
    from torchvision.datasets import CIFAR10

    return {**dict(CIFAR10.train_list), **dict(CIFAR10.test_list), CIFAR10.meta["filename"]: CIFAR10.meta["md5"]}


def _md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cifar_batches(root, download: bool = True) -> Path:
    """``<root>/cifar-10-batches-py`` with every batch and ``batches.meta`` in it; missing files are downloaded
    with torchvision (the archive's MD5 checked, then extracted) when ``download``. Raises :class:`BuildError`
    (one line: the missing file and how to get it) otherwise, or when the download fails."""
    root = Path(root)
    src = root / CIFAR_FOLDER
    needed = [*BATCHES["train"], *BATCHES["test"], META]
    missing = [f for f in needed if not (src / f).is_file()]
    if missing and download:
        try:
            data.require("cifar10", root, download=True)
        except data.DataNotFoundError as e:
            first = str(e).splitlines()[0].rstrip(".")
            raise BuildError(f"{first}; without internet access, download {CIFAR_URL} elsewhere and extract it "
                             f"into {str(root)!r}") from None
        missing = [f for f in needed if not (src / f).is_file()]
    if missing:
        what = f"no file {str(src / missing[0])!r}" if src.is_dir() else f"no folder {str(src)!r}"
        raise BuildError(f"CIFAR-10's python-version batches not found: {what}; run without --no-download to "
                         f"download them (MD5-checked), or extract {CIFAR_URL} into {str(root)!r}")
    return src


def _unpickle(path: Path) -> dict:
    """A batch file as a dict (the batches were pickled by Python 2: read as torchvision reads them). A file that
    is not a CIFAR batch is a :class:`BuildError` naming it."""
    try:
        with open(path, "rb") as f:
            d = pickle.load(f, encoding="latin1")
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError) as e:
        raise BuildError(f"{str(path)!r} is not a CIFAR-10 batch ({type(e).__name__}: {e}); delete it to download "
                         f"it again, or extract {CIFAR_URL} into {str(path.parent.parent)!r}") from None
    if not isinstance(d, dict):
        raise BuildError(f"{str(path)!r} is not a CIFAR-10 batch (not a dict)")
    return d


def read_split(src: Path, split: str):
    """``(images N×32×32×3 uint8, labels)`` of one split, in the batches' order."""
    import numpy as np

    xs, ys = [], []
    for name in BATCHES[split]:
        d = _unpickle(src / name)
        if "data" not in d or "labels" not in d:
            raise BuildError(f"{str(src / name)!r} is not a CIFAR-10 batch (no 'data' and 'labels')")
        xs.append(np.asarray(d["data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        ys += list(d["labels"])
    return np.ascontiguousarray(np.concatenate(xs)), ys


def label_names(src: Path) -> list[str]:
    """The class names in ``batches.meta`` (the class folders' names), in label order."""
    meta = _unpickle(src / META)
    if "label_names" not in meta:
        raise BuildError(f"{str(src / META)!r} is not CIFAR-10's batches.meta (no 'label_names')")
    return list(meta["label_names"])


# ------------------------------------------------------------------------------------------------ build
@dataclass
class BuildResult:
    """What :func:`build_cifar10_jpeg` did: ``built`` False when the folder was already there."""

    folder: Path
    built: bool
    images: int = 0
    seconds: float = 0.0
    official_input: bool | None = None  # the batches' MD5s are the official ones (None: not built)
    encoder: str = ""

    def text(self) -> str:
        if not self.built:
            return (f"{self.folder} is already there: nothing built (--force rebuilds it; `python -m repro_lib "
                    f"data verify {DATASET}` compares it with the published folder)")
        src = ("the official CIFAR-10 batches (their MD5 checksums agree)" if self.official_input else
               "batches that are not the official CIFAR-10 files (their MD5 checksums differ), so it cannot match "
               "the published folder")
        return (f"built {self.folder}: {self.images:,} images encoded by {self.encoder} in {self.seconds:.0f} s, "
                f"from {src}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def _remove_stale_partials(root: Path) -> None:
    """Remove what interrupted builds left (``.cifar10-jpeg.partial-<pid>``, and ``.old-<pid>``: a folder that
    ``force`` moved aside, of processes no longer running)."""
    for p in [*root.glob(f".{DATASET}.partial-*"), *root.glob(f".{DATASET}.old-*")]:
        pid = p.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)


def build_cifar10_jpeg(root=None, download: bool = True, force: bool = False, progress: bool = True) -> BuildResult:
    """Write ``<root>/cifar10-jpeg/{train,test}/<class>/NNNN.jpg`` from ``<root>/cifar-10-batches-py`` (``root``:
    :func:`repro_lib.data.data_root`). Atomic: written under ``<root>/.cifar10-jpeg.partial-<pid>`` and renamed into
    place at the end; an existing ``cifar10-jpeg`` folder is left alone unless ``force`` (then replaced by the new
    one at the end). Raises :class:`BuildError` naming what is missing."""
    from tqdm.auto import tqdm

    root = data.data_root(root)
    final = root / DATASET
    if final.exists() and not force:
        return BuildResult(final, built=False)
    src = cifar_batches(root, download)
    md5 = _official_md5()
    official = all(_md5(src / f) == md5[f] for f in (*BATCHES["train"], *BATCHES["test"], META))
    classes = label_names(src)
    _remove_stale_partials(root)
    partial = root / f".{DATASET}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    t0 = time.perf_counter()
    n, old = 0, None
    try:
        for split in SPLITS:
            x, y = read_split(src, split)
            if y and not 0 <= min(y) <= max(y) < len(classes):
                raise BuildError(f"{split} labels outside the {len(classes)} classes of {str(src / META)!r}")
            for c in classes:
                (partial / split / c).mkdir(parents=True)
            counts = [0] * len(classes)
            for img, label in zip(tqdm(x, desc=f"{DATASET} {split}", unit="img", disable=not progress,
                                       file=sys.stderr), y):
                (partial / split / classes[label] / NAME.format(counts[label])).write_bytes(encode(img))
                counts[label] += 1
                n += 1
            del x
        if final.exists():  # force: the old folder moves aside only now that the new one is whole
            old = root / f".{DATASET}.old-{os.getpid()}"
            os.replace(final, old)
        os.replace(partial, final)
    except BaseException:
        if old is not None and not final.exists():  # interrupted between the two renames: the old folder back
            os.replace(old, final)
            old = None
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    data.forget_cached(DATASET, root)  # a decoded copy of an earlier folder at this path is no longer it
    return BuildResult(final, built=True, images=n, seconds=time.perf_counter() - t0, official_input=official,
                       encoder=encoder())


# ------------------------------------------------------------------------------------------------ manifest
def file_digests(folder: Path) -> dict[str, str]:
    """``{name: SHA-256 hex}`` of the files in a class folder."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def class_digest(digests: dict[str, str]) -> str:
    """One SHA-256 over a class folder: of its ``sha256sum`` listing (``<hex>  <name>`` lines, names sorted), so
    that ``sha256sum *.jpg | sha256sum`` in the folder prints the same digest."""
    listing = "".join(f"{digests[name]}  {name}\n" for name in sorted(digests))
    return hashlib.sha256(listing.encode()).hexdigest()


def manifest_of(folder) -> dict:
    """The manifest of a ``cifar10-jpeg`` folder: per split and class the file count, :func:`class_digest` and the
    first :data:`PREFIX_HEX` hex digits of every file's SHA-256 in name order (names ``NNNN.jpg`` from 0000);
    the JPEG header (:func:`jpeg_header`) every file shares (None if they do not all share one)."""
    folder = Path(folder)
    splits, headers = {}, set()
    for split in SPLITS:
        splits[split] = {}
        for cls in sorted(p.name for p in (folder / split).iterdir() if p.is_dir()):
            digests = {}
            for p in sorted((folder / split / cls).iterdir()):
                b = p.read_bytes()
                digests[p.name] = hashlib.sha256(b).hexdigest()
                headers.add(jpeg_header(b))
            names = [NAME.format(i) for i in range(len(digests))]
            if sorted(digests) != names:
                raise ValueError(f"{split}/{cls}: files are not named {NAME.format(0)} … in sequence")
            splits[split][cls] = {"files": len(names), "sha256": class_digest(digests),
                                  "prefixes": "".join(digests[nm][:PREFIX_HEX] for nm in names)}
    return {"dataset": DATASET, "format": 1,
            "names": f"{NAME.format(0)}, {NAME.format(1)}, … in the order of the CIFAR-10 batches",
            "sha256": "per class: SHA-256 of the class folder's `sha256sum *.jpg` listing",
            "prefixes": f"per class: the first {PREFIX_HEX} hex digits of each file's SHA-256, in name order",
            "jpeg_header": sorted(headers)[0].hex() if len(headers) == 1 else None,
            "splits": splits}


def write_manifest(folder, path=MANIFEST) -> Path:
    """Write :func:`manifest_of` ``folder`` to ``path`` (how :data:`MANIFEST` was made from the published folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest_of(folder), indent=1) + "\n")
    return path


def load_manifest(path=None) -> dict:
    """The manifest at ``path`` (default :data:`MANIFEST`)."""
    return json.loads(Path(path or MANIFEST).read_text())


# ------------------------------------------------------------------------------------------------ verify
@dataclass
class Difference:
    """Where a folder differs from the manifest: ``split``, ``cls`` and ``file`` (None where the whole split or
    class differs) and ``what``."""

    split: str
    cls: str | None
    file: str | None
    what: str

    def where(self) -> str:
        return "/".join(p for p in (self.split, self.cls, self.file) if p)


@dataclass
class Verification:
    """The outcome of :func:`verify`: ``identical``, or the differences in file order (``differences[0]``: the
    first split, class and file that differ)."""

    folder: Path
    files: int  # files in the manifest
    classes: int
    differences: list[Difference] = field(default_factory=list)
    header_matches: bool | None = None  # the first differing file's JPEG header is the published one's
    encoder: str = ""

    @property
    def identical(self) -> bool:
        return not self.differences

    def text(self) -> str:
        if self.identical:
            return (f"{self.folder} is identical to the published {DATASET} folder: {self.files:,} files in "
                    f"{self.classes} class folders, byte for byte (SHA-256). The notebooks train on the bytes the "
                    "published records trained on: on the CPU and thread count a record names, re-training gives "
                    "its numbers bit for bit.")
        first = self.differences[0]
        lines = [f"{self.folder} differs from the published {DATASET} folder: first at {first.where()} "
                 f"({first.what}); {len(self.differences):,} difference(s) in all."]
        contents = all(d.what == "content differs" for d in self.differences)
        if contents and self.header_matches:
            lines.append(f"Its files carry the published encoder settings (the same JPEG header: quantization and "
                         f"Huffman tables, 4:2:0 subsampling), so the encoder's arithmetic ({self.encoder} here "
                         "if built with this Python) or the input images differ.")
        elif contents and self.header_matches is False:
            lines.append("Its files were encoded with other settings (their JPEG header differs from the published "
                         "one: quantization or Huffman tables, subsampling or markers).")
        else:
            lines.append(f"Files or folders are missing or extra: an incomplete or another folder (`python -m "
                         f"repro_lib data {DATASET} --force` rebuilds it from CIFAR-10). Training on it does not "
                         "train on the images of the published records.")
            return "\n".join(lines)
        lines.append("Training on it runs the same protocol on slightly different pixels: its numbers agree with "
                     "the published records within the seed noise, not bit for bit.")
        return "\n".join(lines)


def verify(folder, manifest=None) -> Verification:
    """Compare a ``cifar10-jpeg`` folder with the manifest (default :data:`MANIFEST`) file by file: every split and
    class folder, every file's name and SHA-256. Raises :class:`BuildError` when ``folder`` does not exist."""
    folder = Path(folder)
    man = load_manifest() if manifest is None else manifest
    if not folder.is_dir():
        raise BuildError(f"no folder {str(folder)!r}; build it with: python -m repro_lib data {DATASET} --root "
                         f"{str(folder.parent)!r}")
    diffs: list[Difference] = []
    header_matches = None
    n_files = n_classes = 0
    for split in SPLITS:
        want = man["splits"].get(split, {})
        n_classes += len(want)
        n_files += sum(c["files"] for c in want.values())
        if not (folder / split).is_dir():
            diffs.append(Difference(split, None, None, "no such folder"))
            continue
        have = {p.name for p in (folder / split).iterdir() if p.is_dir()}
        for cls in sorted(set(want) | have):
            if cls not in have:
                diffs.append(Difference(split, cls, None, "class folder missing"))
                continue
            if cls not in want:
                diffs.append(Difference(split, cls, None, "class folder not in the published folder"))
                continue
            entry = want[cls]
            digests = file_digests(folder / split / cls)
            if entry["files"] == len(digests) and class_digest(digests) == entry["sha256"]:
                continue
            names = {NAME.format(i): i for i in range(entry["files"])}
            prefixes = entry["prefixes"]
            before = len(diffs)
            for name in sorted(set(names) | set(digests)):
                if name not in digests:
                    diffs.append(Difference(split, cls, name, "file missing"))
                elif name not in names:
                    diffs.append(Difference(split, cls, name, "file not in the published folder"))
                else:
                    k = names[name]
                    if digests[name][:PREFIX_HEX] != prefixes[k * PREFIX_HEX:(k + 1) * PREFIX_HEX]:
                        diffs.append(Difference(split, cls, name, "content differs"))
            if len(diffs) == before:  # every 8-digit prefix agrees, the class digest does not (chance 2^-32)
                diffs.append(Difference(split, cls, None, "content differs (the class digest; no single file "
                                                          "found by its digest prefix)"))
            if header_matches is None and man.get("jpeg_header"):
                d = next((d for d in diffs[before:] if d.what == "content differs" and d.file), None)
                if d is not None:
                    try:
                        header = jpeg_header((folder / split / cls / d.file).read_bytes())
                        header_matches = header.hex() == man["jpeg_header"]
                    except ValueError:
                        header_matches = False
    return Verification(folder, n_files, n_classes, diffs, header_matches, encoder())
