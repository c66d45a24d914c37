"""Back-matching propagation (Zhang, Chen, Liu, arXiv 1802.09750, supplement): Proposition 1, App. B Eq. 7–10,
the App. C.1 scalar Hessian approximations, and the three layer-wise optimizers of App. D."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from repro_lib.papers.backmatching import backmatching as bm
from repro_lib.config import RunConfig
from repro_lib.models import create
from repro_lib.optim import build_optimizer
from repro_lib.optim.backmatching import LARS, LSALR, LayerwiseSGD, ScaleAmendedSGD

D = torch.float64


def _mlp(seed=0, affine=True):
    torch.manual_seed(seed)
    m = bm.BNMLP([6, 9, 7, 5], num_classes=4, affine=affine).double().train()
    if affine:  # non-trivial γ, β
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm1d):
                nn.init.uniform_(mod.weight, 0.5, 1.5)
                nn.init.uniform_(mod.bias, -0.5, 0.5)
    x, y = torch.randn(12, 6, dtype=D), torch.randint(0, 4, (12,))
    return m, x, y


# ----------------------------------------------------------------------------- Proposition 1


@pytest.mark.parametrize("affine", [True, False])
def test_proposition1_back_matching_equals_backprop(affine):
    m, x, y = _mlp(affine=affine)
    zs = [x.clone().requires_grad_(True)]
    for blk in m.blocks:
        zs.append(blk(zs[-1]))
        zs[-1].retain_grad()
    J = F.cross_entropy(zs[-1], y)
    J.backward()
    res = bm.back_matching(m.blocks, x, y)
    for b in range(len(m.blocks)):
        # Eq. 2: z^{k+1/2}_{b-1} − z^k_{b-1} = −∂J/∂z_{b-1}
        assert torch.allclose(res["target"][b] - res["z"][b], -zs[b].grad, rtol=1e-10, atol=1e-13)
        for g, p in zip(res["grad_w"][b], m.blocks[b].parameters()):
            assert torch.allclose(g, p.grad, rtol=1e-10, atol=1e-13)


def test_proposition1_needs_step_one():
    m, x, y = _mlp()
    J = F.cross_entropy(m(x), y)
    J.backward()
    res = bm.back_matching(m.blocks, x, y, z_step=0.5)
    w0 = next(m.blocks[0].parameters())
    assert not torch.allclose(res["grad_w"][0][0], w0.grad, rtol=1e-3)


# ----------------------------------------------------------------------------- App. B


@pytest.mark.parametrize("affine", [True, False])
def test_bn_backward_eq7_to_10_against_autograd(affine):
    torch.manual_seed(1)
    W = torch.randn(5, 8, dtype=D, requires_grad=True)
    z_prev = torch.randn(16, 8, dtype=D, requires_grad=True)
    target = torch.randn(16, 5, dtype=D)
    gamma = torch.rand(5, dtype=D) + 0.5 if affine else None
    beta = torch.randn(5, dtype=D) if affine else None
    z_tilde = z_prev @ W.t()
    z_tilde.retain_grad()
    z = F.batch_norm(z_tilde, None, None, gamma, beta, training=True, eps=1e-5)
    z.retain_grad()
    (0.5 * (target - z).pow(2).sum()).backward()
    ours = bm.fc_bn_backmatching_grads(W.detach(), z_prev.detach(), target, gamma, beta)
    for key, ref in [("grad_z", z.grad), ("grad_z_tilde", z_tilde.grad), ("grad_z_prev", z_prev.grad),
                     ("grad_W", W.grad)]:
        assert torch.allclose(ours[key], ref, rtol=1e-10, atol=1e-12), key


def test_bn_backward_mean_and_variance_terms_matter():
    """Dropping the ∂/∂Var and ∂/∂E terms of Eq. 8 gives a different answer (the test above can fail)."""
    torch.manual_seed(2)
    zt = torch.randn(10, 3, dtype=D)
    g = torch.randn(10, 3, dtype=D)
    naive = g * (zt.var(0, unbiased=False) + 1e-5).rsqrt()
    assert not torch.allclose(bm.bn_backward(g, zt), naive, rtol=1e-2)


# ----------------------------------------------------------------------------- App. C.1


def _conv(a, W, stride, circular=True):
    if circular:
        a = F.pad(a, (1, 1, 1, 1), mode="circular")
        return F.conv2d(a, W, stride=stride)
    return F.conv2d(a, W, stride=stride, padding=1)


@pytest.mark.parametrize("stride,c", [(1, 1.0), (2, 4.0)])
def test_mean_diag_Ha_is_col_norm_over_c(stride, c):
    """Eq. 18–19: mean diag(W_aᵀW_a) = ‖W_col‖²_{2,μ}/c exactly (circular padding), with ‖·‖²_{2,μ} = mean
    squared row norm; the other reading (squared mean row norm) is off."""
    torch.manual_seed(3)
    W = torch.randn(4, 3, 3, 3, dtype=D) * torch.tensor([0.2, 1.0, 3.0], dtype=D).view(1, 3, 1, 1)  # unequal columns
    a = torch.randn(1, 3, 8, 8, dtype=D)
    Ja = torch.autograd.functional.jacobian(lambda t: _conv(t, W, stride), a).reshape(-1, a.numel())
    mean_diag = Ja.pow(2).sum(0).mean()
    assert torch.allclose(mean_diag, bm.sq_norm_mu(bm.w_col(W)) / c, rtol=1e-12)
    assert not torch.allclose(mean_diag, bm.sq_norm_mu(bm.w_col(W), "mean") / c, rtol=1e-2)
    # zero padding: boundary taps are lost, the identity holds approximately
    Jz = torch.autograd.functional.jacobian(lambda t: _conv(t, W, stride, False), a).reshape(-1, a.numel())
    assert 0.7 < Jz.pow(2).sum(0).mean() / mean_diag < 1.0


def test_mean_diag_HW_is_sharing_times_input_power():
    """Eq. 17: mean diag(E a_i2c a_i2cᵀ) = s · mean(a²) (stride 1, circular padding), s = q1·q2."""
    torch.manual_seed(4)
    W = torch.randn(4, 3, 3, 3, dtype=D)
    a = torch.randn(5, 3, 6, 6, dtype=D) * 1.7
    JW = torch.autograd.functional.jacobian(lambda w: _conv(a, w, 1), W).reshape(5, -1, W.numel())
    mean_diag = JW.pow(2).sum(1).mean(0).mean()  # E_x over the batch, mean over the diagonal
    assert torch.allclose(mean_diag, 36 * a.pow(2).mean(), rtol=1e-12)


def test_scalar_hessians_with_bn():
    """App. C.1 with BN: the Gauss–Newton Hessian of ½‖t − BN(conv(a))‖² (zero residual) has mean diagonal
    ≈ m_{b,W} = s/‖W_row‖²_{2,μ} in W (E_x convention) and ≈ m_{b,z} = ‖W_col‖²/‖W_row‖²/c in the input,
    for white inputs and equal row norms."""
    torch.manual_seed(5)
    n, m_, p, B = 4, 3, 6, 16
    W = torch.randn(n, m_, 3, 3, dtype=D)
    W = W / bm.w_row(W).norm(dim=1).view(n, 1, 1, 1) * 1.9
    a = torch.randn(B, m_, p, p, dtype=D)

    def f(w, t):
        return F.batch_norm(_conv(t, w, 1), None, None, training=True, eps=1e-12)

    JW = torch.func.jacfwd(lambda w: f(w, a))(W).reshape(-1, W.numel())
    hw = JW.pow(2).sum(0).mean() / B
    assert abs(hw / bm.m_weight(W, s=p * p) - 1) < 0.1
    Ja = torch.func.jacfwd(lambda t: f(W, t))(a).reshape(-1, a.numel())
    hz = Ja.pow(2).sum(0).mean()
    assert abs(hz / bm.m_input(W, c=1.0) - 1) < 0.1
    assert abs(hw * 2 / bm.m_weight(W, s=p * p) - 1) > 0.5  # a factor 2 off would be caught


# ----------------------------------------------------------------------------- layer tracing and rates


def test_trace_vgg11():
    m = create("vgg11_bn", 10, width=8)
    layers = bm.trace_layers(m, (3, 32, 32))
    assert [lay.s for lay in layers] == [1024, 256, 64, 64, 16, 16, 4, 4, 1]
    # c: 4 after each max-pool (2×2 → conv), 1 between stride-1 convs, 4 for pool(2×2→1×1)+flatten → FC
    assert [lay.c for lay in layers] == [1, 4, 4, 1, 4, 1, 4, 1, 4]
    assert [lay.has_bn for lay in layers] == [True] * 8 + [False]
    assert layers[0].bn == ["features.1.weight", "features.1.bias"]
    assert layers[-1].weight == "classifier.weight" and layers[-1].bias == "classifier.bias"


def test_trace_mlp_and_flatten():
    m, _, _ = _mlp()
    layers = bm.trace_layers(m, (6,))
    assert [lay.s for lay in layers] == [1, 1, 1, 1] and [lay.c for lay in layers] == [1, 1, 1, 1]
    net = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                        nn.Linear(64, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))
    layers = bm.trace_layers(net, (3, 8, 8))
    assert [lay.s for lay in layers] == [16, 1, 1] and [lay.c for lay in layers] == [4, 1, 1]


def _direct_rates(model, layers, norm="ms"):
    """Eq. (*) by a loop over python floats, from the supplement's definitions."""
    P = dict(model.named_parameters())
    out = {}
    for b, lay in enumerate(layers):
        above = 1.0
        for up in layers[b + 1:]:
            if up.has_bn:
                above /= float(bm.m_input(P[up.weight].detach(), up.c, norm))
        if lay.has_bn:
            out[lay.weight] = above / float(bm.m_weight(P[lay.weight].detach(), lay.s, norm))
            for n in lay.bn:
                out[n] = above / lay.s
        else:
            out[lay.weight] = above
            if lay.bias:
                out[lay.bias] = above
    return out


