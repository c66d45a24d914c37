"""``lockstep.fit_lockstep`` (a group of runs, each member its own network, on its own CUDA stream or as a branch of
one CUDA graph per step) against separate ``train.fit`` runs, on the CPU.

On a CPU both engines run the same code as on a GPU without streams or graphs, and every member is *bit-identical*
to its ``fit`` run in float32 (weights, running statistics, every history value), bf16 autocast included -- a
stronger check than ``fit_many``'s float64 tolerance, because the members keep ``fit``'s dense convolutions. What
only a GPU runs is checked through every part a CPU can run: the ``onegraph`` step on the *meta* device (nothing a
CUDA graph capture forbids), and the engine's capture/replay control flow with a stand-in backend that warms up,
puts the state back, "captures" by tracing one call whose effects it undoes, and replays by calling the step again
and comparing its operator trace with the captured one (a Python value or a tensor that changes between replays
would be frozen into a real graph).
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from repro_lib import lockstep, train
from repro_lib.config import RunConfig
from repro_lib.store import Store

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny tensors

BASE = RunConfig(model="resnet18", scale_invariant=True, width=4, dataset="cifar10", synthetic=True, n=100,
                 n_test=20, batch_size=32, num_epochs=3, ghost_batch=24, schedule="cosine", device="cpu",
                 profile="smoke", cuda_graphs=True)
# N = 100, B = 32: three full batches and a ragged one of 4 per epoch. Three different cells and one that diverges in
# its first epoch (ηλ = 1e30: the weights overflow float32 within two steps)
CONFIGS = [BASE.replace(lr=0.1, weight_decay=5e-4, momentum=0.9, seed=0),
           BASE.replace(lr=0.3, weight_decay=1e-3, momentum=0.5, seed=1, schedule="step"),
           BASE.replace(lr=0.05, weight_decay=0.0, momentum=0.0, seed=2),
           BASE.replace(lr=1.0, weight_decay=1e30, momentum=0.9, seed=3)]
SKIP = ("seconds", "group_size")  # wall time; the group's size (fit_many's key)


def _fits(cfgs):
    """Separate ``fit`` runs; returns (results, final models)."""
    build, models = train.build_model, []

    def capture(cfg, num_classes):
        models.append(build(cfg, num_classes))
        return models[-1]

    train.build_model = capture
    try:
        refs = [train.fit(c, progress=False) for c in cfgs]
    finally:
        train.build_model = build
    return refs, models


def _assert_same(ref: dict, model, res: dict) -> None:
    """Bit-identical: state dict, every history value, the result's fields."""
    assert ref["status"] == res["status"] and ref["diverged_epoch"] == res["diverged_epoch"]
    sd, got = model.state_dict(), res["state_dict"]
    assert set(sd) == set(got)
    for k, v in sd.items():
        assert torch.equal(v, got[k]) or (v.isnan().any() and torch.equal(v.isnan(), got[k].isnan())), k
    assert len(ref["history"]) == len(res["history"])
    for hr, hm in zip(ref["history"], res["history"]):
        assert {k for k in hm if k not in SKIP} == {k for k in hr if k not in SKIP}
        for k in hr:
            if k not in SKIP:
                assert hr[k] == hm[k] or (isinstance(hr[k], float) and math.isnan(hr[k]) and math.isnan(hm[k])), \
                    (hr["epoch"], k, hr[k], hm[k])
    for k in ("test_acc", "test_loss", "train_loss", "epochs_run", "tuning_factor", "data", "config"):
        assert ref[k] == res[k] or (math.isnan(ref[k]) and math.isnan(res[k])), k


@pytest.fixture(scope="module")
def fits(one_thread):
    return _fits(CONFIGS)


@pytest.mark.parametrize("engine", lockstep.ENGINES)
def test_members_equal_separate_fits_bitwise(fits, engine):
    """Four members (one diverges in epoch 1 and leaves the group): each equals its own ``fit`` run bit for bit."""
    refs, models = fits
    res = lockstep.fit_lockstep(CONFIGS, engine=engine, progress=False, keep_states=True)
    for ref, model, r in zip(refs, models, res):
        _assert_same(ref, model, r)
    assert [r["status"] for r in res] == ["finished"] * 3 + ["diverged"]
    assert res[3]["diverged_epoch"] == 1 and [h["group_size"] for h in res[0]["history"]] == [4, 3, 3]
    assert len({round(r["history"][-1]["angular_update"], 6) for r in res[:3]}) == 3  # the runs differ


