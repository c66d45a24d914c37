"""Ghost batch norm, forward + backward, per layer shape of the width-64 ResNet-18 (Yun et al. Sec. 3.1, ghost
batch 64): ``GhostBatchNorm`` (one ``F.batch_norm`` per chunk slice + ``cat``) against the previous single call
on a transposed copy ``(k, g, C, L) -> (g, k*C, L)`` (kept here only as the baseline), channels_last (the CUDA
default) and NCHW, fp32 and bf16. Eager wall time of the isolated layer: on a GPU this is launch-bound
(k = B/64 calls per layer), so the split is slower here (H200: 1.3x at B = 128, 2.2x at B = 1024;
``results_h200_ghost_bn_eager.json``) although the whole graphed training step is 1.5x faster with it
(``results_h200_graphs.json`` vs ``results_h200_graphs_transposed_bn.json``); on CPU the split is faster.

    PYTHONPATH=. python benchmarks/bench_ghost_bn.py --out $OUT/ghost_bn.json
"""
from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F

from repro_lib.models.layers import GhostBatchNorm, ghost_chunk_sizes


def transposed_copy_forward(bn: GhostBatchNorm, x: torch.Tensor) -> torch.Tensor:
    """The previous implementation (equal chunks only): every (chunk, channel) pair one channel of one call."""
    sizes = ghost_chunk_sizes(x.shape[0], bn.ghost_batch, bn.min_chunk)
    g, k, C = sizes[0], len(sizes), x.shape[1]
    assert all(s == g for s in sizes)
    xs = x.reshape(k, g, C, -1).transpose(0, 1).reshape(g, k * C, -1)
    bm, bv = bn.running_mean.new_zeros(k * C), bn.running_var.new_ones(k * C)
    ys = F.batch_norm(xs, bm, bv, None, None, True, 1.0, bn.eps)
    bn._update_running_stats(bm.view(k, C), bv.view(k, C))
    return ys.reshape(g, k, C, -1).transpose(0, 1).reshape(x.shape)


def timed(fn, x, g, reps, cuda):
    for _ in range(3):
        torch.autograd.grad(fn(x), x, g)
    if cuda:
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        torch.autograd.grad(fn(x), x, g)
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / reps * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="ghost_bn.json")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    rows = []
    for B in (128, 1024):
        for dtype in (torch.float32, torch.bfloat16):
            for cl in (True, False):
                tot = {"split": 0.0, "transposed": 0.0}
                for C, H in ((64, 32), (128, 16), (256, 8), (512, 4)):
                    x = torch.randn(B, C, H, H, device=dev, dtype=dtype)
                    if cl:
                        x = x.contiguous(memory_format=torch.channels_last)
                    x.requires_grad_(True)
                    g = torch.randn_like(x)
                    bn = GhostBatchNorm(C).to(dev)
                    us = {"split": timed(bn, x, g, args.reps, dev.type == "cuda"),
                          "transposed": timed(lambda t: transposed_copy_forward(bn, t), x, g, args.reps,
                                              dev.type == "cuda")}
                    for kk in tot:
                        tot[kk] += us[kk]
                    r = dict(B=B, C=C, H=H, dtype=str(dtype), channels_last=cl,
                             **{f"{kk}_us": v for kk, v in us.items()},
                             speedup=us["transposed"] / us["split"])
                    rows.append(r)
                    print(json.dumps(r), flush=True)
                print(json.dumps(dict(B=B, dtype=str(dtype), channels_last=cl, sum_split_us=tot["split"],
                                      sum_transposed_us=tot["transposed"])), flush=True)
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu", "rows": rows}, f,
                  indent=1)


if __name__ == "__main__":
    main()
