"""GhostBatchNorm (Yun et al. ECCV 2022 Sec. 3.1; Hoffer et al. 2017) against a reference loop over chunks with
``F.batch_norm(training=True)``: outputs, input/affine gradients, running statistics, ragged last chunks."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from repro_lib.models.layers import FixedLinear, GhostBatchNorm, ghost_chunk_sizes, norm_layer


def reference(x, gbn: GhostBatchNorm, rm, rv, weight=None, bias=None):
    """Loop over the documented chunks, each through F.batch_norm(training=True) with shared running buffers."""
    outs, start = [], 0
    for size in ghost_chunk_sizes(x.shape[0], gbn.ghost_batch, gbn.min_chunk):
        outs.append(F.batch_norm(x[start:start + size], rm, rv, weight, bias, True, gbn.momentum, gbn.eps))
        start += size
    assert start == x.shape[0]
    return torch.cat(outs, 0)


def test_chunk_sizes():
    assert ghost_chunk_sizes(256, 64) == [64] * 4
    assert ghost_chunk_sizes(200, 64) == [64, 64, 64, 8]       # ragged remainder: its own ghost batch
    assert ghost_chunk_sizes(129, 64) == [64, 65]              # a single left-over sample is merged
    assert ghost_chunk_sizes(50, 64) == [50]
    assert ghost_chunk_sizes(64, 64) == [64]
    assert ghost_chunk_sizes(70, 64, min_chunk=8) == [70]      # remainder 6 < 8 merged
    assert ghost_chunk_sizes(72, 64, min_chunk=8) == [64, 8]
    assert ghost_chunk_sizes(1, 64) == [1]


@pytest.mark.parametrize("batch", [256, 200, 129, 50, 130])
@pytest.mark.parametrize("shape", [(6, 5, 3), (7,)])   # (C, H, W) conv features and (C,) pooled features
@pytest.mark.parametrize("affine", [False, True])
def test_matches_reference_loop(batch, shape, affine):
    torch.manual_seed(batch + len(shape))
    C = shape[0]
    gbn = GhostBatchNorm(C, ghost_batch=64, affine=affine, momentum=0.1).double()
    rm0, rv0 = torch.randn(C, dtype=torch.float64), torch.rand(C, dtype=torch.float64) + 0.5
    gbn.running_mean.copy_(rm0)
    gbn.running_var.copy_(rv0)
    if affine:
        with torch.no_grad():
            gbn.weight.normal_()
            gbn.bias.normal_()
    x = (torch.randn(batch, *shape, dtype=torch.float64) * 3 + torch.randn(batch, *shape, dtype=torch.float64))
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    w2 = gbn.weight.detach().clone().requires_grad_(True) if affine else None
    b2 = gbn.bias.detach().clone().requires_grad_(True) if affine else None
    rm, rv = rm0.clone(), rv0.clone()

    y1 = gbn(x1)
    y2 = reference(x2, gbn, rm, rv, w2, b2)
    torch.testing.assert_close(y1, y2, rtol=1e-10, atol=1e-10)
    g = torch.randn_like(y1)
    (y1 * g).sum().backward()
    (y2 * g).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-9, atol=1e-10)
    if affine:
        torch.testing.assert_close(gbn.weight.grad, w2.grad, rtol=1e-9, atol=1e-10)
        torch.testing.assert_close(gbn.bias.grad, b2.grad, rtol=1e-9, atol=1e-10)
    # running statistics as if the chunks had been seen one after another
    torch.testing.assert_close(gbn.running_mean, rm, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gbn.running_var, rv, rtol=1e-12, atol=1e-12)
    assert int(gbn.num_batches_tracked) == len(ghost_chunk_sizes(batch, 64))


def test_each_chunk_normalized_and_differs_from_full_bn():
    torch.manual_seed(0)
    x = torch.randn(200, 4, 5, 5, dtype=torch.float64)
    x[64:128] += 5.0  # a shifted chunk: full-batch BN would not centre it
    y = GhostBatchNorm(4, ghost_batch=64).double()(x)
    for s, e in [(0, 64), (64, 128), (128, 192), (192, 200)]:
        c = y[s:e].transpose(0, 1).reshape(4, -1)
        torch.testing.assert_close(c.mean(1), torch.zeros(4, dtype=torch.float64), atol=1e-10, rtol=0)
        torch.testing.assert_close(c.var(1, unbiased=False), torch.ones(4, dtype=torch.float64), atol=1e-3, rtol=0)
    full = F.batch_norm(x, None, None, training=True)
    assert (full - y).abs().max() > 0.5


def test_eval_uses_running_stats_and_one_chunk_equals_batchnorm():
    torch.manual_seed(1)
    gbn = GhostBatchNorm(3, ghost_batch=64).double()
    bn = nn.BatchNorm2d(3, affine=False).double()
    for _ in range(3):
        x = torch.randn(40, 3, 4, 4, dtype=torch.float64) * 2 + 1
        torch.testing.assert_close(gbn(x), bn(x))  # batch <= ghost batch: plain BN, same running stats
    torch.testing.assert_close(gbn.running_mean, bn.running_mean)
    torch.testing.assert_close(gbn.running_var, bn.running_var)
    gbn.eval(), bn.eval()
    x = torch.randn(300, 3, 4, 4, dtype=torch.float64)
    torch.testing.assert_close(gbn(x), bn(x))
    ref = (x - gbn.running_mean[None, :, None, None]) / torch.sqrt(gbn.running_var[None, :, None, None] + gbn.eps)
    torch.testing.assert_close(gbn(x), ref)


def test_float32_and_state_dict_compatible_with_batchnorm():
    gbn = GhostBatchNorm(8, ghost_batch=16)
    y = gbn(torch.randn(100, 8, 3, 3))
    assert y.dtype == torch.float32 and y.shape == (100, 8, 3, 3)
    assert set(gbn.state_dict()) == set(nn.BatchNorm2d(8, affine=False).state_dict())
    assert list(gbn.parameters()) == []


def test_norm_layer_and_fixed_linear():
    assert isinstance(norm_layer(4, False), nn.BatchNorm2d) and norm_layer(4, False).affine
    si = norm_layer(4, True, ghost_batch=32)
    assert isinstance(si, GhostBatchNorm) and not si.affine and si.ghost_batch == 32
    torch.manual_seed(0)
    fc = FixedLinear(50, 10)
    assert list(fc.parameters()) == [] and set(fc.state_dict()) == {"weight", "bias"}
    bound = 1 / 50 ** 0.5
    assert fc.weight.abs().max() <= bound and fc.weight.abs().max() > 0.9 * bound  # nn.Linear's U(-b, b)
    x = torch.randn(5, 50)
    torch.testing.assert_close(fc(x), x @ fc.weight.T + fc.bias)
