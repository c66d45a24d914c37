"""Verdicts in numbers and words, computed from a notebook's own results (DataFrames). No training here.

Every function returns numbers or one short line of text, so that a "What we found" section states no number
typed by hand.

* **One way to judge a difference** measured on real images: ``difference`` (a − b over seeds, paired by seed where
  the runs share initialisation and data order, else Welch, with its 95 % t interval; ``scipy.stats``),
  ``bootstrap_difference`` (a statistic that is not a mean), ``judge_difference`` (the ">" / "<" / "≈" / "≳" rules:
  the verdict follows from the interval, an "≈" needs a stated margin), ``interval_fields`` (``ci``, ``resolution``,
  ``estimate``, ``paper_effect``, ``margin`` of a claim in ``claims.json``), ``resolution_words``.
* Swept paper grids (Yun et al.): ``findings`` (per column: verdict of "best or second" or "best" by the rule of
  ``rules.RULES``, from the yellow cell's intervals against every other cell on the column's pooled error,
  ``pooled_contrasts``; the fitted optimum's tuning factor with a delta-method interval, ``fitted_optimum``, judged
  within one grid step of the yellow one; our ranking against the paper's), ``angular_findings`` (Δθ
  beside Eq. 27), ``say_findings``, ``claim_rows`` (the rows of the README results table), ``verdict_line``.
* Deterministic claims (identities, toys) keep tolerance verdicts: ``judge``, ``identity_verdict``; paired runs
  (Li & Arora's exact vs schedule-only constructions: ``paired_gaps``), detection rates (AdamP Table B.1:
  ``perfect_at``), ``lead``, ``binomial_sd``, ``train_minutes``.
* What the data is called wherever a number appears: ``label_of``, ``dataset_label`` (a stand-in says so).

::

    d = difference(acc["cosine"], acc["step"])               # per-seed values of two settings, paired by seed
    judge_difference(d, ">")                                   # ("holds", "") when the interval lies above 0
    identity_verdict({"Thm 2.9": 3e-15, ...}, tol=1e-9)       # "holds: max rel. error 3e-15 (k identities)"
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from ..store import MISSING


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


# ------------------------------------------------------------------------------------------- the verdict words
#: the words every published verdict starts with: the claim *holds*, does *not* (the opposite, beyond the noise, in
#: the regime the claim speaks of), the runs cannot tell (*undecided*: the interval within the noise, in that
#: regime), or the regime the claim speaks of was not reached (*not judged*: the gate failed; the reason says which
#: way the interval points). The glossary (``docs/glossary.md``) defines each once.
VERDICTS = ("holds", "no", "undecided", "not judged")
#: the word of a claim whose gate failed (``rules.NOT_JUDGED``)
NOT_JUDGED = "not judged"
#: seeds a claim measured on real images needs before it can be decided either way
MIN_SEEDS = 3


def judge(holds: bool | None, beyond_noise: bool, seeds: int = MIN_SEEDS, real_data: bool = False,
          settled: bool | None = True, tolerant: bool = False) -> tuple[str, str]:
    """The verdict word of :data:`VERDICTS` and its reason ("" for a plain *holds* / *no*), for a claim judged by a
    tolerance rather than an interval: a deterministic identity or toy, a count. A difference measured on real images
    is judged by :func:`judge_difference` on its interval instead.

    ``holds``: whether the measurement points the way the claim says (None: nothing finished, *undecided*);
    ``beyond_noise``: whether it does so by more than its noise (the seed spread, or the binomial noise of one
    evaluation); ``seeds``: the finished seeds it rests on; ``real_data``: measured on real images, where fewer than
    :data:`MIN_SEEDS` seeds leave it *undecided* either way (a deterministic identity or toy passes False);
    ``settled``: whether the regime the claim speaks of was reached (False: *not judged* whichever way the
    measurement points -- a gate applies to both outcomes; None: not measured); ``tolerant``: the claim already
    allows for a near miss ("best or second"), so pointing the claimed way is enough to hold, within the noise or
    not."""
    if holds is None:
        return "undecided", "no finished run"
    if real_data and seeds < MIN_SEEDS:
        return "undecided", f"{seeds} seed{'s' if seeds != 1 else ''} on real images, {MIN_SEEDS} needed"
    if settled is False:  # the gate applies to every outcome: the regime the claim speaks of was not reached
        lean = ("points the claimed way" if holds and (beyond_noise or tolerant) else
                "points against the claim" if beyond_noise else
                f"is within the noise, leaning {'the claimed way' if holds else 'against the claim'}")
        return NOT_JUDGED, f"before the angular update settled; the measurement {lean}"
    if holds:
        return ("holds", "") if beyond_noise or tolerant else ("undecided", "the claimed way, within the noise")
    if not beyond_noise:
        return "undecided", "against the claim, within the noise"
    return "no", ""


def word_counts(words, mark: str = "", none: str = "no claim") -> str:
    """"holds 2, undecided 4" in the order of :data:`VERDICTS` (words that do not occur left out; ``none`` when no
    word occurs); ``mark`` wraps each word (``"*"``: Markdown italics)."""
    words = list(words)
    return ", ".join(f"{mark}{w}{mark} {words.count(w)}" for w in VERDICTS if w in words) or none


def verdict_words(word: str, reason: str = "", detail: str = "") -> str:
    """A verdict as published: "holds: +1.20 (noise 0.90)", "undecided (1 seed on real images, 3 needed): …",
    "not judged (before the angular update settled; the interval points the claimed way): …"."""
    if word not in VERDICTS:
        raise ValueError(f"verdict: {word!r} is not one of {VERDICTS}")
    head = word + (f" ({reason})" if reason else "")
    return head + (f": {detail}" if detail else "")


# ------------------------------------------------------------------------------------------- intervals
#: the confidence level of every published interval
LEVEL = 0.95
#: what each relation claims: a > b, a < b, a ≈ b (within a margin m), a ≳ b (a is not worse than b by more than m:
#: non-inferiority)
RELATIONS = (">", "<", "≈", "≳")


@dataclass(frozen=True)
class Difference:
    """The difference a − b between two settings over seeds, with its :data:`LEVEL` interval.

    ``diff``: the point estimate (paired: the mean of the per-seed differences; unpaired: the difference of the
    means); ``lo``, ``hi``: the interval (NaN where it cannot be computed: fewer than two seeds); ``n``: the seed pairs
    (paired) or the fewer seeds of the two (unpaired); ``method``: how the interval was made ("paired t",
    "Welch t", "bootstrap", …)."""

    diff: float
    lo: float
    hi: float
    n: int
    paired: bool
    method: str
    level: float = 0.95
    #: the residual degrees of freedom behind the interval (NaN where it has none)
    df: float = math.nan
    #: the standard deviation of the per-seed differences (paired) or the standard error's scale (pooled: the
    #: residual sd × √2), from which :func:`seeds_needed` sizes a decisive run
    sd: float = math.nan

    @property
    def resolution(self) -> float:
        """The interval's half-width: the smallest difference these runs can tell from zero (NaN without one)."""
        return (self.hi - self.lo) / 2 if math.isfinite(self.lo) and math.isfinite(self.hi) else math.nan

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.lo) and math.isfinite(self.hi)

    def text(self, spec: str = "+.2f") -> str:
        """"+1.20 [−0.30, +2.70]" (the point estimate alone without an interval)."""
        if not math.isfinite(self.diff):
            return "n/a"
        if not self.has_interval:
            return format(self.diff, spec)
        return f"{self.diff:{spec}} [{self.lo:{spec}}, {self.hi:{spec}}]"

    def log(self) -> "Difference":
        """The same interval on the log scale (a ratio's estimate and bounds as logs; ``sd`` of a ratio from
        :func:`ratio_interval` is already on that scale), for :func:`decide_text`; no interval: a NaN one."""
        if not (self.has_interval and self.diff > 0 and self.lo > 0):
            return Difference(math.nan, math.nan, math.nan, self.n, self.paired, self.method, self.level)
        return Difference(math.log(self.diff), math.log(self.lo), math.log(self.hi), self.n, self.paired, self.method,
                          self.level, self.df, self.sd)

    def how(self) -> str:
        """"paired by seed, 5 seeds" / "unpaired (Welch), 3 and 3 seeds" in words."""
        if not self.has_interval:
            return f"{self.n} seed{'s' if self.n != 1 else ''}: no interval"
        return f"{self.method}, {self.n} seed{'s' if self.n != 1 else ''}"


