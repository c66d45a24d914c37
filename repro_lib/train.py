"""The one training loop: ``fit(cfg)`` trains the run a ``RunConfig`` describes and returns its metrics.

Protocol (Yun et al. 2022, Sec. 4 and Appendix B; the same loop serves Li & Arora 2020, Heo et al. 2021 and the
back-matching supplement through ``cfg.optimizer`` / ``cfg.schedule``):

* the optimizer comes from ``repro_lib.optim`` (``"sgd"`` = ``torch.optim.SGD``: coupled L2 weight decay,
  PyTorch momentum ``v ← μv + g; x ← x − ηv``), the LR from ``repro_lib.schedules`` and is written into the
  optimizer before every step (``schedule.apply(opt, step)``; global 0-based step);
* data: device-resident uint8 tensors, per-epoch reshuffling, random crop with 4-pixel zero padding + flip,
  standard normalization, ``drop_last=False`` less a lone last image (``data.train_steps``); a class-balanced
  seeded subset of ``cfg.n`` images;
* evaluation on the full test set (or ``cfg.n_test`` class-balanced test images) with running statistics;
* the angular tracker (``repro_lib.angular``) records Δθ per epoch (Eq. 11), ‖x‖, η/‖x‖² (Eq. 9) and
  ηN/(‖x‖²B) (Eq. 10) over ``model.scale_invariant_names``;
* a run whose training loss or weights become NaN/inf is stopped and recorded as ``diverged`` at that epoch; a run
  that ends *collapsed* -- at chance level, or with weights that stopped turning (:func:`collapse_reason`) -- is
  recorded as ``diverged`` too, with the reason (the paper leaves diverged runs out of its means, Yun et al.
  Sec. 5.1); records written before this rule are judged again when read (:func:`judge_collapse`);
* with a ``Store``: a finished run is returned from the store, an unfinished one resumes from its last
  epoch-boundary checkpoint (model, optimizer, tracker, history; batches are a function of (seed, epoch)),
  written every epoch or at most every ``cfg.checkpoint_every_s`` seconds.

GPU fast path (flags in ``RunConfig``, none changes the optimization): ``precision="bf16"`` autocasts the
forward pass and loss to bfloat16 while weights, gradients, optimizer state and tracker stay fp32 (no pure-fp16
weights, no loss scaling needed for bf16); ``channels_last`` and ``cudnn_benchmark`` (CUDA only) pick faster
kernels for the same convolutions; ``compile`` runs the forward of every full batch through ``torch.compile``
with static shapes, the ragged last batch and evaluation eagerly (:class:`FastPath`, :class:`StaticStep`);
``cuda_graphs`` runs forward + backward of every full batch as one replayed CUDA graph (:class:`StaticStep`);
evaluation every ``cfg.eval_interval(...)`` epochs. Data and augmentation are device-resident; the optimizers use
foreach math.

No plotting here.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import shutil
import time
import warnings

import torch
import torch.nn.functional as F

from . import data as data_mod
from .angular import AngularTracker
from .config import RunConfig
from .models import create
from .optim import build_optimizer, trainable
from .schedules import build_schedule


PROGRESS_ENV = "REPRO_PROGRESS"  # "lines": one line per run instead of progress bars (set by the notebook runner)


def progress_lines() -> bool:
    """True under the notebook runner (``$REPRO_PROGRESS=lines``): training reports progress as short lines
    instead of progress bars, which would leave every refresh in the saved notebook. ``runs.sweep.run_sweep``
    writes them into one output line that each finished run overwrites, naming the run (its method or cell and
    seed), and ends it with the sweep's status line, so the saved notebook holds that one line."""
    return os.environ.get(PROGRESS_ENV, "").lower() == "lines"


