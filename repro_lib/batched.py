"""Many runs of one grid as one stacked model: ``fit_many(configs)`` (for the hyperparameter grids of
Yun et al., *On the Angular Update and Hyperparameter Tuning of a Scale-Invariant Network*, ECCV 2022, Table 1).

``fit_many`` trains M runs that share model, width, dataset, N, batch size, epochs and device but differ in
learning rate, weight decay, momentum, Nesterov flag, seed and schedule, and returns one result per run in the
format of :func:`repro_lib.train.fit`, with the same mathematics per member:

* **Model (choice: the member dimension folded into channels).** The M member models are built exactly as
  ``fit`` builds them (``train.build_model``: ``torch.manual_seed(cfg.seed)`` then ``models.create``) and stacked
  into one network whose tensors are ``(B, M·C, H, W)`` with member-major channels: every ``Conv2d`` becomes a
  grouped conv (``groups = M·groups``), every ``GhostBatchNorm(C)`` a ``GhostBatchNorm(M·C)``, every BatchNorm a
  BatchNorm over ``M·C`` channels, and the classifier (``FixedLinear`` or ``nn.Linear``) a batched matmul
  (:class:`StackedLinear`). This is what ``torch.vmap`` does with a convolution internally, but it keeps the
  ghost-BN running-statistics update an ordinary in-place buffer update: BN statistics are per channel, so
  channel ``m·C + c`` holds member m's channel c and its ghost-batch statistics, running mean/var and chunking
  (the same chunk boundaries, since all members share B) are exactly those of member m alone. No functional BN
  and no ``vmap`` over in-place updates is needed, and the existing ``GhostBatchNorm`` code is reused unchanged.
  The network's own ``forward`` (ReLU, residual adds, pooling, flatten) is channel-separable and is reused as is;
  at build time the stacked network is checked against the M member networks on a small input (eval mode), so a
  model whose forward mixes channels (e.g. a ``torch.cat`` along channels) is rejected with a ``ValueError``.
* **Data.** Member m draws its batches from its own ``data.TensorBatches`` (its own class-balanced subset and the
  generator seeded by (cfg.seed, epoch)), so its batches are bit-identical to ``fit``'s; the M batches of a step
  are made by one gather over the members' padded training sets (concatenated once) and one normalization
  (:class:`_StackedBatches`), then stacked along channels. The loss is ``Σ_m mean_b CE(out_{b,m}, y_{b,m})``:
  member m's parameters only influence its own term, so the gradient of the sum is exactly the gradient of each
  run's own mean loss.
* **Optimizer.** ``torch.optim.SGD`` (registry name ``"sgd"``) re-implemented on one flat buffer holding every
  member's trainable tensors (the stacked parameters are views into it): coupled L2 ``d = g + λx``, PyTorch
  momentum ``v ← μv + d`` (dampening 0), ``x ← x − η v`` (Nesterov: ``x ← x − η(d + μv)``), with per-member
  ``η`` (from ``schedules.build_schedule(cfg, steps_per_epoch).lr(step)``, precomputed for every step since
  schedules are pure functions of the step), ``λ`` and ``μ`` as per-element vectors: five tensor ops per step
  for all members together. Only schedules with the default ``Schedule.apply`` (step, cosine, constant, …) are
  supported; the exponential schedules, which act on the optimizer state, are rejected.
* **CUDA graphs** (``cuda_graphs=True``, a shared field): forward + backward of the stack run as one
  ``train.StaticStep`` whose gradients are views of one flat buffer in ``flat``'s layout, so the SGD step reads it
  without concatenating; the SGD step itself stays eager. ``compile=True`` uses the same ``StaticStep`` without
  capture: full batches through the stack compiled with static shapes, the ragged last batch and evaluation
  through the eager stack (the same parameters).
* **Angular tracker.** One ``angular.AngularTracker`` per member over views of that member's slice of the stacked
  parameters: the same float64 numbers as ``fit`` for the same weights.
* **Divergence.** Checked per member at every epoch end with ``fit``'s rule (non-finite training loss or
  weights). A diverged member is recorded (``status="diverged"``, ``diverged_epoch``) and removed from the stack
  (the stack is rebuilt with the remaining members, so its compute stops); the others continue unchanged. Within
  an epoch a NaN in one member cannot reach another: every op is per channel group.
* **Store and resume.** With a ``Store``: finished runs are returned from it; every member is
  ``store.start``-ed, logs one row per epoch (``store.log_epoch``) and is ``store.finish``-ed, and a checkpoint
  *in fit's format* (per-member ``model`` state dict, ``torch.optim.SGD`` state dict, tracker, history, epoch) is
  written per member at every epoch boundary — so an interrupted group resumes in ``fit_many`` (members are
  grouped by their checkpointed epoch) and a single run can even be resumed by ``fit`` and vice versa.

Numerics: grouped convolutions sum in a different order than M separate convolutions, so float32 results agree
with ``fit`` to float32 rounding that grows with training (not bit-identical); in float64 the agreement is
~1e-12 (``tests/test_batched.py``). Each history record's ``seconds`` is the member's share of the stacked epoch
(wall time / number of active members); ``group_size`` says how many runs shared it.

Speed (``benchmarks/bench_fit.py``): stacking pays where one run leaves the device idle (a GPU with small N and
narrow nets); on a single CPU thread the work is the same FLOPs, and we measured 0.33 vs 0.29 CPU-s per member
and step for M = 8 vs M = 1 (width 8, B = 128): no gain there, by construction.

``group_configs(configs, max_members)`` splits a grid into compatible groups and ``fit_grouped`` runs them
(one result per config, in order) — the entry point for a sweep runner.
"""
from __future__ import annotations

