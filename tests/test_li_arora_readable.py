"""What the Li & Arora and back-matching notebooks show a reader (``repro_lib.papers.li_arora.report``,
``repro_lib.papers.backmatching.report``): verdicts in three words, the paper's value beside ours, figures with
words on their axes and one legend beside the data, tables of at most 8 columns. No training here."""
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from repro_lib.papers.backmatching import report as BR  # noqa: E402
from repro_lib.papers.li_arora import exp_lr as E  # noqa: E402
from repro_lib.papers.li_arora import report as R  # noqa: E402
from repro_lib.results import findings, publish  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MINE = ("li_arora_preresnet32", "li_arora_equivalence", "li_arora_bn_wd_toy", "backmatching_vgg")


# ------------------------------------------------------------------------------------------------ verdict words
def _per_seed(values: dict) -> pd.DataFrame:
    """Final test accuracy per seed (rows) and run label (columns)."""
    return pd.DataFrame(values)


def test_judged_contrasts_pair_by_seed_and_carry_ours_and_the_papers_reading():
    # TEXP tracks step decay seed by seed (a shared seed effect of ±3 points): paired, the interval is narrow
    step = [24.0, 27.0, 30.0, 25.0, 28.0]
    per_seed = _per_seed({"step decay + WD": step, "TEXP": [v + 0.1 for v in step],
                          "TEXP--": [v + 3.0 + 0.2 * k for k, v in enumerate(step)]})
    j = R.judged_contrasts(per_seed, [("Fig. 2", "TEXP", "step decay + WD", "≈"), ("Fig. 3", "TEXP--", "TEXP", "<")])
    assert list(j.word) == ["holds", "no"]  # +0.10 within ±1 at every seed; TEXP−− above TEXP at every seed
    m = R.EQUIVALENCE_MARGIN
    assert j.verdict.iloc[0].startswith(f"holds: Δ +0.10 [+0.10, +0.10] points (paired t, 5 seeds, 90 % interval; "
                                        f"margin ±{m:g}, TOST)")
    assert j.ours.iloc[1] == f"TEXP−− {np.mean(step) + 3.4:.2f}, TEXP {np.mean(step) + 0.1:.2f} (5 paired seeds)"
    assert "Fig. 3" in j.paper_value.iloc[1] and "TEXP achieves better test accuracy" in j.paper_value.iloc[1]
    assert j.interval.iloc[0]["margin"] == m and j.interval.iloc[1]["ci"][0] > 0
    assert j.interval.iloc[0]["level"] == 0.90 and j.interval.iloc[1]["level"] == 0.95
    assert R.word_counts(j.word) == "holds 1, no 1"


def test_an_equivalence_inside_a_wide_interval_is_undecided_not_holds():
    """The published 8-epoch runs: TEXP − step +0.20 over 3 seeds with an interval of about ±6 — the noise rule
    read it as *holds*."""
    per_seed = _per_seed({"step decay + WD": [27.5, 24.1, 31.0], "TEXP": [30.2, 22.9, 30.1]})
    (r,) = R.judged_contrasts(per_seed, [("Fig. 2", "TEXP", "step decay + WD", "≈")]).itertuples()
    assert r.word == "undecided" and r.reason.startswith("the 90 % interval reaches past the margin")
    assert r.resolution > 3 and r.to_decide.startswith("about 6 seeds (3 more)")
    one = R.judged_contrasts(per_seed.iloc[:1], [("Fig. 2", "TEXP", "step decay + WD", "≈")])
    assert one.reason.iloc[0] == "1 seed on real images, 3 needed"
    toy = R.judged_contrasts(per_seed.iloc[:2], [("Fig. 2", "TEXP", "step decay + WD", ">")], real_data=False)
    assert toy.seeds.iloc[0] == 2


