"""findings.findings / peak_tuning_factor / angular_findings: the numbers the "What we found" cells are made of."""
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


def test_peak_of_an_exact_parabola_is_its_vertex():
    tf = [TF * 2.0 ** k for k in (-2, -1, 0, 1, 2)]
    acc = [50 - 3 * (math.log(t) - math.log(0.06)) ** 2 for t in tf]
    p = findings.peak_tuning_factor(tf, acc)
    assert p["peak"] == pytest.approx(0.06, rel=1e-9)


def test_peak_interval_covers_the_truth_and_narrows_with_less_noise():
    wide = findings.peak_tuning_factor(*_cols(_grid(peak_tf=0.05, noise=1.0)))
    narrow = findings.peak_tuning_factor(*_cols(_grid(peak_tf=0.05, noise=0.05)))
    assert narrow["lo"] <= 0.05 <= narrow["hi"]
    assert narrow["hi"] / narrow["lo"] < wide["hi"] / wide["lo"]
    assert narrow["peak"] == pytest.approx(0.05, rel=0.05)


def _cols(df):
    return df.tuning_factor, df.test_acc, df.seed


def test_no_interior_peak_is_nan_not_an_extrapolation():
    tf = [TF * 2.0 ** k for k in (-2, -1, 0, 1, 2)]
    assert math.isnan(findings.peak_tuning_factor(tf, [1, 2, 3, 4, 5])["peak"])  # monotone: the largest LR won
    assert math.isnan(findings.peak_tuning_factor(tf, [5, 3, 1, 3, 5])["peak"])  # opens upwards


def test_findings_verdict_margin_and_its_paired_interval():
    f = findings.findings(_grid(peak_tf=TF, noise=0.05)).iloc[0]
    assert f["rank"] == "best" and f.verdict == "holds" and f.margin > 0 and f.seeds == 3 and f.cells == 5
    assert 0 < f.ci_lo < f.margin < f.ci_hi and f.resolution == pytest.approx((f.ci_hi - f.ci_lo) / 2)
    assert f.yellow_tf == pytest.approx(TF) and f.peak_vs_yellow == pytest.approx(1, abs=0.05)
    off = findings.findings(_grid(peak_tf=2 * TF, noise=0.05)).iloc[0]  # the optimum is one cell to the right
    assert off["rank"] == "second" and off.verdict == "holds" and off.margin < 0 and off.ci_hi < 0
    assert off.best_other_tf == pytest.approx(2 * TF)
    noisy = findings.findings(_grid(peak_tf=TF * 1.05, curvature=-0.05, noise=2.0)).iloc[0]
    assert noisy.ci_lo < 0 < noisy.ci_hi  # a margin inside the seed noise: its interval holds 0
    text = findings.say_findings(findings.findings(_grid()))
    assert "3 seeds per cell" in text and "yellow" in text and "paired by seed, 95 % interval" in text


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
    assert len(rows) == 1 and rows[0]["item"] == "Table 1 (a), N = 1,000"
    assert rows[0]["verdict"].startswith("holds: best, +") and "over the best other cell" in rows[0]["verdict"]
    assert rows[0]["ci"][0] > 0 and rows[0]["resolution"] > 0 and rows[0]["word"] == "holds"
    assert rows[0]["train_minutes"] == pytest.approx(15.0) and "vs 0.0781" in rows[0]["peak_tf"]
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
    (row,) = findings.claim_rows(f, "Yun et al. 2022", "Table 1", "yellow best or second", "CIFAR-10", results=g)
    assert row["ours"] == f"yellow {f.iloc[0].yellow_mean:.2f} ± {f.iloc[0].yellow_sd:.2f}"
    assert row["paper_value"] == "yellow 92.00 (below second)"  # two paper cells read 92.5: the yellow one is third
    g.loc[g.yellow, "paper_accuracy"] = 95.0
    (row,) = findings.claim_rows(findings.findings(g), "Y", "T", "c", "d", results=g)
    assert row["paper_value"] == "yellow 95.00 (best)"
    assert findings.claim_rows(f, "Y", "T", "c", "d")[0]["paper_value"] == ""  # no sweep: no paper column


def test_the_three_verdict_words():
    """holds: best or second; no: third or lower with the paired interval to the second cell below 0, in a settled
    regime; undecided otherwise, with the reason; one or two seeds on real images decide nothing."""
    far = _grid(peak_tf=4 * TF, noise=0.05)  # the optimum two cells right of the yellow one: yellow is 3rd of 5
    f = findings.findings(far).iloc[0]
    assert f["rank"] == "no" and f.verdict == "no" and f.reason == "" and f.second_hi < 0
    noisy = findings.findings(_grid(peak_tf=4 * TF, noise=8.0, curvature=-0.3)).iloc[0]
    if noisy["rank"] == "no":
        assert noisy.verdict == "undecided" and "within the noise" in noisy.reason
    one = findings.findings(_grid(seeds=(0,)), real_data=True).iloc[0]
    assert one.verdict == "undecided" and one.reason == "1 seed on real images, 3 needed"
    assert findings.findings(_grid(seeds=(0,)), real_data=False).iloc[0].verdict == "holds"
    assert findings.verdict_text(one).startswith("undecided (1 seed on real images, 3 needed): best, ")
    assert findings.judge(False, True, settled=False) == ("undecided",
                                                          "against the claim, before the angular update settled")
    assert findings.judge(True, False) == ("undecided", "the claimed way, within the noise")
    assert findings.judge(None, False)[0] == "undecided"
    with pytest.raises(ValueError, match="verdict"):
        findings.verdict_words("reversed")


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


def test_paper_rank_reads_in_the_words_of_our_rank():
    """The paper's yellow rank (``_paper_column``), our verdict line and the README's short column use one map of
    rank words: the README's cell reads the paper's rank back from the paper_value text."""
    from repro_lib.results import publish

    assert findings.RANK_SHORT == {"best": "best", "second": "second", "no": "below second"}
    for word, short in (("best", "best"), ("second", "second"), ("below second", "3rd+")):
        assert publish._short_paper({"rank": "no", "paper_value": f"yellow 94.17 ({word})"}) == short


def test_a_log_ratio_claim_reads_as_a_ratio_in_the_short_column():
    """A claim whose estimate and interval are log ratios (``scale`` "log", the tuning rule's Δθ) shows as the ratio
    and its interval in the README's short column, not as a log ± resolution; a difference keeps "± resolution"."""
    from repro_lib.results import publish

    c = {"estimate": math.log(0.67), "ci": [math.log(0.63), math.log(0.70)], "resolution": 0.05, "scale": "log"}
    assert publish._short_ours(c) == "×0.67 [0.63, 0.70]"
    assert publish._short_ours({**c, "ci": None}) == "×0.67"
    assert publish._short_ours({"estimate": 1.94, "resolution": 2.33}) == "+1.94 ± 2.33"
