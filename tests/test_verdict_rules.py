"""The decision rules (``repro_lib.results.rules``): every kind of claim decided from its interval, gates both ways,
the pooled grid contrasts and the random-effects summary against reference implementations, and every published
claim re-derived from the numbers it publishes."""
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from repro_lib.results import findings as F
from repro_lib.results import rules as R

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("key, ci, word", [
    ("paired >", (0.1, 2.0), "holds"), ("paired >", (-2.0, -0.1), "no"), ("paired >", (-0.5, 2.0), "undecided"),
    ("paired <", (-2.0, -0.1), "holds"), ("paired <", (0.1, 2.0), "no"),
    ("sec6 non-inferior", (-0.9, 2.0), "holds"), ("sec6 non-inferior", (-3.0, -1.1), "no"),
    ("sec6 non-inferior", (-1.5, 1.0), "undecided"),
    ("grid optimum", (0.6, 1.9), "holds"), ("grid optimum", (0.2, 0.45), "no"), ("grid optimum", (2.1, 3.0), "no"),
    ("grid optimum", (0.3, 1.2), "undecided"),
    ("shared angle", (1.05, 1.2), "holds"), ("shared angle", (1.3, 2.0), "no"), ("shared angle", (1.1, 1.6),
                                                                                  "undecided"),
])
def test_each_kind_decides_from_its_interval(key, ci, word):
    assert R.decide(R.rule(key), ci=ci)[0] == word


def test_equivalence_is_tost_inside_the_margin():
    rule = R.Rule("≈", "TOST", margin=1.0)
    assert rule.level == 0.90 and rule.alpha == 0.05
    assert R.decide(rule, ci=(-0.9, 0.9))[0] == "holds"
    assert R.decide(rule, ci=(1.1, 3.0))[0] == "no" and R.decide(rule, ci=(-3.0, -1.1))[0] == "no"
    assert R.decide(rule, ci=(-0.5, 1.5))[0] == "undecided"


@pytest.mark.parametrize("contrasts, word", [
    ([(0.1, 1), (0.2, 2), (0.3, 3), (-1, 1)], "holds"),      # above all but one: best or second shown
    ([(0.1, 1), (0.2, 2), (-1, 1), (-1, 1)], "undecided"),   # above two of four: a rank, not a showing
    ([(-2, -0.1), (-3, -0.2), (-1, 1), (0.1, 1)], "no"),     # two cells shown above yellow
    ([(-2, -0.1), (-1, 1), (-1, 1), (0.1, 1)], "undecided"),  # one cell above: could still be second
])
def test_grid_best_or_second_needs_intervals_both_ways(contrasts, word):
    assert R.decide(R.rule("grid best or second"), contrasts=contrasts)[0] == word


def test_grid_best_needs_every_other_cell_below():
    rule = R.rule("grid best")
    assert R.decide(rule, contrasts=[(0.1, 1), (0.2, 2)])[0] == "holds"
    assert R.decide(rule, contrasts=[(0.1, 1), (-1, 2)])[0] == "undecided"
    assert R.decide(rule, contrasts=[(0.1, 1), (-2, -0.5)])[0] == "no"


@pytest.mark.parametrize("ci, lean", [((0.5, 2.0), "points the claimed way"),
                                      ((-2.0, -0.5), "points against the claim"), ((-0.5, 2.0), "holds 0")])
def test_a_gate_applies_to_every_outcome_and_says_which_way_the_interval_points(ci, lean):
    word, reason = R.decide(R.rule("paired >"), ci=ci, gate_ok=False, gate_words="before training converged")
    assert word == "not judged" and reason.startswith("before training converged; ") and lean in reason
    assert R.decide(R.rule("paired >"), ci=ci, gate_ok=None)[0] in ("holds", "no", "undecided")  # not measured
    grid = R.decide(R.rule("grid best or second"), contrasts=[(0.1, 1), (0.2, 2), (0.3, 3), (-1, 1)], gate_ok=False)
    assert grid[0] == "not judged" and "claimed way" in grid[1]
    few = R.decide(R.rule("paired >"), ci=ci, gate_ok=False, seeds=2)  # the regime first: not judged, and why
    assert few == ("not judged", "before the regime the claim speaks of was reached; 2 seeds on real images, 3 needed")


def test_the_verdict_words_are_one_vocabulary():
    from repro_lib.results import publish

    assert F.VERDICTS == ("holds", "no", "undecided", "not judged") and R.NOT_JUDGED == F.NOT_JUDGED
    assert publish.verdict_word("not judged (before Δθ settled; the interval points the claimed way): x") == \
        "not judged"
    assert F.judge(True, True, settled=False)[0] == "not judged" == F.judge(False, False, settled=False)[0]
    row = {"paper": "p", "item": "i", "claim": "c", "data": "d", "seeds": 3, "verdict": "undecided (x): y",
           "gate_ok": False}
    got = publish.normalized(row)
    assert got["word"] == "not judged"
    assert got["verdict"] == "not judged (the regime the claim speaks of was not reached; x): y"


