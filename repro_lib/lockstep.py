"""A group of runs trained in lockstep, each member its own network: ``fit_lockstep(configs, engine=...)``.

``batched.fit_many`` folds M runs into one channel-stacked network (grouped convolutions, one stacked SGD step).
On a GPU that buys little once each run replays a CUDA graph: grouped convolutions are slower per FLOP than the
dense ones, and the whole stack still runs on one CUDA stream, so the small kernels of a width-64 ResNet-18 at
B = 128 leave most of the device idle. The engines here keep every member exactly as ``train.fit`` builds it (its
own modules, dense convolutions, its own data feed, schedule, tracker and checkpoints in ``fit``'s format) and let
the members' kernels run side by side:

* ``"streams"``: every member runs ``fit``'s own step -- ``train.StaticStep`` (forward, loss and backward replayed
  as the member's CUDA graph when ``cuda_graphs``), then its eager ``torch.optim`` step -- on its own CUDA stream.
  The host issues the members' steps one after the other; the device overlaps them. Any optimizer and schedule
  ``fit`` takes works, since each member calls them exactly as ``fit`` does.
* ``"onegraph"``: one CUDA graph per step of the whole group. Each member's forward, loss, backward, SGD step and
  loss/accuracy sums are captured as their own branch (the member's stream, forked from and joined back into the
  capturing stream), so one replay per step launches every member's work, the optimizer included; the host only
  gathers the batches (one gather for all members) and writes the step's learning rates into a device vector. A
  second graph covers the ragged last batch of an epoch (``drop_last=False``; ``data.train_steps``), so no step
  runs eagerly. The SGD step is ``torch.optim.SGD``'s (coupled L2, PyTorch momentum, dampening 0, Nesterov) on
  one flat buffer per member that holds its trainable tensors (the parameters are views of it):
  ``d = g + λx; v = μv + d; x = x − ηv`` with η read from the device vector. Optimizer ``"sgd"`` with coupled L2
  and a schedule that only sets the LR (``batched.stackable``), as for ``fit_many``.

**Exactness.** A member computes what its own ``fit`` run computes, operation for operation: on a CPU (no streams,
no graphs; the same code runs eagerly) both engines are bit-identical to ``fit`` in float32
(``tests/test_lockstep.py``), which ``fit_many``'s grouped convolutions are not. On a GPU a member differs from its
``fit`` run only where two calls of ``fit`` differ (the kernels cuDNN picks, non-deterministic reductions); what a
capture forbids (host read-backs, tensors made from Python data, Python values that change between replays) is
checked on the CPU with the step run on the *meta* device and with a stand-in for graph capture that re-runs the
step and compares its operator trace.

**Bookkeeping** is ``fit_many``'s: members must agree on ``batched.SHARED_FIELDS``; every member is
``store.start``-ed, logs one record per epoch (``seconds`` = its share of the group's epoch, ``group_size``), is
checkpointed in ``fit``'s format (so ``fit``, ``fit_many`` and these engines resume each other's runs) and
``store.finish``-ed; ``clock`` is ``fit``'s between-epochs hook, one for the group, asked once per epoch after the
evaluation; a member whose loss or weights become non-finite is recorded as diverged and leaves the group.
Evaluation (every ``cfg.eval_interval`` epochs) runs eagerly, each member on its stream, on test batches
normalized once per group.

Speed: not yet measured on a GPU (``benchmarks/bench_paper_rate.py`` measures both engines beside ``fit`` /
``fit_many`` and plain processes, and checks each against ``fit`` on the device before it is used).
"""
from __future__ import annotations

import contextlib
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import data as data_mod
from .angular import AngularTracker
from .batched import SHARED_FIELDS, stackable
from .config import RunConfig
from .optim import build_optimizer, trainable
from .schedules import build_schedule
from .train import CheckpointClock, FastPath, StaticStep, build_model, load_data, resolve_device, summarize

__all__ = ["fit_lockstep", "ENGINES"]

ENGINES = ("streams", "onegraph")
WARMUP = StaticStep.WARMUP  # steps run (and undone) before a capture: cuDNN autotuning, library handles