def _grads(model, x, y):
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("norm", ["ms", "mean"])
def test_scale_amended_first_step_matches_direct_rates(norm):
    torch.manual_seed(6)
    m = create("vgg11_bn", 10, width=8).double()
    x, y = torch.randn(8, 3, 32, 32, dtype=D), torch.randint(0, 10, (8,))
    layers = bm.trace_layers(m, (3, 32, 32))
    want = _direct_rates(m, layers, norm)
    assert len(want) == sum(1 for _ in m.parameters())  # every parameter has a derived rate
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    opt = ScaleAmendedSGD(m.named_parameters(), layers, lr=0.3, norm=norm)
    g = _grads(m, x, y)
    opt.step()
    for n, p in m.named_parameters():
        assert torch.allclose(p.detach(), before[n] - 0.3 * want[n] * g[n], rtol=1e-10, atol=1e-14), n
    # layers really get different rates
    rw = [want[lay.weight] for lay in layers]
    assert max(rw) / min(rw) > 10


def test_scale_amended_ms_rate_telescopes():
    """With ‖·‖²_{2,μ} = mean squared row norm, m_{b,z} = n_b/(m_b c_b) and the product over the convs
    above a VGG layer telescopes to (n_b / n_top) ∏ c_i."""
    m = create("vgg11_bn", 10, width=8).double()
    layers = bm.trace_layers(m, (3, 32, 32))
    P = dict(m.named_parameters())
    r_w, _ = bm.layer_rates(layers, [P[lay.weight] for lay in layers])
    b = 2  # third conv: 16 → 32 channels (width 8), convs above end with 64 channels
    W = P[layers[b].weight]
    prod_c = math.prod(lay.c for lay in layers[b + 1:-1])
    expect = float(bm.w_row(W.detach()).pow(2).sum(1).mean()) / layers[b].s * (W.shape[0] / 64) * prod_c
    assert math.isclose(float(r_w[b]), expect, rel_tol=1e-12)


