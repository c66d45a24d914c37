"""Paper-style tables from DataFrames, the way the papers show them. No training here.

* ``pivot_cells``: long-form cells → the paper's grid (rows = (LR, WD) in the paper's order, columns = N or B);
* ``style_grid``: pandas Styler with a yellow background on the cells whose tuning factor is the paper's
  highlighted value and the best value of each column in bold (Yun et al. 2022, Tables 1–11);
* ``side_by_side``: our grid next to the paper's, as one HTML block;
* ``verdict``: per column, is the best or second-best accuracy in a yellow cell (the paper's claim, Sec. 5.1);
* ``best_styler``: any table of scores with the best of each column bold and marked;
* ``readable``: any table of measurements for people: headers in words with units (``header``, :data:`HEADERS`),
  no index column, integers as integers and floats to a few significant digits, never with an exponent
  (``number``: 1.2·10⁻⁶), at most :data:`SHOWN_ROWS` rows on the page with the whole table saved as CSV and
  linked;
* ``export``: HTML and LaTeX files;
* ``table_report``: all of it for every sub-table of a swept paper table (columns without any run yet in one
  line, not as grids of "missing"), ``verdict_view`` its verdicts as a reader scans them;
* ``varying``: a table without its constant columns;
* ``markdown_lines``: a plain Markdown table (the README's and the result cell's), ``|`` escaped in every cell.

Missing runs (``sweep.run_sweep(collect=True)`` on a store a cluster sweep has not finished yet) are never
dropped silently: ``pivot_cells`` records how many runs each cell lacks (``grid.attrs["missing"]``), ``style_grid``
writes "missing" in a cell without any result and "(k missing)" after a partial mean, and ``verdict`` says how
many cells of a column are incomplete. Diverged runs (a non-finite loss, or a run that ended collapsed at chance,
``train.collapse_reason``) are left out of a cell's mean as the paper does (Yun et al. Sec. 5.1), and said:
"(k diverged)" after the mean of the others, "diverged" where every seed did (the paper leaves that cell blank).
Figures: ``repro_lib.results.figures``; verdicts in words: ``repro_lib.results.findings``.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..store import MISSING
from .findings import dataset_label, rank_key

YELLOW = "background-color: #fff59d"
MISSING_CSS = "color: #888888;font-style: italic"
#: marks written into the cell text, so that they survive where the CSS is dropped (GitHub's notebook view, plain
#: HTML, LaTeX): the yellow cells (the paper's highlighted tuning factor) and the best value of each column
YELLOW_MARK = "★"
BEST_MARK = "▲"
MARKS_LEGEND = f"{YELLOW_MARK} yellow cell (the paper's highlighted tuning factor), {BEST_MARK} best of its column"


def _missing_runs(r: pd.Series) -> int:
    """How many runs a row of cells lacks: its ``missing`` count (``sweep.aggregate``) or 1 for a raw sweep row
    whose status is ``"missing"``."""
    if "missing" in r and pd.notna(r["missing"]):
        return int(r["missing"])
    return int(r.get("status") == "missing")


def pivot_cells(cells: pd.DataFrame, value: str, col: str = "n", row_keys=("lr", "weight_decay"),
                order: str = "row") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(grid of ``value``, grid of the ``yellow`` flag) with rows ``row_keys`` in ``order`` and columns ``col``.

    Cells lacking runs (a ``missing`` count column, or ``status == "missing"``) are listed in
    ``grid.attrs["missing"]`` as ``{(row key, column): number of missing runs}``, and cells with diverged runs
    (a ``diverged`` count column, or ``status == "diverged"``) in ``grid.attrs["diverged"]`` likewise; not for the
    paper's own values (a ``value`` named ``paper_*``), which are never missing."""
    cells = cells.sort_values([order, col]) if order in cells else cells
    idx = list(dict.fromkeys(tuple(r) for r in cells[list(row_keys)].itertuples(index=False)))
    cols = sorted(cells[col].unique())
    grid = pd.DataFrame(np.nan, index=pd.MultiIndex.from_tuples(idx, names=list(row_keys)), columns=cols)
    grid.columns.name = col
    yellow = pd.DataFrame(False, index=grid.index, columns=cols)
    missing: dict[tuple, int] = {}
    diverged: dict[tuple, int] = {}
    for _, r in cells.iterrows():
        key = tuple(r[k] for k in row_keys)
        grid.loc[key, r[col]] = r[value]
        yellow.loc[key, r[col]] = bool(r.get("yellow", False))
        ours = not value.startswith("paper_")
        k = _missing_runs(r) if ours else 0
        if k:
            missing[(key, r[col])] = missing.get((key, r[col]), 0) + k
        d = _diverged_runs(r) if ours else 0
        if d:
            diverged[(key, r[col])] = diverged.get((key, r[col]), 0) + d
    if missing:
        grid.attrs["missing"] = missing
    if diverged:
        grid.attrs["diverged"] = diverged
    return grid, yellow


