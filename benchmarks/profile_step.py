"""Where the time of one training step goes: ``torch.profiler`` kernel table of the scale-invariant ResNet-18
(width 64, ghost BN 64) training step at B = 128, eager, fp32 and bf16.

    PYTHONPATH=. python benchmarks/profile_step.py --out $OUT/profile.txt
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from repro_lib.config import RunConfig
from repro_lib.optim import build_optimizer
from repro_lib.train import FastPath, build_model


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="profile.txt")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    lines = []
    for precision in ("fp32", "bf16"):
        cfg = RunConfig(model="resnet18", scale_invariant=True, width=args.width, dataset="cifar10", synthetic=True,
                        n=1024, batch_size=args.batch_size, lr=0.1, weight_decay=5e-4, momentum=0.9,
                        device=dev.type, profile="gpu", precision=precision)
        model = build_model(cfg, 10).to(dev)
        fast = FastPath(cfg, dev)
        fwd = fast.prepare(model)
        opt = build_optimizer(cfg, model)
        x = torch.randn(cfg.batch_size, 3, 32, 32, device=dev)
        y = torch.randint(0, 10, (cfg.batch_size,), device=dev)

        def step():
            with fast.autocast():
                loss = F.cross_entropy(fwd(fast.inputs(x)), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        for _ in range(5):
            step()
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        with profile(activities=acts) as prof:
            for _ in range(args.steps):
                step()
            if dev.type == "cuda":
                torch.cuda.synchronize()
        key = "self_cuda_time_total" if dev.type == "cuda" else "self_cpu_time_total"
        table = prof.key_averages().table(sort_by=key, row_limit=30, max_name_column_width=70)
        lines += [f"==== {precision}, B={cfg.batch_size}, width={cfg.width}, {args.steps} steps", table]
        print(lines[-2], "\n", table, flush=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
