"""The declared second stage: the two-stage procedure's error (``results.stages``) and the committed plan
(``papers.stage2``, ``reports/cpu/stage2_plan.json``)."""
import dataclasses
import json
import math
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from repro_lib.results import rules, stages

ROOT = Path(__file__).resolve().parents[1]
SIMS = 40_000
# the Monte-Carlo error of a rate near 0.03 over SIMS repetitions is about 0.00085: 4 of them
TOL = 4 * math.sqrt(0.03 * 0.97 / SIMS)


def test_one_stage_alone_errs_at_its_level():
    for design, cells in (("paired", 2), ("pooled", 5)):
        e = stages.two_stage_error(design, 3, 3, 0.025, 0.025, cells=cells, sims=SIMS, seed=1)
        assert abs(e - 0.025) < TOL, (design, e)


def test_a_second_look_at_the_first_level_errs_more_and_a_stricter_one_less():
    """The values of the verdict-statistics notes (paired t, 3 seeds then more, 200k repetitions): about 0.045 per
    side when the second stage is judged at one-sided 0.025, about 0.029 at 0.005."""
    same = stages.two_stage_error("paired", 3, 8, 0.025, 0.025, sims=SIMS, seed=2)
    strict = stages.two_stage_error("paired", 3, 8, 0.025, 0.005, sims=SIMS, seed=2)
    assert 0.040 < same < 0.051
    assert 0.025 < strict < 0.033
    assert strict < same


def test_pooled_contrast_of_two_cells_is_the_paired_t():
    """With two cells the two-way fit's residual error is the paired differences' own: the same statistic."""
    a = stages.two_stage_error("paired", 3, 6, 0.025, 0.005, sims=SIMS, seed=3)
    b = stages.two_stage_error("pooled", 3, 6, 0.025, 0.005, cells=2, sims=SIMS, seed=4)
    assert abs(a - b) < 2 * TOL


def test_aimed_sizing_stops_where_no_size_would_decide():
    """Sized on the stage-1 estimate, a second stage happens only where that estimate says it would decide; at the
    null boundary that is rare, so the aimed procedure errs no more than the fixed one."""
    fixed = stages.two_stage_error("paired", 3, 10, 0.025, 0.005, sims=SIMS, seed=5)
    aimed = stages.two_stage_error("paired", 3, 10, 0.025, 0.005, sizing="aimed", sims=SIMS, seed=5)
    assert aimed <= fixed + TOL
    assert aimed > 0.025 - TOL


def test_columns_design_stage_one_matches_dersimonian_laird():
    """Stage 1 of the columns design is the DerSimonian–Laird z test: with equal standard errors and no
    between-column variance it errs at about its level (a little above: τ² is estimated)."""
    e = stages.two_stage_error("columns", 20, 20, 0.025, 0.025, ses=[1.0] * 20, tau2=0.0, sims=SIMS, seed=6)
    assert 0.02 < e < 0.04


def test_stage2_levels_and_bad_parameters():
    assert stages.stage2_alpha(0.025) == 0.005 and stages.stage2_alpha(0.05) == 0.01
    with pytest.raises(ValueError, match="alpha1"):
        stages.stage2_alpha(0.1)
    with pytest.raises(ValueError, match="design"):
        stages.two_stage_error("bayes", 3, 4, 0.025, 0.005)
    with pytest.raises(ValueError, match="n1, n_max"):
        stages.two_stage_error("paired", 5, 4, 0.025, 0.005)
    with pytest.raises(ValueError, match="alpha1, alpha2"):
        stages.two_stage_error("paired", 3, 4, 0.005, 0.025)


# ------------------------------------------------------------------------------------------------ the plan
PLAN = ROOT / "reports" / "cpu" / "stage2_plan.json"


@pytest.fixture(scope="module")
def plan():
    return json.loads(PLAN.read_text())


