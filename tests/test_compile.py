"""``compile=True`` on CPU (inductor): ``fit`` and ``fit_many`` train the same runs as eagerly, with a ragged last
batch, and compile once per run -- never per epoch.

Full batches run a forward compiled with static shapes (``torch.compile(model, dynamic=False)``), the ragged last
batch (``drop_last=False``) and evaluation the eager model on the same parameters (``train.StaticStep`` with
``capture=False``). Before, the ragged batch made dynamo mark the batch dimension dynamic, and ghost BN's chunking
(a Python branch on the batch size) failed inside inductor.

Inductor compiles C++ kernels for every graph (on 2 CPU cores: ~20 s for its first compilation in a process with
an empty cache, then ~10-20 s per small model), so these tests train a tiny scale-invariant CNN of the package's own
layers (one convolution, ghost BN on the 4-D maps and on the pooled 2-D features, a fixed classifier) with ghost
batches small enough that both the full and the ragged batch are split into chunks. ``REPRO_SLOW_TESTS=1`` adds the
scale-invariant ResNet-18 (about 2 min of compilation).
"""
from __future__ import annotations

import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from repro_lib import batched, train
from repro_lib.config import RunConfig
from repro_lib.models import _registry
from repro_lib.models.layers import FixedLinear, GhostBatchNorm, ghost_chunk_sizes

pytest.importorskip("torch._inductor")
from torch._dynamo.utils import counters  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread", "tiny_model", "fresh_dynamo")

SLOW = bool(os.environ.get("REPRO_SLOW_TESTS"))
# N = 2 B + 20: two full batches of 4 ghost batches each and a ragged batch of 20 split as [16, 4] (ghost BN's
# chunking on a batch size that differs from B: what broke dynamic shapes); n_test = 40 in eval batches of 32 + 8
FIELDS = dict(model="tiny_ghost_cnn", scale_invariant=True, width=4, dataset="cifar10", synthetic=True, n=148,
              n_test=40, batch_size=64, num_epochs=3, ghost_batch=16, lr=0.05, weight_decay=5e-4, momentum=0.9,
              schedule="constant", checkpoint_every_s=3600.0, device="cpu", profile="smoke")
EVAL_BATCH = 32


def _cfg(**kw) -> RunConfig:
    """A config of ``FIELDS`` (built inside a test: RunConfig checks the model name, registered by a fixture)."""
    return RunConfig(**{**FIELDS, **kw})


def tiny_ghost_cnn(num_classes: int, scale_invariant: bool = True, width: int = 4, ghost_batch: int = 64, **kw):
    """conv(3->w, /2) - GBN (4-D) - ReLU - avgpool - GBN (2-D) - fixed linear: the scale-invariant ResNet's layer
    types, once each (every trainable weight is followed by a non-affine ghost BN)."""
    w = width
    model = nn.Sequential(
        nn.Conv2d(3, w, 3, stride=2, padding=1, bias=False), GhostBatchNorm(w, ghost_batch), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), GhostBatchNorm(w, ghost_batch), FixedLinear(w, num_classes))
    model.scale_invariant_names = [n for n, _ in model.named_parameters()]
    return model


@pytest.fixture
def tiny_model(monkeypatch):
    monkeypatch.setitem(_registry._MODELS, "tiny_ghost_cnn", tiny_ghost_cnn)


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def _compiles() -> tuple[int, int, int]:
    """(graphs captured by dynamo, frames compiled, AOT-autograd compilations) so far."""
    return (counters["stats"]["unique_graphs"], counters["frames"]["total"], counters["aot_autograd"]["total"])


class _CountingStore:
    """A stand-in ``Store`` (nothing stored, nothing resumed) recording the compile counters at every epoch end."""

    def __init__(self):
        self.seen: list[tuple[int, tuple]] = []

    def get(self, cfg):
        return None

    def load_checkpoint(self, cfg, map_location=None):
        return None

    def start(self, cfg):
        pass

    def log_epoch(self, cfg, rec):
        self.seen.append((rec["epoch"], _compiles()))

    def save_checkpoint(self, cfg, state):
        pass

    def finish(self, cfg, result):
        pass


def _assert_compiled_once(store: _CountingStore, epochs: int):
    """Exactly one graph (forward + backward of a full batch) was compiled, during epoch 1, and none after it."""
    assert sorted({e for e, _ in store.seen}) == list(range(1, epochs + 1))
    counts = {c for _, c in store.seen}
    assert len(counts) == 1, store.seen  # nothing compiled after epoch 1 (not the ragged batch, not evaluation)
    graphs, frames, aot = counts.pop()
    assert graphs == frames == aot == 1, (graphs, frames, aot)


