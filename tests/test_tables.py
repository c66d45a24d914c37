"""Paper-style tables: yellow cells, bold best, the per-column verdict of the paper's claim."""
import math
import re

import numpy as np
import pandas as pd
import pytest

from repro_lib.results import figures, tables


def _cells():
    rows = []
    data = {  # (row, lr) x n -> accuracy, yellow
        (0, 0.4): {1000: (50.0, False), 2000: (70.0, True)},
        (1, 0.2): {1000: (60.0, True), 2000: (71.0, False)},
        (2, 0.1): {1000: (61.0, False), 2000: (np.nan, False)},
    }
    for (r, lr), cols in data.items():
        for n, (acc, y) in cols.items():
            rows.append({"row": r, "lr": lr, "weight_decay": 1e-4, "n": n, "test_acc": acc, "yellow": y})
    return pd.DataFrame(rows)


def test_pivot_keeps_paper_row_order_and_blanks():
    grid, yellow = tables.pivot_cells(_cells(), "test_acc")
    assert [lr for lr, _ in grid.index] == [0.4, 0.2, 0.1]
    assert list(grid.columns) == [1000, 2000]
    assert math.isnan(grid.loc[(0.1, 1e-4), 2000])
    assert yellow.loc[(0.2, 1e-4), 1000] and yellow.loc[(0.4, 1e-4), 2000]


def test_verdict():
    grid, yellow = tables.pivot_cells(_cells(), "test_acc")
    v = tables.verdict(grid, yellow)
    assert v[1000] == "second"  # 61 best (not yellow), 60 yellow second
    assert v[2000] == "second"  # 71 best, 70 yellow
    grid.loc[(0.4, 1e-4), 2000] = 80.0
    assert tables.verdict(grid, yellow)[2000] == "best"
    grid.loc[(0.4, 1e-4), 2000] = 10.0
    grid.loc[(0.1, 1e-4), 2000] = 20.0
    assert tables.verdict(grid, yellow)[2000] == "no"
    grid.loc[(0.4, 1e-4), 2000] = np.nan
    assert tables.verdict(grid, yellow)[2000] == "n/a"


def test_style_marks_yellow_and_bold_and_exports(tmp_path):
    grid, yellow = tables.pivot_cells(_cells(), "test_acc")
    html = tables.style_grid(grid, yellow, caption="t").to_html()
    styled = {}  # cell id -> css declarations
    for sel, body in re.findall(r"([^{}]+)\{([^}]*)\}", html.split("</style>")[0]):
        for cell in re.findall(r"row(\d+)_col(\d+)", sel):
            styled.setdefault(tuple(map(int, cell)), "")
            styled[tuple(map(int, cell))] += body
    yellow_cells = {k for k, v in styled.items() if "#fff59d" in v}
    bold_cells = {k for k, v in styled.items() if "bold" in v}
    assert yellow_cells == {(0, 1), (1, 0)}
    assert bold_cells == {(2, 0), (1, 1)}  # 61 in column 1000, 71 in column 2000
    files = tables.export(tables.style_grid(grid, yellow), tmp_path / "t1")
    tex = files[1].read_text()
    assert r"\cellcolor" in tex and r"\bfseries" in tex


def _cell_texts(html: str) -> dict:
    """{(row, col): text} of the data cells of a Styler's HTML, read with its <style> block removed (as GitHub's
    notebook view shows it)."""
    body = re.sub(r"<style.*?</style>", "", html, flags=re.S)
    return {(int(r), int(c)): re.sub(r"<[^>]+>", "", t).strip()
            for r, c, t in re.findall(r'<td[^>]*class="data row(\d+) col(\d+)"[^>]*>(.*?)</td>', body, flags=re.S)}


