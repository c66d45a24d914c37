"""Data: torchvision-equivalent crops, independent per-image augmentation, balanced subsets, clear errors."""
import pytest
import torch
import torchvision.transforms.v2.functional as TF

from repro_lib import data


def test_crop_matches_torchvision_random_crop_padding():
    """Our batched crop of the zero-padded uint8 image equals torchvision's crop of F.pad(img, 4) (what
    RandomCrop(32, padding=4) does) at the same offsets, for every offset."""
    g = torch.Generator().manual_seed(0)
    img = torch.randint(0, 256, (1, 3, 32, 32), dtype=torch.uint8, generator=g)
    padded = torch.nn.functional.pad(img, (4, 4, 4, 4))
    tv_padded = TF.pad(img[0], [4], fill=0)
    assert torch.equal(padded[0], tv_padded)
    # enumerate offsets by forcing the generator: run many crops of the same image, check each against torchvision
    batch = padded.expand(512, -1, -1, -1).contiguous()
    out = data.random_crop_flip(batch, 4, torch.Generator().manual_seed(1), flip=False)
    seen = set()
    for k in range(out.shape[0]):
        found = None
        for i in range(9):
            for j in range(9):
                if torch.equal(out[k], TF.crop(tv_padded, i, j, 32, 32)):
                    found = (i, j)
                    break
            if found:
                break
        assert found is not None, "crop is not a torchvision RandomCrop(32, padding=4) crop"
        seen.add(found)
    assert len(seen) > 60  # offsets cover the 9x9 range


def test_crops_and_flips_are_independent_across_images():
    g = torch.Generator().manual_seed(0)
    img = torch.randint(0, 256, (1, 3, 32, 32), dtype=torch.uint8, generator=g)
    batch = torch.nn.functional.pad(img, (4, 4, 4, 4)).expand(256, -1, -1, -1).contiguous()
    out = data.random_crop_flip(batch, 4, torch.Generator().manual_seed(3), flip=True)
    distinct = {o.numpy().tobytes() for o in out}
    assert len(distinct) > 100  # the same image gets different crops/flips within one batch
    # about half of the images are flipped: compare against unflipped crops at the same generator draws
    noflip = data.random_crop_flip(batch, 4, torch.Generator().manual_seed(3), flip=False)
    n_flipped = sum(not torch.equal(a, b) and torch.equal(a, b.flip(-1)) for a, b in zip(out, noflip))
    assert 90 < n_flipped < 166


def test_balanced_subset_is_balanced_seeded_and_shared():
    y = torch.arange(10).repeat_interleave(100)
    a = data.balanced_subset(y, 95, seed=0)
    assert len(a) == 95 and len(set(a.tolist())) == 95
    counts = torch.bincount(y[a], minlength=10)
    assert counts.max() - counts.min() <= 1 and counts[:5].tolist() == [10] * 5
    assert torch.equal(a, data.balanced_subset(y, 95, seed=0))
    assert not torch.equal(a, data.balanced_subset(y, 95, seed=1))
    with pytest.raises(ValueError, match="^n:"):
        data.balanced_subset(y, 2000, seed=0)


def test_batches_cover_every_image_once_keep_last_partial_batch_and_are_reproducible():
    info = data.DATASETS["cifar10"]
    ds = data.synthetic_split(info, "train", 300)
    tb = data.TensorBatches(ds, 128, train=True, augment=False, seed=5)
    batches = list(tb.epoch(0))
    assert [len(y) for _, y in batches] == [128, 128, 44]  # drop_last=False
    assert len(tb) == 3
    ys = torch.cat([y for _, y in batches])
    assert torch.equal(ys.sort().values, ds.y.sort().values)
    again = torch.cat([y for _, y in tb.epoch(0)])
    other = torch.cat([y for _, y in tb.epoch(1)])
    assert torch.equal(ys, again) and not torch.equal(ys, other)