def test_every_target_names_a_published_claim_and_its_rule(plan):
    from types import SimpleNamespace

    from repro_lib.papers import stage2

    for t in plan["targets"]:
        assert t["rule"] in rules.RULES, t["key"]
        if t["kind"] == "regime":
            continue
        claims = json.loads((ROOT / "reports" / "cpu" / t["notebook"] / "claims.json").read_text())
        matches = [c for c in claims if stage2.is_row_of(SimpleNamespace(item=t["item"], claim=t["claim"]), c)]
        assert matches, (t["key"], t["item"])
        r = rules.rule(t["rule"])
        assert t["stage1"]["alpha"] == r.alpha
        assert t["stage2"]["alpha"] == stages.stage2_alpha(r.alpha)
        assert t["stage2"]["n"] > t["stage1"]["n"]


def test_the_plan_is_what_the_code_declares(plan):
    from repro_lib.papers import stage2

    assert [t.key for t in stage2.TARGETS] == [t["key"] for t in plan["targets"]]
    for t, entry in zip(stage2.TARGETS, plan["targets"]):
        assert len(t.runs()) == entry["runs"], t.key
    assert plan["expected_cpu_hours"] <= 1.1 * stage2.BUDGET_CPU_HOURS


def test_published_errors_agree_with_a_fresh_simulation(plan):
    from repro_lib.papers import stage2

    by_key = {t.key: t for t in stage2.TARGETS}
    for key in ("adamp_adamw", "table4_b256"):
        fresh = stage2.error_of(by_key[key], sims=SIMS)["overall"]
        published = next(t for t in plan["targets"] if t["key"] == key)["error_per_side"]["overall"]
        assert abs(fresh - published) < TOL, (key, fresh, published)


def _first_commit_time(path: Path):
    try:
        out = subprocess.run(["git", "log", "--diff-filter=A", "--format=%ct", "--", str(path)], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    return int(out[-1]) if out else None


def test_no_stage2_record_predates_the_plan():
    from repro_lib.papers import stage2

    t0 = _first_commit_time(PLAN)
    if t0 is None:
        pytest.skip("no git history of the plan (not a clone of the repository)")
    runs = ROOT / "reports" / "runs"
    for key, p in stage2.all_runs():
        for cfg in p.cfg:
            f = runs / f"{cfg.hash}.json"
            if f.exists():
                finished = json.loads(f.read_text()).get("finished")
                assert finished is None or finished >= t0, (key, cfg.hash)


@pytest.mark.parametrize("key", ["adamp_adamw", "table4_b256", "section3_c2_optimum", "table11_b256_optimum"])
def test_the_stage2_judgement_at_stage_one_reproduces_the_published_claim(key):
    """The code that judges stage 2, run on the stage-1 seeds at the stage-1 level, gives the published claim's
    interval, gate, word and shown values (``ours``): stage 2 changes the seeds and the level, nothing else."""
    from repro_lib.papers import stage2

    t = {x.key: x for x in stage2.TARGETS}[key]
    res = stage2._collect(stage2._stage1_runs(t), ROOT / "reports")
    if (res["status"] == "missing").any():
        pytest.skip("the published stage-1 records are not in this checkout")
    f = stage2._stage2_fields(t, res, rules.rule(t.rule))
    claims = json.loads((ROOT / "reports" / "cpu" / t.notebook / "claims.json").read_text())
    c = _at_stage_one(next(c for c in claims if c["item"] == t.item and c["claim"].startswith(t.claim[:40])))
    assert f["ci"] == pytest.approx(c["ci"], abs=1e-9)
    assert f["seeds"] == c["seeds"]
    assert f["ours"] == c["ours"]   # the values a stage-2 claim shows are computed as the first stage's were
    assert (f["word"] in ("holds", "no")) == (c["word"] in ("holds", "no"))


def test_an_optimum_without_a_fit_says_why_and_where_the_best_cell_is():
    """Table 11's B = 256 optimum at its second stage: the quadratic misses the cell means, so no optimum and no
    interval; the verdict names the lack-of-fit p and the best cell, whose mean the records give directly."""
    from repro_lib.papers import stage2
    from repro_lib.results import findings

    t = {x.key: x for x in stage2.TARGETS}["table11_b256_optimum"]
    res = pd.concat([stage2._collect(stage2._stage1_runs(t), ROOT / "reports"),
                     stage2._collect(t.runs(), ROOT / "reports")], ignore_index=True).drop_duplicates("hash")
    if (res["status"] == "missing").any():
        pytest.skip("the published records are not in this checkout")
    f = stage2._stage2_fields(t, res.reset_index(drop=True), dataclasses.replace(rules.rule(t.rule), alpha=0.01))
    means = res.groupby(res["tuning_factor"].round(6))["test_acc"].mean()
    yellow = float(res["tuning_factor"].round(6)[res["yellow"]].iloc[0])
    assert f["word"] == "undecided" and f["ci"] == [None, None]
    assert f"the best cell mean {means.max():.2f} %" in f["text"]
    assert f"×{means.idxmax() / yellow:.2g} of the yellow tuning factor" in f["text"]
    p = float(f["text"].split("lack-of-fit p = ")[1].split(")")[0])
    assert p < findings.FIT_P_MIN
    claims = json.loads((ROOT / "reports" / "cpu" / t.notebook / "claims.json").read_text())
    c = next(c for c in claims if c["item"] == t.item and c["claim"].startswith(t.claim[:40]))
    assert c["stage"] == 2 and f["text"] in c["verdict"]


def _at_stage_one(c: dict) -> dict:
    """A published claim as its first stage judged it (a stage-2 claim keeps those fields under ``stage1``)."""
    if c.get("stage") != 2:
        return c
    c = {**c, **c["stage1"]}
    for k in ("stage", "stage1", "procedure_error"):
        c.pop(k)
    return c


def test_judge_leaves_a_claim_whose_stage2_runs_are_missing_at_stage_one(tmp_path):
    from repro_lib.papers import stage2

    claims = [_at_stage_one(c) for c in
              json.loads((ROOT / "reports" / "cpu" / "adamp_cifar" / "claims.json").read_text())]
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "stage2_plan.json").write_text(PLAN.read_text())
    out = stage2.judge("adamp_cifar", claims, results_dir=tmp_path)
    target = next(c for c in out if c["claim"] == "test accuracy: AdamP > AdamW")
    assert target["word"] == next(c for c in claims if c["claim"] == target["claim"])["word"]
    assert "stage" not in target and target["stage2"].startswith("0 of 4 planned stage-2 runs")
    # what would decide it is the declared second stage, not the first stage's estimate at its own level
    assert target["to_decide"].startswith("its declared second stage: seeds 3-4 (5 seeds in all), judged once at "
                                          "α = 0.005 per side")
    assert "4 of its 4 runs still to train" in target["to_decide"]
    assert out[0] == claims[0] and out[0] is not claims[0]


