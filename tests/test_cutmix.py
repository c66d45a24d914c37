"""CutMix (Yun et al. 2019, Eq. 1) as used for AdamP Table 2's ResNet-50 + CutMix row."""
import math

import torch
import torch.nn.functional as F

from repro_lib.cutmix import cutmix_batch, cutmix_loss, mixed_targets


def _batch(b=8, h=17, w=23):
    # every image constant and distinct: each pixel tells which image it came from
    x = torch.arange(b, dtype=torch.float32).view(b, 1, 1, 1).expand(b, 3, h, w).clone()
    y = torch.arange(b) % 5
    return x, y


def test_area_fraction_equals_label_weight_and_labels_mixed():
    x, y = _batch()
    for seed in range(20):
        g = torch.Generator().manual_seed(seed)
        xm, ya, yb, lam = cutmix_batch(x, y, generator=g)
        assert torch.equal(ya, y)
        for i in range(x.shape[0]):
            own = (xm[i] == x[i, 0, 0, 0]).float().mean().item()
            src = xm[i][xm[i] != x[i, 0, 0, 0]]
            if own < 1:
                # the pasted pixels all come from one image j, and y_b[i] is that image's label
                j = int(src[0].item())
                assert torch.all(src == j)
                assert yb[i] == y[j]
            assert math.isclose(own, lam, abs_tol=1e-6) or (own == 1.0 and yb[i] == y[i])
        assert 0 <= lam <= 1
        assert torch.equal(x, _batch()[0])  # input untouched


def test_box_is_one_rectangle_shared_by_the_batch():
    x, y = _batch()
    g = torch.Generator().manual_seed(3)
    xm, _, _, lam = cutmix_batch(x, y, generator=g)
    changed = (xm != x).any(1)  # (B, H, W)
    # images whose partner is a different image show the box; all show the same one
    boxes = [c for c in changed if c.any()]
    assert boxes and all(torch.equal(c, boxes[0]) for c in boxes)
    rows, cols = boxes[0].any(1), boxes[0].any(0)
    assert boxes[0].sum() == rows.sum() * cols.sum()  # a rectangle
    assert math.isclose(1 - lam, float(boxes[0].float().mean()), abs_tol=1e-6)


def test_deterministic_with_generator_and_lambda_distribution():
    x, y = _batch()
    a = cutmix_batch(x, y, generator=torch.Generator().manual_seed(7))
    b = cutmix_batch(x, y, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a[0], b[0]) and torch.equal(a[2], b[2]) and a[3] == b[3]
    g = torch.Generator().manual_seed(0)
    lams = [cutmix_batch(torch.zeros(2, 1, 64, 64), torch.zeros(2, dtype=torch.long), generator=g)[3]
            for _ in range(400)]
    # β = 1: λ ≈ Uniform(0,1) before clipping; clipping only raises λ, so the mean is in (0.5, 0.75)
    assert 0.5 < sum(lams) / len(lams) < 0.75


def test_prob_zero_is_identity_and_loss_matches_soft_targets():
    x, y = _batch()
    xm, ya, yb, lam = cutmix_batch(x, y, prob=0.0, generator=torch.Generator().manual_seed(0))
    assert xm is x and lam == 1.0 and torch.equal(yb, y)
    logits = torch.randn(8, 5, generator=torch.Generator().manual_seed(1))
    _, ya, yb, lam = cutmix_batch(x, y, generator=torch.Generator().manual_seed(2))
    soft = mixed_targets(ya, yb, lam, 5)
    assert torch.allclose(cutmix_loss(logits, ya, yb, lam), F.cross_entropy(logits, soft), atol=1e-6)
