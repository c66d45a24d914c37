"""The CIFAR-10 JPEG stand-in rebuilt from CIFAR-10 (``repro_lib.data_build``, ``python -m repro_lib data``).

The builder runs on a small archive in CIFAR-10's python format written here (random images, a few per class); what
it writes is compared with the published folder's layout, names, quantization tables and subsampling -- through the
committed manifest everywhere, and with the folder itself where it is present (``conftest.SHARED_DATA``).
"""
import hashlib
import io
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, JpegImagePlugin

from conftest import SHARED_DATA
from repro_lib import data, data_build
from repro_lib.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
PER_BATCH = 7  # images per batch file: the classes' counters run across the five training batches


def write_cifar(root: Path, seed: int = 0) -> dict:
    """A CIFAR-10 "python version" folder under ``root`` (batches pickled as dicts, as the real ones load with
    ``encoding="latin1"``): random images, labels cycling through the classes; returns {split: (images, labels)}."""
    rng = np.random.default_rng(seed)
    src = root / data_build.CIFAR_FOLDER
    src.mkdir(parents=True)
    out, k = {}, 0
    for split, names in data_build.BATCHES.items():
        xs, ys = [], []
        for name in names:
            x = rng.integers(0, 256, (PER_BATCH, 3, 32, 32), dtype=np.uint8)
            y = [(k + i) % 10 for i in range(PER_BATCH)]
            k += PER_BATCH
            with open(src / name, "wb") as f:
                pickle.dump({"batch_label": name, "data": x.reshape(PER_BATCH, 3072), "labels": y,
                             "filenames": [f"img{i}.png" for i in range(PER_BATCH)]}, f)
            xs.append(x.transpose(0, 2, 3, 1))
            ys += y
        out[split] = (np.concatenate(xs), ys)
    with open(src / data_build.META, "wb") as f:
        pickle.dump({"label_names": CLASSES, "num_cases_per_batch": PER_BATCH, "num_vis": 3072}, f)
    return out


@pytest.fixture
def cifar(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path, write_cifar(tmp_path)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------------------------------ the build
def test_build_writes_the_layout_names_and_order(cifar):
    root, images = cifar
    res = data_build.build_cifar10_jpeg(root, download=False, progress=False)
    assert res.built and res.folder == root / "cifar10-jpeg" and res.images == 6 * PER_BATCH
    assert res.official_input is False  # random batches: their MD5s are not CIFAR-10's, and it says so
    assert "not the official CIFAR-10" in res.text()
    assert not list(root.glob(".cifar10-jpeg.*"))  # nothing left beside it
    for split, (x, y) in images.items():
        assert sorted(p.name for p in (res.folder / split).iterdir()) == CLASSES
        for c, cls in enumerate(CLASSES):
            want = [i for i, label in enumerate(y) if label == c]  # this class's images, in the batches' order
            names = sorted(p.name for p in (res.folder / split / cls).iterdir())
            assert names == [f"{k:04d}.jpg" for k in range(len(want))]
            for k, i in enumerate(want):  # NNNN.jpg is the class's k-th image: the nearest of the inputs
                with Image.open(res.folder / split / cls / names[k]) as im:
                    got = np.asarray(im.convert("RGB"), dtype=float)
                errors = [np.abs(got - x[j]).mean() for j in range(len(x))]
                assert int(np.argmin(errors)) == i
    # the folder loads as the data set the notebooks train on (labels: the class folders, in order)
    test = data.load_split("cifar10-jpeg", "test", root)
    assert test.y.tolist() == sorted(images["test"][1])


def test_encoder_settings_are_the_published_files(cifar):
    """The header a build writes (everything before the scan data: JFIF APP0, quantization tables, baseline frame
    with 4:2:0 sampling, Huffman tables, scan header) is the published files', byte for byte; and it is what
    Pillow writes by default."""
    root, _ = cifar
    folder = data_build.build_cifar10_jpeg(root, download=False, progress=False).folder
    built = (folder / "train" / "frog" / "0000.jpg").read_bytes()
    published_header = bytes.fromhex(data_build.load_manifest()["jpeg_header"])
    assert data_build.jpeg_header(built) == published_header
    rgb = np.random.default_rng(5).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "JPEG")
    assert data_build.encode(rgb) == buf.getvalue()
    with Image.open(io.BytesIO(built)) as im:
        assert im.info.get("jfif_version") == (1, 1) and "progressive" not in im.info
        assert JpegImagePlugin.get_sampling(im) == 2  # 4:2:0
        assert im.quantization[0][:8] == [8, 6, 5, 8, 12, 20, 26, 31]  # libjpeg's luminance table at quality 75
        tables = im.quantization
    published = SHARED_DATA / "cifar10-jpeg" / "train" / "frog" / "0000.jpg"
    if not published.is_file():
        pytest.skip(f"compared with the manifest only: no published folder at {SHARED_DATA / 'cifar10-jpeg'}")
    with Image.open(published) as im:
        assert im.quantization == tables and JpegImagePlugin.get_sampling(im) == 2
        assert im.info.get("jfif_version") == (1, 1) and im.info.get("jfif_density") == (1, 1)
    assert data_build.jpeg_header(published.read_bytes()) == published_header


