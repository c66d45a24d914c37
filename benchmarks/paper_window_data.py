"""Build the data file ``benchmarks/paper_window.py`` carries to the GPU machine: ``gpu_data/cifar10-jpeg-window.pt``.

The whole ``cifar10-jpeg`` folder is too large to carry. A run of the queue sees only (a) the class-balanced
training subset its (N, seed) draws -- ``data.balanced_subset(y, N, seed)``, which indexes the full 50,000-image
training set in the folder's order (sorted class folders, sorted file names: ``data._list_folder``) -- and (b) the
full test set. The file holds exactly that, losslessly:

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
images and the test set: ~24 MiB.

    .venv/bin/python benchmarks/paper_window_data.py --data-root /path/holding/cifar10-jpeg
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import zlib
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paper_window import DATA_FILE, DATA_FORMAT, DATASET, SEEDS, build_queue, pairs_of  # noqa: E402

from repro_lib import data as data_mod  # noqa: E402


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
    tmp = out.with_name(f".{out.name}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, out)
    return {"file": str(out), "bytes": out.stat().st_size, "train_rows": len(idx), "train_total": len(y),
            "test_rows": len(y_test), "pairs": obj["pairs"]}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-root", default="", help="folder holding cifar10-jpeg/ (empty: $REPRO_DATA_ROOT, else "
                    "./data)")
    ap.add_argument("--out", default=f"gpu_data/{DATA_FILE}")
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    ap.add_argument("--tiny", action="store_true", help="the pairs of paper_window.py --tiny (for tests)")
    args = ap.parse_args(argv)
    pairs = pairs_of(c for it in build_queue(args.seeds, tiny=args.tiny) for c in it.cfgs)
    info = build(args.data_root or None, args.out, pairs)
    print(f"{info['file']}: {info['bytes'] / 2 ** 20:.1f} MiB, {info['train_rows']} of {info['train_total']} "
          f"training images (pairs (N, seed) {info['pairs']}), {info['test_rows']} test images", flush=True)
    return info


if __name__ == "__main__":
    main()
