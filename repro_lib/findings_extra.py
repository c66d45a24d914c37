"""Findings of the notebooks that are not swept paper grids: method comparisons (back-matching), paired runs (Li &
Arora's exact vs schedule-only constructions), identities checked in exact arithmetic, searches over one value
(Yun et al. Sec. 6), detection rates (AdamP Table B.1). No training here.

Every function reads a notebook's own results (DataFrames) and returns numbers or one short line of text, so
that a "What we found" section states no number typed by hand. ``report.findings`` covers the Yun et al. grids;
this module covers the rest::

    f = method_findings(results, ours="scale_amended_sgd")   # one row per (column, other method)
    method_verdict(f, names=METHOD)                           # "cifar10: OURS best on 1/4 nets, ..."
    identity_verdict({"Thm 2.9": 3e-15, ...}, tol=1e-9)       # "holds: max rel. error 3e-15 (k identities)"
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

def num(v, spec: str = ".2f", missing: str = "n/a") -> str:
    """``format(v, spec)``, or ``missing`` for None/NaN (a value whose runs are missing or all diverged)."""
    if v is None or (isinstance(v, (float, np.floating)) and not math.isfinite(v)):
        return missing
    return format(v, spec)


def label_of(dataset: str, synthetic: bool = False) -> str:
    """The name of one dataset in tables and figures (``report.label_of``)."""
    from . import report

    return report.label_of(dataset, synthetic)


def data_label(cfgs) -> str:
    """``report.dataset_label`` for any run configs (``RunConfig`` and ``distributed.ImageFolderConfig``)."""
    from . import report

    return report.dataset_label(cfgs)


# ------------------------------------------------------------------------------------------- method comparisons
def method_findings(results: pd.DataFrame, ours: str, value: str = "test_acc", by=("paper_dataset", "model"),
                    method: str = "method", stat: str = "median") -> pd.DataFrame:
    """Per column ``by`` of a method comparison (``sweep.run_sweep`` output, one row per (cell, seed)), how the
    method ``ours`` fares against each other method: one row per (column, other method) with ``ranking`` (the
    column's methods by ``stat`` of ``value`` over finished seeds, best first, " > "-joined), ``ours_rank``
    (1 = best; NaN when ``ours`` has no finished run), ``ours_value``, ``other``, ``other_value``, ``margin``
    (ours − other), ``spread`` (the larger seed sd of the two; NaN with one seed), ``decided``
    (|margin| > spread), ``seeds`` (least finished seeds of the two) and ``missing`` (runs of the column not in
    the store, status "missing")."""
    by = list(by)
    rows = []
    for key, g in results.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        ok = g[g["status"] == "finished"]
        st = ok.groupby(method)[value].agg([stat, "std", "count"])
        vals = st[stat].sort_values(ascending=False)
        ranks = vals.rank(ascending=False, method="min")
        base = dict(zip(by, key), ranking=" > ".join(str(m) for m in vals.index),
                    ours_rank=float(ranks[ours]) if ours in ranks else math.nan,
                    ours_value=float(vals[ours]) if ours in vals else math.nan,
                    missing=int((g["status"] == "missing").sum()))
        for other in dict.fromkeys(g[method]):
            if other == ours:
                continue
            ov = float(vals[other]) if other in vals else math.nan
            sds = [st.loc[m, "std"] for m in (ours, other) if m in st.index]
            spread = float(np.nanmax(sds)) if sds and not all(pd.isna(s) for s in sds) else math.nan
            margin = base["ours_value"] - ov
            seeds = min(int(st.loc[m, "count"]) if m in st.index else 0 for m in (ours, other))
            rows.append({**base, "other": other, "other_value": ov, "margin": margin, "spread": spread,
                         "decided": bool(math.isfinite(spread) and math.isfinite(margin) and abs(margin) > spread),
                         "seeds": seeds})
    return pd.DataFrame(rows)


def _margin_text(m: float, spread: float) -> str:
    if not math.isfinite(m):
        return "n/a"
    if not math.isfinite(spread):
        return f"{m:+.2f}"
    return f"{m:+.2f} ({'>' if abs(m) > spread else 'within'} seed sd {spread:.2f})"


def say_method_findings(f: pd.DataFrame, names: Mapping[str, str] | None = None, by=("paper_dataset", "model"),
                        ours_name: str = "ours") -> str:
    """:func:`method_findings` in words (Markdown), one line per column: the ranking and the margin of ``ours``
    over every other method (``names`` renames methods)."""
    names = dict(names or {})
    nm = lambda m: names.get(m, m)  # noqa: E731
    lines = []
    for key, g in f.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        r0 = g.iloc[0]
        ranking = " > ".join(nm(m) for m in r0["ranking"].split(" > ")) if r0["ranking"] else "no finished run"
        margins = "; ".join(f"− {nm(r.other)} {_margin_text(r.margin, r.spread)}" for r in g.itertuples())
        seeds = int(g["seeds"].min())
        spread = "" if g["spread"].notna().any() else ": no spread to compare with"
        miss = f", {int(r0['missing'])} runs missing" if r0["missing"] else ""
        lines.append(f"- **{', '.join(str(k) for k in key)}** ({seeds} seed{'s' if seeds != 1 else ''}{spread}{miss}): "
                     f"{ranking}; {ours_name} {margins}.")
    return "\n".join(lines)


def method_verdict(f: pd.DataFrame, by=("paper_dataset", "model"), names: Mapping[str, str] | None = None,
                   ours_name: str = "ours") -> str:
    """One line over :func:`method_findings`: per value of ``by[0]`` (e.g. the dataset), on how many columns
    ``ours`` ranks first and its mean margin over each other method (with how many of those margins exceed the
    seed spread)."""
    names = dict(names or {})
    parts = []
    for gval, g in f.groupby(by[0], sort=False):
        cols = g.drop_duplicates(list(by))
        n_best = int((cols["ours_rank"] == 1).sum())
        marg = []
        for other, h in g.groupby("other", sort=False):
            m = h["margin"].dropna()
            if not len(m):
                marg.append(f"vs {names.get(other, other)} n/a")
                continue
            dec = f", {int(h['decided'].sum())}/{len(m)} beyond seed sd" if h["spread"].notna().any() else ""
            marg.append(f"vs {names.get(other, other)} {m.mean():+.2f}{dec}")
        seeds = int(g["seeds"].min())
        parts.append(f"{gval}: {ours_name} best on {n_best}/{len(cols)}, mean margin {', '.join(marg)} "
                     f"({seeds} seed{'s' if seeds != 1 else ''})")
    return "; ".join(parts) if parts else "n/a (no finished runs)"


# ------------------------------------------------------------------------------------------- paired runs
def paired_gaps(hist: pd.DataFrame, pairs: Mapping[str, str], label: str = "label", seed: str = "seed",
                track: str = "train_acc", final: str = "test_acc") -> pd.DataFrame:
    """How far run ``a`` is from run ``b`` for every ``a: b`` of ``pairs`` (same seed, epochs both have), from a
    long-form history (``sweep.histories``): ``max |Δ <track>|`` over the epochs, ``Δ final <final>`` (a − b at
    the last epoch where both have a value) and the two final values. Pairs without runs are left out."""
    rows = []
    for a_label, b_label in pairs.items():
        common = sorted(set(hist.loc[hist[label] == a_label, seed]) & set(hist.loc[hist[label] == b_label, seed]))
        for s in common:
            a = hist[(hist[label] == a_label) & (hist[seed] == s)].set_index("epoch")
            b = hist[(hist[label] == b_label) & (hist[seed] == s)].set_index("epoch")
            ep = a.index.intersection(b.index)
            a, b = a.loc[ep], b.loc[ep]
            both = a[final].notna() & b[final].notna()
            fa = float(a.loc[both, final].iloc[-1]) if both.any() else math.nan
            fb = float(b.loc[both, final].iloc[-1]) if both.any() else math.nan
            rows.append({"run": a_label, "against": b_label, seed: s,
                         f"max |Δ {track}|": float((a[track] - b[track]).abs().max()) if len(ep) else math.nan,
                         f"final {final} (run)": fa, f"final {final} (against)": fb, f"Δ final {final}": fa - fb})
    cols = ["run", "against", seed, f"max |Δ {track}|", f"final {final} (run)", f"final {final} (against)",
            f"Δ final {final}"]
    return pd.DataFrame(rows, columns=cols)


# ------------------------------------------------------------------------------------------- exact identities
def identity_verdict(errors: Mapping[str, float] | pd.Series, tol: float) -> str:
    """One line on identities that hold exactly in theory, from their measured relative errors (``{name:
    error}`` or a Series indexed by name): "holds: max rel. error 3.0e-15 (7 identities, tolerance 1e-09)" when
    every error is at most ``tol``, else "fails: <name> rel. error … > tolerance …" naming the worst one; NaN
    counts as failing."""
    errs = {k: float(v) for k, v in dict(errors).items()}
    if not errs:
        return "n/a (nothing checked)"
    bad = {k: v for k, v in errs.items() if not (math.isfinite(v) and v <= tol)}
    if bad:
        worst = max(bad, key=lambda k: bad[k] if math.isfinite(bad[k]) else math.inf)
        return f"fails: {worst} rel. error {bad[worst]:.1e} > tolerance {tol:.0e} ({len(bad)}/{len(errs)} identities)"
    n = len(errs)
    return f"holds: max rel. error {max(errs.values()):.1e} ({n} identit{'y' if n == 1 else 'ies'}, tolerance {tol:.0e})"


# ------------------------------------------------------------------------------------------- searches, rates
def binomial_sd(acc_percent: float, n_test: int) -> float:
    """Standard deviation (percentage points) of a test accuracy measured on ``n_test`` images: √(p(1 − p)/n) ·
    100, the noise of one evaluation alone (seed-to-seed noise comes on top)."""
    p = acc_percent / 100
    if not (n_test > 0 and 0 <= p <= 1):
        return math.nan
    return 100 * math.sqrt(p * (1 - p) / n_test)


def lead(values: pd.Series) -> tuple:
    """(key of the largest value, its lead over the second largest) of a Series; NaNs are left out, the lead is
    NaN with fewer than two values."""
    v = values.dropna().sort_values(ascending=False)
    if not len(v):
        return None, math.nan
    return v.index[0], float(v.iloc[0] - v.iloc[1]) if len(v) > 1 else math.nan


def perfect_at(table: pd.DataFrame, column: str, key: str = "delta", level: float = 100.0) -> str:
    """Where ``column`` (a rate in %) reaches ``level``, in words: "at every δ", "at δ ∈ {0.02, 0.01}" or "at no δ
    (best 97.5 at δ = 0.05)"; ``key`` names the swept value (the detection threshold δ of AdamP's Table B.1)."""
    sym = {"delta": "δ"}.get(key, key)
    t = table.dropna(subset=[column])
    if not len(t):
        return "n/a"
    hit = t[t[column] >= level - 1e-9]
    if len(hit) == len(t):
        return f"at every {sym}"
    if not len(hit):
        best = t.loc[t[column].idxmax()]
        return f"at no {sym} (best {best[column]:.1f} at {sym} = {best[key]:g})"
    return f"at {sym} ∈ {{{', '.join(f'{v:g}' for v in hit[key])}}}"


def train_minutes(results: pd.DataFrame | Iterable[dict], column: str = "seconds") -> float:
    """Training minutes of a notebook's runs: the sum of ``column`` over a sweep result (DataFrame) or over result
    dicts (``distributed.run_configs``: their ``train_seconds``), / 60; absent or NaN values count as 0."""
    if isinstance(results, pd.DataFrame):
        return float(pd.to_numeric(results.get(column, pd.Series(dtype=float)), errors="coerce").fillna(0).sum()) / 60
    total = 0.0
    for r in results:
        v = r.get(column, r.get("train_seconds")) if isinstance(r, dict) else None
        total += float(v) if v is not None and math.isfinite(float(v)) else 0.0
    return total / 60


# ------------------------------------------------------------------------------------------- contrasts
#: what each relation of :func:`contrasts` claims: a > b, a < b, a ≈ b
RELATIONS = (">", "<", "≈")


def contrast_verdict(diff: float, noise: float, relation: str) -> str:
    """The verdict on the claim "a <relation> b" from d = a − b and the noise of d (≥ 0; NaN: no estimate):
    ">": "holds" when d > noise, "same direction, within noise" when 0 < d ≤ noise, "not reproduced, within
    noise" when −noise < d ≤ 0, "reversed" when d ≤ −noise ("<" mirrors it); "≈": "holds" when |d| ≤ noise, else
    "differs beyond noise". Without a noise estimate only the direction is judged ("holds"/"reversed", "≈": n/a)."""
    if relation not in RELATIONS:
        raise ValueError(f"relation: {relation!r} is not one of {RELATIONS}")
    if not math.isfinite(diff):
        return "n/a"
    has_noise = noise is not None and math.isfinite(noise)
    if relation == "≈":
        if not has_noise:
            return "n/a (no noise estimate)"
        return "holds" if abs(diff) <= noise else "differs beyond noise"
    d = diff if relation == ">" else -diff
    if not has_noise:
        return "holds" if d > 0 else "reversed"
    if d > noise:
        return "holds"
    if d > 0:
        return "same direction, within noise"
    return "not reproduced, within noise" if d > -noise else "reversed"


def contrasts(values: Mapping | pd.Series, specs, noise: float = math.nan, spec: str = "+.2f") -> pd.DataFrame:
    """Claims of the form "a is better than / worse than / as good as b", judged from ``values`` (e.g. the final
    test accuracy per run label). ``specs``: ``(name, a, b, relation)`` tuples, relation one of ``RELATIONS``;
    ``noise``: the noise of a difference (e.g. √2 × the binomial sd of one evaluation, or the seed spread). One row
    per spec whose runs both exist: name, a, b, value_a, value_b, diff (a − b), noise, verdict
    (:func:`contrast_verdict`) and text ("holds: +1.20 (noise 0.90)")."""
    values = pd.Series(values, dtype=float)
    rows = []
    for name, a, b, rel in specs:
        if a not in values.index or b not in values.index:
            continue
        d = float(values[a] - values[b])
        v = contrast_verdict(d, noise, rel)
        nz = f" (noise {noise:.2f})" if noise is not None and math.isfinite(noise) else ""
        rows.append(dict(name=name, a=a, b=b, relation=rel, value_a=float(values[a]), value_b=float(values[b]),
                         diff=d, noise=noise, verdict=v, text=f"{v}: {num(d, spec)}{nz}"))
    return pd.DataFrame(rows, columns=["name", "a", "b", "relation", "value_a", "value_b", "diff", "noise",
                                       "verdict", "text"])
