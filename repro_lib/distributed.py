"""ImageNet-scale training, single-process or under ``torchrun`` (DistributedDataParallel): the training function
of Yun et al. 2022 Sec. 6 (EfficientNet-B0 on ImageNet, Fig. 8) and of the AdamP ImageNet tables (Heo et al. 2021,
Tables 1-2).

``fit_imagefolder(cfg)`` trains the run an :class:`ImageFolderConfig` (or a dict of its fields) describes:

* processes: ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` from the environment (set by ``torchrun``); absent = one
  process. Backend ``nccl`` on CUDA (device ``cuda:LOCAL_RANK``), ``gloo`` on CPU. ``batch_size`` is the
  **global** batch B; each rank gets B / world_size images per step (a ``ValueError`` if it does not divide).
  ``cfg.world_size`` is the process count and part of the run's identity (hashed when not 1): torchrun's
  WORLD_SIZE must equal it (:func:`check_world_size`, a ``ValueError`` naming ``world_size`` before any data is
  read), a stored result or checkpoint that recorded another count is refused (runs stored before the field
  existed share the 1-process hash), and the checkpoint records the count.
* data: ``repro_lib.imagefolder`` (streaming JPEG decoding in DataLoader workers, RandomResizedCrop(0.08-1,
  3/4-4/3) + flip, Resize/CenterCrop evaluation, seeded subset of ``n`` images drawn as ``cfg.subset_draw``
  says -- Sec. 6 plans: ``"uniform"``, the paper's "80k randomly sampled data" (line 366); the field's default
  ``"balanced"`` keeps the hashes of runs stored before it existed --, ``DistributedSampler`` shards with
  ``set_epoch``); normalization on the device; train/val class folders must match (:func:`build_data`). A
  dataset ``repro_lib.data`` holds in memory (CIFAR-10/100 from torchvision, Tiny ImageNet) is served the same
  way from its uint8 tensors (:class:`TensorImageDataset`): same transforms, subsets and augmentation draws.
* model: ``repro_lib.models.create(cfg.model, num_classes)`` initialised from ``cfg.seed`` on every rank (DDP also
  broadcasts rank 0's parameters), wrapped in DDP when world_size > 1. BatchNorm statistics are per rank
  (B / world_size images per BN batch, the usual multi-GPU ImageNet convention; the papers do not say how many
  GPUs they used, so the result depends on ``world_size``, which is why it is hashed); ``sync_bn=True`` converts
  to ``SyncBatchNorm`` (CUDA only). DDP broadcasts buffers at the start of each forward only, so after each
  epoch :func:`sync_buffers` copies rank 0's BN running statistics to every rank before evaluation and the
  checkpoint. EfficientNet-B0 is timm's plain ``efficientnet_b0`` (no dropout/drop-path, BN eps 1e-5, momentum
  0.1; the original's 0.2/0.2/TF-BN are not used, see ``repro_lib.models.timm_models``).
* optimizer: ``repro_lib.optim.build_optimizer`` (``"sgd"`` = ``torch.optim.SGD``: coupled L2 weight decay
  ``g ← g + λx`` before PyTorch momentum ``v ← μv + g; x ← x − ηv``, on every trainable tensor, BN affine and
  biases included). Decaying every tensor is **our assumption**: Sec. 6 says only "SGD ... only the WD is
  tuned"; timm's optimizer factory (``filter_bias_and_bn``) would exclude BN and bias tensors. LR from
  ``repro_lib.schedules.build_schedule`` written before every step (global 0-based step). Defaults are Sec. 6's:
  B = 512, η = 0.1, μ = 0.9, 200 epochs, LR ÷10 at 50/75/90 %.
* CutMix (``cutmix_prob > 0``; AdamP Table 2 only): each rank draws its own λ, box and in-rank permutation from
  a generator seeded by (seed, epoch, rank) for its B / world_size images, not one draw per global batch as a
  1-process run would; so a K-process CutMix run is a different (equally valid) run from the 1-process one, and
  reproducible for a fixed ``world_size``.
* angular tracker (rank 0): ``repro_lib.angular.AngularTracker`` over ``model.scale_invariant_names`` (conv
  weights followed by a norm layer), Δθ per epoch (Eq. 11), ‖x‖, η/‖x‖² (Eq. 9), ηN/(‖x‖²B) (Eq. 10).
* metrics: training loss/accuracy summed over ranks (``all_reduce``), evaluation sharded without padding and
  summed; per-epoch records written by rank 0 as JSON lines (``metrics_path``) and into a
  ``repro_lib.store.Store`` with an epoch-boundary checkpoint (resume: rank 0 loads it and broadcasts).
  A non-finite training loss or weight stops the run as ``diverged``.

Launch (``python -m repro_lib.distributed --help``)::

    torchrun --standalone --nproc_per_node=8 -m repro_lib.distributed \\
        --config '{"model": "efficientnet_b0", "n": 80000, "subset_draw": "uniform", "weight_decay": 0.0016,
                   "world_size": 8}' \\
        --results-dir results --data-root /data

(``world_size`` must equal the processes torchrun starts: nodes × ``--nproc_per_node``.)

The end of the module estimates what a list of runs costs in GPU-hours. The Sec. 6 experiment itself (its four
profiles as data, the tuning-factor prediction of the full-data weight decay) is
``repro_lib.papers.yun2022.section6``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from . import cutmix, imagefolder
from . import data as data_mod
from .angular import AngularTracker
from .config import ImageFolderConfig
from .data import normalize
from .train import progress_lines

# ----------------------------------------------------------------------------------------------- processes
@dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    initialized_here: bool

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup_distributed(device: str = "auto") -> DistEnv:
    """Read RANK / WORLD_SIZE / LOCAL_RANK (torchrun) and initialise the default process group if needed:
    ``nccl`` on CUDA (one GPU per process, ``cuda:LOCAL_RANK``), ``gloo`` on CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: 'cuda' requested but no CUDA device is available")
    dev = torch.device(f"cuda:{local}") if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    init_here = False
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo", device_id=dev if use_cuda else None)
        init_here = True
    if dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
    return DistEnv(rank, world, local, dev, init_here)