def _assert_close_histories(ha, hb, rtol, keys=("train_loss", "test_loss", "weight_norm", "angular_update")):
    """Per-epoch losses, weight norms and angular updates agree to ``rtol`` (inductor's CPU kernels sum in another
    order, and the float32 differences grow with training)."""
    assert len(ha) == len(hb)
    for ra, rb in zip(ha, hb):
        assert ra.keys() == rb.keys()
        for k in keys:
            if k in ra:
                assert rb[k] == pytest.approx(ra[k], rel=rtol), (ra["epoch"], k, ra[k], rb[k])
    assert ha[-1]["train_loss"] < ha[0]["train_loss"]  # it did train


def _batch(rows, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 3, 32, 32, generator=g), torch.randint(0, 10, (rows,), generator=g)


# ---------------------------------------------------------------------------------------------- one step
def test_compiled_step_gradients_match_eager():
    """One ``StaticStep`` with the forward compiled (static shapes): the gradients and the ghost-BN running
    statistics of a full batch equal the eager ones to float32 rounding; the ragged batch (20 rows, ghost chunks
    [16, 4]) runs the eager model -- bit-identical to eager, and no second graph is compiled for it."""
    cfg = _cfg(compile=True)
    fast = train.FastPath(cfg, torch.device("cpu"))
    ref, net = train.build_model(cfg, 10), train.build_model(cfg, 10)
    forward = fast.prepare(net)

    def loss_through(model):
        def loss_fn(x, y):
            out = model(x)
            loss = F.cross_entropy(out, y)
            return loss, (loss.detach(),)
        return loss_fn

    step = train.StaticStep(loss_through(forward), train.trainable(net), list(net.buffers()), cfg.batch_size,
                            eager_loss_fn=loss_through(net), capture=False)
    assert ghost_chunk_sizes(20, cfg.ghost_batch) == [16, 4]
    for rows, tol in ((cfg.batch_size, 1e-5), (20, 0.0), (cfg.batch_size, 1e-5)):
        x, y = _batch(rows, seed=rows)
        (loss,) = step(x, y)
        ref_loss = F.cross_entropy(ref(x), y)
        for p in ref.parameters():
            p.grad = None
        ref_loss.backward()
        assert float(loss) == pytest.approx(float(ref_loss.detach()), rel=max(tol, 1e-7))
        for (name, pr), pc in zip(ref.named_parameters(), net.parameters()):
            if tol == 0.0:
                assert torch.equal(pc.grad, pr.grad), name
            else:
                torch.testing.assert_close(pc.grad, pr.grad, rtol=tol, atol=tol * float(pr.grad.abs().max()))
        for (name, br), bc in zip(ref.named_buffers(), net.buffers()):
            torch.testing.assert_close(bc, br, rtol=1e-5, atol=1e-6, msg=name)
    assert _compiles() == (1, 1, 1)


def test_compiled_stack_gradients_match_eager():
    """The same for ``fit_many``'s stacked model of 3 members: the compiled stack's flat gradient (all members, one
    buffer) equals the eager stack's to float32 rounding on a full batch, exactly on the ragged one."""
    cfgs = [_cfg(seed=s, lr=0.05 * (s + 1), compile=True) for s in range(3)]

    def stack(compiled):
        models = [train.build_model(c, 10) for c in cfgs]
        momenta = [[torch.zeros_like(p) for p in train.trainable(m)] for m in models]
        return batched._Stack(models, momenta, cfgs, batched._lr_table(cfgs, 3), compile=compiled)

    stacks = [stack(False), stack(True)]

    def loss_through(stack, net):
        def loss_fn(x, y):
            out = net(x).view(y.shape[0], stack.M, -1)
            losses = F.cross_entropy(out.transpose(1, 2), y, reduction="none").mean(0)
            return losses.sum(), (losses.detach(),)
        return loss_fn

    steps = [s.static_step(loss_through(s, s.forward), 64, eager_loss_fn=loss_through(s, s.net), capture=False)
             for s in stacks]
    for rows, tol in ((64, 1e-5), (20, 0.0)):
        x, _ = _batch(rows, seed=rows)
        x = x.repeat(1, 3, 1, 1)
        y = torch.randint(0, 10, (rows, 3), generator=torch.Generator().manual_seed(rows))
        (la,), (lb,) = (st(x, y) for st in steps)
        if tol == 0.0:
            assert torch.equal(la, lb) and torch.equal(stacks[0].flat_grad, stacks[1].flat_grad)
        else:
            torch.testing.assert_close(lb, la, rtol=1e-6, atol=0.0)
            ga, gb = stacks[0].flat_grad, stacks[1].flat_grad
            torch.testing.assert_close(gb, ga, rtol=tol, atol=tol * float(ga.abs().max()))
    assert _compiles() == (1, 1, 1)