# ============================================================================================== device backends
class _Host:
    """No streams and no graphs (CPU): member work runs in order, and a "graph" is its step function, called at
    every replay."""

    cuda = False

    def member(self, m: int):
        return contextlib.nullcontext()

    def fork(self) -> None:
        pass

    def join(self) -> None:
        pass

    def capture(self, fn, state: list[torch.Tensor]):
        return fn

    def replay(self, graph) -> None:
        graph()


class _Cuda(_Host):
    """One CUDA stream per member; ``fork`` makes every member stream wait for the current stream, ``join`` the
    current stream for every member stream. ``capture(fn, state)``: ``fn`` run ``WARMUP`` times on a side stream
    (its member branches on the member streams, as in the capture), every tensor of ``state`` put back, then ``fn``
    captured as one CUDA graph (the member branches fork from and join the capturing stream inside ``fn``)."""

    cuda = True

    def __init__(self, device: torch.device, members: int):
        self.device = device
        self.streams = [torch.cuda.Stream(device) for _ in range(members)]
        self.side = torch.cuda.Stream(device)

    def member(self, m: int):
        return torch.cuda.stream(self.streams[m])

    def fork(self) -> None:
        cur = torch.cuda.current_stream(self.device)
        for s in self.streams:
            s.wait_stream(cur)

    def join(self) -> None:
        cur = torch.cuda.current_stream(self.device)
        for s in self.streams:
            cur.wait_stream(s)

    def capture(self, fn, state: list[torch.Tensor]):
        saved = [t.clone() for t in state]
        cur = torch.cuda.current_stream(self.device)
        self.side.wait_stream(cur)
        with torch.cuda.stream(self.side):
            for _ in range(WARMUP):
                fn()
        cur.wait_stream(self.side)
        with torch.no_grad():
            for t, s in zip(state, saved):  # mixed dtypes (weights, sums, counters): one copy each, once per capture
                t.copy_(s)
        del saved
        torch.cuda.synchronize(self.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self.side):
            fn()
        return graph

    def replay(self, graph) -> None:
        graph.replay()


def _backend(device: torch.device, members: int) -> _Host:
    """The backend of ``device`` (the tests replace this function to run the CUDA control flow on a CPU)."""
    return _Cuda(device, members) if device.type == "cuda" else _Host()


# ============================================================================================== one member
def _loss_through(net, fast: FastPath):
    """``fit``'s loss function through ``net``: (loss, (detached loss, correct count))."""
    def loss_fn(x, y):
        with fast.autocast():
            out = net(fast.inputs(x))
            loss = F.cross_entropy(out, y)  # autocast runs cross_entropy in fp32
        return loss, (loss.detach(), (out.detach().argmax(1) == y).sum())
    return loss_fn


class _Run:
    """One member as ``fit`` sets it up: network (``train.build_model``, moved, ``FastPath.prepare``), data feed,
    schedule, history; the engine adds the optimizer (or flat SGD buffers), the tracker and the step."""

    def __init__(self, cfg: RunConfig, train: data_mod.ImageTensors, device: torch.device, fast: FastPath):
        self.cfg = cfg
        self.model = build_model(cfg, train.num_classes).to(device)
        self.forward = fast.prepare(self.model)
        self.batches = data_mod.TensorBatches(train, cfg.batch_size, train=True, augment=cfg.augment, seed=cfg.seed)
        self.schedule = build_schedule(cfg, len(self.batches))
        self.train = train
        self.history: list[dict] = []
        self.status, self.diverged_epoch = "finished", None
        self.optimizer = None
        self.tracker: AngularTracker | None = None
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.correct = torch.zeros((), dtype=torch.int64, device=device)

    def lr_of_epoch(self, last_step: int) -> float:
        """The LR in force at the epoch's last step, as ``fit`` logs it."""
        if self.optimizer is None:
            return self.schedule.lr(last_step)
        g0 = self.optimizer.param_groups[0]
        return g0["lr"] / g0.get("lr_scale", 1.0)


