"""The Yun et al. notebooks' findings as a reader meets them: the shrink said in words, one verdict per
measurement, the cross-check at the paper's protocol, and the paper's column named."""
import pandas as pd
import pytest

from repro_lib.config import RunConfig
from repro_lib.papers.yun2022 import table_notebook as tn
from repro_lib.papers.yun2022.grids import get
from repro_lib.results import findings


def test_shrink_text_names_every_size_that_differs_from_the_paper():
    cpu, paper = get("yun2022_table1").plan("cpu"), get("yun2022_table1").plan("paper")
    text = tn.shrink_text(cpu, paper)
    assert "width 8 instead of 64" in text and "the data" not in text and "epochs instead of 300" in text
    assert "steps per epoch instead of" in text and "N = 500–1,000 images instead of" in text
    assert tn.shrink_text(paper, paper) == ""


def _sweep(n=3125, lrs=(3.2, 0.8), accs=((74.0, 74.5, 74.2), (69.0, 70.0, 69.5)), width=64, epochs=300):
    rows = []
    for lr, acc in zip(lrs, accs):
        for seed, a in enumerate(acc):
            cfg = RunConfig(n=n, batch_size=128, lr=lr, weight_decay=1e-4, width=width, num_epochs=epochs,
                            dataset="cifar10-jpeg", seed=seed)
            rows.append(dict(subtable="a", n=n, batch_size=128, lr=lr, weight_decay=1e-4, seed=seed,
                             status="finished", test_acc=a, paper_accuracy={3.2: 78.28, 0.8: 76.73}[lr], cfg=cfg))
    return pd.DataFrame(rows)


def test_cross_check_sets_both_implementations_beside_the_paper():
    cc = tn.cross_check(_sweep())
    assert list(cc["η"]) == ["3.2", "0.8"] and list(cc["paper"]) == ["78.28", "76.73"]
    assert cc.loc[0, "independent"] == "74.35 ± 0.43" and cc.loc[0, "seeds (ours)"] == 3
    text = tn.cross_check_text(cc)
    assert "agree within two standard errors of their difference in 2 of 2 cells" in text and "not in this package" in text
    far = tn.cross_check(_sweep(accs=((60.0, 60.5, 60.2), (69.0, 70.0, 69.5))))
    assert "in 1 of 2 cells" in tn.cross_check_text(far) and "not in this package" not in tn.cross_check_text(far)
    assert tn.cross_check(_sweep(width=8, epochs=100)).empty  # the cpu profile runs no cross-checked cell
    assert "nothing to compare" in tn.cross_check_text(pd.DataFrame())


def test_precision_check_sets_bf16_beside_fp32_per_cell():
    fp32 = _sweep()  # seed sd 0.25 (η = 3.2) and 0.50 (η = 0.8)
    close = _sweep(accs=((74.3, 74.1, 74.6), (69.8, 69.2, 70.1)))  # means +0.10, +0.20: within the larger sd
    pc = tn.precision_check(fp32, close)
    assert list(pc["η"]) == ["3.2", "0.8"] and list(pc["seeds (bf16)"]) == [3, 3] and pc.agree.all()
    assert pc.difference.round(2).tolist() == [0.10, 0.20] and pc.spread.round(2).tolist() == [0.25, 0.50]
    assert "Every cell agrees" in tn.precision_check_text(pc, close)
    far = tn.precision_check(fp32, _sweep(accs=((72.0, 72.4, 72.2), (69.0, 70.0, 69.5))))  # η = 3.2 two points low
    assert far.agree.tolist() == [False, True] and "1 of 2 cells differ" in tn.precision_check_text(far, close)
    part = close[close.seed < 2]  # two seeds per cell: decided, but not the whole check
    assert "not complete" in tn.precision_check_text(tn.precision_check(fp32, part), close)
    one = tn.precision_check(fp32, close[close.seed == 0])  # one seed: no sd, nothing decided
    assert one.agree.isna().all() and "No cell has two finished seeds" in tn.precision_check_text(one, close)
    assert "0 of 6 runs" in tn.precision_check_text(tn.precision_check(fp32, close.assign(status="missing")), close)
    assert "does not run" in tn.precision_check_text(tn.precision_check(fp32, None), None)


def test_precision_check_runs_are_the_fp32_cells_in_bf16():
    from repro_lib.papers.yun2022 import grids

    bf16 = grids.queue_plan(grids.PRECISION_CHECK, dataset="cifar10-jpeg")
    fp32 = grids.queue_plan("table1 (a) N=3125", dataset="cifar10-jpeg")
    assert len(bf16) == 6 and sorted(set(bf16.paper_lr)) == [0.8, 3.2] and sorted(set(bf16.seed)) == [0, 1, 2]
    same = fp32[fp32.paper_lr.isin([0.8, 3.2])]
    for b, f in zip(bf16.cfg, same.cfg):
        assert b.precision == "bf16" and f.precision == "fp32" and b.hash != f.hash
        assert b.replace(precision="fp32") == f  # nothing else differs
    with pytest.raises(ValueError, match="PAPER_QUEUE"):
        grids.queue_plan("no such item")