def test_scale_amended_is_scale_equivariant():
    """Theory (App. C.1): rescaling a BN-followed conv weight by α leaves the loss unchanged, scales its
    gradient by 1/α and its rate by α², so its step scales by α and every other step is unchanged.
    Plain SGD's step for that layer scales by 1/α instead."""
    torch.manual_seed(7)
    base = create("vgg11_bn", 10, width=8).double()
    for mod in base.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.eps = 1e-300
    x, y = torch.randn(8, 3, 32, 32, dtype=D), torch.randint(0, 10, (8,))
    name, alpha = "features.8.weight", 5.0

    def one_step(scale, opt_cls):
        m = create("vgg11_bn", 10, width=8).double()
        m.load_state_dict(base.state_dict())
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.eps = 1e-300
        with torch.no_grad():
            dict(m.named_parameters())[name].mul_(scale)
        before = {n: p.detach().clone() for n, p in m.named_parameters()}
        if opt_cls is ScaleAmendedSGD:
            opt = ScaleAmendedSGD(m.named_parameters(), bm.trace_layers(m, (3, 32, 32)), lr=0.1)
        else:
            opt = torch.optim.SGD(m.parameters(), lr=0.1)
        _grads(m, x, y)
        opt.step()
        return {n: p.detach() - before[n] for n, p in m.named_parameters()}

    d1, da = one_step(1.0, ScaleAmendedSGD), one_step(alpha, ScaleAmendedSGD)
    for n in d1:
        want = alpha * d1[n] if n == name else d1[n]
        assert torch.allclose(da[n], want, rtol=1e-8, atol=1e-14), n
    s1, sa = one_step(1.0, torch.optim.SGD), one_step(alpha, torch.optim.SGD)
    assert torch.allclose(sa[name], s1[name] / alpha, rtol=1e-8)


