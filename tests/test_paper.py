"""Tests for repro_lib.papers.transcribed: the transcribed tables of Yun et al. 2022, AdamP and the back-matching supplement.

The checks use identities the papers' tables must satisfy (shared base cell, the same run printed in two tables,
the highlighted tuning factor, printed differences) so that a mis-transcribed or shifted cell fails.
"""

import math
from importlib import resources

import numpy as np
import pandas as pd
import pytest

from repro_lib.papers import transcribed as paper

YUN = [f"yun2022_table{i}" for i in range(1, 12)]
OTHER = ["adamp_table1", "adamp_table2", "adamp_tableB1", "backmatching_table1"]

N_GRID = [3125, 6250, 12500, 25000, 50000]
B_GRID = [2048, 1024, 512, 256, 128]
# name -> (column axis, its values left to right, rows per sub-table, blank cells printed by the paper)
SHAPES = {
    "yun2022_table1": ("n", N_GRID, 7, 0),
    "yun2022_table2": ("n", N_GRID, 7, 1),
    "yun2022_table3": ("batch_size", B_GRID, 7, 0),
    "yun2022_table4": ("batch_size", B_GRID, 7, 1),
    "yun2022_table6": ("n", N_GRID, 7, 0),
    "yun2022_table7": ("n", N_GRID, 7, 5),
    "yun2022_table8": ("n", N_GRID, 7, 9),
    "yun2022_table9": ("n", [12500, 25000, 50000, 100000], 6, 0),
    "yun2022_table10": ("batch_size", B_GRID, 7, 8),
    "yun2022_table11": ("batch_size", B_GRID, 7, 2),
}
WITH_BASE_ROW = [n for n in SHAPES if n != "yun2022_table9"]  # Table 9 prints no LR 0.1 / WD 1e-4 row


def test_list_tables_matches_shipped_csvs():
    names = paper.list_tables()
    assert names == YUN + OTHER
    shipped = {p.name[:-4] for folder in resources.files("repro_lib.papers").iterdir() if folder.is_dir()
               and folder.joinpath("tables").is_dir() for p in folder.joinpath("tables").iterdir()
               if p.name.endswith(".csv")}
    assert shipped == set(names)


@pytest.mark.parametrize("name", YUN + OTHER)
def test_every_table_loads(name):
    df = paper.table(name)
    assert len(df) > 0 and (df["table"] == name).all()
    src = paper.source(name)
    assert df.attrs["source"] == src and "Table" in src
    df.loc[:, df.columns[0]] = "changed"  # a copy: mutating it does not change the stored table
    assert (paper.table(name)["table"] == name).all()


def test_unknown_table_is_a_value_error():
    with pytest.raises(ValueError, match="yun2022_table12"):
        paper.table("yun2022_table12")
    with pytest.raises(ValueError):
        paper.source("nope")


@pytest.mark.parametrize("name", list(SHAPES))
def test_yun_grid_shapes_and_axes(name):
    """Three sub-tables of rows x columns, the LR/WD grids of Sec. 5.1 (factors of 2, or sqrt(2) in (c))."""
    axis, values, nrows, blanks = SHAPES[name]
    df = paper.table(name)
    assert sorted(df.subtable.unique()) == ["a", "b", "c"]
    sgd = (df.optimizer == "sgd").all()
    assert sgd or (df.optimizer == "sgdm").all()
    base_lr = 1.0 if sgd else 0.1
    assert np.allclose(df.momentum, 0.0 if sgd else 0.9)
    for sub, g in df.groupby("subtable"):
        assert len(g) == nrows * len(values) and g.row.nunique() == nrows
        for _, r in g.groupby("row"):  # each printed row: one (lr, wd), the column axis in print order
            assert r.lr.nunique() == 1 and r.weight_decay.nunique() == 1
            assert r.sort_values("col")[axis].tolist() == values
        rows = g.drop_duplicates("row").sort_values("row")
        k = np.arange(7)[::-1][:nrows]  # top row is base * 2**6 (6.4 for SGDM); the base row has k = 0
        if sub == "a":
            np.testing.assert_allclose(rows.lr, base_lr * 2.0 ** k, rtol=1e-3)
            np.testing.assert_allclose(rows.weight_decay, 1e-4)
        elif sub == "b":
            np.testing.assert_allclose(rows.lr, base_lr)
            np.testing.assert_allclose(rows.weight_decay, 1e-4 * 2.0 ** k, rtol=1e-3)
        else:
            np.testing.assert_allclose(rows.lr, base_lr * 2.0 ** (k / 2), rtol=1e-3)
            np.testing.assert_allclose(rows.weight_decay, 1e-4 * 2.0 ** (k / 2), rtol=1e-3)
    assert df.accuracy.isna().sum() == blanks
    # the other axis is fixed
    other = "batch_size" if axis == "n" else "n"
    assert df[other].nunique() == 1


