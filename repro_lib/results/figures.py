"""Figures from run histories, the way the papers draw them. No training here.

* ``theme``: seaborn's theme for every figure of the package (each notebook calls it once, in its imports cell).
* ``legend_outside``: an axes' legend beside it, never over the curves, its text at least :data:`MIN_FONT` pt.
* ``cell_labels``: what a line of a grid's runs is, in words ("B = 32 (yellow)", "N = 1,000, η = 3.2"), naming
  only what differs between the lines.
* ``plot_angular``: Δθ per epoch curves with the predicted level arccos(1 − tuning factor) (Yun et al. Eq. 27),
  and the same axes for the effective learning rates and the weight norm; the legend beside the axes, never over
  the curves.
* ``problems``: what a drawn figure lacks for a reader (a title, axis labels); ``theme`` has every pyplot figure
  checked when it is drawn, and a figure that lacks one says so under it (:data:`CHECK_MARK`), which
  ``tests/test_rendered.py`` looks for in every published notebook.
"""
from __future__ import annotations

import math

import pandas as pd

MIN_FONT = 9.0  # pt: the smallest text of a figure (tick labels, legends, notes on the axes)
# the columns of a grid's runs that name a cell, in the order a label lists them, and how a label writes each
CELL_KEYS = ("subtable", "n", "batch_size", "lr", "weight_decay")
_CELL_NAMES = {"n": "N", "batch_size": "B", "lr": "η", "weight_decay": "λ"}
_FONT_KEYS = ("font.size", "axes.labelsize", "axes.titlesize", "xtick.labelsize", "ytick.labelsize",
              "legend.fontsize", "legend.title_fontsize", "figure.titlesize")


def theme() -> None:
    """Seaborn's theme for every figure of the package: white grid, the tab10 palette, the notebook context with
    slightly smaller fonts, none below :data:`MIN_FONT` pt, so that a notebook's figures look alike and read like
    the papers' line plots."""
    import matplotlib as mpl
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette="tab10", font_scale=0.85)
    for key in _FONT_KEYS:
        size = mpl.rcParams[key]
        if isinstance(size, (int, float)) and size < MIN_FONT:
            mpl.rcParams[key] = MIN_FONT
    hook = f"{__name__}:watch"
    if hook not in mpl.rcParams["figure.hooks"]:
        mpl.rcParams["figure.hooks"] = [*mpl.rcParams["figure.hooks"], hook]


#: the words a figure that lacks a title or an axis label prints under itself (:func:`watch`)
CHECK_MARK = "figure check:"


def _has_data(ax) -> bool:
    return bool(ax.lines or ax.collections or ax.images or ax.patches or ax.containers)


def problems(fig) -> list[str]:
    """What ``fig`` lacks for a reader, one line each: an axes with data and no title (a figure with one such axes
    may carry its title as the figure's suptitle), no x label where no axes of its column has one (shared axes
    label only the outer ones), no y label where no axes of its row has one; [] for a figure that has them all."""
    axes = [ax for ax in fig.axes if ax.get_visible() and _has_data(ax) and ax.name == "rectilinear"
            and ax.get_label() != "<colorbar>"]
    suptitle = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    found = []

    def where(ax):
        ss = ax.get_subplotspec()
        return (ss.rowspan.start, ss.colspan.start) if ss is not None else (0, 0)

    for k, ax in enumerate(axes):
        name = ax.get_title() or f"axes {k + 1}"
        if not ax.get_title() and not (len(axes) == 1 and suptitle):
            found.append(f"{name}: no title")
        row, col = where(ax)
        if not ax.get_xlabel() and not any(o.get_xlabel() for o in axes if where(o)[1] == col):
            found.append(f"{name}: no x-axis label")
        if not ax.get_ylabel() and not any(o.get_ylabel() for o in axes if where(o)[0] == row):
            found.append(f"{name}: no y-axis label")
    return found


def watch(fig) -> None:
    """A pyplot figure hook (``rcParams["figure.hooks"]``, set by :func:`theme`): when ``fig`` is drawn, print
    what it lacks (:func:`problems`) to stderr, once, after :data:`CHECK_MARK`."""
    import sys

    said = []

    def check(event):
        found = problems(fig)
        if found and found != said:
            said[:] = found
            print(f"{CHECK_MARK} " + "; ".join(found), file=sys.stderr)

    fig.canvas.mpl_connect("draw_event", check)


def legend_outside(ax, title: str | None = None) -> None:
    """Move ``ax``'s legend beside the axes (upper left, just right of them), so no curve is hidden, its entries
    in :data:`MIN_FONT` pt and its title a little larger; no legend: nothing to do. ``title`` replaces the legend's
    title (a column name is rarely what a reader should see)."""
    import seaborn as sns

    if ax.get_legend() is None:
        return
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1), fontsize=MIN_FONT, title_fontsize=MIN_FONT + 1,
                    frameon=False, **({"title": title} if title is not None else {}))


