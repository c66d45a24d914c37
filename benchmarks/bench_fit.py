"""Training throughput of ``train.fit`` and ``batched.fit_many`` vs the usual PyTorch CIFAR loop.

Model: the scale-invariant CIFAR ResNet-18 of Yun et al., ECCV 2022, Sec. 3.1 (``models.create("resnet18",
scale_invariant=True, width=...)``), SGD momentum 0.9, wd 5e-4, on CIFAR-sized data (synthetic 32x32 images by
default; ``--data-root`` with a ``cifar10-jpeg`` folder for real images). Measured in one process, same device:

1. **reference loop**, written the usual way: a ``Dataset`` of HWC uint8 images returned as PIL images (as
   torchvision's ``CIFAR10``), ``transforms.Compose([RandomCrop(32, padding=4), RandomHorizontalFlip(), ToTensor(),
   Normalize(...)])``, ``DataLoader(shuffle=True, num_workers=os.cpu_count(), pin_memory=<cuda>,
   persistent_workers=True)``, ``torch.optim.SGD(foreach=True)``; the same model.
2. ``fit`` (device-resident uint8 data, batched crop/flip, angular tracker): its per-epoch ``seconds``.
3. ``fit_many`` with M = 1, 2, 4, 8 (``--members``) members differing in lr and seed: aggregate images/s over
   all members vs M sequential ``fit`` runs (= ``fit``'s images/s).

Per-epoch time is the median over epochs 2.. (epoch 1 includes warm-up / worker start-up); evaluation is
excluded everywhere. On CUDA it also reports achieved TFLOP/s (``torch.utils.flop_counter`` count of one training
step, fwd+bwd). Not a test: a shared CPU gives noisy numbers, report the load with them.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_fit.py --threads 2 --width 8 --n 512 --epochs 3
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

from repro_lib import data as data_mod
from repro_lib.batched import fit_many
from repro_lib.config import RunConfig
from repro_lib.train import build_model, fit, load_data, resolve_device


class _PILDataset(torch.utils.data.Dataset):
    """CIFAR10-style dataset: HWC uint8 numpy images returned as PIL images through ``transform``."""

    def __init__(self, x_nchw: torch.Tensor, y: torch.Tensor, transform):
        self.x = x_nchw.permute(0, 2, 3, 1).contiguous().numpy()
        self.y = y.tolist()
        self.transform = transform

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        from PIL import Image

        return self.transform(Image.fromarray(self.x[i])), self.y[i]


def reference_epochs(cfg: RunConfig, train: data_mod.ImageTensors, device: torch.device, epochs: int) -> list[float]:
    """Seconds per epoch of the usual DataLoader loop (see the module docstring)."""
    import torchvision.transforms as T

    tf = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize(train.mean, train.std)])
    workers = os.cpu_count() or 1
    loader = torch.utils.data.DataLoader(_PILDataset(train.x, train.y, tf), batch_size=cfg.batch_size, shuffle=True,
                                         num_workers=workers, pin_memory=device.type == "cuda",
                                         persistent_workers=workers > 0, drop_last=False)
    model = build_model(cfg, train.num_classes).to(device)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=cfg.lr, momentum=cfg.momentum,
                          weight_decay=cfg.weight_decay, foreach=True)
    model.train()
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def step_flops(cfg: RunConfig, device: torch.device) -> float:
    """FLOPs of one training step (forward + backward) of one member at batch size B."""
    from torch.utils.flop_counter import FlopCounterMode

    model = build_model(cfg, 10).to(device)
    x = torch.randn(cfg.batch_size, 3, 32, 32, device=device)
    with FlopCounterMode(display=False) as fc:
        F.cross_entropy(model(x), torch.zeros(cfg.batch_size, dtype=torch.long, device=device)).backward()
    return float(fc.get_total_flops())


def _per_epoch(history: list[dict], group: int = 1) -> float:
    s = [h["seconds"] * group for h in history]
    return statistics.median(s[1:] if len(s) > 1 else s)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--width", type=int, default=8, help="ResNet-18 base width (64 = paper)")
    ap.add_argument("--n", type=int, default=512, help="training images")
    ap.add_argument("--batch-size", type=int, nargs="+", default=[128], help="batch sizes to measure")
    ap.add_argument("--epochs", type=int, default=3, help="epochs per measurement (median over epochs 2..)")
    ap.add_argument("--members", type=int, nargs="+", default=[1, 2, 4, 8], help="fit_many group sizes M")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = leave as is)")
    ap.add_argument("--data-root", default="", help="folder with cifar10-jpeg/ (empty: synthetic images)")
    ap.add_argument("--skip-reference", action="store_true")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    real = bool(args.data_root)
    print(f"device={device} torch={torch.__version__} threads={torch.get_num_threads()} cpus={os.cpu_count()} "
          f"load={os.getloadavg()[0]:.1f} width={args.width} n={args.n} epochs={args.epochs} "
          f"data={'cifar10-jpeg' if real else 'synthetic'}")
    rows = []
    for bsz in args.batch_size:
        base = RunConfig(model="resnet18", scale_invariant=True, width=args.width,
                         dataset="cifar10-jpeg" if real else "cifar10", synthetic=not real, n=args.n, n_test=100,
                         batch_size=bsz, lr=0.1, weight_decay=5e-4, momentum=0.9, schedule="constant",
                         num_epochs=args.epochs, eval_every=10 ** 6, device=device.type, profile="cpu")
        flops = step_flops(base, device) if device.type == "cuda" else None
        # warm-up: the first run in a process pays for allocator / thread-pool / kernel-cache start-up (measured
        # 2.8 vs 1.8 s per epoch for the same fit on CPU); it is not timed
        fit(base.replace(n=min(args.n, 4 * bsz), num_epochs=1), data_root=args.data_root or None, progress=False)
        steps = -(-args.n // bsz)
        t_fit = _per_epoch(fit(base, data_root=args.data_root or None, progress=False)["history"])
        line = {"B": bsz, "what": "fit", "M": 1, "s/epoch": t_fit, "img/s": args.n / t_fit}
        rows.append(line)
        if not args.skip_reference:
            train, _ = load_data(base, args.data_root or None)
            t_ref = statistics.median(reference_epochs(base, train, device, args.epochs)[1:] or [float("nan")])
            rows.append({"B": bsz, "what": "reference DataLoader loop", "M": 1, "s/epoch": t_ref,
                         "img/s": args.n / t_ref})
            line["speedup"] = t_ref / t_fit
        for M in args.members:
            cfgs = [base.replace(lr=0.05 * (1 + i), seed=i) for i in range(M)]
            res = fit_many(cfgs, data_root=args.data_root or None, progress=False)
            t = _per_epoch(res[0]["history"], M)
            rows.append({"B": bsz, "what": "fit_many", "M": M, "s/epoch": t, "img/s": M * args.n / t,
                         "speedup": (M * args.n / t) / (args.n / t_fit)})
        if flops is not None:
            for r in rows:
                if r["B"] == bsz:
                    r["TFLOP/s"] = flops * steps * r["M"] / r["s/epoch"] / 1e12
    print(f"{'B':>5} {'what':<26} {'M':>3} {'s/epoch':>9} {'img/s':>9} {'speed-up':>9}"
          + (" TFLOP/s" if device.type == "cuda" else ""))
    for r in rows:
        sp = f"{r['speedup']:.2f}x" if "speedup" in r else ""
        tf = f" {r['TFLOP/s']:.2f}" if "TFLOP/s" in r else ""
        print(f"{r['B']:>5} {r['what']:<26} {r['M']:>3} {r['s/epoch']:>9.3f} {r['img/s']:>9.0f} {sp:>9}{tf}")
    print("speed-up: fit = reference / fit; fit_many = aggregate img/s over M sequential fits. "
          f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