import copy
import itertools
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import data as data_mod
from .angular import AngularTracker
from .config import RunConfig
from .models.layers import FixedLinear, GhostBatchNorm
from .optim import build_optimizer, trainable
from .schedules import Schedule, build_schedule
from .train import CheckpointClock, FastPath, StaticStep, build_model, load_data, resolve_device, summarize

__all__ = ["fit_many", "fit_grouped", "group_configs", "member_bytes", "stackable", "SHARED_FIELDS", "StackedLinear",
           "stack_models"]

# Fields that must be equal within one stacked group (everything that changes shapes, data or the loop length).
SHARED_FIELDS = ("model", "scale_invariant", "width", "dataset", "synthetic", "n", "n_test", "batch_size",
                 "weight_decay_mode", "optimizer", "num_epochs", "ghost_batch", "augment", "device", "precision",
                 "channels_last", "cudnn_benchmark", "compile", "cuda_graphs")
# Leaf modules that are channel-separable once stacked (an empty Sequential is an identity shortcut; anything
# else, e.g. Dropout, is rejected).
_PASSIVE = (nn.Sequential, nn.ReLU, nn.Identity, nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.Flatten)


# ============================================================================================== stacking
class StackedLinear(nn.Module):
    """M linear maps applied member-wise to ``(B, M·F)`` inputs, giving ``(B, M·K)`` (member-major).

    ``weight`` is ``(M·K, F)`` and ``bias`` ``(M·K,)``: member m's ``nn.Linear`` weight is ``weight.view(M, K, F)[m]``.
    ``trainable=False`` keeps them as buffers (the fixed classifier of the scale-invariant nets, ``FixedLinear``).
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, members: int, trainable: bool):
        super().__init__()
        self.members = members
        self.out_features = weight.shape[0] // members
        self.in_features = weight.shape[1]
        if trainable:
            self.weight = nn.Parameter(weight)
            self.bias = nn.Parameter(bias) if bias is not None else None
        else:
            self.register_buffer("weight", weight)
            self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, M, K, Fi = x.shape[0], self.members, self.out_features, self.in_features
        xs = x.reshape(b, M, Fi).transpose(0, 1)  # (M, B, F)
        w = self.weight.view(M, K, Fi).transpose(1, 2)  # (M, F, K)
        if self.bias is not None:
            out = torch.baddbmm(self.bias.view(M, 1, K), xs, w)
        else:
            out = torch.bmm(xs, w)
        return out.transpose(0, 1).reshape(b, M * K)


def _cat(ts):
    return torch.cat([t.detach() for t in ts], 0).clone()


def _stack_leaf(mods: list[nn.Module]) -> nn.Module:
    """One stacked module from the corresponding leaf modules of the M members."""
    m0, M = mods[0], len(mods)
    if isinstance(m0, nn.Conv2d):
        s = nn.Conv2d(M * m0.in_channels, M * m0.out_channels, m0.kernel_size, m0.stride, m0.padding, m0.dilation,
                      M * m0.groups, m0.bias is not None, m0.padding_mode,
                      device=m0.weight.device, dtype=m0.weight.dtype)
        with torch.no_grad():
            s.weight.copy_(_cat([m.weight for m in mods]))
            if m0.bias is not None:
                s.bias.copy_(_cat([m.bias for m in mods]))
        s.weight.requires_grad_(m0.weight.requires_grad)
        return s
    if isinstance(m0, GhostBatchNorm):
        s = GhostBatchNorm(M * m0.num_features, ghost_batch=m0.ghost_batch, eps=m0.eps, momentum=m0.momentum,
                           affine=m0.affine, min_chunk=m0.min_chunk, device=m0.running_mean.device,
                           dtype=m0.running_mean.dtype)
    elif isinstance(m0, nn.modules.batchnorm._BatchNorm) and type(m0) in (nn.BatchNorm1d, nn.BatchNorm2d):
        if not m0.track_running_stats or m0.momentum is None:
            raise ValueError("fit_many: BatchNorm needs running statistics with a float momentum")
        s = type(m0)(M * m0.num_features, eps=m0.eps, momentum=m0.momentum, affine=m0.affine,
                     device=m0.running_mean.device, dtype=m0.running_mean.dtype)
    elif isinstance(m0, (FixedLinear, nn.Linear)):
        fixed = isinstance(m0, FixedLinear)
        b = _cat([m.bias for m in mods]) if m0.bias is not None else None
        return StackedLinear(_cat([m.weight for m in mods]), b, M, trainable=not fixed)
    elif isinstance(m0, _PASSIVE):
        return copy.deepcopy(m0)
    else:
        raise ValueError(f"fit_many: cannot stack module type {type(m0).__name__}")
    # batch norms: per-member running statistics side by side; num_batches_tracked is the same for all members
    with torch.no_grad():
        s.running_mean.copy_(_cat([m.running_mean for m in mods]))
        s.running_var.copy_(_cat([m.running_var for m in mods]))
        s.num_batches_tracked.copy_(m0.num_batches_tracked)
        if m0.affine:
            s.weight.copy_(_cat([m.weight for m in mods]))
            s.bias.copy_(_cat([m.bias for m in mods]))
    return s


def stack_models(models: list[nn.Module]) -> nn.Module:
    """One network computing the M (identically structured) ``models`` side by side on ``(B, M·C_in, H, W)``
    inputs (member-major channels), returning ``(B, M·K)`` logits. Containers are deep-copied from ``models[0]``
    (their ``forward`` is reused), leaves are replaced by stacked leaves (:func:`_stack_leaf`)."""
    stacked = copy.deepcopy(models[0])
    all_named = [dict(m.named_modules()) for m in models]
    for name, mod in list(stacked.named_modules()):
        if name == "" or len(list(mod.children())) > 0:
            if len(list(mod.children())) > 0 and (any(True for _ in mod.parameters(recurse=False))
                                                 or any(True for _ in mod.buffers(recurse=False))):
                raise ValueError(f"fit_many: container {name!r} holds its own tensors; cannot stack")
            continue
        new = _stack_leaf([nm[name] for nm in all_named])
        parent_name, _, attr = name.rpartition(".")
        parent = stacked.get_submodule(parent_name) if parent_name else stacked
        setattr(parent, attr, new)
    return stacked


# ============================================================================================== the stack
class _Stack:
    """The stacked network of the active members, their flat parameter/momentum buffers and optimizer vectors."""

    def __init__(self, models: list[nn.Module], bufs: list[list[torch.Tensor]], cfgs: list[RunConfig],
                 lr_table: torch.Tensor, check: tuple | None = None, channels_last: bool = False,
                 compile: bool = False):
        self.M = M = len(models)
        # channels_last: the 4-D weights are NHWC-strided views of the flat buffer (the flat buffer holds each
        # (O, kh, kw, I) block in memory order), so the SGD step stays five ops over one buffer
        self.cl = channels_last
        self.cfgs = cfgs
        self.template = models[0]
        self.net = stack_models(models)
        self.net.train()
        self.shapes = {k: tuple(v.shape) for k, v in models[0].state_dict().items()}
        # trainable tensors, in named_parameters order (= torch.optim.SGD's param order in fit)
        self.names = [n for n, p in models[0].named_parameters() if p.requires_grad]
        sparams = dict(self.net.named_parameters())
        if sorted(sparams) != sorted(self.names):
            raise ValueError("fit_many: stacked parameters differ from the member's trainable parameters")
        dev, dt = sparams[self.names[0]].device, sparams[self.names[0]].dtype
        sizes = [sparams[n].numel() for n in self.names]
        self.param_shapes = [sparams[n].shape for n in self.names]
        # the flat buffer is a sequence of blocks, one per stacked parameter (offset o, size s); block i is M
        # consecutive runs of s/M elements, member 0's first
        self.blocks = [(off - s, s) for off, s in zip(itertools.accumulate(sizes), sizes)]
        self.flat = torch.cat([self._to_flat(sparams[n].detach()) for n in self.names])
        self.params = []
        for n, view in zip(self.names, self.views(self.flat)):  # re-point each parameter into the flat buffer
            p = nn.Parameter(view)
            parent_name, _, attr = n.rpartition(".")
            setattr(self.net.get_submodule(parent_name) if parent_name else self.net, attr, p)
            self.params.append(p)
        # member_index maps every element of the flat buffer to its member (int32, so 4 bytes per weight: 0.7 GB at
        # M = 16 and width 64; int32 index_select measured 1.3x faster than an int64 gather on CPU)
        self.member_index = torch.cat([torch.arange(M, device=dev, dtype=torch.int32).repeat_interleave(s // M)
                                       for s in sizes])
        # momentum buffer: the members' SGD buffers (zeros where absent), in the same layout
        self.mom = torch.cat([torch.stack([self._to_flat(b[i].to(dev, dt)) for b in bufs]).reshape(-1)
                              for i in range(len(self.names))])
        vec = lambda vals: self.per_element(torch.tensor(vals, device=dev, dtype=dt))  # noqa: E731
        self.wd = vec([c.weight_decay for c in cfgs])
        self.mu = vec([c.momentum for c in cfgs])
        self.nesterov = vec([1.0 if c.nesterov else 0.0 for c in cfgs]).bool() if any(c.nesterov for c in cfgs) \
            else None
        self.lr_table = lr_table.to(dev, dt)  # (steps, M)
        self.flat_grad: torch.Tensor | None = None  # set by static_step
        self.trackers = [AngularTracker(_MemberView(self, m)) for m in range(M)]
        if check is not None:
            self._check(models, check)
        # same parameters; static shapes: only full batches are compiled (static_step sends the rest to self.net)
        self.forward = torch.compile(self.net, dynamic=False) if compile else self.net

    def per_element(self, values: torch.Tensor) -> torch.Tensor:
        """(M,) per-member values -> one per element of the flat buffer."""
        return values.index_select(0, self.member_index)

    def _to_flat(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` in the flat buffer's element order (NHWC for 4-D tensors when channels_last)."""
        return t.permute(0, 2, 3, 1).reshape(-1) if self.cl and t.dim() == 4 else t.reshape(-1)

    def _flat_view(self, buf: torch.Tensor, shape) -> torch.Tensor:
        """The slice ``buf`` of the flat buffer as a tensor of logical ``shape`` (inverse of ``_to_flat``)."""
        if self.cl and len(shape) == 4:
            o, i, kh, kw = shape
            return buf.view(o, kh, kw, i).permute(0, 3, 1, 2)
        return buf.view(shape)

    def views(self, buf: torch.Tensor) -> list[torch.Tensor]:
        """A buffer in ``flat``'s layout (the weights, momentum or gradients) as one view per stacked parameter."""
        return [self._flat_view(buf[o:o + s], shape) for (o, s), shape in zip(self.blocks, self.param_shapes)]

    # -------------------------------------------------------------- views of one member
    def member_tensor(self, t: torch.Tensor, key: str, m: int) -> torch.Tensor:
        if key.endswith("num_batches_tracked"):  # one counter for all members (they see the same chunks)
            return t
        return t.view(self.M, *self.shapes[key])[m]

    def member_state_dict(self, m: int) -> dict[str, torch.Tensor]:
        """Member m's state dict, in the member model's own names and shapes (contiguous copies)."""
        return {k: self.member_tensor(v.detach(), k, m).clone(memory_format=torch.contiguous_format)
                for k, v in self.net.state_dict().items()}

    def member_bufs(self, m: int) -> list[torch.Tensor]:
        return [v.reshape(self.M, *self.shapes[n])[m].contiguous() for n, v in zip(self.names, self.views(self.mom))]

    @torch.no_grad()
    def finite(self) -> torch.Tensor:
        """(M,) bool: all trainable weights of the member finite."""
        return torch.stack([torch.isfinite(self.flat[o:o + s].view(self.M, -1)).all(1) for o, s in self.blocks]).all(0)

    def static_step(self, loss_fn, batch_size: int, eager_loss_fn=None, capture: bool = True) -> StaticStep:
        """A ``train.StaticStep`` (``cuda_graphs``: ``capture=True``; ``compile``: ``capture=False``, ``loss_fn``
        through :attr:`forward` for full batches, ``eager_loss_fn`` through :attr:`net` for the ragged one) whose
        gradient tensors are views of one flat gradient buffer in the layout of ``flat``, so :meth:`sgd_step` reads
        it without concatenating."""
        self.flat_grad = torch.zeros_like(self.flat)
        return StaticStep(loss_fn, self.params, list(self.net.buffers()), batch_size, grads=self.views(self.flat_grad),
                          eager_loss_fn=eager_loss_fn, capture=capture)

    # -------------------------------------------------------------- one SGD step for all members
    @torch.no_grad()
    def sgd_step(self, step: int) -> None:
        """``torch.optim.SGD`` (coupled L2, PyTorch momentum, dampening 0) with per-member η, λ, μ."""
        static = self.flat_grad is not None  # StaticStep rewrites the whole flat gradient before every step
        g = self.flat_grad if static else torch.cat([self._to_flat(p.grad) for p in self.params])
        g.addcmul_(self.flat, self.wd)  # d = g + λx
        self.mom.mul_(self.mu).add_(g)  # v = μv + d
        upd = self.mom
        if self.nesterov is not None:
            upd = torch.where(self.nesterov, g.addcmul_(self.mom, self.mu), self.mom)  # d + μv
        lr = self.per_element(self.lr_table[step])
        self.flat.addcmul_(upd, lr, value=-1.0)  # x = x − η v
        if not static:
            for p in self.params:
                p.grad = None

    def _check(self, models: list[nn.Module], image_shape: tuple) -> None:
        """The stacked net reproduces each member (eval mode, two random images of ``image_shape`` = (C, H, W)) —
        else the model's forward mixes channels and cannot be stacked."""
        was = [m.training for m in models]
        p0 = next(models[0].parameters())
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, *image_shape, generator=g).to(p0.device, p0.dtype)
        self.net.eval()
        with torch.no_grad():
            out = self.net(x.repeat(1, self.M, 1, 1)).view(2, self.M, -1)
            for m, mod in enumerate(models):
                mod.eval()
                ref = mod(x)
                mod.train(was[m])
                tol = 1e-3 * (1.0 + float(ref.abs().max()))
                if not torch.allclose(out[:, m], ref, rtol=1e-3, atol=tol):
                    raise ValueError(f"fit_many: model {self.cfgs[0].model!r} cannot be stacked (its forward "
                                     "mixes channels)")
        self.net.train()


