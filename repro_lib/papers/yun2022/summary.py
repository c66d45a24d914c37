"""The paper's main question asked once across every grid column: how far is the yellow cell (tuning factor 10/128)
from the best other cell, and where does the accuracy optimum lie relative to it? (``yun2022_summary.ipynb``.)

No column alone can answer it: 5 cells × 3 seeds resolve a few points, the paper's own margins are tenths of a point.
Pooled over columns, a random-effects meta-analysis (DerSimonian–Laird, ``statsmodels.stats.meta_analysis``) gives
one estimate and interval for each of two per-column quantities, computed by ``results.findings.findings``:

* ``gap``: yellow − best other cell (points), its standard error from the column's pooled within-column error
  (``findings.pooled_contrasts``). The best other cell is chosen by the same runs that measure the gap, so each
  column's gap is biased against the yellow cell (the largest of several noisy means is too high: the winner's
  curse); the pooled gap inherits that bias and is conservative for the claim.
* ``log2 optimum / yellow``: where the fitted quadratic's maximum lies (``findings.fitted_optimum``; 0 means at the
  yellow tuning factor, ±1 one grid step of ×2), its standard error from the delta method on the fit's residual
  error. Columns without an interior optimum are left out (and counted).

A column that shares runs with a column already counted (a shrunk profile can map two paper columns on one grid;
Sec. 3.2's B = 16 combination re-uses Table 3's runs) is counted once. The gate of the per-column rules applies here
too: the pooled claims are judged over the columns whose yellow cells' Δθ settled before the first LR decay; the
estimate over every column is shown beside it. Nothing here trains: the runs are read from the store (``collect``).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...results import findings as fnd
from ...results import rules
from ...runs import sweep
from ...store import Store
from .. import transcribed
from .grids import plans

#: the grid tables pooled: every Yun et al. table with a yellow cell per column, and Sec. 3.2's combinations
TABLES = ("yun2022_table1", "yun2022_table2", "yun2022_table3", "yun2022_table4", "yun2022_table5", "yun2022_table6",
          "yun2022_table7", "yun2022_table8", "yun2022_table9", "yun2022_table10", "yun2022_table11",
          "yun2022_section3")
#: the column field of each table (N or B; Sec. 3.2's combinations)
COLUMN = {"yun2022_table3": "batch_size", "yun2022_table4": "batch_size", "yun2022_table10": "batch_size",
          "yun2022_table11": "batch_size", "yun2022_section3": "combination"}


def table_label(name: str) -> str:
    return "Sec. 3.2" if name == "yun2022_section3" else name.replace("yun2022_table", "Table ")


def collect(profile: str, results_dir, seed: int = 0, dataset: str = "", names=TABLES) -> dict[str, pd.DataFrame]:
    """The runs of every table of ``names`` at ``profile`` as its notebook plans them (``grids.plans``), read from the
    store under ``results_dir`` without training (absent runs have status "missing")."""
    store = Store(results_dir)
    out = {}
    for name in names:
        plan = plans([name], profile, seed=seed, dataset=dataset)[name]
        out[name] = sweep.run_sweep(plan, store, collect=True, progress=False,
                                    max_members=plan.attrs.get("max_members", 1))
    return out


def columns(results: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per grid column with runs: table, column, ``gap`` (yellow − best other cell) with ``gap_se`` and its
    ``gap_lo``/``gap_hi`` (the column's own 95 % pooled interval), ``x`` (log₂ optimum / yellow) with ``x_se``,
    ``x_lo``/``x_hi`` (90 %), ``settled`` (the regime check), ``seeds``, ``cells``, ``verdict`` and
    ``optimum_verdict`` (each column's own). Columns whose runs repeat a column already listed are left out."""
    from scipy import stats

    rows, seen, repeats = [], [], []
    for name, res in results.items():
        col = COLUMN.get(name, "n")
        claim = "best" if name == "yun2022_section3" else "best or second"
        ytf = transcribed.yellow_factor(name) if name != "yun2022_section3" else 10 / 128
        found = fnd.findings(res, col=col, yellow_tf=ytf, claim=claim, group="" if col == "combination" else
                             "subtable")
        for _, r in found.iterrows():
            sel = res[col] == r[col]
            if "subtable" in r and "subtable" in res and isinstance(r.get("subtable"), str):
                sel &= res["subtable"].astype(str) == str(r["subtable"])
            hashes = frozenset(res.loc[sel & (res.status == "finished"), "hash"]) if "hash" in res else frozenset()
            sub = f" ({r['subtable']})" if isinstance(r.get("subtable"), str) and r.get("subtable") else ""
            label = {"n": "N", "batch_size": "B", "combination": "combination"}[col]
            where = f"{table_label(name)}{sub}, {label} = {r[col]:,g}"
            if r["rank"] == "n/a" or not hashes:
                repeats.append((where, "no finished run"))
                continue
            same = next((c for c, h in seen if hashes & h), None)
            if same is not None:  # runs already counted in another column: one measurement counts once
                repeats.append((where, f"the same runs as {same}"))
                continue
            seen.append((where, hashes))
            df = r.get("df", math.nan)
            q = stats.t.ppf(0.975, df) if math.isfinite(df) and df > 0 else math.nan
            gap_se = (r["ci_hi"] - r["ci_lo"]) / (2 * q) if math.isfinite(q) else math.nan
            x = math.log2(r["peak_vs_yellow"]) if math.isfinite(r["peak_vs_yellow"]) else math.nan
            rows.append({"table": table_label(name), "column": where,
                         "gap": r["margin"], "gap_se": gap_se, "gap_lo": r["ci_lo"], "gap_hi": r["ci_hi"],
                         "x": x, "x_se": r.get("peak_se_log2", math.nan),
                         "x_lo": math.log2(r["peak_ratio_lo"]) if math.isfinite(r["peak_ratio_lo"]) else math.nan,
                         "x_hi": math.log2(r["peak_ratio_hi"]) if math.isfinite(r["peak_ratio_hi"]) else math.nan,
                         "settled": r.get("settled"), "seeds": int(r["seeds"]), "cells": int(r["cells"]),
                         "verdict": r["verdict"], "optimum_verdict": r["optimum_verdict"],
                         "minutes": float(pd.to_numeric(res.loc[sel, "seconds"], errors="coerce").sum()) / 60})
    cols = ["table", "column", "gap", "gap_se", "gap_lo", "gap_hi", "x", "x_se", "x_lo", "x_hi", "settled", "seeds",
            "cells", "verdict", "optimum_verdict", "minutes"]
    out = pd.DataFrame(rows, columns=cols)
    out.attrs["left_out"] = repeats  # (column, why) of the grid columns not listed: no run, or repeated runs
    return out