def test_few_seeds_on_real_images_decide_nothing_and_bad_rules_are_refused():
    assert R.decide(R.rule("paired >"), ci=(1, 2), seeds=2) == ("undecided", "2 seeds on real images, 3 needed")
    with pytest.raises(ValueError, match="margin"):
        R.Rule("≈", "t")
    with pytest.raises(ValueError, match="relation"):
        R.Rule("≫", "t")
    with pytest.raises(ValueError, match="rule"):
        R.rule("no such rule")


def test_every_rule_states_its_test_reason_and_when_it_was_declared():
    for key, rule in R.RULES.items():
        f = rule.fields()
        assert f["test"] and f["reason"] and f["declared"] in ("before", "after"), key
        assert f["level"] == pytest.approx(1 - 2 * f["alpha"]), key
        if rule.declared == "after" and rule.previous:
            assert len(rule.previous) > 10, key


def test_pooled_contrasts_are_statsmodels_ols_contrasts():
    """accuracy ~ C(cell) + C(seed): the contrast yellow − cell, its t interval on the residual df, by statsmodels'
    own OLS (the reference) and by ``findings.pooled_contrasts``; unbalanced (one run missing) as well."""
    smf = pytest.importorskip("statsmodels.formula.api")
    rng = np.random.default_rng(0)
    cells, seeds = [0.25, 0.5, 1.0, 2.0, 4.0], [0, 1, 2]
    per_seed = pd.DataFrame({c: 50 - 2 * math.log2(c) ** 2 + rng.normal(0, 1, 3) + np.array([0.5, -0.3, 0.1])
                             for c in cells}, index=seeds)
    per_seed.iloc[2, 4] = np.nan  # one missing run
    got = F.pooled_contrasts(per_seed, 1.0)
    long = per_seed.stack().rename("acc").reset_index().rename(columns={"level_0": "seed", "level_1": "cell"})
    long["cell"] = long["cell"].map(lambda c: f"c{c}")
    fit = smf.ols("acc ~ C(cell, Treatment('c1.0')) + C(seed)", data=long).fit()
    for c in (0.25, 0.5, 2.0, 4.0):
        name = f"C(cell, Treatment('c1.0'))[T.c{c}]"
        lo, hi = fit.conf_int().loc[name]
        d = got[c]
        assert d.diff == pytest.approx(-fit.params[name], abs=1e-9)
        assert (d.lo, d.hi) == pytest.approx((-hi, -lo), abs=1e-9)
        assert d.df == fit.df_resid == 7
    assert got[0.25].sd == pytest.approx(math.sqrt(2 * fit.scale))


def test_pooled_error_with_two_cells_is_the_paired_t():
    a, b = {0: 50.0, 1: 51.2, 2: 49.1}, {0: 49.0, 1: 50.1, 2: 48.7}
    pooled = F.pooled_contrasts(pd.DataFrame({"y": a, "o": b}), "y")["o"]
    paired = F.difference(a, b)
    assert (pooled.lo, pooled.hi) == pytest.approx((paired.lo, paired.hi))


def test_random_effects_pooling_is_dersimonian_laird():
    from repro_lib.papers.yun2022 import summary

    e = np.array([0.5, -0.2, 1.3, -1.0, 0.1])
    s = np.array([0.4, 0.6, 0.5, 0.7, 0.3])
    w = 1 / s ** 2
    fixed = (w * e).sum() / w.sum()
    q = (w * (e - fixed) ** 2).sum()
    tau2 = max(0.0, (q - (len(e) - 1)) / (w.sum() - (w ** 2).sum() / w.sum()))
    wr = 1 / (s ** 2 + tau2)
    est, se = (wr * e).sum() / wr.sum(), math.sqrt(1 / wr.sum())
    p = summary.pooled(e, s)
    assert p["estimate"] == pytest.approx(est) and p["se"] == pytest.approx(se) and p["tau2"] == pytest.approx(tau2)
    assert (p["lo"], p["hi"]) == pytest.approx((est - 1.959964 * se, est + 1.959964 * se), rel=1e-5)
    assert math.isnan(summary.pooled([1.0], [0.5])["estimate"])


