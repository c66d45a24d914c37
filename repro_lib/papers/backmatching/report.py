"""What ``backmatching_vgg.ipynb`` shows a reader: one claim per column of the supplement's Table 1 with a verdict in
the three words of ``results.findings``, our accuracies beside the paper's, the learning-curve figure and the
computed "What we found" sentences. No training here.

Kept apart from ``backmatching`` (which the registry imports, and so may not import ``repro_lib.results``).
"""
from __future__ import annotations

import math

import pandas as pd

from ...results import figures, findings, rules
from .backmatching import TABLE1_METHODS

#: the methods by name (Table 1 calls scale-amended SGD "OURS", the authors' own column; ours are our runs)
METHOD_NAMES = {"sgd": "SGD", "lars": "LARS", "lsalr": "LSALR", "scale_amended_sgd": "scale-amended SGD"}
#: the short form in dense lines
SHORT = {"sgd": "SGD", "lars": "LARS", "lsalr": "LSALR", "scale_amended_sgd": "SA-SGD"}
#: the networks as the paper names them
MODEL_NAMES = {"vgg11_bn": "VGG11-BN", "vgg13_bn": "VGG13-BN", "vgg16_bn": "VGG16-BN", "vgg19_bn": "VGG19-BN"}
OURS = "scale_amended_sgd"
#: a run has been trained to the end its claim speaks of when its final train accuracy reaches this (%): the paper's
#: Table 1 compares final accuracies of networks that fit CIFAR-10's training set
FIT_TRAIN_ACC = 90.0


def dataset_name(d: str) -> str:
    return findings.DATASET_NAMES.get(d, d)


def _values(values: pd.Series) -> str:
    """"SA-SGD 49.45, SGD 45.15, …" in Table 1's row order, scale-amended SGD first (n/a where a method has no
    finished run; methods not in ``values`` left out)."""
    order = [OURS, *(m for m in TABLE1_METHODS if m != OURS)]
    return ", ".join(f"{SHORT[m]} {findings.num(values.get(m, math.nan))}" for m in order if m in values.index)


def _best(values: pd.Series) -> str:
    v = values.dropna()
    return f"{SHORT.get(v.idxmax(), v.idxmax())} best" if len(v) else "no value"


def claimed_rivals(paper: pd.Series) -> list[str]:
    """The methods scale-amended SGD beats in one column of the paper's Table 1 (``paper``: its accuracies by
    method), in Table 1's order: the claim the paper's own numbers support there (on VGG11-BN, CIFAR-10, LSALR is
    ahead of it, so the claim is "beats SGD and LARS")."""
    ours = paper.get(OURS, math.nan)
    return [m for m in TABLE1_METHODS if m != OURS and m in paper.index and paper[m] < ours]


def claim_text(rivals, paper: pd.Series) -> str:
    """"scale-amended SGD beats SGD, LARS and LSALR", or with the paper's exception named."""
    beaten = [SHORT[m] for m in rivals]
    text = "scale-amended SGD beats " + (", ".join(beaten[:-1]) + " and " + beaten[-1] if len(beaten) > 1
                                         else beaten[0] if beaten else "no other method")
    ahead = [SHORT[m] for m in TABLE1_METHODS if m != OURS and m in paper.index and m not in rivals]
    return text + (f" (the paper's {', '.join(ahead)} {'is' if len(ahead) == 1 else 'are'} ahead here)" if ahead else "")


def regime_of(g: pd.DataFrame, methods) -> dict:
    """Whether the runs of ``methods`` in one column ``g`` (a ``run_sweep`` result with histories) were trained to
    the end the claim speaks of: ``settled`` (the Yun et al. grids' regime check, ``findings.regime``, on their Δθ
    before the first LR decay), ``train_acc`` (their final train accuracy, mean over seeds, the lowest of the
    methods) and ``converged`` (settled and ``train_acc`` ≥ :data:`FIT_TRAIN_ACC`)."""
    ok = g[(g["status"] == "finished") & g["method"].isin(list(methods))]
    reg = findings.regime(ok["history"]) if "history" in ok else findings.regime([])
    accs = []
    for _, h in ok.groupby("method"):
        last = [hist[-1].get("train_acc") for hist in h.get("history", []) if hist]
        last = [v for v in last if v is not None and math.isfinite(v)]
        if last:
            accs.append(sum(last) / len(last))
    acc = min(accs) if accs else math.nan
    return dict(settled=reg["settled"], drift=reg["drift"], train_acc=acc,
                converged=bool(reg["settled"] is not False and math.isfinite(acc) and acc >= FIT_TRAIN_ACC))