def test_yellow_and_best_survive_without_css():
    """Without its CSS a table still tells the yellow cells and the best of each column: the marks are text."""
    grid, yellow = tables.pivot_cells(_cells(), "test_acc")
    texts = _cell_texts(tables.style_grid(grid, yellow, caption="t").to_html())
    assert "<style" not in re.sub(r"<style.*?</style>", "", tables.style_grid(grid, yellow).to_html(), flags=re.S)
    marked_yellow = {k for k, t in texts.items() if tables.YELLOW_MARK in t}
    marked_best = {k for k, t in texts.items() if tables.BEST_MARK in t}
    assert marked_yellow == {(0, 1), (1, 0)}
    assert marked_best == {(2, 0), (1, 1)}
    assert texts[(0, 1)] == f"{grid.iloc[0, 1]:.2f} {tables.YELLOW_MARK}"
    assert texts[(1, 1)] == f"{grid.iloc[1, 1]:.2f} {tables.BEST_MARK}"
    assert texts[(0, 0)] == f"{grid.iloc[0, 0]:.2f}"  # neither: the number alone
    html = tables.style_grid(grid, yellow).to_html()
    assert ">0.0001<" in html and "0.000100" not in html  # index labels as the paper prints them
    both = yellow.copy()
    both.iloc[2, 0] = True  # the best of column 0 made yellow: both marks
    assert _cell_texts(tables.style_grid(grid, both).to_html())[(2, 0)].endswith(
        f" {tables.YELLOW_MARK}{tables.BEST_MARK}")
    sd = grid * 0 + 0.5
    texts = _cell_texts(tables.style_grid(grid, yellow, sd=sd).to_html())
    assert texts[(2, 0)] == f"{grid.iloc[2, 0]:.2f} ± 0.50 {tables.BEST_MARK}"


def test_table_report_pairs_our_cells_with_the_papers():
    plan = []
    for sub in ("a",):
        for r, (plr, acc_p) in enumerate([(0.4, 90.0), (0.2, 92.0)]):
            for seed, acc in ((0, 50.0 + r), (1, 52.0 + r)):
                plan.append({"subtable": sub, "row": r, "n": 1000, "paper_n": 50000, "lr": plr * 50,
                             "weight_decay": 1e-4, "paper_lr": plr, "paper_weight_decay": 1e-4,
                             "yellow": r == 1, "paper_accuracy": acc_p, "seed": seed, "status": "finished",
                             "test_acc": acc})
    html, v = tables.table_report(pd.DataFrame(plan))
    assert "Reproduced (a)" in html and "Paper (a)" in html
    assert v.iloc[0]["ours"] == "best" and v.iloc[0]["paper"] == "best"
    assert "52.00 ± 1.41" in html  # mean of 51 and 53, sample sd over the two seeds
    assert "mean ± sd over seeds" in html


def test_table_cells_show_the_seed_sd_and_what_is_missing():
    """A cell of several finished seeds reads "mean ± sd" (sample sd, as the findings use), a single run its value
    alone, a partial cell "(k missing)" after it; ranks (bold) use the means."""
    plan = []
    for r, seeds in enumerate([((0, 70.0), (1, 74.0), (2, 72.0)), ((0, 80.0),), ((0, 60.0), (1, 62.0))]):
        for seed, acc in seeds:
            plan.append({"subtable": "a", "row": r, "n": 500, "paper_n": 12500, "lr": 0.1 * (r + 1),
                         "weight_decay": 1e-4, "paper_lr": 0.1 * (r + 1), "paper_weight_decay": 1e-4,
                         "yellow": r == 0, "paper_accuracy": 90.0, "seed": seed, "status": "finished",
                         "test_acc": acc})
    plan.append({**plan[-1], "seed": 2, "status": "missing", "test_acc": math.nan})
    html, v = tables.table_report(pd.DataFrame(plan))
    assert "72.00 ± 2.00" in html and "61.00 ± 1.41 (1 missing)" in html
    assert re.search(r">80.00 ▲<", html) and "80.00 ±" not in html  # one run, the column's best
    assert "72.00 ± 2.00 ★" in html  # the yellow cell
    assert v.iloc[0]["ours"].startswith("second")


