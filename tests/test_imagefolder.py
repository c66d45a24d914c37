"""Streaming ImageFolder data (repro_lib.imagefolder) and the timm models' scale-invariant names."""
import math
import random

import pytest
import torch

from repro_lib import imagefolder as imf
from repro_lib.data import DataNotFoundError, balanced_subset
from repro_lib.models import create
from repro_lib.models import timm_models


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    imf.write_synthetic_imagefolder(root, num_classes=4, per_class=8, val_per_class=3, size=32)
    return root


def _pil(w, h, seed=0):
    from PIL import Image

    g = torch.Generator().manual_seed(seed)
    return Image.fromarray(torch.randint(0, 256, (h, w, 3), generator=g, dtype=torch.uint8).numpy())


def test_eval_transform_is_torchvision_resize_256_centercrop_224():
    import torchvision.transforms as T

    img = _pil(300, 260)
    ref = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])(img)
    ours = imf.eval_transform(img, 224)
    assert ours.dtype == torch.uint8 and ours.shape == (3, 224, 224)
    assert torch.equal(ours, ref)


def test_random_resized_crop_matches_torchvision_distribution():
    """Same algorithm as torchvision's RandomResizedCrop.get_params (scale 0.08-1, ratio 3/4-4/3): the area
    fraction and log aspect ratio of 4000 draws agree in mean and spread, every crop lies inside the image."""
    import torchvision.transforms as T

    W, H, k = 64, 48, 4000
    rng = random.Random(0)
    torch.manual_seed(0)
    ours = [imf.random_resized_crop_params(W, H, rng) for _ in range(k)]
    ref = [T.RandomResizedCrop.get_params(torch.empty(3, H, W), [0.08, 1.0], [3 / 4, 4 / 3]) for _ in range(k)]
    for top, left, h, w in ours:
        assert 0 <= top and top + h <= H and 0 <= left and left + w <= W and h > 0 and w > 0

    def stats(crops):
        area = torch.tensor([h * w / (H * W) for _, _, h, w in crops])
        logr = torch.tensor([math.log(w / h) for _, _, h, w in crops])
        return area.mean(), area.std(), logr.mean(), logr.std()

    for a, b in zip(stats(ours), stats(ref)):
        assert abs(float(a) - float(b)) < 0.02


def test_training_augmentation_is_a_function_of_seed_epoch_index(folder):
    ds = imf.ImageFolderDataset("synthetic-imagefolder", "train", folder, image_size=24, train=True, seed=3)
    x1, y1, i1 = ds[5]
    x2, _, _ = ds[5]
    assert x1.shape == (3, 24, 24) and x1.dtype == torch.uint8 and i1 == 5 and y1 == int(ds.labels[5])
    assert torch.equal(x1, x2)  # same (seed, epoch, index): same crop, in any process
    different = 0
    for e in range(1, 4):
        ds.set_epoch(e)
        different += not torch.equal(ds[5][0], x1)
    assert different >= 2  # a new crop in (almost) every epoch


def test_subset_is_the_balanced_subset_of_the_labels(folder):
    ds = imf.ImageFolderDataset("synthetic-imagefolder", "train", folder, image_size=32, seed=0)
    assert len(ds) == 32 and ds.num_classes == 4 and ds.classes == sorted(ds.classes)
    labels = ds.labels.clone()
    ds.subset(12, seed=7)
    assert torch.equal(ds.indices, balanced_subset(labels, 12, 7))
    assert torch.bincount(labels[ds.indices], minlength=4).tolist() == [3, 3, 3, 3]


def test_uniform_subset_is_seeded_and_follows_the_class_sizes():
    """Yun et al. Sec. 6 (line 366): "80k randomly sampled data" -- a uniform draw, whose class counts follow the
    split's class sizes (here 100 vs 300 images: 1/4 and 3/4 of the draw), unlike the balanced n // C per class."""
    labels = torch.tensor([0] * 100 + [1] * 300)
    a = imf.uniform_subset(len(labels), 200, seed=3)
    assert torch.equal(a, imf.uniform_subset(len(labels), 200, seed=3))  # a function of (N, n, seed)
    assert len(a) == 200 == len(set(a.tolist())) and torch.equal(a, a.sort().values)
    assert not torch.equal(a, imf.uniform_subset(len(labels), 200, seed=4))
    counts = torch.stack([torch.bincount(labels[imf.uniform_subset(400, 200, s)], minlength=2)
                          for s in range(50)]).float().mean(0)
    assert abs(float(counts[0]) - 50) < 3 and abs(float(counts[1]) - 150) < 3  # vs 100/100 when balanced
    assert torch.bincount(labels[balanced_subset(labels, 200, 3)]).tolist() == [100, 100]
    with pytest.raises(ValueError, match="^n:"):
        imf.uniform_subset(10, 11, 0)


