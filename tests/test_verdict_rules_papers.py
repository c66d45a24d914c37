"""The decision rules of the real-data claims outside the Yun et al. grids (``repro_lib.results.rules``): Li & Arora's
"≈" by TOST with the margin calibrated on the twin runs and Fig. 2 read as the schedule the paper plots, Sec. 6's
non-inferiority to every other λ, back-matching's convergence gate on both outcomes, AdamP's gates and intersections,
and every published claim of these notebooks re-derived from its own ``rule``, ``ci`` and ``gate_ok``."""
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from repro_lib.papers.adamp import report as AR
from repro_lib.papers.backmatching import report as BR
from repro_lib.papers.li_arora import exp_lr as E
from repro_lib.papers.li_arora import report as R
from repro_lib.papers.yun2022 import section6_report as S6
from repro_lib.results import findings, rules

ROOT = Path(__file__).resolve().parents[1]
MINE = ("li_arora_preresnet32", "yun2022_section6", "backmatching_vgg", "adamp_cifar", "adamp_delta", "adamp_imagenet",
        "tuning_rule")


# ------------------------------------------------------------------------------------------------ Li & Arora
def test_fig2_is_read_as_the_schedule_the_paper_plots_and_the_exact_twin_is_a_rounding_check():
    """Sec. 2.3 / Sec. 4: the paper's runs ignore the one-time momentum correction, so Fig. 2 compares TEXP without
    it to step decay; exact TEXP is step decay in exact arithmetic (a twin), not a claim of the paper."""
    fig2 = [c for c in R.CLAIMS if c[0] == "Fig. 2"]
    assert fig2 == [("Fig. 2", "TEXP (no correction)", "step decay + WD", "≈")]
    assert E.PRERESNET_RUNS["TEXP (no correction)"][2] == {"momentum_correction": False, "init_velocity": False}
    assert E.PRERESNET_RUNS["TEXP"][2] == {}  # the exact construction: correction and initial velocity
    assert ("TEXP", "step decay + WD") in R.TWINS and ("TEXP", "step decay + WD", "≈") not in [c[1:] for c in R.CLAIMS]
    assert "no momentum correction" in E.PAPER_READING[("TEXP (no correction)", "step decay + WD")]


def test_twin_calibration_is_the_root_mean_square_of_the_twins_per_seed_differences():
    per_seed = pd.DataFrame({"TEXP": [40.0, 38.0, 41.0, np.nan], "step decay + WD": [39.0, 40.0, 41.5, 37.0],
                             "exp-cosine": [45.0, 44.0, np.nan, np.nan], "cosine + WD": [44.0, 46.0, 43.0, np.nan]})
    cal = R.twin_calibration(per_seed)
    d = np.array([1.0, -2.0, -0.5, 1.0, -2.0])  # every seed pair of both twins
    assert cal["n"] == 5 and cal["pooled_rms"] == pytest.approx(math.sqrt(np.mean(d ** 2)))
    assert cal["margin"] == round(cal["pooled_rms"], 1)
    assert list(cal["pairs"]["n"]) == [3, 2]


def test_the_li_arora_margin_is_the_published_twins_calibration():
    """The rule's margin is what the calibration gives on the published per-seed records (set after them, and
    says so)."""
    path = ROOT / "reports" / "cpu" / "li_arora_preresnet32" / "final_test_acc_per_seed.csv"
    if not path.exists():
        pytest.skip("not published")
    cal = R.twin_calibration(pd.read_csv(path, index_col=0))
    rule = rules.rule("li_arora ≈")
    assert cal["n"] >= 20 and rule.margin == cal["margin"] == R.EQUIVALENCE_MARGIN
    assert rule.declared == "after" and "±1" in rule.previous and rule.level == 0.90


def _li_per_seed(shift, n=8, noise=0.4, spread=3.0):
    rng = np.random.default_rng(1)
    base = 39 + spread * rng.standard_normal(n)
    return pd.DataFrame({"step decay + WD": base, "TEXP (no correction)": base + shift + noise * rng.standard_normal(n)})


@pytest.mark.parametrize("relation,shift,settled_word", [(">", 3.0, "holds"), (">", -3.0, "no"),
                                                         ("≈", 0.0, "holds"), ("≈", 6.0, "no")])
