"""Tables and figures from DataFrames, the way the papers show them. No training here.

* ``pivot_cells``: long-form cells → the paper's grid (rows = (LR, WD) in the paper's order, columns = N or B);
* ``style_grid``: pandas Styler with a yellow background on the cells whose tuning factor is the paper's
  highlighted value and the best value of each column in bold (Yun et al. 2022, Tables 1–11);
* ``side_by_side``: our grid next to the paper's, as one HTML block;
* ``verdict``: per column, is the best or second-best accuracy in a yellow cell (the paper's claim, Sec. 5.1);
* ``export``: HTML and LaTeX files;
* ``plot_angular``: Δθ per epoch curves with the predicted level arccos(1 − tuning factor) (Eq. 27).

Missing runs (``sweep.run_sweep(collect=True)`` on a store a cluster sweep has not finished yet) are never
dropped silently: ``pivot_cells`` records how many runs each cell lacks (``grid.attrs["missing"]``), ``style_grid``
writes "missing" in a cell without any result (a blank cell stays what the paper means by it: every seed
diverged) and "(k missing)" after a partial mean, and ``verdict`` says how many cells of a column are incomplete.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

YELLOW = "background-color: #fff59d"
MISSING_CSS = "color: #888888;font-style: italic"


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
    ``grid.attrs["missing"]`` as ``{(row key, column): number of missing runs}``; not for the paper's own values
    (a ``value`` named ``paper_*``), which are never missing."""
    cells = cells.sort_values([order, col]) if order in cells else cells
    idx = list(dict.fromkeys(tuple(r) for r in cells[list(row_keys)].itertuples(index=False)))
    cols = sorted(cells[col].unique())
    grid = pd.DataFrame(np.nan, index=pd.MultiIndex.from_tuples(idx, names=list(row_keys)), columns=cols)
    grid.columns.name = col
    yellow = pd.DataFrame(False, index=grid.index, columns=cols)
    missing: dict[tuple, int] = {}
    for _, r in cells.iterrows():
        key = tuple(r[k] for k in row_keys)
        grid.loc[key, r[col]] = r[value]
        yellow.loc[key, r[col]] = bool(r.get("yellow", False))
        k = 0 if value.startswith("paper_") else _missing_runs(r)
        if k:
            missing[(key, r[col])] = missing.get((key, r[col]), 0) + k
    if missing:
        grid.attrs["missing"] = missing
    return grid, yellow


def _missing_of(grid: pd.DataFrame, missing: dict | None) -> dict:
    return dict(grid.attrs.get("missing", {}) if missing is None else missing)


def _rank_in_column(col: pd.Series) -> pd.Series:
    """1 for the best, 2 for the second best (ties share a rank), NaN for empty cells."""
    return col.rank(ascending=False, method="min")


def style_grid(grid: pd.DataFrame, yellow: pd.DataFrame, caption: str = "", precision: int = 2,
               missing: dict | None = None, sd: pd.DataFrame | None = None):
    """Paper-style Styler: yellow cells, bold best per column, blanks for empty cells (every seed diverged).

    ``missing``: ``{(row key, column): runs missing}`` (default: ``grid.attrs["missing"]`` from ``pivot_cells``);
    such a cell reads "missing" (grey) when it has no value, else "<mean> (k missing)". ``sd``: a grid like
    ``grid`` of standard deviations over seeds; a cell with one reads "<mean> ± <sd>" (ranks use the means)."""
    ranks = grid.apply(_rank_in_column)
    missing = _missing_of(grid, missing)

    def css(_):
        out = pd.DataFrame("", index=grid.index, columns=grid.columns)
        out = out.mask(yellow.reindex_like(grid).fillna(False).astype(bool), YELLOW)
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
    for (key, c), k in missing.items():
        v = grid.loc[key, c]
        texts[(key, c)] = "missing" if pd.isna(v) else f"{texts.get((key, c), f'{v:.{precision}f}')} ({k} missing)"
    for (key, c), text in texts.items():
        sty = sty.format(lambda _, t=text: t, subset=pd.IndexSlice[[key], [c]])
    if caption:
        sty = sty.set_caption(caption)
    return sty


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
            out[c] = "best" if best == 1 else "second" if best == 2 else "no"
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