def test_a_lone_last_training_image_is_dropped_and_a_different_one_each_epoch():
    """n mod B = 1 would end each epoch on a batch of one image, which batch norm cannot normalize in training
    mode: training drops it (floor(n / B) steps over n - 1 images), evaluation keeps every image; any other
    remainder keeps the last partial batch (ceil(n / B) steps)."""
    from repro_lib import profiles

    assert [data.train_steps(n, b) for n, b in [(257, 64), (258, 64), (256, 64), (3125, 2), (3125, 4), (5, 1)]] == \
        [(4, 256), (5, 258), (4, 256), (1562, 3124), (781, 3124), (5, 5)]
    assert profiles.steps_per_epoch(391, 2) == 195 and profiles.steps_per_epoch(3125, 2048) == 2
    with pytest.raises(ValueError, match="batch_size"):
        data.train_steps(10, 0)
    ds = data.synthetic_split(data.DATASETS["cifar10"], "train", 257)
    tb = data.TensorBatches(ds, 64, train=True, augment=True, seed=3)
    assert len(tb) == 4 and tb.images == 256
    dropped = set()
    for epoch in range(6):
        draws = list(tb.draws(epoch))
        assert [len(idx) for idx, _ in draws] == [64] * 4 and all(len(c[0]) == 64 for _, c in draws)
        idx = torch.cat([i for i, _ in draws])
        assert len(set(idx.tolist())) == 256
        dropped |= set(range(257)) - set(idx.tolist())
    assert len(dropped) > 1  # the permutation covers all 257 images: not always the same one left out
    ev = data.TensorBatches(ds, 64, train=False)
    assert len(ev) == 5 and ev.images == 257 and sum(len(y) for _, y in ev.epoch()) == 257


def test_synthetic_images_do_not_depend_on_the_default_dtype():
    """A float64 test (fit vs fit_many) must not leave other runs a different synthetic set through a cache."""
    info = data.DATASETS["cifar10"]
    a = data.synthetic_split(info, "test", 50)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        b = data.synthetic_split(info, "test", 50)
    finally:
        torch.set_default_dtype(old)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)


def test_normalize():
    x = torch.full((2, 3, 4, 4), 255, dtype=torch.uint8)
    out = data.normalize(x, (0.5, 0.5, 0.5), (0.25, 0.5, 1.0))
    assert torch.allclose(out[:, 0], torch.full_like(out[:, 0], 2.0))
    assert torch.allclose(out[:, 2], torch.full_like(out[:, 2], 0.5))


def test_synthetic_is_labelled_deterministic_and_shaped_like_the_real_data():
    for name in ("cifar10", "cifar100", "tiny_imagenet"):
        info = data.DATASETS[name]
        a = data.load_split(name, "train", synthetic=True, synthetic_n=200)
        assert a.name == f"synthetic-{name}" and a.synthetic
        assert a.x.shape == (200, 3, info.image_size, info.image_size) and a.x.dtype == torch.uint8
        assert a.num_classes == info.num_classes and int(a.y.max()) < info.num_classes
        assert torch.equal(a.x, data.load_split(name, "train", synthetic=True, synthetic_n=200).x)


def test_missing_data_says_what_to_put_where(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(data.DataNotFoundError, match="cifar-10-batches-py"):
        data.load_split("cifar10", "train", tmp_path)
    with pytest.raises(data.DataNotFoundError, match=r"cifar10-jpeg/\{train,test\}"):
        data.load_split("cifar10-jpeg", "train", tmp_path)
    with pytest.raises(data.DataNotFoundError, match="val_annotations.txt"):
        data.load_split("tiny_imagenet", "test", tmp_path)
    monkeypatch.setenv("REPRO_DATA_ROOT", str(tmp_path / "from_env"))
    assert data.data_root("") == tmp_path / "from_env"
    assert data.data_root("x") == data.data_root("x")


def _write_jpegs(folder, n, size, color):
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        Image.new("RGB", (size, size), color).save(folder / f"{i:04d}.JPEG")


def test_tiny_imagenet_official_layout_and_cache(tmp_path, monkeypatch):
    """train/<wnid>/images/*.JPEG and val/images + val_annotations.txt, read through the tensor cache."""
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    base = tmp_path / "tiny-imagenet-200"
    wnids = ["n02", "n01"]
    (base).mkdir()
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")
    _write_jpegs(base / "train" / "n01" / "images", 3, 64, (255, 0, 0))
    _write_jpegs(base / "train" / "n02" / "images", 2, 64, (0, 0, 255))
    _write_jpegs(base / "val" / "images", 2, 64, (0, 255, 0))
    (base / "val" / "val_annotations.txt").write_text("0000.JPEG\tn02\t0\t0\t10\t10\n0001.JPEG\tn01\t0\t0\t5\t5\n")
    tr = data.load_split("tiny_imagenet", "train", tmp_path)
    assert tr.x.shape == (5, 3, 64, 64) and tr.y.tolist() == [0, 0, 0, 1, 1]  # sorted wnids: n01=0, n02=1
    assert int(tr.x[0, 0].float().mean()) > 200 and int(tr.x[4, 2].float().mean()) > 200
    te = data.load_split("tiny_imagenet", "test", tmp_path)
    assert te.y.tolist() == [1, 0]
    assert len(list((tmp_path / "cache").glob("tiny_imagenet-*.pt"))) == 2
    # second load comes from the cache even if the images are gone
    import shutil
    shutil.rmtree(base / "train")
    assert torch.equal(data.load_split("tiny_imagenet", "train", tmp_path).x, tr.x)