def _broadcast(obj, env: DistEnv):
    if not env.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _unwrap(model):
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


def sync_buffers(model, env: DistEnv) -> None:
    """Broadcast rank 0's buffers (BatchNorm running mean/var, ``num_batches_tracked``) to every rank. DDP
    broadcasts buffers only at the start of each forward, so after an epoch's last step every rank holds the
    running statistics of its own last batches; evaluation (sharded over ranks) and the checkpoint then use
    rank 0's on every rank. Training is unchanged: the next forward would have broadcast rank 0's anyway."""
    if env.distributed:
        for b in _unwrap(model).buffers():
            dist.broadcast(b.data, src=0)


def _finite_params(model) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


# ----------------------------------------------------------------------------------------------- data
class TensorImageDataset(imagefolder.ImageFolderDataset):
    """A ``repro_lib.data`` dataset held in memory (CIFAR-10/100 via torchvision, Tiny ImageNet) served as an
    ImageFolder split: item ``k`` is ``(uint8 C×H×W, label, index)`` with exactly the transforms, augmentation
    seeding and subsets of :class:`repro_lib.imagefolder.ImageFolderDataset` (the image comes from the uint8
    tensor instead of a file). ``split``: ``"train"``, anything else is the test split."""

    def __init__(self, dataset: str, split: str = "train", root=None, image_size: int = 32, train: bool = True,
                 seed: int = 0, download: bool = False):
        self.dataset, self.split, self.image_size, self.train, self.seed = dataset, split, image_size, train, seed
        info = data_mod.DATASETS[dataset]
        d = data_mod.load_split(dataset, "train" if split == "train" else "test", root, download=download)
        self.images, self.labels = d.x, d.y
        self.dir = data_mod.data_root(root) / info.folder
        self.files = []
        self.classes = [f"{c:04d}" for c in range(info.num_classes)]
        self.indices = torch.arange(len(self.labels))
        self.epoch = 0
        self.mean, self.std = info.mean, info.std

    def __getitem__(self, k: int):
        import random

        from PIL import Image

        i = int(self.indices[k])
        img = Image.fromarray(self.images[i].permute(1, 2, 0).numpy())
        if self.train:  # the seeding of ImageFolderDataset.__getitem__
            rng = random.Random((self.seed * 1_000_003 + self.epoch) * 10_000_019 + i)
            x = imagefolder.train_transform(img, self.image_size, rng)
        else:
            x = imagefolder.eval_transform(img, self.image_size)
        return x, int(self.labels[i]), i