class _FlatSGD:
    """``torch.optim.SGD`` (coupled L2, PyTorch momentum, dampening 0, Nesterov) for one member on one flat buffer:
    the member's trainable parameters are re-pointed to views of ``flat`` (NHWC blocks for 4-D tensors when
    channels_last, so every view keeps the strides ``FastPath.prepare`` gave it), its gradients are views of
    ``grad``, its momentum buffers views of ``mom``. ``step(neg_lr)``: four in-place ops, η read from the 0-dim
    tensor ``neg_lr`` (= −η), so that a captured step takes each replay's LR. With a zero-initialized momentum
    buffer, μ·0 + d = d reproduces ``torch.optim.SGD``'s first-step copy exactly."""

    def __init__(self, cfg: RunConfig, model: nn.Module, channels_last: bool):
        self.wd, self.mu, self.nesterov = float(cfg.weight_decay), float(cfg.momentum), bool(cfg.nesterov)
        self.cl = channels_last
        self.names = [n for n, p in model.named_parameters() if p.requires_grad]
        params = dict(model.named_parameters())
        self.shapes = [params[n].shape for n in self.names]
        sizes = [params[n].numel() for n in self.names]
        self.blocks, off = [], 0
        for s in sizes:
            self.blocks.append((off, s))
            off += s
        with torch.no_grad():
            self.flat = torch.cat([self._to_flat(params[n].detach()) for n in self.names])
        self.grad = torch.zeros_like(self.flat)
        self.mom = torch.zeros_like(self.flat)
        self.params = []
        for n, view in zip(self.names, self.views(self.flat)):
            p = nn.Parameter(view)
            parent, _, attr = n.rpartition(".")
            setattr(model.get_submodule(parent) if parent else model, attr, p)
            self.params.append(p)
        self.grads = self.views(self.grad)
        self.bufs = self.views(self.mom)

    def _to_flat(self, t: torch.Tensor) -> torch.Tensor:
        return t.permute(0, 2, 3, 1).reshape(-1) if self.cl and t.dim() == 4 else t.reshape(-1)

    def views(self, buf: torch.Tensor) -> list[torch.Tensor]:
        out = []
        for (o, s), shape in zip(self.blocks, self.shapes):
            b = buf[o:o + s]
            if self.cl and len(shape) == 4:
                out.append(b.view(shape[0], shape[2], shape[3], shape[1]).permute(0, 3, 1, 2))
            else:
                out.append(b.view(shape))
        return out

    @torch.no_grad()
    def step(self, neg_lr: torch.Tensor) -> None:
        g = self.grad
        if self.wd != 0:
            g.add_(self.flat, alpha=self.wd)  # d = g + λx
        upd = g
        if self.mu != 0:
            self.mom.mul_(self.mu).add_(g)  # v = μv + d
            upd = g.add_(self.mom, alpha=self.mu) if self.nesterov else self.mom
        self.flat.addcmul_(upd, neg_lr)  # x = x − ηv

    def load_momentum(self, cfg: RunConfig, model: nn.Module, optimizer_state: dict) -> None:
        """Momentum buffers from a ``torch.optim.SGD`` state dict of this member (``fit``'s checkpoint)."""
        opt = build_optimizer(cfg, model)
        opt.load_state_dict(optimizer_state)
        with torch.no_grad():
            for p, b in zip(self.params, self.bufs):
                m = opt.state.get(p, {}).get("momentum_buffer")
                b.copy_(m if m is not None else torch.zeros_like(b))

    def optimizer_state(self, cfg: RunConfig, model: nn.Module, lr: float) -> dict:
        """This member's optimizer state as ``torch.optim.SGD.state_dict()`` (``fit``'s checkpoint format)."""
        opt = build_optimizer(cfg, model)
        if cfg.momentum != 0:
            for p, b in zip(self.params, self.bufs):
                opt.state[p]["momentum_buffer"] = b.detach().clone()
        for g in opt.param_groups:
            g["lr"] = lr
        return opt.state_dict()