#: what would bring the runs to the regime Table 1 speaks of, where the gate is closed
GATE_FIX = (f"runs trained until every method fits the training set (final train accuracy ≥ {FIT_TRAIN_ACC:g} %): "
            f"more epochs or more images per epoch, as the gpu and paper profiles")


def column_claims(results: pd.DataFrame, item: str = "Table 1") -> list[dict]:
    """One ``publish.record_claims`` row per column (dataset, network) of ``results``: scale-amended SGD against
    each method the paper's own column has it beating (:func:`claimed_rivals`), per seed (a seed is the same
    initialisation and data order for every method) with the 95 % t interval of each difference
    (``findings.difference``), by the rule ``results.rules.RULES["backmatching >"]``. An intersection: it *holds*
    when every interval lies above 0, is *no* when one lies below 0; its gate, the runs trained to the end the claim
    speaks of (:func:`regime_of`), applies to both outcomes (else *not judged*, "before training converged").
    ``contrasts``: every interval; ``ci``, ``estimate``: the deciding contrast's own (``deciding`` names it: the
    one with the lowest upper bound where one lies below 0, else the one with the lowest lower bound), so that the
    rule read on ``ci`` gives the intersection's verdict; ``paper_effect`` the
    paper's smallest margin over the rivals; ``to_decide`` (an *undecided* claim): the regime, and the seeds that
    would decide it at the observed spread, or resolve the paper's own margin (``findings.decide_text``).
    Fewer than ``findings.MIN_SEEDS`` seeds on real images leave it *undecided*."""
    rule = rules.rule("backmatching >")
    rows = []
    for (d, model), g in results.groupby(["paper_dataset", "model"], sort=False):
        ok = g[g["status"] == "finished"]
        per_seed = ok.pivot_table(index="seed", columns="method", values="test_acc", aggfunc="mean")
        mean = per_seed.mean()
        paper = g.drop_duplicates("method").set_index("method")["paper_accuracy"]
        table_paper = paper  # the paper's whole column decides the claim even where only two methods ran
        rivals = [m for m in claimed_rivals(table_paper) if m in set(g["method"])]
        cfg = g["cfg"].iloc[0]
        real = not (getattr(cfg, "synthetic", False) or cfg.dataset in findings.SYNTHETIC_DATASETS)
        seeds = int(ok.groupby("method").size().reindex([OURS, *rivals], fill_value=0).min()) if rivals else 0
        reg = regime_of(g, [OURS, *rivals])
        diffs = {m: findings.difference(per_seed.get(OURS, pd.Series(dtype=float)),
                                        per_seed.get(m, pd.Series(dtype=float))) for m in rivals}
        judged = {}
        if not rivals or OURS not in per_seed or any(not math.isfinite(dm.diff) for dm in diffs.values()):
            word, reason = findings.judge(None, False)
            detail = ""
        else:
            judged = {m: findings.judge_difference(dm, ">", settled=reg["converged"], real_data=real,
                                                   unsettled="before training converged", rule=rule)
                      for m, dm in diffs.items()}
            words = [w for w, _ in judged.values()]
            if all(w == "holds" for w in words):
                word, reason = "holds", ""
            elif "no" in words:
                word, reason = "no", ""
            elif any(w == findings.NOT_JUDGED for w in words):  # the gate: name which way the intervals point
                against = [m for m, dm in diffs.items() if dm.hi < 0]
                claimed = [m for m, dm in diffs.items() if dm.lo > 0]
                word, reason = findings.NOT_JUDGED, "before training converged; " + (
                    f"the interval against {', '.join(SHORT[m] for m in against)} points against the claim"
                    if against else "every interval points the claimed way" if len(claimed) == len(diffs) else
                    "the interval against " + ", ".join(SHORT[m] for m in diffs if m not in claimed)
                    + " is within the noise")
            else:
                word, reason = "undecided", next(r for w, r in judged.values() if w == "undecided")
            detail = ("SA-SGD − " + ", ".join(f"{SHORT[m]} {dm.text()}" for m, dm in diffs.items())
                      + f" (paired by seed, {seeds} seeds, 95 %; final train acc. ≥ {reg['train_acc']:.0f} %, "
                        f"gate ≥ {FIT_TRAIN_ACC:g} %)")
        fin = [dm for dm in diffs.values() if math.isfinite(dm.lo)]
        if fin and len(fin) == len(diffs):
            # the deciding contrast, with its own interval: one shown below 0 decides *no* (the lowest upper bound),
            # else the lowest lower bound decides whether every contrast lies above 0
            below = [m for m in diffs if diffs[m].hi < 0]
            weakest = (min(below, key=lambda m: diffs[m].hi) if below else min(diffs, key=lambda m: diffs[m].lo))
            d_main = diffs[weakest]
        else:
            weakest, d_main = None, findings.NO_DIFFERENCE
        effect = (float(min(table_paper[OURS] - table_paper[m] for m in rivals)) if rivals and OURS in table_paper
                  else None)
        to_decide = ""
        if word in ("undecided", findings.NOT_JUDGED) and weakest is not None:
            per = findings.train_minutes(g) / max(seeds, 1)
            seeds_text = findings.decide_text(diffs[weakest], ">", minutes_per_seed=per, paper_effect=effect)
            to_decide = (findings.decide_text(d_main, ">", gated=True, gate_fix=GATE_FIX) + "; and " + seeds_text
                         if not reg["converged"] else seeds_text)
        cols = [OURS, *rivals]
        rows.append(dict(paper="Zhang et al. (back-matching supplement)",
                         item=f"{item}, {dataset_name(d)}, {MODEL_NAMES.get(model, model)}",
                         claim=claim_text(rivals, table_paper),
                         data=findings.dataset_label(list(g["cfg"])), seeds=seeds,
                         verdict=findings.verdict_words(word, reason, detail),
                         ours=(f"means of {seeds} seed{'s' if seeds != 1 else ''}: {_values(mean.reindex(cols))} "
                               f"({_best(mean)})"),
                         paper_value=f"medians of 3 runs: {_values(table_paper)} ({_best(table_paper)})",
                         train_minutes=findings.train_minutes(g), word=word, rival=weakest,
                         previous_word=_previous_word(diffs, reg["converged"], real) if judged else word,
                         converged=reg["converged"], train_acc=reg["train_acc"],
                         regime=(f"final train accuracy ≥ {reg['train_acc']:.0f} % for every method "
                                 f"({'converged' if reg['converged'] else 'not converged'}: the gate asks "
                                 f"≥ {FIT_TRAIN_ACC:g} %)"),
                         deciding=f"SA-SGD − {SHORT[weakest]}" if weakest is not None else "",
                         contrasts={SHORT[m]: [_fin(dm.lo), _fin(dm.hi)] for m, dm in diffs.items()},
                         **findings.interval_fields(d_main, paper_effect=effect, rule=rule,
                                                    gate_ok=bool(reg["converged"]), to_decide=to_decide)))
    return rows


