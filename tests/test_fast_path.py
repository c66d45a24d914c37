"""The GPU fast-path flags of ``RunConfig``: they change speed, not the optimization.

``channels_last`` and ``compile`` act on CUDA / any device; CPU kernels also accept channels_last tensors, so the
layout logic of the stacked model (``batched._Stack``: 4-D weights as NHWC-strided views of one flat buffer) is
checked here on CPU in float64 against the default layout. ``compile=True`` (static-shape graphs for full batches,
the ragged last batch eagerly) is tested in ``tests/test_compile.py``.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from repro_lib import batched, train
from repro_lib.config import RunConfig
from repro_lib.data import TensorBatches
from repro_lib.store import Store

BASE = RunConfig(model="resnet18", scale_invariant=True, width=4, dataset="cifar10", synthetic=True, n=128,
                 n_test=20, batch_size=64, num_epochs=2, ghost_batch=32, device="cpu", profile="smoke")

pytestmark = pytest.mark.usefixtures("one_thread")


def test_hash_flags():
    """Layout/scheduling flags are not part of the run's identity; bf16 is (it changes the arithmetic), and adding
    ``precision`` left every fp32 hash as it was (``test_config`` pins one)."""
    h = BASE.hash
    for k, v in dict(channels_last=False, cudnn_benchmark=False, compile=True, cuda_graphs=True,
                     checkpoint_every_s=60.0, eval_every=0).items():
        assert BASE.replace(**{k: v}).hash == h, k
    assert BASE.replace(precision="bf16").hash != h
    assert "precision" not in str(BASE.hash)  # (hash is hex) -- the fp32 dict is the pre-precision one:
    assert RunConfig().hash == "97589b47636d8de3"
    for bad in (dict(precision="fp16"), dict(eval_every=-1), dict(checkpoint_every_s=-1.0),
                dict(cuda_graphs=True, compile=True)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            BASE.replace(**bad)


def test_eval_interval_auto():
    """eval_every=0: every ceil(n_test / n_train) epochs (N = 3125 with 10k test images: every 4th epoch)."""
    cfg = BASE.replace(eval_every=0)
    assert cfg.eval_interval(3125, 10000) == 4
    assert cfg.eval_interval(50000, 10000) == 1
    assert BASE.replace(eval_every=5).eval_interval(3125, 10000) == 5


def test_auto_eval_schedule_in_fit():
    """``fit`` with eval_every=0 evaluates every ceil(n_test/n_train) epochs and always at the last."""
    cfg = BASE.replace(n=64, n_test=150, num_epochs=5, eval_every=0, width=2)
    res = train.fit(cfg, progress=False)
    assert [("test_acc" in h) for h in res["history"]] == [False, False, True, False, True]


def test_checkpoint_clock():
    clock = train.CheckpointClock(0.0)
    assert clock.due() and clock.due()
    slow = train.CheckpointClock(3600.0)
    assert not slow.due()
    slow.last -= 3601
    assert slow.due() and not slow.due()


def test_checkpoint_interval_in_fit(tmp_path, monkeypatch):
    """checkpoint_every_s=3600: no checkpoint is written mid-run (the run still finishes and is stored);
    the default writes one at every epoch boundary but the last."""
    saved = []
    real = Store.save_checkpoint
    monkeypatch.setattr(Store, "save_checkpoint", lambda self, cfg, st: (saved.append(st["epoch"]), real(self, cfg, st)))
    cfg = BASE.replace(n=64, num_epochs=3, width=2)
    train.fit(cfg.replace(checkpoint_every_s=3600.0), store=Store(tmp_path / "a"), progress=False)
    assert saved == []
    train.fit(cfg, store=Store(tmp_path / "b"), progress=False)
    assert saved == [1, 2]
    assert Store(tmp_path / "b").status(cfg) == "finished"


def test_bf16_autocast_keeps_fp32_master_weights():
    """precision='bf16': the forward runs in bfloat16 (logits differ from fp32 at bf16 rounding), the weights,
    gradients and momentum stay float32, and training ends close to the fp32 run."""
    cfg = BASE.replace(n=64, num_epochs=2, width=4, lr=0.05)
    fast = train.FastPath(cfg.replace(precision="bf16"), torch.device("cpu"))
    model = train.build_model(cfg, 10)
    x = torch.randn(8, 3, 32, 32)
    with fast.autocast():
        out = model(fast.inputs(x))
        loss = F.cross_entropy(out, torch.zeros(8, dtype=torch.long))
    assert out.dtype == torch.bfloat16 and loss.dtype == torch.float32
    loss.backward()
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())
    ref = train.fit(cfg, progress=False)
    bf = train.fit(cfg.replace(precision="bf16"), progress=False)
    assert bf["status"] == "finished"
    a, b = ref["history"][-1]["train_loss"], bf["history"][-1]["train_loss"]
    assert a != b and abs(a - b) < 0.05 * abs(a)


def _stack(cfgs, channels_last):
    models = [train.build_model(c, 10) for c in cfgs]
    bufs = [[torch.randn_like(p) for p in m.parameters()] for m in models]  # non-zero momentum: layout matters
    return batched._Stack(models, bufs, cfgs, batched._lr_table(cfgs, 2), channels_last=channels_last)


def test_channels_last_stack_equals_default_layout():
    """The stacked model with NHWC-strided weights (views of the flat buffer in NHWC order) takes the same SGD steps
    as the default layout: parameters, momentum buffers and member state dicts agree (float64) after two steps,
    and the 4-D weights really are channels_last views of the flat buffer."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        cfgs = [BASE.replace(seed=s, lr=0.1 * (s + 1), weight_decay=1e-3) for s in range(2)]
        tr, _ = train.load_data(cfgs[0])
        stacks = [_stack(cfgs, False), _stack(cfgs, True)]
        torch.manual_seed(0)
        w = stacks[1].params[0]
        assert w.dim() == 4 and w.is_contiguous(memory_format=torch.channels_last) and not w.is_contiguous()
        assert w.untyped_storage().data_ptr() == stacks[1].flat.untyped_storage().data_ptr()
        for step in range(2):
            xs, ys = zip(*(next(TensorBatches(tr, 64, train=True, seed=c.seed).epoch(step)) for c in cfgs))
            x = torch.cat(xs, 1)
            for st in stacks:
                xin = x.contiguous(memory_format=torch.channels_last) if st.cl else x
                out = st.net(xin).view(64, 2, -1)
                F.cross_entropy(out.transpose(1, 2), torch.stack(ys, 1), reduction="none").mean(0).sum().backward()
                st.sgd_step(step)
        a, b = stacks
        for pa, pb in zip(a.params, b.params):
            assert torch.allclose(pa, pb, rtol=1e-10, atol=1e-12)
        for m in range(2):
            for ba, bb in zip(a.member_bufs(m), b.member_bufs(m)):
                assert torch.allclose(ba, bb, rtol=1e-10, atol=1e-12)
            sa, sb = a.member_state_dict(m), b.member_state_dict(m)
            for k in sa:
                assert sb[k].is_contiguous() and torch.allclose(sa[k], sb[k], rtol=1e-10, atol=1e-12), k
        assert not torch.allclose(a.params[0], _stack(cfgs, False).params[0])  # the steps did move the weights
    finally:
        torch.set_default_dtype(old)