def test_the_li_arora_gate_leaves_both_outcomes_not_judged(relation, shift, settled_word):
    spec = [("Fig. 2", "TEXP (no correction)", "step decay + WD", relation)]
    per_seed = _li_per_seed(shift)
    settled = R.judged_contrasts(per_seed, spec, settled=True).iloc[0]
    assert settled.word == settled_word
    gated = R.judged_contrasts(per_seed, spec, settled=False, minutes={"step decay + WD": 10.0}).iloc[0]
    assert gated.word == "not judged" and gated.reason.startswith("before ‖w‖²/η̃ settled; the interval ")
    assert gated.reason.endswith("the claimed way" if settled_word == "holds" else "against the claim")
    assert gated.interval["gate_ok"] is False and gated.to_decide.startswith("the regime the claim speaks of")
    assert gated.interval["rule"]["gate"].startswith("‖w‖²/η̃ settled")
    # the rule it replaced let a result the claimed way through an unsettled regime
    assert gated.previous_word == ("holds" if settled_word == "holds" else "undecided")


def test_an_equivalence_is_judged_by_tost_on_the_90_percent_interval():
    """A difference whose 95 % interval reaches past the margin but whose 90 % interval lies inside holds (TOST at
    α = 0.05 per side); the rows' means are over the paired seeds only, so they reproduce the difference."""
    m = R.EQUIVALENCE_MARGIN
    pattern = np.array([0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 0.8])
    half90 = stats.t.ppf(0.95, len(pattern) - 1) * pattern.std(ddof=1) / math.sqrt(len(pattern))
    half95 = stats.t.ppf(0.975, len(pattern) - 1) * pattern.std(ddof=1) / math.sqrt(len(pattern))
    d = pattern - pattern.mean() + (m - 0.05 - half90)  # the 90 % interval ends 0.05 inside the margin
    base = pd.Series([38.0, 41.0, 36.0, 40.0, 39.5, 42.0, 37.0, 40.5])
    per_seed = pd.DataFrame({"TEXP": base, "TEXP (no correction)": base + d})
    assert d.mean() + half90 <= m < d.mean() + half95  # the case TOST and a 95 % interval read differently
    r = R.judged_contrasts(per_seed, [("Sec. 2.3", "TEXP (no correction)", "TEXP", "≈")], settled=True).iloc[0]
    assert r.word == "holds" and r.level == 0.90 and r.hi == pytest.approx(d.mean() + half90)
    unpaired = per_seed.assign(TEXP=per_seed.TEXP.where(per_seed.index != 0))  # a seed without its pair
    u = R.judged_contrasts(unpaired, [("Sec. 2.3", "TEXP (no correction)", "TEXP", "≈")], settled=True).iloc[0]
    assert u.seeds == 7 and u.value_a - u.value_b == pytest.approx(u["diff"])


# ------------------------------------------------------------------------------------------------ Sec. 6
def _wd_per_seed(gaps: dict, sd: dict, n=3):
    """Full-data accuracy per seed (rows) and λ (columns): λ 4e-4 (the prediction) and the others at the given mean
    gap below it, with a per-seed jitter of the given size."""
    rng = np.random.default_rng(0)
    base = 44 + rng.standard_normal(n)
    out = {4e-4: base}
    for wd, g in gaps.items():
        out[wd] = base - g + sd[wd] * np.array([1.0, -1.0, 0.0][:n])
    return pd.DataFrame(out)


def test_sec6_holds_only_against_every_other_lambda():
    tight = {2.5e-5: 0.1, 1e-4: 0.1, 1.6e-3: 0.1}
    every = S6.noninferior_to_every(_wd_per_seed({2.5e-5: 2.0, 1e-4: 1.5, 1.6e-3: 1.1}, tight), 4e-4)
    assert every["word"] == "holds" and set(every["contrasts"]) == {2.5e-5, 1e-4, 1.6e-3}
    # the best other λ tight, another λ's interval wide: the intersection is undecided, naming it
    wide = S6.noninferior_to_every(_wd_per_seed({2.5e-5: 2.0, 1e-4: 1.5, 1.6e-3: 1.1},
                                                {2.5e-5: 4.0, 1e-4: 0.1, 1.6e-3: 0.1}), 4e-4, minutes_per_seed=10.0)
    assert wide["contrasts"][1.6e-3].lo > -1 and wide["word"] == "undecided"
    assert "2.5·10⁻⁵" in wide["reason"] and "1.6·10⁻³" not in wide["reason"] and wide["to_decide"]
    # any λ shown more than 1 point above the prediction: no
    worse = S6.noninferior_to_every(_wd_per_seed({2.5e-5: 2.0, 1e-4: -3.0, 1.6e-3: 1.1}, tight), 4e-4)
    assert worse["word"] == "no"
    for e in (every, wide, worse):  # the published ci alone gives the verdict by the rule
        ci = e["ci"]  # the deciding contrast's own interval: the lowest lower bound, or one wholly below −1
        assert ci is e["contrasts"][e["deciding"]]
        assert ci.lo == min(d.lo for d in e["contrasts"].values()) or ci.hi < -1
        assert rules.decide(e["rule"], ci=(ci.lo, ci.hi), gate_ok=None, seeds=ci.n)[0] == e["word"]