def test_status_prices_each_target_from_the_plan_and_the_store(tmp_path, plan):
    from repro_lib.papers import stage2

    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "stage2_plan.json").write_text(PLAN.read_text())
    empty = stage2.status(tmp_path)
    assert list(empty.target) == [t["key"] for t in plan["targets"]]
    assert list(empty.planned_minutes) == [t["expected_cpu_minutes"] for t in plan["targets"]]
    assert (empty.finished == 0).all() and (empty.recorded_minutes == 0).all()
    published = stage2.status(ROOT / "reports", keys=["adamp_adamw"]).set_index("target")
    done = published.loc["adamp_adamw"]   # complete in the published store: its four runs' recorded minutes
    from repro_lib.store import Store

    (_, runs), = stage2.all_runs(["adamp_adamw"])
    store = Store(ROOT / "reports")
    assert done.finished == 4 and done.recorded_minutes == pytest.approx(
        sum(store.get(c)["train_seconds"] for c in runs.cfg) / 60, abs=0.05)


def test_parts_split_each_target_into_disjoint_stacked_groups():
    from repro_lib.papers import stage2

    for key, plan in stage2.all_runs():
        block = int(plan.attrs.get("max_members", 1))
        for k in (1, 2, 3):
            parts = [stage2.part_of(plan, (i, k)) for i in range(1, k + 1)]
            hashes = [c.hash for p in parts for c in p.cfg]
            assert sorted(hashes) == sorted(c.hash for c in plan.cfg), (key, k)   # every run, once
            assert all(p.attrs == plan.attrs for p in parts)
            if k == 2 and len(plan) > block:   # whole stacked groups, dealt round-robin
                assert list(parts[0].index[:block]) == list(range(block))
                assert list(parts[1].index[:block]) == list(range(block, min(2 * block, len(plan))))
    with pytest.raises(ValueError, match="part: 3/2"):
        stage2.part_of(plan, (3, 2))
    for bad in ("0/2", "3/2", "x"):
        with pytest.raises(SystemExit):
            stage2.main(["train", "--part", bad, "--only", "nothing"])