def pooling(cols: pd.DataFrame) -> list[str]:
    """Per column of :func:`columns`, whether and why it enters the pooled claims: both quantities, the gap only
    (no interior optimum to place), or neither (Δθ had not settled: the gate)."""
    settled = set(settled_columns(cols).index)
    out = []
    for i, r in cols.iterrows():
        if i not in settled:
            out.append("left out: Δθ not settled (the gate)" if r["settled"] is False or r["settled"] is np.False_
                       else "left out: regime not measured")
        elif not math.isfinite(r["x"]) or not math.isfinite(r["x_se"]):
            out.append("gap only: no fitted optimum with an interval")
        else:
            out.append("gap and optimum")
    return out


def answer(claims: list[dict]) -> str:
    """The pooled answer in words, from the two claims of :func:`claims` (the first screen's sentence): where the
    optimum lies relative to 10/128, with its interval, and whether the yellow cell is within a point of the best
    other cell."""
    gap, opt = claims
    parts = []
    if opt.get("estimate") is not None and None not in (opt.get("ci") or [None]):
        lo, hi = opt["ci"]
        where = "below" if hi < 1 else "above" if lo > 1 else "at"
        inside = "within one grid step (×½–×2) of it" if opt["word"] == "holds" else (
            "outside one grid step of it" if opt["word"] == "no" else "possibly more than one grid step from it")
        parts.append(f"The accuracy optimum lies at ×{opt['estimate']:.2f} [{lo:.2f}, {hi:.2f}] of the tuning factor "
                     f"10/128 ({100 * opt['level']:.0f} % interval): {where} 10/128" + (
                         " (its interval holds ×1)" if where == "at" else "") + f", {inside}.")
    if gap.get("estimate") is not None and None not in (gap.get("ci") or [None]):
        lo, hi = gap["ci"]
        m = gap["rule"]["margin"]
        verdict = ("within a point of it" if gap["word"] == "holds" else "more than a point behind it"
                   if gap["word"] == "no" else f"within a point of it cannot yet be shown: the interval reaches "
                   f"below −{m:g}" if lo < -m else "not yet decided")
        parts.append(f"The yellow cell is {gap['estimate']:+.2f} [{lo:+.2f}, {hi:+.2f}] points from the best other "
                     f"cell ({100 * gap['level']:.0f} % interval): {verdict}.")
    return " ".join(parts)


