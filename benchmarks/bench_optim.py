"""Step time of repro_lib's SGDP / AdamP (Heo et al., ICLR 2021) vs timm's and torch's base optimizers.

One optimizer step on the parameter set of torchvision's ResNet-18 (11.7M parameters, 62 tensors) with random
gradients, on CPU, in one process; best of ``--repeats`` timed steps (optimizers interleaved) after ``--warmup`` steps. Settings are the
paper's ImageNet ones (Appendix E.2): SGD family lr 0.1, momentum 0.9, Nesterov, wd 1e-4; Adam family lr 1e-3,
wd 1e-4 (decoupled). ``--orthogonal`` makes every conv/linear gradient orthogonal to its weight row-wise, so that
the projection actually runs (with plain random gradients the Eq. 11 test rarely fires).

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_optim.py --threads 2 --repeats 20
"""
from __future__ import annotations

import argparse
import time

import timm.optim
import torch
import torchvision

from repro_lib.optim.adamp import AdamP
from repro_lib.optim.sgdp import SGDP


def _params(orthogonal: bool, seed: int = 0) -> list[torch.nn.Parameter]:
    torch.manual_seed(seed)
    ps = [p.detach().clone().requires_grad_(True) for p in torchvision.models.resnet18().parameters()]
    for p in ps:
        g = torch.randn_like(p)
        if orthogonal and p.ndim > 1:
            w, g2 = p.detach().reshape(p.shape[0], -1), g.reshape(p.shape[0], -1)
            g2 -= w * ((w * g2).sum(1, keepdim=True) / (w * w).sum(1, keepdim=True))
        p.grad = g
    return ps


OPTIMIZERS = {
    "sgd": {
        "torch SGD foreach": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4,
                                                        foreach=True),
        "timm SGDP": lambda ps: timm.optim.SGDP(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4),
        "repro_lib SGDP": lambda ps: SGDP(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4),
    },
    "adam": {
        "torch AdamW foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.1, foreach=True),
        "timm AdamP": lambda ps: timm.optim.AdamP(ps, lr=1e-3, weight_decay=0.1),
        "repro_lib AdamP": lambda ps: AdamP(ps, lr=1e-3, weight_decay=0.1),
    },
}


def time_steps(makers: dict, orthogonal: bool, warmup: int, repeats: int) -> dict[str, float]:
    """Best-of-``repeats`` seconds per ``step()`` of each optimizer; the optimizers take turns within each
    repeat so that a busy machine slows them alike (min, not median, to discount other processes)."""
    opts = {name: make(_params(orthogonal)) for name, make in makers.items()}
    for opt in opts.values():
        for _ in range(warmup):
            opt.step()
    ts = {name: [] for name in opts}
    for _ in range(repeats):
        for name, opt in opts.items():
            t0 = time.perf_counter()
            opt.step()
            ts[name].append(time.perf_counter() - t0)
    return {name: min(v) for name, v in ts.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--orthogonal", action="store_true", help="gradients orthogonal to the weights (projection on)")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, timm {timm.__version__}, threads {a.threads}, orthogonal grads {a.orthogonal}")
    for family, makers in OPTIMIZERS.items():
        t = time_steps(makers, a.orthogonal, a.warmup, a.repeats)
        base, ref, ours = list(t)
        for name, sec in t.items():
            print(f"  {name:22s} {sec * 1e3:8.2f} ms")
        print(f"  -> {ours}: {t[ref] / t[ours]:.2f}x faster than {ref}, {t[ours] / t[base]:.2f}x the time of {base}")


if __name__ == "__main__":
    main()
