"""The reader's view of the four AdamP notebooks (``repro_lib.papers.adamp.report`` and the published copies under
``reports/``): verdicts in three words with our value and the paper's, tables for people, figures shown once, a
computed "What we found"."""
import base64
import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from repro_lib.config import RunConfig
from repro_lib.papers.adamp import report as R
from repro_lib.papers.adamp import toys as T
from repro_lib.results import findings, publish

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ("adamp_toys", "adamp_cifar", "adamp_delta", "adamp_imagenet")
PUBLISHED = sorted(p for p in (ROOT / "reports").glob("*/adamp_*.ipynb"))


# ------------------------------------------------------------------------------------------------ tables, verdicts
def test_show_drops_empty_columns_writes_integers_as_integers_and_caps_the_width():
    df = pd.DataFrame({"a": [1.0, 2.0], "b": [np.nan, np.nan], "c": [0.123456, 1e-7], "d": ["x", "y"]})
    html = R.show(df, caption="cap").to_html()
    assert ">b<" not in html and "cap" in html
    assert ">1<" in html and ">2<" in html and "1.000000" not in html
    assert "0.123" in html and "1·10⁻⁷" in html and "e-07" not in html  # never a raw exponent
    with pytest.raises(ValueError, match="9 columns > 8"):
        R.show(pd.DataFrame({f"c{i}": [1] for i in range(9)}))


def test_budget_verdict_is_undecided_when_the_ordering_depends_on_the_budget():
    assert R.budget_verdict({1000: True, 3000: True}) == ("holds", "")
    assert R.budget_verdict({1000: False, 3000: False}) == ("no", "")
    word, reason = R.budget_verdict({1000: True, 3000: False})
    assert word == "undecided" and "1,000 and 3,000" in reason


def test_delta_claim_asks_for_100_percent_wherever_table_b1_has_it():
    ref = pd.DataFrame({"delta": [1.0, 0.1, 0.01], "scale_variant_detection": [86.6, 100, 100],
                        "scale_invariant_detection": [100, 100, 97.7]})
    good = ref.assign(scale_variant_detection=100.0)
    bad = ref.assign(scale_variant_detection=[40.0, 90.0, 100.0])
    assert R.delta_claims(good, ref, "synthetic", real_data=False, seeds=1)[0]["word"] == "holds"
    (c,) = R.delta_claims(bad, ref, "synthetic", real_data=False, seeds=1)
    assert c["word"] == "no" and "δ ∈ {0.1}" in c["claim"] and c["paper_value"] == "both 100 % at δ ∈ {0.1}"
    assert R.delta_claims(bad, ref, "CIFAR-10", real_data=True, seeds=1)[0]["word"] == "undecided"


def _toy_inputs(adamp_wins_late: bool):
    tab2d = pd.DataFrame({"method": ["gd", "sgd", "sgd", "sgdp", "sgdp"], "momentum": [0, 0.9, 0.99, 0.9, 0.99],
                          "lr": 0.02, "iters": 100, "max_norm": [1.0, 2.9, 28.0, 1.1, 1.2],
                          "final_cos": 1.0, "iters_to_cos_0_99": [500, 140, 290, 95, 80]})
    fig3 = pd.DataFrame({"method": ["sgd", "sgd_wd", "sgdp", "sgd", "sgdp"], "iters": [10, 10, 10, 30, 30],
                         "final_loss": [0.9, 0.8, 0.6, 0.8, 0.4], "r_max": [3.3, 3.1, 1.1, 3.3, 1.1]})
    rows = []
    for n, (a, p) in {10: (3.8, 3.5), 30: (0.03, 0.01 if adamp_wins_late else 0.3)}.items():
        rows += [(R.H1_SETTINGS[0][0], "adam", n, 0.1, 0.0, a, 1.5, 0.9), (R.H1_SETTINGS[0][0], "adamw", n, 1e-3, 10.0, 1e-3, 1.0, 0.003),
                 (R.H1_SETTINGS[0][0], "adamp", n, 0.1, 0.0, p, 1.03, 1.03),
                 (R.H1_SETTINGS[1][0], "adam_printed", n, 0.1, 0.0, 0.016, 7.1, 7.1),
                 (R.H1_SETTINGS[1][0], "adamp_printed", n, 0.1, 0.0, 0.008, 1.3, 1.3)]
    h1 = pd.DataFrame(rows, columns=["setting", "method", "iters", "lr", "weight_decay", "final_loss", "r_max", "r_final"])
    lemmas = pd.DataFrame({"run": ["gd", "mom", "proj"], "max_rel_gap_eq6": [3e-16, 0.05, 4e-16],
                           "max_rel_gap_eq8": [3e-16, 5e-16, 0.08], "eq12_bound_holds": [True, False, True],
                           "final_norm": [3.5, 6.7, 3.7]})
    ratios = {(0.9, "(k+1)^-2"): 19.0, (0.9, "0.99^k"): 18.999}
    sizes = dict(rb_fixed_lr=1e-5, toy2d_lr=0.02, ratio_terms=20000)
    return tab2d, fig3, h1, lemmas, ratios, sizes