def progress_bar(*args, **kwargs):
    """A ``tqdm.auto`` progress bar (a widget in Jupyter where ipywidgets is installed, else a text bar) without
    the warning tqdm prints into the notebook when ipywidgets is missing (it falls back to the text bar)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm.autonotebook, on its first import
        from tqdm.auto import tqdm
    return tqdm(*args, **kwargs)


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: 'cuda' requested but no CUDA device is available")
    return torch.device(device)


@functools.lru_cache(maxsize=4)
def _split(name: str, split: str, root: str | None, download: bool, synthetic: bool, synthetic_n: int | None):
    return data_mod.load_split(name, split, root, download=download, synthetic=synthetic, synthetic_n=synthetic_n)


def load_data(cfg: RunConfig, data_root=None, download: bool = False):
    """The (train, test) ``ImageTensors`` of a run, on CPU: a class-balanced subset of ``cfg.n`` training
    images (seeded by ``cfg.seed``) and the test set (or ``cfg.n_test`` balanced test images)."""
    root = str(data_root) if data_root else None
    if cfg.synthetic:
        train = _split(cfg.dataset, "train", None, False, True, cfg.n)
        test = _split(cfg.dataset, "test", None, False, True, cfg.n_test or 1000)
        return train, test
    train = _split(cfg.dataset, "train", root, download, False, None)
    test = _split(cfg.dataset, "test", root, download, False, None)
    if cfg.n < len(train):
        train = train.subset(data_mod.balanced_subset(train.y, cfg.n, cfg.seed))
    if cfg.n_test and cfg.n_test < len(test):
        test = test.subset(data_mod.balanced_subset(test.y, cfg.n_test, 0))
    return train, test


def build_model(cfg: RunConfig, num_classes: int) -> torch.nn.Module:
    """The run's model, initialised from ``cfg.seed``."""
    torch.manual_seed(cfg.seed)
    return create(cfg.model, num_classes=num_classes, scale_invariant=cfg.scale_invariant, width=cfg.width,
                  ghost_batch=cfg.ghost_batch)


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches: data_mod.TensorBatches, fast: FastPath) -> dict[str, float]:
    """Test loss and accuracy (%) in eval mode (running statistics); ``fast``: the run's layout and precision."""
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros((), dtype=torch.float64, device=batches.x.device)
    correct = torch.zeros((), dtype=torch.int64, device=batches.x.device)
    for x, y in batches.epoch():
        with fast.autocast():
            out = model(fast.inputs(x))
            loss_sum += F.cross_entropy(out, y, reduction="sum").double()  # fp32 under autocast
        correct += (out.argmax(1) == y).sum()
    model.train(was_training)
    n = len(batches.data)
    return {"test_loss": loss_sum.item() / n, "test_acc": 100.0 * correct.item() / n}


def _finite_params(model) -> bool:
    ps = [torch.isfinite(p.detach()).all() for p in model.parameters()]
    return bool(torch.stack(ps).all()) if ps else True  # one host sync per epoch, not one per tensor


def cpu_compiler() -> str | None:
    """Path of the C++ compiler that ``torch.compile`` would call on the CPU (``$CXX``, else ``g++``, ``c++`` or
    ``clang++`` on the PATH), or None: without one, ``compile=True`` on the CPU trains eagerly with a warning."""
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