def _diverged_runs(r: pd.Series) -> int:
    """How many runs a row of cells left out as diverged: its ``diverged`` count (``sweep.aggregate``) or 1 for a
    raw sweep row whose status is ``"diverged"``."""
    if "diverged" in r and pd.notna(r["diverged"]):
        return int(r["diverged"])
    return int(r.get("status") == "diverged")


def _missing_of(grid: pd.DataFrame, missing: dict | None) -> dict:
    return dict(grid.attrs.get("missing", {}) if missing is None else missing)


def _rank_in_column(col: pd.Series) -> pd.Series:
    """1 for the best, 2 for the second best (ties share a rank), NaN for empty cells."""
    return col.rank(ascending=False, method="min")


def style_grid(grid: pd.DataFrame, yellow: pd.DataFrame, caption: str = "", precision: int = 2,
               missing: dict | None = None, sd: pd.DataFrame | None = None):
    """Paper-style Styler: yellow cells, bold best per column, "diverged" where every seed diverged (blank in the
    paper's own grid) and "(k diverged)" after a mean that leaves some out (``grid.attrs["diverged"]``). The
    same two facts are also written into the cell text (:data:`YELLOW_MARK` after a yellow cell's value,
    :data:`BEST_MARK` after the column's best), since the CSS is dropped where the notebook is shown without it.

    ``missing``: ``{(row key, column): runs missing}`` (default: ``grid.attrs["missing"]`` from ``pivot_cells``);
    such a cell reads "missing" (grey) when it has no value, else "<mean> (k missing)". ``sd``: a grid like
    ``grid`` of standard deviations over seeds; a cell with one reads "<mean> ± <sd>" (ranks use the means)."""
    attrs = grid.attrs
    grid = grid.rename_axis(index=[header(n) for n in grid.index.names], columns=header(grid.columns.name))
    grid.attrs = attrs
    if sd is not None:
        sd = sd.rename_axis(index=grid.index.names, columns=grid.columns.name)
    yellow = yellow.rename_axis(index=grid.index.names, columns=grid.columns.name)
    ranks = grid.apply(_rank_in_column)
    missing = _missing_of(grid, missing)
    ymask = yellow.reindex_like(grid).fillna(False).astype(bool)

    def css(_):
        out = pd.DataFrame("", index=grid.index, columns=grid.columns)
        out = out.mask(ymask, YELLOW)
        bold = ranks == 1
        out = out.where(~bold, out + ";font-weight: bold")
        for (key, c) in missing:
            out.loc[key, c] += ";" + MISSING_CSS
        return out

    sty = grid.style.apply(css, axis=None).format(precision=precision, na_rep="")
    texts = {}
    if sd is not None:
        sd = sd.reindex_like(grid)
        for key in grid.index:
            for c in grid.columns:
                v, e = grid.loc[key, c], sd.loc[key, c]
                if pd.notna(v) and pd.notna(e):
                    texts[(key, c)] = f"{v:.{precision}f} ± {e:.{precision}f}"
    for (key, c), k in grid.attrs.get("diverged", {}).items():  # left out of the mean, as the paper does
        v = grid.loc[key, c]
        texts[(key, c)] = "diverged" if pd.isna(v) else f"{texts.get((key, c), f'{v:.{precision}f}')} ({k} diverged)"
    for (key, c), k in missing.items():
        v = grid.loc[key, c]
        texts[(key, c)] = "missing" if pd.isna(v) else f"{texts.get((key, c), f'{v:.{precision}f}')} ({k} missing)"
    for key in grid.index:
        for c in grid.columns:
            v = grid.loc[key, c]
            marks = (YELLOW_MARK if ymask.loc[key, c] else "") + (BEST_MARK if ranks.loc[key, c] == 1 else "")
            if pd.notna(v) and marks:
                texts[(key, c)] = f"{texts.get((key, c), f'{v:.{precision}f}')} {marks}"
    for (key, c), text in texts.items():
        sty = sty.format(lambda _, t=text: t, subset=pd.IndexSlice[[key], [c]])
    # η, λ, N and B as the paper prints them (0.0001, 80, 12500), not as floats with six decimals
    for axis in (0, 1):
        sty = sty.format_index(lambda v: number(v, 6) if isinstance(v, float) else str(v), axis=axis)
    if caption:
        sty = sty.set_caption(caption)
    return sty