def test_toy_claims_judge_every_figure_and_say_why_fig_h1_is_undecided():
    tab2d, fig3, h1, lemmas, ratios, sizes = _toy_inputs(adamp_wins_late=False)
    claims = R.toy_claims(tab2d, fig3, h1, lemmas, ratios, sizes, "toys")
    words = {c["item"]: c["word"] for c in claims}
    assert words == {"Fig. 1 (2D toy)": "holds", "Fig. 3 (3D Rosenbrock)": "holds", "Fig. H.1 (Adam), norm": "holds",
                     "Fig. H.1 (Adam), convergence": "undecided", "Fig. H.1 (Adam), convergence with WD": "holds",
                     "Fig. H.1 (Adam), Alg. 2 as printed": "holds", "Lemmas 2.1, 2.2, Eq. 12": "holds",
                     "Cor. 2.3": "holds"}
    for c in claims:
        assert c["verdict"].split(" ")[0].rstrip(":") in findings.VERDICTS and c["ours"] and c["paper_value"]
    conv = [c for c in claims if c["item"] == "Fig. H.1 (Adam), convergence"][0]
    assert "iteration count" in conv["verdict"] and "3.5 vs 3.8 (10 it.)" in conv["verdict"]
    assert "2.93 (0.9), 27.87 (0.99)" in claims[0]["paper_value"]
    text = R.toys_found(tab2d, fig3, h1, claims, sizes, 3.07e4)
    assert "ahead after 10 iterations" in text and "behind after 30 iterations" in text and "31" in text
    claims = R.toy_claims(*_toy_inputs(adamp_wins_late=True)[:5], sizes, "toys")
    assert [c["word"] for c in claims if c["item"] == "Fig. H.1 (Adam), convergence"] == ["holds"]


def test_cor_2_3_with_too_few_terms_is_undecided_not_refuted():
    tab2d, fig3, h1, lemmas, _, sizes = _toy_inputs(False)
    claims = R.toy_claims(tab2d, fig3, h1, lemmas, {(0.9, "(k+1)^-2"): 15.0}, {**sizes, "ratio_terms": 50}, "toys")
    (cor,) = [c for c in claims if c["item"] == "Cor. 2.3"]
    assert cor["verdict"].startswith("undecided (50 terms do not reach the limit")


def test_the_papers_toy_numbers_are_the_papers():
    assert T.PAPER_FIG1_MAX_NORM == {0.9: 2.93, 0.99: 27.87}
    assert T.PAPER_FIG3_R == {"sgd": 3.2, "sgd_wd": 2.53, "sgdp": 1.12}
    assert T.PAPER_LR_RANGE == (1e-3, 0.1)


# ------------------------------------------------------------------------------------------------ the notebooks
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_source_notebook_sets_the_theme_once_and_computes_what_it_found(name):
    cells = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert sum(s.count("figures.theme()") for s in code) == 1
    imports = next(s for s in code if "import" in s and "check_params" in s)
    assert "figures.theme()" in imports
    found = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and "## What we found" in "".join(c["source"])]
    assert len(found) == 1
    assert any("display(Markdown(" in "".join(c["source"]) for c in cells[found[0]:]), "no computed What we found"
    prose = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    for word in ("session", "OCR", "our reading", "issue #", "/work/", "/home/"):
        assert word not in prose, f"{name}: {word!r} in its text"