@pytest.mark.parametrize("engine", lockstep.ENGINES)
def test_bf16_members_equal_fit(engine):
    cfgs = [c.replace(precision="bf16", num_epochs=2) for c in CONFIGS[:2]]
    refs, models = _fits(cfgs)
    res = lockstep.fit_lockstep(cfgs, engine=engine, progress=False, keep_states=True)
    for ref, model, r in zip(refs, models, res):
        _assert_same(ref, model, r)


def test_streams_without_graphs_equals_eager_fit():
    """``cuda_graphs=False``: the streams engine takes ``fit``'s eager backward (``loss.backward()``)."""
    cfgs = [c.replace(cuda_graphs=False, num_epochs=2, nesterov=True) for c in CONFIGS[:2]]
    refs, models = _fits(cfgs)
    res = lockstep.fit_lockstep(cfgs, engine="streams", progress=False, keep_states=True)
    for ref, model, r in zip(refs, models, res):
        _assert_same(ref, model, r)


def test_flat_sgd_is_torch_sgd_in_channels_last():
    """``_FlatSGD`` re-points a channels_last network's weights into one flat buffer without changing their
    strides or values, and its step equals ``torch.optim.SGD``'s bit for bit (momentum, Nesterov, weight decay)."""
    for momentum, nesterov, wd in ((0.9, False, 5e-4), (0.9, True, 1e-3), (0.0, False, 0.0)):
        cfg = CONFIGS[0].replace(momentum=momentum, nesterov=nesterov, weight_decay=wd, lr=0.4)
        ref = train.build_model(cfg, 10).to(memory_format=torch.channels_last)
        net = train.build_model(cfg, 10).to(memory_format=torch.channels_last)
        strides = {n: p.stride() for n, p in net.named_parameters()}
        sgd = lockstep._FlatSGD(cfg, net, channels_last=True)
        assert {n: p.stride() for n, p in net.named_parameters()} == strides
        assert all(p.untyped_storage().data_ptr() == sgd.flat.untyped_storage().data_ptr() for p in sgd.params)
        opt = torch.optim.SGD([p for p in ref.parameters() if p.requires_grad], lr=0.4, momentum=momentum,
                              nesterov=nesterov, weight_decay=wd, foreach=True)
        g = torch.Generator().manual_seed(1)
        for _ in range(3):
            grads = [torch.randn(p.shape, generator=g) for p in sgd.params]
            for p, gr in zip((p for p in ref.parameters() if p.requires_grad), grads):
                p.grad = gr.clone()
            opt.step()
            with torch.no_grad():
                for dst, gr in zip(sgd.grads, grads):
                    dst.copy_(gr)
            sgd.step(torch.tensor(-0.4))
        for (n, a), b in zip(ref.named_parameters(), net.parameters()):
            assert torch.equal(a.detach(), b.detach()), n


@pytest.mark.parametrize("engine", lockstep.ENGINES)
def test_resume_and_checkpoints_interchangeable_with_fit(tmp_path, killed_at_epoch, engine):
    """Killed at epoch 2, the group resumes from the checkpoints of epoch 1 and ends bit-identical to an
    uninterrupted group; a member's checkpoint resumed by ``fit`` ends as its ``fit`` run."""
    cfgs = CONFIGS[:2]
    full = lockstep.fit_lockstep(cfgs, engine=engine, progress=False, keep_states=True)
    store = Store(tmp_path / engine)
    with killed_at_epoch(2):
        lockstep.fit_lockstep(cfgs, engine=engine, store=store, progress=False)
    assert all(store.load_checkpoint(c)["epoch"] == 1 for c in cfgs)
    # member 1 goes on alone in fit; member 0 in the engine
    alone = train.fit(cfgs[1], store=store, progress=False)
    resumed = lockstep.fit_lockstep(cfgs, engine=engine, store=store, progress=False)
    for a, b in zip(full, [resumed[0], alone]):
        assert [{k: v for k, v in h.items() if k not in SKIP} for h in a["history"]] == \
               [{k: v for k, v in h.items() if k not in SKIP} for h in b["history"]]
    assert store.get(cfgs[0])["status"] == "finished"