def test_a_second_build_leaves_the_folder_alone_and_force_rebuilds_the_same_bytes(cifar):
    root, _ = cifar
    first = data_build.build_cifar10_jpeg(root, download=False, progress=False)
    before = _files(first.folder)
    mtimes = {p: p.stat().st_mtime_ns for p in first.folder.rglob("*.jpg")}
    again = data_build.build_cifar10_jpeg(root, download=False, progress=False)
    assert not again.built and "already there" in again.text()
    assert {p: p.stat().st_mtime_ns for p in first.folder.rglob("*.jpg")} == mtimes
    data.load_split("cifar10-jpeg", "train", root)  # decoded and cached
    forced = data_build.build_cifar10_jpeg(root, download=False, force=True, progress=False)
    assert forced.built and _files(forced.folder) == before  # deterministic: the same bytes
    assert not list(root.glob(".cifar10-jpeg.*"))
    assert not data._cache_path(data.DATASETS["cifar10-jpeg"], "train", root).exists()  # the stale decode dropped


def test_an_interrupted_build_leaves_no_folder(cifar, monkeypatch):
    root, _ = cifar
    calls, encode = [], data_build.encode

    def stop_at_the_tenth(rgb):
        calls.append(1)
        if len(calls) == 10:
            raise KeyboardInterrupt
        return encode(rgb)

    monkeypatch.setattr(data_build, "encode", stop_at_the_tenth)
    with pytest.raises(KeyboardInterrupt):
        data_build.build_cifar10_jpeg(root, download=False, progress=False)
    assert not (root / "cifar10-jpeg").exists() and not list(root.glob(".cifar10-jpeg.*"))
    monkeypatch.setattr(data_build, "encode", encode)
    whole = _files(data_build.build_cifar10_jpeg(root, download=False, progress=False).folder)
    calls.clear()
    monkeypatch.setattr(data_build, "encode", stop_at_the_tenth)
    with pytest.raises(KeyboardInterrupt):  # --force interrupted: the folder that was there stays, untouched
        data_build.build_cifar10_jpeg(root, download=False, force=True, progress=False)
    assert _files(root / "cifar10-jpeg") == whole and not list(root.glob(".cifar10-jpeg.*"))


KILLED_BUILD = """
import os, signal, sys
from repro_lib import data_build
encode, n = data_build.encode, []
def encode_then_die(rgb):
    n.append(1)
    if len(n) == 10:
        os.kill(os.getpid(), signal.SIGKILL)
    return encode(rgb)
data_build.encode = encode_then_die
data_build.build_cifar10_jpeg(sys.argv[1], download=False, progress=False)
"""