NO_DIFFERENCE = Difference(math.nan, math.nan, math.nan, 0, True, "none")


def _per_seed(values) -> pd.Series:
    """A Series of finite values indexed by seed (a Mapping or Series ``{seed: value}``; NaN entries dropped)."""
    s = pd.Series(values, dtype=float) if not isinstance(values, pd.Series) else values.astype(float)
    return s[np.isfinite(s.to_numpy())]


def difference(a, b, paired: bool = True, level: float = LEVEL) -> Difference:
    """a − b with its ``level`` interval, from per-seed values of two settings (``{seed: value}`` or Series indexed
    by seed).

    ``paired=True`` (the runs of the two settings share each seed's initialisation and data order, as across the
    hyperparameters of one grid): the t interval of the per-seed differences over the seeds both have, n − 1 degrees
    of freedom (``scipy.stats.ttest_rel``). ``paired=False``: Welch's interval of the difference of the means
    (``scipy.stats.ttest_ind(equal_var=False)``). Fewer than two seeds (pairs) give the point estimate and a NaN
    interval; identical differences at every seed give a zero-width interval."""
    from scipy import stats

    a, b = _per_seed(a), _per_seed(b)
    if paired:
        common = sorted(set(a.index) & set(b.index))
        if not common:
            return NO_DIFFERENCE
        x, y = a.loc[common].to_numpy(), b.loc[common].to_numpy()
        d = x - y
        n, mean = len(d), float(d.mean())
        if n < 2:
            return Difference(mean, math.nan, math.nan, n, True, "paired t", level)
        sd = float(d.std(ddof=1))
        if np.allclose(d, d[0], rtol=0, atol=1e-12):
            return Difference(mean, mean, mean, n, True, "paired t", level, n - 1, 0.0)
        ci = stats.ttest_rel(x, y).confidence_interval(level)
        return Difference(mean, float(ci.low), float(ci.high), n, True, "paired t", level, n - 1, sd)
    if not len(a) or not len(b):
        return Difference(math.nan, math.nan, math.nan, 0, False, "Welch t", level)
    mean = float(a.mean() - b.mean())
    n = min(len(a), len(b))
    if n < 2:
        return Difference(mean, math.nan, math.nan, n, False, "Welch t", level)
    sd = float(math.sqrt(a.var() + b.var()))  # the sd of one seed's a − b, unpaired
    if a.std() == 0 and b.std() == 0:
        return Difference(mean, mean, mean, n, False, "Welch t", level, math.nan, 0.0)
    res = stats.ttest_ind(a.to_numpy(), b.to_numpy(), equal_var=False)
    ci = res.confidence_interval(level)
    return Difference(mean, float(ci.low), float(ci.high), n, False, "Welch t", level, float(res.df), sd)


def bootstrap_difference(statistic, samples: pd.DataFrame, level: float = LEVEL, n_resamples: int = 2000,
                         rng: int = 0) -> Difference:
    """The interval of a statistic that is not a mean, by a percentile bootstrap over seeds
    (``scipy.stats.bootstrap``): ``samples`` has one row per seed (the columns a setting's values at that seed),
    ``statistic(frame)`` maps a resample of those rows (seeds drawn with replacement; a seed's values stay together)
    to one number. Fewer than two seeds: the point estimate and a NaN interval."""
    from scipy import stats

    samples = samples.dropna()
    point = float(statistic(samples)) if len(samples) else math.nan
    if len(samples) < 2:
        return Difference(point, math.nan, math.nan, len(samples), True, "bootstrap over seeds")
    idx = np.arange(len(samples))
    res = stats.bootstrap((idx,), lambda i: float(statistic(samples.iloc[np.asarray(i, dtype=int)])),
                          vectorized=False, confidence_level=level, n_resamples=n_resamples, method="percentile",
                          rng=np.random.default_rng(rng))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Difference(point, lo, hi, len(samples), True, "bootstrap over seeds")


def ratio_interval(ratios, level: float = 0.90) -> Difference:
    """The interval of a ratio measured once per seed (e.g. max/min of Δθ across a notebook's columns, within each
    seed): the t interval of its logarithm over seeds at ``level``, exponentiated -- a seed-level t, not a bootstrap
    (over 3 seeds a bootstrap has 10 distinct resamples: their range is no interval). ``diff`` is the geometric mean
    of the per-seed ratios; ``sd`` the sd of their logs (:func:`decide_text` sizes runs on that scale); NaN interval
    with fewer than two seeds."""
    from scipy import stats

    r = _per_seed(ratios)
    r = r[r > 0]
    n = len(r)
    if not n:
        return Difference(math.nan, math.nan, math.nan, 0, True, "t on log ratio over seeds", level)
    logs = np.log(r.to_numpy())
    mean = float(logs.mean())
    if n < 2:
        return Difference(math.exp(mean), math.nan, math.nan, n, True, "t on log ratio over seeds", level)
    sd = float(logs.std(ddof=1))
    q = stats.t.ppf(1 - (1 - level) / 2, n - 1)
    half = q * sd / math.sqrt(n)
    return Difference(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, True,
                      "t on log ratio over seeds", level, n - 1, sd)


def judge_difference(d: Difference, relation: str, margin: float | None = None, settled: bool | None = True,
                     real_data: bool = True, unsettled: str = "before the regime settled",
                     rule: "rules.Rule | None" = None) -> tuple[str, str]:
    """The verdict word of :data:`VERDICTS` and its reason for the claim "a <relation> b" from d = a − b and its
    interval (:func:`difference`), by the rule of ``repro_lib.results.rules`` (``rule``, or the plain rule of
    ``relation`` with ``margin``): ">" / "<" the interval excludes 0 on the claimed side (*no*: on the other
    side); "≈" the 90 % interval inside [−m, m] (TOST; ``d`` must be computed at ``level=0.90``); "≳" the interval
    above −m. ``settled`` False is the gate: *not judged* whichever way the interval points ("<unsettled>; the
    interval points …"). Real images with fewer than :data:`MIN_SEEDS` seeds, or no interval: *undecided*."""
    from . import rules

    if relation not in RELATIONS:
        raise ValueError(f"relation: {relation!r} is not one of {RELATIONS}")
    if relation in ("≈", "≳") and not (margin is not None and math.isfinite(margin) and margin > 0):
        raise ValueError(f"margin: an {relation!r} claim needs a margin > 0, got {margin!r}")
    r = rule or rules.Rule(relation, d.method, margin=margin)
    if r.relation != relation:
        raise ValueError(f"rule: {r.relation!r} judges a different relation than {relation!r}")
    if margin is not None and r.margin != margin:
        r = r.with_margin(margin)
    if math.isfinite(d.diff) and d.has_interval and abs(d.level - r.level) > 1e-9:
        raise ValueError(f"level: an {relation!r} claim reads the {100 * r.level:.0f} % interval, this difference "
                         f"has a {100 * d.level:.0f} % one (compute it with level={r.level:g})")
    if not math.isfinite(d.diff):
        return "undecided", "no finished run"
    if real_data and d.n < MIN_SEEDS:
        return "undecided", f"{d.n} seed{'s' if d.n != 1 else ''} on real images, {MIN_SEEDS} needed"
    if not d.has_interval:
        return "undecided", "one seed: no interval"
    word, reason = rules.decide(r, ci=(d.lo, d.hi), gate_ok=settled, real_data=real_data, gate_words=unsettled)
    if word == "undecided" and reason == "the interval holds 0":
        lean = (1 if relation == ">" else -1) * d.diff
        reason = ("within the noise, leaning the claimed way" if lean > 0 else
                  "within the noise, leaning against the claim" if lean < 0 else "within the noise")
    return word, reason


