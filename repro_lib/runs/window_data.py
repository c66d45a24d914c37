"""The data file the budgeted GPU window (``repro_lib.runs.window``) carries to the GPU machine: packing it here
(``python -m repro_lib window --pack-data``), loading and checking it there.

The whole ``cifar10-jpeg`` folder is too large to carry. A run of the window's queue sees only (a) the
class-balanced training subset its (N, seed) draws -- ``data.balanced_subset(y, N, seed)``, which indexes the full
50,000-image training set in the folder's order (sorted class folders, sorted file names: ``data._list_folder``) --
and (b) the full test set. The file (``gpu_data/cifar10-jpeg-window.pt`` by default) holds exactly that,
losslessly:

* ``train_labels``: the label of every one of the 50,000 training images (so ``balanced_subset`` draws the same
  indices from it as from the folder);
* ``train_index``: the sorted union of the subsets of every (N, seed) of the queue (``pairs``), and those images'
  JPEG files, byte for byte (``train_jpeg``: one uint8 tensor, ``train_offsets``: where each file starts);
* ``test_labels``, ``test_jpeg``, ``test_offsets``: the 10,000 test images, the same way;
* ``train_crc32`` / ``test_crc32``: the CRC-32 of every image's pixels as ``data.py`` decodes it here (PIL, RGB,
  uint8), which the loader checks after decoding there;
* ``listing_sha256``: the SHA-256 of the folder's file list, in order (which folder the file was made from).

The JPEG files are the smallest faithful form: their decoded pixels are ~3.4x larger. For the queue's N = 3,125 and
6,250 columns and seeds 0-2 (N = 6,250 draws a superset of N = 3,125 for the same seed) that is 16,533 training
images and the test set: ~24 MiB::

    .venv/bin/python -m repro_lib window --pack-data --data-root /path/holding/cifar10-jpeg

There, :func:`window_data` decodes the file into full-size tensors (50,000 training rows; zeros in the rows no run
of the queue draws) and hands them to the library as its decoded-dataset cache (``data.cache_dir()``, a temporary
folder for the call), after checking that its rows are exactly the subsets it was built for, that they hold every
subset the pending runs draw, and that every decoded image matches the pixel checksum taken where it was built.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
import zlib
from pathlib import Path

import torch

from .. import data as data_mod
from ..store import save_torch_atomic

DATASET = "cifar10-jpeg"
DATA_FILE = "cifar10-jpeg-window.pt"
DATA_FORMAT = 1
PACK_COMMAND = "python -m repro_lib window --pack-data"


# ============================================================================================== packing
def _split(root: Path, split: str):
    """The files and labels of one split, in ``data.py``'s order, as JPEG bytes and pixel checksums."""
    info = data_mod.DATASETS[DATASET]
    d = data_mod._split_dir(info, split, root)  # raises DataNotFoundError naming the folder
    files, labels = data_mod._list_folder(d)
    if not files:
        raise data_mod.DataNotFoundError(f"no images found in {str(d)!r}")
    return files, torch.tensor(labels, dtype=torch.int64), d


def _pack(files) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The files' bytes as one uint8 tensor, the start offsets (+ the end) and the CRC-32 of every decoded image."""
    blobs, crcs = [], []
    for f in files:
        blobs.append(Path(f).read_bytes())
        crcs.append(zlib.crc32(data_mod._decode_one(f).tobytes()))
    offsets = [0]
    for b in blobs:
        offsets.append(offsets[-1] + len(b))
    joined = bytearray(b"".join(blobs))
    blob = torch.frombuffer(joined, dtype=torch.uint8) if joined else torch.zeros(0, dtype=torch.uint8)
    return blob, torch.tensor(offsets, dtype=torch.int64), torch.tensor(crcs, dtype=torch.int64)


def build(data_root, out, pairs) -> dict:
    """Write the data file for the (n, seed) ``pairs`` to ``out`` from ``<data_root>/cifar10-jpeg``; returns a
    summary (rows, bytes)."""
    root = data_mod.data_root(data_root)
    train_files, y, train_dir = _split(root, "train")
    test_files, y_test, test_dir = _split(root, "test")
    idx = set()
    for n, s in pairs:
        idx.update(data_mod.balanced_subset(y, int(n), int(s)).tolist())
    idx = sorted(idx)
    tr_blob, tr_off, tr_crc = _pack([train_files[i] for i in idx])
    te_blob, te_off, te_crc = _pack(test_files)
    listing = hashlib.sha256()
    for base, fs in ((train_dir, train_files), (test_dir, test_files)):
        for f in fs:
            listing.update(f"{base.name}/{Path(f).relative_to(base)}\n".encode())
    obj = {
        "format": DATA_FORMAT, "dataset": DATASET, "pairs": [[int(n), int(s)] for n, s in pairs],
        "train_labels": y, "train_index": torch.tensor(idx, dtype=torch.int64),
        "train_jpeg": tr_blob, "train_offsets": tr_off, "train_crc32": tr_crc,
        "test_labels": y_test, "test_jpeg": te_blob, "test_offsets": te_off, "test_crc32": te_crc,
        "listing_sha256": listing.hexdigest(),
    }
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_torch_atomic(out, obj)
    return {"file": str(out), "bytes": out.stat().st_size, "train_rows": len(idx), "train_total": len(y),
            "test_rows": len(y_test), "pairs": obj["pairs"]}