def in_memory(dataset: str) -> bool:
    """Whether ``dataset`` is read by :class:`TensorImageDataset` (a ``repro_lib.data`` dataset that is not a plain
    ``<class>/*`` folder) rather than streamed from an ImageFolder."""
    info = data_mod.DATASETS.get(dataset)
    return info is not None and info.kind != "folder"


def count_train_images(dataset: str, data_root=None) -> int:
    """The number of training images of ``dataset`` (an in-memory dataset's declared size, else the files of its
    image folder's train split)."""
    if in_memory(dataset):
        return data_mod.DATASETS[dataset].n_train
    return len(imagefolder.ImageFolderDataset(dataset, "train", data_root, train=True))


def require_data(cfgs, data_root=None, download: bool = False) -> None:
    """Check (and for CIFAR, with ``download``, fetch) the data of every config before anything trains: one
    ``DataNotFoundError`` naming the dataset, the folder and how to get it (``repro_lib.data.require``). Other image
    folders (e.g. the synthetic smoke one) are checked for their train and evaluation splits."""
    seen = set()
    for c in cfgs:
        if (c.dataset, c.val_split) in seen:
            continue
        seen.add((c.dataset, c.val_split))
        if c.dataset in data_mod.DATASETS or c.dataset in data_mod.STREAMED:
            data_mod.require(c.dataset, data_root, download)
        else:
            for split in ("train", c.val_split):
                imagefolder.split_dir(c.dataset, split, data_root)


# ----------------------------------------------------------------------------------------------- training
def build_data(cfg: ImageFolderConfig, data_root=None):
    """(train dataset, eval dataset): the seeded training subset of ``cfg.n`` images drawn as
    ``cfg.subset_draw`` says (Sec. 6: ``"uniform"``) and the class-balanced evaluation subset of ``cfg.n_val``.
    Each split's classes are its sorted folder names, so a ``ValueError`` if the two splits' class lists differ
    (labels would otherwise silently mean different classes). In-memory datasets (:func:`in_memory`) are read by
    :class:`TensorImageDataset`."""
    cls = TensorImageDataset if in_memory(cfg.dataset) else imagefolder.ImageFolderDataset
    train = cls(cfg.dataset, "train", data_root, cfg.image_size, train=True, seed=cfg.seed)
    val = cls(cfg.dataset, cfg.val_split, data_root, cfg.image_size, train=False)
    if val.classes != train.classes:
        only_t = sorted(set(train.classes) - set(val.classes))[:5]
        only_v = sorted(set(val.classes) - set(train.classes))[:5]
        raise ValueError(
            f"val_split: the class folders of {val.dir} differ from those of {train.dir} "
            f"({len(val.classes)} vs {len(train.classes)} classes; only in train: {only_t}, only in "
            f"{cfg.val_split}: {only_v}{'' if only_t or only_v else ', same names in another order'}); both "
            f"splits need the same <class> folders")
    if cfg.n and len(train) < cfg.n:
        raise ValueError(f"n: {cfg.n} exceeds the {len(train)} training images of {cfg.dataset}")
    return train.subset(cfg.n, cfg.seed, cfg.subset_draw), val.subset(cfg.n_val, 0)


@torch.no_grad()
def evaluate(model, loader, env: DistEnv, mean, std) -> dict[str, float]:
    """Loss and top-1 accuracy (%) in eval mode over every image of the evaluation split, sharded over ranks
    (unwrapped module: ranks may hold different numbers of batches) and summed with ``all_reduce``."""
    was = model.training
    model.eval()
    sums = torch.zeros(3, dtype=torch.float64, device=env.device)  # loss, correct, count
    for x, y, _ in loader:
        x, y = normalize(x.to(env.device, non_blocking=True), mean, std), y.to(env.device, non_blocking=True)
        out = model(x).float()
        sums += torch.stack([F.cross_entropy(out, y, reduction="sum").double(),
                             (out.argmax(1) == y).sum().double(), torch.tensor(len(y), dtype=torch.float64,
                                                                              device=env.device)])
    if env.distributed:
        dist.all_reduce(sums)
    model.train(was)
    loss, correct, count = sums.tolist()
    return {"test_loss": loss / count, "test_acc": 100.0 * correct / count}