def pooled(effect, se, level: float = 0.95) -> dict:
    """The random-effects (DerSimonian–Laird) pooled estimate of per-column ``effect`` ± ``se`` (finite pairs only):
    ``estimate``, ``lo``, ``hi`` (``level`` interval, normal quantile as in ``statsmodels``' ``combine_effects``),
    ``se``, ``tau2`` (between-column variance), ``i2`` (share of the spread that is between columns), ``k`` (columns),
    ``q_p`` (Cochran's Q test of homogeneity). NaNs with fewer than two columns."""
    from statsmodels.stats.meta_analysis import combine_effects

    e, s = np.asarray(effect, dtype=float), np.asarray(se, dtype=float)
    ok = np.isfinite(e) & np.isfinite(s) & (s > 0)
    e, s = e[ok], s[ok]
    nan = {"estimate": math.nan, "lo": math.nan, "hi": math.nan, "se": math.nan, "tau2": math.nan, "i2": math.nan,
           "k": int(len(e)), "q_p": math.nan}
    if len(e) < 2:
        return nan
    res = combine_effects(e, s ** 2, method_re="dl", alpha=1 - level)
    frame = res.summary_frame()
    row = frame.loc["random effect"]
    from scipy import stats

    return {"estimate": float(row["eff"]), "lo": float(row["ci_low"]), "hi": float(row["ci_upp"]),
            "se": float(row["sd_eff"]), "tau2": float(res.tau2), "i2": float(res.i2), "k": int(len(e)),
            "q_p": float(stats.chi2.sf(res.q, len(e) - 1))}