def test_fit_many_compile_flag_is_shared_field():
    """Fast-path flags must agree within a stacked group (one setting per stacked model)."""
    with pytest.raises(ValueError, match="compile"):
        batched.fit_many([BASE, BASE.replace(seed=1, compile=True)], progress=False)
    assert batched.group_configs([BASE, BASE.replace(seed=1, precision="bf16")]) == [[0], [1]]


def test_memory_budget_grouping():
    """group_configs caps a group at budget // member_bytes (never below one run); member_bytes grows with B and
    width, and with cuda_graphs by the ragged last batch's activations; 'auto' is no limit on CPU."""
    cfgs = [BASE.replace(seed=s) for s in range(10)]
    one = batched.member_bytes(BASE)
    assert batched.member_bytes(BASE.replace(batch_size=128)) > one
    assert batched.member_bytes(BASE.replace(width=8)) > one
    graphed = BASE.replace(n=150, batch_size=64, cuda_graphs=True)  # the graph's batch + an eager one of 22 images
    eager = batched.member_bytes(graphed.replace(cuda_graphs=False))
    assert eager < batched.member_bytes(graphed) < batched.member_bytes(graphed.replace(batch_size=128))
    assert batched.member_bytes(graphed.replace(n=128)) == eager  # no ragged batch: nothing beside the graph
    assert [len(g) for g in batched.group_configs(cfgs, 16, int(3.5 * one))] == [3, 3, 2, 2]  # cap 3, balanced
    assert [len(g) for g in batched.group_configs(cfgs, 4, int(100 * one))] == [4, 3, 3]
    assert sum(batched.group_configs(cfgs, 4), []) == list(range(10))  # every run once, in order
    assert [len(g) for g in batched.group_configs(cfgs, 16, one // 2)] == [1] * 10
    assert [len(g) for g in batched.group_configs(cfgs, 16)] == [10]  # device cpu: "auto" = no limit
    with pytest.raises(ValueError, match="memory_budget_bytes"):
        batched.group_configs(cfgs, 16, 0)


def test_gpu_profiles_use_the_fast_path():
    """gpu/paper profiles: stacked groups of 16 (DenseNet alone), auto eval interval, checkpoint once a minute,
    fp32, CUDA graphs; run_sweep takes the group size from the plan; the GPU-hour estimate is cheaper when stacked."""
    from repro_lib import profiles
    from repro_lib.papers.yun2022 import grids as E

    p = E.get("yun2022_table2").plan("gpu")
    c = p.cfg.iloc[0]
    assert p.attrs["max_members"] == 16 and c.eval_every == 0 and c.checkpoint_every_s == 60.0
    assert c.precision == "fp32" and c.cuda_graphs and not c.compile
    assert not E.get("yun2022_table2").plan("cpu").cfg.iloc[0].cuda_graphs
    # an explicit compile=True replaces the profile's graphs (RunConfig rejects the two together); an explicit
    # cuda_graphs=False turns them off; neither changes the run's hash
    assert not E.get("yun2022_table2").plan("gpu", compile=True).cfg.iloc[0].cuda_graphs
    assert not E.get("yun2022_table2").plan("gpu", cuda_graphs=False).cfg.iloc[0].cuda_graphs
    assert E.get("yun2022_table2").plan("gpu", compile=True).cfg.iloc[0].hash == c.hash
    with pytest.raises(ValueError, match="cuda_graphs"):
        E.get("yun2022_table2").plan("gpu", compile=True, cuda_graphs=True)
    assert E.get("yun2022_table8").plan("gpu").attrs["max_members"] == 1
    assert profiles.estimate_gpu_hours(p) < profiles.estimate_gpu_hours(p, max_members=1)
    assert profiles.seconds_per_image(128) > profiles.seconds_per_image(512) > profiles.seconds_per_image(1024)
    assert profiles.seconds_per_image(64) > profiles.seconds_per_image(128)


def test_run_sweep_takes_group_size_from_plan():
    import pandas as pd

    from repro_lib.runs.sweep import run_sweep

    plan = pd.DataFrame({"cfg": [BASE.replace(n=64, num_epochs=1, width=2, seed=s) for s in range(2)]})
    plan.attrs["max_members"] = 2
    res = run_sweep(plan, progress=False)
    assert [h[0]["group_size"] for h in res["history"]] == [2, 2]


def test_compile_flag_raises_the_recompile_limit():
    """compile=True: every GhostBatchNorm shares one forward, so dynamo needs more than its default 8 graphs per
    code object; FastPath raises the limit (else it silently falls back to eager, as measured on the H200)."""
    import torch._dynamo.config as dynamo_config

    old = dynamo_config.recompile_limit
    try:
        dynamo_config.recompile_limit = 8
        train.FastPath(BASE, torch.device("cpu"))
        assert dynamo_config.recompile_limit == 8
        train.FastPath(BASE.replace(compile=True), torch.device("cpu"))
        assert dynamo_config.recompile_limit >= 64
    finally:
        dynamo_config.recompile_limit = old


# ---------------------------------------------------------------------------------------------- cuda_graphs
def _same_history(ha, hb):
    """Equal records, bit for bit (NaN equal to NaN), apart from wall-clock seconds."""
    assert len(ha) == len(hb)
    for ra, rb in zip(ha, hb):
        assert ra.keys() == rb.keys()
        for k in ra:
            if k != "seconds":
                assert ra[k] == rb[k] or (ra[k] != ra[k] and rb[k] != rb[k]), (k, ra[k], rb[k])


@pytest.mark.parametrize("optimizer,scale_invariant", [("sgd", True), ("sgdp", True), ("sgd", False)])
def test_static_step_fit_is_bitwise_eager(optimizer, scale_invariant):
    """``cuda_graphs=True`` on CPU runs every batch through ``StaticStep``'s static buffers and persistent gradient
    tensors (no capture): every history value (losses, accuracies, Δθ, norms) is bit-identical to the eager loop,
    with a ragged last batch (N = 150, B = 64), torch.optim.SGD and our SGDP, and the unmodified ResNet-18
    (affine BatchNorm, trainable classifier; Yun et al. Tables 7/11)."""
    cfg = BASE.replace(n=150, optimizer=optimizer, lr=0.1, weight_decay=5e-4, scale_invariant=scale_invariant,
                       weight_decay_mode="coupled" if optimizer == "sgd" else "decoupled")
    a = train.fit(cfg, progress=False)
    b = train.fit(cfg.replace(cuda_graphs=True), progress=False)
    _same_history(a["history"], b["history"])
    assert a["history"][-1]["angular_update"] > 0


def test_static_step_fit_many_is_bitwise_eager():
    """The same for ``fit_many`` (gradients as views of one flat buffer read by the stacked SGD step), including a
    member that diverges in epoch 2 (the stack is rebuilt with a new StaticStep) and a ragged last batch."""
    cfgs = [BASE.replace(n=150, lr=0.1, weight_decay=5e-4, momentum=0.9, seed=0),
            BASE.replace(n=150, lr=0.3, weight_decay=1e-3, momentum=0.5, seed=1, nesterov=True),
            BASE.replace(n=150, lr=1.0, weight_decay=1e30, momentum=0.9, seed=2)]
    a = batched.fit_many(cfgs, progress=False, keep_states=True)
    b = batched.fit_many([c.replace(cuda_graphs=True) for c in cfgs], progress=False, keep_states=True)
    assert [r["status"] for r in b] == ["finished", "finished", "diverged"]
    for ra, rb in zip(a, b):
        assert ra["status"] == rb["status"] and ra["diverged_epoch"] == rb["diverged_epoch"]
        _same_history(ra["history"], rb["history"])
        for k in ra["state_dict"]:
            assert torch.equal(ra["state_dict"][k], rb["state_dict"][k]) or ra["status"] == "diverged", k


def test_static_step_warm_up_leaves_the_run_where_it_was():
    """The pre-capture warm-up runs forward + backward three times (which moves the ghost-BN running statistics
    and batch counters), then restores every buffer; parameters are never touched."""
    torch.manual_seed(0)
    model = train.build_model(BASE, 10)
    x, y = torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))

    def loss_fn(xb, yb):
        loss = F.cross_entropy(model(xb), yb)
        return loss, (loss.detach(),)

    step = train.StaticStep(loss_fn, [p for p in model.parameters() if p.requires_grad], list(model.buffers()),
                            64)
    step(x, y)
    before = copy.deepcopy(model.state_dict())
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    step._run(step.x, step.y)  # what one unrestored warm-up iteration would leave
    assert not torch.equal(model.state_dict()["bn1.running_mean"], before["bn1.running_mean"])
    model.load_state_dict(before)
    step.warm_up()
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert [p.grad for p in model.parameters() if p.requires_grad] == grads  # the same persistent tensors
    with pytest.raises(RuntimeError, match="no gradient"):  # a parameter outside the loss cannot be reproduced
        extra = torch.nn.Parameter(torch.zeros(3))
        train.StaticStep(loss_fn, [extra, *step.params], [], 64)(x, y)