class FastPath:
    """The fast-path flags of a ``RunConfig`` applied to one model on one device (shared by ``fit`` and
    ``batched.fit_many``): ``prepare(model)`` returns the module to call for the forward pass of a full training
    batch (compiled or not; parameters are shared with ``model``), ``inputs(x)`` lays out a batch, ``autocast()`` is
    the precision context, ``static`` says whether training steps go through :class:`StaticStep`.

    ``compile=True`` compiles with static shapes (``torch.compile(model, dynamic=False)``) for the full batch size
    only: :class:`StaticStep` sends the ragged last batch of an epoch (``drop_last=False``) through the eager
    ``model`` on the same parameters, and evaluation runs eagerly. One set of graphs is compiled at the first full
    batch and reused for the whole run (no recompilation per epoch, no dynamic shapes: ghost BN's chunking is
    Python control flow on the batch size, which symbolic shapes cannot decide)."""

    def __init__(self, cfg: RunConfig, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device_type = device.type
        self.bf16 = cfg.precision == "bf16"
        self.channels_last = cfg.channels_last and self.cuda
        self.compile = cfg.compile
        if self.compile and not self.cuda and cpu_compiler() is None:
            warnings.warn("compile=True: no C++ compiler found for torch.compile's CPU backend (set CXX, or install "
                          "g++ or clang++); training eagerly instead (the same arithmetic, slower)", RuntimeWarning,
                          stacklevel=3)
            self.compile = False
        self.graphs = cfg.cuda_graphs  # StaticStep; captured as a CUDA graph on CUDA, plain static buffers on CPU
        self.static = self.graphs or self.compile  # training steps through StaticStep (full batches vs ragged)
        if self.cuda:
            torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
        if self.compile:
            # every GhostBatchNorm instance shares one forward: if dynamo splits the model at a graph break, channel
            # counts and ranks (4-D maps, 2-D pooled features) each need their own graph -- more than dynamo's
            # default 8, after which it silently falls back to eager (measured on the H200: slower than eager)
            import torch._dynamo.config as dynamo_config

            for name in ("recompile_limit", "cache_size_limit"):
                if hasattr(dynamo_config, name):
                    setattr(dynamo_config, name, max(getattr(dynamo_config, name), 64))

    def prepare(self, model: torch.nn.Module) -> torch.nn.Module:
        if self.channels_last:
            model.to(memory_format=torch.channels_last)
        return torch.compile(model, dynamic=False) if self.compile else model

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last and x.dim() == 4 else x

    def autocast(self):
        if not self.bf16:
            return contextlib.nullcontext()
        # no autocast weight cache under CUDA graphs (PyTorch's graphs + autocast rule): casts stay in the graph
        return torch.autocast(self.device_type, dtype=torch.bfloat16, cache_enabled=not self.graphs)


class StaticStep:
    """Forward, loss and backward of one training batch with static shapes (``cuda_graphs=True`` or
    ``compile=True``), shared by ``fit`` and ``batched.fit_many``; the optimizer step stays eager (foreach math, LR
    from the schedule).

    ``loss_fn(x, y) -> (loss, stats)``: the scalar to differentiate and a tuple of detached tensors (per-batch
    loss values, correct counts), for a batch of the full size ``batch_size``; ``eager_loss_fn`` (default
    ``loss_fn``): the same function through the eager model, for a batch of another size (the ragged last batch of
    an epoch, ``drop_last=False``). Gradients come from ``torch.autograd.grad`` and are *copied* into persistent
    tensors ``grads`` that stay the parameters' ``.grad`` for the whole run (nothing sets them to None), so after
    every call ``.grad`` holds exactly what ``zero_grad(set_to_none=True); loss.backward()`` would leave.

    ``capture=True`` (``cuda_graphs``): a batch of the full size is copied into static input buffers and, on CUDA,
    run by replaying one CUDA graph (captured at the first full batch; PyTorch's "whole-network
    capture" recipe, torch.cuda.graphs). Before the capture, ``warm_up`` runs the step 3 times on a side stream
    (cuDNN autotuning, allocator) and then restores every module buffer (BN running statistics, batch counters) --
    the warm-up takes no optimizer step, so the run continues exactly where it was. On CPU every
    batch runs eagerly through the static buffers: the same arithmetic, which is what the
    CPU tests compare against plain ``fit``.

    ``capture=False`` (``compile``): a full batch runs ``loss_fn`` -- a forward compiled with static shapes
    (``FastPath.prepare``), compiled once at the first full batch -- and any other batch ``eager_loss_fn``, so the
    ragged batch neither recompiles nor makes shapes dynamic; on CPU and CUDA alike.

    Memory: the graph keeps one full step's activations in its private pool for the whole run, and the eager
    ragged batch allocates beside it, so the peak can exceed the eager loop's by up to that batch's activations
    (``batched.member_bytes`` adds them when it sizes ``fit_many`` groups). ``cuda_graphs`` is incompatible with
    ``compile=True`` (rejected by ``RunConfig``). Measured on an H200 (``benchmarks/results_h200_graphs.json``): a
    50k-image epoch of the width-64 ResNet-18 at B = 128 takes 2.23 s instead of 4.42 s eagerly (fp32); with
    deterministic cuDNN kernels the graphed and the eager run are bit-identical (``benchmarks/check_graphs.py``,
    ``tests/test_fast_path.py::test_cuda_graph_capture_matches_eager_on_cuda``). On by default in the ``gpu`` and
    ``paper`` profiles (``papers.yun2022.grids._FAST``)."""

    WARMUP = 3

    def __init__(self, loss_fn, params: list[torch.Tensor], buffers: list[torch.Tensor], batch_size: int,
                 grads: list[torch.Tensor] | None = None, eager_loss_fn=None, capture: bool = True):
        self.loss_fn = loss_fn
        self.eager_loss_fn = eager_loss_fn if eager_loss_fn is not None else loss_fn
        self.capture = capture
        self.params = list(params)
        self.buffers = list(buffers)
        self.batch_size = batch_size
        self.grads = list(grads) if grads is not None else [torch.zeros_like(p) for p in self.params]
        for p, g in zip(self.params, self.grads):
            p.grad = g
        self.x = self.y = None
        self.graph = None
        self.stats = None
        self._stream = None

    def _run(self, x: torch.Tensor, y: torch.Tensor, loss_fn=None):
        loss, stats = (loss_fn or self.loss_fn)(x, y)
        grads = torch.autograd.grad(loss, self.params, allow_unused=True)
        if any(g is None for g in grads):
            raise RuntimeError("cuda_graphs/compile: a trainable parameter receives no gradient; the static step "
                               "cannot reproduce torch.optim's skipping of such parameters (set cuda_graphs=False "
                               "and compile=False)")
        with torch.no_grad():
            torch._foreach_copy_(self.grads, list(grads))
        return stats

    def warm_up(self) -> None:
        """Run the step ``WARMUP`` times on the static buffers (a side stream on CUDA), then put every module
        buffer back: parameters are untouched (no optimizer step), gradients are overwritten by the next call."""
        saved = [b.clone() for b in self.buffers]
        cuda = self.x.device.type == "cuda"
        # the capture later runs on this same stream: per-stream library handles and workspaces (cuBLAS(Lt), cuDNN)
        # are then created here, not lazily in the middle of the capture
        stream = self._stream = torch.cuda.Stream(self.x.device) if cuda else None
        if cuda:
            stream.wait_stream(torch.cuda.current_stream(self.x.device))
        with torch.cuda.stream(stream) if cuda else contextlib.nullcontext():
            for _ in range(self.WARMUP):
                self._run(self.x, self.y)
        if cuda:
            torch.cuda.current_stream(self.x.device).wait_stream(stream)
        with torch.no_grad():
            for b, s in zip(self.buffers, saved):
                b.copy_(s)

    def __call__(self, x: torch.Tensor, y: torch.Tensor):
        if x.shape[0] != self.batch_size:
            return self._run(x, y, self.eager_loss_fn)
        if not self.capture:
            return self._run(x, y)
        if self.x is None:
            self.x, self.y = torch.empty_like(x), torch.empty_like(y)
        self.x.copy_(x)
        self.y.copy_(y)
        if x.device.type != "cuda":
            return self._run(self.x, self.y)
        if self.graph is None:
            self.warm_up()
            torch.cuda.synchronize(x.device)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, stream=self._stream):
                self.stats = self._run(self.x, self.y)
        self.graph.replay()
        return self.stats