def claims(cols: pd.DataFrame, data: str) -> tuple[list[dict], dict]:
    """The two pooled claims (``claims.json`` rows) and the pooled numbers behind them: the yellow cell not worse
    than the best other cell by more than ``rules.RULES["pooled gap"]``'s margin, and the pooled optimum within one
    grid step of the yellow tuning factor (``rules.RULES["pooled optimum"]``)."""
    gap_rule, opt_rule = rules.rule("pooled gap"), rules.rule("pooled optimum")
    cols = settled_columns(cols)
    g = pooled(cols.gap, cols.gap_se, level=gap_rule.level)
    o = pooled(cols.x, cols.x_se, level=opt_rule.level)
    minutes = float(cols.minutes.sum()) if len(cols) else None
    seeds = int(cols.seeds.min()) if len(cols) else 0
    out = []
    d = fnd.Difference(g["estimate"], g["lo"], g["hi"], seeds, True, "random effects over columns", gap_rule.level)
    word, reason = (rules.decide(gap_rule, ci=(g["lo"], g["hi"]), real_data=False) if g["k"] >= 2 else
                    ("undecided", f"{g['k']} column{'s' if g['k'] != 1 else ''} with an interval, 2 needed"))
    detail = (f"pooled yellow − best other cell {d.text()} points over {g['k']} columns (random effects, "
              f"{100 * gap_rule.level:.0f} % interval; between-column I² {100 * g['i2']:.0f} %)"
              if g["k"] >= 2 else "")
    out.append({"paper": "Yun et al. 2022", "item": f"Pooled, {g['k']} settled grid columns", "data": data,
                "seeds": seeds,
                "claim": "across the grid columns, the yellow cell is within one point of the best other cell",
                "verdict": fnd.verdict_words(word, reason, detail), "word": word,
                "ours": f"{g['estimate']:+.2f}" if g["k"] >= 2 else "", "paper_value": "", "train_minutes": minutes,
                **fnd.interval_fields(d, margin=gap_rule.margin, rule=gap_rule, gate_ok=None,
                                      to_decide=_more_columns(word, g, gap_rule))})
    ratio = fnd.Difference(2 ** o["estimate"], 2 ** o["lo"], 2 ** o["hi"], seeds, True,
                           "random effects over columns", opt_rule.level) if o["k"] >= 2 else fnd.NO_DIFFERENCE
    word, reason = (rules.decide(opt_rule, ci=(ratio.lo, ratio.hi), real_data=False) if o["k"] >= 2 else
                    ("undecided", f"{o['k']} column{'s' if o['k'] != 1 else ''} with a fitted optimum, 2 needed"))
    detail = (f"pooled optimum / yellow tuning factor ×{ratio.diff:.2f} [{ratio.lo:.2f}, {ratio.hi:.2f}] over "
              f"{o['k']} columns (random effects on log₂, {100 * opt_rule.level:.0f} % interval; I² "
              f"{100 * o['i2']:.0f} %)" if o["k"] >= 2 else "")
    out.append({"paper": "Yun et al. 2022", "item": f"Pooled optimum, {o['k']} settled grid columns", "data": data,
                "seeds": seeds, "train_minutes": None,
                "claim": "across the grid columns, the accuracy optimum lies within one grid step (×½–×2) of the "
                         "yellow tuning factor",
                "verdict": fnd.verdict_words(word, reason, detail), "word": word,
                "ours": f"×{ratio.diff:.2f}" if o["k"] >= 2 else "", "paper_value": "",
                **fnd.interval_fields(ratio, margin=opt_rule.margin, rule=opt_rule, gate_ok=None, scale="ratio",
                                      to_decide=_more_columns(word, o, opt_rule, log2=True))})
    restate(out)  # the answer in words, on the first screen under the claims
    return out, {"gap": g, "optimum": o}


def restate(claims: list[dict]) -> None:
    """Rewrite the claims' ``note`` (the first screen's answer in words, :func:`answer`) from the claims as they now
    stand: after ``stage2.judge`` has judged the pooled gap again, the note speaks of its stage-2 interval."""
    said = answer(claims)
    for c in claims:
        if said:
            c["note"] = said


def settled_columns(cols: pd.DataFrame) -> pd.DataFrame:
    """The columns whose yellow cells' Δθ settled before the first LR decay (the regime the claim speaks of); where
    no column measured its regime (synthetic smoke runs), all of them."""
    known = cols["settled"].map(lambda v: isinstance(v, (bool, np.bool_)))
    if not known.any():
        return cols
    return cols[known & cols["settled"].map(lambda v: bool(v) if isinstance(v, (bool, np.bool_)) else False)]


def _more_columns(word: str, p: dict, rule: rules.Rule, log2: bool = False) -> str:
    """What would decide a pooled claim: the columns (of the same spread) that would bring the interval inside what
    decides it, assuming the standard error falls as 1/√k."""
    if word != "undecided":
        return ""
    if p["k"] < 2 or not math.isfinite(p["se"]):
        return "at least two grid columns with runs"
    est = p["estimate"]
    if log2:
        target = min(abs(est - math.log2(rule.margin)), abs(est + math.log2(rule.margin)))
    else:
        target = abs(est + rule.margin)
    from scipy import stats

    z = stats.norm.ppf(1 - rule.alpha)  # the pooled interval is normal, as combine_effects makes it
    k = math.ceil(p["k"] * (z * p["se"] / target) ** 2) if target > 0 else None
    return (f"about {k} columns of this spread ({k - p['k']} more)" if k else
            "no number of columns: the estimate sits on the margin")


#: the figure's width in inches at 100 dpi: the ~800 px of a page's content
FIG_WIDTH = 8.0
#: the smallest font of the figure (tick labels), in points
FONT = 9


