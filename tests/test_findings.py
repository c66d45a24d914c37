"""findings.findings / fitted_optimum / angular_findings: the numbers the "What we found" cells are made of."""
import math

import numpy as np
import pandas as pd
import pytest

from repro_lib.results import findings

TF = 10 / 128


def _grid(peak_tf=TF, noise=0.3, seeds=(0, 1, 2), curvature=-4.0, col_n=1000, rng=0):
    gen = np.random.default_rng(rng)
    rows = []
    for k in (-2, -1, 0, 1, 2):
        tf = TF * 2.0 ** k
        for s in seeds:
            acc = 50 + curvature * (math.log(tf) - math.log(peak_tf)) ** 2 + noise * gen.standard_normal()
            rows.append(dict(subtable="a", n=col_n, tuning_factor=tf, yellow=k == 0, seed=s, status="finished",
                             test_acc=acc, history=[{"epoch": 5, "angular_update": 0.1 * (1 + k)}]))
    return pd.DataFrame(rows)


def test_optimum_of_an_exact_parabola_is_its_vertex():
    tf = [TF * 2.0 ** k for k in (-2, -1, 0, 1, 2)]
    acc = [50 - 3 * (math.log(t) - math.log(0.06)) ** 2 for t in tf]
    p = findings.fitted_optimum(tf, acc, None, TF)
    assert p["peak"] == pytest.approx(0.06, rel=1e-9) and p["ratio"] == pytest.approx(0.06 / TF, rel=1e-9)


def test_optimum_interval_covers_the_truth_and_narrows_with_less_noise():
    wide = findings.fitted_optimum(*_cols(_grid(peak_tf=0.05, noise=1.0)), TF)
    narrow = findings.fitted_optimum(*_cols(_grid(peak_tf=0.05, noise=0.05)), TF)
    assert narrow["lo"] <= 0.05 / TF <= narrow["hi"]
    assert narrow["hi"] / narrow["lo"] < wide["hi"] / wide["lo"]
    assert narrow["peak"] == pytest.approx(0.05, rel=0.05)
    assert narrow["df"] == 15 - 3 - 2  # runs − seed blocks − (x, x²)


def test_optimum_interval_is_the_delta_method_on_the_fits_residual_error():
    """The same optimum and interval by hand with statsmodels: OLS acc ~ C(seed) + x + I(x**2), Var(−b/2c) from the
    coefficients' covariance (delta method), t(0.95, df)."""
    smf = pytest.importorskip("statsmodels.formula.api")
    from scipy import stats

    g = _grid(peak_tf=0.05, noise=0.5, rng=3)
    g["x"] = np.log2(g.tuning_factor / TF)
    fit = smf.ols("test_acc ~ C(seed) + x + I(x ** 2)", data=g).fit()
    b, c = fit.params["x"], fit.params["I(x ** 2)"]
    cov = fit.cov_params().loc[["x", "I(x ** 2)"], ["x", "I(x ** 2)"]].to_numpy()
    grad = np.array([-1 / (2 * c), b / (2 * c * c)])
    se = math.sqrt(grad @ cov @ grad)
    xs = -b / (2 * c)
    q = stats.t.ppf(0.95, fit.df_resid)
    p = findings.fitted_optimum(*_cols(g), TF)
    assert p["ratio"] == pytest.approx(2 ** xs, rel=1e-9)
    assert (p["lo"], p["hi"]) == pytest.approx((2 ** (xs - q * se), 2 ** (xs + q * se)), rel=1e-9)


def _cols(df):
    return df.tuning_factor, df.test_acc, df.seed


def test_no_interior_optimum_is_nan_not_an_extrapolation():
    tf = [TF * 2.0 ** k for k in (-2, -1, 0, 1, 2)]
    assert math.isnan(findings.fitted_optimum(tf, [1, 2, 3, 4, 5], None, TF)["peak"])  # monotone: the largest won
    up = findings.fitted_optimum(tf, [5, 3, 1, 3, 5], None, TF)  # opens upwards
    assert math.isnan(up["peak"]) and up["reason"] == "no interior maximum"