# ---------------------------------------------------------------- the CUDA control flow, on a CPU
class _Trace(TorchDispatchMode):
    """Every ATen call of a region: (operator, non-tensor arguments, the persistent tensors it reads -- storage
    address, offset, shape and strides of each input tensor that no earlier call of the region produced)."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple] = []
        self._made: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        flat_in = tree_flatten((args, kwargs))[0]
        inputs = tuple((t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride())
                       for t in flat_in if isinstance(t, torch.Tensor)
                       and t.untyped_storage().data_ptr() not in self._made)
        scalars = tuple(repr(a) for a in flat_in if not isinstance(a, torch.Tensor))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._made.add(t.untyped_storage().data_ptr())
        self.calls.append((func.overloadpacket.__name__, scalars, inputs))
        return out


class _FakeCuda(lockstep._Host):
    """The engine's CUDA control flow on a CPU: ``capture`` warms up (``WARMUP`` calls), puts the state back, traces
    one call and undoes it (a capture runs nothing); ``replay`` calls the step under a trace and requires the trace
    of the capture. Streams are no-ops; forks and joins are counted."""

    cuda = True

    def __init__(self):
        self.captures = self.replays = self.forks = self.joins = 0

    def fork(self):
        self.forks += 1

    def join(self):
        self.joins += 1

    def capture(self, fn, state):
        saved = [t.clone() for t in state]
        for _ in range(lockstep.WARMUP):
            fn()
        for t, s in zip(state, saved):
            t.copy_(s)
        with _Trace() as tr:
            fn()
        for t, s in zip(state, saved):
            t.copy_(s)
        self.captures += 1
        return fn, tr.calls

    def replay(self, graph):
        fn, calls = graph
        with _Trace() as tr:
            fn()
        assert tr.calls == calls, "the step's operators, arguments or persistent tensors changed between replays"
        self.replays += 1


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_onegraph_capture_and_replay_control_flow(monkeypatch, fits, precision):
    """With the stand-in backend: graphs for the full and the ragged batch, captured again when a member leaves;
    every replay is the captured step; and the run ends bit-identical to ``fit`` (so warm-up and capture leave
    no trace in it)."""
    backends = []

    def fake(device, members):
        backends.append(_FakeCuda())
        return backends[-1]

    monkeypatch.setattr(lockstep, "_backend", fake)
    cfgs = [c.replace(precision=precision) for c in CONFIGS]
    refs, models = fits if precision == "fp32" else _fits(cfgs)
    res = lockstep.fit_lockstep(cfgs, engine="onegraph", progress=False, keep_states=True)
    for ref, model, r in zip(refs, models, res):
        _assert_same(ref, model, r)
    (be,) = backends
    assert be.captures == 4  # full + ragged for four members, again for the three left after epoch 1
    assert be.replays == 3 * 4  # every step of the three epochs is a replay
    assert be.forks >= be.joins > 0


def test_onegraph_step_is_capture_safe_on_meta():
    """The ``onegraph`` step of a 2-member group on the *meta* device under a log of every ATen call (forward,
    backward, SGD step, sums): no host read-back, no tensor made from Python data, no tensor on another device."""
    host = {"_local_scalar_dense", "item", "is_nonzero", "equal", "allclose", "nonzero", "masked_select", "unique",
            "_unique2", "bincount", "lift_fresh", "lift_fresh_copy", "_assert_async"}
    meta = torch.device("meta")
    cfgs = [CONFIGS[0], CONFIGS[1].replace(schedule="cosine", nesterov=True)]
    train_data, _ = train.load_data(cfgs[0])
    fast = train.FastPath(cfgs[0], meta)
    runs = [lockstep._Run(c, train_data, meta, fast) for c in cfgs]
    eng = lockstep._OneGraph(runs, fast, lockstep._Host())
    b = 32
    eng.static[b] = (torch.empty(2 * b, 3, 32, 32, device=meta), torch.zeros(2 * b, dtype=torch.long, device=meta))
    eng.body(b)  # as the warm-up does
    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            devs = {t.device.type for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)}
            seen.append((func.overloadpacket.__name__, devs))
            return out

    with Log():
        eng.body(b)
    ops = {op for op, _ in seen}
    assert {"convolution_backward", "_foreach_copy_", "addcmul_"} <= ops
    assert [(op, d) for op, d in seen if op in host or d - {"meta"}] == []


def test_rejections():
    with pytest.raises(ValueError, match="engine"):
        lockstep.fit_lockstep(CONFIGS[:1], engine="vmap", progress=False)
    with pytest.raises(ValueError, match="onegraph"):
        lockstep.fit_lockstep([CONFIGS[0].replace(optimizer="adamw", weight_decay_mode="decoupled")],
                              engine="onegraph", progress=False)
    with pytest.raises(ValueError, match="width"):
        lockstep.fit_lockstep([CONFIGS[0], CONFIGS[1].replace(width=8)], engine="streams", progress=False)