# ------------------------------------------------------------------------------------------------ back-matching
def _bm(train_acc, sa=52.0, seeds=(0, 1, 2)):
    from types import SimpleNamespace

    acc = {"sgd": 45.0, "lars": 44.0, "lsalr": 46.0, "scale_amended_sgd": sa}
    paper = {"sgd": 92.34, "lars": 91.81, "lsalr": 92.58, "scale_amended_sgd": 92.45}
    cfg = SimpleNamespace(dataset="cifar10-jpeg", synthetic=False, n_test=2000)
    hist = [{"epoch": e, "lr": 0.1 if e <= 10 else 0.01, "angular_update": 0.3, "train_acc": train_acc}
            for e in range(1, 21)]
    return pd.DataFrame([dict(paper_dataset="cifar10", model="vgg11_bn", method=m, seed=s, status="finished",
                              test_acc=a + 0.3 * s + (0.2 * s * s if m == "sgd" else 0.0), paper_accuracy=paper[m],
                              cfg=cfg, seconds=120.0, history=hist) for m, a in acc.items() for s in seeds])


@pytest.mark.parametrize("sa,word", [(52.0, "holds"), (38.0, "no")])
def test_backmatching_gate_applies_to_both_outcomes(sa, word):
    (conv,) = BR.column_claims(_bm(99.0, sa))
    assert conv["word"] == word and conv["gate_ok"] is True
    (early,) = BR.column_claims(_bm(60.0, sa))  # below 90 % train accuracy: the regime Table 1 speaks of not reached
    assert early["word"] == "not judged" and early["gate_ok"] is False and "not converged" in early["regime"]
    assert early["previous_word"] == ("holds" if word == "holds" else "undecided")  # the old one-way gate
    assert early["to_decide"].startswith("the regime the claim speaks of") and "+0.11" in early["to_decide"]
    assert early["rule"]["relation"] == ">" and "converged" in early["rule"]["gate"]
    assert early["paper_effect"] == pytest.approx(0.11)  # the paper's smallest margin over the rivals (SGD)
    # the deciding contrast's own interval, named: the lowest lower bound (none lies below 0 here)
    assert early["ci"] == early["contrasts"][early["deciding"].split(" − ")[1]]
    assert early["ci"][0] == min(v[0] for v in early["contrasts"].values())
    assert early["ours"].startswith("means of 3 seeds") and early["paper_value"].startswith("medians of 3 runs")


# ------------------------------------------------------------------------------------------------ AdamP
def test_adamp_norm_growth_gate_applies_to_both_outcomes():
    runs = pd.DataFrame([dict(setting="Table 1", optimizer=o, seed=s, status="finished", norm_growth=g + 0.01 * s,
                              test_acc=50.0, seconds=60.0)
                         for o, g in (("sgdp", -0.5), ("sgd", -0.2)) for s in range(3)])
    (r,) = AR.cifar_contrasts(runs).itertuples()  # SGD's norm shrank: no growth for the projection to slow
    assert r.word == "not judged" and "did not grow" in r.reason
    assert r.interval["gate_ok"] is False and r.interval["rule"]["relation"] == "<"
    grown = runs.assign(norm_growth=[0.4, 0.41, 0.42, 3.0, 3.01, 3.02])
    (g,) = AR.cifar_contrasts(grown).itertuples()
    assert g.word == "holds" and g.interval["gate_ok"] is True


# ------------------------------------------------------------------------------------------------ published claims
def _published(name):
    path = ROOT / "reports" / "cpu" / name / "claims.json"
    return json.loads(path.read_text()) if path.exists() else []


@pytest.mark.parametrize("name", MINE)
def test_every_published_real_data_claim_follows_from_its_rule_ci_and_gate(name):
    claims = [c for c in _published(name) if "synthetic" not in c.get("data", "")]
    if not claims:
        pytest.skip("not published")
    for c in claims:
        assert "rule" in c and "ci" in c and "gate_ok" in c, c["item"]
        fields = {k: v for k, v in c["rule"].items() if k != "level"}
        rule = rules.Rule(**fields)
        if rule.relation in ("best or second", "best"):
            word, _ = rules.decide(rule, contrasts=[tuple(v) for v in c["contrasts"].values()], gate_ok=c["gate_ok"],
                                   seeds=c["seeds"])
        else:
            ci = c["ci"] if c["ci"] and None not in c["ci"] else None
            word, _ = rules.decide(rule, ci=ci, gate_ok=c["gate_ok"], seeds=c["seeds"])
        assert word == c["word"], (c["item"], c["claim"], word, c["word"])
        if c["word"] in ("undecided", "not judged"):
            assert c.get("to_decide"), (c["item"], c["claim"])