def plot_angular(hist: pd.DataFrame, hue: str, ax=None, predicted: dict | None = None,
                 y: str = "angular_update", title: str = ""):
    """Δθ (radians) per epoch, one line per ``hue`` value; ``predicted``: {label: tuning factor} draws the
    level arccos(1 − TF) of Eq. 27 as dashed lines, up to the first LR decay (the factor holds for the initial LR;
    after a ÷10 decay Eq. 27's factor is 10× smaller). For Δθ the y-axis is cut at 1.15× the largest value after
    epoch 2 (the first epochs' rotation away from the initialization would flatten the rest; noted on the axis)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    if hist.empty or y not in hist:  # collect mode before any of these runs finished: say so, draw nothing
        ax.text(0.5, 0.5, "runs missing: none in the store yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        return ax
    sns.lineplot(data=hist, x="epoch", y=y, hue=hue, ax=ax, palette="tab10")
    end = hist["epoch"].max()
    if "lr" in hist:  # the first epoch whose LR is below its run's initial LR: the prediction's range ends there
        decayed = hist.loc[hist["lr"] < 0.999 * hist.groupby(hue)["lr"].transform("first"), "epoch"]
        end = decayed.min() if len(decayed) else end
    for label, tf in (predicted or {}).items():
        if 0 < tf < 2:
            ax.hlines(math.acos(1 - tf), hist["epoch"].min(), end, linestyles="--", lw=1, color="gray")
            ax.annotate(f"arccos(1−TF) {label}", (end, math.acos(1 - tf)), fontsize=7, ha="right", va="bottom",
                        color="gray")
    cut = ""
    if y == "angular_update":  # the first epoch's large rotation from the initialisation would flatten the rest
        later = hist.loc[hist["epoch"] > 2, y]
        levels = [math.acos(1 - tf) for tf in (predicted or {}).values() if 0 < tf < 2]
        top = max([later.max() if len(later) else 0.0, *levels])
        if top > 0 and hist[y].max() > 1.15 * top:
            ax.set_ylim(0, 1.15 * top)
            cut = "\n(axis cut: first epochs off scale)"
    ax.set_ylabel({"angular_update": "Δθ per epoch (rad)", "effective_lr": "η_eff = η/‖x‖² (per step)",
                   "effective_lr_epoch": "η_epoch = ηN/(B‖x‖²) (per epoch)",
                   "weight_norm": "‖x‖"}.get(y, y) + cut)
    ax.set_title(title)
    return ax


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
    the store yet, ``run_sweep(collect=True)``; their cells read "missing"). With ``out_dir``, writes HTML + LaTeX per
    sub-table and the verdicts as CSV.
    """
    from .sweep import aggregate

    paper_rows = tuple(f"paper_{k}" for k in row_keys)
    keys = ["subtable", "row", col, f"paper_{col}", *row_keys, *paper_rows, "yellow", "paper_accuracy"]
    agg = aggregate(results, by=keys, value=value)
    html, verdicts = [], []
    for sub, g in agg.groupby("subtable", sort=True, dropna=False):
        ours, ymask = pivot_cells(g, value, col=col, row_keys=row_keys)
        theirs, ymask_p = pivot_cells(g, "paper_accuracy", col=f"paper_{col}", row_keys=paper_rows)
        sd, _ = pivot_cells(g, "std", col=col, row_keys=row_keys)  # NaN where a cell has under two finished runs
        label = f"({sub})" if isinstance(sub, str) and sub else ""
        data = f" — {dataset_label(g_cfgs)}" if (g_cfgs := _cfgs_of(results, sub)) else ""
        spread = "; mean ± sd over seeds" if sd.notna().any().any() else ""
        s_ours = style_grid(ours, ymask, caption=f"ours {label}{data}{spread}", sd=sd)
        s_paper = style_grid(theirs, ymask_p, caption=f"paper {label}")
        v_ours, v_paper = verdict(ours, ymask), verdict(theirs, ymask_p)
        miss = ours.attrs.get("missing", {})
        for (c_ours, vo), (c_paper, vp) in zip(v_ours.items(), v_paper.items()):
            verdicts.append({"subtable": sub, col: c_ours, f"paper_{col}": c_paper, "ours": vo, "paper": vp,
                             "missing_runs": sum(k for (_, c), k in miss.items() if c == c_ours)})
        html.append(side_by_side(s_ours, s_paper, titles=(f"Reproduced {label}", f"Paper {label}")))
        if out_dir is not None:
            export(s_ours, Path(out_dir) / f"{name}{sub or ''}_ours")
            export(s_paper, Path(out_dir) / f"{name}{sub or ''}_paper")
    vdf = pd.DataFrame(verdicts)
    if out_dir is not None:
        vdf.to_csv(Path(out_dir) / f"{name}_verdicts.csv", index=False)
    return "".join(html), vdf