def test_a_killed_build_is_never_taken_for_a_whole_one(cifar):
    """SIGKILL at the tenth image: no cifar10-jpeg folder, only the partial one; the next build removes it."""
    root, _ = cifar
    proc = subprocess.run([sys.executable, "-c", KILLED_BUILD, str(root)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not (root / "cifar10-jpeg").exists()
    assert len(list(root.glob(".cifar10-jpeg.partial-*"))) == 1
    with pytest.raises(data.DataNotFoundError):  # the notebooks do not find a data set there
        data.require("cifar10-jpeg", root)
    assert data_build.build_cifar10_jpeg(root, download=False, progress=False).built
    assert not list(root.glob(".cifar10-jpeg.*")) and (root / "cifar10-jpeg" / "test").is_dir()


def test_missing_batches_are_one_error_naming_the_file(tmp_path):
    with pytest.raises(data_build.BuildError, match="no folder .*cifar-10-batches-py.*--no-download"):
        data_build.build_cifar10_jpeg(tmp_path, download=False, progress=False)
    write_cifar(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(data_build.BuildError, match="no file .*data_batch_3"):
        data_build.build_cifar10_jpeg(tmp_path, download=False, progress=False)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").write_bytes(b"not a pickle")
    with pytest.raises(data_build.BuildError, match="data_batch_3.* is not a CIFAR-10 batch"):
        data_build.build_cifar10_jpeg(tmp_path, download=False, progress=False)
    assert not list(tmp_path.glob("*cifar10-jpeg*"))


def test_a_failed_download_is_one_line_saying_what_to_do(tmp_path, monkeypatch):
    def offline(name, root, download):
        raise data._missing(data.DATASETS[name], root, "the download failed (URLError: no network)", True)

    monkeypatch.setattr(data, "require", offline)
    with pytest.raises(data_build.BuildError) as e:
        data_build.build_cifar10_jpeg(tmp_path, download=True, progress=False)
    assert "\n" not in str(e.value) and "download failed" in str(e.value)
    assert data_build.CIFAR_URL in str(e.value)


# ------------------------------------------------------------------------------------------------ verify
def test_the_manifest_is_the_published_folder(jpeg_root):
    """The committed manifest, computed again from the published folder (60,000 files: about 2 s of CPU); and
    verify accepts that folder."""
    folder = jpeg_root / "cifar10-jpeg"
    assert data_build.manifest_of(folder) == data_build.load_manifest()
    result = data_build.verify(folder)
    assert result.identical and result.files == 60_000 and result.classes == 20
    assert "identical" in result.text() and "bit for bit" in result.text()


def test_the_manifest_is_compact_and_packaged():
    man = data_build.load_manifest()
    assert data_build.MANIFEST.stat().st_size < 1_000_000
    assert [sum(c["files"] for c in man["splits"][s].values()) for s in ("train", "test")] == [50_000, 10_000]
    assert all(len(c["prefixes"]) == c["files"] * data_build.PREFIX_HEX for s in man["splits"].values()
               for c in s.values())
    assert "data_manifests/*.json" in (ROOT / "pyproject.toml").read_text()


def test_verify_names_the_file_that_differs_in_a_copy_of_the_published_folder(jpeg_root, tmp_path):
    """One class of the published folder copied (test/cat, 1,000 files) against its part of the manifest, then one
    byte of one file's scan data changed: verify names that file and says the header is the published one."""
    man = data_build.load_manifest()
    sub = {**man, "splits": {"train": {}, "test": {"cat": man["splits"]["test"]["cat"]}}}
    copy = tmp_path / "cifar10-jpeg"
    (copy / "train").mkdir(parents=True)
    shutil.copytree(jpeg_root / "cifar10-jpeg" / "test" / "cat", copy / "test" / "cat")
    assert data_build.verify(copy, sub).identical
    f = copy / "test" / "cat" / "0417.jpg"
    b = bytearray(f.read_bytes())
    b[-10] ^= 0x01  # inside the scan data
    f.write_bytes(bytes(b))
    result = data_build.verify(copy, sub)
    assert not result.identical and len(result.differences) == 1
    first = result.differences[0]
    assert (first.split, first.cls, first.file, first.what) == ("test", "cat", "0417.jpg", "content differs")
    assert result.header_matches is True
    assert "first at test/cat/0417.jpg" in result.text() and "not bit for bit" in result.text()


@pytest.fixture
def built_with_manifest(cifar, monkeypatch):
    """A folder built from the small archive, with its own manifest standing in for the published one."""
    root, _ = cifar
    folder = data_build.build_cifar10_jpeg(root, download=False, progress=False).folder
    path = data_build.write_manifest(folder, root / "manifest.json")
    monkeypatch.setattr(data_build, "MANIFEST", path)
    return root, folder


def test_verify_exits_0_when_identical_and_1_naming_the_first_difference(built_with_manifest, capsys):
    root, folder = built_with_manifest
    assert main(["data", "verify", "cifar10-jpeg", "--root", str(root)]) == 0
    assert "is identical" in capsys.readouterr().out
    (folder / "train" / "dog" / "0001.jpg").write_bytes(data_build.encode(np.zeros((32, 32, 3), np.uint8)))
    (folder / "test" / "ship" / "0000.jpg").unlink()
    assert main(["data", "verify", "cifar10-jpeg", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "first at train/dog/0001.jpg (content differs); 2 difference(s)" in out
    (folder / "train" / "dog" / "0001.jpg").unlink()
    (folder / "train" / "dog" / "extra.jpg").write_bytes(b"")
    shutil.rmtree(folder / "test" / "ship")
    diffs = data_build.verify(folder).differences
    assert [(d.where(), d.what) for d in diffs] == [
        ("train/dog/0001.jpg", "file missing"), ("train/dog/extra.jpg", "file not in the published folder"),
        ("test/ship", "class folder missing")]


def test_a_differently_encoded_folder_is_told_apart_by_its_header(built_with_manifest):
    root, folder = built_with_manifest
    f = folder / "train" / "bird" / "0000.jpg"
    with Image.open(f) as im:
        rgb = np.asarray(im.convert("RGB"))
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "JPEG", quality=90)
    f.write_bytes(buf.getvalue())
    result = data_build.verify(folder)
    assert result.header_matches is False and "encoded with other settings" in result.text()


def test_the_class_digest_is_sha256sum_of_sha256sum(built_with_manifest):
    """What a user can check without Python: ``sha256sum *.jpg | sha256sum`` in a class folder."""
    if shutil.which("sha256sum") is None:
        pytest.skip("no sha256sum command")
    _, folder = built_with_manifest
    d = folder / "test" / "ship"
    listing = subprocess.run("sha256sum *.jpg", shell=True, cwd=d, capture_output=True, check=True,
                             env={**os.environ, "LC_ALL": "C"}).stdout
    want = data_build.load_manifest()["splits"]["test"]["ship"]["sha256"]
    assert hashlib.sha256(listing).hexdigest() == want == data_build.class_digest(data_build.file_digests(d))


# ------------------------------------------------------------------------------------------------ command line
def test_the_command_builds_then_says_how_it_compares(cifar, capsys):
    root, _ = cifar
    assert main(["data", "cifar10-jpeg", "--root", str(root), "--no-download", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "built " in out and "differs from the published cifar10-jpeg folder" in out  # random images differ
    assert main(["data", "cifar10-jpeg", "--root", str(root), "--quiet"]) == 0
    assert "already there" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["data"], "required"),
    (["data", "cifar100"], "expected cifar10-jpeg"),
    (["data", "verify"], "expected verify cifar10-jpeg"),
    (["data", "verify", "cifar10-jpeg", "--force"], "options of the build"),
    (["data", "cifar10-jpeg", "--bogus"], "unrecognized arguments"),
    (["data", "cifar10-jpeg", "--no-download"], "cifar-10-batches-py"),
    (["data", "verify", "cifar10-jpeg"], "no folder"),
])
def test_command_line_errors_are_one_line_with_exit_status_2(argv, words, tmp_path, capsys):
    argv = [*argv, "--root", str(tmp_path)] if "cifar10-jpeg" in argv else argv
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and words in err
    assert len(err.strip().splitlines()) == 1, err


def test_the_data_set_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    assert "python -m repro_lib data cifar10-jpeg" in data.DATASETS["cifar10-jpeg"].source
    with pytest.raises(data.DataNotFoundError, match="python -m repro_lib data cifar10-jpeg"):
        data.require("cifar10-jpeg", tmp_path)


def test_the_rerun_line_says_how_to_get_the_data():
    from repro_lib.results import screen

    line = screen.rerun("adamp_cifar", "cpu", {"dataset": "cifar10-jpeg"}, minutes=85)
    assert line.startswith("**Re-run:** `python -m repro_lib run --profile cpu adamp_cifar -p dataset cifar10-jpeg` "
                           "(its data: `python -m repro_lib data cifar10-jpeg`)")
    assert "its data" not in screen.rerun("adamp_cifar", "cpu", {"dataset": "cifar10"}, minutes=85)


def test_make_data_builds_it():
    make = (ROOT / "Makefile").read_text()
    assert "\ndata:" in make and "-m repro_lib data cifar10-jpeg" in make