# ============================================================================================== engines
class _Streams:
    """Every member runs ``fit``'s step (``StaticStep`` or the eager backward, then ``optimizer.step()``) on its own
    stream, members issued one after the other."""

    name = "streams"

    def __init__(self, runs: list[_Run], fast: FastPath, backend: _Host):
        self.fast, self.backend = fast, backend
        self.runs = runs
        for run in runs:
            model = run.model
            run.optimizer = build_optimizer(run.cfg, model)
            run.tracker = AngularTracker(model)
            run.loss_fn = _loss_through(model, fast)
            run.static = (StaticStep(_loss_through(run.forward, fast), trainable(model), list(model.buffers()),
                                     run.cfg.batch_size, eager_loss_fn=run.loss_fn, capture=fast.graphs)
                          if fast.static else None)

    def set_runs(self, runs: list[_Run]) -> None:
        self.runs = runs

    def load(self, run: _Run, state: dict) -> None:
        run.model.load_state_dict(state["model"])
        run.optimizer.load_state_dict(state["optimizer"])

    def checkpoint(self, run: _Run, lr: float) -> tuple[dict, dict]:
        return run.model.state_dict(), run.optimizer.state_dict()

    def epoch(self, epoch: int, steps: int) -> None:
        its = []
        for m, run in enumerate(self.runs):
            with self.backend.member(m):
                its.append(run.batches.epoch(epoch))
        step = epoch * steps
        for _ in range(steps):
            for m, run in enumerate(self.runs):
                with self.backend.member(m):
                    x, y = next(its[m])
                    run.schedule.apply(run.optimizer, step)
                    if run.static is not None:  # .grad are StaticStep's persistent tensors
                        batch_loss, batch_correct = run.static(x, y)
                    else:
                        loss, (batch_loss, batch_correct) = run.loss_fn(x, y)
                        run.optimizer.zero_grad(set_to_none=True)
                        loss.backward()
                    run.optimizer.step()
                    run.loss_sum += batch_loss.double() * len(y)
                    run.correct += batch_correct
            step += 1


class _OneGraph:
    """One captured step for the whole group (per batch size: the full one and the ragged last one): every
    member's forward, loss, backward, flat SGD step and loss/accuracy sums as a branch on its stream."""

    name = "onegraph"

    def __init__(self, runs: list[_Run], fast: FastPath, backend: _Host, feed_x: torch.Tensor | None = None):
        self.fast, self.backend = fast, backend
        bf16 = fast.bf16
        # no autocast weight cache inside a captured step (PyTorch's graphs + autocast rule): casts stay in it
        self.autocast = (lambda: torch.autocast(fast.device_type, dtype=torch.bfloat16, cache_enabled=False)) \
            if bf16 else contextlib.nullcontext
        for run in runs:
            run.sgd = _FlatSGD(run.cfg, run.model, fast.channels_last)
            run.tracker = AngularTracker(run.model)
        self.set_runs(runs)

    def set_runs(self, runs: list[_Run]) -> None:
        """(Re)build the group's step for ``runs`` (at the start, and when members leave): a new LR table, new
        static buffers, no graphs yet (captured at their first batch)."""
        self.runs = runs
        dev, dt = runs[0].sgd.flat.device, runs[0].sgd.flat.dtype
        spe = len(runs[0].batches)
        total = runs[0].cfg.num_epochs * spe
        table = [[-run.schedule.lr(s) for run in runs] for s in range(total)]
        self.neg_lr_table = torch.tensor(table, dtype=dt, device=dev) if total else torch.zeros(0, len(runs))
        self.neg_lr = torch.zeros(len(runs), dtype=dt, device=dev)
        self.graphs: dict[int, object] = {}
        self.static: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.feed = _Feed([run.batches for run in runs])

    def state(self) -> list[torch.Tensor]:
        """What a warm-up changes and must be put back: weights, momentum, sums, every module buffer."""
        out = []
        for run in self.runs:
            out += [run.sgd.flat, run.sgd.mom, run.loss_sum, run.correct, *run.model.buffers()]
        return out

    def load(self, run: _Run, state: dict) -> None:
        run.model.load_state_dict(state["model"])
        run.sgd.load_momentum(run.cfg, run.model, state["optimizer"])

    def checkpoint(self, run: _Run, lr: float) -> tuple[dict, dict]:
        sd = {k: v.detach().clone(memory_format=torch.contiguous_format) for k, v in run.model.state_dict().items()}
        return sd, run.sgd.optimizer_state(run.cfg, run.model, lr)

    def body(self, b: int) -> None:
        """The group's step on the static batch of size ``b`` (captured once per ``b`` on CUDA)."""
        x, y = self.static[b]
        self.backend.fork()
        for m, run in enumerate(self.runs):
            with self.backend.member(m):
                xm, ym = x[m * b:(m + 1) * b], y[m * b:(m + 1) * b]
                with self.autocast():
                    out = run.model(self.fast.inputs(xm))
                    loss = F.cross_entropy(out, ym)  # fp32 under autocast
                grads = torch.autograd.grad(loss, run.sgd.params, allow_unused=True)
                if any(g is None for g in grads):
                    raise RuntimeError("onegraph: a trainable parameter receives no gradient; torch.optim.SGD would "
                                       "skip it (use engine='streams' or fit)")
                with torch.no_grad():
                    torch._foreach_copy_(run.sgd.grads, list(grads))
                    run.sgd.step(self.neg_lr[m])
                    run.loss_sum += loss.detach().double() * b
                    run.correct += (out.detach().argmax(1) == ym).sum()
        self.backend.join()

    def epoch(self, epoch: int, steps: int) -> None:
        step = epoch * steps
        for x, y in self.feed.epoch(epoch):
            b = y.shape[0] // len(self.runs)
            if b not in self.static:
                self.static[b] = (torch.empty_like(x), torch.empty_like(y))
            sx, sy = self.static[b]
            sx.copy_(x)
            sy.copy_(y)
            self.neg_lr.copy_(self.neg_lr_table[step])
            if b not in self.graphs:
                self.graphs[b] = self.backend.capture(lambda b=b: self.body(b), self.state())
            self.backend.replay(self.graphs[b])
            step += 1