class CheckpointClock:
    """When to write the resume checkpoint: every epoch (``every_s = 0``) or once ``every_s`` seconds have passed
    since the last write. A run killed between writes recomputes at most ``every_s`` seconds of training."""

    def __init__(self, every_s: float):
        self.every_s = every_s
        self.last = time.monotonic()

    def due(self) -> bool:
        now = time.monotonic()
        if self.every_s <= 0 or now - self.last >= self.every_s:
            self.last = now
            return True
        return False


#: a run ends *collapsed* at chance level when its last training loss is within ``CHANCE_LOSS_TOL`` of ln C and its
#: last test accuracy within ``CHANCE_ACC_POINTS`` points of 100/C (C classes) ...
CHANCE_LOSS_TOL, CHANCE_ACC_POINTS = 0.01, 1.0
#: ... or when its weights stopped turning: Δθ below ``FROZEN_RAD`` in every epoch of the last ``FROZEN_SHARE`` of
#: its epochs (at least one epoch)
FROZEN_RAD, FROZEN_SHARE = 1e-5, 0.1


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def collapse_reason(history: list[dict], num_classes: int) -> str:
    """Why a run that finished without a non-finite loss still counts as diverged, or "" when it does not.

    Collapsed (the run stopped learning; Yun et al. Sec. 5.1 leave such runs out of a cell's mean): the last
    training loss within :data:`CHANCE_LOSS_TOL` of ln C *and* the last test accuracy within
    :data:`CHANCE_ACC_POINTS` points of 100/C; or Δθ (Eq. 11) below :data:`FROZEN_RAD` rad in every epoch of the
    last :data:`FROZEN_SHARE` of the epochs. A run without history or classes is never judged collapsed."""
    if not history or not num_classes or num_classes < 2:
        return ""
    loss = history[-1].get("train_loss")
    evals = [h["test_acc"] for h in history if _finite(h.get("test_acc"))]
    chance_loss, chance_acc = math.log(num_classes), 100.0 / num_classes
    if (_finite(loss) and evals and abs(loss - chance_loss) <= CHANCE_LOSS_TOL
            and abs(evals[-1] - chance_acc) <= CHANCE_ACC_POINTS):
        return (f"collapsed to chance: train loss {loss:.4f} (ln {num_classes} = {chance_loss:.4f}), "
                f"test accuracy {evals[-1]:.2f} % (chance {chance_acc:g} %)")
    k = max(1, math.ceil(FROZEN_SHARE * len(history)))
    tail = [h.get("angular_update") for h in history[-k:]]
    if all(_finite(a) and a < FROZEN_RAD for a in tail):
        return f"weights stopped turning: Δθ < {FROZEN_RAD:g} rad in each of the last {k} epochs"
    return ""