# ----------------------------------------------------------------------------- LARS, LSALR, the shared SGD core


class _Ones(LayerwiseSGD):
    def rates(self, group, params, directions):
        return torch.ones(len(params), dtype=D)


@pytest.mark.parametrize("nesterov", [False, True])
def test_layerwise_core_is_torch_sgd_when_rates_are_one(nesterov):
    m1, x, y = _mlp()
    m2, _, _ = _mlp()
    o1 = torch.optim.SGD(m1.parameters(), lr=0.05, momentum=0.9, nesterov=nesterov, weight_decay=1e-3)
    o2 = _Ones(m2.parameters(), lr=0.05, momentum=0.9, nesterov=nesterov, weight_decay=1e-3)
    for _ in range(3):
        for m, o in ((m1, o1), (m2, o2)):
            o.zero_grad()
            F.cross_entropy(m(x), y).backward()
            o.step()
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        assert torch.allclose(p1, p2, rtol=1e-12, atol=1e-15)


def test_lars_layer_rate():
    """LARS (App. D): ΔW_l = −η·trust·‖W_l‖/‖δW_l‖·δW_l, δW_l = ∇ + λW; so ‖ΔW_l‖ = η·trust·‖W_l‖."""
    m, x, y = _mlp()
    before = [p.detach().clone() for p in m.parameters()]
    g = list(_grads(m, x, y).values())
    opt = LARS(m.parameters(), lr=2.0, weight_decay=1e-3, trust=1e-3)
    opt.step()
    for p, p0, gi in zip(m.parameters(), before, g):
        d = gi + 1e-3 * p0
        assert torch.allclose(p.detach(), p0 - 2.0 * 1e-3 * p0.norm() / d.norm() * d, rtol=1e-10, atol=1e-15)
        assert math.isclose(float((p.detach() - p0).norm()), 2e-3 * float(p0.norm()), rel_tol=1e-9)


def test_lars_zero_norm_fallback():
    w = nn.Parameter(torch.zeros(3, dtype=D))
    w.grad = torch.ones(3, dtype=D)
    LARS([w], lr=2.0, trust=1e-3).step()
    assert torch.allclose(w.detach(), torch.full((3,), -2e-3, dtype=D))


def test_lsalr_layer_rate():
    """LSALR (App. D): rate η·(1 + log(1 + 1/‖δW_l‖))."""
    m, x, y = _mlp()
    before = [p.detach().clone() for p in m.parameters()]
    g = list(_grads(m, x, y).values())
    LSALR(m.parameters(), lr=0.1, weight_decay=1e-3).step()
    for p, p0, gi in zip(m.parameters(), before, g):
        d = gi + 1e-3 * p0
        rate = 0.1 * (1 + math.log(1 + 1 / float(d.norm())))
        assert torch.allclose(p.detach(), p0 - rate * d, rtol=1e-10, atol=1e-15)