def finite_or_none(v) -> float | None:
    """``v`` as a float for ``claims.json``, None where it is absent or not finite (JSON has no NaN)."""
    return float(v) if v is not None and math.isfinite(v) else None


def interval_fields(d: Difference, paper_effect: float | None = None, margin: float | None = None,
                    rule=None, gate_ok: bool | None = None, to_decide: str = "", scale: str = "") -> dict:
    """The fields every real-data claim of ``claims.json`` carries: ``ci`` ([lo, hi], the interval of the tested
    quantity in the claim's units; [None, None] without one), ``level`` (its confidence level), ``resolution``
    (its half-width), ``estimate`` (the point estimate), and where given ``paper_effect`` (the paper's own
    difference), ``margin`` (an "≈"/"≳" claim's margin), ``rule`` (``rules.Rule``: written as its object, margin
    included), ``gate_ok`` (whether the regime the rule's gate names was reached; None: not measured),
    ``to_decide`` (what would decide an *undecided* claim, :func:`decide_text`) and ``scale`` ("ratio": ``estimate``
    and ``ci`` are ratios)."""
    fin = finite_or_none
    out = {"ci": [fin(d.lo), fin(d.hi)], "resolution": fin(d.resolution), "estimate": fin(d.diff),
           "level": d.level}
    if paper_effect is not None:
        out["paper_effect"] = fin(paper_effect)
    if margin is not None:
        out["margin"] = fin(margin)
    if rule is not None:
        if margin is not None and rule.margin != margin:
            rule = rule.with_margin(margin)
        out["rule"] = rule.fields()
        out["gate_ok"] = gate_ok
    if to_decide:
        out["to_decide"] = to_decide
    if scale:
        out["scale"] = scale
    return out


#: the most seeds :func:`seeds_needed` counts before :func:`decide_text` says no seed budget decides the claim
MAX_SEEDS = 200


def seeds_needed(sd: float, half_width: float, level: float = LEVEL, blocks: int = 1,
                 max_seeds: int = MAX_SEEDS) -> int | None:
    """The fewest seeds n at which an interval of the given ``level`` over seeds, t(n)·sd/√n, is no wider than
    ``half_width`` (the observed per-seed ``sd`` taken as the truth): the paired t (``blocks`` 1, n − 1 degrees of
    freedom) or a pooled contrast over ``blocks`` + 1 cells ((cells − 1)(n − 1) degrees of freedom). None when
    no n up to ``max_seeds`` reaches it (or ``half_width`` ≤ 0)."""
    from scipy import stats

    if not (math.isfinite(sd) and math.isfinite(half_width)) or half_width <= 0:
        return None
    if sd == 0:
        return MIN_SEEDS
    q = 1 - (1 - level) / 2
    for n in range(2, max_seeds + 1):
        if stats.t.ppf(q, blocks * (n - 1)) * sd / math.sqrt(n) <= half_width:
            return max(n, MIN_SEEDS)
    return None


def target_half_width(estimate: float, relation: str, margin: float | None = None) -> float:
    """The half-width at which an interval centred on ``estimate`` would decide a claim of ``relation``
    (``rules.RELATIONS``) either way: |estimate| for ">", "<" and the grid kinds (the interval then leaves 0), the
    distance of the estimate to the margin for "≈" (m − |d̄|, or |d̄| − m beyond it) and "≳" (|d̄ + m|), and to the
    threshold for a ratio's "≤" / "band" -- both passed on the log scale (log ratio, log threshold), where an
    interval over seeds is symmetric."""
    if not math.isfinite(estimate):
        return math.nan
    if relation == "≈":
        return abs(margin - abs(estimate))
    if relation == "≳":
        return abs(estimate + margin)
    if relation == "≤":
        return abs(estimate - margin)
    if relation == "band":
        return min(abs(estimate - margin), abs(estimate + margin))
    return abs(estimate)


def decide_text(d: Difference, relation: str, margin: float | None = None, minutes_per_seed: float | None = None,
                paper_effect: float | None = None, blocks: int = 1, gate_fix: str = "", gated: bool = False,
                units: str = "points") -> str:
    """What would decide an *undecided* claim, in one sentence (``to_decide`` of ``claims.json``): from the observed
    per-seed spread (``d.sd``), how many seeds would bring the interval inside what decides the claim
    (:func:`target_half_width`), and at ``minutes_per_seed`` (cpu minutes of one more seed of the claim's runs) how
    long that takes; where no seed budget up to :data:`MAX_SEEDS` can, it says so and names what would (the ``gpu``
    profile: more data and the paper's schedules, a smaller spread). ``gated``: the claim is undecided by its gate,
    and ``gate_fix`` says what would reach the regime. ``paper_effect``: the seeds that would resolve the paper's own
    effect too."""
    if gated:
        return f"the regime the claim speaks of: {gate_fix}" if gate_fix else "runs that reach the claim's regime"
    if not math.isfinite(d.sd) or d.n < 2:
        return f"at least {MIN_SEEDS} seeds with an interval" if d.n < MIN_SEEDS else "an interval"
    target = target_half_width(d.diff, relation, margin)
    est = f"×{math.exp(d.diff):.2f}" if "log" in units else f"{d.diff:+.2f}"  # a log ratio reads as its ratio
    n = seeds_needed(d.sd, target, level=d.level, blocks=blocks)
    if n is None:
        text = (f"no seed budget up to {MAX_SEEDS} seeds at the observed spread (sd {d.sd:.2f} {units} per seed, "
                f"estimate {est}) can; a longer or larger run (the `gpu` profile: more data, the paper's "
                f"schedule) with a smaller spread would")
    else:
        n = max(n, d.n + 1)  # undecided with these seeds: at least one more
        more = n - d.n
        cost = (f", about {more * minutes_per_seed:,.0f} cpu minutes at the measured {minutes_per_seed:.1f} per seed"
                if minutes_per_seed is not None and math.isfinite(minutes_per_seed) and more else "")
        text = (f"about {n} seeds ({more} more{cost}) would, if the spread (sd {d.sd:.2f} {units} per seed) and the "
                f"estimate ({est}) held")
    if paper_effect is not None and math.isfinite(paper_effect) and paper_effect != 0:
        m = seeds_needed(d.sd, abs(paper_effect), level=d.level, blocks=blocks)
        text += (f"; resolving the paper's own {paper_effect:+.2f} would take "
                 + (f"about {m} seeds" if m else f"more than {MAX_SEEDS} seeds"))
    return text


def resolution_words(d: Difference, paper_effect: float | None, units: str = "points", spec: str = "+.2f",
                     what: str = "these runs") -> str:
    """A sentence on whether ``d``'s interval can resolve the paper's own effect: "the paper's +0.11 is below what
    these runs can resolve (±1.70 points)" or "… is within what these runs resolve (±0.40 points)"; "" without an
    interval or a paper effect."""
    if paper_effect is None or not math.isfinite(paper_effect) or not d.has_interval:
        return ""
    below = abs(paper_effect) < d.resolution
    return (f"the paper's {paper_effect:{spec}} is {'below' if below else 'within'} what {what} can resolve "
            f"(±{d.resolution:.2f} {units})")


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


#: a quadratic whose lack of fit to the cell means has a p-value below this is not reported as a peak
FIT_P_MIN = 0.05