class _StackedBatches:
    """The batches of the active members for one step, as one ``(b, M·C, H, W)`` input and ``(b, M)`` labels.

    Each member's draws (permutation, crop offsets, flips) come from its own ``data.TensorBatches`` generator, so
    its images are bit-identical to what ``fit`` sees; the images of all members are then produced by one
    gather (:func:`data.gather_crop_flip`) from the members' padded training sets concatenated once, and one
    normalization -- not M gathers and M normalizations per step."""

    def __init__(self, batches: list[data_mod.TensorBatches]):
        self.batches = batches
        tb0 = batches[0]
        self.pad, self.augment = tb0.pad, tb0.augment
        offsets: dict[int, int] = {}
        xs, ys, total = [], [], 0
        for tb in batches:  # members on the same training set share its rows
            if id(tb.data) not in offsets:
                offsets[id(tb.data)] = total
                xs.append(tb.x)
                ys.append(tb.data.y.to(tb.x.device))
                total += len(tb.data)
        self.x = xs[0] if len(xs) == 1 else torch.cat(xs)
        self.y = ys[0] if len(ys) == 1 else torch.cat(ys)
        self.offset = [offsets[id(tb.data)] for tb in batches]
        for tb, off in zip(batches, self.offset):  # the members' own tensors become views of the shared copy
            tb.x = self.x[off:off + len(tb.data)]
        self.mean, self.std = tb0.norm_stats()

    def epoch(self, epoch: int, active: list[int]):
        its = [self.batches[a].draws(epoch) for a in active]
        M = len(active)
        for _ in range(len(self.batches[0])):
            draws = [next(it) for it in its]
            idx = torch.cat([d[0] + self.offset[a] if self.offset[a] else d[0] for d, a in zip(draws, active)])
            crop = tuple(torch.cat([d[1][j] for d in draws]) for j in range(3)) if self.augment else None
            x = data_mod.crop_normalize(self.x, idx, crop, self.pad, self.mean, self.std)  # (M·b, C, H, W)
            b = x.shape[0] // M
            x = x.view(M, b, *x.shape[1:]).transpose(0, 1).reshape(b, M * x.shape[1], *x.shape[2:])
            yield x, self.y[idx].view(M, b).t()