def test_stacked_batches_equal_member_batches():
    """``fit_many`` builds the M members' batches with one gather over their concatenated training sets; every
    member's images and labels are bit-identical to its own ``TensorBatches`` (different seeds = different
    class-balanced subsets, a shared subset, augmentation on and off)."""
    from repro_lib.batched import _StackedBatches

    for augment in (True, False):
        cfgs = [BASE.replace(n=100, seed=s, augment=augment) for s in (0, 1, 0)]
        trains = [train.load_data(c)[0] for c in cfgs]
        refs = [TensorBatches(t, 32, train=True, augment=augment, seed=c.seed) for t, c in zip(trains, cfgs)]
        mine = [TensorBatches(t, 32, train=True, augment=augment, seed=c.seed) for t, c in zip(trains, cfgs)]
        feed = _StackedBatches(mine)
        for epoch in (0, 2):
            for active in ([0, 1, 2], [2, 0]):
                got = list(feed.epoch(epoch, active))
                want = list(zip(*(r.epoch(epoch) for r in (refs[a] for a in active))))
                assert len(got) == len(want) == 4
                for (x, y), w in zip(got, want):
                    b = len(w[0][1])
                    assert torch.equal(x, torch.stack([t[0] for t in w], 1).reshape(b, -1, 32, 32))
                    assert torch.equal(y, torch.stack([t[1] for t in w], 1))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graph capture needs a CUDA device")
