"""SGDP / AdamP (Heo et al., ICLR 2021) against timm's reference implementations and the paper's Eq. 10–11."""
import copy

import pytest
import timm.optim
import torch
import torch.nn as nn
from timm.optim.adamp import projection as timm_projection

from repro_lib.optim.adamp import CHANNEL_HIT, LAYER_HIT, NO_HIT, AdamP, project_, scale_invariance_test
from repro_lib.optim.sgdp import SGDP


pytestmark = pytest.mark.usefixtures("one_thread")


def _cnn():
    """Small CNN: two bias-free convs each followed by BN (channel-wise scale-invariant), a linear head (not)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def _batches(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(16, 3, 8, 8, generator=g), torch.randint(0, 10, (16,), generator=g)) for _ in range(n)]


def _lockstep(ref_cls, ref_kw, ours_cls, ours_kw, steps=50):
    """Run both optimizers for ``steps`` on two copies of the CNN, feeding both the gradient computed on the
    reference copy (so that float32 rounding differences are not amplified by the training dynamics)."""
    a = _cnn()
    b = copy.deepcopy(a)
    oa, ob = ref_cls(a.parameters(), **ref_kw), ours_cls(b.parameters(), **ours_kw)
    for x, y in _batches(steps):
        oa.zero_grad()
        nn.functional.cross_entropy(a(x), y).backward()
        for pa, pb in zip(a.parameters(), b.parameters()):
            pb.grad = pa.grad.clone()
        oa.step()
        ob.step()
    return a, b


def _max_rel_err(a, b):
    return max(((pb - pa).norm() / pa.norm()).item() for pa, pb in zip(a.parameters(), b.parameters()))


@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("weight_decay", [0.0, 1e-2])
@pytest.mark.parametrize("delta", [0.02, 0.1, 1.0])
def test_sgdp_matches_timm(nesterov, weight_decay, delta):
    """The default SGDP (the paper's Algorithm 1: buffer kept, projected copy as the step) is timm's SGDP."""
    kw = dict(lr=0.1, momentum=0.9, nesterov=nesterov, weight_decay=weight_decay, delta=delta)
    a, b = _lockstep(timm.optim.SGDP, kw, SGDP, kw)
    assert _max_rel_err(a, b) < 1e-6


@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("weight_decay", [0.0, 1e-2])
@pytest.mark.parametrize("delta", [0.02, 0.1, 1.0])
def test_adamp_matches_timm(nesterov, weight_decay, delta):
    kw = dict(lr=1e-2, nesterov=nesterov, weight_decay=weight_decay, delta=delta)
    a, b = _lockstep(timm.optim.AdamP, kw, AdamP, kw)
    assert _max_rel_err(a, b) < 1e-6


class _AuthorsSGDP(torch.optim.Optimizer):
    """The authors' (clovaai/AdamP) SGDP loop: without Nesterov the momentum buffer itself is projected, since
    timm's ``projection`` updates ``perturb`` in place and here ``perturb`` *is* the buffer. ``copy=True`` turns
    it into the paper's Algorithm 1 as written (p_t ← βp_{t−1} + ∇f_t; q_t = Π(p_t) by Eq. 11; w ← w − ηq_t):
    the step is projected, the buffer p_t is not."""

    def __init__(self, params, lr, momentum, weight_decay, nesterov, delta=0.1, wd_ratio=0.1, eps=1e-8,
                 copy=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov,
                                      delta=delta, wd_ratio=wd_ratio, eps=eps))
        self.copy = copy

    @torch.no_grad()
    def step(self):
        for gr in self.param_groups:
            for p in gr["params"]:
                st = self.state[p]
                buf = st.setdefault("momentum", torch.zeros_like(p))
                buf.mul_(gr["momentum"]).add_(p.grad)
                d = p.grad + gr["momentum"] * buf if gr["nesterov"] else (buf.clone() if self.copy else buf)
                r = 1.0
                if p.ndim > 1:
                    d, r = timm_projection(p, p.grad, d, gr["delta"], gr["wd_ratio"], gr["eps"])
                p.mul_(1 - gr["lr"] * gr["weight_decay"] * r / (1 - gr["momentum"]))
                p.add_(d, alpha=-gr["lr"])


@pytest.mark.parametrize("weight_decay", [0.0, 1e-2])
def test_sgdp_default_is_algorithm_1(weight_decay):
    """Without Nesterov (where the choice matters) the default SGDP is the paper's Algorithm 1 written out
    (projected copy as the step, buffer kept), and not the authors' in-place projection."""
    kw = dict(lr=0.1, momentum=0.9, nesterov=False, weight_decay=weight_decay)
    assert SGDP([torch.zeros(2, 2)], lr=0.1).defaults["project_momentum_buffer"] is False
    a, b = _lockstep(_AuthorsSGDP, dict(kw, copy=True), SGDP, kw)
    assert _max_rel_err(a, b) < 1e-6
    a, b = _lockstep(_AuthorsSGDP, kw, SGDP, kw)
    assert _max_rel_err(a, b) > 1e-3


@pytest.mark.parametrize("weight_decay", [0.0, 1e-2])
def test_sgdp_project_momentum_buffer_choice(weight_decay):
    """project_momentum_buffer=True reproduces the authors' in-place buffer projection; it is a different
    algorithm from timm's copy (the two must disagree), and with Nesterov the choice is irrelevant."""
    kw = dict(lr=0.1, momentum=0.9, nesterov=False, weight_decay=weight_decay)
    a, b = _lockstep(_AuthorsSGDP, kw, SGDP, dict(kw, project_momentum_buffer=True))
    assert _max_rel_err(a, b) < 1e-6
    a, b = _lockstep(timm.optim.SGDP, kw, SGDP, dict(kw, project_momentum_buffer=True))
    assert _max_rel_err(a, b) > 1e-3
    kw["nesterov"] = True
    a, b = _lockstep(_AuthorsSGDP, kw, SGDP, kw)  # default (Algorithm 1) = authors' code under Nesterov
    assert _max_rel_err(a, b) < 1e-6


def _row_cos(q, w):
    q, w = q.reshape(q.shape[0], -1), w.reshape(w.shape[0], -1)
    return ((q * w).sum(1) / (q.norm(dim=1) * w.norm(dim=1))).abs().max().item()


def _radial_cos_per_step(model, opt, steps, grads_from=None, mirror=None):
    """Max over steps ≥ 2 and over the two BN-preceded convs of the per-channel |cos(update, w)|. If ``mirror``
    is given, each gradient (computed on ``model``) is also copied into ``mirror``, which its caller steps."""
    worst = []
    for t, (x, y) in enumerate(_batches(8, seed=3)):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        if mirror is not None:
            for pa, pb in zip(model.parameters(), mirror[0].parameters()):
                pb.grad = pa.grad.clone()
            mirror[1].step()
        w0 = {n: p.detach().clone() for n, p in model.named_parameters() if n in ("0.weight", "3.weight")}
        opt.step()
        if t >= 2:
            worst.append(max(_row_cos(dict(model.named_parameters())[n].detach() - w, w) for n, w in w0.items()))
    return worst


@pytest.mark.parametrize("ours,base,kw", [
    (SGDP, torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    (SGDP, torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=False)),
    (AdamP, torch.optim.Adam, dict(lr=1e-2)),
    (AdamP, torch.optim.Adam, dict(lr=1e-2, betas=(0.8, 0.99))),
])
def test_update_orthogonal_on_scale_invariant_and_plain_elsewhere(ours, base, kw):
    """Eq. 10–12 over 8 steps: on the BN-preceded convs every update q of SGDP/AdamP has w·q = 0 per output
    channel, while the base optimizer's update (own run) has a clear radial part (momentum / Adam's elementwise
    scaling; Lemma 2.2), so the check can fail. The linear head and BN affine parameters (not scale-invariant),
    fed the same gradients, follow exactly the base optimizer's trajectory (no projection, no wd_ratio).

    δ = 0.01 here: with the default 0.1 the 160-element head is a *false* layer-wise hit at one of these steps
    (|cos| = 0.0019 < 0.1/√160); a random direction falls under δ/√d with probability ≈ 0.8·δ."""
    mine, ref = _cnn(), _cnn()
    o_mine, o_ref = ours(mine.parameters(), **dict(kw, delta=0.01)), base(ref.parameters(), **kw)
    assert max(_radial_cos_per_step(mine, o_mine, 8, mirror=(ref, o_ref))) < 1e-4
    for (n, pb), pa in zip(mine.named_parameters(), ref.parameters()):
        if n not in ("0.weight", "3.weight"):
            assert ((pb - pa).norm() / pa.norm()).item() < 1e-6, n
    own = _cnn()
    assert min(_radial_cos_per_step(own, base(own.parameters(), **kw), 8)) > 1e-2


def test_projection_matches_eq10_and_proposition_3_1():
    """Eq. 10: Π_w(x) = x − (ŵ·x)ŵ is ⟂ w and idempotent; layer-wise mode uses the whole-tensor ŵ.
    Prop. 3.1: the projected step's direction on the sphere lies in span(w, p)."""
    torch.manual_seed(0)
    w, x = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, 6, dtype=torch.float64)
    q = project_(x.clone(), w, CHANNEL_HIT, eps=0.0)
    assert (q * w).sum(1).abs().max() < 1e-12
    torch.testing.assert_close(project_(q.clone(), w, CHANNEL_HIT, eps=0.0), q)
    ql = project_(x.clone(), w, LAYER_HIT, eps=0.0)
    assert abs((ql * w).sum()) < 1e-12 and (ql * w).sum(1).abs().max() > 1e-3
    wf, pf = w.flatten(), x.flatten()
    wp = wf - 0.3 * project_(pf.clone().view(1, -1), wf.view(1, -1), CHANNEL_HIT, eps=0.0).flatten()
    basis = torch.linalg.qr(torch.stack([wf, pf], 1)).Q
    resid = wp / wp.norm() - basis @ (basis.T @ (wp / wp.norm()))
    assert resid.norm() < 1e-12