def _fin(v):
    return float(v) if v is not None and math.isfinite(v) else None


def _previous_word(diffs: dict, converged: bool, real: bool) -> str:
    """The verdict under the rule the claim had before: the same intervals, the convergence gate guarding only a
    result against the claim."""
    words = []
    for dm in diffs.values():
        if real and dm.n < findings.MIN_SEEDS or not dm.has_interval:
            words.append("undecided")
        else:
            words.append("holds" if dm.lo > 0 else "no" if dm.hi < 0 and converged else "undecided")
    return "holds" if all(w == "holds" for w in words) else "no" if "no" in words else "undecided"


def table1_frame(values: pd.DataFrame) -> pd.DataFrame:
    """A Table 1 grid (rows: methods, columns: (paper_dataset, model)) with the paper's names on both axes."""
    out = values.rename(index=METHOD_NAMES)
    out.columns = pd.MultiIndex.from_tuples([(dataset_name(d), MODEL_NAMES.get(m, m)) for d, m in out.columns],
                                            names=["dataset", "network"])
    out.index.name = "method"
    return out


#: the column of :func:`margin_table` holding scale-amended SGD − SGD
MARGIN = "SA-SGD − SGD"


def margin_table(ours: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Per column: scale-amended SGD − SGD and the best method, ours beside the paper's (both grids from
    :func:`table1_frame`)."""
    best = lambda t: t.apply(lambda c: c.idxmax() if c.notna().any() else "missing")  # noqa: E731
    sa = METHOD_NAMES[OURS]
    return pd.DataFrame({f"ours: {MARGIN}": ours.loc[sa] - ours.loc["SGD"],
                         f"paper: {MARGIN}": paper.loc[sa] - paper.loc["SGD"],
                         "ours: best method": best(ours), "paper: best method": best(paper)})


def plot_curves(hist: pd.DataFrame, model: str, data_label: str, what: str = ""):
    """Train loss (log), test accuracy (%) and the angular update per epoch of every run of ``model``, one colour per
    method (one line per seed; one line style per dataset where there are several); one legend beside the figure,
    naming only the methods drawn. ``what``: the runs in words for the titles (e.g. "104 epochs")."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    drawn = set(hist["method"]) if "method" in hist else set()
    order = [METHOD_NAMES[m] for m in TABLE1_METHODS if METHOD_NAMES[m] in drawn]  # the legend: what is drawn
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    style = "dataset" if hist.get("paper_dataset", pd.Series(dtype=str)).nunique() > 1 else None
    h = hist.assign(dataset=hist["paper_dataset"].map(dataset_name)) if "paper_dataset" in hist else hist
    panels = [("train_loss", "train loss (log scale)", "train loss"),
              ("test_acc", "test accuracy (%)", "test accuracy"),
              ("angular_update", "Δθ per epoch (rad)", "angular update")]
    name = MODEL_NAMES.get(model, model)
    for ax, (y, label, panel) in zip(axes, panels):
        if y in h and h[y].notna().any():
            sns.lineplot(data=h.dropna(subset=[y]), x="epoch", y=y, hue="method", hue_order=order, style=style,
                         units="seed", estimator=None, ax=ax, marker="o", ms=4, legend=ax is axes[-1])
        else:
            ax.text(0.5, 0.5, "no finished run yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_ylabel(label)
        ax.set_xlabel("epoch")
        ax.set_title(f"{name}{f' ({what})' if what else ''}: {panel}", fontsize=9)
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
    """What this notebook's Table 1 runs show and why they may differ from the paper, in a few sentences computed
    from them: the size of the runs against the paper profile's, where scale-amended SGD ranks and its mean margins
    against the paper's, the verdicts with the intervals' resolution beside the paper's margins, and whether the
    runs were trained to the end the claim speaks of."""
    ok = results[results["status"] == "finished"]
    if ok.empty:
        return "No run of Table 1 has finished yet."
    cfg = results["cfg"].iloc[0]
    med = ok.groupby(["paper_dataset", "model", "method"])["test_acc"].mean().unstack("method")
    paper = results.drop_duplicates(["paper_dataset", "model", "method"]).pivot(
        index=["paper_dataset", "model"], columns="method", values="paper_accuracy").loc[med.index]
    seeds = int(ok.groupby(["paper_dataset", "model", "method"]).size().min())
    ranks = med.rank(axis=1, ascending=False)[OURS] if OURS in med else pd.Series(dtype=float)
    leaders = med.idxmax(axis=1).map(SHORT).value_counts()
    models = [MODEL_NAMES.get(m, m) for m in dict.fromkeys(results["model"])]
    nets = " and ".join(models) if len(models) < 3 else ", ".join(models)
    out = [f"These runs train {nets} at width {cfg.width} (paper profile: {paper_cfg.width}) on {cfg.n:,} "
           f"training images ({data_label}) for {cfg.num_epochs} epochs (paper profile: {paper_cfg.num_epochs}), "
           f"{seeds} seed{'s' if seeds != 1 else ''} per cell; their mean accuracies range over "
           f"{med.min().min():.1f}–{med.max().max():.1f} % against the paper's {paper.min().min():.1f}–"
           f"{paper.max().max():.1f} %."]
    if len(ranks):
        ms = {m: (med[OURS] - med[m]).mean() for m in TABLE1_METHODS if m != OURS and m in med}
        ps = {m: (paper[OURS] - paper[m]).mean() for m in ms}
        out.append(f"Scale-amended SGD ranks first on {int((ranks == 1).sum())} of {len(ranks)} columns "
                   f"({', '.join(f'{k} best on {v}' for k, v in leaders.items())}); its mean margin is "
                   + ", ".join(f"{ms[m]:+.2f} over {METHOD_NAMES[m]} (paper {ps[m]:+.2f})" for m in ms) + ".")
    counts = findings.word_counts([c["word"] for c in claims], none="")
    res = [c["resolution"] for c in claims if c.get("resolution") is not None]
    effects = [c["paper_effect"] for c in claims if c.get("paper_effect") is not None]
    s = f"Verdicts: {counts}"
    if res and effects:
        s += (f"; the seed-paired intervals resolve ±{min(res):.2f} to ±{max(res):.2f} points, where the paper's "
              f"smallest margins over the rivals are {', '.join(f'{e:+.2f}' for e in effects)}"
              + (" — below what these runs can tell apart" if max(abs(e) for e in effects) < min(res) else ""))
    out.append(s + ".")
    unconv = [c for c in claims if not c.get("converged", True)]
    if unconv:
        accs = [c["train_acc"] for c in unconv if math.isfinite(c.get("train_acc", math.nan))]
        out.append(f"{len(unconv)} of {len(claims)} columns were not trained to the end Table 1 speaks of"
                   + (f" (final train accuracy {min(accs):.0f}–{max(accs):.0f} %, below {FIT_TRAIN_ACC:g} %)"
                      if accs else "")
                   + ": a method that learns faster early leads there, whatever it reaches at the end, so the "
                     "claim stays *undecided* whichever way the intervals point; our LARS also adds You et al.'s trust "
                     "coefficient to the supplement's formula (see above).")
    return " ".join(out)


def long_view(results: pd.DataFrame):
    """The longer comparison for people: per method its final test and train accuracy (mean ± seed sd), and per
    rival the seed-paired difference with its 95 % interval, as a Styler."""
    ok = results[results["status"] == "finished"]
    per_seed = ok.pivot_table(index="seed", columns="method", values="test_acc", aggfunc="mean")
    train = {m: [h[-1].get("train_acc") for h in g["history"] if h] for m, g in ok.groupby("method")}
    rows = []
    for m in [x for x in TABLE1_METHODS if x in per_seed]:
        v = per_seed[m].dropna()
        tr = [x for x in train.get(m, []) if x is not None]
        d = (findings.difference(per_seed[OURS], per_seed[m]) if m != OURS and OURS in per_seed
             else None)
        rows.append({"method": METHOD_NAMES[m], "seeds": len(v),
                     "test acc. (%)": f"{v.mean():.2f}" + (f" ± {v.std():.2f}" if len(v) > 1 else ""),
                     "train acc. (%)": f"{sum(tr) / len(tr):.1f}" if tr else "—",
                     "SA-SGD − this [95 % interval]": d.text() if d is not None else ""})
    return pd.DataFrame(rows).style.hide(axis="index")


def claims_view(claims: list[dict]):
    """The claims for people: item, the claim, the verdict word, the rival with the lowest lower bound, the smallest
    bounds over the rivals (the interval the rule reads), its resolution beside the paper's own margin, and whether
    the runs were trained to the end, as a Styler."""
    def fmt(v, spec):
        return format(v, spec) if v is not None and math.isfinite(v) else "—"

    rows = [{"item": c["item"], "claim": c["claim"], "verdict": c["word"],
             "weakest vs": SHORT.get(c.get("rival"), "—"),
             "SA-SGD − rivals, smallest bounds [95 %]": (f"[{fmt(c['ci'][0], '+.2f')}, {fmt(c['ci'][1], '+.2f')}]"
                                                        if c.get("ci") and c["ci"][0] is not None else "—"),
             "resolution": "±" + fmt(c.get("resolution"), ".2f"),
             "paper's margin": fmt(c.get("paper_effect"), "+.2f"),
             "trained to the end": "yes" if c.get("converged") else "no"} for c in claims]
    return pd.DataFrame(rows).style.hide(axis="index")


def conditions(results: pd.DataFrame, long_results: pd.DataFrame, claims: list[dict], paper_cfgs) -> str:
    """The first screen's caveat (``results.screen.conditions``): N, width, epochs and test images of every run
    (the table's and the longer comparison's) beside the paper profile's, our mean accuracies beside Table 1's, and
    the paper's margins beside the resolution of our intervals (the regime in which a verdict can be reached)."""
    from ...results import screen

    runs = (pd.concat([results.assign(part="table"), long_results.assign(part="long")], ignore_index=True)
            if len(long_results) else results.assign(part="table"))
    ok = runs[runs["status"] == "finished"]
    ours = ok.groupby(["part", "paper_dataset", "model", "method"])["test_acc"].mean()
    res = [c["resolution"] for c in claims if c.get("resolution") is not None and math.isfinite(c["resolution"])]
    eff = [abs(c["paper_effect"]) for c in claims if c.get("paper_effect") is not None
           and math.isfinite(c["paper_effect"])]
    regime = (f"the paper's margins ({min(eff):.2f}–{max(eff):.2f} points) against intervals of half-width "
              f"{min(res):.1f} to {max(res):.1f} points here" if res and eff else "")
    return screen.conditions(runs, paper=list(paper_cfgs), accuracy=list(ours),
                             paper_accuracy=list(results["paper_accuracy"].dropna()), regime=regime, what="mean")
