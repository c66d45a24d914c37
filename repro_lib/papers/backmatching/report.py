"""What ``backmatching_vgg.ipynb`` shows a reader: one claim per column of the supplement's Table 1 with a verdict in
the three words of ``results.findings``, our accuracies beside the paper's, the learning-curve figure and the
computed "What we found" sentences. No training here.

Kept apart from ``backmatching`` (which the registry imports, and so may not import ``repro_lib.results``).
"""
from __future__ import annotations

import math

import pandas as pd

from ...results import figures, findings
from .backmatching import TABLE1_METHODS

#: the methods as Table 1 names them
METHOD_NAMES = {"sgd": "SGD", "lars": "LARS", "lsalr": "LSALR", "scale_amended_sgd": "OURS"}
#: the networks as the paper names them
MODEL_NAMES = {"vgg11_bn": "VGG11-BN", "vgg13_bn": "VGG13-BN", "vgg16_bn": "VGG16-BN", "vgg19_bn": "VGG19-BN"}
OURS = "scale_amended_sgd"
CLAIM = "scale-amended SGD beats SGD, LARS and LSALR"


def dataset_name(d: str) -> str:
    return findings.DATASET_NAMES.get(d, d)


def _values(values: pd.Series) -> str:
    """"OURS 49.45, SGD 45.15, …" in Table 1's row order, OURS first (n/a where a method has no finished run)."""
    order = [OURS, *(m for m in TABLE1_METHODS if m != OURS)]
    return ", ".join(f"{METHOD_NAMES[m]} {findings.num(values.get(m, math.nan))}" for m in order)


def _best(values: pd.Series) -> str:
    v = values.dropna()
    return f"{METHOD_NAMES.get(v.idxmax(), v.idxmax())} best" if len(v) else "no value"


def column_claims(results: pd.DataFrame) -> list[dict]:
    """One ``publish.record_claims`` row per column (dataset, network) of Table 1: OURS's median test accuracy
    against each other method's. It *holds* when OURS is ahead of all three by more than the noise (√2 × the
    binomial sd of one evaluation on the test images, or the larger seed sd of the two methods if that is larger),
    is *no* when some method is ahead of OURS by more than that, else *undecided*; fewer than
    ``findings.MIN_SEEDS`` seeds on real images leave it *undecided* either way. ``ours`` / ``paper_value``: the four
    accuracies (ours computed from the runs, the paper's from the transcribed Table 1)."""
    rows = []
    for (d, model), g in results.groupby(["paper_dataset", "model"], sort=False):
        ok = g[g["status"] == "finished"]
        med = ok.groupby("method")["test_acc"].median()
        sd = ok.groupby("method")["test_acc"].std()
        seeds = int(ok.groupby("method").size().reindex(list(TABLE1_METHODS), fill_value=0).min())
        paper = g.drop_duplicates("method").set_index("method")["paper_accuracy"]
        cfg = g["cfg"].iloc[0]
        real = not (getattr(cfg, "synthetic", False) or cfg.dataset in findings.SYNTHETIC_DATASETS)
        ours = med.get(OURS, math.nan)
        others = med.drop(OURS, errors="ignore").dropna()
        if not math.isfinite(ours) or others.empty:
            word, reason = findings.judge(None, False)
            detail, noise = "", math.nan
        else:
            noise = math.sqrt(2) * findings.binomial_sd(float(med.mean()), cfg.n_test or 10_000)
            noise = max(noise, float(sd.fillna(0).max()))
            margins = (ours - others).reindex([m for m in TABLE1_METHODS if m in others.index])
            holds = bool((margins > 0).all())
            beyond = bool((margins > noise).all()) if holds else bool((margins < -noise).any())
            word, reason = findings.judge(holds, beyond, seeds, real)
            detail = ("OURS − " + ", ".join(f"{METHOD_NAMES[m]} {v:+.2f}" for m, v in margins.items())
                      + f" (noise {noise:.2f})")
        rows.append(dict(paper="Zhang et al. (back-matching supplement)",
                         item=f"Table 1, {dataset_name(d)}, {MODEL_NAMES.get(model, model)}", claim=CLAIM,
                         data=findings.dataset_label(list(g["cfg"])), seeds=seeds,
                         verdict=findings.verdict_words(word, reason, detail),
                         ours=f"{_values(med)} ({_best(med)})", paper_value=f"{_values(paper)} ({_best(paper)})",
                         train_minutes=findings.train_minutes(g), word=word, noise=noise))
    return rows


def table1_frame(values: pd.DataFrame) -> pd.DataFrame:
    """A Table 1 grid (rows: methods, columns: (paper_dataset, model)) with the paper's names on both axes."""
    out = values.rename(index=METHOD_NAMES)
    out.columns = pd.MultiIndex.from_tuples([(dataset_name(d), MODEL_NAMES.get(m, m)) for d, m in out.columns],
                                            names=["dataset", "network"])
    out.index.name = "method"
    return out


