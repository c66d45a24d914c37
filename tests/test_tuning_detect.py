"""``repro_lib.tuning.detect`` on timm models nobody here tuned for, each against a ground truth computed here by
rescaling: a tensor is scale-invariant when the float64 training-mode loss does not change as the tensor alone is
multiplied by c ∈ {1e-3, 0.5, 3, 1e3} (Lemma 1's definition, no gradients; for EfficientNet-B0's 82 tensors 1e3
and 0.5 only), on the model as created and on a copy perturbed here (its own draw, not the detector's) to tell a
structural invariance from one that holds at the present values only."""
import copy
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from repro_lib import tuning

pytestmark = pytest.mark.usefixtures("one_thread")

SCALES = (1e3, 1e-3, 3.0, 0.5)
SAME, DIFFERENT = 1e-9, 1e-4  # relative loss change: invariant at or below SAME, not invariant at or above DIFFERENT


def _batch(n=4, size=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, size, size, generator=g), torch.randint(0, 10, (n,), generator=g)


def _float64(model):
    net = copy.deepcopy(model).double().train()
    for m in net.modules():
        if isinstance(m, tuning.NORM_TYPES):
            m.eps = 1e-30  # the architecture's invariance, not the ε's ~ε/σ² deviation
    return net


def _perturbed(net):
    """Another state training could reach: 1-D parameters (norm scales and shifts, biases, layer-scales) moved, zero
    tensors drawn."""
    net = copy.deepcopy(net)
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for p in net.parameters():
            if p.ndim <= 1:
                p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=torch.float64))
            elif not p.any():
                p.copy_(0.05 * torch.randn(p.shape, generator=g, dtype=torch.float64))
    return net


@torch.no_grad()
def _changes(net, x, y, names, scales):
    """name -> the largest relative change of the loss as that tensor alone is multiplied by each of ``scales``
    (stops at the first change of at least DIFFERENT)."""
    x = x.double()
    base = float(F.cross_entropy(net(x), y))
    params = dict(net.named_parameters())
    out = {}
    for n in names:
        w = params[n].clone()
        worst = 0.0
        for c in scales:
            params[n].copy_(c * w)
            worst = max(worst, abs(float(F.cross_entropy(net(x), y)) - base) / abs(base))
            if worst >= DIFFERENT:
                break
        params[n].copy_(w)
        out[n] = worst
    return out


def ground_truth(model, x, y, scales=SCALES):
    """name -> "invariant" / "invariant only in this state" / "not invariant" / None (between the two thresholds:
    nearly invariant, e.g. behind a layer-scale of 1e-6), for every tensor of 2 or more dimensions."""
    net = _float64(model)
    names = [n for n, p in net.named_parameters() if p.ndim >= 2]
    now = _changes(net, x, y, names, scales)
    candidates = [n for n in names if now[n] <= SAME]
    later = _changes(_perturbed(net), x, y, candidates, scales[:2])
    truth = {}
    for n in names:
        if now[n] >= DIFFERENT:
            truth[n] = tuning.NOT_INVARIANT
        elif now[n] <= SAME and later[n] <= SAME:
            truth[n] = tuning.INVARIANT
        elif now[n] <= SAME and later[n] >= DIFFERENT:
            truth[n] = tuning.STATE_ONLY
        else:
            truth[n] = None
    return truth


