"""fit_imagefolder single-process and under a REAL 2-process ``torchrun`` (gloo, CPU) on a synthetic ImageFolder.

Why the 1-process and 2-process runs must agree (``repro_lib.imagefolder.make_loader``): the DistributedSampler
shards rebuild the 1-process global batches, each rank's loss is its batch mean and DDP averages gradients, and
the crop of an image depends only on (seed, epoch, image index). What would break it is BatchNorm, whose batch
statistics are per rank in DDP (B/2 images instead of B; SyncBatchNorm needs CUDA): the exact comparison uses
timm's ``test_efficientnet_gn`` (GroupNorm normalizes each sample on its own, so it is batch-independent).
Because of BatchNorm the process count is part of a run's identity (``world_size``, hashed when not 1), so the
2-process run of the GroupNorm net is stored under its own hash even though it equals the 1-process run.
"""
import json
import os
import subprocess

import pytest
import torch

from repro_lib import imagefolder as imf
from repro_lib import distributed as D
from repro_lib.distributed import ImageFolderConfig, fit_imagefolder, shell_command, torchrun_command
from repro_lib.papers.yun2022.section6 import predict_weight_decay, section6_plan
from repro_lib.store import Store

CFG = dict(model="test_efficientnet_gn", dataset="synthetic-imagefolder", image_size=32, n=16, batch_size=8,
           num_epochs=2, lr=0.02, weight_decay=1e-3, num_workers=0, device="cpu", seed=1)