class _Feed:
    """The batches of the members for one step, member after member along the batch dimension: each member's draws
    (permutation, crop offsets, flips) come from its own ``data.TensorBatches`` generator, so its rows are the
    images ``fit`` sees; the images of all members are made by one gather from their padded training sets
    (concatenated once) and one normalization."""

    def __init__(self, batches: list[data_mod.TensorBatches]):
        self.batches = batches
        tb0 = batches[0]
        self.pad, self.augment = tb0.pad, tb0.augment
        offsets: dict[int, int] = {}
        xs, ys, total = [], [], 0
        for tb in batches:
            if id(tb.data) not in offsets:
                offsets[id(tb.data)] = total
                xs.append(tb.x)
                ys.append(tb.data.y.to(tb.x.device))
                total += len(tb.data)
        self.x = xs[0] if len(xs) == 1 else torch.cat(xs)
        self.y = ys[0] if len(ys) == 1 else torch.cat(ys)
        self.offset = [offsets[id(tb.data)] for tb in batches]
        self.mean, self.std = tb0.norm_stats()

    def epoch(self, epoch: int):
        its = [tb.draws(epoch) for tb in self.batches]
        for _ in range(len(self.batches[0])):
            draws = [next(it) for it in its]
            idx = torch.cat([d[0] + off if off else d[0] for d, off in zip(draws, self.offset)])
            crop = tuple(torch.cat([d[1][j] for d in draws]) for j in range(3)) if self.augment else None
            yield data_mod.crop_normalize(self.x, idx, crop, self.pad, self.mean, self.std), self.y[idx]


# ============================================================================================== evaluation
@torch.no_grad()
def _evaluate(runs: list[_Run], which: list[int], test: list[tuple[torch.Tensor, torch.Tensor]], n: int,
              fast: FastPath, backend: _Host, autocast) -> dict[int, dict[str, float]]:
    """``train.evaluate`` for the members ``which`` (eval mode, running statistics), each on its stream, on the
    test batches ``test`` (normalized once); one host read-back for all."""
    sums = {}
    backend.fork()
    for m in which:
        run = runs[m]
        with backend.member(m):
            run.model.eval()
            loss_sum = torch.zeros((), dtype=torch.float64, device=test[0][0].device)
            correct = torch.zeros((), dtype=torch.int64, device=test[0][0].device)
            for x, y in test:
                with autocast():
                    out = run.model(fast.inputs(x))
                    loss_sum += F.cross_entropy(out, y, reduction="sum").double()  # fp32 under autocast
                correct += (out.argmax(1) == y).sum()
            run.model.train()
            sums[m] = (loss_sum, correct)
    backend.join()
    if not sums:
        return {}
    vals = torch.stack([torch.stack([s.double(), c.double()]) for s, c in sums.values()]).tolist()
    return {m: {"test_loss": v[0] / n, "test_acc": 100.0 * int(v[1]) / n} for m, v in zip(sums, vals)}