def test_a_table_of_the_same_runs_gets_no_verdict_of_its_own(tmp_path):
    """At cpu scale Tables 8 and 10 map onto one grid: one measurement, one claim row naming both columns."""
    yun = tn.YunTables("yun2022_tables8_10", ["yun2022_table8", "yun2022_table10"], profile="smoke",
                       results_dir=tmp_path)
    g = []
    for k, tf in enumerate([findings_tf * 2.0 ** j for findings_tf in [5 / 64] for j in (-1, 0, 1)]):
        for s in range(3):
            g.append(dict(subtable="a", n=500, batch_size=32, paper_n=25000, paper_batch_size=128, tuning_factor=tf,
                          yellow=k == 1, seed=s, status="finished", test_acc=40.0 + (k == 1) + 0.1 * s,
                          hash=f"h{k}{s}", seconds=1.0, history=[], paper_accuracy=60.0, lr=tf, weight_decay=1e-4,
                          cfg=RunConfig(n=500, batch_size=32, seed=s)))
    res = pd.DataFrame(g)
    yun.findings(res, "yun2022_table8", col="n", claim="c8", item="Table 8")
    yun.findings(res.assign(paper_n=50000, paper_batch_size=512), "yun2022_table10", col="batch_size",
                 claim="c10", item="Table 10")
    import json
    claims = json.loads((yun.out_dir / "claims.json").read_text())
    assert len(claims) == 2  # the column's claim and its fitted optimum, each once, naming both tables' columns
    assert all("Table 8" in c["item"] and "Table 10" in c["item"] for c in claims)


@pytest.mark.parametrize("col,expected", [("n", "paper N = 25,000 (ours: B = 32, N = 500)"),
                                          ("combination", "combination 3")])
def test_column_label(col, expected):
    column = pd.DataFrame({"n": [500], "batch_size": [32], "paper_n": [25000], "paper_batch_size": [128],
                           "combination": [3]})
    assert findings.column_label(column, col) == expected


def test_a_column_without_runs_folds_into_one_line_under_the_claim():
    from repro_lib.results import publish

    ran = dict(item="T (a), N = 3,125", claim="c", data="d", seeds=3, verdict="holds: best, +0.06", ours="yellow 74")
    empty = [dict(item=f"T (a), N = {n}", claim="c", data="d", seeds=0, verdict="undecided (21 runs missing)")
             for n in (6250, 12500)]
    text = publish.result_markdown([ran, *empty])
    assert "Of 1 claim checked: *holds* 1." in text and "21 runs missing" not in text
    assert "2 more claim(s) without any run yet" in text


def test_optimum_across_columns_long_and_short():
    """Across two B columns (×4): the yellow cell's η and the best cell's tuning factor per column, the verdict in
    words ("stays put" / "moves by one grid step"); the short form (first screen) keeps columns, factors, verdict."""
    from repro_lib.papers.yun2022.table_notebook import optimum_across_columns

    tf = 10 / 128
    results = pd.DataFrame([dict(status="finished", batch_size=b, tuning_factor=tf * m, lr=0.1 * m * b / 16)
                            for b in (16, 64) for m in (0.25, 0.5, 1, 2, 4)])
    found = pd.DataFrame(dict(rank=["best", "second"], batch_size=[16, 64], yellow_tf=[tf, tf], best_tf=[tf, tf],
                              peak_tf=[float("nan"), 0.08]))
    long = optimum_across_columns(found, results, "batch_size")
    assert "Across the B columns 16, 64 (×4) the yellow cell's η goes 0.1 → 0.4" in long and "stays put" in long
    short = optimum_across_columns(found, results, "batch_size", short=True)
    assert short == ("across its B columns 16, 64 (×4) the best cell's tuning factor stays at 0.0781 while the "
                     "yellow cell's η goes 0.1 → 0.4")
    moved = optimum_across_columns(found.assign(best_tf=[tf, 2 * tf]), results, "batch_size", short=True)
    assert "tuning factor moves one grid step, 0.0781 → 0.156, while" in moved
    far = optimum_across_columns(found.assign(best_tf=[tf, 4 * tf]), results, "batch_size", short=True)
    assert "tuning factor moves ×4, 0.0781 → 0.312, while" in far
    assert optimum_across_columns(found.iloc[:1], results, "batch_size", short=True) == ""
