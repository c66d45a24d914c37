"""Scale-amended SGD and the two layer-wise baselines of its supplement (LARS, LSALR).

Zhang, Chen, Liu — *Train Feedforward Neural Network with Layer-wise Adaptive Rate via Approximating
Back-matching Propagation* (arXiv 1802.09750), supplementary material App. C.1 and App. D. The derivation of
the scale-amended rate and every convention behind it is in :mod:`repro_lib.papers.backmatching.backmatching`; the App. C.1 rates
themselves (:func:`trace_layers`, :func:`layer_rates`, …) are computed here, next to the optimizer that uses them.

All three are SGD with a per-tensor rate factor ``r_p`` applied to the (coupled-L2) gradient before
momentum, in PyTorch's momentum form:

    d_p = r_p · (∇_p J + λ p);   v_p ← μ v_p + d_p;   p ← p − η (d_p + μ v_p if nesterov else v_p)

(first step ``v_p = d_p``, no dampening, exactly ``torch.optim.SGD`` when every ``r_p = 1``). Weight decay is
coupled L2 on every tensor (the supplement says "weight decay with coefficient 1e-3" for the baselines and
5e-3 for scale-amended SGD, nothing more); ``weight_decay_mode="decoupled"`` is rejected.

*choice* (order of rate and momentum): App. D only says each method "uses η·(…) as the learning rate for
layer l" and that SGD has Nesterov momentum 0.9. Read literally as a per-layer learning rate it would be
``p ← p − η·r_t·v`` with the buffer built from unscaled gradients; since ``r_t`` is recomputed every step, the
two orders differ. We scale the gradient *before* it enters the buffer, as You et al. (2017)'s LARS does
(their Algorithm 1: v ← m·v + γ·λ_l·(∇L + βw), the local rate λ_l inside the buffer), so each step's
contribution to the buffer carries the rate of the step it was computed at; LSALR and scale-amended SGD use
the same order. ``tests/test_backmatching.py::test_layer_rate_is_applied_before_momentum`` checks it against a
hand-written update, and that the other order differs.

*choice* (which δW): the supplement's ``δW_l`` is the back-propagated gradient of J (Eq. 13, Eq. 16); it
does not say how the weight decay enters the LARS / LSALR rates. We take ``δW_l = ∇J + λW_l``, the vector the
rate multiplies. For LARS this is You et al. (2017)'s treatment of weight decay up to the triangle
inequality: their denominator ``‖∇L‖ + β‖w‖`` bounds ours, ``‖∇L + βw‖``, from above (equal when ∇L and w
point the same way; for a BN-followed weight ∇L ⟂ w and the two differ by at most a factor √2). It keeps
every LARS step at exactly ``η·trust·‖W_l‖`` before momentum, whereas with the plain ``‖∇J‖`` the
weight-decay part ``r·λW_l`` of the step would grow without bound as ``∇J → 0``. LSALR uses the same
``δW_l`` for consistency.

* ``"scale_amended_sgd"``: ``r_p`` from Eq. (*) of :mod:`repro_lib.papers.backmatching.backmatching` (``layer_rates``), recomputed
  every step from the current weights. ``optimizer_kwargs``: ``norm`` ("ms" | "mean", how ‖·‖_{2,μ} is
  read; default "ms"), ``input_shape`` (per-sample input shape used to trace the chain; default
  ``(3, S, S)`` with ``S`` the dataset's image size). Parameters outside every traced block get ``r = 1``.
* ``"lars"``: ``r_l = trust · ‖W_l‖₂/‖δW_l‖₂`` with ``δW_l = ∇J + λW_l`` (App. D: "η·‖W_l‖/‖δW_l‖", global
  η = 2). *change to the supplement's formula*: App. D's LARS rate has no trust coefficient; without one,
  η = 2 moves every layer by twice its norm per step, so we multiply by You et al. (2017)'s
  ``trust = 1e-3`` (``optimizer_kwargs["trust"]``; ``trust=1`` gives App. D's formula as written).
  Every parameter tensor is a "layer"; where ``‖W_l‖`` or ``‖δW_l‖`` is 0 the ratio is 1 (apex LARC).
* ``"lsalr"``: ``r_l = 1 + log(1 + 1/‖δW_l‖₂)`` (Singh et al. 2015; App. D, global η = 0.1), every tensor;
  ``r_l = 1`` where ``δW_l = 0``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch
import torch.nn as nn

from ._registry import register_optimizer, trainable


# ----------------------------------------------------------------------------- App. C.1 (the rates)
# The scalar local-Hessian approximations of the supplement's App. C.1 and the layer rates of Eq. (*); the
# derivation and every convention behind them are in the docstring of repro_lib.papers.backmatching.backmatching.


def w_row(W: torch.Tensor) -> torch.Tensor:
    """``W_row`` (n × m·w·h): one row per output feature (App. C)."""
    return W.reshape(W.shape[0], -1)


def w_col(W: torch.Tensor) -> torch.Tensor:
    """``W_col`` (m × n·w·h): one row per input feature (App. C)."""
    return W.transpose(0, 1).reshape(W.shape[1], -1)


def sq_norm_mu(A: torch.Tensor, norm: str = "ms") -> torch.Tensor:
    """``‖A‖²_{2,μ}`` of a 2-D matrix. ``"ms"`` (default): mean over rows of squared row norms
    (= ‖A‖_F²/rows); ``"mean"``: the squared mean of the row norms."""
    if norm == "ms":
        return A.pow(2).sum() / A.shape[0]
    if norm == "mean":
        return A.norm(dim=1).mean().pow(2)
    raise ValueError(f"norm: must be 'ms' or 'mean', got {norm!r}")


def m_weight(W: torch.Tensor, s: float, norm: str = "ms") -> torch.Tensor:
    """``m_{b,W} = s / ‖W_row‖²_{2,μ}`` (App. C.1)."""
    return s / sq_norm_mu(w_row(W), norm)


def m_input(W: torch.Tensor, c: float, norm: str = "ms") -> torch.Tensor:
    """``m_{b,z} = ‖W_col‖²_{2,μ} / ‖W_row‖²_{2,μ} / c`` (App. C.1)."""
    return sq_norm_mu(w_col(W), norm) / sq_norm_mu(w_row(W), norm) / c


@dataclass
class Layer:
    """One block of a chain network, as found by :func:`trace_layers` (execution order)."""

    weight: str                     # parameter name of W_b
    bias: str | None                # parameter name of the layer's bias, if any
    bn: list[str] = field(default_factory=list)   # BN γ, β parameter names (empty if no BN / not affine)
    s: float = 1.0                  # sharing parameter q1·q2 (1 for FC)
    c: float = 1.0                  # pooling/padding/stride factor (module docstring)
    has_bn: bool = False            # the layer's output goes straight into a BatchNorm


def trace_layers(model: nn.Module, input_shape: Sequence[int]) -> list[Layer]:
    """Find the chain ``conv/linear → [BN]`` blocks of ``model`` by running one forward pass in eval mode
    (running statistics untouched) on a zero batch of 2 with per-sample shape ``input_shape``.

    ``s`` = output spatial size, ``c = (numel(z_{b-1})/m_b) / (numel(y_b)/n_b)`` where ``z_{b-1}`` is the
    previous block's output (the BN output if any; the network input for the first block). Only chain
    networks (VGG, MLP) are meaningful: the product over "layers above" follows execution order.
    """
    names = {m: n for n, m in model.named_modules()}
    seq: list[tuple[nn.Module, tuple, tuple]] = []

    def hook(mod, inp, out):
        if isinstance(mod, (nn.Conv2d, nn.Linear)) or isinstance(mod, nn.modules.batchnorm._BatchNorm):
            seq.append((mod, tuple(inp[0].shape), tuple(out.shape)))

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    was_training = model.training
    p = next(model.parameters())
    try:
        model.eval()
        with torch.no_grad():
            model(torch.zeros(2, *input_shape, dtype=p.dtype, device=p.device))
    finally:
        model.train(was_training)
        for h in handles:
            h.remove()

    layers: list[Layer] = []
    prev_numel = 1
    for d in input_shape:
        prev_numel *= d
    for i, (mod, ishape, oshape) in enumerate(seq):
        if not isinstance(mod, (nn.Conv2d, nn.Linear)):
            continue
        n = names[mod]
        nxt = seq[i + 1][0] if i + 1 < len(seq) else None
        bn = isinstance(nxt, nn.modules.batchnorm._BatchNorm)
        m_in, n_out = mod.weight.shape[1], mod.weight.shape[0]
        out_numel = 1
        for d in oshape[1:]:
            out_numel *= d
        s = out_numel / n_out
        c = (prev_numel / m_in) / s
        lay = Layer(weight=f"{n}.weight", bias=f"{n}.bias" if mod.bias is not None else None, s=s, c=c, has_bn=bn)
        if bn:
            bn_name = names[nxt]
            lay.bn = [f"{bn_name}.{k}" for k, _ in nxt.named_parameters(recurse=False)]
        layers.append(lay)
        prev_numel = out_numel
    return layers


def layer_constants(layers: Sequence[Layer], weights: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
    """The shape-only inputs of :func:`layer_rates` as tensors on the weights' device and dtype: ``rows`` /
    ``cols`` (dimensions of each weight as rows), ``s``, ``c`` and ``bn`` per block. An optimizer builds them once:
    making them from Python lists at every step would be a blocking host-to-device copy on a GPU."""
    ref = weights[0]
    return dict(rows=ref.new_tensor([float(w.shape[0]) for w in weights]),
                cols=ref.new_tensor([float(w.shape[1]) for w in weights]),
                s=ref.new_tensor([lay.s for lay in layers]), c=ref.new_tensor([lay.c for lay in layers]),
                bn=torch.tensor([lay.has_bn for lay in layers], device=ref.device))


def layer_rates(layers: Sequence[Layer], weights: Sequence[torch.Tensor], norm: str = "ms",
                constants: dict[str, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-block rate factors of Eq. (*) in the module docstring, from the top block down.

    Returns ``(r_W, r_bn)``, 1-D tensors over ``layers``: ``r_W[b] = 1/(m_{b,W} ∏_{i>b} m_{i,z})`` (the
    factor multiplying η for ``W_b``) and ``r_bn[b] = 1/(s_b ∏_{i>b} m_{i,z})`` (BN γ/β and a bias feeding
    BN). Layers without BN use ``m_W = m_z = 1`` (``r_W = r_bn = ∏_{i>b} m_{i,z}^{-1}``).
    ``norm="ms"`` is multi-tensor (one ``_foreach_norm``); ``"mean"`` needs per-row norms (a loop).
    ``constants``: :func:`layer_constants` of the same layers and weights (made here when None).
    """
    weights = [w.detach() for w in weights]
    k = constants if constants is not None else layer_constants(layers, weights)
    rows, cols, s, c, bn = k["rows"], k["cols"], k["s"], k["c"], k["bn"]
    if norm == "ms":
        sq = torch.stack(torch._foreach_norm(weights)).pow(2)
        sq_row, sq_col = sq / rows, sq / cols
    else:
        sq_row = torch.stack([sq_norm_mu(w_row(w), norm) for w in weights])
        sq_col = torch.stack([sq_norm_mu(w_col(w), norm) for w in weights])
    one = torch.ones_like(s)
    inv_mw = torch.where(bn, sq_row / s, one)                      # 1/m_{b,W} = ‖W_row‖²_{2,μ}/s
    inv_mz = torch.where(bn, sq_row * c / sq_col, one)             # 1/m_{b,z} = c‖W_row‖²/‖W_col‖²
    inv_s = torch.where(bn, 1.0 / s, one)
    # above[b] = ∏_{i>b} 1/m_{i,z}: exclusive suffix product
    suffix = torch.flip(torch.cumprod(torch.flip(inv_mz, [0]), 0), [0])
    above = torch.cat([suffix[1:], one[:1]])
    return inv_mw * above, inv_s * above