def test_dataset_subset_draws(folder):
    ds = imf.ImageFolderDataset("synthetic-imagefolder", "train", folder, image_size=32, seed=0)
    uni = imf.ImageFolderDataset("synthetic-imagefolder", "train", folder, image_size=32).subset(12, 7, "uniform")
    assert torch.equal(uni.indices, imf.uniform_subset(32, 12, 7))
    assert not torch.equal(uni.indices, balanced_subset(ds.labels, 12, 7))
    with pytest.raises(ValueError, match="^subset_draw:"):
        ds.subset(12, 7, "stratified")


def test_distributed_shards_are_disjoint_and_rebuild_the_global_batches(folder):
    """Rank r of w takes positions r, r+w, … of the epoch permutation; the union of the k-th per-rank batches is
    the k-th batch of a 1-process loader with the global batch size."""
    def ids(rank, world, batch, epoch):
        ds = imf.ImageFolderDataset("synthetic-imagefolder", "train", folder, image_size=8, seed=1).subset(16, 1)
        ld = imf.make_loader(ds, batch, rank, world, seed=1)
        ld.set_epoch(epoch)
        return [b[2].tolist() for b in ld]

    for epoch in (0, 1):
        single = ids(0, 1, 8, epoch)
        r0, r1 = ids(0, 2, 4, epoch), ids(1, 2, 4, epoch)
        assert len(single) == len(r0) == len(r1) == 2
        flat0, flat1 = sum(r0, []), sum(r1, [])
        assert not set(flat0) & set(flat1)
        assert sorted(flat0 + flat1) == sorted(sum(single, []))
        for k in range(2):
            assert sorted(r0[k] + r1[k]) == sorted(single[k])
    assert ids(0, 1, 8, 0) != ids(0, 1, 8, 1)  # reshuffled per epoch


def test_eval_shards_cover_each_image_once():
    n = 11
    shards = [list(imf.ShardSampler(n, r, 3)) for r in range(3)]
    assert sorted(sum(shards, [])) == list(range(n))
    assert [len(imf.ShardSampler(n, r, 3)) for r in range(3)] == [len(s) for s in shards]


def test_missing_root_says_what_to_put_where(tmp_path, monkeypatch):
    monkeypatch.delenv("REPRO_DATA_ROOT", raising=False)
    with pytest.raises(DataNotFoundError, match=r"(?s)imagenet/train/n01440764.*REPRO_DATA_ROOT"):
        imf.ImageFolderDataset("imagenet", "train", tmp_path)
    monkeypatch.setenv("REPRO_DATA_ROOT", str(tmp_path))
    with pytest.raises(DataNotFoundError, match=str(tmp_path)):
        imf.split_dir("imagenet", "val")


# ---------------------------------------------------------------------------------------------- timm models
def test_timm_scale_invariant_names_are_exactly_the_conv_bn_weights():
    """EfficientNet-B0: every conv except the squeeze-excitation convs feeds a BN (49 of 81); the classifier and
    the SE convs are excluded. fx tracing and module order agree."""
    m = create("efficientnet_b0", num_classes=10)
    convs = [n for n, mod in m.named_modules() if isinstance(mod, torch.nn.Conv2d)]
    expect = [f"{c}.weight" for c in convs if ".se." not in c]
    assert len(convs) == 81 and len(expect) == 49
    assert sorted(m.scale_invariant_names) == sorted(expect)
    assert set(timm_models.conv_norm_pairs(m, "fx")) == set(timm_models.conv_norm_pairs(m, "order"))
    with pytest.raises(ValueError, match="scale_invariant"):
        create("resnet50", num_classes=10, scale_invariant=True)


@pytest.mark.parametrize("name", ["test_efficientnet", "test_efficientnet_gn"])
def test_listed_weights_are_scale_invariant_and_the_others_are_not(name):
    """Scaling a listed weight by 3 leaves the train-mode output unchanged (BN batch statistics / GroupNorm);
    scaling an SE conv (not listed) changes it."""
    torch.manual_seed(0)
    m = create(name, num_classes=5).train()
    x = torch.randn(8, 3, 32, 32)
    with torch.no_grad():
        ref = m(x)
        params = dict(m.named_parameters())
        for n in m.scale_invariant_names:
            params[n].mul_(3.0)
        # equal up to BN's eps (var + 1e-5) and float32 rounding through the network
        assert (m(x) - ref).abs().max() < 2e-3
        se = [n for n in params if ".se.conv_reduce.weight" in n]
        assert se and se[0] not in m.scale_invariant_names
        params[se[0]].mul_(3.0)
        assert (m(x) - ref).abs().max() > 0.1
