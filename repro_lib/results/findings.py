"""Verdicts in numbers and words, computed from a notebook's own results (DataFrames). No training here.

Every function returns numbers or one short line of text, so that a "What we found" section states no number
typed by hand.

* Swept paper grids (Yun et al.): ``findings`` (per column: verdict, margin to the best other cell, seed spread,
  peak tuning factor of a quadratic fit with a bootstrap interval, ``peak_tuning_factor``), ``angular_findings``
  (Δθ beside Eq. 27), ``say_findings``, ``claim_rows`` (the rows of the README results table), ``verdict_line``.
* The other notebooks: method comparisons (back-matching: ``method_findings``, ``method_verdict``), paired runs
  (Li & Arora's exact vs schedule-only constructions: ``paired_gaps``, ``contrasts``), identities checked in exact
  arithmetic (``identity_verdict``), searches over one value (Yun et al. Sec. 6: ``lead``), detection rates (AdamP
  Table B.1: ``perfect_at``), ``binomial_sd``, ``train_minutes``.
* What the data is called wherever a number appears: ``label_of``, ``dataset_label`` (a stand-in says so).

::

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


def seed_range(lo: int, hi: int) -> str:
    """The finished seeds per cell of a column: "3", or "0–3" where its cells hold different numbers."""
    return f"{lo}–{hi}" if hi != lo else str(lo)


def yellow_text(r) -> str:
    """The yellow cell of one :func:`findings` row as "mean ± sd" ("mean" with one seed, "" with no run)."""
    if not math.isfinite(r["yellow_mean"]):
        return ""
    return f"{r['yellow_mean']:.2f}" + (f" ± {r['yellow_sd']:.2f}" if math.isfinite(r["yellow_sd"]) else "")


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


# ------------------------------------------------------------------------------------------- the verdict words
#: the three words every published verdict starts with: the claim *holds*, does *not* (the opposite, beyond the
#: noise, in a settled regime), or the runs cannot decide (*undecided*, with the reason)
VERDICTS = ("holds", "no", "undecided")
#: seeds a claim measured on real images needs before it can be decided either way
MIN_SEEDS = 3


def judge(holds: bool | None, beyond_noise: bool, seeds: int = MIN_SEEDS, real_data: bool = False,
          settled: bool | None = True, tolerant: bool = False) -> tuple[str, str]:
    """The verdict word of :data:`VERDICTS` and its reason ("" for a plain *holds* / *no*), from what was measured.

    ``holds``: whether the measurement points the way the claim says (None: nothing finished, *undecided*);
    ``beyond_noise``: whether it does so by more than its noise (the seed spread, or the binomial noise of one
    evaluation); ``seeds``: the finished seeds it rests on; ``real_data``: measured on real images, where fewer than
    :data:`MIN_SEEDS` seeds leave it *undecided* either way (a deterministic identity or toy passes False);
    ``settled``: whether the regime the claim speaks of was reached (False: a contrary result is *undecided*; None:
    not measured); ``tolerant``: the claim already allows for a near miss ("best or second"), so pointing the
    claimed way is enough to hold, within the noise or not."""
    if holds is None:
        return "undecided", "no finished run"
    if real_data and seeds < MIN_SEEDS:
        return "undecided", f"{seeds} seed{'s' if seeds != 1 else ''} on real images, {MIN_SEEDS} needed"
    if holds:
        return ("holds", "") if beyond_noise or tolerant else ("undecided", "the claimed way, within the noise")
    if not beyond_noise:
        return "undecided", "against the claim, within the noise"
    if settled is False:
        return "undecided", "against the claim, before the angular update settled"
    return "no", ""


def word_counts(words, mark: str = "", none: str = "no claim") -> str:
    """"holds 2, undecided 4" in the order of :data:`VERDICTS` (words that do not occur left out; ``none`` when no
    word occurs); ``mark`` wraps each word (``"*"``: Markdown italics)."""
    words = list(words)
    return ", ".join(f"{mark}{w}{mark} {words.count(w)}" for w in VERDICTS if w in words) or none


def verdict_words(word: str, reason: str = "", detail: str = "") -> str:
    """A verdict as published: "holds: +1.20 (noise 0.90)", "undecided (1 seed on real images, 3 needed): …"."""
    if word not in VERDICTS:
        raise ValueError(f"verdict: {word!r} is not one of {VERDICTS}")
    head = word + (f" ({reason})" if reason else "")
    return head + (f": {detail}" if detail else "")


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


# ------------------------------------------------------------------------------------------- swept grids
#: what a dataset is called in tables and figures; a stand-in says so wherever its numbers appear
STAND_INS = {"cifar10-jpeg": "CIFAR-10 JPEG stand-in (not CIFAR-10 numbers)"}
DATASET_NAMES = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100", "tiny_imagenet": "Tiny ImageNet",
                 "imagenet": "ImageNet"}
SYNTHETIC = "synthetic images (pipeline check)"
#: datasets that are synthetic by name (``config.ImageFolderConfig`` has no ``synthetic`` field)
SYNTHETIC_DATASETS = ("synthetic-imagefolder",)


def label_of(dataset: str, synthetic: bool = False) -> str:
    """The name of one dataset in tables and figures: ``DATASET_NAMES``, a stand-in's label (``STAND_INS``, which
    says its accuracies are not the paper dataset's), :data:`SYNTHETIC`, else the dataset's own name."""
    if synthetic or dataset in SYNTHETIC_DATASETS:
        return SYNTHETIC
    return STAND_INS.get(dataset, DATASET_NAMES.get(dataset, dataset))


def dataset_label(results_or_cfgs) -> str:
    """How the data of a sweep is named in its tables and figures (:func:`label_of` of every config: ``RunConfig``
    or ``config.ImageFolderConfig``; a sweep result's ``cfg`` column), distinct labels in order, joined by
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


#: the regime check: the yellow cells' Δθ counts as *settled* before the first LR decay when, over the last
#: ``REGIME_SHARE`` of the epochs before it, the mean of the window's second half differs from its first half's by
#: at most ``REGIME_DRIFT`` (relative)
REGIME_SHARE, REGIME_DRIFT = 0.2, 0.10


def regime(histories: Iterable[list[dict]]) -> dict:
    """Whether the angular update had settled before the first LR decay, from the per-epoch histories of some runs
    (the yellow cells of a column; Δθ averaged over them per epoch).

    The first phase is the epochs from the largest LR up to the last epoch whose LR is at least half of it (a ÷10
    step decay ends it exactly; a cosine schedule at its midpoint). Its last :data:`REGIME_SHARE` (at least 4
    epochs) is split in two halves; ``drift`` = |mean(second half) / mean(first half) − 1|, ``settled`` = drift ≤
    :data:`REGIME_DRIFT`, ``window`` = (first, last epoch). Without Δθ or LR in the histories, or with a first phase
    under 4 epochs: ``settled`` None (not measured) and ``drift`` NaN."""
    per_epoch: dict[int, list[float]] = {}
    lrs: dict[int, float] = {}
    for hist in histories:
        for h in hist or []:
            a, lr = h.get("angular_update"), h.get("lr")
            if a is None or lr is None or not (math.isfinite(a) and math.isfinite(lr)):
                continue
            per_epoch.setdefault(int(h["epoch"]), []).append(float(a))
            lrs[int(h["epoch"])] = max(lrs.get(int(h["epoch"]), 0.0), float(lr))
    out = {"settled": None, "drift": math.nan, "window": None}
    if not per_epoch:
        return out
    epochs = sorted(per_epoch)
    peak = max(lrs[e] for e in epochs)
    start = next(e for e in epochs if lrs[e] >= peak * (1 - 1e-9))
    phase = [e for e in epochs if e >= start]
    stop = next((i for i, e in enumerate(phase) if lrs[e] < 0.5 * peak), len(phase))
    phase = phase[:stop]
    k = max(4, math.ceil(REGIME_SHARE * len(phase)))
    if len(phase) < 4:
        return out
    window = phase[-k:]
    mean = [float(np.mean(per_epoch[e])) for e in window]
    a, b = np.mean(mean[: len(mean) // 2]), np.mean(mean[len(mean) // 2:])
    drift = float(abs(b / a - 1)) if a > 0 else math.nan
    return {"settled": bool(math.isfinite(drift) and drift <= REGIME_DRIFT), "drift": drift,
            "window": (window[0], window[-1])}


def regime_text(r) -> str:
    """A findings row's regime check in words: "settled (Δθ drift 3 % over epochs 32–40)" / "not settled (…)" /
    "not measured"."""
    if r.get("settled") is None or (isinstance(r.get("settled"), float) and math.isnan(r["settled"])):
        return "not measured"
    lo, hi = r["regime_window"]
    return (f"{'settled' if r['settled'] else 'not settled'} (Δθ drift {100 * r['regime_drift']:.0f} % "
            f"over epochs {lo}–{hi}, before the first LR decay)")


def _real_data(results: pd.DataFrame) -> bool:
    """Whether a sweep trained on real images (its configs are not synthetic); no ``cfg`` column: False."""
    if "cfg" not in results:
        return False
    return any(label_of(c.dataset, bool(getattr(c, "synthetic", False))) != SYNTHETIC for c in results["cfg"])


def _larger_sd(*sds) -> float:
    """The larger of some seed standard deviations, NaN ones left out (NaN when all are: one seed, no spread)."""
    known = [float(v) for v in sds if pd.notna(v)]
    return max(known) if known else math.nan


def findings(results: pd.DataFrame, col: str = "n", value: str = "test_acc", yellow_tf: float | None = None,
             group: str = "subtable", real_data: bool | None = None) -> pd.DataFrame:
    """Per column of a swept grid (one row per (``group``, ``col``)), what the paper's claim needs, computed from the
    runs (``sweep.run_sweep`` output with one row per (cell, seed)):

    ``cells``, ``seeds`` (finished runs per cell, least over the cells with any), ``diverged`` (runs of the column
    left out as diverged, collapsed ones included), ``rank`` (best / second / no: the rank of the yellow cell's
    mean among the column's means, the paper's reading), ``yellow_mean`` ± ``yellow_sd`` (over seeds),
    ``best_other`` (the best non-yellow cell's mean) and its ``best_other_tf``, ``margin`` (yellow − best other:
    > 0 means the yellow cell is best), ``gap_to_second`` (yellow − the column's second-best mean; < 0 when the
    yellow cell is neither best nor second) against ``spread_to_second`` (the larger seed sd of those two cells),
    ``runner_up_margin`` (best − second best of the column), ``spread``
    (the largest seed sd among the yellow and best-other cells) and ``decided`` (|margin| > spread),
    ``peak_tf`` [``peak_lo``, ``peak_hi``] (:func:`peak_tuning_factor`) and ``peak_vs_yellow`` (peak / yellow
    tuning factor), ``missing`` (runs not in the store), the regime check of the yellow cells (:func:`regime`:
    ``settled``, ``regime_drift``, ``regime_window``), and the verdict (:func:`judge`): ``verdict`` *holds* when
    the yellow cell is best or second, *no* when it is neither by more than the seed spread of it and the
    column's second cell, in a settled regime, else *undecided*, with ``reason``. ``real_data`` (default: from the
    configs) makes a yellow cell run with fewer than :data:`MIN_SEEDS` seeds (``yellow_seeds``: finished or
    diverged, a diverged seed being a result too) *undecided*."""
    from ..runs.sweep import MISSING

    if real_data is None:
        real_data = _real_data(results)
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
        held = stats["count"].fillna(0)
        held = held[held > 0]
        row.update(cells=cells.ngroups, seeds=int(held.min()) if len(held) else 0,
                   seeds_max=int(held.max()) if len(held) else 0,
                   diverged=int((g["status"] == "diverged").sum()),
                   missing=int((g["status"] == MISSING).sum()), yellow_tf=ytf)
        means = stats["mean"].dropna()
        spread2 = math.nan
        if ytf in means.index and len(means) > 1:
            ranks = means.rank(ascending=False, method="min")
            r = ranks[ytf]
            others = means.drop(index=ytf)
            top2 = means.sort_values(ascending=False)
            ysd = stats.loc[ytf, "std"]
            bo_tf = float(others.idxmax())
            spread = _larger_sd(ysd, stats.loc[bo_tf, "std"])  # one seed: no spread
            margin = float(means[ytf] - others.max())
            second_tf = float(top2.index[1])
            gap2 = float(means[ytf] - top2.iloc[1])
            spread2 = _larger_sd(ysd, stats.loc[second_tf, "std"])
            row.update(rank="best" if r == 1 else "second" if r == 2 else "no", yellow_mean=float(means[ytf]),
                       yellow_sd=float(ysd), best_other=float(others.max()), best_other_tf=bo_tf, margin=margin,
                       gap_to_second=gap2, spread_to_second=spread2, runner_up_margin=float(top2.iloc[0] - top2.iloc[1]), spread=spread,
                       decided=bool(math.isfinite(spread) and abs(margin) > spread),
                       _beyond=bool(math.isfinite(spread2) and abs(gap2) > spread2))
        else:
            row.update(rank="n/a", yellow_mean=math.nan, yellow_sd=math.nan, best_other=math.nan,
                       best_other_tf=math.nan, margin=math.nan, gap_to_second=math.nan, spread_to_second=math.nan,
                       runner_up_margin=math.nan,
                       spread=math.nan, decided=False, _beyond=False)
        reg = regime(yellow_rows["history"]) if "history" in yellow_rows else regime([])
        row.update(settled=reg["settled"], regime_drift=reg["drift"], regime_window=reg["window"])
        holds = None if row["rank"] == "n/a" else row["rank"] in ("best", "second")
        row["yellow_seeds"] = (int(yellow_rows["status"].isin(["finished", "diverged"]).sum())
                               if "status" in yellow_rows else len(yellow_rows))
        word, reason = judge(holds, row.pop("_beyond"), seeds=row["yellow_seeds"], real_data=real_data,
                             settled=reg["settled"], tolerant=True)
        if holds is None and row["missing"]:
            reason = f"{row['missing']} runs missing"
        elif holds is None and row["diverged"]:
            reason = "the yellow cell's runs all diverged"
        elif word == "undecided" and not reason.startswith(("1 seed", "2 seeds", "0 seeds")) and not math.isfinite(
                spread2 if holds is not None else math.nan) and not holds:
            reason = "one seed: no spread to judge the gap against"
        row.update(verdict=word, reason=reason)
        pk = peak_tuning_factor(ok.tuning_factor, ok[value], ok.seed if "seed" in ok else None)
        row.update(peak_tf=pk["peak"], peak_lo=pk["lo"], peak_hi=pk["hi"],
                   peak_vs_yellow=pk["peak"] / ytf if ytf and math.isfinite(ytf) else math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def angular_findings(results: pd.DataFrame, epoch: int, keys=("subtable", "n", "batch_size")) -> pd.DataFrame:
    """Δθ per epoch at ``epoch`` (mean ± sd over seeds) of every cell beside the Eq. 27 reading arccos(1 − TF),
    one row per (keys, tuning factor), with ``ratio`` = measured / predicted."""
    from ..angular import predicted_angular_update

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


RANK_WORDS = {"best": "is the best cell", "second": "is second", "no": "is neither best nor second"}


def say_findings(f: pd.DataFrame, col: str = "n", what: str = "accuracy") -> str:
    """The findings table in words (Markdown), one line per column: the verdict and its reason, then the numbers
    behind it (from :func:`findings`), the regime check and the fitted peak."""
    lines = []
    for _, r in f.iterrows():
        where = f"{ {'n': 'N', 'batch_size': 'B'}.get(col, col)} = {r[col]:,g}" if col in r else ""
        if "subtable" in r and isinstance(r["subtable"], str) and r["subtable"]:
            where = f"({r['subtable']}) {where}"
        left_out = int(r.get("diverged", 0) or 0)
        dropped = f"; {left_out} diverged run{'s' if left_out != 1 else ''} left out" if left_out else ""
        if r["rank"] == "n/a":
            lines.append(f"- **{where}**: *{r['verdict']}* ({r['reason']}){dropped}.")
            continue
        if r["missing"]:
            where += f" — provisional, {int(r['missing'])} runs missing"
        margin = (f"ahead of the best other cell by {r['margin']:.2f} points" if r["margin"] > 0
                  else f"tied with the cell at tuning factor {r['best_other_tf']:.4g}" if r["margin"] == 0
                  else f"{-r['margin']:.2f} points behind the best cell (tuning factor {r['best_other_tf']:.4g})")
        spread = (("more than" if r["decided"] else "within") + f" the seed spread ({r['spread']:.2f})"
                  if math.isfinite(r["spread"]) else "with one seed, so no spread to compare with")
        interval = (f" (95 % bootstrap interval {r['peak_lo']:.3g}–{r['peak_hi']:.3g})" if math.isfinite(r["peak_lo"])
                    else " (one seed: no bootstrap interval)")
        peak = (f"the quadratic fit peaks at tuning factor {r['peak_tf']:.3g}{interval} beside the yellow "
                f"{r['yellow_tf']:.3g}" if math.isfinite(r["peak_tf"]) else "the quadratic fit has no interior peak")
        lo, hi = int(r["seeds"]), int(r.get("seeds_max", r["seeds"]))
        seeds = f"{seed_range(lo, hi)} seed{'' if (lo, hi) == (1, 1) else 's'} per cell{dropped}"
        why = f" ({r['reason']})" if r["reason"] else ""
        lines.append(f"- **{where}** ({seeds}): *{r['verdict']}*{why}. The yellow cell ({yellow_text(r)} % "
                     f"{what}) {RANK_WORDS[r['rank']]}, {margin}, {spread}; Δθ {regime_text(r)}; {peak}.")
    return "\n".join(lines)


def _fmt_tf(v: float) -> str:
    return f"{v:.3g}" if math.isfinite(v) else "—"


def verdict_text(r) -> str:
    """One findings row as a published verdict (:func:`verdict_words`): "holds: best, +1.20 (> seed sd 0.80)",
    "undecided (1 seed on real images, 3 needed): second, −0.65 (one seed: no spread)", "no: third or lower,
    −1.20 to the second cell (> seed sd 0.71), −6.80 to the best"."""
    if r["rank"] == "n/a":
        return verdict_words(r["verdict"], r["reason"])
    missing = f"; provisional, {int(r['missing'])} runs missing" if r["missing"] else ""
    if r["rank"] == "no":  # what decides "no": the gap to the column's second cell
        gap, sd = r.get("gap_to_second", math.nan), r.get("spread_to_second", math.nan)
        detail = (f"third or lower, {gap:+.2f} to the second cell"
                  + (f" ({'>' if abs(gap) > sd else 'within'} seed sd {sd:.2f})" if math.isfinite(sd) else
                     " (one seed: no spread)") + f", {r['margin']:+.2f} to the best{missing}")
    elif not math.isfinite(r["spread"]):
        detail = f"{r['rank']}, {r['margin']:+.2f} (one seed: no spread{missing})"
    else:
        detail = (f"{r['rank']}, {r['margin']:+.2f} ({'>' if r['decided'] else 'within'} seed sd "
                  f"{r['spread']:.2f}{missing})")
    return verdict_words(r["verdict"], r["reason"], detail)


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
        minutes, paper_value, where = None, "", f"{label} = {r[col]:,g}"
        if results is not None:
            sel = results[col] == r[col]
            if "subtable" in r and "subtable" in results:
                sel &= results["subtable"].astype(str) == str(r["subtable"])
            minutes = float(pd.to_numeric(results.loc[sel, "seconds"], errors="coerce").sum()) / 60
            paper_value = _paper_column(results[sel])
            where = column_label(results[sel], col)
        ours = yellow_text(r)
        rows.append({"paper": paper, "item": f"{item}{sub}, {where}", "claim": claim, "data": data,
                     "seeds": int(r["seeds"]), "seeds_max": int(r.get("seeds_max", r["seeds"])),
                     "verdict": verdict_text(r), "regime": regime_text(r), "peak_tf": peak_text(r),
                     "train_minutes": minutes, "ours": f"yellow {ours}" if ours else "",
                     "paper_value": paper_value})
    return rows


def column_label(column: pd.DataFrame, col: str = "n") -> str:
    """Which column of the paper's table the runs ``column`` (one column of a swept grid) stand for, so a reader
    finds it in the paper: "N = 3,125" when ours is the paper's own, else "paper B = 1,024 (ours: B = 128,
    N = 1,000)", naming every size (N, B) where ours differs from the paper's."""
    names = {"n": "N", "batch_size": "B"}
    ours = {k: sorted(column[k].dropna().unique()) for k in ("n", "batch_size") if k in column}
    paper = {k: sorted(column[f"paper_{k}"].dropna().unique()) for k in ("n", "batch_size") if f"paper_{k}" in column}
    text = lambda vals: "/".join(f"{v:,g}" for v in vals)  # noqa: E731
    if col not in ours:
        return f"{col} {text(sorted(column[col].dropna().unique()))}" if col in column else col
    if f"{col}" not in paper or not paper[col]:
        return f"{names.get(col, col)} = {text(ours[col])}"
    if all(ours.get(k) == paper.get(k) for k in paper):
        return f"{names.get(col, col)} = {text(ours[col])}"
    shrunk = ", ".join(f"{names[k]} = {text(ours[k])}" for k in ("batch_size", "n")
                       if k in ours and ours[k] != paper.get(k))
    return f"paper {names.get(col, col)} = {text(paper[col])} (ours: {shrunk})"


def _paper_column(column: pd.DataFrame) -> str:
    """The paper's own reading of one column of a swept grid (its runs, ``column``): its yellow cell's accuracy
    and whether it is the best or second of the paper's cells that were run ("" without the paper's accuracies)."""
    if "paper_accuracy" not in column or "yellow" not in column:
        return ""
    keys = [k for k in ("paper_lr", "paper_weight_decay", "paper_batch_size", "paper_n") if k in column]
    cells = column.drop_duplicates(keys or None)
    acc = pd.to_numeric(cells["paper_accuracy"], errors="coerce")
    yellow = acc[cells["yellow"].astype(bool)].dropna()
    if yellow.empty:
        return ""
    rank = int((acc > yellow.max()).sum()) + 1
    return f"yellow {yellow.max():.2f} ({ {1: 'best', 2: 'second'}.get(rank, 'no') })"


def verdict_line(found: pd.DataFrame) -> str:
    """The notebook's one-line verdict (the ``verdict`` cell read by ``python -m repro_lib run``'s end table)."""
    v = found["verdict"].value_counts().to_dict()
    parts = [f"{k} {v[k]}/{len(found)}" for k in VERDICTS if k in v]
    ranks = found["rank"].value_counts().to_dict()
    rank = ", ".join(f"{k} {ranks[k]}" for k in ("best", "second", "no") if k in ranks)
    missing = int(found["missing"].sum())
    left_out = int(found.get("diverged", pd.Series(dtype=int)).sum())
    peaks = [peak_text(r) for _, r in found.iterrows() if math.isfinite(r["peak_tf"])]
    return (f"{', '.join(parts)} columns (yellow cell {rank})"
            + (f"; peak TF {peaks[0]}" if len(peaks) == 1 else f"; {len(peaks)} fitted peaks" if peaks else "")
            + (f"; {left_out} diverged runs left out" if left_out else "")
            + (f"; provisional: {missing} runs missing" if missing else ""))