# ------------------------------------------------------------------------------------------- findings
#: what a dataset is called in tables and figures; a stand-in says so wherever its numbers appear
STAND_INS = {"cifar10-jpeg": "CIFAR-10 JPEG stand-in (not CIFAR-10 numbers)"}
DATASET_NAMES = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100", "tiny_imagenet": "Tiny ImageNet",
                 "imagenet": "ImageNet"}
SYNTHETIC = "synthetic images (pipeline check)"
#: datasets that are synthetic by name (``distributed.ImageFolderConfig`` has no ``synthetic`` field)
SYNTHETIC_DATASETS = ("synthetic-imagefolder",)


def label_of(dataset: str, synthetic: bool = False) -> str:
    """The name of one dataset in tables and figures: ``DATASET_NAMES``, a stand-in's label (``STAND_INS``, which
    says its accuracies are not the paper dataset's), :data:`SYNTHETIC`, else the dataset's own name."""
    if synthetic or dataset in SYNTHETIC_DATASETS:
        return SYNTHETIC
    return STAND_INS.get(dataset, DATASET_NAMES.get(dataset, dataset))


def dataset_label(results_or_cfgs) -> str:
    """How the data of a sweep is named in its tables and figures (:func:`label_of` of every config: ``RunConfig``
    or ``distributed.ImageFolderConfig``; a sweep result's ``cfg`` column), distinct labels in order, joined by
    ", "."""
    cfgs = list(results_or_cfgs["cfg"]) if hasattr(results_or_cfgs, "columns") else list(results_or_cfgs)
    labels = []
    for c in cfgs:
        label = label_of(c.dataset, bool(getattr(c, "synthetic", False)))
        if label not in labels:
            labels.append(label)
    return ", ".join(labels)