def pooled_contrasts(per_seed: pd.DataFrame, reference, level: float = LEVEL) -> dict:
    """Each cell of a grid column against ``reference`` (its yellow cell), reference − cell, with an interval from
    the **pooled** within-column error: the least-squares fit of value ~ C(cell) + C(seed) (a randomized block
    design: the cells of one seed share its initialisation and data order) over every finite (seed, cell) value of
    ``per_seed`` (one row per seed, one column per cell), residual degrees of freedom n − rank (8 for 5 cells × 3
    seeds, where a paired t per contrast has 2), the t quantile at ``level``. Assumes one residual variance across
    the column's cells. Returns ``{cell: Difference}`` (method "pooled t", ``df``, ``sd`` = residual sd × √2);
    NaN intervals without residual degrees of freedom; {} without the reference cell."""
    from scipy import stats

    if reference not in per_seed.columns:
        return {}
    long = per_seed.stack().dropna() if len(per_seed) else pd.Series(dtype=float)
    if not len(long):
        return {}
    seeds_idx = long.index.get_level_values(0)
    cells_idx = long.index.get_level_values(1)
    cells = [reference] + [c for c in per_seed.columns if c != reference and c in set(cells_idx)]
    seeds = sorted(set(seeds_idx))
    y = long.to_numpy(dtype=float)
    X = np.zeros((len(y), len(cells) + len(seeds) - 1))
    for i, (s_, c) in enumerate(zip(seeds_idx, cells_idx)):
        X[i, cells.index(c)] = 1.0                      # cell means (no intercept)
        k = seeds.index(s_)
        if k:
            X[i, len(cells) + k - 1] = 1.0              # seed effects relative to the first seed
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    rank = np.linalg.matrix_rank(X)
    df = len(y) - rank
    resid = y - X @ beta
    sigma2 = float(resid @ resid / df) if df > 0 else math.nan
    cov = sigma2 * np.linalg.pinv(X.T @ X)
    q = stats.t.ppf(1 - (1 - level) / 2, df) if df > 0 else math.nan
    n_seeds = per_seed[reference].notna().sum()
    out = {}
    for j, c in enumerate(cells[1:], start=1):
        vec = np.zeros(X.shape[1])
        vec[0], vec[j] = 1.0, -1.0
        est = float(vec @ beta)
        se = float(math.sqrt(max(vec @ cov @ vec, 0.0))) if df > 0 else math.nan
        n = int(min(n_seeds, per_seed[c].notna().sum()))
        out[c] = Difference(est, est - q * se, est + q * se, n, True, "pooled t", level, float(df),
                            math.sqrt(2 * sigma2) if df > 0 else math.nan)
    return out


def fitted_optimum(tf, acc, seeds, yellow_tf: float, level: float = 0.90) -> dict:
    """The tuning factor that maximises accuracy by a least-squares fit of accuracy ~ C(seed) + x + x², x =
    log₂(TF / ``yellow_tf``), over every run (one entry per run; the seed a block as in :func:`pooled_contrasts`),
    with a delta-method t interval at ``level`` on the fit's residual error (Var(−b/2c) from the coefficients'
    covariance; residual df = runs − seeds − 2).

    Returns ``ratio`` (optimum / yellow TF: 2^x*), ``lo``, ``hi`` (its interval, NaN without one), ``peak`` (the
    optimum's TF), ``df``, ``fit_p`` (lack of fit: the quadratic against one mean per cell, same blocks, F test;
    below :data:`FIT_P_MIN` the parabola misses the cells by more than the noise and no optimum is reported),
    ``inside`` (the optimum lies within the measured range) and ``reason`` (why there is no optimum: "", "fewer
    than 3 tuning factors", "no interior maximum", "outside the measured range", "the quadratic misses the cells")."""
    from scipy import stats

    x = np.log2(np.asarray(tf, dtype=float) / yellow_tf)
    y = np.asarray(acc, dtype=float)
    sd = np.asarray(seeds) if seeds is not None else np.zeros(len(x), dtype=int)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y, sd = x[ok], y[ok], sd[ok]
    out = {"ratio": math.nan, "lo": math.nan, "hi": math.nan, "peak": math.nan, "df": math.nan, "fit_p": math.nan,
           "inside": False, "reason": ""}
    levels = np.unique(x)
    if len(levels) < 3:
        return {**out, "reason": "fewer than 3 tuning factors"}
    blocks = sorted(set(sd.tolist()))
    B = np.array([[1.0 if s_ == b else 0.0 for b in blocks] for s_ in sd])
    Xq = np.column_stack([B, x, x ** 2])
    beta, *_ = np.linalg.lstsq(Xq, y, rcond=None)
    df = len(y) - np.linalg.matrix_rank(Xq)
    rss_q = float(((y - Xq @ beta) ** 2).sum())
    C = np.column_stack([B, np.array([[1.0 if v == lv else 0.0 for lv in levels[1:]] for v in x])])
    df_full = len(y) - np.linalg.matrix_rank(C)
    rss_full = float(((y - C @ np.linalg.lstsq(C, y, rcond=None)[0]) ** 2).sum())
    if df_full > 0 and df > df_full:
        if rss_full > 0:
            F = ((rss_q - rss_full) / (df - df_full)) / (rss_full / df_full)
            out["fit_p"] = float(stats.f.sf(F, df - df_full, df_full))
        else:
            out["fit_p"] = 0.0 if rss_q > 1e-12 else 1.0
    out["df"] = float(df)
    b, c = float(beta[-2]), float(beta[-1])
    if math.isfinite(out["fit_p"]) and out["fit_p"] < FIT_P_MIN:
        return {**out, "reason": "the quadratic misses the cells"}
    if c >= 0:
        return {**out, "reason": "no interior maximum"}
    xs = -b / (2 * c)
    if not (x.min() <= xs <= x.max()):
        return {**out, "reason": "outside the measured range"}
    out.update(ratio=2.0 ** xs, peak=yellow_tf * 2.0 ** xs, inside=True)
    if df > 0:
        cov = rss_q / df * np.linalg.pinv(Xq.T @ Xq)[-2:, -2:]
        g = np.array([-1 / (2 * c), b / (2 * c * c)])
        se = float(math.sqrt(max(g @ cov @ g, 0.0)))
        q = stats.t.ppf(1 - (1 - level) / 2, df)
        out.update(lo=2.0 ** (xs - q * se), hi=2.0 ** (xs + q * se), se_log2=se)
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


#: the grid claims :func:`findings` judges: the paper's "the yellow cell is best or second best" (Yun et al. Tables
#: 1-11), and "the yellow value is the best one searched" (Sec. 3.2)
GRID_CLAIMS = ("best or second", "best")