# ----------------------------------------------------------------------------- optimizers
class LayerwiseSGD(torch.optim.Optimizer):
    """SGD with a per-tensor rate factor applied before momentum (module docstring: a *choice*).

    Subclasses implement ``rates``; ``directions`` are the decayed gradients ``∇J + λp`` the rates multiply."""

    def __init__(self, params, lr: float, momentum: float = 0.0, nesterov: bool = False,
                 weight_decay: float = 0.0):
        if nesterov and momentum <= 0:
            raise ValueError("nesterov: needs momentum > 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay))

    def rates(self, group: dict, params: list[torch.Tensor], directions: list[torch.Tensor]) -> torch.Tensor:
        """1-D tensor: the rate factor ``r_p`` of each parameter in ``params``."""
        raise NotImplementedError

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            wd, mu = group["weight_decay"], group["momentum"]
            d = torch._foreach_add(grads, params, alpha=wd) if wd else [g.clone() for g in grads]
            r = self.rates(group, params, d)
            torch._foreach_mul_(d, list(r.unbind()))  # 0-dim device tensors: no host read-back per step
            if mu:
                bufs = []
                for p, dp in zip(params, d):
                    st = self.state[p]
                    if "momentum_buffer" not in st:
                        st["momentum_buffer"] = dp.clone()
                    else:
                        bufs.append((st["momentum_buffer"], dp))
                if bufs:
                    b_list, d_list = [b for b, _ in bufs], [x for _, x in bufs]
                    torch._foreach_mul_(b_list, mu)
                    torch._foreach_add_(b_list, d_list)
                mom = [self.state[p]["momentum_buffer"] for p in params]
                if group["nesterov"]:
                    torch._foreach_add_(d, mom, alpha=mu)
                else:
                    d = mom
            torch._foreach_add_(params, d, alpha=-group["lr"])
            self._last_rates = r
        return loss


class LARS(LayerwiseSGD):
    """``r_l = trust · ‖W_l‖/‖δW_l‖``, ``δW_l = ∇J + λW_l`` (App. D with You et al. 2017's trust coefficient added)."""

    def __init__(self, params, lr, momentum=0.0, nesterov=False, weight_decay=0.0, trust: float = 1e-3):
        self.trust = trust
        super().__init__(params, lr, momentum, nesterov, weight_decay)

    def rates(self, group, params, directions):
        w = torch.stack(torch._foreach_norm(params))
        g = torch.stack(torch._foreach_norm(directions))
        ok = (w > 0) & (g > 0)
        return self.trust * torch.where(ok, w / torch.where(ok, g, torch.ones_like(g)), torch.ones_like(w))


class LSALR(LayerwiseSGD):
    """``r_l = 1 + log(1 + 1/‖δW_l‖)``, ``δW_l = ∇J + λW_l`` (App. D; Singh et al. 2015)."""

    def rates(self, group, params, directions):
        g = torch.stack(torch._foreach_norm(directions))
        ok = g > 0
        return torch.where(ok, 1 + torch.log1p(1 / torch.where(ok, g, torch.ones_like(g))), torch.ones_like(g))


class ScaleAmendedSGD(LayerwiseSGD):
    """Scale-amended SGD: ``r`` from :func:`layer_rates` (App. C.1, Eq. (*)).

    ``named_params``: the model's ``(name, parameter)`` pairs; ``layers``: the chain found by
    :func:`trace_layers` (which names the weight, bias and BN parameters of each block).
    """

    def __init__(self, named_params, layers, lr, momentum=0.0, nesterov=False, weight_decay=0.0,
                 norm: str = "ms"):
        named_params = list(named_params)
        by_name = dict(named_params)
        sq_norm_mu(torch.ones(1, 1), norm)  # validate early
        self.norm, self.layers = norm, list(layers)
        self._weights = [by_name[lay.weight] for lay in self.layers]
        # role of each parameter: index into cat([r_W, r_bn, 1]); unknown parameters get r = 1
        L = len(self.layers)
        role = {}
        for b, lay in enumerate(self.layers):
            role[lay.weight] = b
            for n in lay.bn:
                role[n] = L + b
            if lay.bias is not None:
                role[lay.bias] = (L + b) if lay.has_bn else b
        self._index = {id(p): role.get(n, 2 * L) for n, p in named_params}
        super().__init__([p for _, p in named_params], lr, momentum, nesterov, weight_decay)

    def layer_rates(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = self._weights[0]
        if getattr(self, "_const_key", None) != (w.device, w.dtype):  # built once, not from lists every step
            self._const_key = (w.device, w.dtype)
            self._constants = layer_constants(self.layers, self._weights)
        return layer_rates(self.layers, self._weights, self.norm, self._constants)

    def rates(self, group, params, directions):
        r_w, r_bn = self.layer_rates()
        table = torch.cat([r_w, r_bn, r_w.new_ones(1)])
        key = tuple(id(p) for p in params)
        if getattr(self, "_idx_key", None) != key:  # which parameters have gradients rarely changes
            self._idx_key = key
            self._idx = torch.tensor([self._index[k] for k in key], device=table.device)
        return table[self._idx]


def _check_coupled(cfg, name):
    if cfg.weight_decay_mode != "coupled":
        raise ValueError(f"weight_decay_mode: optimizer {name!r} implements coupled L2 only")


def _check_kwargs(cfg, allowed):
    bad = sorted(set(cfg.optimizer_kwargs) - set(allowed))
    if bad:
        raise ValueError(f"optimizer_kwargs: unknown key {bad[0]!r} for {cfg.optimizer!r} (known: {sorted(allowed)})")


@register_optimizer("scale_amended_sgd")
def _build_scale_amended(cfg, model):
    _check_coupled(cfg, "scale_amended_sgd")
    _check_kwargs(cfg, ("norm", "input_shape"))
    kw = dict(cfg.optimizer_kwargs)
    shape = kw.get("input_shape")
    if shape is None:
        from ..data import DATASETS

        size = DATASETS[cfg.dataset].image_size
        shape = (3, size, size)
    layers = trace_layers(model, tuple(shape))
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return ScaleAmendedSGD(named, layers, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov,
                           weight_decay=cfg.weight_decay, norm=kw.get("norm", "ms"))


@register_optimizer("lars")
def _build_lars(cfg, model):
    _check_coupled(cfg, "lars")
    _check_kwargs(cfg, ("trust",))
    return LARS(trainable(model), lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov,
                weight_decay=cfg.weight_decay, trust=cfg.optimizer_kwargs.get("trust", 1e-3))


@register_optimizer("lsalr")
def _build_lsalr(cfg, model):
    _check_coupled(cfg, "lsalr")
    _check_kwargs(cfg, ())
    return LSALR(trainable(model), lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov,
                 weight_decay=cfg.weight_decay)