def peak_tuning_factor(tf, acc, seeds=None, n_boot: int = 2000, level: float = 0.95, rng: int = 0) -> dict:
    """The tuning factor at the peak of a quadratic fitted (least squares) to accuracy against log(tuning factor),
    with a bootstrap interval over seeds.

    ``tf``, ``acc``: one entry per run (seeds are separate points); ``seeds``: each run's seed. The bootstrap draws
    seeds with replacement and refits on all the runs of the drawn seeds (a seed's runs stay together: at small N
    a seed also draws the training subset). Returns ``peak`` (NaN when the fitted parabola opens upwards -- no
    interior maximum -- or its vertex lies outside the measured range, where a quadratic says nothing), ``lo``,
    ``hi`` (percentile interval of the resampled peaks; a resample without an interior maximum in range counts as
    the end of the range with the higher accuracy), ``n_boot`` and ``inside`` (share of resamples with an interior peak). No paper
    reports this number: it turns "the yellow cell is best or second" into a measured optimum."""
    x = np.log(np.asarray(tf, dtype=float))
    y = np.asarray(acc, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    seeds = np.zeros(len(ok), dtype=int)[ok] if seeds is None else np.asarray(seeds)[ok]
    nan = {"peak": math.nan, "lo": math.nan, "hi": math.nan, "n_boot": 0, "inside": math.nan}
    if len(np.unique(x)) < 3:
        return nan
    lo_x, hi_x = x.min(), x.max()

    def vertex(xs, ys):
        if len(np.unique(xs)) < 3:
            return math.nan, False
        c2, c1, _ = np.polyfit(xs, ys, 2)
        if c2 >= 0:
            return (lo_x if ys[xs == xs.min()].mean() > ys[xs == xs.max()].mean() else hi_x), False
        v = -c1 / (2 * c2)
        return float(np.clip(v, lo_x, hi_x)), bool(lo_x <= v <= hi_x)

    v, inside = vertex(x, y)
    out = {"peak": math.exp(v) if inside else math.nan}
    uniq = np.unique(seeds)
    gen = np.random.default_rng(rng)
    peaks, ins = [], []
    if len(uniq) > 1:
        for _ in range(n_boot):
            draw = gen.choice(uniq, size=len(uniq), replace=True)
            idx = np.concatenate([np.flatnonzero(seeds == s) for s in draw])
            pv, pin = vertex(x[idx], y[idx])
            if math.isfinite(pv):
                peaks.append(pv)
                ins.append(pin)
    if peaks:
        a = (1 - level) / 2
        out.update(lo=math.exp(np.quantile(peaks, a)), hi=math.exp(np.quantile(peaks, 1 - a)), n_boot=len(peaks),
                   inside=float(np.mean(ins)))
    else:
        out.update(lo=math.nan, hi=math.nan, n_boot=0, inside=math.nan)
    return out


def findings(results: pd.DataFrame, col: str = "n", value: str = "test_acc", yellow_tf: float | None = None,
             group: str = "subtable") -> pd.DataFrame:
    """Per column of a swept grid (one row per (``group``, ``col``)), what the paper's claim needs, computed from the
    runs (``sweep.run_sweep`` output with one row per (cell, seed)):

    ``cells``, ``seeds`` (finished runs per cell, least), ``verdict`` (best / second / no: the rank of the yellow
    cell's mean among the column's means, the paper's reading), ``yellow_mean`` ± ``yellow_sd`` (over seeds),
    ``best_other`` (the best non-yellow cell's mean) and its ``best_other_tf``, ``margin`` (yellow − best other: > 0
    means the yellow cell is best), ``runner_up_margin`` (best − second best of the column), ``spread`` (the largest
    seed sd among the yellow and best-other cells) and ``decided`` (|margin| > spread: the margin exceeds the seed
    spread), ``peak_tf`` [``peak_lo``, ``peak_hi``] (:func:`peak_tuning_factor`) and ``peak_vs_yellow``
    (peak / yellow tuning factor), ``missing`` (runs not in the store)."""
    from .sweep import MISSING

    rows = []
    keys = [k for k in (group, col) if k in results]
    for key, g in results.groupby(keys, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        ok = g[g["status"] == "finished"]
        cells = g.groupby("tuning_factor", sort=True)
        stats = ok.groupby("tuning_factor")[value].agg(["mean", "std", "count"]).reindex(sorted(g.tuning_factor.unique()))
        yellow_rows = g[g["yellow"]] if "yellow" in g else g.iloc[:0]
        ytf = (float(yellow_rows.tuning_factor.iloc[0]) if len(yellow_rows)
               else (yellow_tf if yellow_tf is not None else math.nan))
        row = dict(zip(keys, key))
        row.update(cells=cells.ngroups, seeds=int(stats["count"].fillna(0).min()) if len(stats) else 0,
                   seeds_max=int(stats["count"].fillna(0).max()) if len(stats) else 0,
                   missing=int((g["status"] == MISSING).sum()), yellow_tf=ytf)
        means = stats["mean"].dropna()
        if ytf in means.index and len(means) > 1:
            ranks = means.rank(ascending=False, method="min")
            r = ranks[ytf]
            others = means.drop(index=ytf)
            top2 = means.sort_values(ascending=False)
            ysd = stats.loc[ytf, "std"]
            bo_tf = float(others.idxmax())
            sds = [v for v in (ysd, stats.loc[bo_tf, "std"]) if pd.notna(v)]
            spread = float(max(sds)) if sds else math.nan  # one seed: no spread
            margin = float(means[ytf] - others.max())
            row.update(verdict="best" if r == 1 else "second" if r == 2 else "no", yellow_mean=float(means[ytf]),
                       yellow_sd=float(ysd), best_other=float(others.max()), best_other_tf=bo_tf, margin=margin,
                       runner_up_margin=float(top2.iloc[0] - top2.iloc[1]), spread=spread,
                       decided=bool(math.isfinite(spread) and abs(margin) > spread))
        else:
            row.update(verdict="n/a", yellow_mean=math.nan, yellow_sd=math.nan, best_other=math.nan,
                       best_other_tf=math.nan, margin=math.nan, runner_up_margin=math.nan, spread=math.nan,
                       decided=False)
        pk = peak_tuning_factor(ok.tuning_factor, ok[value], ok.seed if "seed" in ok else None)
        row.update(peak_tf=pk["peak"], peak_lo=pk["lo"], peak_hi=pk["hi"],
                   peak_vs_yellow=pk["peak"] / ytf if ytf and math.isfinite(ytf) else math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def angular_findings(results: pd.DataFrame, epoch: int, keys=("subtable", "n", "batch_size")) -> pd.DataFrame:
    """Δθ per epoch at ``epoch`` (mean ± sd over seeds) of every cell beside the Eq. 27 reading arccos(1 − TF),
    one row per (keys, tuning factor), with ``ratio`` = measured / predicted."""
    from .angular import predicted_angular_update

    rows = []
    for _, r in results.iterrows():
        h = [e for e in r["history"] if int(e.get("epoch", -1)) == epoch and e.get("angular_update") is not None]
        if h:
            rows.append({**{k: r[k] for k in keys if k in r}, "tuning_factor": r["tuning_factor"],
                         "yellow": bool(r.get("yellow", False)), "seed": r.get("seed"),
                         "angular_update": float(h[0]["angular_update"])})
    cols = [k for k in keys if k in results] + ["tuning_factor", "yellow"]
    if not rows:
        return pd.DataFrame(columns=[*cols, "epoch", "angular_update", "sd", "seeds", "predicted", "ratio"])
    df = pd.DataFrame(rows)
    out = df.groupby(cols, sort=True).angular_update.agg(["mean", "std", "count"]).reset_index()
    out = out.rename(columns={"mean": "angular_update", "std": "sd", "count": "seeds"})
    out.insert(len(cols), "epoch", epoch)
    out["predicted"] = predicted_angular_update(out.tuning_factor.to_numpy())
    out["ratio"] = out.angular_update / out.predicted
    return out


def say_findings(f: pd.DataFrame, col: str = "n", what: str = "accuracy") -> str:
    """The findings table in words (Markdown), one line per column: the numbers come from ``findings``."""
    lines = []
    for _, r in f.iterrows():
        where = f"{col} = {r[col]:g}" if col in r else ""
        if "subtable" in r and isinstance(r["subtable"], str) and r["subtable"]:
            where = f"({r['subtable']}) {where}"
        if r["verdict"] == "n/a":
            lines.append(f"- **{where}**: no verdict yet ({int(r['missing'])} runs missing).")
            continue
        if r["missing"]:
            where += f" — provisional, {int(r['missing'])} runs missing"
        rank = {"best": "is the best cell", "second": "is second", "no": "is neither best nor second"}[r["verdict"]]
        margin = (f"ahead of the best other cell by {r['margin']:.2f} points" if r["margin"] > 0
                  else f"tied with the cell at tuning factor {r['best_other_tf']:.4g}" if r["margin"] == 0
                  else f"{-r['margin']:.2f} points behind the best cell (tuning factor {r['best_other_tf']:.4g})")
        spread = (("more than" if r["decided"] else "within") + f" the seed spread ({r['spread']:.2f})"
                  if math.isfinite(r["spread"]) else "with one seed, so no spread to compare with")
        interval = (f" (95 % bootstrap interval {r['peak_lo']:.3g}–{r['peak_hi']:.3g})" if math.isfinite(r["peak_lo"])
                    else " (one seed: no bootstrap interval)")
        peak = (f"the quadratic fit peaks at tuning factor {r['peak_tf']:.3g}{interval} beside the yellow "
                f"{r['yellow_tf']:.3g}" if math.isfinite(r["peak_tf"]) else "the quadratic fit has no interior peak")
        seeds = f"{int(r['seeds'])} seed{'s' if r['seeds'] != 1 else ''} per cell"
        sd = f" ± {r['yellow_sd']:.2f}" if math.isfinite(r["yellow_sd"]) else ""
        lines.append(f"- **{where}** ({seeds}): the yellow cell ({r['yellow_mean']:.2f}{sd} % {what}) {rank}, "
                     f"{margin}, {spread}; {peak}.")
    return "\n".join(lines)


def _fmt_tf(v: float) -> str:
    return f"{v:.3g}" if math.isfinite(v) else "—"


def verdict_text(r) -> str:
    """One findings row as a short verdict: "best, +1.20 (> seed sd 0.80)" / "no, −2.1 (within seed sd 2.5)"."""
    if r["verdict"] == "n/a":
        return f"n/a ({int(r['missing'])} runs missing)" if r["missing"] else "n/a"
    missing = f"; provisional, {int(r['missing'])} runs missing" if r["missing"] else ""
    if not math.isfinite(r["spread"]):
        return f"{r['verdict']}, {r['margin']:+.2f} (one seed: no spread{missing})"
    rel = ">" if r["decided"] else "within"
    return f"{r['verdict']}, {r['margin']:+.2f} ({rel} seed sd {r['spread']:.2f}{missing})"


def peak_text(r) -> str:
    """"0.071 [0.063, 0.078] vs 0.0781" from a findings row (— when the fit has no interior peak)."""
    if not math.isfinite(r["peak_tf"]):
        return f"no interior peak (yellow {_fmt_tf(r['yellow_tf'])})"
    if not math.isfinite(r["peak_lo"]):
        return f"{_fmt_tf(r['peak_tf'])} (one seed) vs {_fmt_tf(r['yellow_tf'])}"
    return f"{_fmt_tf(r['peak_tf'])} [{_fmt_tf(r['peak_lo'])}, {_fmt_tf(r['peak_hi'])}] vs {_fmt_tf(r['yellow_tf'])}"


def claim_rows(found: pd.DataFrame, paper: str, item: str, claim: str, data: str, col: str = "n",
               results: pd.DataFrame | None = None) -> list[dict]:
    """``publish.record_claims`` rows, one per findings column: the verdict and the peak tuning factor computed by
    :func:`findings`; ``results`` (the sweep) adds the column's training minutes (sum of the runs' seconds)."""
    rows = []
    for _, r in found.iterrows():
        sub = f" ({r['subtable']})" if "subtable" in r and isinstance(r["subtable"], str) and r["subtable"] else ""
        label = {"n": "N", "batch_size": "B"}.get(col, col)
        minutes = None
        if results is not None:
            sel = results[col] == r[col]
            if "subtable" in r and "subtable" in results:
                sel &= results["subtable"].astype(str) == str(r["subtable"])
            minutes = float(pd.to_numeric(results.loc[sel, "seconds"], errors="coerce").sum()) / 60
        rows.append({"paper": paper, "item": f"{item}{sub}, {label} = {r[col]:g}", "claim": claim, "data": data,
                     "seeds": int(r["seeds"]), "seeds_max": int(r.get("seeds_max", r["seeds"])),
                     "verdict": verdict_text(r), "peak_tf": peak_text(r),
                     "train_minutes": minutes})
    return rows


def verdict_line(found: pd.DataFrame) -> str:
    """The notebook's one-line verdict (the ``verdict`` cell read by ``python -m repro_lib run``'s end table)."""
    v = found["verdict"].value_counts().to_dict()
    parts = [f"{k} {v[k]}/{len(found)}" for k in ("best", "second", "no", "n/a") if k in v]
    decided = int(found["decided"].sum())
    missing = int(found["missing"].sum())
    peaks = [peak_text(r) for _, r in found.iterrows() if math.isfinite(r["peak_tf"])]
    return (f"yellow cell: {', '.join(parts)} columns; margin beyond the seed spread in {decided}/{len(found)}"
            + (f"; peak TF {peaks[0]}" if len(peaks) == 1 else f"; {len(peaks)} fitted peaks" if peaks else "")
            + (f"; provisional: {missing} runs missing" if missing else ""))