def fit_imagefolder(cfg, store=None, data_root=None, progress: bool = True, metrics_path=None,
                    state_out=None) -> dict:
    """Train one run (see the module docstring) and return ``{status, diverged_epoch, test_acc, test_loss,
    train_loss, train_acc, epochs_run, train_seconds, n_train, tuning_factor, world_size, data, config,
    history}`` on every rank (rank 0's history, which holds the angular metrics, is broadcast).

    ``cfg``: an :class:`ImageFolderConfig` or a dict of its fields. ``store``: a ``repro_lib.store.Store``
    (used by rank 0 only): a finished run is returned from it, an unfinished one resumes from its last epoch.
    ``metrics_path``: rank 0 appends one JSON line per epoch. ``state_out``: a folder where every rank writes
    ``rank<r>.pt`` with its final model state and the training-image indices it saw in each epoch (for tests).
    """
    if not isinstance(cfg, ImageFolderConfig):
        cfg = ImageFolderConfig.from_dict(cfg)
    env = setup_distributed(cfg.device)
    try:
        check_world_size(cfg, env.world_size)
        result = _fit(cfg, env, store if env.is_main else None, data_root, progress and env.is_main,
                      metrics_path if env.is_main else None, state_out)
        if env.distributed:
            dist.barrier()  # every rank is done before the group is torn down (a gloo rank could abort at exit)
        return result
    finally:
        if env.initialized_here:
            dist.destroy_process_group()


def check_world_size(cfg: ImageFolderConfig, actual: int, what: str = "torchrun started") -> None:
    """``ValueError`` naming ``world_size`` unless ``cfg.world_size == actual``. The process count is part of a
    run's identity: BatchNorm statistics are per process (``batch_size / world_size`` images per BN batch), so
    the same config on another number of GPUs is another computation (and another stored run)."""
    if cfg.world_size != actual:
        raise ValueError(
            f"world_size: the config says world_size={cfg.world_size} but {what} {actual} process(es); BatchNorm "
            f"batches are batch_size / world_size images per process, so the process count is part of the run "
            f"(and of its hash). Build the config with world_size={actual} (plans take it as an override, e.g. "
            f"section6_plan(profile, world_size={actual})) or launch {cfg.world_size} process(es) "
            f"(torchrun --nproc_per_node={cfg.world_size}).")


def _check_stored_world_size(cfg: ImageFolderConfig, stored, what: str) -> None:
    """Runs stored before ``world_size`` was a config field share the 1-process hash: refuse to reuse or resume
    one that recorded another process count."""
    ws = (stored or {}).get("world_size")
    if ws is not None and ws != cfg.world_size:
        raise ValueError(f"world_size: the store's {what} of run {cfg.hash} was trained on {ws} process(es), this "
                         f"launch has world_size={cfg.world_size}; pass world_size={ws} to reuse it, or remove "
                         f"the stored run to retrain")