# ============================================================================================== training
def _check_group(cfgs: list[RunConfig], engine: str) -> None:
    if engine not in ENGINES:
        raise ValueError(f"engine: must be one of {ENGINES}, got {engine!r}")
    if not cfgs:
        raise ValueError("configs: empty")
    for c in cfgs:
        if not isinstance(c, RunConfig):
            raise ValueError(f"configs: expected RunConfig, got {type(c).__name__}")
        if engine == "onegraph" and not stackable(c):
            raise ValueError(f"optimizer: engine 'onegraph' implements torch.optim.SGD with coupled L2 and a schedule "
                             f"that only sets the LR, got {c.optimizer!r}/{c.weight_decay_mode!r}/{c.schedule!r}")
        if engine == "onegraph" and c.compile:
            raise ValueError("compile: not with engine 'onegraph' (its step is captured as a CUDA graph)")
    k0 = tuple(getattr(cfgs[0], f) for f in SHARED_FIELDS)
    for c in cfgs[1:]:
        for f, a, b in zip(SHARED_FIELDS, k0, (getattr(c, f) for f in SHARED_FIELDS)):
            if a != b:
                raise ValueError(f"{f}: fit_lockstep needs the same {f} for every config, got {a!r} and {b!r}")


def fit_lockstep(configs, engine: str = "onegraph", store=None, data_root=None, download: bool = False,
                 progress: bool = True, eval_batch_size: int = 1000, keep_states: bool = False,
                 clock=CheckpointClock) -> list[dict]:
    """Train the runs ``configs`` in lockstep with ``engine`` (:data:`ENGINES`; see the module docstring) and
    return one ``fit``-format result per config, in order.

    The configs must agree on ``batched.SHARED_FIELDS``. ``store``, ``data_root``, ``download``,
    ``eval_batch_size``, ``clock``: as in ``fit_many`` (one clock for the group; members that resume from
    different epochs train as one group per start epoch); ``keep_states=True`` adds ``"state_dict"`` (the member's
    final model state dict, CPU) to the result of each run trained here."""
    configs = list(configs)
    _check_group(configs, engine)
    results: list[dict | None] = [None] * len(configs)
    todo: dict[str, list[int]] = {}
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
            out = _train_group([uniq[j] for j in js], [states[j] for j in js], start, engine, device, store,
                               data_root, download, progress, eval_batch_size, keep_states, clock)
            for j, r in zip(js, out):
                for k, i in enumerate(todo[uniq[j].hash]):
                    results[i] = r if k == 0 else {**r, "history": list(r["history"])}
    return results


def _finite(runs: list[_Run]) -> list[bool]:
    """Per member: every parameter finite (``fit``'s rule); one host read-back for the group."""
    flags = [torch.stack([torch.isfinite(p.detach()).all() for p in r.model.parameters()]).all() for r in runs]
    return torch.stack(flags).tolist()