def _cell_value(key: str, v) -> str:
    if key in ("n", "batch_size"):
        return f"{int(v):,}"
    return f"{v:g}" if isinstance(v, float) else str(v)


def cell_labels(rows: pd.DataFrame, table: pd.DataFrame | None = None, keys=CELL_KEYS,
                yellow: bool = True) -> list[str]:
    """A legend label per row of ``rows`` (runs or cells of a Yun et al. grid: ``subtable``, ``n``,
    ``batch_size``, ``lr``, ``weight_decay``), naming only what tells the rows apart: "N = 500, η = 3.2",
    "(b) λ = 0.0004". Where nothing does (one cell, or its seeds), the label names the cell's size: N or B where
    that varies over ``table`` (the whole grid the rows come from: "B = 32" for Table 5, whose rows are batch
    sizes), else both ("N = 1,000, B = 64"). The sub-table letter appears only where sub-tables differ.
    ``yellow``: a row whose ``yellow`` column is true (the paper's highlighted tuning factor) reads "… (yellow)"."""
    present = [k for k in keys if k in rows]

    def varying(frame, among=present):
        return [k for k in among if k in frame and frame[k].nunique(dropna=True) > 1]

    sizes = [k for k in ("n", "batch_size") if k in present]
    named = (varying(rows) or (varying(table, sizes) if table is not None else []) or sizes or present[:1])
    out = []
    for _, r in rows.iterrows():
        parts = [f"({r[k]})" if k == "subtable" else f"{_CELL_NAMES.get(k, k)} = {_cell_value(k, r[k])}"
                 for k in named if not (k == "subtable" and not str(r[k]))]
        label = ", ".join(parts).replace("), ", ") ")
        if yellow and bool(r.get("yellow", False)):
            label += " (yellow)"
        out.append(label)
    return out


def sizes_text(rows: pd.DataFrame) -> str:
    """The training-set size N and batch size B of a grid's runs as a figure title names them: "N = 1,000, B =
    16–64" (a range where they vary), so that a title says what was run here, not the paper's protocol."""
    parts = []
    for key in ("n", "batch_size"):
        if key in rows and len(rows[key].dropna()):
            lo, hi = int(rows[key].min()), int(rows[key].max())
            parts.append(f"{_CELL_NAMES[key]} = {lo:,}" + (f"–{hi:,}" if hi != lo else ""))
    return ", ".join(parts)


def plot_angular(hist: pd.DataFrame, hue: str, ax=None, predicted: dict | None = None,
                 y: str = "angular_update", title: str = "", legend_title: str | None = None):
    """Δθ (radians) per epoch, one line per ``hue`` value; ``predicted``: {label: tuning factor} draws the
    level arccos(1 − TF) of Eq. 27 as dashed lines, up to the first LR decay (the factor holds for the initial LR;
    after a ÷10 decay Eq. 27's factor is 10× smaller). For Δθ the y-axis is cut at 1.15× the largest value after
    epoch 2 (the first epochs' rotation away from the initialization would flatten the rest; noted on the axis).
    ``legend_title``: the legend's title (None: the ``hue`` column's name; "": none, for labels that say what they
    are, :func:`cell_labels`). A ``hue`` value with several runs (seeds) is drawn as their mean with a 95 %
    bootstrap band, seeded so that the figure is the same on every render."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    if hist.empty or y not in hist:  # collect mode before any of these runs finished: say so, draw nothing
        ax.text(0.5, 0.5, "runs missing: none in the store yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        return ax
    sns.lineplot(data=hist, x="epoch", y=y, hue=hue, ax=ax, palette="tab10", seed=0)
    end = hist["epoch"].max()
    if "lr" in hist:  # the first epoch whose LR is below its run's initial LR: the prediction's range ends there
        decayed = hist.loc[hist["lr"] < 0.999 * hist.groupby(hue)["lr"].transform("first"), "epoch"]
        end = decayed.min() if len(decayed) else end
    for label, tf in (predicted or {}).items():
        if 0 < tf < 2:
            ax.hlines(math.acos(1 - tf), hist["epoch"].min(), end, linestyles="--", lw=1, color="gray")
            text = "arccos(1−TF)" if label == "TF" else f"arccos(1−TF), TF = {label}"
            ax.annotate(text, (end, math.acos(1 - tf)), fontsize=MIN_FONT, ha="right", va="bottom", color="gray")
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
    legend_outside(ax, title=legend_title)
    ax.set_xlabel("epoch")
    ax.set_title(title)
    return ax