def test_every_pair_the_notebook_compares_has_the_papers_reading():
    pairs = {("TEXP", "step decay + WD"), ("TEXP--", "TEXP"), ("exp (fixed exponent) + ÷10", "exp (fixed exponent)"),
             ("cosine + WD", "step decay + WD"), ("exp-cosine", "step decay + WD"), ("TEXP (no correction)", "TEXP"),
             ("exp-cosine (no correction)", "exp-cosine")}
    assert pairs <= set(E.PAPER_READING)
    assert all(re.search(r"\((Fig\. \d|Sec\. 2\.3)\)$", v) for v in E.PAPER_READING.values())


def test_equivalence_claims_in_three_words():
    ok = R.equivalence_claims({"Lemma 2.2": 1e-16}, {"Thm 2.9": 1e-14}, {"a": 0.4, "b": 7e-3}, 1.4812, 118, 118)
    assert [c["verdict"].split(":")[0] for c in ok] == ["holds"] * 5
    assert all(c["ours"] and c["paper_value"] for c in ok)
    bad = R.equivalence_claims({"Lemma 2.2": 1e-3}, {"Thm 2.9": 1e-14}, {"a": 1e-16}, 1.49, 100, 118)
    assert [c["verdict"].split(":")[0] for c in bad] == ["no", "holds", "no", "no", "no"]


