"""Real images through the same code path (skips when the CIFAR-10 JPEG mirror is absent)."""
import pytest
import torch

from repro_lib import data
from repro_lib.config import RunConfig
from repro_lib.train import fit


def test_jpeg_folder_loads_cached_balanced(jpeg_root, monkeypatch):
    train = data.load_split("cifar10-jpeg", "train", jpeg_root)
    assert train.x.shape == (50000, 3, 32, 32) and train.x.dtype == torch.uint8
    assert torch.bincount(train.y).tolist() == [5000] * 10
    # the second load reads the cached uint8 tensors: no JPEG is decoded again (checked, not timed)
    monkeypatch.setattr(data, "_decode_folder", lambda *a, **k: pytest.fail("decoded the JPEG folder again"))
    again = data.load_split("cifar10-jpeg", "train", jpeg_root)
    assert torch.equal(again.y, train.y) and torch.equal(again.x, train.x)


def test_short_real_training_learns(jpeg_root):
    """1,000 real images, 6 epochs of a width-8 scale-invariant ResNet-18: well above chance (10 %)."""
    cfg = RunConfig(dataset="cifar10-jpeg", width=8, n=1000, n_test=1000, batch_size=100, lr=1.0,
                    weight_decay=5e-4, num_epochs=6, device="cpu", profile="cpu",
                    schedule_kwargs={"milestones": (0.67,)})
    res = fit(cfg, data_root=jpeg_root, progress=False)
    assert res["status"] == "finished"
    assert res["test_acc"] > 20.0, res["test_acc"]
    assert res["data"] == "cifar10-jpeg"
    assert all(h["angular_update"] > 0 for h in res["history"])