def judge_collapse(result: dict, history: list[dict], num_classes: int) -> dict:
    """``result`` (a run's result dict) as :func:`summarize` would write it today: a ``finished`` run that
    :func:`collapse_reason` calls collapsed becomes ``diverged`` (NaN final accuracy, ``diverged_epoch`` its last
    epoch, ``diverged_reason``); anything else is returned unchanged. This is how records written before the rule
    are re-judged when read (nothing is retrained)."""
    if result.get("status") != "finished":
        return result
    reason = collapse_reason(history, num_classes)
    if not reason:
        return result
    return {**result, "status": "diverged", "diverged_epoch": len(history), "diverged_reason": reason,
            "test_acc": float("nan"), "test_loss": float("nan")}


def summarize(cfg: RunConfig, history: list[dict], status: str, diverged_epoch, data_name: str) -> dict:
    """The result dict of a run (``fit`` and ``batched.fit_many``): final test accuracy (NaN when diverged), last
    training loss/accuracy, epochs run, training seconds, tuning factor, data name, config and history; a
    ``finished`` run that ended collapsed is returned as ``diverged`` with its reason (:func:`judge_collapse`)."""
    last = history[-1] if history else {}
    evals = [h for h in history if "test_acc" in h]
    result = {
        "status": status,
        "diverged_epoch": diverged_epoch,
        "test_acc": evals[-1]["test_acc"] if status == "finished" else float("nan"),
        "test_loss": evals[-1]["test_loss"] if status == "finished" else float("nan"),
        "train_loss": last.get("train_loss", float("nan")),
        "train_acc": last.get("train_acc", float("nan")),
        "epochs_run": len(history),
        "train_seconds": sum(h.get("seconds", 0.0) for h in history),
        "tuning_factor": cfg.tuning_factor,
        "data": data_name,
        "config": cfg.to_dict(),
        "history": history,
    }
    return judge_collapse(result, history, num_classes_of(cfg))


def num_classes_of(cfg) -> int:
    """The number of classes of ``cfg``'s dataset (0 when the dataset is not one ``repro_lib.data`` knows)."""
    try:
        return data_mod.dataset_info(cfg.dataset).num_classes
    except (KeyError, ValueError, AttributeError):
        return 0