def test_table5_grid():
    """Table 5: B rows {32..2048} x N columns at eta=0.1, lambda=0.0016, no sub-tables, no blanks."""
    df = paper.table("yun2022_table5")
    assert (df.subtable == "").all() and len(df) == 35 and df.accuracy.notna().all()
    assert df.drop_duplicates("row").sort_values("row").batch_size.tolist() == [32, 64, 128, 256, 512, 1024, 2048]
    assert sorted(df.n.unique()) == N_GRID
    assert np.allclose(df.lr, 0.1) and np.allclose(df.weight_decay, 0.0016)
    assert set(zip(df[df.yellow].batch_size, df[df.yellow].n)) == {
        (64, 3125), (128, 6250), (256, 12500), (512, 25000), (1024, 50000)}


@pytest.mark.parametrize("name", WITH_BASE_ROW)
def test_base_cell_identical_across_subtables(name):
    df = paper.table(name)
    last = df[df.row == df.row.max()]
    lrs = last.lr.unique()
    assert len(lrs) == 1 and lrs[0] in (0.1, 1.0) and (last.weight_decay == 1e-4).all()
    a, b, c = (last[last.subtable == s].sort_values("col").accuracy.to_numpy() for s in "abc")
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert not np.isnan(a).any()


def test_table9_has_no_base_row():
    df = paper.table("yun2022_table9")
    assert not ((df.lr == 0.1) & (df.weight_decay == 1e-4)).any()


@pytest.mark.parametrize("name", YUN)
def test_tuning_factor_and_yellow_cells(name):
    """Eq. 27 of Yun et al.; one yellow cell per column of every sub-table, at the declared factor."""
    df = paper.table(name)
    tf = df.n * df.lr * df.weight_decay / (df.batch_size * (1 - df.momentum))
    np.testing.assert_allclose(df.tuning_factor, tf)
    target = paper.yellow_factor(name)
    expected = 5 / 32 if name == "yun2022_table9" else 10 / 128
    assert target == pytest.approx(expected)
    y = df[df.yellow]
    np.testing.assert_allclose(y.tuning_factor, target, rtol=paper.YELLOW_RTOL)
    assert (y.groupby(["subtable", "col"]).size() == 1).all()
    assert y.groupby(["subtable", "col"]).ngroups == df.groupby(["subtable", "col"]).ngroups
    # no other cell is anywhere near the target (grid steps are >= sqrt(2) apart)
    rest = df[~df.yellow]
    assert (np.abs(np.log(rest.tuning_factor / target)) > np.log(2) / 2 - 0.05).all()


def test_tuning_factor_spot_values():
    t2 = paper.table("yun2022_table2")
    cell = t2[(t2.subtable == "a") & (t2.lr == 32) & (t2.n == 3125)].iloc[0]
    assert cell.tuning_factor == pytest.approx(3125 * 32 * 1e-4 / 128) and cell.yellow
    t9 = paper.table("yun2022_table9")
    cell = t9[(t9.subtable == "b") & (t9.weight_decay == 0.0008) & (t9.n == 50000)].iloc[0]
    assert cell.tuning_factor == pytest.approx(50000 * 0.1 * 0.0008 / (256 * 0.1)) and cell.yellow


@pytest.mark.parametrize("name", YUN[:7])
def test_ocr_marks_agree_with_yellow_and_best(name):
    """In the OCR of Tables 1-7, <b> marks yellow and bold cells: every yellow cell is marked, and every marked
    cell is yellow or the best of its column. A cell shifted in transcription would break one of the two."""
    df = paper.table(name)
    assert df.ocr_marked.notna().all()
    y = df[df.yellow & df.accuracy.notna()]
    assert y.ocr_marked.all()
    key = ["subtable", "col"] if name != "yun2022_table5" else ["col"]
    best = df.accuracy == df.groupby(key).accuracy.transform("max")
    assert (~df.ocr_marked | df.yellow | best).all()


def test_appendix_tables_have_no_ocr_marks():
    for name in YUN[7:]:
        assert paper.table(name).ocr_marked.isna().all()


def _column(name, sub, axis, value):
    df = paper.table(name)
    return df[(df.subtable == sub) & (df[axis] == value)].sort_values("row").accuracy.to_numpy()