def margin_table(ours: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Per column: OURS − SGD and the best method, ours beside the paper's (both grids from :func:`table1_frame`)."""
    best = lambda t: t.apply(lambda c: c.idxmax() if c.notna().any() else "missing")  # noqa: E731
    return pd.DataFrame({"ours: OURS − SGD": ours.loc["OURS"] - ours.loc["SGD"],
                         "paper: OURS − SGD": paper.loc["OURS"] - paper.loc["SGD"],
                         "ours: best method": best(ours), "paper: best method": best(paper)})


def plot_curves(hist: pd.DataFrame, model: str, data_label: str):
    """Like the supplement's Figure 1: train loss (log), test accuracy (%) and the angular update per epoch of every
    run of ``model``, one colour per method (one line per seed; one line style per dataset where there are
    several); one legend beside the figure."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    order = [METHOD_NAMES[m] for m in TABLE1_METHODS]
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    style = "dataset" if hist.get("paper_dataset", pd.Series(dtype=str)).nunique() > 1 else None
    h = hist.assign(dataset=hist["paper_dataset"].map(dataset_name)) if "paper_dataset" in hist else hist
    panels = [("train_loss", "train loss (log scale)", "train loss"),
              ("test_acc", "test accuracy (%)", "test accuracy"),
              ("angular_update", "Δθ per epoch (rad)", "angular update")]
    name = MODEL_NAMES.get(model, model)
    for ax, (y, label, what) in zip(axes, panels):
        if y in h and h[y].notna().any():
            sns.lineplot(data=h.dropna(subset=[y]), x="epoch", y=y, hue="method", hue_order=order, style=style,
                         units="seed", estimator=None, ax=ax, marker="o", ms=4, legend=ax is axes[-1])
        else:
            ax.text(0.5, 0.5, "no finished run yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_ylabel(label)
        ax.set_xlabel("epoch")
        ax.set_title(f"Suppl. Fig. 1 · {name}: {what}", fontsize=9)
    if "train_loss" in h and h["train_loss"].notna().any():
        _log_axis(axes[0])
    figures.legend_outside(axes[-1], title=None)
    fig.suptitle(data_label, fontsize=9)
    fig.tight_layout()
    return fig


def _log_axis(ax) -> None:
    """A log-scaled y axis labelled in plain numbers ("1.6"), minor ticks where it spans less than a decade."""
    from matplotlib import ticker

    class Plain(ticker.LogFormatter):
        def __call__(self, x, pos=None):
            return f"{x:g}" if super().__call__(x, pos) else ""

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(Plain(labelOnlyBase=False))


def found(results: pd.DataFrame, claims: list[dict], paper_cfg, data_label: str) -> str:
    """Two to five sentences on what this notebook's Table 1 runs show and why they may differ from the paper: the
    size of the runs against the paper profile's, where OURS ranks and its margins against the paper's, and the
    verdict words with their reason."""
    ok = results[results["status"] == "finished"]
    if ok.empty:
        return "No run of Table 1 has finished yet."
    cfg = results["cfg"].iloc[0]
    med = ok.groupby(["paper_dataset", "model", "method"])["test_acc"].median().unstack("method")
    paper = results.drop_duplicates(["paper_dataset", "model", "method"]).pivot(
        index=["paper_dataset", "model"], columns="method", values="paper_accuracy").loc[med.index]
    seeds = int(ok.groupby(["paper_dataset", "model", "method"]).size().min())
    ranks = med.rank(axis=1, ascending=False)[OURS] if OURS in med else pd.Series(dtype=float)
    leaders = med.idxmax(axis=1).map(METHOD_NAMES).value_counts()
    models = [MODEL_NAMES.get(m, m) for m in dict.fromkeys(results["model"])]
    nets = " and ".join(models) if len(models) < 3 else ", ".join(models)
    out = [f"These runs train {nets} at width {cfg.width} (paper profile: {paper_cfg.width}) on {cfg.n:,} "
           f"training images ({data_label}) for {cfg.num_epochs} epochs (paper profile: {paper_cfg.num_epochs}), "
           f"{seeds} seed{'s' if seeds != 1 else ''} per cell; their accuracies range over {med.min().min():.1f}–"
           f"{med.max().max():.1f} % against the paper's {paper.min().min():.1f}–{paper.max().max():.1f} %."]
    if len(ranks):
        ms = {m: (med[OURS] - med[m]).mean() for m in TABLE1_METHODS if m != OURS and m in med}
        ps = {m: (paper[OURS] - paper[m]).mean() for m in ms}
        out.append(f"OURS ranks first on {int((ranks == 1).sum())} of {len(ranks)} columns "
                   f"({', '.join(f'{k} best on {v}' for k, v in leaders.items())}); its mean margin is "
                   + ", ".join(f"{ms[m]:+.2f} over {METHOD_NAMES[m]} (paper {ps[m]:+.2f})" for m in ms) + ".")
    words = [c["word"] for c in claims]
    counts = findings.word_counts(words, none="")
    reasons = sorted({c["verdict"].split(":")[0].split(" (", 1)[1].rstrip(")") for c in claims
                      if c["word"] == "undecided" and " (" in c["verdict"].split(":")[0]})
    noise = [c["noise"] for c in claims if math.isfinite(c.get("noise", math.nan))]
    out.append(f"Verdicts: {counts}" + (f" ({'; '.join(reasons)})" if reasons else "")
               + (f"; one evaluation's noise on a margin is about {min(noise):.2f}–{max(noise):.2f} points" if noise
                  else "") + ".")
    if cfg.num_epochs < paper_cfg.num_epochs:
        out.append(f"After {cfg.num_epochs} of {paper_cfg.num_epochs} epochs the nets are far from converged, so the "
                   f"ranking may reflect early training speed more than the final accuracy Table 1 reports; our "
                   f"LARS also adds You et al.'s trust coefficient to the supplement's formula (see above).")
    return " ".join(out)