def fit(cfg: RunConfig, store=None, data_root=None, download: bool = False, progress: bool = True,
        eval_batch_size: int = 1000, clock=CheckpointClock) -> dict:
    """Train one run and return ``{status, diverged_epoch, test_acc, train_loss, …, history, config}``.

    ``store``: a ``repro_lib.store.Store``; with it a finished run is not recomputed and an interrupted one
    resumes from its last completed epoch. ``data_root``: folder holding the dataset (else
    ``$REPRO_DATA_ROOT``, else ``./data``); ``download``: let torchvision download CIFAR.

    ``clock``: the between-epochs hook. ``clock(cfg.checkpoint_every_s)`` is built once the model and data are
    ready; its ``due()`` is asked after every epoch but the last (after that epoch's evaluation) whether to write
    the resume checkpoint now (default :class:`CheckpointClock`). A caller that must stop training between
    epochs (the budgeted GPU window, ``repro_lib.runs.window``) passes its own: it answers True, and once the
    store has written the checkpoint it raises; the run resumes from that epoch.
    """
    if store is not None:
        done = store.get(cfg)
        if done is not None:
            return {**done, "history": store.history(cfg)}
    device = resolve_device(cfg.device)
    train, test = load_data(cfg, data_root, download)
    train, test = train.to(device), test.to(device)
    train_batches = data_mod.TensorBatches(train, cfg.batch_size, train=True, augment=cfg.augment, seed=cfg.seed)
    test_batches = data_mod.TensorBatches(test, eval_batch_size, train=False)
    steps_per_epoch = len(train_batches)

    model = build_model(cfg, train.num_classes).to(device)
    fast = FastPath(cfg, device)
    forward = fast.prepare(model)
    eval_every = cfg.eval_interval(len(train), len(test))
    clock = clock(cfg.checkpoint_every_s)
    optimizer = build_optimizer(cfg, model)
    schedule = build_schedule(cfg, steps_per_epoch)
    tracker = AngularTracker(model)
    history: list[dict] = []
    start_epoch = 0
    if store is not None:
        store.start(cfg)
        state = store.load_checkpoint(cfg, map_location=device)
        if state is not None:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            tracker.load_state_dict(state["tracker"])
            history, start_epoch = state["history"], state["epoch"]

    def loss_through(net):
        def loss_fn(x, y):
            with fast.autocast():
                out = net(fast.inputs(x))
                loss = F.cross_entropy(out, y)  # autocast runs cross_entropy in fp32
            return loss, (loss.detach(), (out.detach().argmax(1) == y).sum())
        return loss_fn

    loss_fn = loss_through(model)  # eager: the ragged last batch under compile, and every batch without StaticStep
    static = StaticStep(loss_through(forward), trainable(model), list(model.buffers()), cfg.batch_size,
                        eager_loss_fn=loss_fn, capture=fast.graphs) if fast.static else None
    status, diverged_epoch = "finished", None
    bar = None
    if progress:
        bar = progress_bar(total=cfg.num_epochs, initial=start_epoch, desc=f"{cfg.model} n={cfg.n} lr={cfg.lr:g} "
                   f"wd={cfg.weight_decay:g} B={cfg.batch_size}", leave=False)
    model.train()
    for epoch in range(start_epoch, cfg.num_epochs):
        t0 = time.perf_counter()
        tracker.start_epoch()
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        correct = torch.zeros((), dtype=torch.int64, device=device)
        step = epoch * steps_per_epoch
        for x, y in train_batches.epoch(epoch):
            schedule.apply(optimizer, step)
            if static is not None:  # .grad are StaticStep's persistent tensors, overwritten by every call
                batch_loss, batch_correct = static(x, y)
            else:
                loss, (batch_loss, batch_correct) = loss_fn(x, y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            optimizer.step()
            loss_sum += batch_loss.double() * len(y)
            correct += batch_correct
            step += 1
        seen = train_batches.images  # len(train), less a dropped lone last image (data.train_steps)
        train_loss = loss_sum.item() / seen
        # the LR in force at the last step (after any exact rescaling an exponential schedule did, Lemma 2.7)
        g0 = optimizer.param_groups[0]
        lr_epoch = g0["lr"] / g0.get("lr_scale", 1.0)
        rec = {"epoch": epoch + 1, "lr": lr_epoch, "train_loss": train_loss,
               "train_acc": 100.0 * correct.item() / seen}
        if "exp_lr_log2_rescale" in g0:
            # exponential schedules only (other histories keep their keys): the overflow-rescale exponent k in force
            # this epoch; the logged lr and weight norms are 4^-k η̃ and 2^-k ‖θ̃‖ (exp_lr.unscale_history)
            rec["exp_lr_log2_rescale"] = int(g0["exp_lr_log2_rescale"])
        if not math.isfinite(train_loss) or not _finite_params(model):
            status, diverged_epoch = "diverged", epoch + 1
            history.append(rec)
            if store is not None:
                store.log_epoch(cfg, rec)
            break
        rec.update(tracker.end_epoch(lr=lr_epoch, n=seen, batch_size=cfg.batch_size))
        rec["seconds"] = time.perf_counter() - t0
        if (epoch + 1) % eval_every == 0 or epoch + 1 == cfg.num_epochs:
            rec.update(evaluate(model, test_batches, fast))  # eager: no eval-mode graphs to compile
        history.append(rec)
        if store is not None:
            store.log_epoch(cfg, rec)
        if store is not None and epoch + 1 < cfg.num_epochs and clock.due():
            store.save_checkpoint(cfg, {"epoch": epoch + 1, "model": model.state_dict(),
                                        "optimizer": optimizer.state_dict(), "tracker": tracker.state_dict(),
                                        "history": history})
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{train_loss:.3f}", acc=f"{rec.get('test_acc', float('nan')):.1f}",
                            dtheta=f"{rec.get('angular_update', float('nan')):.3f}")
    if bar is not None:
        bar.close()

    result = summarize(cfg, history, status, diverged_epoch, train.name)
    if store is not None:
        store.finish(cfg, result)
    return result