def test_scale_invariance_test_matches_timm_decisions():
    """Hits of the batched Eq. 11 test agree with timm's per-tensor test: channel hit for BN-preceded convs,
    layer hit for a tensor that is invariant only as a whole, no hit for a random gradient."""
    torch.manual_seed(0)
    w = torch.randn(8, 5, 3, 3)
    g_ch = torch.randn_like(w)
    g_ch -= w * ((g_ch * w).flatten(1).sum(1) / (w * w).flatten(1).sum(1)).view(-1, 1, 1, 1)
    g_layer = torch.randn_like(w)
    g_layer -= w * (g_layer * w).sum() / (w * w).sum()
    g_rand = torch.randn_like(w) + 0.5 * w
    res = scale_invariance_test([w, w, w], [g_ch, g_layer, g_rand], delta=0.1, eps=1e-8)
    assert res["hits"] == [CHANNEL_HIT, LAYER_HIT, NO_HIT]
    for g, hit in zip([g_ch, g_layer, g_rand], res["hits"]):
        _, r = timm_projection(w, g, g.clone(), 0.1, 0.1, 1e-8)
        assert (r != 1.0) == (hit != NO_HIT)


def test_registry_builders():
    from repro_lib.config import RunConfig
    from repro_lib.optim import build_optimizer

    model = _cnn()
    cfg = RunConfig(optimizer="sgdp", lr=0.1, weight_decay=1e-4, weight_decay_mode="decoupled", nesterov=True,
                    optimizer_kwargs={"delta": 0.05})
    opt = build_optimizer(cfg, model)
    assert isinstance(opt, SGDP) and opt.defaults["delta"] == 0.05 and opt.defaults["nesterov"]
    assert opt.defaults["project_momentum_buffer"] is False  # Algorithm 1 unless asked otherwise
    inplace = cfg.replace(optimizer_kwargs={"project_momentum_buffer": True})
    assert build_optimizer(inplace, model).defaults["project_momentum_buffer"] is True
    assert isinstance(build_optimizer(cfg.replace(optimizer="adamp", optimizer_kwargs={}), model), AdamP)
    adamw = build_optimizer(cfg.replace(optimizer="adamw", nesterov=False, optimizer_kwargs={}), model)
    assert isinstance(adamw, torch.optim.AdamW) and adamw.defaults["foreach"]
    with pytest.raises(ValueError, match="weight_decay_mode"):
        build_optimizer(cfg.replace(weight_decay_mode="coupled"), model)
    with pytest.raises(ValueError, match="optimizer_kwargs"):
        build_optimizer(cfg.replace(optimizer_kwargs={"dleta": 0.1}), model)