def test_shortest_settled_phase_reads_the_gate_on_every_longer_phase():
    from repro_lib.papers.stage2 import shortest_settled_phase

    # falls fast, then flattens from epoch 10: a phase settles once its second half lies in the flat part
    v = [100 * 0.7 ** min(e, 10) for e in range(40)]
    L = shortest_settled_phase(v, 1.2)
    assert L == 20  # second half [10, 20): flat; L = 19 would start at 9 (×0.7 inside)
    assert shortest_settled_phase([2.0 ** -e for e in range(30)], 1.2) is None   # never settles
    assert shortest_settled_phase([1.0] * 12, 1.2) == 4


def test_regime_measurements_wait_for_their_runs(tmp_path):
    from repro_lib.papers import stage2

    assert stage2.li_arora_regime(tmp_path) == {"measured": False}
    assert stage2.backmatching_regime(tmp_path) == {"measured": False}


def test_the_pooled_gap_at_stage_one_reproduces_the_published_claim():
    """Without the added columns, the stage-2 pooling code at the stage-1 level is the published pooled gap."""
    from repro_lib.papers import stage2

    claims = json.loads((ROOT / "reports" / "cpu" / "yun2022_summary" / "claims.json").read_text())
    c = _at_stage_one(next(c for c in claims if c.get("rule", {}).get("relation") == "≳"))
    f = stage2._pooled_gap_fields(rules.rule("pooled gap"), ROOT / "reports", added=())
    assert f["seeds"] == int(c["item"].split()[1].rstrip(","))
    assert f["ci"] == pytest.approx(c["ci"], abs=1e-9)
    assert f["ours"] == c["ours"]


def test_found_paragraph_names_each_second_stage_claim_and_nothing_else():
    """The "What we found" paragraph lists the claims judged at stage 2 with their new verdict, the claims still
    waiting with their run count, and is empty for claims without a second stage."""
    from repro_lib.results import publish

    judged = {"item": "Table 2", "claim": "AdamP > AdamW", "stage": 2, "word": "no", "stage1": {"word": "undecided"},
              "verdict": "no: AdamP − AdamW -2.00 [-3.51, -0.49] (5 seeds, 99 % interval; stage 1: undecided)"}
    waiting = {"item": "Table 6", "claim": "yellow best", "word": "undecided",
               "stage2": "3 of 55 planned stage-2 runs in the store; judged at stage 1"}
    plain = {"item": "Table 1", "claim": "yellow best", "word": "holds", "verdict": "holds: ..."}
    assert publish.stage_found([plain]) == ""
    text = publish.stage_found([plain, judged, waiting])
    assert judged["verdict"] in text and waiting["stage2"] in text and "Table 1" not in text
    assert "judged again" in text and "judged again" not in publish.stage_found([waiting])


def test_published_stage2_claims_agree_with_themselves():
    """Every published claim judged at stage 2 shows stage 2's values: its seeds within the seeds per cell it
    names, its interval at the stricter level, the first stage's fields kept apart."""
    for f in sorted((ROOT / "reports" / "cpu").glob("*/claims.json")):
        for c in json.loads(f.read_text()):
            if c.get("stage") != 2:
                continue
            assert c["seeds"] <= c.get("seeds_max", c["seeds"]), (f.parent.name, c["item"])
            assert c["level"] > c["stage1"]["level"] and c["rule"]["alpha"] in stages.STAGE2_ALPHA.values()
            assert "stage2" not in c and c["stage1"]["word"] and c["procedure_error"] < 0.06