def test_plot_angular_draws_the_prediction_until_the_first_lr_decay():
    """Eq. 27's level arccos(1 − TF) holds for the initial LR: the dashed line ends at the first decayed epoch;
    the cut Δθ axis says so; the y-labels are readable."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.collections import LineCollection

    def dashed(ax):
        return [c.get_segments()[0] for c in ax.collections if type(c) is LineCollection]

    hist = pd.DataFrame({"run": ["a"] * 8, "epoch": range(1, 9), "lr": [0.1] * 4 + [0.01] * 4,
                         "angular_update": [1.5, 0.3, 0.2, 0.2, 0.1, 0.05, 0.05, 0.05]})
    ax = figures.plot_angular(hist, hue="run", predicted={"10/128": 10 / 128})
    ((x0, y0), (x1, y1)), = dashed(ax)
    assert (x0, x1) == (1, 5) and y0 == y1 == pytest.approx(math.acos(1 - 10 / 128))
    assert "axis cut" in ax.get_ylabel() and ax.get_ylim()[1] < 1.5
    ax2 = figures.plot_angular(hist.assign(lr=0.1), hue="run", predicted={"x": 10 / 128})
    assert [seg[1][0] for seg in dashed(ax2)] == [8]  # no decay: to the last epoch
    ax3 = figures.plot_angular(hist.assign(effective_lr=1.0), hue="run", y="effective_lr")
    assert ax3.get_ylabel().startswith("η_eff")
    # the legend sits beside the axes (its anchor right of x = 1 in axes coordinates), the level names its TF
    assert ax.get_legend().get_bbox_to_anchor().transformed(ax.transAxes.inverted()).x0 >= 1.0
    assert [t.get_text() for t in ax.texts] == ["arccos(1−TF), TF = 10/128"]
    ax4 = figures.plot_angular(hist, hue="run", predicted={"TF": 10 / 128})
    assert [t.get_text() for t in ax4.texts] == ["arccos(1−TF)"]


def test_plot_angular_band_over_seeds_is_the_same_on_every_render():
    """The bootstrap band over seeds is seeded: rendering the same runs twice draws the same figure (a published
    figure changes only when its runs do)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    hist = pd.DataFrame({"run": ["a"] * 200 + ["b"] * 200, "epoch": list(range(1, 11)) * 40,
                         "angular_update": rng.uniform(0.05, 0.3, 400)})   # 20 seeds: an unseeded band varies

    def band():
        ax = figures.plot_angular(hist, hue="run")
        paths = [c.get_paths()[0].vertices.copy() for c in ax.collections if c.get_paths()]
        plt.close(ax.figure)
        return paths

    first, second = band(), band()
    assert len(first) == 2   # one band per run name, over its seeds
    assert all(np.array_equal(a, b) for a, b in zip(first, second))


def test_best_styler_marks_the_best_of_each_column_in_text_and_css():
    frame = pd.DataFrame({"vgg11": [90.0, 91.5, np.nan], "vgg13": [92.0, 91.0, 93.25]}, index=["SGD", "LARS", "OURS"])
    html = tables.best_styler(frame, caption="c").to_html()
    texts = _cell_texts(html)
    assert texts[(1, 0)] == f"91.50 {tables.BEST_MARK}" and texts[(2, 1)] == f"93.25 {tables.BEST_MARK}"
    assert texts[(0, 0)] == "90.00" and texts[(2, 0)] == ""  # an empty cell stays blank
    assert sum(tables.BEST_MARK in t for t in texts.values()) == 2 and "font-weight: bold" in html


def test_markdown_lines_keep_a_cell_with_a_bar_or_a_newline_in_its_column():
    lines = tables.markdown_lines(["claim", "verdict"], [["a | b", "holds:\nbest"], [1.5, None]])
    assert lines[:2] == ["| claim | verdict |", "|---|---|"]
    assert lines[2] == "| a \\| b | holds: best |"
    assert lines[3] == "| 1.5 | None |"
    # every line has as many unescaped separators as the header: no cell splits the table
    assert {len(re.findall(r"(?<!\\)\|", line)) for line in lines} == {3}