def _fit(cfg: ImageFolderConfig, env: DistEnv, store, data_root, progress, metrics_path, state_out) -> dict:
    from .models import create
    from .optim import build_optimizer
    from .schedules import build_schedule

    done = store.get(cfg) if store is not None else None
    done = _broadcast(done, env)
    if done is not None:
        _check_stored_world_size(cfg, done, "finished result")
        return {**done, "history": store.history(cfg) if store is not None else []}
    local_batch = cfg.batch_size // env.world_size

    train_ds, val_ds = build_data(cfg, data_root)
    pin = env.device.type == "cuda"
    train = imagefolder.make_loader(train_ds, local_batch, env.rank, env.world_size, cfg.seed, cfg.num_workers, pin)
    val = imagefolder.make_loader(val_ds, local_batch, env.rank, env.world_size, 0, cfg.num_workers, pin)
    steps_per_epoch = len(train)
    n_train = len(train_ds)

    torch.manual_seed(cfg.seed)
    model = create(cfg.model, num_classes=train_ds.num_classes)
    names = list(model.scale_invariant_names)
    if cfg.sync_bn:
        if env.device.type != "cuda":
            raise ValueError("sync_bn: SyncBatchNorm needs CUDA")
        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = model.to(env.device)
    if env.distributed:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[env.device.index] if env.device.type == "cuda" else None)
    optimizer = build_optimizer(cfg, model)
    schedule = build_schedule(cfg, steps_per_epoch)
    tracker = AngularTracker(_unwrap(model), names) if env.is_main and names else None

    history: list[dict] = []
    start_epoch = 0
    state = None
    if store is not None:
        store.start(cfg)
        state = store.load_checkpoint(cfg, map_location="cpu")
    state = _broadcast(state, env)
    if state is not None:
        _check_stored_world_size(cfg, state, "checkpoint")
        _unwrap(model).load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if tracker is not None and state.get("tracker") is not None:
            tracker.load_state_dict(state["tracker"])
        history, start_epoch = state["history"], state["epoch"]

    amp = torch.autocast("cuda", dtype=torch.bfloat16) if cfg.amp and env.device.type == "cuda" else None
    mean, std = train_ds.mean, train_ds.std
    seen: list[list[int]] = []
    status, diverged_epoch = "finished", None
    bar = None
    lines = progress and progress_lines()  # under the runner: one line at the end instead of a bar
    desc = f"{cfg.model} n={n_train} wd={cfg.weight_decay:g} B={cfg.batch_size} x{env.world_size}"
    if progress and not lines:
        from .train import progress_bar as tqdm

        bar = tqdm(total=cfg.num_epochs, initial=start_epoch, leave=False, desc=desc)
    model.train()
    for epoch in range(start_epoch, cfg.num_epochs):
        t0 = time.perf_counter()
        train.set_epoch(epoch)
        # CutMix draws: a function of (seed, epoch, rank), so a resumed run mixes the same way
        mix_gen = torch.Generator().manual_seed(cfg.seed + 1_000_003 * (epoch + 1) + env.rank)
        if tracker is not None:
            tracker.start_epoch()
        sums = torch.zeros(3, dtype=torch.float64, device=env.device)  # loss·count, correct, count
        ids: list[torch.Tensor] = []
        step = epoch * steps_per_epoch
        for x, y, idx in train:
            x = normalize(x.to(env.device, non_blocking=True), mean, std)
            y = y.to(env.device, non_blocking=True)
            if cfg.cutmix_prob > 0:
                x, y_a, y_b, lam = cutmix.cutmix_batch(x, y, cfg.cutmix_beta, cfg.cutmix_prob, generator=mix_gen)
            schedule.apply(optimizer, step)
            with amp or contextlib.nullcontext():
                out = model(x)
                if cfg.cutmix_prob > 0:
                    loss = cutmix.cutmix_loss(out.float(), y_a, y_b, lam, cfg.label_smoothing)
                else:
                    loss = F.cross_entropy(out.float(), y, label_smoothing=cfg.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            sums[0] += loss.detach().double() * len(y)
            sums[1] += (out.detach().argmax(1) == y).sum()
            sums[2] += len(y)
            if state_out is not None:
                ids.append(idx)
            step += 1
        if env.distributed:
            dist.all_reduce(sums)
        if state_out is not None:
            seen.append(torch.cat(ids).tolist())
        train_loss = float(sums[0] / sums[2])
        # the LR in force at the last step (as train.fit: after any rescaling a schedule's ``apply`` did)
        g0 = optimizer.param_groups[0]
        lr_epoch = g0["lr"] / g0.get("lr_scale", 1.0)
        rec = {"epoch": epoch + 1, "lr": lr_epoch, "train_loss": train_loss,
               "train_acc": 100.0 * float(sums[1] / sums[2])}
        if not math.isfinite(train_loss) or not _finite_params(model):
            status, diverged_epoch = "diverged", epoch + 1
            history.append(rec)
            _log(store, metrics_path, cfg, rec)
            break
        sync_buffers(model, env)  # one set of BN running statistics for evaluation and the checkpoint
        if tracker is not None:
            rec.update(tracker.end_epoch(lr=lr_epoch, n=n_train, batch_size=cfg.batch_size))
        rec["seconds"] = time.perf_counter() - t0
        if (epoch + 1) % cfg.eval_every == 0 or epoch + 1 == cfg.num_epochs:
            rec.update(evaluate(_unwrap(model), val, env, mean, std))
        history.append(rec)
        _log(store, metrics_path, cfg, rec)
        if store is not None:
            store.save_checkpoint(cfg, {"epoch": epoch + 1, "world_size": env.world_size,
                                        "model": _unwrap(model).state_dict(), "optimizer": optimizer.state_dict(),
                                        "tracker": tracker.state_dict() if tracker is not None else None,
                                        "history": history})
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{train_loss:.3f}", acc=f"{rec.get('test_acc', float('nan')):.1f}")
    if bar is not None:
        bar.close()

    if state_out is not None:
        Path(state_out).mkdir(parents=True, exist_ok=True)
        torch.save({"model": {k: v.detach().cpu() for k, v in _unwrap(model).state_dict().items()},
                    "seen": seen, "rank": env.rank, "world_size": env.world_size},
                   Path(state_out) / f"rank{env.rank}.pt")
    history = _broadcast(history, env)
    evals = [h for h in history if "test_acc" in h]
    last = history[-1] if history else {}
    ok = status == "finished" and evals
    result = {
        "status": status, "diverged_epoch": diverged_epoch,
        "test_acc": evals[-1]["test_acc"] if ok else float("nan"),
        "test_loss": evals[-1]["test_loss"] if ok else float("nan"),
        "train_loss": last.get("train_loss", float("nan")), "train_acc": last.get("train_acc", float("nan")),
        "epochs_run": len(history), "train_seconds": sum(h.get("seconds", 0.0) for h in history),
        "n_train": n_train, "tuning_factor": cfg.tuning_factor(n_train), "world_size": env.world_size,
        "data": train_ds.name, "config": cfg.to_dict(), "history": history,
    }
    if store is not None:
        store.finish(cfg, result)
    if lines:
        print(f"{desc} seed={cfg.seed}: {status}" + (f", test acc {result['test_acc']:.2f} %" if ok else "")
              + f" ({result['train_seconds']:.0f} s)", flush=True)
    return result


def _log(store, metrics_path, cfg, rec):
    if store is not None:
        store.log_epoch(cfg, rec)
    if metrics_path is not None:
        with open(metrics_path, "a") as f:
            f.write(json.dumps({"hash": cfg.hash, **rec}) + "\n")


# ----------------------------------------------------------------------------------------------- launching
def torchrun_command(cfg, nproc: int | None = None, results_dir=None, data_root=None, metrics_path=None,
                     python: str | None = None) -> list[str]:
    """The ``torchrun`` command (argv list) that trains ``cfg`` on ``cfg.world_size`` processes of this machine
    (``--standalone``: single node, a free rendezvous port). Multi-node: replace ``--standalone`` by torchrun's
    ``--nnodes/--node_rank/--rdzv_endpoint`` options (``world_size`` = nodes × processes per node).
    ``nproc`` other than ``cfg.world_size``: the command trains ``cfg.replace(world_size=nproc)`` -- another run
    (another hash: BN batches of ``batch_size / nproc``), whose ``world_size`` is visible in the printed JSON."""
    cfg = cfg if isinstance(cfg, ImageFolderConfig) else ImageFolderConfig.from_dict(cfg)
    if nproc is not None and nproc != cfg.world_size:
        cfg = cfg.replace(world_size=nproc)
    nproc = cfg.world_size
    cmd = [python or sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "repro_lib.distributed", "--config", json.dumps(cfg.to_dict(), sort_keys=True)]
    if results_dir:
        cmd += ["--results-dir", str(results_dir)]
    if data_root:
        cmd += ["--data-root", str(data_root)]
    if metrics_path:
        cmd += ["--metrics", str(metrics_path)]
    return cmd


def shell_command(cmd: list[str]) -> str:
    """``cmd`` as one copy-pasteable shell line (``python -m torch.distributed.run`` shown as ``torchrun``)."""
    if cmd[1:3] == ["-m", "torch.distributed.run"]:
        cmd = ["torchrun", *cmd[3:]]
    return " ".join(shlex.quote(c) for c in cmd)


def run_configs(cfgs, store, data_root=None, nproc: int | None = None, progress: bool = True,
                metrics_path=None) -> list[dict]:
    """Train every config (skipping finished ones in ``store``): in this process when ``cfg.world_size == 1``,
    else one ``torchrun`` launch of ``cfg.world_size`` processes per config (results read back from the store).
    ``nproc``: optional, the process count the caller expects; a ``ValueError`` naming ``world_size`` if a config
    says otherwise (before anything is trained), since the count is part of the run (see :func:`check_world_size`)."""
    cfgs = [c if isinstance(c, ImageFolderConfig) else ImageFolderConfig.from_dict(c) for c in cfgs]
    if nproc is not None:
        for cfg in cfgs:
            check_world_size(cfg, nproc, "run_configs was asked for nproc =")
    out = []
    for cfg in cfgs:
        if cfg.world_size == 1:
            out.append(fit_imagefolder(cfg, store=store, data_root=data_root, progress=progress,
                                       metrics_path=metrics_path))
            continue
        rc = 0
        if store.get(cfg) is None:
            rc = subprocess.run(torchrun_command(cfg, None, store.root, data_root, metrics_path)).returncode
        res = store.get(cfg)  # the store decides: a rank that aborts after rank 0 stored the result is harmless
        if res is None:
            raise RuntimeError(f"torchrun exited with {rc} and the store holds no result for {cfg.hash}")
        _check_stored_world_size(cfg, res, "finished result")
        out.append({**res, "history": store.history(cfg)})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m repro_lib.distributed",
                                description="Train one ImageFolder run (single process, or under torchrun).")
    p.add_argument("--config", required=True, help="JSON object of ImageFolderConfig fields, or a path to one")
    p.add_argument("--results-dir", default=None, help="results store folder (rank 0 writes it)")
    p.add_argument("--data-root", default=None, help="data root (else $REPRO_DATA_ROOT, else ./data)")
    p.add_argument("--metrics", default=None, help="JSON-lines file rank 0 appends one record per epoch to")
    p.add_argument("--state-out", default=None, help="folder for each rank's final state (rank<r>.pt)")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    text = a.config
    if not text.lstrip().startswith("{"):
        text = Path(text).read_text()
    cfg = ImageFolderConfig.from_dict(json.loads(text))
    store = None
    if a.results_dir and int(os.environ.get("RANK", "0")) == 0:
        from .store import Store

        store = Store(a.results_dir)
    res = fit_imagefolder(cfg, store=store, data_root=a.data_root, progress=not a.no_progress,
                          metrics_path=a.metrics, state_out=a.state_out)
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps({k: v for k, v in res.items() if k not in ("history", "config")}))
    return 0