def test_findings_verdict_margin_and_its_pooled_interval():
    f = findings.findings(_grid(peak_tf=TF, noise=0.05)).iloc[0]
    assert f["rank"] == "best" and f.verdict == "holds" and f.margin > 0 and f.seeds == 3 and f.cells == 5
    assert 0 < f.ci_lo < f.margin < f.ci_hi and f.resolution == pytest.approx((f.ci_hi - f.ci_lo) / 2)
    assert f.df == 8  # (5 cells − 1)(3 seeds − 1): the pooled error, not a 2-df paired t
    assert f.yellow_tf == pytest.approx(TF) and f.peak_vs_yellow == pytest.approx(1, abs=0.05)
    assert f.optimum_verdict == "holds"
    off = findings.findings(_grid(peak_tf=2 * TF, noise=0.05)).iloc[0]  # the optimum is one cell to the right
    assert off["rank"] == "second" and off.verdict == "holds" and off.margin < 0 and off.ci_hi < 0
    assert off.best_other_tf == pytest.approx(2 * TF)
    noisy = findings.findings(_grid(peak_tf=TF * 1.05, curvature=-0.05, noise=2.0)).iloc[0]
    assert noisy.ci_lo < 0 < noisy.ci_hi  # a margin inside the seed noise: its interval holds 0
    assert noisy.verdict == "undecided" and "leaning" in noisy.reason  # the rank alone decides nothing
    text = findings.say_findings(findings.findings(_grid()))
    assert "3 seeds per cell" in text and "yellow" in text and "pooled error, 8 df" in text


def test_a_rank_alone_does_not_hold():
    """A yellow cell that ranks second by its mean but is not shown above the three cells below it is *undecided*
    (leaning second), not *holds* as under the rank-only rule it replaces (``previous_verdict``)."""
    g = _grid(peak_tf=2 * TF, noise=1.5, curvature=-0.4, rng=1)
    f = findings.findings(g).iloc[0]
    assert f["rank"] in ("best", "second") and f.previous_verdict == "holds"
    assert f.verdict == "undecided" and f.reason.startswith("shown above")


def test_findings_count_missing_runs():
    g = _grid()
    g.loc[g.yellow, "status"] = "missing"
    g.loc[g.yellow, "test_acc"] = math.nan
    f = findings.findings(g).iloc[0]
    assert f.missing == 3 and f["rank"] == "n/a" and f.verdict == "undecided" and "3 runs missing" in f.reason


def test_angular_findings_beside_eq27():
    a = findings.angular_findings(_grid(), epoch=5, keys=("subtable", "n"))
    y = a[a.yellow].iloc[0]
    assert y.angular_update == pytest.approx(0.1) and y.seeds == 3
    assert y.predicted == pytest.approx(math.acos(1 - TF)) and y.ratio == pytest.approx(0.1 / math.acos(1 - TF))


def test_dataset_label_names_the_stand_in():
    from repro_lib.config import RunConfig

    assert "stand-in" in findings.dataset_label([RunConfig(dataset="cifar10-jpeg", n=1000)])
    assert findings.dataset_label([RunConfig(n=1000)]) == "CIFAR-10"


def test_claim_rows_and_verdict_line():
    g = _grid(peak_tf=TF, noise=0.05)
    g["seconds"] = 60.0
    f = findings.findings(g)
    rows = findings.claim_rows(f, "Yun et al. 2022", "Table 1", "yellow best or second", "CIFAR-10", results=g)
    assert len(rows) == 2 and rows[0]["item"] == "Table 1 (a), N = 1,000"
    assert rows[1]["item"] == "Table 1 optimum (a), N = 1,000" and rows[1]["scale"] == "ratio"
    assert rows[0]["verdict"].startswith("holds: best; yellow − best other +") and "8 df" in rows[0]["verdict"]
    assert rows[0]["ci"][0] > 0 and rows[0]["resolution"] > 0 and rows[0]["word"] == "holds"
    assert rows[0]["rule"]["relation"] == "best or second" and len(rows[0]["contrasts"]) == 4
    assert rows[0]["train_minutes"] == pytest.approx(15.0) and "vs 0.0781" in rows[0]["peak_tf"]
    assert rows[1]["word"] == "holds" and 0.5 <= rows[1]["ci"][0] <= rows[1]["ci"][1] <= 2
    assert findings.verdict_line(f).startswith("holds 1/1 columns (yellow cell best 1)")
    assert "peak TF" in findings.verdict_line(f)  # one table: its fitted peak too
    assert findings.verdict_line(f, details=False) == "holds 1/1 columns (yellow cell best 1)"  # one of several
    below = f.assign(verdict="no", rank="no")  # a column whose yellow cell is neither best nor second
    assert findings.verdict_line(below, details=False) == "no 1/1 columns (yellow cell below second 1)"


