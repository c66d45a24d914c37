"""The user's alternative to the package's paper path: one training run as a plain eager PyTorch loop, one process
per run. ``bench_paper_rate.py`` starts K of these at once and adds up their rates.

This is the loop a user writes without the package:

* data: uint8 tensors on the device, zero-padded by 4 pixels once; every batch is cropped back to 32x32 at a random
  offset and flipped with probability 1/2 (one indexing gather), then scaled to [0, 1] and standardized;
* the network: the scale-invariant ResNet-18 of Yun et al. (width, ghost BN), built with the package's model
  constructor ``repro_lib.models.create`` so that the arithmetic is the paper network's. The constructor is the only
  package code here; none of it runs per step;
* ``torch.optim.SGD(lr, momentum, weight_decay, foreach=True)`` (coupled L2), cross-entropy, the LR divided by 10
  at 1/2 and 3/4 of the epochs (``MultiStepLR``, once per epoch);
* once per epoch, the angular update of the scale-invariant weights (Eq. 11 of Yun et al.: the angle between the
  concatenated weights at the start and at the end of the epoch, in float64). The evaluation on the test tensor
  runs every ``eval_every`` epochs;
* fp32 with PyTorch's defaults (TF32 convolutions), NCHW, ``cudnn.benchmark`` on.

Protocol with the launcher. All files are in ``spec["dir"]``, and ``spec`` is the JSON file named on the command
line. The worker warms up (``warmup_epochs`` epochs and one evaluation: cuDNN autotuning, the allocator), writes
``ready_<rank>`` and waits for ``go``. It then times ``epochs`` epochs (the device is synchronized at every epoch
end) and writes ``result_<rank>.json``. It stops early when the next epoch would end after ``deadline`` (Unix
time); the result then says ``complete: false``.

    PYTHONPATH=. python benchmarks/plain_loop.py SPEC.json RANK
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

PAD = 4  # random-crop padding, pixels
EVAL_BATCH = 1000


# ============================================================================================== data
def load_tensors(path: str, device: torch.device) -> dict:
    """The training and test tensors the launcher saved (uint8 images, int64 labels, mean and std), on ``device``;
    the training images zero-padded by ``PAD`` pixels."""
    d = torch.load(path, weights_only=True)
    out = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}
    out["x"] = F.pad(out["x"], (PAD, PAD, PAD, PAD))
    out["mean"] = torch.tensor(d["mean"], device=device).view(1, -1, 1, 1)
    out["std"] = torch.tensor(d["std"], device=device).view(1, -1, 1, 1)
    return out


def normalize(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    return (x.float() / 255 - mean) / std


def crop_flip(x_padded: torch.Tensor, idx: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Images ``idx`` of the padded tensor, each cropped at a random offset in [0, 2·PAD] and mirrored with
    probability 1/2."""
    b, dev = idx.numel(), x_padded.device
    c, size = x_padded.shape[1], x_padded.shape[-1] - 2 * PAD
    dy = torch.randint(0, 2 * PAD + 1, (b, 1), device=dev, generator=gen)
    dx = torch.randint(0, 2 * PAD + 1, (b, 1), device=dev, generator=gen)
    flip = torch.rand(b, 1, device=dev, generator=gen) < 0.5
    ar = torch.arange(size, device=dev)
    rows = dy + ar
    cols = torch.where(flip, dx + ar.flip(0), dx + ar)
    return x_padded[idx[:, None, None, None], torch.arange(c, device=dev)[None, :, None, None],
                    rows[:, None, :, None], cols[:, None, None, :]]