def test_cuda_graph_capture_matches_eager_on_cuda(monkeypatch):
    """On CUDA with deterministic cuDNN kernels, the captured-and-replayed step is the eager step, bit for bit:
    equal per-epoch training losses and angular updates for ``fit`` and ``fit_many`` (the replay runs the very
    kernels the eager step runs). Non-deterministic kernels (the default) make any two runs drift apart -- one
    step differs by ~5e-7 relative in the gradients, a few epochs by percents in the loss (H200:
    ``benchmarks/check_graphs.py``) -- so the comparison is made deterministic rather than loose."""
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    cfg = BASE.replace(device="cuda", n=150, num_epochs=2, cudnn_benchmark=False)
    a = train.fit(cfg, progress=False)["history"]
    b = train.fit(cfg.replace(cuda_graphs=True), progress=False)["history"]
    assert [h["train_loss"] for h in a] == [h["train_loss"] for h in b]
    assert [h["angular_update"] for h in a] == [h["angular_update"] for h in b]
    cfgs = [cfg.replace(seed=s, lr=0.05 * (s + 1)) for s in range(3)]
    ma = batched.fit_many(cfgs, progress=False)
    mb = batched.fit_many([c.replace(cuda_graphs=True) for c in cfgs], progress=False)
    assert [[h["train_loss"] for h in r["history"]] for r in ma] == [[h["train_loss"] for h in r["history"]]
                                                                      for r in mb]