class _MemberView:
    """What ``AngularTracker`` needs of a model: member m's trainable tensors (views into the stack)."""

    def __init__(self, stack: _Stack, m: int):
        self.scale_invariant_names = list(stack.template.scale_invariant_names)
        with torch.no_grad():
            self._params = [(n, p.view(stack.M, *stack.shapes[n])[m]) for n, p in zip(stack.names, stack.params)]

    def named_parameters(self):
        return iter(self._params)


# ============================================================================================== grouping
def _key(cfg: RunConfig) -> tuple:
    return tuple(getattr(cfg, f) for f in SHARED_FIELDS)


def _check_group(cfgs: list[RunConfig]) -> None:
    if not cfgs:
        raise ValueError("configs: empty")
    for c in cfgs:
        if not isinstance(c, RunConfig):
            raise ValueError(f"configs: expected RunConfig, got {type(c).__name__}")
        if c.optimizer != "sgd" or c.weight_decay_mode != "coupled":
            raise ValueError(f"optimizer: fit_many implements torch.optim.SGD with coupled L2 only, got "
                             f"{c.optimizer!r}/{c.weight_decay_mode!r}")
    k0 = _key(cfgs[0])
    for c in cfgs[1:]:
        for f, a, b in zip(SHARED_FIELDS, k0, _key(c)):
            if a != b:
                raise ValueError(f"{f}: fit_many needs the same {f} for every config, got {a!r} and {b!r}")