def _detect(model, x, y, groups=False):
    """``tuning.detect`` and its warnings; the joint-group search (``tests/test_tuning_groups.py``) left out unless
    asked for: these tests are about each tensor alone."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = tuning.detect(model, x, y, groups=groups)
    return found, [str(w.message) for w in caught if issubclass(w.category, tuning.TuningWarning)]


def _agrees(found, truth):
    kinds = dict(zip(found.table.tensor, found.table.kind))
    assert set(kinds) == set(truth)
    wrong = {n: (kinds[n], t) for n, t in truth.items() if t is not None and kinds[n] != t}
    assert not wrong
    assert not [n for n, t in truth.items() if t is None and kinds[n] == tuning.INVARIANT]  # never counts a near miss


def _timm(name, **kw):
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    return timm.create_model(name, pretrained=False, num_classes=10, drop_rate=0.0, **kw)


def test_timm_resnet18_as_created_gives_all_twenty_convs_at_initialization():
    model = _timm("resnet18")  # timm's default zero_init_last: the last BN of every block starts at γ = 0
    x, y = _batch()
    zero_gamma = [n for n, p in model.named_parameters() if n.endswith("bn2.weight") and not p.any()]
    assert len(zero_gamma) == 8  # every residual branch is zero at initialization
    truth = ground_truth(model, x, y)
    found, said = _detect(model, x, y)
    _agrees(found, truth)
    convs = [n for n, p in model.named_parameters() if p.ndim == 4]
    assert found.invariant == convs and len(convs) == 20 and found.not_invariant == ["fc.weight"]
    assert (found.table.verdict == "no gradient").sum() == 16  # what the one-state measurement could not see
    assert found.applies and not said and tuning.scale_invariant_parameters(model, x, y) == convs


def test_convnext_is_invariant_only_while_its_biases_are_zero_and_agrees_with_scale_invariance():
    model = _timm("convnext_atto", drop_path_rate=0.0)
    x, y = _batch()
    truth = ground_truth(model, x, y)
    found, said = _detect(model, x, y)
    _agrees(found, truth)
    # a conv with bias before a LayerNorm: invariant while the bias is 0 (the stem, every depthwise conv, those of
    # stage 0 too, whose gradient under the 1e-6 layer-scales is below the no-gradient floor and is measured
    # directly), never once it moves
    conv_dw = [n for n in found.table.tensor if "conv_dw" in n]
    assert {"stem.0.weight", *conv_dw} <= set(found.state_only) and len(conv_dw) == 12
    assert all(n == "stem.0.weight" or "conv_dw" in n or "downsample" in n for n in found.state_only)
    assert found.invariant == [] and found.undecided == []
    assert any("only in the model's present state" in s and "stem.0.weight" in s for s in said)
    assert any("groups invariant together were not looked for" in s for s in said)  # not "does not apply"
    lemma = tuning.scale_invariance(model, x, y)
    assert dict(zip(found.table.tensor, found.table.verdict)) == dict(zip(lemma.tensor, lemma.verdict))


def test_efficientnet_b0_convs_before_batch_norm_and_not_its_squeeze_excitation():
    model = _timm("efficientnet_b0")
    x, y = _batch(size=64)  # at 32 px the last depthwise convs see 1x1 maps: BN then ignores their scale entirely
    truth = ground_truth(model, x, y, scales=(1e3, 0.5))  # 82 tensors: the two extremes of c only
    found, said = _detect(model, x, y)
    _agrees(found, truth)
    assert len(found.invariant) == 49 and not found.state_only and not found.undecided and not said
    assert all(".se." in n or n == "classifier.weight" for n in found.not_invariant)


def test_a_vit_has_nothing_invariant_alone_and_is_told_so():
    model = _timm("vit_tiny_patch16_224", img_size=32, patch_size=8)
    x, y = _batch()
    truth = ground_truth(model, x, y)
    found, said = _detect(model, x, y)
    _agrees(found, truth)
    assert found.invariant == [] and not found.applies
    assert said == [found.summary()]
    assert found.summary().startswith("none of its 52 tensors is scale-invariant alone")


def test_an_unused_tensor_is_named_as_undecided():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                      nn.Flatten(), nn.Linear(4, 10))
            self.unused = nn.Linear(3, 3)  # e.g. a head the forward pass does not reach

        def forward(self, x):
            return self.body(x)

    found, said = _detect(Net(), *_batch())
    assert found.invariant == ["body.0.weight"] and found.undecided == ["unused.weight"]
    assert any("could not be decided" in s and "unused.weight" in s for s in said)
    assert found.counts() == {tuning.INVARIANT: 1, tuning.STATE_ONLY: 0, tuning.NOT_INVARIANT: 1,
                              tuning.UNDECIDED: 1}


def test_a_conv_with_bias_before_layer_norm_is_flagged_and_one_before_batch_norm_is_not():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn_conv, self.ln_conv = nn.Conv2d(3, 4, 3), nn.Conv2d(3, 4, 3)
            self.bn, self.ln = nn.BatchNorm2d(4), nn.GroupNorm(1, 4)  # GroupNorm(1, C): a LayerNorm over C, H, W
            self.fc = nn.Linear(8, 10)
            nn.init.zeros_(self.ln_conv.bias)

        def forward(self, x):
            a = self.bn(self.bn_conv(x)).mean((2, 3))
            b = self.ln(self.ln_conv(x)).mean((2, 3))  # LN removes one mean over C, H, W, not a per-channel bias
            return self.fc(torch.cat([a, b], 1))

    found, _ = _detect(Net(), *_batch())
    kinds = dict(zip(found.table.tensor, found.table.kind))
    assert kinds == {"bn_conv.weight": tuning.INVARIANT, "ln_conv.weight": tuning.STATE_ONLY,
                     "fc.weight": tuning.NOT_INVARIANT}


def test_bad_arguments_are_named():
    model = nn.Sequential(nn.Linear(4, 4, bias=False), nn.BatchNorm1d(4))
    x, y = torch.randn(8, 4), torch.randint(0, 4, (8,))
    with pytest.raises(ValueError, match="^names: "):
        tuning.detect(model, x, y, names=["nope"])
    with pytest.raises(ValueError, match="^names: "):
        tuning.detect(nn.Sequential(nn.BatchNorm1d(4)), x, y)
    with pytest.raises(ValueError, match="^c: "):
        tuning.detect(model, x, y, c=1)
    assert tuning.detect(model, x, y).invariant == ["0.weight"]
