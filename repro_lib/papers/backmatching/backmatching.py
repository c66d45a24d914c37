"""Back-matching propagation and its scalar local-Hessian approximations.

Zhang, Chen, Liu — *Train Feedforward Neural Network with Layer-wise Adaptive Rate via Approximating
Back-matching Propagation* (arXiv 1802.09750). Only the supplementary material survives in our copy
(``003_302bf5df7395b6d5.txt``): Proposition 1 (App. A), BP through BN for the back-matching loss
(App. B, Eq. 7–10), the local Hessian of a convolutional layer (App. C, Eq. 11–19) and its scalar
approximation with BN (App. C.1). The optimizer built on it lives in ``repro_lib.optim.backmatching``, with the
App. C.1 rates it uses (:func:`layer_rates`, :func:`trace_layers`, …; re-exported here).

Reconstruction (what the supplement implies; choices marked *choice*)
---------------------------------------------------------------------
A chain network ``z_b = F_b(W_b, z_{b-1})``, ``b = 1..B``, with loss ``J = ℓ(y; z_B)`` (Eq. 1 of the main
paper, referenced in App. A). Back-matching propagation walks from the top block down. With the target
``z_b^{k+1/2}`` of block ``b`` known, the block's *back-matching loss* is

    ℓ_b(W_b, z_{b-1}) = ½ ‖z_b^{k+1/2} − F_b(W_b, z_{b-1})‖²      (ℓ_B = ℓ(y; F_B(W_B, z_{B-1})))

and both the block's weights and its input are moved to decrease it; the new input becomes the target of
block ``b-1``. **Proposition 1**: one gradient step of size 1 on ``ℓ_b`` in ``z_{b-1}`` gives
``z_{b-1}^{k+1/2} − z_{b-1}^k = −∂J/∂z_{b-1}`` (App. A, Eq. 2–6), and then ``∂ℓ_b/∂W_b = ∂J/∂W_b``: with
first-order steps, back-matching *is* back-propagation (:func:`back_matching`).

Replacing the first-order steps by Newton steps on the quadratic ``ℓ_b`` (the local Hessians ``H_W``,
``H_z`` of Eq. 17–19):

    Δz_{b-1} = H_{b,z}^{-1} (∂F_b/∂z_{b-1})ᵀ Δz_b,        ΔW_b = H_{b,W}^{-1} (∂F_b/∂W_b)ᵀ Δz_b.

App. C.1 approximates each Hessian by a scalar (for a conv layer followed by BN):

    m_{b,W} = s_b / ‖W_row‖²_{2,μ},       s_b = q1·q2 (output spatial size; 1 for an FC layer)
    m_{b,z} = ‖W_col‖²_{2,μ} / ‖W_row‖²_{2,μ} / c_b

With scalars the Newton steps are rescaled BP steps. Starting from ``Δz_B = −η ∂ℓ/∂z_B``, induction gives
``Δz_{b} = −η ∏_{i>b} m_{i,z}^{-1} · ∂J/∂z_b`` and therefore

    ΔW_b = −η_b ∂J/∂W_b,      η_b = η / ( m_{b,W} · ∏_{i=b+1}^{B} m_{i,z} )              (*)

i.e. SGD with a layer-wise rate ("scale-amended SGD"). For a BN-followed layer ``m_{b,W} ∝ 1/‖W_b‖²``
and ``m_{b,z}`` is invariant to rescaling, so ``η_b ∝ ‖W_b‖²``: since BN makes ``∂J/∂W_b ∝ 1/‖W_b‖``,
the step ``ΔW_b`` scales with ``W_b`` and the trajectory of ``W_b/‖W_b‖`` does not depend on ``‖W_b‖``.

Precise conventions used here
* ``W`` of a conv layer has PyTorch shape ``(n, m, w, h)`` (n = output, m = input channels). ``W_row`` is
  ``W.reshape(n, m·w·h)``, ``W_col`` is ``W.transpose(0, 1).reshape(m, n·w·h)`` (App. C).
* *choice*: ``‖A‖²_{2,μ}`` is the **mean over rows of the squared row ℓ2 norms**, ``‖A‖_F² / rows``. It is the
  mean of the diagonal of the exact local Hessians (``tests/test_backmatching.py`` checks that with circular
  padding ``mean diag W_aᵀW_a = ‖W_col‖²_{2,μ}/c`` exactly, and with BN ``mean diag H_W ≈ s/‖W_row‖²_{2,μ}``).
  With it ``m_{b,z} = n_b / (m_b c_b)`` depends only on the shapes. ``norm="mean"`` instead squares the mean
  of the row norms (the other reading of the subscript μ).
* ``c_b`` (App. C: "related with pooling, padding and stride", 4 for a same-padding stride-2 layer) is the
  average number of output positions per input position lost between ``z_{b-1}`` (the previous block's BN
  output) and the layer output: ``c_b = (numel(z_{b-1})/m_b) / (numel(y_b)/n_b)``, per sample. A 2×2
  max-pool in front of a stride-1 same conv gives 4, a stride-2 same conv gives 4, a flatten into an FC
  layer gives 1, a pool-then-flatten into an FC layer gives 4. *choice*: ReLU is not counted (the
  supplement does not list it).
* *choice*: a layer **not followed by BN** (the classifier of VGG) has no scalar approximation in the
  supplement; it gets ``m_W = m_z = 1``: its rate is ``η·∏_{i>b} m_{i,z}^{-1}`` and it passes the signal
  through unamended.
* *choice*: BN ``γ, β`` of block ``b`` (and a bias feeding BN) are block-``b`` parameters whose local
  Hessian is ``E_x Σ_positions 1 = s_b`` (``x̂`` has unit second moment), so their rate is
  ``η / (s_b ∏_{i>b} m_{i,z})``. The bias of a layer without BN gets that layer's rate.

The last section declares the runs of the supplement's Table 1 and how each profile shrinks them
(``TABLE1_*``, :func:`table1_plan`), as data.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------- Proposition 1


def forward_chain(blocks: Sequence[nn.Module], x: torch.Tensor) -> list[torch.Tensor]:
    """``[z_0 = x, z_1, …, z_B]`` with ``z_b = F_b(W_b, z_{b-1})``."""
    zs = [x]
    for blk in blocks:
        zs.append(blk(zs[-1]))
    return zs


def back_matching(blocks: Sequence[nn.Module], x: torch.Tensor, y: torch.Tensor,
                  loss_fn: Callable = F.cross_entropy, z_step: float = 1.0) -> dict:
    """First-order back-matching propagation (App. A).

    Every block is evaluated *locally* on a detached copy of its input (no global graph): the top block
    minimises ``ℓ_B = loss_fn(F_B(W_B, z_{B-1}), y)``, every other block the back-matching loss
    ``ℓ_b = ½‖z_b^{k+1/2} − F_b(W_b, z_{b-1})‖²`` (sum over batch and features), and
    ``z_{b-1}^{k+1/2} = z_{b-1} − z_step · ∂ℓ_b/∂z_{b-1}`` (Eq. 3–4).

    Returns ``{"z": [z_0..z_B], "target": [z_0^{k+1/2}..z_{B-1}^{k+1/2}], "grad_z": [∂ℓ_b/∂z_{b-1}]_{b=1..B},
    "grad_w": [[∂ℓ_b/∂p for p in block b]]_{b=1..B}}`` (lists indexed by block, 0-based).
    Proposition 1: with ``z_step=1``, ``target[b-1] − z[b-1] = −∂J/∂z_{b-1}`` and ``grad_w = ∂J/∂W``.
    """
    with torch.no_grad():
        zs = forward_chain(blocks, x)
    B = len(blocks)
    grad_z: list = [None] * B
    grad_w: list = [None] * B
    target: list = [None] * B
    for b in reversed(range(B)):
        blk = blocks[b]
        z_in = zs[b].detach().requires_grad_(True)
        out = blk(z_in)
        if b == B - 1:
            loss = loss_fn(out, y)
        else:
            loss = 0.5 * (target[b + 1] - out).pow(2).sum()
        params = [p for p in blk.parameters() if p.requires_grad]
        grads = torch.autograd.grad(loss, [z_in] + params)
        grad_z[b], grad_w[b] = grads[0], list(grads[1:])
        target[b] = (zs[b] - z_step * grads[0]).detach()
    return {"z": zs, "target": target, "grad_z": grad_z, "grad_w": grad_w}


class BNMLP(nn.Module):
    """Small MLP whose blocks are the ``F_b`` of App. B: ``[Linear→BN, ReLU, Linear→BN, ReLU, …, Linear]``.

    ``Linear`` layers before BN have no bias (BN removes it); BN is affine unless ``affine=False``
    (Eq. 8 is written for the non-affine case). ``self.blocks`` is the chain used by :func:`back_matching`.
    """

    def __init__(self, sizes: Sequence[int], num_classes: int, affine: bool = True):
        super().__init__()
        blocks: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            blocks.append(nn.Sequential(nn.Linear(a, b, bias=False), nn.BatchNorm1d(b, affine=affine)))
            blocks.append(nn.ReLU())
        blocks.append(nn.Linear(sizes[-1], num_classes))
        self.blocks = nn.ModuleList(blocks)
        self.scale_invariant_names = [n for n, p in self.named_parameters()
                                      if p.ndim == 2 and n != f"blocks.{len(blocks) - 1}.weight"]

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


# ----------------------------------------------------------------------------- App. B, Eq. 7–10


def bn_backward(grad_z: torch.Tensor, z_tilde: torch.Tensor, gamma: torch.Tensor | None = None,
                eps: float = 1e-5) -> torch.Tensor:
    """∂ℓ/∂z̃ through train-mode BN ``z = γ·(z̃ − E[z̃])/sqrt(Var[z̃]+eps) + β`` over the batch dim 0 (Eq. 8).

    ``Var`` is the biased batch variance (what BN normalises by). Eq. 8 is the ``γ = 1`` case; a given
    ``gamma`` multiplies ``grad_z`` first (``∂ℓ/∂x̂ = γ ∂ℓ/∂z``).
    """
    g = grad_z if gamma is None else grad_z * gamma
    m = z_tilde.shape[0]
    mean = z_tilde.mean(0)
    var = z_tilde.var(0, unbiased=False)
    inv = (var + eps).rsqrt()
    centred = z_tilde - mean
    d_var = (g * centred).sum(0) * (-0.5) * inv ** 3                              # ∂ℓ/∂Var[z̃]
    d_mean = -(g * inv).sum(0) + d_var * (-2.0 / m) * centred.sum(0)              # ∂ℓ/∂E[z̃]
    return g * inv + d_var * 2.0 * centred / m + d_mean / m                       # Eq. 8


def fc_bn_backmatching_grads(W: torch.Tensor, z_prev: torch.Tensor, target: torch.Tensor,
                             gamma: torch.Tensor | None = None, beta: torch.Tensor | None = None,
                             eps: float = 1e-5) -> dict:
    """Gradients of ``ℓ_b = ½‖target − BN(z_prev Wᵀ)‖²`` for an FC layer with train-mode BN (App. B).

    Batch-first tensors: ``z_prev (m, d_in)``, ``W (d_out, d_in)``. Returns ``grad_z`` (Eq. 7),
    ``grad_z_tilde`` (Eq. 8), ``grad_z_prev = ∂ℓ/∂z̃ · W`` (Eq. 9 = ``Wᵀ ∂ℓ/∂z̃`` per sample) and
    ``grad_W = (∂ℓ/∂z̃)ᵀ z_prev`` (Eq. 10, summed over the batch).
    """
    z_tilde = z_prev @ W.t()
    z = F.batch_norm(z_tilde, None, None, gamma, beta, training=True, eps=eps)
    grad_z = z - target                                                           # Eq. 7
    grad_zt = bn_backward(grad_z, z_tilde, gamma, eps)                            # Eq. 8
    return {"grad_z": grad_z, "grad_z_tilde": grad_zt,
            "grad_z_prev": grad_zt @ W,                                            # Eq. 9
            "grad_W": grad_zt.t() @ z_prev}                                       # Eq. 10


# ----------------------------------------------------------------------------- App. C.1
# The scalar Hessian approximations and the layer rates of Eq. (*) live with the optimizer that uses them
# (repro_lib.optim.backmatching); re-exported here, where the derivation is.
from ...optim.backmatching import (Layer, layer_constants, layer_rates, m_input, m_weight,  # noqa: E402,F401
                                 sq_norm_mu, trace_layers, w_col, w_row)
from .. import transcribed  # noqa: E402

#: the App. C.1 functions re-exported above, named once here so that a linter sees the re-export used
APP_C1 = (Layer, layer_constants, layer_rates, m_input, m_weight, sq_norm_mu, trace_layers, w_col, w_row)


# ----------------------------------------------------------------------------- Table 1 runs (profiles as data)
# The supplement (App. D) gives the methods, their global rates and weight decays (read from the paper table
# ``repro_lib.papers.transcribed.table("backmatching_table1")``: lr, weight_decay per method) and "median of 3 runs"; it
# does not give epochs, batch size, schedule or augmentation. *choice*: the common CIFAR VGG recipe —
# batch 128, 200 epochs, LR ÷10 at 50 % and 75 % of training, crop + flip, Nesterov momentum 0.9 for all
# four methods (App. D states it for SGD; the other three are SGD with a layer-wise rate).
TABLE1_BASE = dict(scale_invariant=False, n=50000, batch_size=128, momentum=0.9, nesterov=True,
                   schedule="step", schedule_kwargs={"milestones": (0.5, 0.75), "factor": 0.1},
                   num_epochs=200, augment=True)
TABLE1_MODELS = ("vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn")
TABLE1_METHODS = ("sgd", "lars", "lsalr", "scale_amended_sgd")  # row order of the paper's Table 1
# profile -> datasets (paper name -> dataset we train on; a paper dataset left out is not run), models,
# seeds, RunConfig overrides. cpu: the CIFAR-10 half of the table only (CIFAR-100 would double its time).
TABLE1_PROFILES = {
    "smoke": dict(datasets={"cifar10": "cifar10"}, models=TABLE1_MODELS, seeds=(0,),
                  overrides=dict(synthetic=True, width=4, n=256, batch_size=64, num_epochs=2, n_test=200,
                                 device="cpu")),
    "cpu": dict(datasets={"cifar10": "cifar10"}, models=("vgg11_bn", "vgg16_bn"), seeds=(0, 1, 2),
                overrides=dict(width=8, n=5000, num_epochs=26, n_test=2000)),
    "gpu": dict(datasets={"cifar10": "cifar10", "cifar100": "cifar100"}, models=TABLE1_MODELS, seeds=(0,),
                overrides=dict(num_epochs=100)),
    "paper": dict(datasets={"cifar10": "cifar10", "cifar100": "cifar100"}, models=TABLE1_MODELS,
                  seeds=(0, 1, 2), overrides={}),
}


# The longer comparison that separates the method from the schedule: in the cpu table's 26 epochs scale-amended SGD
# leads while the LR is high and falls behind after the decays, when its layer rates turn the weights less per epoch
# than SGD's step does. VGG11-BN, scale-amended SGD and SGD only, the cpu table's N and width, 104 epochs (LR ÷10 at
# 52 and 78: four relaxation times 1/(2 TF) of SGD's decay before the first), 3 seeds, the full test set. gpu and
# paper: none (their tables already train 100 and 200 epochs).
LONG_PROFILES = {
    "smoke": dict(datasets={"cifar10": "cifar10"}, models=("vgg11_bn",), methods=("sgd", "scale_amended_sgd"),
                  seeds=(0,), overrides=dict(synthetic=True, width=4, n=256, batch_size=64, num_epochs=4, n_test=200,
                                             device="cpu")),
    "cpu": dict(datasets={"cifar10": "cifar10"}, models=("vgg11_bn",), methods=("sgd", "scale_amended_sgd"),
                seeds=(0, 1, 2), overrides=dict(width=8, n=5000, num_epochs=104, n_test=0, eval_every=13)),
    "gpu": dict(datasets={}, models=(), methods=(), seeds=(), overrides={}),
    "paper": dict(datasets={}, models=(), methods=(), seeds=(), overrides={}),
}


def table1_plan(profile: str, seeds=None, seed_offset: int = 0, dataset: str = "", long: bool = False, **params):
    """One row per (paper dataset, model, method, seed) of Table 1 for ``profile``: the paper's cell
    (``paper_dataset``, ``model``, ``method``, ``paper_accuracy``) and the ``cfg`` (a ``RunConfig``) to train.
    ``seeds`` default to the profile's, each plus ``seed_offset``. ``dataset``: what the paper's CIFAR-10 runs
    train on instead of the profile's choice (e.g. ``"cifar10-jpeg"``; ``""``: the profile's, CIFAR-10 itself);
    the CIFAR-100 runs are unchanged. ``long``: the longer comparison of :data:`LONG_PROFILES` instead of the table
    (an empty plan where the profile has none). ``params`` override RunConfig fields of every run (an unknown name
    is a ``ValueError`` naming it)."""
    import pandas as pd
    from ...config import RunConfig
    from ...profiles import check_profile

    check_profile(profile)
    known = set(RunConfig.__dataclass_fields__)
    for k in params:
        if k not in known:
            raise ValueError(f"{k}: unknown parameter (RunConfig fields: {sorted(known)})")
    prof = (LONG_PROFILES if long else TABLE1_PROFILES)[profile]
    methods = prof.get("methods", TABLE1_METHODS)
    datasets = {**prof["datasets"], **({"cifar10": dataset} if dataset and "cifar10" in prof["datasets"] else {})}
    cells = transcribed.table("backmatching_table1")
    rows = []
    for _, c in cells.iterrows():
        if c["dataset"] not in prof["datasets"] or c["model"] not in prof["models"] or c["method"] not in methods:
            continue
        for seed in (prof["seeds"] if seeds is None else seeds):
            seed = int(seed) + seed_offset
            f = dict(TABLE1_BASE, model=c["model"], dataset=datasets[c["dataset"]], optimizer=c["method"],
                     lr=float(c["lr"]), weight_decay=float(c["weight_decay"]), seed=int(seed), profile=profile)
            f.update(prof["overrides"])
            f.update(params)
            rows.append({"paper_dataset": c["dataset"], "model": c["model"], "method": c["method"],
                         "seed": int(seed), "paper_accuracy": float(c["accuracy"]), "cfg": RunConfig(**f)})
    return pd.DataFrame(rows, columns=["paper_dataset", "model", "method", "seed", "paper_accuracy", "cfg"])
