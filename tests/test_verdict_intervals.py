"""One way to judge a difference (``repro_lib.results.findings``): seed-paired (or Welch) 95 % t intervals, the
">" / "<" / "≈" / "≳" rules, bootstrap intervals for statistics that are not means, grid claims ("best or second",
"best") judged with the paired interval of the yellow cell, and the peak reported only where the quadratic fits.

Each case is constructed so that its verdict is known, and several are ones the earlier noise-based rules got
wrong: an "≈" held whenever the noise was large, a "second of two" counted as best."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from repro_lib.results import findings as F

TF = 10 / 128


def test_paired_interval_is_the_t_interval_of_the_per_seed_differences():
    a = {0: 30.0, 1: 31.0, 2: 29.5, 3: 30.4}
    b = {0: 28.0, 1: 29.5, 2: 27.0, 3: 29.0}
    d = F.difference(a, b)
    diffs = np.array([a[s] - b[s] for s in a])
    half = stats.t.ppf(0.975, len(diffs) - 1) * diffs.std(ddof=1) / math.sqrt(len(diffs))
    assert d.paired and d.n == 4 and d.diff == pytest.approx(diffs.mean())
    assert (d.lo, d.hi) == (pytest.approx(diffs.mean() - half), pytest.approx(diffs.mean() + half))
    assert d.resolution == pytest.approx(half)


def test_pairing_uses_only_the_seeds_both_have_and_pairing_narrows_the_interval():
    rng = np.random.default_rng(0)
    seed_effect = rng.normal(0, 3, 5)  # shared by both settings at each seed (initialisation, data order)
    a = pd.Series(50 + seed_effect + rng.normal(0, 0.3, 5) + 1.0)
    b = pd.Series(50 + seed_effect + rng.normal(0, 0.3, 5))
    paired, welch = F.difference(a, b), F.difference(a, b, paired=False)
    assert paired.lo > 0 and welch.lo < 0 < welch.hi  # the seed effect cancels only when paired
    assert F.difference(a.drop(index=[3, 4]), b.drop(index=[0])).n == 2  # seeds 1, 2


def test_one_seed_or_none_gives_no_interval_and_identical_differences_a_point():
    assert math.isnan(F.difference({0: 1.0}, {0: 0.5}).lo)
    assert math.isnan(F.difference({0: 1.0}, {1: 0.5}).diff)
    d = F.difference({0: 2.0, 1: 3.0}, {0: 1.0, 1: 2.0})
    assert d.lo == d.hi == d.diff == 1.0


@pytest.mark.parametrize("lo, hi, rel, word, reason", [
    (0.5, 2.0, ">", "holds", ""),
    (-2.0, -0.5, ">", "no", ""),
    (-0.5, 2.0, ">", "undecided", "within the noise, leaning the claimed way"),
    (-2.0, 0.5, ">", "undecided", "within the noise, leaning against the claim"),
    (-2.0, -0.5, "<", "holds", ""),
    (0.5, 2.0, "<", "no", ""),
    (-0.4, 0.6, "≈", "holds", ""),            # the whole interval inside ±1
    (1.5, 3.0, "≈", "no", ""),                # the whole interval outside ±1
    (-6.0, 6.4, "≈", "undecided", "the 90 % interval reaches past the margin ±1"),
    (0.5, 1.5, "≈", "undecided", "the 90 % interval reaches past the margin ±1"),
    (-0.8, 0.4, "≳", "holds", ""),            # not worse than −1
    (-3.0, -1.5, "≳", "no", ""),
    (-2.0, 0.5, "≳", "undecided", "the interval reaches below the margin −1"),
])
def test_the_rules(lo, hi, rel, word, reason):
    level = 0.90 if rel == "≈" else 0.95  # TOST at α = 0.05 per side reads the 90 % interval
    d = F.Difference((lo + hi) / 2, lo, hi, 5, True, "paired t", level)
    assert F.judge_difference(d, rel, margin=1.0) == (word, reason)


def test_an_equivalence_claim_needs_the_90_percent_interval():
    """TOST at α = 0.05 per side: a 95 % interval handed to an "≈" claim is refused, not silently read."""
    with pytest.raises(ValueError, match="90 % interval"):
        F.judge_difference(F.Difference(0.1, -0.4, 0.6, 5, True, "paired t"), "≈", margin=1.0)
    a, b = {s: 10 + 0.1 * s for s in range(6)}, {s: 10 + 0.3 * (s % 2) for s in range(6)}
    d90, d95 = F.difference(a, b, level=0.90), F.difference(a, b)
    assert d90.level == 0.90 and d90.lo > d95.lo and d90.hi < d95.hi


def test_an_equivalence_claim_no_longer_holds_by_noise():
    """Li & Arora's published case: TEXP − step +0.20, seed-paired interval about [−6.0, +6.4]. The noise rule read
    |Δ| ≤ noise 4.87 as *holds*; an interval 12 points wide shows nothing either way."""
    d = F.Difference(0.20, -6.0, 6.4, 3, True, "paired t", 0.90)
    word, reason = F.judge_difference(d, "≈", margin=1.0)
    assert word == "undecided" and reason.startswith("the 90 % interval reaches past the margin")


def test_contrary_results_in_an_unsettled_regime_stay_undecided_and_few_seeds_decide_nothing():
    d = F.Difference(-3.0, -4.0, -2.0, 3, True, "paired t")
    assert F.judge_difference(d, ">", settled=False, unsettled="before training converged") == (
        "not judged", "before training converged; the interval points against the claim")
    assert F.judge_difference(F.Difference(3.0, 2.0, 4.0, 2, True, "paired t"), ">") == (
        "undecided", "2 seeds on real images, 3 needed")
    assert F.judge_difference(F.Difference(3.0, 2.0, 4.0, 2, True, "paired t"), ">", real_data=False)[0] == "holds"
    with pytest.raises(ValueError, match="margin"):
        F.judge_difference(d, "≈")


def test_bootstrap_interval_of_a_ratio_over_seeds():
    samples = pd.DataFrame({"a": [1.0, 1.1, 0.9, 1.05], "b": [2.0, 2.1, 1.9, 2.0]})
    d = F.bootstrap_difference(lambda t: t["b"].mean() / t["a"].mean(), samples)
    assert d.lo <= 2.0 / 1.0125 <= d.hi and d.method == "bootstrap over seeds" and d.n == 4
    assert math.isnan(F.bootstrap_difference(lambda t: t["a"].mean(), samples.iloc[:1]).lo)


def test_interval_fields_of_a_claim():
    f = F.interval_fields(F.Difference(0.2, -1.0, 1.4, 5, True, "paired t"), paper_effect=0.11, margin=1.0)
    assert f == {"ci": [-1.0, 1.4], "resolution": pytest.approx(1.2), "estimate": 0.2, "paper_effect": 0.11,
                 "margin": 1.0, "level": 0.95}
    assert F.interval_fields(F.NO_DIFFERENCE)["ci"] == [None, None]
    words = F.resolution_words(F.Difference(0.2, -1.5, 1.9, 3, True, "paired t"), 0.11, what="3 seeds")
    assert words == "the paper's +0.11 is below what 3 seeds can resolve (±1.70 points)"


def _grid(values: dict, seeds=(0, 1, 2)):
    """A one-column grid: ``values`` maps a tuning-factor multiple (yellow = 1) to its per-seed accuracies."""
    rows = []
    for k, accs in values.items():
        for s, acc in zip(seeds, accs):
            rows.append(dict(n=1000, tuning_factor=TF * k, yellow=k == 1, seed=s, status="finished", test_acc=acc,
                             history=[]))
    return pd.DataFrame(rows)


def test_best_means_best_not_second_of_two():
    """Sec. 3's claim is "the value at 10/128 is the best searched": second of two values is not best, and a lead
    inside the noise is not shown."""
    second = _grid({0.25: [50.0, 51.0, 52.0], 1: [47.0, 48.5, 49.0]})
    f = F.findings(second, claim="best").iloc[0]
    assert f["rank"] == "second" and f.verdict == "no"  # the old rule read "best or second" as holding
    assert F.findings(second, claim="best or second").iloc[0].verdict == "holds"  # the Yun tables' own claim
    close = _grid({0.25: [50.0, 52.0, 49.0], 1: [51.0, 50.5, 50.0], 4: [40.0, 41.0, 39.0]})
    g = F.findings(close, claim="best").iloc[0]
    assert g["rank"] == "best" and g.verdict == "undecided" and g.ci_lo < 0 < g.ci_hi
    clear = _grid({0.25: [45.0, 46.0, 44.0], 1: [50.0, 51.0, 49.5], 4: [40.0, 41.0, 39.0]})
    assert F.findings(clear, claim="best").iloc[0].verdict == "holds"


def test_a_grid_no_needs_an_interval_below_zero():
    """Third or lower is *no* only when two cells are shown above the yellow one: the pooled interval to the
    second-best other cell lies below 0."""
    settled_low = _grid({0.5: [52.0, 53.0, 52.5], 1: [47.0, 48.0, 47.4], 2: [51.0, 52.0, 51.6], 4: [50.0, 50.5, 50.2]})
    f = F.findings(settled_low).iloc[0]
    assert f["rank"] == "no" and f.verdict == "no" and f.second_hi < 0
    noisy = _grid({0.5: [52.0, 45.0, 56.0], 1: [50.0, 49.0, 51.5], 2: [51.0, 58.0, 44.0], 4: [50.9, 50.8, 50.7]})
    g = F.findings(noisy).iloc[0]
    assert g["rank"] == "no" and g.verdict == "undecided" and g.second_lo < 0 < g.second_hi
    assert g.reason.startswith("shown above") and g.reason.endswith("leaning below second")


def test_the_peak_is_reported_only_where_the_quadratic_fits_the_cells():
    """A zig-zag the seeds reproduce exactly is not a parabola: the lack-of-fit test rejects it and no peak (with
    an interval that would ignore the model's error) is reported; a parabola plus noise is kept."""
    tf = [TF * 2.0 ** k for k in (-2, -1, 0, 1, 2) for _ in range(3)]
    seeds = [s for _ in range(5) for s in range(3)]
    zig = [v + e for v in (40, 50, 42, 52, 41) for e in (-0.1, 0.0, 0.1)]
    p = F.fitted_optimum(tf, zig, seeds, TF)
    assert p["fit_p"] < F.FIT_P_MIN and math.isnan(p["peak"]) and math.isnan(p["lo"])
    rng = np.random.default_rng(1)
    smooth = [50 - 3 * (math.log(t) - math.log(TF)) ** 2 + rng.normal(0, 0.5) for t in tf]
    q = F.fitted_optimum(tf, smooth, seeds, TF)
    assert q["fit_p"] >= F.FIT_P_MIN and q["peak"] == pytest.approx(TF, rel=0.2) and q["lo"] < q["ratio"] < q["hi"]