def test_seeds_needed_is_the_smallest_t_interval_inside_the_target():
    from scipy import stats

    n = F.seeds_needed(2.0, 1.0)
    assert stats.t.ppf(0.975, n - 1) * 2.0 / math.sqrt(n) <= 1.0 < stats.t.ppf(0.975, n - 2) * 2.0 / math.sqrt(n - 1)
    assert F.seeds_needed(2.0, 0.001) is None and F.seeds_needed(2.0, 0.0) is None
    d = F.difference({s: 40 + 0.3 * s for s in range(5)}, {s: 40 + 0.1 * s + (s % 2) for s in range(5)})
    text = F.decide_text(d, ">", minutes_per_seed=2.0)
    assert "seeds" in text and ("more" in text or "no seed budget" in text)
    gated = F.decide_text(d, ">", gated=True, gate_fix="a longer first phase")
    assert gated == "the regime the claim speaks of: a longer first phase"


def test_ratio_interval_is_a_t_interval_of_the_log_over_seeds():
    from scipy import stats

    r = pd.Series({0: 1.6, 1: 1.8, 2: 1.75})
    d = F.ratio_interval(r)
    logs = np.log(r.to_numpy())
    half = stats.t.ppf(0.95, 2) * logs.std(ddof=1) / math.sqrt(3)
    assert d.diff == pytest.approx(math.exp(logs.mean()))
    assert (d.lo, d.hi) == pytest.approx((math.exp(logs.mean() - half), math.exp(logs.mean() + half)))
    assert d.level == 0.90 and not F.ratio_interval(pd.Series({0: 1.5})).has_interval


# ------------------------------------------------------------------------------- every published claim, re-derived
def _published_claims():
    """(notebook, claim) of every published claim that has a run behind it (``publish.not_run`` left out)."""
    from repro_lib.results.publish import not_run

    for path in sorted((ROOT / "reports").glob("*/*/claims.json")):
        for c in json.loads(path.read_text()):
            if not not_run(c):
                yield path.parent.name, c


_DETERMINISTIC = ("exact arithmetic", "synthetic toy", "synthetic images")


def _real(c) -> bool:
    return not str(c.get("data", "")).startswith(_DETERMINISTIC)


def test_every_real_data_claim_carries_its_rule_and_interval():
    missing = [f"{nb}: {c['item']}" for nb, c in _published_claims()
               if _real(c) and c.get("word") in ("holds", "no") and not ("rule" in c and "ci" in c)]
    assert not missing, f"decided real-data claims without rule and ci: {missing}"


def test_every_published_verdict_follows_from_its_interval_by_its_rule():
    """Re-derive each published *holds* / *no* / *not judged* from the claim's own ``rule``, ``ci`` (or
    ``contrasts``) and ``gate_ok``: the published word must be what the rule gives; an *undecided* must not be
    decidable by it."""
    checked, wrong = 0, []
    for nb, c in _published_claims():
        if "rule" not in c or c.get("word") not in F.VERDICTS:
            continue
        f = c["rule"]
        rule = R.Rule(f["relation"], f["test"], margin=f.get("margin"), alpha=f["alpha"])
        contrasts = list((c.get("contrasts") or {}).values()) or None
        ci = c.get("ci")
        word, _ = R.decide(rule, ci=tuple(ci) if ci and None not in ci else None, contrasts=contrasts,
                           gate_ok=c.get("gate_ok"), seeds=c.get("seeds"), real_data=_real(c))
        checked += 1
        if c["word"] in ("holds", "no", "not judged") and word != c["word"]:
            wrong.append(f"{nb}: {c['item']}: published {c['word']}, rule gives {word}")
        if c["word"] == "undecided" and word in ("holds", "no", "not judged"):
            wrong.append(f"{nb}: {c['item']}: published undecided, rule gives {word}")
    assert not wrong, wrong
    assert checked > 0


def test_every_undecided_real_data_claim_says_what_would_decide_it():
    silent = [f"{nb}: {c['item']}" for nb, c in _published_claims()
              if _real(c) and c.get("word") == "undecided" and "rule" in c and not c.get("to_decide")
              and not str(c.get("verdict", "")).startswith("undecided (no finished run")]
    assert not silent, silent


def test_every_claim_whose_gate_failed_is_not_judged_and_carries_its_regime():
    """A failed gate reads *not judged* (never *undecided*) in claims.json, and every claim whose rule has a gate
    carries the measured regime (``regime``) and, where it is not judged, says which way its interval points."""
    wrong = []
    for nb, c in _published_claims():
        gate = (c.get("rule") or {}).get("gate", "none")
        if c.get("gate_ok") is False and c.get("word") != "not judged":
            wrong.append(f"{nb}: {c['item']}: gate failed, published {c.get('word')}")
        if gate != "none" and _real(c) and not c.get("regime"):
            wrong.append(f"{nb}: {c['item']}: a gate without its measured regime")
        if c.get("word") == "not judged" and not any(w in c["verdict"] for w in (
                "points", "decides neither way", "within the noise", "holds 0", "no interval", "no fitted optimum",
                "needed")):
            wrong.append(f"{nb}: {c['item']}: not judged without saying which way: {c['verdict'][:80]}")
    assert not wrong, wrong