def test_claim_rows_carry_ours_and_the_papers_column():
    """Each claim row says what we measured in the yellow cell and what the paper's own column shows (its yellow
    cell's accuracy and whether it is best or second among the paper's cells that were run)."""
    g = _grid(peak_tf=TF, noise=0.05)
    g["seconds"] = 60.0
    g["paper_lr"] = g["tuning_factor"]  # one paper cell per tuning factor
    g["paper_accuracy"] = [92.0 if y else 93.0 - 0.5 * abs(math.log2(tf / TF))  # the ±1 cells: 92.5
                           for y, tf in zip(g.yellow, g.tuning_factor)]
    f = findings.findings(g)
    row, _ = findings.claim_rows(f, "Yun et al. 2022", "Table 1", "yellow best or second", "CIFAR-10", results=g)
    assert row["ours"] == f"yellow {f.iloc[0].yellow_mean:.2f} ± {f.iloc[0].yellow_sd:.2f}"
    assert row["paper_value"] == "yellow 92.00 (below second)"  # two paper cells read 92.5: the yellow one is third
    g.loc[g.yellow, "paper_accuracy"] = 95.0
    row, _ = findings.claim_rows(findings.findings(g), "Y", "T", "c", "d", results=g)
    assert row["paper_value"] == "yellow 95.00 (best)"
    assert findings.claim_rows(f, "Y", "T", "c", "d")[0]["paper_value"] == ""  # no sweep: no paper column


def test_the_three_verdict_words():
    """holds: the yellow cell shown above all but one other cell; no: two cells shown above it (third or lower
    beyond the noise), in a settled regime; undecided otherwise, with the reason; one or two seeds on real images
    decide nothing."""
    far = _grid(peak_tf=4 * TF, noise=0.05)  # the optimum two cells right of the yellow one: yellow is 3rd of 5
    f = findings.findings(far).iloc[0]
    assert f["rank"] == "no" and f.verdict == "no" and f.reason == "" and f.second_hi < 0
    noisy = findings.findings(_grid(peak_tf=4 * TF, noise=8.0, curvature=-0.3)).iloc[0]
    if noisy["rank"] == "no":
        assert noisy.verdict == "undecided" and "leaning below second" in noisy.reason
    one = findings.findings(_grid(seeds=(0,)), real_data=True).iloc[0]
    assert one.verdict == "undecided" and one.reason == "1 seed on real images, 3 needed"
    assert findings.findings(_grid(seeds=(0,)), real_data=False).iloc[0].verdict == "undecided"  # no interval
    assert findings.verdict_text(one).startswith("undecided (1 seed on real images, 3 needed): best; ")
    assert findings.judge(False, True, settled=False) == (
        "not judged", "before the angular update settled; the measurement points against the claim")
    assert findings.judge(True, True, settled=False) == (
        "not judged", "before the angular update settled; the measurement points the claimed way")
    assert findings.judge(True, False) == ("undecided", "the claimed way, within the noise")
    assert findings.judge(None, False)[0] == "undecided"
    with pytest.raises(ValueError, match="verdict"):
        findings.verdict_words("reversed")


def test_the_regime_gate_applies_to_both_outcomes():
    """A column whose yellow cells' Δθ had not settled is *undecided* whichever way its intervals point."""
    rising = [{"epoch": e, "lr": 1.0 if e <= 40 else 0.1, "angular_update": 0.01 * e} for e in range(1, 81)]
    for peak, word in ((TF, "holds"), (4 * TF, "no")):
        g = _grid(peak_tf=peak, noise=0.05)
        assert findings.findings(g).iloc[0].verdict == word
        g["history"] = [rising] * len(g)
        f = findings.findings(g).iloc[0]
        assert f.verdict == "not judged" and "before the angular update settled" in f.reason
        assert f.optimum_verdict == "not judged"