@pytest.mark.parametrize("fixed_b,fixed_n", [("yun2022_table1", "yun2022_table3"),
                                             ("yun2022_table2", "yun2022_table4"),
                                             ("yun2022_table8", "yun2022_table10")])
def test_same_run_printed_in_two_tables(fixed_b, fixed_n):
    """N=50000 of a fixed-B table (B=128) is the B=128 column of the matching fixed-N table (N=50000)."""
    for sub in "abc":
        np.testing.assert_array_equal(_column(fixed_b, sub, "n", 50000), _column(fixed_n, sub, "batch_size", 128))


def test_table5_row_b128_is_table1_wd_0016():
    t5 = paper.table("yun2022_table5")
    t1 = paper.table("yun2022_table1")
    a = t5[t5.batch_size == 128].sort_values("n").accuracy.to_numpy()
    b = t1[(t1.subtable == "b") & (t1.weight_decay == 0.0016)].sort_values("n").accuracy.to_numpy()
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name,sub,lr,wd,axis,value,acc", [
    ("yun2022_table1", "a", 3.2, 1e-4, "n", 3125, 78.28),
    ("yun2022_table2", "c", 5.657, 0.0005657, "n", 3125, 79.62),
    ("yun2022_table3", "b", 0.1, 0.0008, "batch_size", 256, 95.30),
    ("yun2022_table4", "a", 8, 1e-4, "batch_size", 2048, 93.50),
    ("yun2022_table6", "b", 0.1, 0.0004, "n", 50000, 95.51),
    ("yun2022_table7", "c", 0.8, 0.0008, "n", 50000, 51.82),
    ("yun2022_table8", "a", 6.4, 1e-4, "n", 3125, 22.73),
    ("yun2022_table9", "c", 0.5657, 0.0005657, "n", 100000, 58.74),
    ("yun2022_table9", "a", 1.6, 1e-4, "n", 12500, 35.17),
    ("yun2022_table9", "b", 0.1, 0.0016, "n", 25000, 47.75),
    ("yun2022_table9", "b", 0.1, 0.0004, "n", 12500, 32.69),
    ("yun2022_table10", "c", 0.2828, 0.0002828, "batch_size", 512, 73.93),
    ("yun2022_table11", "c", 0.8, 0.0008, "batch_size", 128, 74.19),
    ("yun2022_table11", "a", 3.2, 1e-4, "batch_size", 128, 63.49),
    ("yun2022_table11", "b", 0.1, 0.0002, "batch_size", 2048, 91.80),
])
def test_yun_spot_values(name, sub, lr, wd, axis, value, acc):
    df = paper.table(name)
    hit = df[(df.subtable == sub) & np.isclose(df.lr, lr) & np.isclose(df.weight_decay, wd) & (df[axis] == value)]
    assert len(hit) == 1 and hit.accuracy.iloc[0] == pytest.approx(acc)