def _train_group(cfgs, states, start_epoch, engine, device, store, data_root, download, progress, eval_batch_size,
                 keep_states, clock) -> list[dict]:
    splits = [load_data(c, data_root, download) for c in cfgs]
    test = splits[0][1].to(device)  # the test set does not depend on the seed
    on_device: dict[int, data_mod.ImageTensors] = {}
    for s in splits:
        if id(s[0]) not in on_device:
            on_device[id(s[0])] = s[0].to(device)
    trains = [on_device[id(s[0])] for s in splits]
    fast = FastPath(cfgs[0], device)  # the fast-path flags are shared fields: one setting for the group
    runs = [_Run(c, t, device, fast) for c, t in zip(cfgs, trains)]
    backend = _backend(device, len(runs))
    eng = (_Streams if engine == "streams" else _OneGraph)(runs, fast, backend)
    test_batches = data_mod.TensorBatches(test, eval_batch_size, train=False)
    test_list = list(test_batches.epoch())  # normalized once for every member and evaluation
    autocast = eng.autocast if engine == "onegraph" else fast.autocast
    n_train, n_test, bsz = len(trains[0]), len(test), cfgs[0].batch_size
    spe, seen = len(runs[0].batches), runs[0].batches.images  # seen: data.train_steps
    clock = clock(cfgs[0].checkpoint_every_s)
    for run, st in zip(runs, states):
        if store is not None:
            store.start(run.cfg)
        if st is not None:
            eng.load(run, st)
            run.tracker.load_state_dict(st["tracker"])
            run.history = list(st["history"])
    eval_every = [c.eval_interval(n_train, n_test) for c in cfgs]
    active = list(runs)
    final_states: dict[int, dict] = {}
    num_epochs = cfgs[0].num_epochs
    bar = None
    if progress:
        from .train import progress_bar as tqdm

        bar = tqdm(total=num_epochs, initial=start_epoch, leave=False,
                   desc=f"{cfgs[0].model} n={n_train} B={bsz} x{len(runs)} {engine}")
    for epoch in range(start_epoch, num_epochs):
        t0 = time.perf_counter()
        M = len(active)
        for run in active:
            run.tracker.start_epoch()
            run.loss_sum.zero_()
            run.correct.zero_()
        backend.fork()
        eng.epoch(epoch, spe)
        backend.join()
        totals = torch.stack([torch.stack([r.loss_sum, r.correct.double()]) for r in active]).tolist()
        fin = _finite(active)
        last = epoch * spe + spe - 1
        keep, recs = [], {}
        for m, run in enumerate(active):
            lr_epoch = run.lr_of_epoch(last)
            train_loss = totals[m][0] / seen
            rec = {"epoch": epoch + 1, "lr": lr_epoch, "train_loss": train_loss,
                   "train_acc": 100.0 * int(totals[m][1]) / seen}
            g0 = run.optimizer.param_groups[0] if run.optimizer is not None else {}
            if "exp_lr_log2_rescale" in g0:
                rec["exp_lr_log2_rescale"] = int(g0["exp_lr_log2_rescale"])
            if not math.isfinite(train_loss) or not fin[m]:
                run.status, run.diverged_epoch = "diverged", epoch + 1
                run.history.append(rec)
                if store is not None:
                    store.log_epoch(run.cfg, rec)
                if keep_states:
                    final_states[id(run)] = {k: v.detach().cpu().clone() for k, v in run.model.state_dict().items()}
                continue
            rec.update(run.tracker.end_epoch(lr=lr_epoch, n=seen, batch_size=bsz))
            recs[m] = rec
            keep.append(m)
        seconds = (time.perf_counter() - t0) / M
        for m in keep:
            recs[m]["seconds"] = seconds
            recs[m]["group_size"] = M
        due = [m for m in keep if (epoch + 1) % eval_every[runs.index(active[m])] == 0 or epoch + 1 == num_epochs]
        evals = _evaluate(active, due, test_list, n_test, fast, backend, autocast) if due else {}
        for m in keep:
            run = active[m]
            recs[m].update(evals.get(m, {}))
            run.history.append(recs[m])
            if store is not None:
                store.log_epoch(run.cfg, recs[m])
        if store is not None and epoch + 1 < num_epochs and keep and clock.due():
            for m in keep:
                run = active[m]
                sd, opt_sd = eng.checkpoint(run, recs[m]["lr"])
                store.save_checkpoint(run.cfg, {"epoch": epoch + 1, "model": sd, "optimizer": opt_sd,
                                                "tracker": run.tracker.state_dict(), "history": run.history})
        if len(keep) < M:
            active = [active[m] for m in keep]
            if not active:
                break
            eng.set_runs(active)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(active=len(active))
    if bar is not None:
        bar.close()

    results = []
    for run in runs:
        r = summarize(run.cfg, run.history, run.status, run.diverged_epoch, run.train.name)
        if store is not None:
            store.finish(run.cfg, r)
        if keep_states:
            r["state_dict"] = final_states.get(id(run)) or {k: v.detach().cpu().clone()
                                                            for k, v in run.model.state_dict().items()}
        results.append(r)
    return results