# ---------------------------------------------------------------- what a CUDA graph capture forbids, checked on CPU
# Operators that read device memory back to the host (or produce data-dependent shapes) and so cannot run inside a
# CUDA graph capture, and ``lift_fresh`` (a tensor made from host data, i.e. ``torch.tensor(...)``: on CUDA a
# pageable host-to-device copy during the capture).
_HOST_OPS = {"_local_scalar_dense", "item", "is_nonzero", "equal", "allclose", "nonzero", "masked_select",
             "unique", "_unique", "_unique2", "unique_consecutive", "unique_dim", "bincount", "lift_fresh",
             "lift_fresh_copy", "histc", "_assert_async"}


_READ_BACK = _HOST_OPS - {"lift_fresh", "lift_fresh_copy"}


class _OpLog(TorchDispatchMode):
    """Every ATen operator a region runs (forward and the autograd backward), with its tensors' devices."""

    def __init__(self):
        super().__init__()
        self.ops: list[tuple[str, set]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        devices = {(t.device.type, t.dim()) for t in tree_flatten((args, kwargs, out))[0]
                   if isinstance(t, torch.Tensor)}
        self.ops.append((func.overloadpacket.__name__, devices))
        return out

    def read_backs(self) -> list[tuple[str, set]]:
        """Operators that wait for a device: a read-back of a non-CPU tensor (a CPU scalar's ``.item()`` is not)."""
        return [(op, devs) for op, devs in self.ops if op in _READ_BACK and any(d != "cpu" for d, _ in devs)]

    def hazards(self, device_type: str) -> list[tuple[str, set]]:
        return [(op, devs) for op, devs in self.ops
                if op in _HOST_OPS or any(d != device_type for d, _ in devs)]


class _HostData(TorchFunctionMode):
    """Tensors made from Python data (``torch.tensor``, ``as_tensor``, ``new_tensor``, ``from_numpy``) directly on
    a device: a blocking host-to-device copy on a GPU, forbidden in a capture. (Made on the meta device they
    dispatch no ATen operator, so :class:`_OpLog` alone would not see them.)"""

    NAMES = {"tensor", "as_tensor", "asarray", "new_tensor", "from_numpy"}

    def __init__(self):
        super().__init__()
        self.made: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        data = args[1] if name == "new_tensor" else (args[0] if args else None)
        if (name in self.NAMES and not isinstance(data, torch.Tensor) and isinstance(out, torch.Tensor)
                and out.device.type != "cpu"):
            self.made.append(name)
        return out


def _meta_training_step(cfg: RunConfig, members: int):
    """One training step of ``fit`` (``members == 1``: the model, ``StaticStep``, the config's optimizer) or of
    ``fit_many`` (the real ``batched._Stack`` of ``members`` runs and its stacked SGD step) on the meta device:
    returns ``(forward_backward, optimizer_step)``, two functions of no arguments."""
    cfgs = [cfg.replace(seed=s, lr=0.1 * (s + 1)) for s in range(members)]
    nets = [train.build_model(c, 10).to("meta").train() for c in cfgs]
    x = torch.empty(64, 3 * members, 32, 32, device="meta")
    y = torch.zeros(64, members, dtype=torch.long, device="meta")
    if members == 1:
        net, opt = nets[0], train.build_optimizer(cfg, nets[0])
        params, buffers, update = train.trainable(net), list(net.buffers()), opt.step
        static = lambda loss_fn: train.StaticStep(loss_fn, params, buffers, 64)  # noqa: E731
    else:
        stack = batched._Stack(nets, [[torch.zeros_like(p) for p in train.trainable(n)] for n in nets], cfgs,
                               batched._lr_table(cfgs, 2))
        net, update = stack.forward, lambda: stack.sgd_step(1)
        static = lambda loss_fn: stack.static_step(loss_fn, 64)  # noqa: E731

    def loss_fn(xb, yb):  # fit_many's loss; for one member, fit's
        out = net(xb).view(yb.shape[0], members, -1)
        losses = F.cross_entropy(out.transpose(1, 2), yb, reduction="none").mean(0)
        return losses.sum(), (losses.detach(), (out.detach().argmax(2) == yb).sum(0))

    step = static(loss_fn)
    return lambda: step(x, y), update


@pytest.mark.parametrize("name,scale_invariant,optimizer,members", [
    ("resnet18", True, "sgd", 1), ("resnet18", True, "adamw", 1), ("resnet18", False, "sgd", 1),
    ("preresnet32", True, "sgd", 1), ("densenet100", True, "sgd", 1), ("vgg16_bn", False, "lars", 1),
    ("vgg16_bn", False, "scale_amended_sgd", 1), ("resnet18", True, "sgd", 3), ("resnet18", False, "sgd", 3)])
def test_training_step_is_capture_safe(name, scale_invariant, optimizer, members):
    """What ``StaticStep`` captures as a CUDA graph (forward, loss, ``autograd.grad``, the copy into the persistent
    gradients) contains no operator a capture forbids, and the eager optimizer step after it never waits for the
    device -- checked without a GPU: the step runs on the *meta* device (shapes only, where a data-dependent shape
    is an error) under a dispatch-mode log of every ATen call, forward and backward. In the captured part, a tensor
    on another device (a CPU tensor made inside ``forward``: a host-to-device copy on CUDA), a host read-back
    (``.item()``, ``nonzero``, ``bool(t)``, ``repeat_interleave`` without ``output_size``) or a tensor made from
    Python data would show up here; in the optimizer step, a read-back or a tensor made from Python data on the
    device (a blocking copy; CPU scalars such as torch.optim's step counters are fine there). The first step (the warm-up's role on CUDA: it fills the ghost-BN chunk-weight cache)
    is not logged, the second is. Members > 1: ``fit_many``'s ``_Stack`` (grouped convolutions,
    ``StackedLinear``, the flat-buffer SGD step). Not SGDP/AdamP: their Eq. 11 decision (channel-wise, layer-wise
    or no projection) selects a Python branch and is read back once per step by design
    (``optim.adamp.scale_invariance_test``)."""
    cfg = BASE.replace(model=name, scale_invariant=scale_invariant, optimizer=optimizer, momentum=0.9,
                       weight_decay=5e-4, weight_decay_mode="decoupled" if optimizer == "adamw" else "coupled")
    forward_backward, optimizer_step = _meta_training_step(cfg, members)
    forward_backward()
    optimizer_step()
    with _OpLog() as captured, _HostData() as captured_made:
        forward_backward()
    with _OpLog() as eager, _HostData() as eager_made:
        optimizer_step()
    ops = {op for op, _ in captured.ops}
    assert {"convolution_backward", "_foreach_copy_"} <= ops  # the backward and the gradient copy were seen
    assert captured.hazards("meta") == [] and captured_made.made == []
    assert eager.ops and eager.read_backs() == [] and eager_made.made == []


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_static_step_in_fit_and_fit_many_reads_nothing_back(monkeypatch, precision):
    """The same check on the real code paths: ``fit`` and ``fit_many`` with ``cuda_graphs=True`` on CPU (with
    bf16 autocast too), every ``StaticStep`` call logged -- no host read-back and no tensor from Python data. The
    stacked SGD step, which stays eager, is logged too: a host sync there would stall every step."""
    logs = {"step": [], "sgd": []}

    def logged(kind, fn):
        def wrapper(*args):
            with _OpLog() as log:
                out = fn(*args)
            logs[kind].append(log)
            return out
        return wrapper

    monkeypatch.setattr(train.StaticStep, "_run", logged("step", train.StaticStep._run))
    monkeypatch.setattr(batched._Stack, "sgd_step", logged("sgd", batched._Stack.sgd_step))
    cfg = BASE.replace(n=96, num_epochs=1, precision=precision, cuda_graphs=True)
    train.fit(cfg, progress=False)
    batched.fit_many([cfg, cfg.replace(seed=1, lr=0.3, nesterov=True)], progress=False)
    assert len(logs["step"]) == 4 and len(logs["sgd"]) == 2  # two batches (one ragged) per run
    assert [h for log in logs["step"] + logs["sgd"] for h in log.hazards("cpu")] == []