def best_styler(frame: pd.DataFrame, precision: int = 2, caption: str = ""):
    """A table of scores (higher is better) with the best value of each column bold (CSS) and marked
    :data:`BEST_MARK` in its text, so the mark survives where the CSS is dropped; empty cells stay blank."""
    best = frame.apply(_rank_in_column) == 1
    sty = frame.style.format(precision=precision, na_rep="")
    sty = sty.apply(lambda _: best.replace({True: "font-weight: bold", False: ""}), axis=None)
    for key in frame.index:
        for c in frame.columns:
            if best.loc[key, c]:
                text = f"{frame.loc[key, c]:.{precision}f} {BEST_MARK}"
                sty = sty.format(lambda _, t=text: t, subset=pd.IndexSlice[[key], [c]])
    return sty.set_caption(caption) if caption else sty


#: column names of the package's tables -> the header a reader sees (units where there are any); any other
#: snake_case name reads with spaces (:func:`header`)
HEADERS = {
    "n": "N (images)", "n_train": "N (images)", "batch_size": "B", "lr": "η", "weight_decay": "λ",
    "tuning_factor": "tuning factor", "test_acc": "test acc. (%)", "train_acc": "train acc. (%)", "std": "sd",
    "angular_update": "Δθ per epoch (rad)", "predicted": "arccos(1 − TF) (rad)", "lr_at_epoch": "LR at that epoch",
    "paper_n": "paper N", "paper_batch_size": "paper B", "paper_lr": "paper η", "paper_weight_decay": "paper λ",
    "paper_accuracy": "paper acc. (%)", "paper_value": "paper", "missing_runs": "runs missing",
    "cos_w_grad": "cos(w, ∇L)", "grad_ratio": "‖∇L(cw)‖ / ‖∇L(w)‖", "grad_norm": "‖∇L‖", "grad_error": "error",
    "loss_change": "loss change", "nearest_prediction": "nearest the prediction", "weight_norm": "‖w‖",
    "effective_lr": "η/‖w‖²", "relaxation_epochs": "relaxation time (epochs)", "first_decay": "first LR decay (epoch)",
    "steps_4b": "steps per epoch at 4B", "rule_weight_decay": "rule's λ", "control_tuning_factor": "control's TF",
    "yellow": "yellow", "seed": "seed", "seeds": "seeds", "epoch": "epoch", "ratio": "ratio",
}
#: rows of a table shown on the page; a longer one shows its first rows and links the whole table (CSV)
SHOWN_ROWS = 10
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def header(name) -> str:
    """The header a reader sees for column ``name``: :data:`HEADERS`, else the name with spaces for underscores."""
    return HEADERS.get(name, str(name).replace("_", " ")) if isinstance(name, str) else str(name)