# ------------------------------------------------------------------------- the numbers the tables show, checked
_NUMBER = re.compile(r"[-+−]?\d+\.\d+")


def _values(c: dict) -> set[float]:
    """Every number a claim publishes as its result: its estimate and ci (a log ratio also exponentiated), every
    contrast's bounds, and the numbers written in its verdict."""
    vals = []
    for v in [c.get("estimate"), *(c.get("ci") or []),
              *(b for pair in (c.get("contrasts") or {}).values() for b in (pair or []))]:
        if isinstance(v, (int, float)) and math.isfinite(v):
            vals += [v, math.exp(v)] if c.get("scale") == "log" else [v]
    vals += [float(x.replace("−", "-")) for x in _NUMBER.findall(str(c.get("verdict", "")))]
    return {round(v, 2) for v in vals}


def _shown(text: str) -> list[float]:
    """The decimal numbers of a table cell (counts and labels without a decimal point are not results)."""
    return [round(float(x.replace("−", "-")), 2) for x in _NUMBER.findall(text)]


def number_disagreements(rows) -> list[str]:
    """``rows``: (where, the text a reader sees for a claim group, its claims): every decimal number shown must be
    one the claims publish (:func:`_values`)."""
    bad = []
    for where, text, claims in rows:
        known = set().union(*(_values(c) for c in claims)) if claims else set()
        bad += [f"{where}: {x:+.2f} in {text!r} is in none of its claims" for x in _shown(text) if x not in known
                and -x not in known and not any(abs(x - k) <= 0.011 for k in known)]
    return bad


def test_a_claim_with_several_contrasts_shows_one_of_them_as_its_interval():
    """``ci`` of a claim with contrasts is the deciding contrast's own interval, never bounds mixed from two."""
    mixed = []
    for nb, c in _published_claims():
        cs = [tuple(v) for v in (c.get("contrasts") or {}).values() if v and None not in v]
        ci = c.get("ci")
        if cs and ci and None not in ci and not any(ci == pytest.approx(list(v), abs=1e-9) for v in cs):
            mixed.append(f"{nb}: {c['item']}: ci {ci} is none of its contrasts")
    assert not mixed, mixed


def test_every_number_in_the_results_tables_is_one_its_claims_publish(monkeypatch):
    """README.md's table and bottom line, the book's landing page (``publish.summary``, the same text) and
    reports/README.md (its verdict and deciding-interval columns): each number shown for a claim appears in that
    claim's verdict, contrasts, ci or estimate."""
    from repro_lib.results import publish

    monkeypatch.chdir(ROOT)
    reports = "reports"
    rows = []
    for s in publish.sections(reports):
        rows.append((f"README {s['section']}", publish._found(s["claims"]), s["claims"]))
    every = [c for s in publish.sections(reports) for c in s["claims"]]
    pooled = [c for c in every if str(c["item"]).startswith("Pooled")]
    rows.append(("README bottom line", publish.bottom_line(reports).split(" Of ")[0], pooled))
    # reports/README.md as written: each row's deciding-interval column against the claim of that row
    claims = {(p.parent.name, c["item"], c["claim"]): c for p in sorted((ROOT / reports).glob("*/*/claims.json"))
              for c in json.loads(p.read_text())}
    at = publish.COLUMNS.index("deciding interval")
    for line in (ROOT / reports / "README.md").read_text().splitlines():
        cells = [x.strip() for x in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != len(publish.COLUMNS) or cells[0] in ("paper", "---"):
            continue
        nb = re.search(r"\[([\w-]+)\]", cells[-1]).group(1)
        c = claims.get((nb, cells[1], cells[2].replace("\\|", "|")))
        if c is not None:
            rows.append((f"reports/README.md {nb} {cells[1]}", cells[at], [c]))
    assert len(rows) > 60
    bad = number_disagreements(rows)
    assert not bad, "\n".join(bad)
    readme = (ROOT / "README.md").read_text()
    assert publish.summary(reports) in readme  # the README shows exactly what was checked


def test_the_number_check_catches_a_composite_interval():
    """The back-matching case: a claim whose ``ci`` mixed two contrasts' bounds shows a number none of them has."""
    c = {"estimate": -3.2, "ci": [-8.14, 1.74], "contrasts": {"SGD": [-8.14, 1.74], "LARS": [-5.0, -0.63]},
         "verdict": "not judged (…): SA-SGD − SGD -3.20 [-8.14, +1.74]"}
    assert number_disagreements([("x", "-3.20 ± 3.75", [c])])
    assert not number_disagreements([("x", "SA-SGD − SGD -3.20 [-8.14, +1.74]", [c])])