def _hist(values, lr_drop_at):
    return [{"epoch": e + 1, "lr": 1.0 if e + 1 < lr_drop_at else 0.1, "angular_update": v}
            for e, v in enumerate(values)]


def test_regime_settled_before_the_first_decay_or_not():
    flat = findings.regime([_hist([0.5] * 5 + [0.2] * 35 + [0.02] * 40, lr_drop_at=41)])
    assert flat["settled"] and flat["drift"] == pytest.approx(0) and flat["window"] == (33, 40)
    rising = findings.regime([_hist([0.01 * e for e in range(1, 41)] + [0.01] * 40, lr_drop_at=41)])
    assert rising["settled"] is False and rising["drift"] > 0.1
    assert findings.regime([[{"epoch": 1, "test_acc": 10.0}]])["settled"] is None  # no Δθ or LR: not measured
    g = _grid()
    g["history"] = [_hist([0.2] * 40 + [0.02] * 40, 41)] * len(g)
    g["seconds"] = 1.0
    row = findings.findings(g).iloc[0]
    assert row.settled and "settled (Δθ drift 0 % over epochs 33–40" in findings.regime_text(row)
    assert findings.claim_rows(findings.findings(g), "p", "Table 1", "c", "d", results=g)[0]["regime"].startswith(
        "settled")


def test_diverged_runs_are_left_out_and_counted():
    g = _grid(noise=0.05)
    first = g.index[g.yellow][0]
    g.loc[first, "status"] = "diverged"
    g.loc[first, "test_acc"] = math.nan
    f = findings.findings(g).iloc[0]
    assert f.diverged == 1 and f.seeds == 2 and f.seeds_max == 3
    assert "1 diverged run left out" in findings.say_findings(findings.findings(g))
    assert "1 diverged runs left out" in findings.verdict_line(findings.findings(g))


def test_column_label_names_the_papers_column_and_ours():
    col = pd.DataFrame({"n": [1000] * 2, "batch_size": [128] * 2, "paper_n": [50000] * 2,
                        "paper_batch_size": [1024] * 2})
    assert findings.column_label(col, "batch_size") == "paper B = 1,024 (ours: B = 128, N = 1,000)"
    same = col.assign(paper_n=1000, paper_batch_size=128)
    assert findings.column_label(same, "n") == "N = 1,000"


def test_paper_rank_words():
    """The paper's yellow rank (``_paper_column``) and our verdict line use one map of rank words."""
    assert findings.RANK_SHORT == {"best": "best", "second": "second", "no": "below second"}


def test_a_deciding_interval_reads_as_lo_hi_and_a_log_ratio_as_a_ratio():
    """The deciding interval as tables show it (``publish.deciding_text``): a difference as estimate [lo, hi] named
    by its contrast, a ratio as ×estimate [lo, hi], a log ratio (``scale`` "log", the tuning rule's Δθ)
    exponentiated; never "± half-width"."""
    from repro_lib.results import publish

    c = {"estimate": math.log(0.67), "ci": [math.log(0.63), math.log(0.70)], "resolution": 0.05, "scale": "log"}
    assert publish.deciding_text(c) == "×0.67 [0.63, 0.70]"
    assert publish.deciding_text({**c, "ci": None}) == "×0.67"
    d = {"estimate": -3.2, "ci": [-8.14, 1.74], "deciding": "SA-SGD − SGD", "verdict": "not judged"}
    assert publish.deciding_text(d) == "SA-SGD − SGD -3.20 [-8.14, +1.74]"
    g = {"estimate": 1.61, "ci": [0.46, 2.75], "rank": "best", "rule": {"relation": "best or second"}}
    assert publish.deciding_text(g) == "yellow − second other +1.61 [+0.46, +2.75]"
    a = {"estimate": 1.0, "ci": [0.1, 2.0], "claim": "final test accuracy: TEXP−− < TEXP", "rule": {"relation": "<"}}
    assert publish.deciding_text(a) == "TEXP−− − TEXP +1.00 [+0.10, +2.00]"