# ============================================================================================== training
def train_epoch(model, opt, data: dict, batch_size: int, gen: torch.Generator) -> float:
    """One epoch of SGD over a fresh permutation (the last batch may be smaller); returns the mean training loss."""
    n = len(data["y"])
    perm = torch.randperm(n, device=data["y"].device, generator=gen)
    loss_sum = torch.zeros((), device=data["y"].device)
    for i in range(0, n, batch_size):
        idx = perm[i:i + batch_size]
        x = normalize(crop_flip(data["x"], idx, gen), data["mean"], data["std"])
        loss = F.cross_entropy(model(x), data["y"][idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_sum += loss.detach() * len(idx)
    return loss_sum.item() / n


@torch.no_grad()
def evaluate(model, data: dict) -> float:
    """Test accuracy (%) with the running statistics."""
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=data["y_test"].device)
    for i in range(0, len(data["y_test"]), EVAL_BATCH):
        out = model(normalize(data["x_test"][i:i + EVAL_BATCH], data["mean"], data["std"]))
        correct += (out.argmax(1) == data["y_test"][i:i + EVAL_BATCH]).sum()
    model.train()
    return 100.0 * correct.item() / len(data["y_test"])


@torch.no_grad()
def angle(before: list[torch.Tensor], after: list[torch.Tensor]) -> float:
    """Angle (radians) between two concatenated weight vectors, in float64."""
    dot = sum((a.double() * b.double()).sum() for a, b in zip(before, after))
    na = torch.sqrt(sum(a.double().square().sum() for a in before))
    nb = torch.sqrt(sum(b.double().square().sum() for b in after))
    return float(torch.arccos((dot / (na * nb)).clamp(-1.0, 1.0)))


class Run:
    """One training run of the spec: model, optimizer, LR decay, angular update; ``epoch()`` trains one epoch."""

    def __init__(self, spec: dict, member: dict, data: dict, device: torch.device):
        from repro_lib.models import create  # the network's constructor only

        torch.manual_seed(member["seed"])
        self.model = create(spec["model"], num_classes=data["num_classes"], scale_invariant=True,
                            width=spec["width"], ghost_batch=spec["ghost_batch"]).to(device)
        self.model.train()
        self.opt = torch.optim.SGD([p for p in self.model.parameters() if p.requires_grad], lr=member["lr"],
                                   momentum=member["momentum"], weight_decay=member["weight_decay"], foreach=True)
        total = spec["warmup_epochs"] + spec["epochs"]
        self.sched = torch.optim.lr_scheduler.MultiStepLR(
            self.opt, milestones=[round(0.5 * total), round(0.75 * total)], gamma=0.1)
        names = set(self.model.scale_invariant_names)
        self.tracked = [p for n, p in self.model.named_parameters() if n in names]
        self.gen = torch.Generator(device=device).manual_seed(member["seed"])
        self.data, self.batch_size = data, spec["batch_size"]

    def epoch(self) -> dict:
        before = [p.detach().clone() for p in self.tracked]
        loss = train_epoch(self.model, self.opt, self.data, self.batch_size, self.gen)
        self.sched.step()
        return {"train_loss": loss, "dtheta": angle(before, self.tracked)}


# ============================================================================================== protocol
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _write_json(path: Path, obj: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


def _wait_for(path: Path, deadline: float) -> bool:
    while not path.exists():
        if time.time() > deadline:
            return False
        time.sleep(0.005)
    return True


def run(spec: dict, rank: int) -> dict:
    """Warm up, signal ready, wait for go, time the epochs; returns (and writes) the result of this rank."""
    folder, deadline = Path(spec["dir"]), spec["deadline"]
    device = torch.device(spec["device"])
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    torch.backends.cudnn.benchmark = True
    t_start = time.time()
    data = load_tensors(spec["data"], device)
    r = Run(spec, spec["members"][rank], data, device)
    for _ in range(spec["warmup_epochs"]):
        r.epoch()
    evaluate(r.model, data)
    _sync(device)
    warmup_s = time.time() - t_start
    (folder / f"ready_{rank}").write_text(str(time.time()))
    if not _wait_for(folder / "go", deadline):
        raise SystemExit(f"rank {rank}: no go signal before the deadline")
    t_go = time.time()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    epoch_s, rec, acc, complete = [], {}, None, True
    for e in range(1, spec["epochs"] + 1):
        if epoch_s and time.time() + max(epoch_s) > deadline:
            complete = False
            break
        t0 = time.perf_counter()
        rec = r.epoch()
        if e % spec["eval_every"] == 0:
            acc = evaluate(r.model, data)
        _sync(device)
        epoch_s.append(time.perf_counter() - t0)
    result = {"rank": rank, "epoch_s": epoch_s, "images_per_epoch": len(data["y"]), "complete": complete,
              "t_go": t_go, "t_end": time.time(), "warmup_s": warmup_s, "test_acc": acc,
              "train_loss": rec.get("train_loss"), "dtheta": rec.get("dtheta"),
              "finite": math.isfinite(rec.get("train_loss", 0.0)),
              "peak_gib": torch.cuda.max_memory_allocated(device) / 2 ** 30 if device.type == "cuda" else None}
    _write_json(folder / f"result_{rank}.json", result)
    return result


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    spec_path, rank = argv
    run(json.loads(Path(spec_path).read_text()), int(rank))


if __name__ == "__main__":
    main()