CFG2 = {**CFG, "world_size": 2}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A 2-process torchrun run and a 1-process run of the same config (16 of 24 images, global batch 8)."""
    tmp = tmp_path_factory.mktemp("dist")
    data = tmp / "data"
    imf.write_synthetic_imagefolder(data, num_classes=4, per_class=6, val_per_class=3, size=32)
    cmd = torchrun_command(CFG2, results_dir=tmp / "res2", data_root=data, metrics_path=tmp / "m2.jsonl")
    cmd += ["--state-out", str(tmp / "s2"), "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:  # the 1-process run overlaps with the torchrun start-up
        single = fit_imagefolder(CFG, store=Store(tmp / "res1"), data_root=data, progress=False,
                                 state_out=tmp / "s1")
        out, _ = proc.communicate(timeout=1800)  # a guard against a hang only
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-4000:]
    load = lambda p: torch.load(p, weights_only=False)  # noqa: E731
    return dict(tmp=tmp, data=data, single=single, s1=load(tmp / "s1" / "rank0.pt"),
                r0=load(tmp / "s2" / "rank0.pt"), r1=load(tmp / "s2" / "rank1.pt"), stdout=out)


def test_ranks_see_disjoint_shards_covering_the_subset(runs):
    ds = imf.ImageFolderDataset("synthetic-imagefolder", "train", runs["data"], 32, seed=1).subset(16, 1)
    subset = sorted(ds.indices.tolist())
    assert len(runs["r0"]["seen"]) == len(runs["r1"]["seen"]) == 2  # epochs
    for e in range(2):
        a, b = runs["r0"]["seen"][e], runs["r1"]["seen"][e]
        assert len(a) == len(b) == 8 and not set(a) & set(b)
        assert sorted(a + b) == subset == sorted(runs["s1"]["seen"][e])
    assert runs["r0"]["seen"][0] != runs["r0"]["seen"][1]  # set_epoch reshuffles


def test_gradients_are_averaged_parameters_identical_on_both_ranks(runs):
    a, b = runs["r0"]["model"], runs["r1"]["model"]
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_two_processes_equal_one_process_with_the_same_global_batch(runs):
    one, two = runs["s1"]["model"], runs["r0"]["model"]
    for k in one:
        assert torch.allclose(one[k], two[k], rtol=1e-4, atol=1e-5), k
    # …and training did move the weights (the comparison is not between two untouched initialisations)
    from repro_lib.models import create

    torch.manual_seed(CFG["seed"])
    fresh = create(CFG["model"], num_classes=4).state_dict()
    moved = max(float((fresh[k] - one[k]).abs().max()) for k in one if one[k].is_floating_point())
    assert moved > 1e-3


def test_rank0_writes_store_and_metrics(runs):
    cfg = ImageFolderConfig.from_dict(CFG2)
    st = Store(runs["tmp"] / "res2")
    res = st.get(cfg)
    assert res["status"] == "finished" and res["world_size"] == 2 and res["n_train"] == 16
    hist = st.history(cfg)
    assert [h["epoch"] for h in hist] == [1, 2] and all(h["angular_update"] > 0 for h in hist)
    lines = [json.loads(x) for x in (runs["tmp"] / "m2.jsonl").read_text().splitlines()]
    assert [x["epoch"] for x in lines] == [1, 2] and lines[0]["hash"] == cfg.hash
    # the same metrics (summed over ranks) as the 1-process run
    for h1, h2 in zip(runs["single"]["history"], hist):
        assert abs(h1["train_loss"] - h2["train_loss"]) < 1e-4 and h1["test_acc"] == h2["test_acc"]
        assert abs(h1["angular_update"] - h2["angular_update"]) < 1e-4
    assert res["tuning_factor"] == pytest.approx(16 * 0.02 * 1e-3 / (8 * 0.1))
    # a finished run is read back from the store, not retrained (no torchrun launched: data_root is bogus)
    [again] = D.run_configs([CFG2], st, data_root="/nonexistent", progress=False)
    assert again["test_acc"] == res["test_acc"] and len(again["history"]) == 2
    # ...but only under its own process count: the 1-process config is another run, not in this store
    assert st.get(ImageFolderConfig.from_dict(CFG)) is None


def test_world_size_is_part_of_the_run_identity_and_checked_at_launch(runs, tmp_path):
    one, two = ImageFolderConfig.from_dict(CFG), ImageFolderConfig.from_dict(CFG2)
    assert one.hash == one.replace(world_size=1).hash  # runs stored before the field existed keep their hash
    assert one.hash != two.hash
    with pytest.raises(ValueError, match="^batch_size: 8 is not divisible by world_size=3"):
        ImageFolderConfig.from_dict({**CFG, "world_size": 3})
    # a 2-process config launched as one process fails before training, naming the parameter
    store = Store(tmp_path / "res")
    with pytest.raises(ValueError, match="^world_size: the config says world_size=2 but torchrun started 1"):
        fit_imagefolder(CFG2, store=store, data_root=runs["data"], progress=False)
    assert store.status(two) is None and store.load_checkpoint(two) is None
    with pytest.raises(ValueError, match="^world_size:.*world_size=1.*nproc = 2"):
        D.run_configs([CFG], store, data_root=runs["data"], nproc=2)
    assert store.status(one) is None
    # torchrun_command launches cfg.world_size processes; another nproc is another run, visible in its JSON
    cmd = torchrun_command(CFG2)
    assert "--nproc_per_node=2" in cmd and json.loads(cmd[cmd.index("--config") + 1])["world_size"] == 2
    cmd8 = torchrun_command(CFG, 8)
    assert "--nproc_per_node=8" in cmd8 and json.loads(cmd8[cmd8.index("--config") + 1])["world_size"] == 8


def test_a_stored_run_of_another_process_count_is_neither_reused_nor_resumed(runs, tmp_path):
    """Runs stored before ``world_size`` was a field share the 1-process hash: a result or checkpoint that
    recorded 2 processes must not be returned to, or resumed by, a 1-process launch."""
    one = ImageFolderConfig.from_dict(CFG)
    store = Store(tmp_path / "legacy")
    store.start(one)
    store.save_checkpoint(one, {"epoch": 1, "world_size": 2, "model": {}, "optimizer": {}, "tracker": None,
                                "history": []})
    with pytest.raises(ValueError, match="^world_size: the store's checkpoint .* trained on 2 process"):
        fit_imagefolder(CFG, store=store, data_root=runs["data"], progress=False)
    store.finish(one, {**runs["single"], "world_size": 2})
    with pytest.raises(ValueError, match="^world_size: the store's finished result .* trained on 2 process"):
        fit_imagefolder(CFG, store=store, data_root=runs["data"], progress=False)


def test_bn_running_statistics_are_equal_on_every_rank_at_evaluation(tmp_path):
    """DDP broadcasts buffers only at the start of a forward; ``sync_buffers`` copies rank 0's BatchNorm running
    statistics to every rank after each epoch, so the sharded evaluation (and the final state) uses one model."""
    data = tmp_path / "data"
    imf.write_synthetic_imagefolder(data, num_classes=4, per_class=6, val_per_class=3, size=32)
    cfg = {**CFG2, "model": "test_efficientnet", "num_epochs": 1}
    cmd = torchrun_command(cfg, data_root=data) + ["--state-out", str(tmp_path / "s"), "--no-progress"]
    out = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                         timeout=1800)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    r0, r1 = (torch.load(tmp_path / "s" / f"rank{r}.pt", weights_only=False)["model"] for r in (0, 1))
    bufs = [k for k in r0 if "running_mean" in k or "running_var" in k or "num_batches_tracked" in k]
    assert bufs and all(torch.equal(r0[k], r1[k]) for k in bufs)
    # the statistics did move (each rank saw different images: without the broadcast they would differ)
    assert any(float(r0[k].abs().max()) > 0 for k in bufs if "running_mean" in k)
    assert all(int(r0[k]) == 2 for k in bufs if "num_batches_tracked" in k)  # 16 images / global batch 8


def test_build_data_rejects_splits_with_different_classes(tmp_path):
    data = tmp_path / "data"
    imf.write_synthetic_imagefolder(data, num_classes=3, per_class=4, val_per_class=2, size=16)
    (data / "synthetic-imagefolder" / "val" / "c0001").rename(data / "synthetic-imagefolder" / "val" / "c0009")
    with pytest.raises(ValueError, match=r"^val_split: .*only in train: \['c0001'\], only in val: \['c0009'\]"):
        D.build_data(ImageFolderConfig.from_dict({**CFG, "n": 0, "image_size": 16}), data)


def test_estimate_gpu_hours_counts_training_and_evaluation():
    """N·epochs training images + 1/3 × N_val per evaluation, at the reference throughput (paper sizes:
    80k training images, 50k validation images evaluated every epoch)."""
    c = ImageFolderConfig(n=80_000, num_epochs=200)
    train = 80_000 * 200 / 1000.0 / 3600
    assert D.estimate_gpu_hours([c]) == pytest.approx(train + 50_000 * 200 / 3 / 1000.0 / 3600)
    assert D.estimate_gpu_hours([c.replace(eval_every=200)]) == pytest.approx(train + 50_000 / 3 / 1000.0 / 3600)


def test_torchrun_command_is_printable_and_config_validated():
    line = shell_command(torchrun_command(CFG, 8, results_dir="results", data_root="/data"))
    assert line.startswith("torchrun --standalone --nproc_per_node=8 -m repro_lib.distributed --config ")
    with pytest.raises(ValueError, match="weight_decy"):
        ImageFolderConfig.from_dict({**CFG, "weight_decy": 1.0})
    with pytest.raises(ValueError, match="model"):
        ImageFolderConfig.from_dict({**CFG, "model": "nope"})


def test_section6_prediction_and_profiles():
    """Sec. 6: λ = 0.0016 on 80k images keeps its tuning factor at λ = 1e-4 on 1.28M (B, η, μ unchanged)."""
    assert predict_weight_decay(0.0016, 80_000, 1_280_000, 512, 0.1, 0.9) == pytest.approx(1e-4)
    # a different batch on the full data: the tuning factor N·η·λ/(B(1−μ)) is what is kept
    wd = predict_weight_decay(0.0016, 80_000, 1_280_000, 512, 0.1, 0.9, batch_size_full=1024)
    assert 1_280_000 * 0.1 * wd / (1024 * 0.1) == pytest.approx(80_000 * 0.1 * 0.0016 / (512 * 0.1))
    for profile in ("smoke", "cpu", "gpu", "paper"):
        sub, full, sizes = section6_plan(profile)
        assert sub and full and all(c.profile == profile for c in sub + full)
        assert {c.subset_draw for c in sub + full} == {"uniform"}  # line 366: "80k randomly sampled data"
    sub, full, _ = section6_plan("paper")
    assert {c.model for c in sub} == {"efficientnet_b0"} and sub[0].batch_size == 512 and sub[0].n == 80000
    assert {c.world_size for c in sub + full} == {1}
    assert {c.world_size for c in section6_plan("paper", world_size=8)[0]} == {8}
    assert sub[0].num_epochs == 200 and list(sub[0].schedule_kwargs["milestones"]) == [0.5, 0.75, 0.9]
    with pytest.raises(ValueError, match="profile"):
        section6_plan("laptop")


def test_interrupted_run_resumes_from_its_checkpoint_to_the_same_weights(runs, tmp_path, monkeypatch):
    """Crash after epoch 1's checkpoint (while checkpointing epoch 2), rerun: the run resumes at epoch 2 and ends
    with the uninterrupted 1-process run's weights (the crops and the order are functions of (seed, epoch))."""
    store = Store(tmp_path / "res")
    real_save = Store.save_checkpoint

    def crash_at_epoch_2(self, c, state):
        if state["epoch"] == 2:
            raise KeyboardInterrupt("simulated crash")
        real_save(self, c, state)

    monkeypatch.setattr(Store, "save_checkpoint", crash_at_epoch_2)
    with pytest.raises(KeyboardInterrupt):
        fit_imagefolder(CFG, store=store, data_root=runs["data"], progress=False)
    monkeypatch.setattr(Store, "save_checkpoint", real_save)
    assert store.load_checkpoint(ImageFolderConfig.from_dict(CFG))["epoch"] == 1
    res = fit_imagefolder(CFG, store=store, data_root=runs["data"], progress=False, state_out=tmp_path / "res")
    assert res["status"] == "finished" and [h["epoch"] for h in res["history"]] == [1, 2]
    resumed = torch.load(tmp_path / "res" / "rank0.pt")
    assert len(resumed["seen"]) == 1  # only epoch 2 was trained again
    a, b = runs["s1"]["model"], resumed["model"]
    for k in a:
        assert torch.allclose(a[k].float(), b[k].float(), atol=1e-6), k
    assert res["test_acc"] == runs["single"]["test_acc"]