# ---------------------------------------------------------------------------------------------- whole runs
NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.fixture
def deterministic(monkeypatch, device):
    """On CUDA: deterministic cuDNN kernels in the eager run (else two eager runs already drift apart)."""
    if device == "cuda":
        monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)


@pytest.mark.parametrize("model,device", [
    ("tiny_ghost_cnn", "cpu"), pytest.param("tiny_ghost_cnn", "cuda", marks=NO_CUDA),
    pytest.param("resnet18", "cpu", marks=pytest.mark.skipif(
        not SLOW, reason="compiles for ~2 min on 2 CPU cores; REPRO_SLOW_TESTS=1"))])
def test_fit_compile_matches_eager(model, device, deterministic):
    """``fit`` with compile=True, N = 148 (ragged last batch of 20), 3 epochs: the same history as the eager run
    to float32 rounding, and one graph compiled in epoch 1 (no recompilation for the ragged batch, evaluation or
    any later epoch)."""
    cfg = _cfg(model=model, device=device)
    ref = train.fit(cfg, progress=False, eval_batch_size=EVAL_BATCH)
    store = _CountingStore()
    got = train.fit(cfg.replace(compile=True), store=store, progress=False, eval_batch_size=EVAL_BATCH)
    assert got["status"] == "finished" and got["config"]["compile"] is True
    _assert_compiled_once(store, cfg.num_epochs)
    if model == "resnet18":
        # inductor's fp32 reductions leave ~2e-4 relative error in its one-step gradients (width 8, B = 128; eager:
        # 3e-6, both against float64, where compiled and eager agree to 2e-14), which three epochs amplify (to ~1 %
        # in the training loss); its test loss (eval mode, running statistics of 9 steps: ~30) amplifies them
        # further and is left out
        _assert_close_histories(ref["history"], got["history"], rtol=5e-2,
                                keys=("train_loss", "weight_norm", "angular_update"))
    else:
        _assert_close_histories(ref["history"], got["history"], rtol=1e-4 if device == "cpu" else 1e-3)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=NO_CUDA)])
def test_fit_many_compile_matches_eager(device, deterministic):
    """``fit_many`` of 3 members (different lr, weight decay, momentum, seeds) with compile=True: every member's
    history matches the eager stack's to float32 rounding, and the stack is compiled once, in epoch 1."""
    cfgs = [_cfg(seed=0, device=device), _cfg(seed=1, lr=0.1, weight_decay=1e-3, momentum=0.5, device=device),
            _cfg(seed=2, lr=0.02, nesterov=True, device=device)]
    ref = batched.fit_many(cfgs, progress=False, eval_batch_size=EVAL_BATCH)
    store = _CountingStore()
    got = batched.fit_many([c.replace(compile=True) for c in cfgs], store=store, progress=False,
                           eval_batch_size=EVAL_BATCH)
    _assert_compiled_once(store, cfgs[0].num_epochs)
    for ra, rb in zip(ref, got):
        assert rb["status"] == "finished"
        _assert_close_histories(ra["history"], rb["history"], rtol=1e-3)


def test_compile_without_a_cpu_compiler_trains_eagerly_with_a_warning(tiny_model, monkeypatch, fresh_dynamo):
    """No ``$CXX`` and no g++/c++/clang++ on the PATH: ``compile=True`` on the CPU warns once and runs the eager
    step (bit-identical history, nothing compiled) instead of failing inside inductor."""
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(train.shutil, "which", lambda name: None)
    assert train.cpu_compiler() is None
    cfg = _cfg(num_epochs=2)
    ref = train.fit(cfg, progress=False, eval_batch_size=EVAL_BATCH)
    with pytest.warns(RuntimeWarning, match="no C\\+\\+ compiler"):
        got = train.fit(cfg.replace(compile=True), progress=False, eval_batch_size=EVAL_BATCH)
    assert [h["train_loss"] for h in got["history"]] == [h["train_loss"] for h in ref["history"]]
    assert _compiles() == (0, 0, 0)


def test_cpu_compiler_prefers_cxx(monkeypatch):
    monkeypatch.setenv("CXX", "my-cxx")
    monkeypatch.setattr(train.shutil, "which", lambda name: f"/opt/bin/{name}" if name == "my-cxx" else None)
    assert train.cpu_compiler() == "/opt/bin/my-cxx"