# Every blank cell, as (sub-table, printed row, printed column); the judged ones are explained in JUDGEMENTS.md.
BLANKS = {
    "yun2022_table2": {("a", 0, 4)},
    "yun2022_table4": {("a", 0, 4)},
    "yun2022_table7": {("a", 0, c) for c in range(5)},
    "yun2022_table8": {("a", 0, 1), ("a", 0, 2), ("a", 0, 3), ("a", 0, 4), ("a", 1, 4), ("b", 0, 4),
                       ("c", 0, 2), ("c", 0, 3), ("c", 0, 4)},
    "yun2022_table10": {("a", 0, 2), ("a", 0, 3), ("a", 0, 4), ("a", 1, 3), ("a", 1, 4), ("b", 0, 4),
                        ("c", 0, 3), ("c", 0, 4)},
    "yun2022_table11": {("a", 0, 3), ("a", 0, 4)},
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_yun_blanks_are_where_the_paper_leaves_them(name):
    df = paper.table(name)
    blank = df[df.accuracy.isna()]
    assert set(zip(blank.subtable, blank.row, blank.col)) == BLANKS.get(name, set())
    assert len(blank) == SHAPES[name][3]


def test_yun_judged_cells():
    t2 = paper.table("yun2022_table2")
    row = t2[(t2.subtable == "a") & (t2.lr == 64)].sort_values("col").accuracy
    assert row.iloc[:4].tolist() == [76.75, 80.58, 79.50, 78.98]
    t10 = paper.table("yun2022_table10")  # raw "0.2828\t3 0.0002828"
    row = t10[(t10.subtable == "c") & (t10.row == 3)]
    assert np.allclose(row.lr, 0.2828) and np.allclose(row.weight_decay, 0.0002828)
    assert row.sort_values("col").accuracy.tolist() == [72.00, 73.68, 73.93, 73.37, 71.98]
    t11 = paper.table("yun2022_table11")  # suspicious base row, kept as printed
    base = t11[(t11.subtable == "a") & (t11.row == 6)].sort_values("col").accuracy
    assert base.tolist() == [71.15, 81.52, 87.52, 92.16, 94.86]


def test_yun_model_and_setup_columns():
    for name in YUN:
        df = paper.table(name)
        assert df.scale_invariant.all() != (name in ("yun2022_table7", "yun2022_table11"))
    t9 = paper.table("yun2022_table9")
    assert (t9.dataset == "tiny_imagenet").all() and (t9.num_epochs == 120).all() and (t9.batch_size == 256).all()
    assert (paper.table("yun2022_table6").schedule == "cosine").all()
    assert (paper.table("yun2022_table10").model == "densenet100").all()
    assert (paper.table("yun2022_table10").dataset == "cifar100").all()


def test_adamp_table1_norm_changes():
    """The printed change in parentheses is Norm^last - Norm^1 (rounding), except one row the paper misprints."""
    df = paper.table("adamp_table1")
    assert len(df) == 11 and df.drop(columns="weight_decay").notna().all().all()
    diff = (df.norm_last - df.norm_first - df.norm_change).abs()
    odd = (df.optimizer == "sgdp") & (df.weight_decay == 1e-5)  # 1.19 (-0.04) vs 1.25: see JUDGEMENTS.md
    assert (diff[~odd] <= 0.011).all() and diff[odd].iloc[0] == pytest.approx(0.02)
    music = df[df.task == "music_tagging"].set_index("optimizer")
    # text: "Adam-induced norm increase (+4.21) is 13.2 times greater than that of AdamP (+0.32)"
    assert music.norm_change["adamw"] / music.norm_change["adamp"] == pytest.approx(13.2, abs=0.05)
    assert set(df.score_metric) == {"top1_accuracy", "roc_auc"}


def test_adamp_table2_gains_and_text():
    df = paper.table("adamp_table2")
    assert len(df) == 20 and df.top1.notna().all() and df.top1_std.notna().all()
    for _, g in df.groupby("row"):
        acc = g.set_index("optimizer").top1
        gain = g.set_index("optimizer").gain
        assert gain["sgdp"] == pytest.approx(acc["sgdp"] - acc["sgd"], abs=0.006)
        assert gain["adamp"] == pytest.approx(acc["adamp"] - acc["adamw"], abs=0.006)
        assert gain.drop(["sgdp", "adamp"]).isna().all()
    r18 = df[(df.model == "resnet18")].set_index("optimizer").top1
    # Appendix G quotes the ResNet-18 row: SGDP (70.70), AdamP (70.82), SGD 70.47, Adam 68.05, AdamW 70.39
    assert r18.to_dict() == {"sgd": 70.47, "sgdp": 70.70, "adam": 68.05, "adamw": 70.39, "adamp": 70.82}


def test_adamp_tableB1():
    df = paper.table("adamp_tableB1")
    assert df.delta.tolist() == [1, 0.2, 0.1, 0.05, 0.02, 0.01]
    assert df.notna().all().all()
    assert df[df.delta == 0.1].accuracy.iloc[0] == 70.81
    # "In a wide range of delta values, AdamP perfectly discriminates": both 100% for 0.05 <= delta <= 0.2
    mid = df[(df.delta >= 0.05) & (df.delta <= 0.2)]
    assert (mid.scale_variant_detection == 100).all() and (mid.scale_invariant_detection == 100).all()


def test_backmatching_table1():
    df = paper.table("backmatching_table1")
    assert len(df) == 32 and df.accuracy.notna().all()
    assert set(df.method) == {"sgd", "lars", "lsalr", "scale_amended_sgd"}
    assert df.groupby(["dataset", "model"]).size().eq(4).all()
    ours = df[df.method == "scale_amended_sgd"].set_index(["dataset", "model"]).accuracy
    assert ours[("cifar100", "vgg16_bn")] == 74.68 and ours[("cifar10", "vgg13_bn")] == 94.11
    # scale-amended SGD is best in every column except CIFAR-10 VGG11 (LSALR 92.58 > 92.45, as printed)
    best = df.loc[df.groupby(["dataset", "model"]).accuracy.idxmax()].set_index(["dataset", "model"]).method
    assert (best.drop(("cifar10", "vgg11_bn")) == "scale_amended_sgd").all()
    assert best[("cifar10", "vgg11_bn")] == "lsalr"
    assert math.isclose(df[df.method == "lars"].lr.iloc[0], 2.0)