def test_cutmix_trains_through_fit_imagefolder(runs, tmp_path):
    """cutmix_prob=1 (AdamP Table 2, ResNet-50 + CutMix) changes the training (mixed inputs and soft targets)
    and is reproducible: the mixing draws are a function of (seed, epoch, rank)."""
    cfg = ImageFolderConfig.from_dict(CFG).replace(cutmix_prob=1.0)
    a = fit_imagefolder(cfg, data_root=runs["data"], progress=False, state_out=tmp_path / "a")
    b = fit_imagefolder(cfg, data_root=runs["data"], progress=False, state_out=tmp_path / "b")
    plain = runs["single"]
    assert a["status"] == "finished"
    assert [h["train_loss"] for h in a["history"]] == [h["train_loss"] for h in b["history"]]
    assert [h["train_loss"] for h in a["history"]] != [h["train_loss"] for h in plain["history"]]
    with pytest.raises(ValueError, match="^cutmix_prob:"):
        ImageFolderConfig.from_dict({**CFG, "cutmix_prob": 1.5})


def test_adam_is_coupled_l2_torch_adam():
    import torch.nn as nn

    from repro_lib.optim import build_optimizer

    model = nn.Linear(3, 2)
    base = ImageFolderConfig.from_dict(CFG)
    opt = build_optimizer(base.replace(optimizer="adam", lr=1e-3, weight_decay=1e-4), model)
    assert isinstance(opt, torch.optim.Adam) and opt.defaults["weight_decay"] == 1e-4
    with pytest.raises(ValueError, match="^weight_decay_mode:"):
        build_optimizer(base.replace(optimizer="adam", weight_decay_mode="decoupled"), model)
