"""The issue-8 GPU benchmark matrix in one run, writing JSON as it goes (a killed run keeps what it measured).

Scale-invariant CIFAR ResNet-18 (width 64, Yun et al. ECCV 2022 Sec. 3.1), SGD momentum 0.9, synthetic 32x32
images (throughput does not depend on pixel values); evaluation excluded (``eval_every`` beyond the run).

1. FLOPs of one training step (``torch.utils.flop_counter``), B = 128 and 1024.
2. Per-epoch seconds at N = 50000: the usual DataLoader loop (``bench_fit.reference_epochs``) vs ``fit`` with
   the default flags (fp32, channels_last, cudnn.benchmark) vs ``fit`` with ``precision="bf16"``; at B = 128 also
   ``fit`` with channels_last and cudnn.benchmark off (what the flags buy).
3. ``fit_many`` aggregate images/s for M = 1, 2, 4, 8, 16 at N = 3125 (B = 128) against M sequential ``fit``
   runs, plus peak memory against ``batched.member_bytes``; then M = 4 and 16 at N = 50000.
4. ``compile=True`` at B = 128 (compile time reported separately: epoch 1).
   ``--only compile`` / ``--only graphs``: just the compile rows / the ``cuda_graphs`` rows (``graphs_only``);
   ``--only core``: the four numbers a new card is first measured by (``core_only``, about a minute on an H200).
5. Optional short real training (``--real-train``): Table 1's N = 12500 column on the carried CIFAR-10 JPEG subset.

    PYTHONPATH=. python benchmarks/bench_gpu.py --out $OUT/bench.json --budget-s 420
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_fit import _per_epoch, reference_epochs, step_flops  # noqa: E402

from repro_lib.batched import fit_many, member_bytes  # noqa: E402
from repro_lib.config import RunConfig  # noqa: E402
from repro_lib.train import fit, load_data  # noqa: E402

T0 = time.time()
OUT: dict = {"rows": [], "errors": []}


def dump(path):
    OUT["elapsed_s"] = time.time() - T0
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(OUT, f, indent=1, default=str)
    os.replace(tmp, path)


def row(path, **kw):
    kw["t"] = round(time.time() - T0, 1)
    OUT["rows"].append(kw)
    print(json.dumps(kw), flush=True)
    dump(path)


def guarded(path, budget, name, fn):
    if time.time() - T0 > budget:
        OUT["errors"].append(f"{name}: skipped (budget)")
        print(f"SKIP {name} (budget)", flush=True)
        return
    try:
        fn()
    except Exception as e:  # keep measuring the rest
        OUT["errors"].append(f"{name}: {type(e).__name__}: {e}")
        traceback.print_exc()
    dump(path)


def reference_row(path, cfg: RunConfig, epochs: int, tflops):
    """Seconds per epoch of the usual DataLoader loop (``bench_fit.reference_epochs``) for ``cfg``."""
    train, _ = load_data(cfg)
    t = reference_epochs(cfg, train, torch.device(cfg.device), epochs)
    s = statistics.median(t[1:] or t)
    row(path, what="reference", B=cfg.batch_size, N=cfg.n, M=1, s_epoch=s, epochs=t,
        tflops=tflops(cfg.batch_size, 1, s, cfg.n))


def fit_row(path, cfg: RunConfig, tag: str, tflops):
    """Seconds per epoch (median of epochs 2..), last training loss and peak memory of ``fit(cfg)``."""
    torch.cuda.reset_peak_memory_stats()
    h = fit(cfg, progress=False)["history"]
    s = _per_epoch(h)
    row(path, what=tag, B=cfg.batch_size, N=cfg.n, M=1, s_epoch=s, epochs=[x["seconds"] for x in h],
        train_loss=h[-1]["train_loss"], tflops=tflops(cfg.batch_size, 1, s, cfg.n),
        peak_gib=torch.cuda.max_memory_allocated() / 2 ** 30, est_gib=member_bytes(cfg) / 2 ** 30)


def many_rows(path, cfg: RunConfig, members, tag: str, tflops):
    """Images/s of one ``fit(cfg)`` (the sequential baseline), then of ``fit_many`` with M members differing in lr
    and seed for each M in ``members``, with the speed-up over M sequential runs and peak memory."""
    b, n = cfg.batch_size, cfg.n
    s1 = _per_epoch(fit(cfg, progress=False)["history"])
    row(path, what=f"fit {tag} (sequential baseline)", B=b, N=n, M=1, s_epoch=s1, img_s=n / s1,
        tflops=tflops(b, 1, s1, n))
    for M in members:
        torch.cuda.reset_peak_memory_stats()
        res = fit_many([cfg.replace(lr=0.05 * (1 + i), seed=i) for i in range(M)], progress=False)
        s = _per_epoch(res[0]["history"], M)  # seconds of one stacked epoch
        row(path, what=f"fit_many {tag}", B=b, N=n, M=M, s_epoch=s, img_s=M * n / s, speedup=(M * n / s) / (n / s1),
            tflops=tflops(b, M, s, n), peak_gib=torch.cuda.max_memory_allocated() / 2 ** 30,
            est_gib=M * member_bytes(cfg) / 2 ** 30)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_gpu.json")
    ap.add_argument("--budget-s", type=float, default=420)
    ap.add_argument("--epochs", type=int, default=2, help="epochs at N=50000 (median over epochs 2..)")
    ap.add_argument("--real-train", default="", help="carried .pt with cifar10-jpeg train/test uint8 subsets")
    ap.add_argument("--real-epochs", type=int, default=30)
    ap.add_argument("--device", default="cuda", help="cpu: a quick dry run of the script with --width 2 etc.")
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--n-small", type=int, default=3125)
    ap.add_argument("--only", default="", help="compile | graphs | core: run only those measurements")
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    if not cuda:  # dry run: no peak-memory counters
        torch.cuda.reset_peak_memory_stats = lambda: None
        torch.cuda.max_memory_allocated = lambda: 0
    OUT["device"] = torch.cuda.get_device_name(0) if cuda else "cpu"
    OUT["torch"] = torch.__version__
    OUT["cpus"] = os.cpu_count()
    print(OUT, flush=True)
    base = RunConfig(model="resnet18", scale_invariant=True, width=args.width, dataset="cifar10", synthetic=True,
                     n=args.n, n_test=1000, batch_size=128, lr=0.1, weight_decay=5e-4, momentum=0.9,
                     schedule="constant", num_epochs=args.epochs, eval_every=10 ** 6, device=dev.type, profile="gpu")
    path = args.out
    flops = {}

    def f_flops():
        for b in (128, 1024):
            flops[b] = step_flops(base.replace(batch_size=b), dev)
            row(path, what="flops/step", B=b, gflop=flops[b] / 1e9)

    guarded(path, args.budget_s, "flops", f_flops)

    def tflops(b, M, s_epoch, n):
        return flops[b] * (-(-n // b)) * M / s_epoch / 1e12 if b in flops else None
    if args.only == "compile":
        return compile_only(args, base, path, tflops)
    if args.only == "graphs":
        return graphs_only(args, base, path, tflops)
    if args.only == "core":
        return core_only(args, base, path, tflops)

    for b in (128, 1024):
        cfg = base.replace(batch_size=b)
        guarded(path, args.budget_s, f"reference B={b}", lambda cfg=cfg: reference_row(path, cfg, args.epochs, tflops))
        guarded(path, args.budget_s, f"fit B={b}", lambda cfg=cfg: fit_row(path, cfg, "fit fp32", tflops))
        guarded(path, args.budget_s, f"fit bf16 B={b}",
                lambda cfg=cfg: fit_row(path, cfg.replace(precision="bf16"), "fit bf16", tflops))
        if b == 128:
            guarded(path, args.budget_s, "fit plain", lambda cfg=cfg: fit_row(
                path, cfg.replace(channels_last=False, cudnn_benchmark=False), "fit fp32 NCHW no-benchmark", tflops))

    def f_many(n, members, epochs, precision="fp32"):
        many_rows(path, base.replace(n=n, num_epochs=epochs, precision=precision), members, precision, tflops)

    guarded(path, args.budget_s, "fit_many N=small", lambda: f_many(args.n_small, (1, 2, 4, 8, 16), 4))
    guarded(path, args.budget_s, "fit_many N=small bf16", lambda: f_many(args.n_small, (16,), 4, "bf16"))
    guarded(path, args.budget_s, "fit_many N=large", lambda: f_many(args.n, (4, 16), args.epochs))

    if args.real_train:
        def f_real():
            from repro_lib import data as data_mod
            from repro_lib.papers.yun2022.grids import get

            d = torch.load(args.real_train, weights_only=True)
            root = "/tmp/repro_gpu_data"
            os.makedirs(root, exist_ok=True)
            info = data_mod.DATASETS["cifar10-jpeg"]
            from pathlib import Path
            for split in ("train", "test"):  # pre-fill the decode cache for this root with the carried subset
                data_mod._cached(info, split, Path(root), lambda s=split: (d[f"x_{s}"], d[f"y_{s}"]))
            plan = get("yun2022_table1").plan("gpu", dataset="cifar10-jpeg")
            plan = plan[plan["paper_n"] == 12500]
            plan = plan[plan["subtable"] == "a"]
            cfgs = [c.replace(num_epochs=args.real_epochs, n=len(d["y_train"]), n_test=0, eval_every=0,
                              device=dev.type, width=args.width) for c in plan["cfg"]]
            t = time.time()
            res = fit_many(cfgs, data_root=root, progress=False)
            wall = time.time() - t
            for (_, r), c, x in zip(plan.iterrows(), cfgs, res):
                row(path, what="real table1 N=12500 column", paper_lr=r["paper_lr"], paper_wd=r.get(
                    "paper_weight_decay"), lr=c.lr, wd=c.weight_decay, tf=c.tuning_factor, epochs=c.num_epochs,
                    test_acc=x["test_acc"], status=x["status"], dtheta=x["history"][-1].get("angular_update"),
                    paper_acc=r.get("paper_accuracy"), yellow=r.get("yellow"))
            row(path, what="real table1 wall", seconds=wall, runs=len(cfgs))

        guarded(path, args.budget_s + 120, "real", f_real)

    def f_compile():
        cfg = base.replace(num_epochs=3, compile=True, precision="bf16")
        h = fit(cfg, progress=False)["history"]
        row(path, what="fit bf16 compile", B=128, N=cfg.n, M=1, s_epoch=_per_epoch(h),
            epochs=[x["seconds"] for x in h], tflops=tflops(128, 1, _per_epoch(h), cfg.n))

    guarded(path, args.budget_s + 180, "compile", f_compile)

    dump(path)
    print("done", time.time() - T0, flush=True)


def compile_only(args, base, path, tflops):
    """``compile=True`` for ``fit`` (B = 128, fp32 and bf16, N = 50000) and ``fit_many`` (M = 16, N = 3125, bf16):
    epoch 1 includes the compilation, the median of the later epochs is the steady state."""
    def one(precision):
        fit_row(path, base.replace(num_epochs=3, compile=True, precision=precision), f"fit {precision} compile",
                tflops)

    def many():
        cfg = base.replace(n=args.n_small, num_epochs=4, compile=True, precision="bf16")
        res = fit_many([cfg.replace(lr=0.05 * (1 + i), seed=i) for i in range(16)], progress=False)
        s = _per_epoch(res[0]["history"], 16)
        row(path, what="fit_many bf16 compile", B=128, N=cfg.n, M=16, s_epoch=s, img_s=16 * cfg.n / s,
            epochs=[x["seconds"] * 16 for x in res[0]["history"]], tflops=tflops(128, 16, s, cfg.n))

    guarded(path, args.budget_s, "compile bf16", lambda: one("bf16"))
    guarded(path, args.budget_s, "compile many", many)
    guarded(path, args.budget_s, "compile fp32", lambda: one("fp32"))
    dump(path)
    print("done", time.time() - T0, flush=True)


def core_only(args, base, path, tflops):
    """The first numbers of a new card, in one process: the usual DataLoader loop, ``fit`` fp32 + CUDA graphs and
    bf16 + CUDA graphs at B = 128 (N = ``--n``), then ``fit_many`` with 16 members (fp32 + graphs, N = ``--n-small``)
    against one sequential graphed ``fit``. The rows of ``graphs_only`` without its B = 1024 and eager rows."""
    cfg = base.replace(batch_size=128)
    guarded(path, args.budget_s, "core reference", lambda: reference_row(path, cfg, args.epochs, tflops))
    for flags in (dict(precision="fp32", cuda_graphs=True), dict(precision="bf16", cuda_graphs=True)):
        tag = "fit " + " ".join(f"{k}={v}" for k, v in flags.items())
        guarded(path, args.budget_s, f"core {tag}", lambda f=flags, tag=tag: fit_row(path, cfg.replace(**f), tag,
                                                                                      tflops))
    guarded(path, args.budget_s, "core many", lambda: many_rows(
        path, base.replace(n=args.n_small, num_epochs=4, cuda_graphs=True), (16,), "fp32 graphs=True", tflops))
    dump(path)
    print("done", time.time() - T0, flush=True)


def graphs_only(args, base, path, tflops):
    """``cuda_graphs=True`` (``train.StaticStep``: forward + backward of every full batch replayed as one CUDA
    graph) against the reference loop and the eager ``fit`` in the same process: ``fit`` at B = 128 and 1024
    (fp32 and bf16, N = 50000), then ``fit_many`` M = 16 at N = 3125 against sequential ``fit`` runs. First a
    correctness row: a small run (N = 1000, ragged last batch) eager vs graphed, fp32, ``fit`` and ``fit_many``
    (M = 3), with deterministic cuDNN kernels: the largest relative difference of the per-epoch training losses,
    0 when the replay runs exactly the eager kernels."""
    def check():  # deterministic cuDNN kernels: otherwise two eager runs already drift apart (check_graphs.py)
        torch.backends.cudnn.deterministic = True
        cfg = base.replace(n=1000, num_epochs=3, cudnn_benchmark=False)
        a = [h["train_loss"] for h in fit(cfg, progress=False)["history"]]
        b = [h["train_loss"] for h in fit(cfg.replace(cuda_graphs=True), progress=False)["history"]]
        cfgs = [cfg.replace(lr=0.05 * (1 + i), seed=i) for i in range(3)]
        ma = [h["train_loss"] for r in fit_many(cfgs, progress=False) for h in r["history"]]
        mb = [h["train_loss"] for r in fit_many([c.replace(cuda_graphs=True) for c in cfgs], progress=False)
              for h in r["history"]]
        rel = lambda u, v: max(abs(x - y) / abs(x) for x, y in zip(u, v))  # noqa: E731
        row(path, what="graphs check: max rel. diff of train loss, eager vs graphed", fit=rel(a, b),
            fit_many=rel(ma, mb), fit_losses=[a, b])
        torch.backends.cudnn.deterministic = False

    guarded(path, args.budget_s, "graphs check", check)
    for b in (128, 1024):
        cfg = base.replace(batch_size=b)
        guarded(path, args.budget_s, f"graphs reference B={b}",
                lambda cfg=cfg: reference_row(path, cfg, args.epochs, tflops))
        for flags in (dict(precision="fp32"), dict(precision="fp32", cuda_graphs=True),
                      dict(precision="bf16", cuda_graphs=True)):
            tag = "fit " + " ".join(f"{k}={v}" for k, v in flags.items())
            guarded(path, args.budget_s, f"graphs fit B={b} {flags}",
                    lambda cfg=cfg, f=flags, tag=tag: fit_row(path, cfg.replace(**f), tag, tflops))

    def many(precision, graphs, M=16):
        cfg = base.replace(n=args.n_small, num_epochs=4, precision=precision, cuda_graphs=graphs)
        many_rows(path, cfg, (M,), f"{precision} graphs={graphs}", tflops)

    guarded(path, args.budget_s, "graphs many fp32", lambda: many("fp32", True))
    guarded(path, args.budget_s, "graphs many bf16", lambda: many("bf16", True))
    guarded(path, args.budget_s, "eager many fp32", lambda: many("fp32", False))
    dump(path)
    print("done", time.time() - T0, flush=True)


if __name__ == "__main__":
    main()