def _outputs(nb):
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            yield c, o


@pytest.mark.parametrize("path", PUBLISHED, ids=[p.stem for p in PUBLISHED])
def test_published_notebook_is_readable(path):
    nb = json.loads(path.read_text())
    images = [hashlib.sha1(base64.b64decode(o["data"]["image/png"])).hexdigest()
              for _, o in _outputs(nb) if "image/png" in o.get("data", {})]
    assert len(images) == len(set(images)), f"{path.stem}: a figure is shown twice"
    for _, o in _outputs(nb):
        data = o.get("data", {})
        html = "".join(data.get("text/html", ""))
        plain = "".join(data.get("text/plain", "")) + "".join(o.get("text", ""))
        if not html:  # a Styler's text/plain is its repr; the reader sees its HTML
            assert "Empty DataFrame" not in plain and "RunConfig(" not in plain and "Styler" not in plain
        if "<table" in html:
            heads = re.findall(r'<th [^>]*class="col_heading[^"]*"[^>]*>', html)
            assert len(heads) <= 8, f"{path.stem}: a table of {len(heads)} columns"
            assert not re.search(r">\s*-?\d+\.0{6}\s*<", html) and ">nan<" not in html
    shown = [o for c, o in _outputs(nb) if "display(Markdown(" in "".join(c["source"])]
    assert shown and all("text/markdown" in o["data"] for o in shown)


@pytest.mark.parametrize("path", [p for p in PUBLISHED if (p.parent / p.stem / "claims.json").exists()],
                         ids=lambda p: p.stem)
def test_published_claims_carry_a_verdict_word_ours_and_the_papers_value(path):
    claims = json.loads((path.parent / path.stem / "claims.json").read_text())
    assert claims
    for c in claims:
        assert re.match(r"(holds|no|undecided|not judged)\b", c["verdict"]), c["verdict"]
        assert c.get("paper_value"), c["item"]
        assert c.get("ours") or publish.not_run(c), c["item"]  # a claim without a run has nothing of ours yet
        if c["verdict"].startswith("undecided"):
            assert c["verdict"].startswith("undecided ("), "undecided without its reason"


def test_fig_h1_claim_rows_state_the_finding():
    path = ROOT / "reports" / "cpu" / "adamp_toys" / "claims.json"
    if not path.exists():
        pytest.skip("adamp_toys is not published")
    items = {c["item"]: c for c in json.loads(path.read_text())}
    assert {"Fig. H.1 (Adam), norm", "Fig. H.1 (Adam), convergence", "Fig. H.1 (Adam), Alg. 2 as printed"} <= set(items)
    assert all(math.isfinite(float(x)) for x in re.findall(r"\d+\.\d+", items["Fig. H.1 (Adam), norm"]["ours"]))


def test_table_b1_verdict_is_no_only_once_the_scale_variant_score_settled():
    """A detection below the paper's 100 % is *no* only when the scale-variant score |cos|·√d has stopped moving
    over the recorded steps; while it still grows (a short run near its start) the verdict is *undecided*."""
    ref = pd.DataFrame({"delta": [0.2, 0.1], "scale_variant_detection": [100.0, 100.0],
                        "scale_invariant_detection": [100.0, 100.0]})
    ours = ref.assign(scale_variant_detection=[94.0, 97.0])

    def stats(growth):
        return pd.DataFrame([dict(step=t, scale_invariant=False, layer_score=1.0 + growth * t / 10,
                                  channel_score=1.0) for t in range(10)])

    moving, flat = stats(0.5), stats(0.0)
    assert R.score_drift(moving) > 0.1 and R.score_drift(flat) == pytest.approx(0.0)
    undecided = R.delta_claims(ours, ref, "d", real_data=True, seeds=3, stats=moving)[0]["verdict"]
    assert undecided.startswith("not judged (while the scale-variant score still moved")
    assert "points against the claim" in undecided
    assert R.delta_claims(ours, ref, "d", real_data=True, seeds=3, stats=flat)[0]["verdict"].startswith("no:")
    # the gate applies to both outcomes: every δ detected while the score still moves is not judged too
    assert R.delta_claims(ref, ref, "d", real_data=True, seeds=3, stats=moving)[0]["verdict"].startswith(
        "not judged (while the scale-variant score still moved")
    assert R.delta_claims(ref, ref, "d", real_data=True, seeds=3, stats=flat)[0]["verdict"].startswith("holds")