# ------------------------------------------------------------------------------------------------ PreResNet32
def _hist(labels=("step decay + WD", "TEXP", "TEXP (no correction)", "TEXP--", "cosine + WD", "exp-cosine",
                  "exp-cosine (no correction)"), epochs=8, seeds=(0,)):
    cons = {"step decay + WD": "weight decay", "cosine + WD": "weight decay", "TEXP (no correction)": "schedule only",
            "exp-cosine (no correction)": "schedule only"}
    rows = []
    for i, lab in enumerate(labels):
        for s in seeds:
            for e in range(1, epochs + 1):
                lr = 0.1 * (0.1 ** ((e > epochs // 2) + (e > 3 * epochs // 4)))
                rows.append(dict(label=lab, seed=s, epoch=e, lr=lr, train_acc=10 + 2 * e + i, test_acc=9 + 2 * e + i,
                                 tensor_weight_norm=4.0 + 0.1 * e, norm2_over_lr=(4.0 + 0.1 * e) ** 2 / lr,
                                 weight_norm=30.0, construction=cons.get(lab, "exact"), exp_lr_log2_rescale=0))
    return pd.DataFrame(rows)


def test_phases_and_decays():
    assert R.phases(160) == [80, 40, 40] and R.phases(8) == [4, 2, 2]
    assert R.decay_epochs(_hist()) == [4.5, 6.5]


def _legends_outside(fig):
    """Every legend of ``fig`` lies right of its axes' data area (anchored at x > 1 in axes coordinates)."""
    out = []
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is not None:
            box = leg.get_window_extent(fig.canvas.get_renderer())
            out.append(box.x0 >= ax.get_window_extent().x1 - 1)
    return out


def test_figures_2_to_5_read_like_the_papers():
    fig = R.plot_figures_2_to_5(_hist(), "some data")
    fig.canvas.draw()
    axes = np.array(fig.axes).reshape(-1, 3)
    assert axes.shape == (3, 3)  # Fig. 4's runs are not in the cpu profile: its row is left out
    columns = set(_hist().columns)
    for ax in fig.axes:
        assert ax.get_title() and ax.get_ylabel() not in columns and ax.get_xlabel() == "epoch"
    assert [ax.get_title().split(" ")[1] for ax in axes[:, 0]] == ["2", "3", "5"]
    assert {ax.get_ylabel() for ax in axes[:, 2]} == {"test accuracy (%)"}
    legends = _legends_outside(fig)
    assert len(legends) == 3 and all(legends)  # one per row, beside it
    colours = {}
    for ax in fig.axes:  # a run has one colour in every panel
        for line in ax.get_lines():
            if not line.get_label().startswith("_"):
                assert colours.setdefault(line.get_label(), line.get_color()) == line.get_color()
    plt.close(fig)


def test_figure_1_has_words_and_one_legend():
    fig = R.plot_figure1(_hist(), "data")
    fig.canvas.draw()
    assert [ax.get_ylabel() for ax in fig.axes] == ["‖w‖ (log scale)", "‖w‖² / η (log scale)"]
    assert all(ax.get_title().startswith("Fig. 1") for ax in fig.axes)
    assert _legends_outside(fig) == [True]
    plt.close(fig)
    empty = R.plot_figure1(_hist().iloc[:0], "data")  # before any run finished: says so, draws nothing
    plt.close(empty)


def test_final_table_for_people():
    hist = _hist(seeds=(0, 1))
    results = pd.DataFrame({"label": hist.label.unique(), "status": "finished", "test_acc": 25.0})
    table = pd.DataFrame({"label": hist.label.unique(), "construction": "exact", "figure": "Fig. 2",
                          "test_acc": 25.0, "std": math.nan, "runs": 1.0, "diverged": 0.0, "missing": 0.0})
    last = R.final_epoch(hist)
    t = R.final_table(table, last, results.groupby("label").size().to_dict())
    assert len(t.columns) <= 8 and "rescale k" not in t and "diverged" not in t and "std" not in t
    assert t["seeds"].dtype.kind == "i" and t["test acc. (%)"].iloc[0] == "25.00"
    last.loc["TEXP", "exp_lr_log2_rescale"] = 3
    assert "rescale k" in R.final_table(table, last, {})


def test_final_epoch_is_the_mean_over_seeds():
    hist = _hist(seeds=(0, 1, 2))
    hist.loc[hist.seed == 1, "train_acc"] += 3.0  # seeds differ: the table shows their mean, not one seed's value
    last = R.final_epoch(hist)
    ends = hist[hist.epoch == hist.epoch.max()].groupby("label").train_acc.mean()
    assert last.train_acc.to_dict() == pytest.approx(ends.to_dict())


def test_preresnet_found_says_what_the_table_shows():
    """Every number a sentence quotes is the table's: the step-decay run's train and test accuracy as the mean
    over seeds of the final epoch (the table's "train acc." column and ``final_epoch``), the comparison's
    difference as the contrast table's."""
    cfg = SimpleNamespace(num_epochs=20, width=8, n=2048, tuning_factor=0.195)
    paper = SimpleNamespace(num_epochs=160, width=16, n=50000, tuning_factor=0.195)
    hist = _hist(epochs=20, seeds=(0, 1, 2))
    hist[["train_acc", "test_acc"]] = hist[["train_acc", "test_acc"]].astype(float)
    hist.loc[hist.seed == 2, ["train_acc", "test_acc"]] += 4.5
    last = R.final_epoch(hist, ("train_acc", "test_acc"))
    per_seed = hist[hist.epoch == 20].pivot_table(index="seed", columns="label", values="test_acc")
    con = R.judged_contrasts(per_seed, [("Fig. 3", "TEXP--", "TEXP", "<")])
    gaps = findings.paired_gaps(hist, {"TEXP (no correction)": "TEXP"})
    text = R.preresnet_found(cfg, paper, hist, con, gaps, "stand-in")
    assert "20 epochs (phases of 10/5/5 epochs), 3 seeds" in text and "160 epochs (80/40/40)" in text
    tr, te = last.loc["step decay + WD", "train_acc"], last.loc["step decay + WD", "test_acc"]
    assert f"ends at {tr:.1f} % train and {te:.1f} % test accuracy (mean over 3 seeds)" in text
    one_seed = hist[(hist.label == "step decay + WD") & (hist.epoch == 20)].train_acc
    assert not any(f"ends at {v:.1f} % train" in text for v in one_seed if abs(v - tr) > 0.05)
    assert f"TEXP−− ends {abs(con['diff'].iloc[0]):.2f} points" in text
    assert "seed-paired difference" in text and "*no*" in text
    assert "at 3 seed pairs" in text


def test_preresnet_found_names_the_range_of_seeds_per_schedule():
    """Where the schedules have different numbers of seeds, the first sentence gives the range per schedule and the
    resolution sentence the range of seed pairs its intervals use."""
    cfg = SimpleNamespace(num_epochs=20, width=8, n=2048, tuning_factor=0.195)
    paper = SimpleNamespace(num_epochs=160, width=16, n=50000, tuning_factor=0.195)
    hist = _hist(epochs=20, seeds=(0, 1, 2, 3, 4))
    hist = hist[~((hist.label != "TEXP--") & (hist.seed > 2))]  # TEXP-- on 5 seeds, the others on 3
    per_seed = hist[hist.epoch == 20].pivot_table(index="seed", columns="label", values="test_acc")
    con = R.judged_contrasts(per_seed, [("Fig. 3", "TEXP--", "TEXP", "<")])
    text = R.preresnet_found(cfg, paper, hist, con, findings.paired_gaps(hist, {}), "stand-in")
    assert "3 to 5 seeds per schedule;" in text and "at 3 seed pairs" in text


# ------------------------------------------------------------------------------------------------ the toy
def _toy(bnwd_err=0.04):
    curves = pd.DataFrame([dict(iteration=it, run=r, case=c, error=e + 0.001 * r, angle=0.13, norm=1.0)
                           for it in range(0, 1000, 10) for r in range(4)
                           for c, e in (("wd", 0.007), ("bn", 0.009), ("bn+wd", bnwd_err))])
    summary = pd.DataFrame({"case": ["wd", "bn", "bn+wd"], "mean error (last 25%)": [0.0074, 0.0088, bnwd_err],
                            "max error (last 25%)": [0.015, 0.017, 0.09], "final ‖w‖ (mean)": [1.4, 1.15, 0.27],
                            "longest run with angle ≤ ε": [900, 900, 2],
                            "Thm 3.1 bound (iterations)": [math.nan, math.nan, 490.0]})
    return summary, curves


def test_toy_claim_and_table():
    summary, curves = _toy()
    c = R.toy_claim(summary, curves, 0.06, 500)
    assert c["verdict"].startswith("holds: ") and "bound 490" in c["verdict"] and c["ours"] and c["paper_value"]
    assert R.toy_claim(*_toy(0.005), 0.06, 500)["verdict"].startswith("no: ")
    t = R.toy_table(summary)
    assert t["longest stretch with angle ≤ ε (it.)"].dtype.kind == "i" and list(t["Thm 3.1 bound (it.)"]) == ["—", "—", "490"]
    fig = R.plot_toy(curves, summary, 0.06, 500)
    assert all(ax.get_title() for ax in fig.axes) and "iteration" in {ax.get_xlabel() for ax in fig.axes}
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ back-matching
def _bm_results(seeds=(0,), synthetic=False, lars=50.0, train_acc=99.0, sgd=45.0):
    acc = {"sgd": sgd, "lars": lars, "lsalr": 46.0, "scale_amended_sgd": 49.0}
    paper = {"sgd": 92.34, "lars": 91.81, "lsalr": 92.58, "scale_amended_sgd": 92.45}  # VGG11: LSALR ahead
    cfg = SimpleNamespace(dataset="cifar10-jpeg", synthetic=synthetic, n_test=2000)
    hist = [{"epoch": e, "lr": 0.1 if e <= 10 else 0.01, "angular_update": 0.3, "train_acc": train_acc}
            for e in range(1, 21)]  # Δθ flat before the first decay: settled
    return pd.DataFrame([dict(paper_dataset="cifar10", model="vgg11_bn", method=m, seed=s, status="finished",
                              test_acc=a + 0.1 * s + (0.05 * s * s if m == "sgd" else 0.0), paper_accuracy=paper[m],
                              cfg=cfg, seconds=60.0, history=hist)
                         for m, a in acc.items() for s in seeds])


def test_backmatching_claims_per_column_say_what_the_papers_numbers_support():
    """On VGG11-BN (CIFAR-10) the paper's own LSALR is ahead of scale-amended SGD, so the claim there is "beats SGD
    and LARS"; each difference is paired by seed; a result against the claim is *no* only in runs trained to the
    end (Δθ settled, train accuracy ≥ 90 %)."""
    (c,) = BR.column_claims(_bm_results())
    assert c["item"] == "Table 1, CIFAR-10, VGG11-BN"
    assert c["claim"] == "scale-amended SGD beats SGD and LARS (the paper's LSALR is ahead here)"
    assert c["verdict"].startswith("undecided (1 seed on real images, 3 needed): SA-SGD − SGD +4.00, LARS -1.00")
    assert c["ours"] == "means of 1 seed: SA-SGD 49.00, SGD 45.00, LARS 50.00 (LARS best)"
    assert c["paper_value"] == "medians of 3 runs: SA-SGD 92.45, SGD 92.34, LARS 91.81, LSALR 92.58 (LSALR best)"
    assert BR.column_claims(_bm_results((0, 1, 2), lars=45.0))[0]["word"] == "holds"
    against = BR.column_claims(_bm_results((0, 1, 2), lars=60.0))[0]
    assert against["word"] == "no" and against["rival"] == "lars" and against["ci"][1] < 0
    assert against["paper_effect"] == pytest.approx(92.45 - 92.34)  # the paper's smallest margin: over SGD
    early = BR.column_claims(_bm_results((0, 1, 2), lars=60.0, train_acc=62.0))[0]
    assert early["word"] == "not judged" and "before training converged" in early["verdict"]
    # SGD within the noise, LARS ahead beyond it before convergence: the reason names the rival against the claim
    mixed = BR.column_claims(_bm_results((0, 1, 2), lars=60.0, train_acc=62.0, sgd=49.0))[0]
    assert mixed["verdict"].startswith("not judged (before training converged; the interval against LARS points "
                                       "against the claim)")


# ------------------------------------------------------------------------------------------------ the notebooks
@pytest.mark.parametrize("name", MINE)
def test_notebook_sets_the_theme_once_in_its_imports(name):
    cells = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    hits = [i for i, s in enumerate(code) if "figures.theme()" in s]
    assert len(hits) == 1 and "import" in code[hits[0]] and "check_params" in code[hits[0]]
    assert not any("plt.subplots" in s or "sns.lineplot" in s for s in code)  # figures come from the report module


@pytest.mark.parametrize("name", MINE)
def test_published_claims_speak_in_three_words(name):
    path = ROOT / "reports" / "cpu" / name / "claims.json"
    if not path.exists():
        pytest.skip("not published")
    for c in json.loads(path.read_text()):
        assert publish.verdict_word(c["verdict"]) in findings.VERDICTS, c["verdict"]
        assert c.get("ours") and c.get("paper_value"), c
        if c["data"].startswith("CIFAR") and c["seeds"] < findings.MIN_SEEDS:
            assert c["verdict"].startswith(f"undecided ({c['seeds']} seed"), c["verdict"]


def _html_tables(nb):
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            html = "".join(out.get("data", {}).get("text/html", ""))
            if "<table" in html:
                yield html


@pytest.mark.parametrize("name", MINE)
def test_published_tables_are_for_people(name):
    path = ROOT / "reports" / "cpu" / f"{name}.ipynb"
    if not path.exists():
        pytest.skip("not published")
    nb = json.loads(path.read_text())
    for html in _html_tables(nb):
        body = re.sub(r"<style.*?</style>", "", html, flags=re.S)
        first_row = re.search(r"<tr>(.*?)</tr>", body, flags=re.S).group(1)
        assert len(re.findall(r"<th", first_row)) <= 9, first_row  # the index and at most 8 columns
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", body)
        assert not [c for c in cells if re.fullmatch(r"\s*-?\d+\.\d*00000\s*", c)], "unformatted floats (1.000000)"
        assert not [c for c in cells if c.strip() in ("nan", "NaN", "<NA>")], "NaN shown"
