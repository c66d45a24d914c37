"""Figures from run histories, the way the papers draw them. No training here.

* ``theme``: seaborn's theme for every figure of the package (each notebook calls it once, in its imports cell).
* ``legend_outside``: an axes' legend beside it, never over the curves.
* ``plot_angular``: Δθ per epoch curves with the predicted level arccos(1 − tuning factor) (Yun et al. Eq. 27),
  and the same axes for the effective learning rates and the weight norm; the legend beside the axes, never over
  the curves.
"""
from __future__ import annotations

import math

import pandas as pd


def theme() -> None:
    """Seaborn's theme for every figure of the package: white grid, the tab10 palette, the notebook context with
    slightly smaller fonts, so that a notebook's figures look alike and read like the papers' line plots."""
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette="tab10", font_scale=0.85)


def legend_outside(ax, title: str | None = None) -> None:
    """Move ``ax``'s legend beside the axes (upper left, just right of them), so no curve is hidden; no legend:
    nothing to do. ``title`` replaces the legend's title (a column name is rarely what a reader should see)."""
    import seaborn as sns

    if ax.get_legend() is None:
        return
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1), fontsize=7, title_fontsize=8, frameon=False,
                    **({"title": title} if title is not None else {}))


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
            text = "arccos(1−TF)" if label == "TF" else f"arccos(1−TF), TF = {label}"
            ax.annotate(text, (end, math.acos(1 - tf)), fontsize=7, ha="right", va="bottom", color="gray")
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
    legend_outside(ax)
    ax.set_xlabel("epoch")
    ax.set_title(title)
    return ax