def _cifar_runs(growth: dict, acc: dict, seeds=(0, 1, 2), e2_growth: float = -1.0,
                jitter: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A sweep result and its histories for ``adamp_cifar``: per optimizer and seed, at Table 1's weight decay ‖w‖
    1.0 after epoch 1 and 1 + growth (+ 0.01 × seed + jitter) at the end, test accuracy 10 points below acc; at
    E.2's ‖w‖ 1.0 → 1 + ``e2_growth`` (+ 0.01 × seed), test accuracy acc (+ 0.1 × seed + 100 × jitter).
    ``jitter``: {optimizer: per-seed offsets}, so that the seed-paired differences have a spread."""
    jitter = jitter or {}
    res, hist = [], []
    for setting, g, da in (("E.2", e2_growth, 0.0), ("Table 1", None, -10.0)):
        for opt in growth:
            for k, s in enumerate(seeds):
                j = jitter.get(opt, [0.0] * len(seeds))[k]
                end = 1.0 + (growth[opt] if g is None else g) + 0.01 * s + (j if g is None else 0.0)
                res.append(dict(setting=setting, optimizer=opt, seed=s, hash=f"{setting}{opt}{s}", status="finished",
                                test_acc=acc[opt] + da + 0.1 * s + 100 * j, seconds=30.0))
                hist += [dict(setting=setting, optimizer=opt, seed=s, epoch=e, weight_norm=w)
                         for e, w in ((2, (1.0 + end) / 2), (1, 1.0), (3, end))]
    return pd.DataFrame(res), pd.DataFrame(hist)


JITTER = {"sgdp": [0.0, 0.004, -0.002], "adamp": [0.0, -0.003, 0.005]}


def test_cifar_contrasts_judge_each_pair_by_its_seed_paired_interval():
    """Every pair is judged on its own setting's runs by the 95 % t interval of the seed-paired difference:
    the norm growth at Table 1's decays, the accuracy at E.2's; a one-seed pair on real images is undecided."""
    res, hist = _cifar_runs({"sgd": 0.5, "sgdp": 0.02, "adamw": 0.07, "adamp": 0.065},
                            {"sgd": 31.7, "sgdp": 31.5, "adamw": 20.0, "adamp": 29.4}, jitter=JITTER)
    runs = R.cifar_runs(res, hist)
    by_run = runs.set_index(R.CIFAR_KEYS).norm_growth
    assert by_run[("Table 1", "sgd", 2)] == pytest.approx(0.52) and by_run[("E.2", "sgd", 2)] == pytest.approx(-0.98)
    summary = R.cifar_summary(runs)
    assert list(summary.optimizer) == ["sgd", "sgdp", "adamw", "adamp"] * 2 and (summary.seeds == 3).all()
    assert list(summary.setting) == ["E.2"] * 4 + ["Table 1"] * 4
    t1 = summary[summary.setting == "Table 1"].set_index("optimizer")
    assert t1.train_minutes["sgd"] == pytest.approx(1.5)
    assert t1.paper_norm_growth.to_dict() == {"sgd": 1.36, "sgdp": -0.04, "adamw": 8.71, "adamp": 1.73}
    assert t1.paper_top1.isna().all() and summary.paper_top1.notna().sum() == 4  # Table 2 beside E.2's runs only
    found = R.cifar_contrasts(runs).set_index(["name", "a"])
    assert list(found.index.get_level_values(0)) == ["norm growth"] * 2 + ["test accuracy"] * 2
    # the reference: scipy's paired t interval over the three seeds
    from scipy import stats
    t1runs = runs[runs.setting == "Table 1"].set_index(["optimizer", "seed"]).norm_growth
    d = (t1runs["adamp"] - t1runs["adamw"]).to_numpy()
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    g = found.loc[("norm growth", "adamp")]
    assert g["diff"] == pytest.approx(d.mean()) and g.lo == pytest.approx(d.mean() - half)
    assert g.resolution == pytest.approx(half) and g.seeds == 3
    assert g.word == "undecided" and g.reason.startswith("within the noise, leaning the claimed way")
    assert found.loc[("norm growth", "sgdp")].value_b == pytest.approx(0.51)  # Table 1's decay, not E.2's -0.99
    assert found.loc[("norm growth", "sgdp")].word == "holds"
    assert found.loc[("test accuracy", "adamp")].value_b == pytest.approx(20.1)  # E.2's decay, not Table 1's 10.1
    assert found.loc[("test accuracy", "adamp")].word == "holds"
    assert found.loc[("test accuracy", "sgdp")].word == "undecided"  # −0.13, within a spread of 100 × the jitter
    claims = {c["claim"]: c for c in R.cifar_claims(found.reset_index(), res, "CIFAR-10")}
    assert claims["norm growth: SGDP < SGD"]["word"] == "holds"
    assert claims["norm growth: SGDP < SGD"]["train_minutes"] == pytest.approx(3.0)  # its 6 runs, not all 24
    c = claims["norm growth: AdamP < AdamW"]
    assert c["ci"] == [pytest.approx(g.lo), pytest.approx(g.hi)] and c["resolution"] == pytest.approx(half)
    assert c["paper_effect"] == pytest.approx(1.73 - 8.71)
    assert "+1.36" in claims["norm growth: SGDP < SGD"]["paper_value"]  # Table 1
    assert "70.70" in claims["test accuracy: SGDP > SGD"]["paper_value"]  # Table 2, ResNet-18
    text = R.cifar_found(RunConfig(width=8, n=1024, batch_size=64, num_epochs=100), found.reset_index(), res,
                         "CIFAR-10", seeds=3, summary=summary)
    assert "SGDP +0.031 vs SGD +0.510 at paper WD 1e-5 (smaller with the projection: -0.479 [" in text
    assert "nan" not in text  # no train accuracy in these runs: no sentence about it
    assert "At E.2's weight decay, ten times Table 1's for SGD and SGDP, the norms change by SGD -0.990" in text
    one = R.cifar_contrasts(R.cifar_runs(*_cifar_runs({"sgd": 0.5, "sgdp": 0.02}, {"sgd": 30, "sgdp": 31},
                                                        seeds=(0,))))
    assert set(one.word) == {"undecided"} and one.reason.str.contains("1 seed on real images").all()


def test_a_norm_growth_claim_is_undecided_where_the_baselines_norm_did_not_grow():
    """Table 1 reports the projection slowing a growth; where weight decay shrinks SGD's (AdamW's) norm there is
    none to slow, so the smaller shrink of SGDP (AdamP) does not count against the claim, nor for it."""
    res, hist = _cifar_runs({"sgd": -3.2, "sgdp": -0.8, "adamw": 0.5, "adamp": 0.1},
                            {"sgd": 31.7, "sgdp": 31.5, "adamw": 20.0, "adamp": 29.4}, jitter=JITTER)
    found = R.cifar_contrasts(R.cifar_runs(res, hist))
    claims = {c["claim"]: c for c in R.cifar_claims(found, res, "CIFAR-10")}
    sgd = claims["norm growth: SGDP < SGD"]
    assert sgd["verdict"].startswith("not judged (SGD's norm did not grow: no growth for the projection to slow")
    assert claims["norm growth: AdamP < AdamW"]["word"] == "holds"  # AdamW's norm grew: judged as usual
    text = R.cifar_found(RunConfig(width=8, n=1024, batch_size=64, num_epochs=100), found, res, "CIFAR-10", seeds=3)
    assert "Here the norm of SGD shrinks even at this decay" in text and "that claim stays *undecided*" in text
    assert "AdamW shrinks" not in text and "1.21 → 1.02" not in text  # no E.2 sentence without the summary


def test_cifar_plan_trains_each_optimizer_at_e2s_and_table_1s_weight_decay():
    """Every profile's plan holds E.2's runs (the accuracy claims) and the runs at Table 1's decays (the norm-growth
    claims: 1e-5 for SGD / SGDP, none for AdamW / AdamP), SGD and SGDP with η × B/256 and λ × 50,000/N, AdamW and
    AdamP with E.2's η and λ × 50,000/N × B/256 (``cifar.lr_and_wd_scale``), so that each run's weight decay relaxes
    the scale-invariant norm in as many epochs as the reference run at 50,000 images does."""
    from repro_lib import profiles
    from repro_lib.papers.adamp import cifar

    cpu, paper = cifar.plan("cpu"), cifar.plan("paper")
    assert len(cpu) == 24 and cpu.groupby(["setting", "optimizer"]).size().eq(3).all()
    key = lambda p: {(r.setting, r.optimizer): r.cfg for r in p[p.seed == p.seed.min()].itertuples()}  # noqa: E731
    ours, ref = key(cpu), key(paper)
    for (setting, opt), c in ours.items():
        r = ref[(setting, opt)]
        if opt in cifar.UNSCALED_LR:  # an adaptive step does not scale with B
            assert c.lr == pytest.approx(r.lr) and c.lr == pytest.approx(1e-3)
        else:
            assert c.lr / c.batch_size == pytest.approx(r.lr / r.batch_size)
        assert profiles.relaxation_tuning_factor(c) == pytest.approx(profiles.relaxation_tuning_factor(r))
    assert ref[("Table 1", "sgd")].weight_decay == 1e-5 and ref[("E.2", "sgd")].weight_decay == 1e-4
    assert ref[("Table 1", "adamw")].weight_decay == 0.0 and ref[("E.2", "adamw")].weight_decay == 0.1
    n, b = ours[("Table 1", "sgdp")].n, ours[("Table 1", "sgdp")].batch_size
    assert ours[("Table 1", "sgdp")].weight_decay == pytest.approx(1e-5 * 50_000 / n)
    assert ours[("E.2", "adamp")].weight_decay == pytest.approx(ref[("E.2", "adamp")].weight_decay * 50_000 / n * b / 256)
    assert [cifar.paper_weight_decay(o, "Table 1") for o in ("sgd", "sgdp", "adamw", "adamp")] == [1e-5, 1e-5, 0, 0]
    assert cifar.paper_weight_decay("adamw", "E.2") == pytest.approx(1e-4)
    with pytest.raises(ValueError, match="^setting:"):
        cifar.paper_weight_decay("sgd", "E.3")


def test_a_pair_without_its_runs_keeps_its_claim_undecided_and_named():
    """Where one pair's runs are not in the store yet (status "missing"), its claim is still published, *undecided*
    with the count of missing runs, and "What we found" names it instead of dropping the other pairs' sentences."""
    res, hist = _cifar_runs({"sgd": 0.5, "sgdp": 0.02, "adamw": 0.07, "adamp": 0.065},
                            {"sgd": 31.7, "sgdp": 31.5, "adamw": 20.0, "adamp": 29.4}, jitter=JITTER)
    gone = (res.setting == "Table 1") & res.optimizer.isin(["adamw", "adamp"])
    res.loc[gone, "status"] = "missing"
    hist = hist[~((hist.setting == "Table 1") & hist.optimizer.isin(["adamw", "adamp"]))]
    runs = R.cifar_runs(res, hist)
    found = R.cifar_contrasts(runs)
    assert len(found) == 4
    g = found.set_index(["name", "a"]).loc[("norm growth", "adamp")]
    assert g.word == "undecided" and g.reason == "6 runs missing" and math.isnan(g["diff"])
    claims = {c["claim"]: c for c in R.cifar_claims(found, res, "CIFAR-10")}
    assert claims["norm growth: AdamP < AdamW"]["verdict"] == "undecided (6 runs missing)"
    text = R.cifar_found(RunConfig(width=8, n=1024, batch_size=64, num_epochs=100), found, res, "CIFAR-10", seeds=3)
    assert "SGDP +0.031 vs SGD +0.510" in text and "AdamP − AdamW" in text
    assert "Not run yet (the claim stays *undecided*): norm growth AdamP vs AdamW." in text