# ----------------------------------------------------------------------------------------------- cost
#: Reference throughput for the GPU-hour estimate: EfficientNet-B0 training images per second on one modern GPU
#: at 224 px in a typical fp32/TF32 PyTorch script (a round figure, not a measurement of this package).
REFERENCE_IMAGES_PER_GPU_SECOND = {"efficientnet_b0": 1000.0, "resnet50": 800.0, "mobilenetv2_100": 1200.0}

#: cost of evaluating one image relative to training on one (a forward pass ≈ 1/3 of forward + backward)
EVAL_COST_PER_IMAGE = 1 / 3


def estimate_gpu_hours(cfgs, n_full: int = 1_281_167, n_val_full: int = 50_000) -> float:
    """GPU-hours of training plus evaluation at the reference throughput (``REFERENCE_IMAGES_PER_GPU_SECOND``,
    scaled by (224/image_size)²): per run N · epochs training images plus ``EVAL_COST_PER_IMAGE`` × N_val ×
    ceil(epochs / eval_every) evaluated images (evaluation every ``eval_every`` epochs and at the last; the
    gpu/paper profiles evaluate all 50,000 ImageNet validation images every epoch). ``n = 0`` counts as
    ``n_full``, ``n_val = 0`` as ``n_val_full``."""
    total = 0.0
    for c in cfgs:
        ips = REFERENCE_IMAGES_PER_GPU_SECOND.get(c.model, 1000.0) * (224 / c.image_size) ** 2
        total += training_images(c, n_full, n_val_full) / ips
    return total / 3600


def training_images(c, n_full: int = 1_281_167, n_val_full: int = 50_000) -> float:
    """The cost of run ``c`` in training images: N · epochs plus ``EVAL_COST_PER_IMAGE`` × N_val per evaluation
    (every ``eval_every`` epochs and at the last); ``n = 0`` counts as ``n_full``, ``n_val = 0`` as ``n_val_full``."""
    evals = math.ceil(c.num_epochs / c.eval_every)
    return (c.n or n_full) * c.num_epochs + EVAL_COST_PER_IMAGE * (c.n_val or n_val_full) * evals


if __name__ == "__main__":
    sys.exit(main())