def test_first_screen_marks_the_stage2_verdicts():
    """The first screen's table says which verdicts come from the declared second stage, and explains the mark."""
    from repro_lib.results import publish

    one = {"item": "Table 2", "claim": "AdamP > AdamW", "word": "no", "verdict": "no: ...", "stage": 2,
           "stage1": {"word": "undecided"}, "ci": [-3.5, -0.5], "estimate": -2.0}
    two = {"item": "Table 1", "claim": "SGDP > SGD", "word": "holds", "verdict": "holds: ...", "ci": [0.1, 1.0],
           "estimate": 0.5}
    text = publish.result_markdown([one, two])
    assert "| no (stage 2) |" in text and "| holds |" in text and "*(stage 2)*: judged once more" in text
    assert "(stage 2)" not in publish.result_markdown([two])


def test_bottom_line_counts_the_stage2_verdicts_in_a_sentence_of_their_own():
    """The README's bottom line says how many verdicts the second stage gave and how many claims wait for it, after
    the verdict counts (not inside the *not run* count), and says nothing of it when there is none."""
    from repro_lib.results import publish

    claims = [{"word": "holds", "stage": 2}, {"word": "undecided", "stage": 2}, {"word": "undecided", "stage2": {"x": 1}},
              {"word": "holds"}]
    text = publish._stage2_words(claims)
    assert text.startswith(" 2 of these verdicts come from a declared second stage") and "1 more claim waits" in text
    assert "2 more claims wait" in publish._stage2_words([*claims, {"word": "no", "stage2": {"x": 1}}])
    assert publish._stage2_words([{"word": "holds"}]) == ""
    assert publish._stage2_words([{"word": "holds", "stage": 2}]).endswith("`reports/cpu/stage2_plan.json`).")
    pooled = {"stage": 2, "item": "Pooled, 21 settled grid columns", "seeds": 21, "procedure_error": 0.045,
              "rule": {"alpha": 0.005}, "stage1": {"item": "Pooled, 11 settled grid columns", "seeds": 3,
                                                   "level": 0.95, "word": "undecided", "verdict": "v"}}
    line = publish.stage_lines(pooled)[0]
    assert "judged once on 21 columns" in line and "Stage 1 (11 columns, 95 %)" in line
    seeds = {**pooled, "item": "Table 6 (a)", "seeds": 14, "stage1": {**pooled["stage1"], "item": "Table 6 (a)"}}
    said = publish.stage_found([pooled], restated=True)
    assert "These claims were judged again" in said and "first stage's seeds" not in said
    assert "The sentences above read the first stage's seeds" in publish.stage_found([pooled])
    line = publish.stage_lines(seeds)[0]
    assert "judged once on 14 seeds" in line and "Stage 1 (3 seeds" in line


def test_every_planned_run_goes_to_training_those_ending_on_one_image_included(tmp_path, monkeypatch):
    """The pooled gap's cells n = 391, B = 2 and n = 781, B = 4 leave one image after their last full batch;
    the data convention drops it (``data.train_steps``), so ``stage2.train`` hands every planned run to the sweep."""
    from repro_lib.papers import stage2
    from repro_lib.runs import sweep

    plan = {x.key: x for x in stage2.TARGETS}["pooled_gap"].runs()
    lone = [c for c in plan.cfg if int(c.n) % int(c.batch_size) == 1]
    assert sorted({(c.n, c.batch_size) for c in lone}) == [(391, 2), (781, 4)]
    trained = []
    monkeypatch.setattr(stage2, "all_runs", lambda keys=None: [("pooled_gap", plan)])
    monkeypatch.setattr(sweep, "run_sweep", lambda p, **kw: trained.extend(c.hash for c in p.cfg))
    stage2.train("unused", results_dir=tmp_path, progress=False)
    assert sorted(trained) == sorted(c.hash for c in plan.cfg)


def test_a_waiting_claim_says_how_many_runs_are_left_and_how_it_will_be_judged():
    from repro_lib.papers import stage2

    entry = next(e for e in json.loads(PLAN.read_text())["targets"] if e["key"] == "pooled_gap")
    text = stage2.waiting_text(entry, 100, 144)
    assert "44 of its 144 runs still to train" in text and f"α = {entry['stage2']['alpha']:g}" in text