def forest(cols: pd.DataFrame, summary: dict, ax_gap, ax_opt) -> None:
    """The forest plot: one row per column (estimate and its own interval), the pooled estimate as a diamond at the
    bottom; above the gap (points, the margin −1 dashed and labelled), below the optimum on a ×ratio axis (log
    scale: ×½ … ×2 is one grid step either way, dashed and labelled)."""
    margin = rules.rule("pooled gap").margin
    for ax, est, lo, hi, key, xlabel, marks in (
            (ax_gap, "gap", "gap_lo", "gap_hi", "gap", "yellow − best other cell (accuracy points)",
             ((-margin, f"margin −{margin:g}"), (0, ""))),
            (ax_opt, "x", "x_lo", "x_hi", "optimum", "fitted optimum's tuning factor / 10/128 (×ratio, log scale)",
             ((-1, "one grid step (×½)"), (0, ""), (1, "one grid step (×2)")))):
        c = cols.dropna(subset=[est]).reset_index(drop=True)
        y = np.arange(len(c))[::-1] + 2
        ax.errorbar(c[est], y, xerr=[(c[est] - c[lo]).fillna(0), (c[hi] - c[est]).fillna(0)], fmt="o", ms=5,
                    color="#4c72b0", ecolor="#8da0cb", capsize=2, label="one column, its own interval")
        p = summary[key]
        if math.isfinite(p["estimate"]):
            d = np.array([[p["lo"], 0], [p["estimate"], 0.4], [p["hi"], 0], [p["estimate"], -0.4]])
            ax.fill(d[:, 0], d[:, 1], color="#dd8452", label="pooled over the columns (random effects)")
        for m, text in marks:
            ax.axvline(m, color="0.35", ls="--" if m else ":", lw=1)
            if text:
                ax.annotate(text, (m, 1), xycoords=("data", "axes fraction"), xytext=(3, -3),
                            textcoords="offset points", ha="left", va="top", fontsize=FONT, color="0.3")
        ax.set_yticks([*y, 0], [*c["column"], f"pooled ({p['k']} columns)"], fontsize=FONT)
        ax.tick_params(axis="x", labelsize=FONT)
        ax.set_xlabel(xlabel, fontsize=FONT + 1)
        ax.set_ylabel("grid column", fontsize=FONT + 1)
        ax.set_ylim(-1, len(c) + 3)
    lo, hi = ax_opt.get_xlim()
    ticks = [t for t in range(math.floor(lo), math.ceil(hi) + 1)]
    ax_opt.set_xticks(ticks, [_ratio_tick(t) for t in ticks])
    ax_gap.set_title("Yellow cell against the best other cell", fontsize=FONT + 2)
    ax_opt.set_title("Where the fitted accuracy optimum lies", fontsize=FONT + 2)



def _ratio_tick(t: int) -> str:
    """A log₂ tick as the ratio it stands for: ×¼, ×½, ×1, ×2, ×4."""
    return {-2: "×¼", -1: "×½"}.get(t, f"×{2 ** t:g}" if t >= 0 else f"×1/{2 ** -t:g}")


def forest_figure(cols: pd.DataFrame, summary: dict, title: str = ""):
    """:func:`forest` as one figure for a page ~800 px wide (:data:`FIG_WIDTH` at 100 dpi): the two panels one above
    the other, tick labels at :data:`FONT` points or more."""
    import matplotlib.pyplot as plt

    n_gap = int(cols["gap"].notna().sum())
    n_opt = int(cols["x"].notna().sum())
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(FIG_WIDTH, 0.3 * (n_gap + n_opt) + 3.2), dpi=100,
                                   gridspec_kw={"height_ratios": [max(n_gap, 2) + 3, max(n_opt, 2) + 3]})
    forest(cols, summary, ax1, ax2)
    handles, labels = ax1.get_legend_handles_labels()
    if handles:  # one legend for both panels, under them, clear of every row
        fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=FONT, frameon=False)
    if title:
        fig.suptitle(title, fontsize=FONT + 1)
    fig.tight_layout(rect=(0, 0.045 if handles else 0, 1, 1))
    return fig