_MEMBER_BYTES: dict[tuple, tuple[int, int]] = {}  # (weights, activation elements per image)


def member_bytes(cfg: RunConfig) -> int:
    """Estimated training memory of one member of a stacked group, in bytes (the model's counts are cached per
    model/width/image size):

    * weights: every parameter and buffer x 8 tensors of 4 bytes in ``_Stack``'s flat layout (the weight, its
      gradient, the momentum buffer, the per-element weight decay and momentum vectors, the int32 member index,
      and the SGD step's per-element LR and gradient temporaries);
    * activations: B x (elements of every leaf module's output for one image) x 4 bytes -- what autograd keeps
      for the backward pass (conv, BN and ReLU outputs), counted with forward hooks on a 2-image eval-mode pass
      of the member model on CPU (fp32 even under bf16 autocast: a safe upper bound), x 5.5 for ghost BN's
      copies (calibrated with its earlier transposed-copy form), the grouped-conv / cudnn.benchmark workspaces and
      the allocator's slack;
    * with ``cuda_graphs``: the captured graph keeps one full batch's activations in its private pool, and the
      ragged last batch of an epoch (N mod B images, ``drop_last`` is False; none when N mod B is 1, as that lone
      image is dropped: ``data.train_steps``) runs eagerly beside it, so its activations are added.

    The factor 5.5 is calibrated on ``torch.cuda.max_memory_allocated`` (H200, fp32, channels_last,
    cudnn.benchmark, eager; benchmarks/results_h200.json): a width-64 ResNet-18 member at B = 128 peaks at
    3.9 GiB in stacks of 2-8 (2.4 GiB per member at M = 16), estimated 4.0 GiB; at B = 1024 a single run peaks at
    13.6 GiB, estimated 30 GiB (safe side); bf16 halves the real peaks. An estimate, not a guarantee --
    :func:`default_memory_budget` keeps 30 % of the free memory in reserve. With ``cuda_graphs`` (H200,
    per-chunk ghost BN; benchmarks/results_h200_graphs.json): a 16-member fp32 stack at N = 3125 peaks at 39.3 GiB
    (25.8 GiB eager), estimated 89 GiB; a single graphed run at B = 128 peaks at 2.0 GiB, estimated 6.4 GiB."""
    from .data import DATASETS

    info = DATASETS[cfg.dataset]
    key = (cfg.model, cfg.scale_invariant, cfg.width, info.image_size, info.num_classes)
    if key not in _MEMBER_BYTES:
        torch.manual_seed(0)
        from .models import create

        model = create(cfg.model, num_classes=info.num_classes, scale_invariant=cfg.scale_invariant,
                       width=cfg.width, ghost_batch=cfg.ghost_batch).eval()
        acts = [0]
        hooks = [mod.register_forward_hook(lambda _m, _i, o: acts.__setitem__(0, acts[0] + o.numel() // 2))
                 for mod in model.modules() if not list(mod.children())]
        with torch.no_grad():
            model(torch.zeros(2, 3, info.image_size, info.image_size))
        for h in hooks:
            h.remove()
        weights = sum(t.numel() for t in list(model.parameters()) + list(model.buffers()))
        _MEMBER_BYTES[key] = (weights, acts[0])
    weights, acts = _MEMBER_BYTES[key]
    ragged = data_mod.train_steps(cfg.n, cfg.batch_size)[1] % cfg.batch_size  # 0 where a lone image is dropped
    rows = cfg.batch_size + (ragged if cfg.cuda_graphs else 0)
    return int(32 * weights + 5.5 * 4 * rows * acts)


def default_memory_budget(device: str) -> int | None:
    """70 % of the free memory of the CUDA device a config would use; None (no limit) on CPU."""
    dev = resolve_device(device)
    if dev.type != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info(dev)
    return int(0.7 * free)


def group_configs(configs, max_members: int = 16, memory_budget_bytes: int | None | str = "auto") -> list[list[int]]:
    """Indices of ``configs`` split into stackable groups (equal :data:`SHARED_FIELDS`), in order of first
    appearance: the largest groups of at most ``max_members`` runs whose estimated memory
    (:func:`member_bytes` x members) fits ``memory_budget_bytes`` ("auto": :func:`default_memory_budget` of the
    configs' device, i.e. a limit on CUDA and none on CPU; None: no limit), as few groups as that allows, of balanced
    sizes (so the jobs of a cluster array take similar times)."""
    if max_members < 1:
        raise ValueError(f"max_members: must be >= 1, got {max_members}")
    if memory_budget_bytes is not None and memory_budget_bytes != "auto" and memory_budget_bytes <= 0:
        raise ValueError(f"memory_budget_bytes: must be positive, None or 'auto', got {memory_budget_bytes!r}")
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(configs):
        groups.setdefault(_key(c), []).append(i)
    out = []
    for idx in groups.values():
        cap = max_members
        budget = default_memory_budget(configs[idx[0]].device) if memory_budget_bytes == "auto" \
            else memory_budget_bytes
        if budget is not None and max_members > 1:
            cap = max(1, min(max_members, budget // member_bytes(configs[idx[0]])))
        k = -(-len(idx) // cap)  # fewest groups that respect the cap, sizes balanced (19 runs, cap 16: 10 + 9)
        size, extra = divmod(len(idx), k)
        start = 0
        for j in range(k):
            end = start + size + (1 if j < extra else 0)
            out.append(idx[start:end])
            start = end
    return out


def stackable(cfg: RunConfig) -> bool:
    """Whether ``fit_many`` can train ``cfg``: ``"sgd"`` with coupled L2 and a schedule that only sets the LR."""
    if cfg.optimizer != "sgd" or cfg.weight_decay_mode != "coupled":
        return False
    return type(build_schedule(cfg, 1)).apply is Schedule.apply


def fit_grouped(configs, store=None, max_members: int = 16, memory_budget_bytes: int | None | str = "auto",
                **kw) -> list[dict]:
    """A drop-in for ``[fit(c, store, **kw) for c in configs]``: stackable configs (:func:`stackable`) are trained
    by ``fit_many`` in the groups of :func:`group_configs` (``max_members``, ``memory_budget_bytes``); the others,
    and groups of one, by ``train.fit``. One result per config, in the order given."""
    from .train import fit

    configs = list(configs)
    results: list[dict | None] = [None] * len(configs)
    ok = [i for i, c in enumerate(configs) if stackable(c)]
    ok_set = set(ok)
    for i, c in enumerate(configs):
        if i not in ok_set:
            results[i] = fit(c, store=store, **kw)
    for idx in group_configs([configs[i] for i in ok], max_members, memory_budget_bytes):
        idx = [ok[i] for i in idx]
        if len(idx) == 1:
            results[idx[0]] = fit(configs[idx[0]], store=store, **kw)
            continue
        for i, r in zip(idx, fit_many([configs[i] for i in idx], store=store, **kw)):
            results[i] = r
    return results


# ============================================================================================== training
@torch.no_grad()
def _evaluate(stack: _Stack, batches: data_mod.TensorBatches, fast: FastPath) -> list[dict[str, float]]:
    """``train.evaluate`` for every member at once (eval mode, running statistics, the same test batches); eager
    also under ``compile`` (no eval-mode graphs to compile)."""
    net, M = stack.net, stack.M
    net.eval()
    dev = batches.x.device
    loss_sum = torch.zeros(M, dtype=torch.float64, device=dev)
    correct = torch.zeros(M, dtype=torch.int64, device=dev)
    for x, y in batches.epoch():
        with fast.autocast():
            out = net(fast.inputs(x.repeat(1, M, 1, 1))).view(len(y), M, -1)
            ce = F.cross_entropy(out.transpose(1, 2), y[:, None].expand(-1, M), reduction="none")  # fp32
        loss_sum += ce.double().sum(0)
        correct += (out.argmax(2) == y[:, None]).sum(0)
    net.train()
    n = len(batches.data)
    return [{"test_loss": float(loss_sum[m]) / n, "test_acc": 100.0 * float(correct[m]) / n} for m in range(M)]


def _lr_table(cfgs: list[RunConfig], steps_per_epoch: int) -> torch.Tensor:
    total = cfgs[0].num_epochs * steps_per_epoch
    cols = []
    for c in cfgs:
        sch = build_schedule(c, steps_per_epoch)
        if type(sch).apply is not Schedule.apply:
            raise ValueError(f"schedule: fit_many supports schedules that only set the LR; {c.schedule!r} acts on "
                             "the optimizer state (use fit)")
        cols.append([sch.lr(s) for s in range(total)])
    return torch.tensor(cols, dtype=torch.float64).T.contiguous()  # (steps, M)


def _checkpoint(cfg, model, sd, bufs, lr, tracker, history, epoch) -> dict:
    """A checkpoint in ``fit``'s format (model state dict, ``torch.optim.SGD`` state dict, tracker, history)."""
    model.load_state_dict(sd)
    opt = build_optimizer(cfg, model)
    if cfg.momentum != 0:
        for p, b in zip(trainable(model), bufs):
            opt.state[p]["momentum_buffer"] = b
    for g in opt.param_groups:
        g["lr"] = lr
    return {"epoch": epoch, "model": sd, "optimizer": opt.state_dict(), "tracker": tracker.state_dict(),
            "history": history}


def fit_many(configs, store=None, data_root=None, download: bool = False, progress: bool = True,
             eval_batch_size: int = 1000, keep_states: bool = False, clock=CheckpointClock) -> list[dict]:
    """Train the runs ``configs`` as one stacked model and return one ``fit``-format result per config (in order).

    The configs must agree on :data:`SHARED_FIELDS`; they may differ in lr, weight_decay, momentum, nesterov,
    seed, schedule (+ kwargs) and eval_every. ``store``, ``data_root``, ``download``, ``eval_batch_size``: as in
    ``fit``; ``clock``: the between-epochs hook of ``fit``, one for the whole stack (built from the first
    config's ``checkpoint_every_s``; a group whose members resume from different epochs builds one per start
    epoch). ``keep_states=True`` adds ``"state_dict"`` (the member's final model state dict, CPU) to each result
    of a run trained here (for tests and inspection). See the module docstring for what is shared and what is not.
    """
    configs = list(configs)
    _check_group(configs)
    results: list[dict | None] = [None] * len(configs)
    todo: dict[str, list[int]] = {}  # hash -> positions (a duplicated config is trained once)
    for i, c in enumerate(configs):
        if store is not None:
            done = store.get(c)
            if done is not None:
                results[i] = {**done, "history": store.history(c)}
                continue
        todo.setdefault(c.hash, []).append(i)
    if todo:
        device = resolve_device(configs[0].device)
        uniq = [configs[pos[0]] for pos in todo.values()]
        states = [store.load_checkpoint(c, map_location=device) if store is not None else None for c in uniq]
        by_epoch: dict[int, list[int]] = {}
        for j, st in enumerate(states):
            by_epoch.setdefault(st["epoch"] if st else 0, []).append(j)
        for start, js in sorted(by_epoch.items()):
            out = _train_group([uniq[j] for j in js], [states[j] for j in js], start, device, store, data_root,
                               download, progress, eval_batch_size, keep_states, clock)
            for j, r in zip(js, out):
                for k, i in enumerate(todo[uniq[j].hash]):
                    results[i] = r if k == 0 else {**r, "history": list(r["history"])}
    return results


def _train_group(cfgs, states, start_epoch, device, store, data_root, download, progress, eval_batch_size,
                 keep_states, clock) -> list[dict]:
    M0 = len(cfgs)
    splits = [load_data(c, data_root, download) for c in cfgs]
    test = splits[0][1].to(device)  # the test set does not depend on the seed
    on_device: dict[int, data_mod.ImageTensors] = {}  # members sharing one training set share its device copy
    for s in splits:
        if id(s[0]) not in on_device:
            on_device[id(s[0])] = s[0].to(device)
    trains = [on_device[id(s[0])] for s in splits]
    batches = [data_mod.TensorBatches(t, c.batch_size, train=True, augment=c.augment, seed=c.seed)
               for t, c in zip(trains, cfgs)]
    feed = _StackedBatches(batches)
    test_batches = data_mod.TensorBatches(test, eval_batch_size, train=False)
    spe, seen = len(batches[0]), batches[0].images  # seen: data.train_steps
    n_train, bsz = len(trains[0]), cfgs[0].batch_size

    models = [build_model(c, trains[0].num_classes).to(device) for c in cfgs]
    bufs = [[torch.zeros_like(p) for p in trainable(m)] for m in models]
    histories: list[list[dict]] = [[] for _ in cfgs]
    for m, (c, st) in enumerate(zip(cfgs, states)):
        if store is not None:
            store.start(c)
        if st is not None:
            models[m].load_state_dict(st["model"])
            opt = build_optimizer(c, models[m])
            opt.load_state_dict(st["optimizer"])
            bufs[m] = [opt.state[p].get("momentum_buffer", None) if p in opt.state else None
                       for p in trainable(models[m])]
            bufs[m] = [b if b is not None else torch.zeros_like(p) for b, p in zip(bufs[m], trainable(models[m]))]
            histories[m] = list(st["history"])
    lr_all = _lr_table(cfgs, spe)
    active = list(range(M0))  # original indices of the members in the stack
    fast = FastPath(cfgs[0], device)  # the fast-path flags are SHARED_FIELDS: one setting for the group
    stack_kw = dict(channels_last=fast.channels_last, compile=fast.compile)
    stack = _Stack(models, bufs, cfgs, lr_all, check=tuple(trains[0].x.shape[1:]), **stack_kw)

    def loss_through(compiled: bool):
        def loss_fn(x, y):  # Σ_m mean_b CE: member m's gradient is that of its own mean loss
            b = y.shape[0]
            net = stack.forward if compiled else stack.net  # the current stack (rebuilt when a member diverges)
            with fast.autocast():
                out = net(fast.inputs(x)).view(b, stack.M, -1)
                losses = F.cross_entropy(out.transpose(1, 2), y, reduction="none").mean(0)  # (M,), fp32
            return losses.sum(), (losses.detach(), (out.detach().argmax(2) == y).sum(0))
        return loss_fn

    loss_fn = loss_through(False)  # eager: the ragged last batch under compile, every batch without StaticStep

    def static_step():  # compile: full batches through the compiled stack, the ragged one eagerly
        return stack.static_step(loss_through(True), bsz, eager_loss_fn=loss_fn, capture=fast.graphs) \
            if fast.static else None

    static = static_step()
    eval_every = [c.eval_interval(n_train, len(test)) for c in cfgs]
    clock = clock(cfgs[0].checkpoint_every_s)
    status = ["finished"] * M0
    diverged = [None] * M0
    final_states: list[dict | None] = [None] * M0

    bar = None
    if progress:
        from .train import progress_bar as tqdm

        bar = tqdm(total=cfgs[0].num_epochs, initial=start_epoch, leave=False,
                   desc=f"{cfgs[0].model} n={n_train} B={bsz} x{M0}")
    for epoch in range(start_epoch, cfgs[0].num_epochs):
        t0 = time.perf_counter()
        M = stack.M
        for tr in stack.trackers:
            tr.start_epoch()
        loss_sum = torch.zeros(M, dtype=torch.float64, device=device)
        correct = torch.zeros(M, dtype=torch.int64, device=device)
        step = epoch * spe
        for x, y in feed.epoch(epoch, active):
            if static is not None:
                losses, batch_correct = static(x, y)
            else:
                loss, (losses, batch_correct) = loss_fn(x, y)
                loss.backward()
            stack.sgd_step(step)
            loss_sum += losses.double() * y.shape[0]
            correct += batch_correct
            step += 1
        last = epoch * spe + spe - 1
        fin = stack.finite().tolist()
        train_loss = (loss_sum / seen).tolist()
        train_acc = (100.0 * correct.double() / seen).tolist()
        seconds = (time.perf_counter() - t0) / M
        evals = None
        keep = []
        recs = {}
        for m, a in enumerate(active):
            lr_epoch = float(lr_all[last, a])
            rec = {"epoch": epoch + 1, "lr": lr_epoch, "train_loss": train_loss[m], "train_acc": train_acc[m]}
            if not math.isfinite(train_loss[m]) or not fin[m]:
                status[a], diverged[a] = "diverged", epoch + 1
                histories[a].append(rec)
                if store is not None:
                    store.log_epoch(cfgs[a], rec)
                if keep_states:
                    final_states[a] = {k: v.cpu() for k, v in stack.member_state_dict(m).items()}
                continue
            rec.update(stack.trackers[m].end_epoch(lr=lr_epoch, n=seen, batch_size=bsz))
            rec["seconds"] = seconds
            rec["group_size"] = M
            recs[m] = rec
            keep.append(m)
        if any((epoch + 1) % eval_every[active[m]] == 0 or epoch + 1 == cfgs[0].num_epochs for m in keep):
            evals = _evaluate(stack, test_batches, fast)
        save = store is not None and epoch + 1 < cfgs[0].num_epochs and clock.due()
        for m in keep:
            a = active[m]
            rec = recs[m]
            if evals is not None and ((epoch + 1) % eval_every[a] == 0 or epoch + 1 == cfgs[a].num_epochs):
                rec.update(evals[m])
            histories[a].append(rec)
            if store is not None:
                store.log_epoch(cfgs[a], rec)
            if save:
                store.save_checkpoint(cfgs[a], _checkpoint(
                    cfgs[a], models[a], stack.member_state_dict(m), stack.member_bufs(m), rec["lr"],
                    stack.trackers[m], histories[a], epoch + 1))
        if len(keep) < M:  # drop the diverged members: rebuild the stack from the survivors' states
            if not keep:
                active = []
                break
            for m in keep:
                models[active[m]].load_state_dict(stack.member_state_dict(m))
            kept_bufs = [stack.member_bufs(m) for m in keep]
            active = [active[m] for m in keep]
            stack = _Stack([models[a] for a in active], kept_bufs, [cfgs[a] for a in active], lr_all[:, active],
                           **stack_kw)
            static = static_step()
        if bar is not None:
            bar.update(1)
            bar.set_postfix(active=len(active))
    if bar is not None:
        bar.close()

    for m, a in enumerate(active):
        if keep_states:
            final_states[a] = {k: v.cpu() for k, v in stack.member_state_dict(m).items()}
    results = []
    for a, c in enumerate(cfgs):
        r = summarize(c, histories[a], status[a], diverged[a], trains[a].name)
        if store is not None:
            store.finish(c, r)
        if keep_states:
            r["state_dict"] = final_states[a]
        results.append(r)
    return results
