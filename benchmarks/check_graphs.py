"""Is ``cuda_graphs=True`` the same arithmetic as the eager step? A check to run on a CUDA device.

Training trajectories are chaotic: two eager runs with non-deterministic cuDNN kernels already drift apart by
more than float32 rounding after a few epochs, so a trajectory comparison alone cannot tell a broken capture
from noise. This script separates the two:

1. **One step, deterministic kernels** (``cudnn.deterministic``): the gradients and BN running statistics after
   one training step of ``train.StaticStep`` (warm-up, capture, replay) against the eager
   ``loss.backward()`` on the same weights and batch. Expected: equal to float32 rounding (~1e-6 relative).
2. **Whole runs, deterministic kernels**: per-epoch training loss of ``fit`` eager twice (the noise floor: 0 when
   deterministic) and graphed; ``fit_many`` (M = 3) eager and graphed, member by member.

    PYTHONPATH=. python benchmarks/check_graphs.py --out $OUT/check.json
"""
from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F

from repro_lib.batched import fit_many
from repro_lib.config import RunConfig
from repro_lib.train import FastPath, StaticStep, build_model, fit, trainable


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30))


def one_step(cfg: RunConfig, device: torch.device) -> dict:
    """Max relative difference of every gradient and every BN buffer after one step, eager vs ``StaticStep``
    (the captured graph's first replay), from the same initial weights and batch."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(cfg.batch_size, 3, 32, 32, generator=g).to(device)
    y = torch.randint(0, 10, (cfg.batch_size,), generator=g).to(device)
    out = {}
    for graphs in (False, True):
        model = build_model(cfg, 10).to(device)
        fast = FastPath(cfg.replace(cuda_graphs=graphs), device)
        fwd = fast.prepare(model)
        model.train()

        def loss_fn(a, b):
            with fast.autocast():
                o = fwd(fast.inputs(a))
                loss = F.cross_entropy(o, b)
            return loss, (loss.detach(),)

        params = trainable(model)
        if graphs:
            step = StaticStep(loss_fn, params, list(model.buffers()), cfg.batch_size)
            (loss,) = step(x, y)
        else:
            loss, _ = loss_fn(x, y)
            loss.backward()
        if device.type == "cuda":
            torch.cuda.synchronize()
        out[graphs] = ([p.grad.detach().clone() for p in params], [b.detach().clone() for b in model.buffers()],
                       float(loss.detach()))
    (ga, ba, la), (gb, bb, lb) = out[False], out[True]
    return {"loss_eager": la, "loss_graph": lb,
            "grad_max_rel": max(rel(a, b) for a, b in zip(ga, gb)),
            "buffer_max_rel": max(rel(a, b) for a, b in zip(ba, bb) if a.is_floating_point()),
            "int_buffers_equal": all(torch.equal(a, b) for a, b in zip(ba, bb) if not a.is_floating_point())}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="check_graphs.json")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of this script")
    ap.add_argument("--width", type=int, default=64, help="width of the benchmark-sized model")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
    res = {"device": name, "torch": torch.__version__, "rows": []}

    def put(**kw):
        res["rows"].append(kw)
        print(json.dumps(kw), flush=True)
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)

    small = RunConfig(model="resnet18", scale_invariant=True, width=4, dataset="cifar10", synthetic=True, n=150,
                      n_test=20, batch_size=64, num_epochs=3, ghost_batch=32, device=device.type, profile="smoke",
                      cudnn_benchmark=False)
    bench = small.replace(width=args.width, n=1000, batch_size=128, ghost_batch=64, lr=0.1, weight_decay=5e-4,
                          momentum=0.9, schedule="constant", profile="gpu")
    for det in (True, False):
        torch.backends.cudnn.deterministic = det
        for name, cfg in (("small", small), ("bench", bench)):
            for prec in ("fp32", "bf16"):
                c = cfg.replace(precision=prec)
                put(what="one step", cfg=name, precision=prec, deterministic=det, **one_step(c, device))
    torch.backends.cudnn.deterministic = True
    for name, cfg in (("small", small), ("bench", bench)):
        losses = lambda c: [h["train_loss"] for h in fit(c, progress=False)["history"]]  # noqa: E731
        put(what="fit losses (deterministic)", cfg=name, eager=losses(cfg), eager_again=losses(cfg),
            graphed=losses(cfg.replace(cuda_graphs=True)))
        cfgs = [cfg.replace(seed=s, lr=0.05 * (s + 1)) for s in range(3)]
        ea = [[h["train_loss"] for h in r["history"]] for r in fit_many(cfgs, progress=False)]
        gr = [[h["train_loss"] for h in r["history"]]
              for r in fit_many([c.replace(cuda_graphs=True) for c in cfgs], progress=False)]
        seq = [losses(c) for c in cfgs]
        put(what="fit_many losses (deterministic)", cfg=name, eager=ea, graphed=gr, sequential_fit=seq)


if __name__ == "__main__":
    main()