def number(v, digits: int = 4) -> str:
    """``v`` for a reader: ``digits`` significant digits, never an exponent -- a value below 1e-4 in magnitude as
    "1.2·10⁻⁶", one of ``10**digits`` or more as a whole number with thousands separators; NaN blank."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, bool):
        return str(v)
    v = float(v)
    if v == 0 or not math.isfinite(v):
        return f"{v:g}"
    if abs(v) >= 10 ** digits:
        return f"{v:,.0f}"
    if abs(v) < 1e-4:
        mantissa, exp = f"{v:.{max(digits - 2, 1)}e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}·10{str(int(exp)).translate(_SUPERSCRIPT)}"
    return f"{v:.{digits}g}"


def readable(frame: pd.DataFrame, caption: str = "", digits: int = 4, csv: str | Path | None = None,
             link: str | None = None, rows: int = SHOWN_ROWS):
    """A table of measurements as a person reads it: headers in words (:func:`header`), no index column, float
    columns holding whole numbers (counts, epochs, N) as integers, other floats to ``digits`` significant digits
    and never with an exponent (:func:`number`), NaN blank. With ``csv``, the whole table is written there and a
    table longer than ``rows`` shows its first ``rows`` rows, its caption linking the file (``link``: the path a
    reader of the notebook follows, default the file's name; a longer table to show whole: ``rows=len(frame)`` and
    :func:`scrolling`). True/False cells read "yes"/"no" (:func:`bools`), a tuning factor 10/128 (:func:`tf_text`).
    Returns a Styler (``caption`` above it)."""
    out = bools(frame.reset_index(drop=True))
    for c in out.columns:
        if c in TF_COLUMNS and pd.api.types.is_float_dtype(out[c]):
            out[c] = out[c].map(tf_text)
    if csv is not None:
        Path(csv).parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(csv, index=False)
        if len(out) > rows:
            href = link or Path(csv).name
            more = f'first {rows} of {len(out)} rows; all of them: <a href="{href}">{Path(csv).name}</a>'
            caption = f"{caption} ({more})" if caption else more
            out = out.head(rows)
    fmt = {}
    for c in out.columns:
        col = out[c]
        if pd.api.types.is_float_dtype(col):
            whole = col.dropna()
            if len(whole) and (whole == whole.round()).all() and whole.abs().max() < 2 ** 53:
                out[c] = col.astype("Int64")
            else:
                fmt[c] = lambda v, d=digits: number(v, d)
    renamed = {c: header(c) for c in out.columns}
    out = out.rename(columns=renamed)
    sty = out.style.format({renamed[c]: f for c, f in fmt.items()}, na_rep="").hide(axis="index")
    return sty.set_caption(caption) if caption else sty


#: the class of the box :func:`scrolling` puts a long table in (``tests/test_rendered.py`` allows any number of rows
#: inside it)
SCROLL_CLASS = "repro-scroll"


def scrolling(table, max_height: str = "26em"):
    """A long table shown whole, in a box that scrolls (every row is on the page; the box keeps the page short):
    ``table`` a Styler (or HTML text). Returns an ``IPython.display.HTML``."""
    from IPython.display import HTML

    html = table.to_html() if hasattr(table, "to_html") else str(table)
    return HTML(f'<div class="{SCROLL_CLASS}" style="max-height: {max_height}; overflow: auto">{html}</div>')


#: columns that hold a tuning factor (written as a fraction of 128 where it is one: :func:`tf_text`)
TF_COLUMNS = ("tuning_factor", "TF")


def tf_text(v) -> str:
    """A tuning factor as the paper writes it: "10/128" where it is a whole number of 128ths, else 3 significant
    digits ("" for NaN)."""
    if v is None or not math.isfinite(v):
        return ""
    k = v * 128
    return f"{round(k):d}/128" if abs(k - round(k)) < 1e-6 and round(k) > 0 else number(v, 3)


def bools(frame: pd.DataFrame, yes: str = "yes", no: str = "no") -> pd.DataFrame:
    """``frame`` with its True/False cells written as words (a reader's "yes"/"no", not Python's)."""
    out = frame.copy()
    for c in out.columns:
        col = out[c]
        if pd.api.types.is_bool_dtype(col) or (col.dtype == object and len(col.dropna())
                                               and col.dropna().map(lambda v: isinstance(v, (bool, np.bool_))).all()):
            out[c] = col.map(lambda v: yes if v is True or v is np.True_ else no if v is False or v is np.False_
                             else v)
    return out


def verdict(grid: pd.DataFrame, yellow: pd.DataFrame, missing: dict | None = None) -> pd.Series:
    """Per column: ``"best"`` / ``"second"`` if a yellow cell holds the best / second-best accuracy,
    ``"no"`` otherwise, ``"n/a"`` if the column has no yellow cell with a value. A column with cells lacking runs
    (``missing``, default ``grid.attrs["missing"]``) gets " (k cells missing runs)" appended: a provisional verdict."""
    ranks = grid.apply(_rank_in_column)
    missing = _missing_of(grid, missing)
    out = {}
    for c in grid.columns:
        ymask = yellow[c].astype(bool) & grid[c].notna()
        if not ymask.any():
            out[c] = "n/a"
        else:
            best = ranks[c][ymask].min()
            out[c] = rank_key(best)
        k = sum(1 for (_, cc) in missing if cc == c)
        if k:
            out[c] += f" ({k} cell{'s' if k > 1 else ''} missing runs)"
    return pd.Series(out, name="verdict")


def side_by_side(*stylers, titles=()) -> str:
    """HTML of several Stylers in one row (display with ``IPython.display.HTML``)."""
    parts = []
    for i, s in enumerate(stylers):
        t = titles[i] if i < len(titles) else ""
        parts.append(f'<div style="display:inline-block;vertical-align:top;margin-right:2em">'
                     f'<b>{t}</b>{s.to_html()}</div>')
    return "<div>" + "".join(parts) + "</div>"


def export(styler, path_stem: str | Path) -> list[Path]:
    """Write ``<stem>.html`` and ``<stem>.tex`` (LaTeX with \\cellcolor for yellow and \\bfseries for bold)."""
    stem = Path(path_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    html, tex = stem.with_suffix(".html"), stem.with_suffix(".tex")
    html.write_text(styler.to_html())
    tex.write_text(styler.to_latex(convert_css=True, hrules=True))
    return [html, tex]


def _cfgs_of(results: pd.DataFrame, sub) -> list:
    """The configs of ``results``' sub-table ``sub`` (for the caption's data label); [] without a ``cfg`` column."""
    if "cfg" not in results:
        return []
    rows = results if "subtable" not in results else results[results["subtable"].astype(str) == str(sub)]
    return list(rows["cfg"]) or list(results["cfg"])


def table_report(results: pd.DataFrame, col: str = "n", out_dir: str | Path | None = None, name: str = "table",
                 value: str = "test_acc", row_keys: tuple = ("lr", "weight_decay")) -> tuple[str, pd.DataFrame]:
    """Our grid beside the paper's for every sub-table of a swept paper table.

    ``results``: ``sweep.run_sweep`` output of an ``Experiment.plan`` (columns ``subtable, row, <col>,
    paper_<col>, <row_keys>, paper_<row_keys>, yellow, paper_accuracy``; rows are (lr, weight_decay) by default,
    e.g. ``row_keys=("batch_size",)`` for a B × N table). Seeds are averaged
    with the paper's rule (``sweep.aggregate``). Returns (HTML, verdicts): one verdict row per (sub-table,
    column) for ours and for the paper's cells that were run, with ``missing_runs`` (runs of the column not in
    the store yet, ``run_sweep(collect=True)``; their cells read "missing") and ``runs`` (those it holds). A
    column without any run in the store is left out of the grids and named in one line under them
    (:func:`unrun_text`), a sub-table without any run is not drawn. With ``out_dir``, writes HTML + LaTeX per
    sub-table (every column) and the verdicts as CSV.
    """
    paper_rows = tuple(f"paper_{k}" for k in row_keys)
    keys = ["subtable", "row", col, f"paper_{col}", *row_keys, *paper_rows, "yellow", "paper_accuracy"]
    agg = aggregate(results, by=keys, value=value)
    html, verdicts, unrun = [], [], []
    for sub, g in agg.groupby("subtable", sort=True, dropna=False):
        held = (g["runs"] - g["missing"]).groupby(g[col]).sum()  # runs of each column the store holds
        label = f"({sub})" if isinstance(sub, str) and sub else ""
        ours, ymask = pivot_cells(g, value, col=col, row_keys=row_keys)
        theirs, ymask_p = pivot_cells(g, "paper_accuracy", col=f"paper_{col}", row_keys=paper_rows)
        v_ours, v_paper = verdict(ours, ymask), verdict(theirs, ymask_p)
        miss = ours.attrs.get("missing", {})
        for (c_ours, vo), (c_paper, vp) in zip(v_ours.items(), v_paper.items()):
            verdicts.append({"subtable": sub, col: c_ours, f"paper_{col}": c_paper, "ours": vo, "paper": vp,
                             "missing_runs": sum(k for (_, c), k in miss.items() if c == c_ours),
                             "runs": int(held.get(c_ours, 0))})
        data = f" — {dataset_label(g_cfgs)}" if (g_cfgs := _cfgs_of(results, sub)) else ""
        if out_dir is not None:  # the files hold every column, missing cells marked
            sd, _ = pivot_cells(g, "std", col=col, row_keys=row_keys)
            spread = "; mean ± sd over seeds" if sd.notna().any().any() else ""
            export(style_grid(ours, ymask, caption=f"ours {label}{data}{spread}", sd=sd),
                   Path(out_dir) / f"{name}{sub or ''}_ours")
            export(style_grid(theirs, ymask_p, caption=f"paper {label}"), Path(out_dir) / f"{name}{sub or ''}_paper")
        empty = [c for c in held.index if held[c] == 0]
        if empty:  # columns without any run yet: one line below the tables instead of grids of "missing"
            unrun.append((label, col, empty, sorted(held.index), g))
            g = g[~g[col].isin(empty)]
            if g.empty:
                continue
            ours, ymask = pivot_cells(g, value, col=col, row_keys=row_keys)
            theirs, ymask_p = pivot_cells(g, "paper_accuracy", col=f"paper_{col}", row_keys=paper_rows)
        sd, _ = pivot_cells(g, "std", col=col, row_keys=row_keys)  # NaN where a cell has under two finished runs
        spread = "; mean ± sd over seeds" if sd.notna().any().any() else ""
        s_ours = style_grid(ours, ymask, caption=f"ours {label}{data}{spread}", sd=sd)
        s_paper = style_grid(theirs, ymask_p, caption=f"paper {label}")
        html.append(side_by_side(s_ours, s_paper, titles=(f"Reproduced {label}", f"Paper {label}")))
    if unrun:
        html.append(f"<p>{unrun_text(unrun)}</p>")
    vdf = pd.DataFrame(verdicts)
    if out_dir is not None:
        vdf.to_csv(Path(out_dir) / f"{name}_verdicts.csv", index=False)
    return "".join(html), vdf


def unrun_text(unrun: list[tuple]) -> str:
    """One sentence for the columns of a table without any run in the store yet: ``unrun`` holds per sub-table
    (its label "(a)" or "", the column key, the empty columns, all its columns, its aggregated cells)."""
    name = {"n": "N", "batch_size": "B"}
    parts, missing = [], 0
    for label, col, empty, every, g in unrun:
        missing += int(g.loc[g[col].isin(empty), "missing"].sum())
        paper = dict(zip(g[col], g[f"paper_{col}"]))
        values = ", ".join(f"{v:,g}" + (f" (paper {paper[v]:,g})" if paper.get(v, v) != v else "") for v in empty)
        what = "every column" if len(empty) == len(every) else f"{name.get(col, col)} = {values}"
        parts.append(f"{label} {what}".strip())
    return (f"No run in the store yet, so not shown above: {'; '.join(parts)} "
            f"({missing:,} run{'s' if missing != 1 else ''}).")


def verdict_view(verdicts: pd.DataFrame) -> pd.DataFrame:
    """:func:`table_report`'s verdicts as a reader scans them: the columns with runs in the store (those without
    any are named in one line under the tables), no column that is the same throughout but the verdicts, and no
    bookkeeping (``runs``)."""
    v = verdicts
    if "runs" in v:
        v = v[v["runs"] > 0].drop(columns=["runs"])
    keep = {"ours", "paper"}
    drop = [c for c in v.columns if c not in keep and len(v) > 1 and v[c].astype(str).nunique() == 1]
    drop += [c for c in ("missing_runs",) if c in v and c not in drop and (v[c] == 0).all()]
    return v.drop(columns=drop).reset_index(drop=True)


def varying(frame: pd.DataFrame, keep=()) -> pd.DataFrame:
    """``frame`` without the columns whose value is the same in every row (they say nothing a caption cannot),
    but those in ``keep``; a frame of one row is returned whole."""
    if len(frame) < 2:
        return frame
    same = [c for c in frame.columns if c not in keep and frame[c].astype(str).nunique() == 1]
    return frame.drop(columns=same)


def markdown_lines(head, rows) -> list[str]:
    """A Markdown table as lines: the header ``head``, its rule and one line per row of ``rows`` (each cell a
    value written with ``str``, ``|`` escaped and on one line, so a cell never splits the table)."""
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"
    return [line(head), "|" + "---|" * len(head), *(line(r) for r in rows)]


def aggregate(df: pd.DataFrame, by: list[str], value: str = "test_acc") -> pd.DataFrame:
    """Mean of ``value`` over the finished runs per group, plus ``std`` (the sample standard deviation over them,
    as ``results.findings`` uses; NaN for a single run), ``runs`` (rows of the group),
    ``diverged`` and ``missing`` (runs the store does not hold, ``run_sweep(collect=True)``) columns.
    ``value`` is NaN both when every run diverged (``diverged == runs``) and when none is there yet
    (``missing > 0``): the two counts tell them apart."""

    def agg(g):
        ok = g[g["status"] == "finished"][value]
        return pd.Series({value: ok.mean() if len(ok) else math.nan,
                          "std": ok.std(ddof=1) if len(ok) > 1 else math.nan,
                          "runs": len(g), "diverged": int((g["status"] == "diverged").sum()),
                          "missing": int((g["status"] == MISSING).sum())})

    return df.groupby(by, dropna=False, sort=False).apply(agg, include_groups=False).reset_index()