# ============================================================================================== loading
def _decode_jpeg(b: bytes):
    """``data._decode_one`` on the bytes of a file: PIL, converted to RGB, uint8 H x W x C."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(b)) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8)


def _decode_rows(blob: torch.Tensor, offsets: torch.Tensor, crc: torch.Tensor, what: str) -> torch.Tensor:
    """The images of one packed split (uint8 N x C x H x W), each checked against its pixel checksum (a process
    pool, as ``data._decode_files``, while CUDA is not initialized)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import numpy as np

    raw = blob.numpy().tobytes()
    off = offsets.tolist()
    files = [raw[off[k]:off[k + 1]] for k in range(len(off) - 1)]
    workers = max(1, min(16, os.cpu_count() or 1))
    if workers > 1 and len(files) > 2000 and not torch.cuda.is_initialized():  # fork: before CUDA only
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as ex:
            arrs = list(ex.map(_decode_jpeg, files, chunksize=512))
    else:
        arrs = [_decode_jpeg(f) for f in files]
    want = crc.tolist()
    bad = sum(zlib.crc32(a.tobytes()) != want[k] for k, a in enumerate(arrs))
    if bad:
        raise ValueError(f"{what}: {bad} of {len(arrs)} images decode to other pixels here than where the data file "
                         "was built (another JPEG decoder?); the runs would not see the same images")
    return torch.from_numpy(np.stack(arrs)).permute(0, 3, 1, 2).contiguous()


def load_carried(path: Path, pairs) -> tuple[tuple, tuple, dict]:
    """The carried data file as full-size ``(x, y)`` for train and test: train rows the file does not carry are
    zeros. Checks: every pair's ``balanced_subset`` lies in the carried rows, the carried rows are exactly the union
    of the subsets the file was built for, and every decoded image matches its checksum."""
    d = torch.load(path, weights_only=True)
    if d.get("format") != DATA_FORMAT or d.get("dataset") != DATASET:
        raise ValueError(f"{path}: not a {DATASET} window data file of format {DATA_FORMAT}")
    y = d["train_labels"]
    idx = d["train_index"]
    built = set()
    for n, s in d["pairs"]:
        built.update(data_mod.balanced_subset(y, int(n), int(s)).tolist())
    if sorted(built) != idx.tolist():
        raise ValueError(f"{path}: its train rows are not the subsets it says it was built for")
    need = set()
    for n, s in pairs:
        need.update(data_mod.balanced_subset(y, n, s).tolist())
    missing = need - built
    if missing:
        raise ValueError(f"{path}: the queue draws {len(missing)} training images the file does not carry (pairs "
                         f"{sorted(set(pairs) - {tuple(p) for p in d['pairs']})}); rebuild it with "
                         f"`{PACK_COMMAND}`")
    x_rows = _decode_rows(d["train_jpeg"], d["train_offsets"], d["train_crc32"], "train")
    x_train = torch.zeros((len(y), *x_rows.shape[1:]), dtype=torch.uint8)
    x_train[idx] = x_rows
    x_test = _decode_rows(d["test_jpeg"], d["test_offsets"], d["test_crc32"], "test")
    info = {"file": str(path), "bytes": path.stat().st_size, "train_rows": len(idx), "train_total": len(y),
            "test_rows": len(d["test_labels"]), "drawn_rows": len(need), "pairs": [list(p) for p in d["pairs"]],
            "listing_sha256": d.get("listing_sha256")}
    return (x_train, y), (x_test, d["test_labels"]), info


@contextlib.contextmanager
def window_data(data_root: str, pairs):
    """The data root to hand to the library, and a description. A folder with the carried file: decoded here into
    the library's tensor cache (``data.cache_dir()``, a temporary folder for the duration) under a data root of
    its own; a data root holding ``cifar10-jpeg/``: used as it is."""
    root = Path(data_root).expanduser()
    carried = root if root.is_file() else root / DATA_FILE
    if not carried.is_file():
        if (root / data_mod.DATASETS[DATASET].folder).is_dir():
            yield str(root), {"data_root": str(root)}
            return
        raise SystemExit(f"--data-root {data_root}: neither {DATA_FILE} (`{PACK_COMMAND}`) nor a "
                         f"{data_mod.DATASETS[DATASET].folder}/ folder")
    (train, test, info) = load_carried(carried, pairs)
    old = os.environ.get("REPRO_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="paper_window_") as tmp:
        os.environ["REPRO_CACHE_DIR"] = str(Path(tmp) / "cache")
        fake_root = Path(tmp) / "root"
        fake_root.mkdir()
        try:
            ds = data_mod.DATASETS[DATASET]
            for split, (x, y) in (("train", train), ("test", test)):
                data_mod._cached(ds, split, fake_root, lambda x=x, y=y: (x, y))  # the decoded-dataset cache
            yield str(fake_root), info
        finally:
            if old is None:
                os.environ.pop("REPRO_CACHE_DIR", None)
            else:
                os.environ["REPRO_CACHE_DIR"] = old