def _layerwise_by_hand(kind, nesterov, rate_after_momentum, steps=5, lr=0.2, wd=1e-3, mu=0.9, trust=0.5):
    """LARS / LSALR with momentum, written out per tensor with python-float rates. Documented order
    (``rate_after_momentum=False``): d = r_t·(g + λp), v ← μv + d (v = d first), p ← p − η(d + μv | v). The other
    reading of App. D's "learning rate for layer l": v ← μv + (g + λp), p ← p − η·r_t·(… | v)."""
    m, x, y = _mlp()
    ps, rates = list(m.parameters()), []
    v = [None] * len(ps)
    for _ in range(steps):
        _grads(m, x, y)
        with torch.no_grad():
            rates.append([])
            for i, p in enumerate(ps):
                d = p.grad + wd * p
                if kind == "lars":
                    r = trust * float(p.norm()) / float(d.norm())
                else:
                    r = 1 + math.log(1 + 1 / float(d.norm()))
                rates[-1].append(r)
                u = d if rate_after_momentum else r * d
                v[i] = u.clone() if v[i] is None else mu * v[i] + u
                s = u + mu * v[i] if nesterov else v[i]
                p -= lr * (r * s if rate_after_momentum else s)
    return [p.detach() for p in ps], torch.tensor(rates, dtype=D)


@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("kind", ["lars", "lsalr"])
def test_layer_rate_is_applied_before_momentum(kind, nesterov):
    """The *choice* of LayerwiseSGD (module docstring): r_t scales the decayed gradient before it enters the
    momentum buffer (You et al. 2017's LARS), not the buffer. Momentum 0.9, several steps, rates recomputed and
    changing every step (large steps: η = 0.2, trust 0.5 for LARS), compared with the hand-written update."""
    m, x, y = _mlp()
    p0 = [p.detach().clone() for p in m.parameters()]
    kw = dict(lr=0.2, momentum=0.9, nesterov=nesterov, weight_decay=1e-3)
    opt = LARS(m.parameters(), trust=0.5, **kw) if kind == "lars" else LSALR(m.parameters(), **kw)
    for _ in range(5):
        _grads(m, x, y)
        opt.step()
    want, rates = _layerwise_by_hand(kind, nesterov, rate_after_momentum=False)
    other, _ = _layerwise_by_hand(kind, nesterov, rate_after_momentum=True)
    assert len(want) == len(p0) > 4
    assert (rates.std(0) / rates.mean(0)).min() > 0.01  # every tensor's rate changes from step to step
    for p, w, o, q in zip(m.parameters(), want, other, p0):
        assert torch.allclose(p.detach(), w, rtol=1e-10, atol=1e-13)
        assert (o - w).norm() > 0.02 * (w - q).norm()  # the other order is far outside that tolerance


@pytest.mark.parametrize("name", ["scale_amended_sgd", "lars", "lsalr"])
def test_registry_builds_and_trains(name):
    torch.manual_seed(8)
    cfg = RunConfig(model="vgg11_bn", scale_invariant=False, width=8, optimizer=name, lr=0.1, momentum=0.9,
                    nesterov=True, weight_decay=1e-3, dataset="cifar10", synthetic=True)
    m = create("vgg11_bn", 10, width=8)
    opt = build_optimizer(cfg, m)
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    with pytest.raises(ValueError, match="weight_decay_mode"):
        build_optimizer(cfg.replace(weight_decay_mode="decoupled"), m)
    with pytest.raises(ValueError, match="optimizer_kwargs"):
        build_optimizer(cfg.replace(optimizer_kwargs={"bogus": 1}), m)


def test_table1_plan():
    plan = bm.table1_plan("paper")
    assert len(plan) == 2 * 4 * 4 * 3  # datasets × models × methods × seeds
    first = plan[plan.seed == 0].groupby("method").cfg.first()
    assert (first["lars"].lr, first["lars"].weight_decay) == (2.0, 1e-3)
    assert (first["scale_amended_sgd"].lr, first["scale_amended_sgd"].weight_decay) == (0.1, 5e-3)
    assert all(c.nesterov and c.momentum == 0.9 and not c.scale_invariant for c in plan.cfg)
    cpu = bm.table1_plan("cpu")
    assert set(c.dataset for c in cpu.cfg) == {"cifar10"} and set(cpu.paper_dataset) == {"cifar10"}
    with pytest.raises(ValueError, match="bogus"):
        bm.table1_plan("cpu", bogus=1)
    with pytest.raises(ValueError, match="profile"):
        bm.table1_plan("laptop")