def findings(results: pd.DataFrame, col: str = "n", value: str = "test_acc", yellow_tf: float | None = None,
             group: str = "subtable", real_data: bool | None = None, claim: str = "best or second",
             missing_status: str = MISSING) -> pd.DataFrame:
    """Per column of a swept grid (one row per (``group``, ``col``)), what the paper's claim needs, computed from the
    runs (``sweep.run_sweep`` output with one row per (cell, seed); cells of one grid share each seed's
    initialisation and data order, so differences between cells are paired by seed):

    ``cells``, ``seeds`` (finished runs per cell, least over the cells with any), ``diverged`` (runs of the column
    left out as diverged, collapsed ones included), ``rank`` (best / second / no: the rank of the yellow cell's
    mean among the column's means, the paper's reading), ``yellow_mean`` ± ``yellow_sd`` (over seeds),
    ``best_other`` (the best non-yellow cell's mean) and its ``best_other_tf``, ``margin`` (yellow − best other:
    > 0 means the yellow cell is best) with its 95 % interval on the column's pooled error ``ci_lo``, ``ci_hi``,
    ``resolution`` (the interval's half-width) and ``df`` (:func:`pooled_contrasts`), ``gap_to_second`` (yellow −
    the column's second-best mean), ``gap_to_second_other`` (yellow − the second-best other cell, the contrast that
    decides "best or second" either way) with ``second_lo``, ``second_hi``, ``contrasts`` ({tf: (lo, hi)} of yellow −
    every other cell), ``previous_verdict`` (the word under the rank-only rule this one replaced),
    ``runner_up_margin`` (best − second best of the column), ``spread`` (the larger seed sd of the yellow and
    best-other cells), ``peak_tf`` [``peak_lo``, ``peak_hi``] and ``fit_p`` (:func:`fitted_optimum`: TF at the
    optimum, its 90 % interval), ``peak_vs_yellow`` (optimum / yellow tuning factor, with ``peak_ratio_lo``,
    ``peak_ratio_hi``; ``optimum_verdict``, ``optimum_reason``: within one grid step, ``rules.RULES["grid
    optimum"]``), ``paper_effect`` (the paper's own yellow − best other cell of the column, where the plan carries ``paper_accuracy``), ``missing`` (runs not in
    the store), the regime check of the yellow cells (:func:`regime`: ``settled``, ``regime_drift``,
    ``regime_window``), and the verdict.

    ``claim`` "best or second" (:data:`GRID_CLAIMS`, ``rules.RULES["grid best or second"]``): *holds* when the
    yellow cell is shown above all but one other cell; *no* when two cells are shown above it; else *undecided*
    ("leaning best/second/below second": the rank as a description). ``claim`` "best": shown above every other cell
    / one cell shown above it. Both gated by the regime check, both ways (not settled: *undecided*). ``real_data``
    (default: from the configs) makes a yellow cell run with fewer than :data:`MIN_SEEDS` seeds (``yellow_seeds``: finished or diverged, a diverged seed being a result too)
    *undecided*."""
    if claim not in GRID_CLAIMS:
        raise ValueError(f"claim: {claim!r} is not one of {GRID_CLAIMS}")
    if real_data is None:
        real_data = _real_data(results)
    rows = []
    keys = [k for k in (group, col) if k in results]
    for key, g in results.groupby(keys, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        ok = g[g["status"] == "finished"]
        cells = g.groupby("tuning_factor", sort=True)
        stats = ok.groupby("tuning_factor")[value].agg(["mean", "std", "count"]).reindex(sorted(g.tuning_factor.unique()))
        per_seed = (ok.pivot_table(index="seed", columns="tuning_factor", values=value, aggfunc="mean")
                    if "seed" in ok and len(ok) else pd.DataFrame())
        yellow_rows = g[g["yellow"]] if "yellow" in g else g.iloc[:0]
        ytf = (float(yellow_rows.tuning_factor.iloc[0]) if len(yellow_rows)
               else (yellow_tf if yellow_tf is not None else math.nan))
        row = dict(zip(keys, key))
        held = stats["count"].fillna(0)
        held = held[held > 0]
        row.update(cells=cells.ngroups, seeds=int(held.min()) if len(held) else 0,
                   seeds_max=int(held.max()) if len(held) else 0,
                   diverged=int((g["status"] == "diverged").sum()),
                   missing=int((g["status"] == missing_status).sum()), yellow_tf=ytf,
                   paper_effect=_paper_effect(g))
        means = stats["mean"].dropna()
        d_best = d_second = old_second = NO_DIFFERENCE
        contrasts, second_other_tf = {}, math.nan
        if ytf in means.index and len(means) > 1:
            ranks = means.rank(ascending=False, method="min")
            r = ranks[ytf]
            others = means.drop(index=ytf)
            top2 = means.sort_values(ascending=False)
            ysd = stats.loc[ytf, "std"]
            bo_tf = float(others.idxmax())
            second_tf = float(top2.index[1])  # the column's second-best cell (the yellow one where it is second)
            column = lambda tf: per_seed[tf] if tf in per_seed else pd.Series(dtype=float)  # noqa: E731
            pooled = pooled_contrasts(per_seed, ytf) if len(per_seed) else {}
            contrasts = {float(tf): d for tf, d in pooled.items()}
            d_best = contrasts.get(bo_tf, NO_DIFFERENCE)
            # the cell that decides "best or second" either way: the second-best other cell (the yellow cell is
            # shown above all but one other cell exactly when it is shown above this one; two cells are shown
            # above it exactly when this one is)
            second_other_tf = float(others.sort_values(ascending=False).index[1]) if len(others) > 1 else bo_tf
            d_second = contrasts.get(second_other_tf, NO_DIFFERENCE)
            # the rule this one replaced: the rank alone, or a paired t to the column's second cell
            old_second = difference(column(ytf), column(float(top2.index[1])))
            row.update(rank=rank_key(r), yellow_mean=float(means[ytf]),
                       yellow_sd=float(ysd), best_other=float(others.max()), best_other_tf=bo_tf,
                       margin=float(means[ytf] - others.max()), gap_to_second=float(means[ytf] - top2.iloc[1]),
                       second_tf=second_tf, runner_up_margin=float(top2.iloc[0] - top2.iloc[1]),
                       spread=_larger_sd(ysd, stats.loc[bo_tf, "std"]))
        else:
            row.update(rank="n/a", yellow_mean=math.nan, yellow_sd=math.nan, best_other=math.nan,
                       best_other_tf=math.nan, margin=math.nan, gap_to_second=math.nan, second_tf=math.nan,
                       runner_up_margin=math.nan, spread=math.nan)
        row.update(ci_lo=d_best.lo, ci_hi=d_best.hi, resolution=d_best.resolution, pairs=d_best.n,
                   second_lo=d_second.lo, second_hi=d_second.hi, df=d_best.df, pooled_sd=d_best.sd,
                   second_other_tf=second_other_tf if d_second is not NO_DIFFERENCE else math.nan,
                   gap_to_second_other=d_second.diff,
                   contrasts={tf: (d.lo, d.hi) for tf, d in contrasts.items()} if d_best is not NO_DIFFERENCE else {},
                   contrast_est={tf: d.diff for tf, d in contrasts.items()} if d_best is not NO_DIFFERENCE else {})
        row.update(_pattern(g, means))
        names = cell_names(g)
        row.update(second_other_name=names.get(row.get("second_other_tf", math.nan), ""))
        row.update(best_other_name=names.get(row["best_other_tf"], ""), best_name=names.get(row["best_tf"], ""),
                   yellow_name=names.get(ytf, ""))
        reg = regime(yellow_rows["history"]) if "history" in yellow_rows else regime([])
        row.update(settled=reg["settled"], regime_drift=reg["drift"], regime_window=reg["window"])
        row["yellow_seeds"] = (int(yellow_rows["status"].isin(["finished", "diverged"]).sum())
                               if "status" in yellow_rows else len(yellow_rows))
        row["claim"] = claim
        word, reason = _grid_verdict(row, contrasts, claim, real_data, reg["settled"])
        row.update(verdict=word, reason=reason,
                   previous_verdict=_previous_grid_word(row, d_best, old_second, claim, real_data, reg["settled"]))
        pk = (fitted_optimum(ok.tuning_factor, ok[value], ok.seed if "seed" in ok else None, ytf)
              if ytf and math.isfinite(ytf) else fitted_optimum([], [], [], 1.0))
        row.update(peak_tf=pk["peak"], peak_lo=pk["lo"] * ytf if math.isfinite(pk["lo"]) else math.nan,
                   peak_hi=pk["hi"] * ytf if math.isfinite(pk["hi"]) else math.nan, fit_p=pk["fit_p"],
                   peak_vs_yellow=pk["ratio"], peak_ratio_lo=pk["lo"], peak_ratio_hi=pk["hi"], peak_df=pk["df"],
                   peak_se_log2=pk.get("se_log2", math.nan), peak_reason=pk["reason"])
        ow, oreason = _optimum_verdict(row, real_data, reg["settled"])
        row.update(optimum_verdict=ow, optimum_reason=oreason)
        rows.append(row)
    return pd.DataFrame(rows)


def _grid_verdict(row: dict, contrasts: dict, claim: str, real_data: bool,
                  settled: bool | None) -> tuple[str, str]:
    """(word, reason) of one :func:`findings` column by the rule ``rules.RULES["grid " + claim]``: the yellow cell
    against every other cell of the column, each a pooled-error 95 % interval (:func:`pooled_contrasts`); gated both
    ways by the regime check."""
    from . import rules

    if row["rank"] == "n/a":
        if row["missing"]:
            return "undecided", f"{row['missing']} runs missing"
        if row["diverged"]:
            return "undecided", "the yellow cell's runs all diverged"
        return "undecided", "no finished run"
    if real_data and row["yellow_seeds"] < MIN_SEEDS:
        s = row["yellow_seeds"]
        return "undecided", f"{s} seed{'s' if s != 1 else ''} on real images, {MIN_SEEDS} needed"
    cs = [(d.lo, d.hi) for d in contrasts.values() if d.has_interval]
    if not cs:
        return "undecided", "one seed: no interval"
    word, reason = rules.decide(rules.rule(f"grid {claim}"), contrasts=cs, gate_ok=settled, real_data=real_data,
                                gate_words="before the angular update settled")
    if word in ("undecided", NOT_JUDGED) and "shown above" in reason:
        reason += f"; leaning {RANK_SHORT[row['rank']]}"
    return word, reason


def _previous_grid_word(row: dict, d_best: Difference, d_second: Difference, claim: str, real_data: bool,
                        settled: bool | None) -> str:
    """The verdict word the rule before ``rules.RULES["grid …"]`` gave (for the changelog and the notebook's note on
    a rule changed after the data): "best or second" held on the rank alone; below second was *no* when the paired
    t interval to the column's second cell lay below 0 in a settled regime; "best": the paired t of yellow − best
    other cell."""
    if row["rank"] == "n/a" or (real_data and row["yellow_seeds"] < MIN_SEEDS):
        return "undecided"
    if claim == "best":
        d = d_best
        if not d.has_interval:
            return "undecided"
        return "holds" if d.lo > 0 else ("no" if d.hi < 0 and settled is not False else "undecided")
    if row["rank"] in ("best", "second"):
        return "holds"
    if not d_second.has_interval:
        return "undecided"
    return "no" if d_second.hi < 0 and settled is not False else "undecided"


def _optimum_verdict(row: dict, real_data: bool, settled: bool | None) -> tuple[str, str]:
    """(word, reason) of the invariance a grid column exists to show: the fitted optimum's tuning factor
    (:func:`fitted_optimum`) within one grid step of the yellow one, by ``rules.RULES["grid optimum"]`` ("band")."""
    from . import rules

    if row["rank"] == "n/a":
        return "undecided", "no finished run"
    if real_data and row["yellow_seeds"] < MIN_SEEDS:
        s = row["yellow_seeds"]
        return "undecided", f"{s} seed{'s' if s != 1 else ''} on real images, {MIN_SEEDS} needed"
    if not math.isfinite(row["peak_vs_yellow"]):
        return "undecided", f"no fitted optimum: {row['peak_reason'] or 'no fit'}"
    if not math.isfinite(row["peak_ratio_lo"]):
        return "undecided", "no residual error: no interval"
    return rules.decide(rules.rule("grid optimum"), ci=(row["peak_ratio_lo"], row["peak_ratio_hi"]), gate_ok=settled,
                        real_data=real_data, gate_words="before the angular update settled")


#: how a grid cell is named by the field that varies within its column
CELL_FIELDS = (("batch_size", "B", ",g"), ("lr", "η", ".3g"), ("weight_decay", "λ", ".3g"))


def cell_names(column: pd.DataFrame) -> dict:
    """``{tuning factor: "η = 0.8"}`` for the cells of one column of a swept grid, each named by the fields that vary
    within the column (B, η, λ; several where several vary), so that a sentence names a cell by its row rather than
    only by its tuning factor; {} without those columns."""
    fields = [(k, sym, spec) for k, sym, spec in CELL_FIELDS if k in column and column[k].nunique() > 1]
    if not fields or "tuning_factor" not in column:
        return {}
    first = column.drop_duplicates("tuning_factor")
    return {float(tf): ", ".join(f"{sym} = {format(float(r[k]), spec)}" for k, sym, spec in fields)
            for tf, (_, r) in zip(first.tuning_factor, first.iterrows())}


def _pattern(column: pd.DataFrame, means: pd.Series) -> dict:
    """Our ranking of one column's cells against the paper's, over the cells we ran (``means``: our mean per
    tuning factor): ``best_tf`` / ``paper_best_tf`` (the best cell's tuning factor, ours and the paper's),
    ``second_tf`` of ours is in the findings row already, ``paper_second_tf``, and ``rank_corr`` (Spearman's ρ of
    the two rankings, ``scipy.stats.spearmanr``; NaN with fewer than 3 cells or without the paper's accuracies)."""
    from scipy import stats

    out = {"best_tf": float(means.idxmax()) if len(means) else math.nan, "paper_best_tf": math.nan,
           "paper_second_tf": math.nan, "rank_corr": math.nan}
    if "paper_accuracy" not in column:
        return out
    paper = pd.to_numeric(column.groupby("tuning_factor")["paper_accuracy"].first(), errors="coerce")
    paper = paper.reindex(means.index).dropna()
    if len(paper):
        top = paper.sort_values(ascending=False)
        out["paper_best_tf"] = float(top.index[0])
        out["paper_second_tf"] = float(top.index[1]) if len(top) > 1 else math.nan
    ours = means.reindex(paper.index).to_numpy()
    if len(paper) >= 3 and np.ptp(ours) > 0 and np.ptp(paper.to_numpy()) > 0:  # a constant ranking has no ρ
        rho = stats.spearmanr(ours, paper.to_numpy()).statistic
        out["rank_corr"] = float(rho) if np.isfinite(rho) else math.nan
    return out


def pattern_text(r) -> str:
    """Our ranking of a column beside the paper's, in words, from a :func:`findings` row: "the same best cell as
    the paper (tuning factor 0.078) and the same second; rank correlation over the 5 cells ρ = 0.90" ("" without the
    paper's accuracies)."""
    if not math.isfinite(r.get("paper_best_tf", math.nan)):
        return ""
    same_best = math.isclose(r["best_tf"], r["paper_best_tf"], rel_tol=1e-6)
    ours_second = r["second_tf"]
    same_second = (math.isfinite(r.get("paper_second_tf", math.nan)) and math.isfinite(ours_second)
                   and math.isclose(ours_second, r["paper_second_tf"], rel_tol=1e-6))
    text = ((f"the same best cell as the paper ({_cell(r, 'best')})" if same_best else
             f"our best cell is {_cell(r, 'best')}, the paper's at tuning factor {r['paper_best_tf']:.3g}")
            + (", and the same second" if same_best and same_second else ", the same second" if same_second else ""))
    if math.isfinite(r.get("rank_corr", math.nan)):
        text += f"; rank correlation with the paper's cells ρ = {r['rank_corr']:.2f} over the {int(r['cells'])} cells"
    return text


def _paper_effect(column: pd.DataFrame) -> float:
    """The paper's own yellow − best other cell of one column of a swept grid (its runs; the cells our grid runs),
    NaN without the paper's accuracies."""
    if "paper_accuracy" not in column or "yellow" not in column:
        return math.nan
    keys = [k for k in ("paper_lr", "paper_weight_decay", "paper_batch_size", "paper_n") if k in column]
    cells = column.drop_duplicates(keys or None)
    acc = pd.to_numeric(cells["paper_accuracy"], errors="coerce")
    yellow = cells["yellow"].astype(bool)
    if not acc[yellow].notna().any() or not acc[~yellow].notna().any():
        return math.nan
    return float(acc[yellow].max() - acc[~yellow].max())


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
#: the same ranks in a word or two, for a table cell or a one-line verdict (ours and the paper's alike)
RANK_SHORT = {"best": "best", "second": "second", "no": "below second"}


def rank_key(rank: int) -> str:
    """The key of :data:`RANK_WORDS` / :data:`RANK_SHORT` for a 1-based rank: "best", "second" or "no"."""
    return {1: "best", 2: "second"}.get(int(rank), "no")


def grid_difference(r, which: str = "best") -> Difference:
    """The pooled interval of one :func:`findings` row as a :class:`Difference`: yellow − best other cell
    (``which="best"``) or yellow − the second-best other cell (``"second"``, the contrast that decides "best or
    second" either way)."""
    df, sd = r.get("df", math.nan), r.get("pooled_sd", math.nan)
    if which == "second":
        return Difference(r.get("gap_to_second_other", math.nan), r["second_lo"], r["second_hi"],
                          int(r.get("pairs", 0) or 0), True, "pooled t", LEVEL, df, sd)
    return Difference(r["margin"], r["ci_lo"], r["ci_hi"], int(r.get("pairs", 0) or 0), True, "pooled t", LEVEL, df,
                      sd)


def _cell(r, which: str) -> str:
    """A cell of a findings row named by its row and its tuning factor: "B = 16, tuning factor 0.156"
    (``which``: "best_other", "best", "yellow")."""
    tf = r.get(f"{which}_tf", math.nan)
    name = r.get(f"{which}_name", "")
    tf_text = f"tuning factor {tf:.3g}" if isinstance(tf, float) and math.isfinite(tf) else ""
    return ", ".join(t for t in (name, tf_text) if t)


def _interval_text(d: Difference) -> str:
    """"+1.20 [−0.30, +2.70]" or "+1.20 (one seed: no interval)"."""
    return d.text() if d.has_interval else f"{d.diff:+.2f} (one seed: no interval)"


def peak_reading(r) -> str:
    """Where the fitted optimum lies against the yellow tuning factor, and whether that agrees with the grid's rank,
    in words (from a :func:`findings` row): "" when there is nothing to say."""
    ytf = r["yellow_tf"]
    if math.isfinite(r.get("fit_p", math.nan)) and r["fit_p"] < FIT_P_MIN:
        return (f"the quadratic misses the cell means by more than the seed noise (lack-of-fit p = {r['fit_p']:.2g}), "
                "so no fitted peak is reported")
    if not (math.isfinite(r["peak_tf"]) and math.isfinite(r["peak_lo"]) and math.isfinite(ytf)):
        return ""
    if r["peak_lo"] <= ytf <= r["peak_hi"]:
        return "the fitted peak's interval holds the yellow tuning factor"
    side = "below" if r["peak_hi"] < ytf else "above"
    best_side = ("below" if r["best_other_tf"] < ytf else "above") if math.isfinite(r["best_other_tf"]) else ""
    text = f"the fitted optimum lies {side} the yellow tuning factor (its interval excludes {ytf:.3g})"
    if r["rank"] in ("second", "no") and best_side == side:
        text += (f"; the grid agrees: the best cell ({_cell(r, 'best_other')}) is {side} it too, so "
                 f"the yellow cell ranks {'second' if r['rank'] == 'second' else 'lower'}")
    elif r["rank"] == "best":
        text += ("; the yellow cell still ranks best of the cells run: the optimum lies between it and its "
                 f"neighbour {side} it")
    return text


def say_findings(f: pd.DataFrame, col: str = "n", what: str = "accuracy") -> str:
    """The findings table in words (Markdown), one line per column: the verdict and its reason, then the numbers
    behind it (from :func:`findings`): the yellow cell's rank, its paired interval against the best other cell and
    the resolution beside the paper's own margin, the regime check and the fitted peak."""
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
        d = grid_difference(r)
        other = _cell(r, "best_other")
        margin = (f"ahead of the best other cell ({other}) by {_interval_text(d)} points" if r["margin"] > 0
                  else f"tied with the cell {other}" if r["margin"] == 0
                  else f"{_interval_text(d)} points against the best cell ({other})")
        if d.has_interval:
            res = resolution_words(d, r.get("paper_effect"), what="these seeds")
            margin += (f" (95 % interval from the column's pooled error, {r.get('df', math.nan):.0f} df"
                       f"{'; ' + res if res else ''})")
        d2 = grid_difference(r, "second")
        if d2.has_interval and r.get("second_other_tf") != r.get("best_other_tf"):
            margin += f", {_interval_text(d2)} against the second-best other cell ({_cell(r, 'second_other')})"
        peak = (f"the quadratic fit peaks at tuning factor {r['peak_tf']:.3g}"
                + (f" (90 % interval {r['peak_lo']:.3g}–{r['peak_hi']:.3g}, delta method on the fit's residual error)"
                   if math.isfinite(r["peak_lo"]) else " (no interval)") + f" beside the yellow {r['yellow_tf']:.3g}"
                if math.isfinite(r["peak_tf"]) else "the quadratic fit has no interior peak")
        reading = peak_reading(r)
        if reading.startswith("the quadratic misses"):
            peak = reading
        elif reading:
            peak += f"; {reading}"
        lo, hi = int(r["seeds"]), int(r.get("seeds_max", r["seeds"]))
        seeds = f"{seed_range(lo, hi)} seed{'' if (lo, hi) == (1, 1) else 's'} per cell{dropped}"
        why = f" ({r['reason']})" if r["reason"] else ""
        pattern = pattern_text(r)
        lines.append(f"- **{where}** ({seeds}): *{r['verdict']}*{why}. The yellow cell ({yellow_text(r)} % "
                     f"{what}) {RANK_WORDS[r['rank']]}, {margin}; Δθ {regime_text(r)}; {peak}"
                     + (f"; against the paper's ranking: {pattern}" if pattern else "") + ".")
    return "\n".join(lines)


def _fmt_tf(v: float) -> str:
    return f"{v:.3g}" if math.isfinite(v) else "—"


def verdict_text(r) -> str:
    """One findings row as a published verdict (:func:`verdict_words`): "holds: best; yellow − best other +1.20
    [+0.40, +2.00], − second other +2.10 [+1.30, +2.90] (pooled 95 % intervals, 8 df)"."""
    if r["rank"] == "n/a":
        return verdict_words(r["verdict"], r["reason"])
    missing = f"; provisional, {int(r['missing'])} runs missing" if r["missing"] else ""
    d1, d2 = grid_difference(r), grid_difference(r, "second")
    df = r.get("df", math.nan)
    second = (f", − second other {_interval_text(d2)}" if math.isfinite(r.get("second_other_tf", math.nan))
              and r.get("second_other_tf") != r.get("best_other_tf") else "")
    detail = (f"{RANK_SHORT[r['rank']]}; yellow − best other {_interval_text(d1)}{second}"
              + (f" (pooled 95 % intervals, {df:.0f} df)" if math.isfinite(df) else "") + missing)
    return verdict_words(r["verdict"], r["reason"], detail)


def peak_text(r) -> str:
    """"0.071 [0.063, 0.078] vs 0.0781" from a findings row (— when the fit has no interior peak)."""
    if math.isfinite(r.get("fit_p", math.nan)) and r["fit_p"] < FIT_P_MIN:
        return f"no peak: the quadratic misses the cells (lack-of-fit p = {r['fit_p']:.2g}; yellow {_fmt_tf(r['yellow_tf'])})"
    if not math.isfinite(r["peak_tf"]):
        return f"no interior peak (yellow {_fmt_tf(r['yellow_tf'])})"
    if not math.isfinite(r["peak_lo"]):
        return f"{_fmt_tf(r['peak_tf'])} (no interval) vs {_fmt_tf(r['yellow_tf'])}"
    return f"{_fmt_tf(r['peak_tf'])} [{_fmt_tf(r['peak_lo'])}, {_fmt_tf(r['peak_hi'])}] vs {_fmt_tf(r['yellow_tf'])}"


def claim_rows(found: pd.DataFrame, paper: str, item: str, claim: str, data: str, col: str = "n",
               results: pd.DataFrame | None = None, optimum: bool = True) -> list[dict]:
    """``publish.record_claims`` rows, one per findings column, by the rule ``rules.RULES["grid <claim kind>"]``:
    the verdict, ``contrasts`` (the pooled interval of yellow − each other cell, the intervals the rule reads),
    ``ci`` the deciding contrast (yellow − the second-best other cell for "best or second", yellow − the best other
    cell for "best"), the regime gate, the verdict under the rule it replaced (``previous_word``), what would decide
    an *undecided* column (``to_decide``), the paper's own margin; ``results`` (the sweep) adds the column's training
    minutes. ``optimum``: a second row per column for the fitted optimum's tuning factor within one grid step of the
    yellow one (``rules.RULES["grid optimum"]``, item "<item> optimum")."""
    from . import rules

    rows = []
    for _, r in found.iterrows():
        kind = r.get("claim", "best or second")
        rule = rules.rule(f"grid {kind}")
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
        deciding = grid_difference(r, "best" if kind == "best" else "second")
        pe = r.get("paper_effect", math.nan)
        seeds = int(r["seeds"])
        per_seed_min = minutes / max(seeds, 1) if minutes else None
        gated = r["verdict"] == NOT_JUDGED
        fix = ("a longer first phase (more epochs before the first LR decay), so that the yellow cells' Δθ settles")
        to_decide = (decide_text(deciding, ">", minutes_per_seed=per_seed_min, blocks=max(1, int(r["cells"]) - 1),
                                 gate_fix=fix, gated=gated, paper_effect=pe if math.isfinite(pe) else None)
                     if r["verdict"] in ("undecided", NOT_JUDGED) and r["rank"] != "n/a" else
                     f"the column's {int(r['missing'])} missing run{'s' if int(r['missing']) != 1 else ''}"
                     if r["verdict"] == "undecided" and r["missing"] else "")
        contrasts = r.get("contrasts") or {}
        fields = interval_fields(deciding, paper_effect=pe if pe is not None and math.isfinite(pe) else None,
                                 rule=rule, gate_ok=_gate(r.get("settled")), to_decide=to_decide)
        fields["contrasts"] = {f"{tf:.6g}": [finite_or_none(lo), finite_or_none(hi)]
                               for tf, (lo, hi) in contrasts.items()}
        rows.append({"paper": paper, "item": f"{item}{sub}, {where}", "claim": claim, "data": data,
                     "seeds": seeds, "seeds_max": int(r.get("seeds_max", r["seeds"])),
                     "verdict": verdict_text(r), "word": r["verdict"], "regime": regime_text(r),
                     "previous_word": r.get("previous_verdict", ""),
                     "peak_tf": peak_text(r), "train_minutes": minutes, "ours": f"yellow {ours}" if ours else "",
                     "paper_value": paper_value, "rank": r["rank"], **fields})
        if optimum and r["rank"] != "n/a":
            rows.append(_optimum_row(r, paper, f"{item} optimum{sub}, {where}", data, minutes, seeds))
    return rows


def _gate(settled) -> bool | None:
    if settled is None or (isinstance(settled, float) and math.isnan(settled)):
        return None
    return bool(settled)


def _optimum_row(r, paper: str, item: str, data: str, minutes, seeds: int) -> dict:
    """The claims.json row of one column's fitted optimum (``rules.RULES["grid optimum"]``): ``ci`` the 90 %
    interval of optimum / yellow tuning factor (``scale`` "ratio")."""
    from . import rules

    rule = rules.rule("grid optimum")
    ratio, lo, hi = r["peak_vs_yellow"], r["peak_ratio_lo"], r["peak_ratio_hi"]
    word, reason = r["optimum_verdict"], r["optimum_reason"]
    if math.isfinite(ratio):
        ours = f"×{ratio:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) else "")
        detail = f"optimum / yellow tuning factor {ours} (90 % interval; band ×{1 / rule.margin:g}–×{rule.margin:g})"
    else:
        ours, detail = "", ""
    to_decide = ""
    if word in ("undecided", NOT_JUDGED):
        se = r.get("peak_se_log2", math.nan)
        if word == NOT_JUDGED:
            to_decide = ("the regime the claim speaks of: a longer first phase (more epochs before the first LR "
                         "decay), so that the yellow cells' Δθ settles")
        elif math.isfinite(ratio) and math.isfinite(se):
            x = math.log2(ratio)
            target = min(abs(x - 1), abs(x + 1))
            n = seeds_needed(se * math.sqrt(seeds), target, level=rule.level, blocks=max(1, int(r["cells"]) - 2))
            per = minutes / max(seeds, 1) if minutes else None
            to_decide = (f"about {n} seeds ({max(0, n - seeds)} more"
                         + (f", about {max(0, n - seeds) * per:,.0f} cpu minutes" if per and n > seeds else "")
                         + ") would, if the fit's spread held" if n else
                         f"no seed budget up to {MAX_SEEDS} seeds at the fit's spread can; a finer or wider grid "
                         f"around the optimum would")
        else:
            to_decide = ("a grid whose cells bracket the optimum (an interior maximum the quadratic can place)"
                         if "maximum" in str(reason) or "range" in str(reason) else
                         "more cells near the optimum (the quadratic misses the cells)")
    d = Difference(ratio, lo, hi, seeds, True, "delta method", rule.level, r.get("peak_df", math.nan))
    return {"paper": paper, "item": item, "data": data, "seeds": seeds,
            "claim": "the fitted optimum's tuning factor lies within one grid step (×½–×2) of the yellow one",
            "verdict": verdict_words(word, reason, detail), "word": word, "ours": ours, "paper_value": "",
            "train_minutes": None, "regime": regime_text(r),
            **interval_fields(d, rule=rule, gate_ok=_gate(r.get("settled")), to_decide=to_decide, scale="ratio")}


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
    and its rank among the paper's cells that were run, in :data:`RANK_SHORT`'s words ("" without the paper's
    accuracies)."""
    if "paper_accuracy" not in column or "yellow" not in column:
        return ""
    keys = [k for k in ("paper_lr", "paper_weight_decay", "paper_batch_size", "paper_n") if k in column]
    cells = column.drop_duplicates(keys or None)
    acc = pd.to_numeric(cells["paper_accuracy"], errors="coerce")
    yellow = acc[cells["yellow"].astype(bool)].dropna()
    if yellow.empty:
        return ""
    rank = int((acc > yellow.max()).sum()) + 1
    return f"yellow {yellow.max():.2f} ({RANK_SHORT[rank_key(rank)]})"


def verdict_line(found: pd.DataFrame, details: bool = True) -> str:
    """The notebook's one-line verdict (the ``verdict`` cell read by ``python -m repro_lib run``'s end table).
    ``details=False``: the verdict counts and the yellow cells' ranks only (no fitted peak, no diverged or missing
    counts), for a notebook that lists several tables on its one line."""
    v = found["verdict"].value_counts().to_dict()
    parts = [f"{k} {v[k]}/{len(found)}" for k in VERDICTS if k in v]
    ranks = found["rank"].value_counts().to_dict()
    rank = ", ".join(f"{RANK_SHORT[k]} {ranks[k]}" for k in RANK_SHORT if k in ranks)  # columns per yellow rank
    missing = int(found["missing"].sum())
    left_out = int(found.get("diverged", pd.Series(dtype=int)).sum())
    peaks = [peak_text(r) for _, r in found.iterrows() if math.isfinite(r["peak_tf"])]
    if not details:
        return f"{', '.join(parts)} columns (yellow cell {rank})"
    return (f"{', '.join(parts)} columns (yellow cell {rank})"
            + (f"; peak TF {peaks[0]}" if len(peaks) == 1 else f"; {len(peaks)} fitted peaks" if peaks else "")
            + (f"; {left_out} diverged runs left out" if left_out else "")
            + (f"; provisional: {missing} runs missing" if missing else ""))
