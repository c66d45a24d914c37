"""The decision rules of every published verdict on real images: one table, read by every notebook.

A claim names its rule (:data:`RULES`, by key); ``claims.json`` carries the rule as an object
(:meth:`Rule.fields`: ``relation``, ``test``, ``alpha``, ``level``, ``margin``, ``gate``, ``reason``, ``declared``)
beside ``ci``, the interval of exactly the quantity ``relation`` compares, so that every *holds* and *no* can be
re-derived from the published numbers alone (:func:`decide`; ``tests/test_verdict_rules.py`` does it for every
published claim).

The kinds of claim (``relation``):

* ``">"`` / ``"<"``: a − b lies above (below) 0. *holds* when the interval excludes 0 on the claimed side, *no*
  when it excludes 0 on the other side. Two-sided α = 0.05 (0.025 per side): the 95 % interval.
* ``"≈"``: a − b lies within ±m, the two one-sided tests (TOST, Schuirmann 1987) at α = 0.05 per side, i.e. the
  90 % interval inside [−m, m]. *no* when the interval lies wholly outside [−m, m].
* ``"≳"``: a is not worse than b by more than m (non-inferiority, one side at α = 0.025: the lower end of the 95 %
  interval above −m); *no* when the whole interval lies below −m.
* ``"best or second"`` (the Yun et al. grids): the yellow cell against every other cell of its column, each
  contrast a 95 % interval from the pooled within-column error (:func:`repro_lib.results.findings.pooled_contrasts`).
  *holds* when the yellow cell is shown above all but one other cell (intersection–union: each contrast at α, no
  correction); *no* ("below second") when two cells are shown above it; else *undecided*, with the rank as a
  description. ``"best"``: shown above every other cell / one cell shown above it.
* ``"band"``: a ratio (the fitted optimum's tuning factor / the yellow one) lies within [1/m, m] (one grid step of
  the paper's ×2 grids for m = 2): the 90 % interval inside the band holds, wholly outside it is *no*.
* ``"≤"``: a ratio lies at or below a threshold m: the 90 % interval below m holds, wholly above m is *no*.

**A gate applies to both outcomes.** Where the regime the claim speaks of was not reached (``gate_ok`` False), the
verdict is *not judged* whichever way the interval points (its reason says which way it points). ``gate_ok`` None
(not measured) judges the interval and says so. *undecided* is kept for an interval within the noise in the regime
the claim speaks of; a claim on real images with fewer than ``MIN_SEEDS`` seeds is *undecided* too.

``declared`` says whether the rule (its margin, threshold or test) was fixed before its records existed
("before") or after ("after"); a rule set after the data is shown with the verdict it gives under the rule it
replaced (``previous``), in the notebook and in CHANGELOG.md.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

#: seeds a claim measured on real images needs before it can be decided either way
MIN_SEEDS = 3
#: the kinds of claim :func:`decide` knows
RELATIONS = (">", "<", "≈", "≳", "best or second", "best", "band", "≤")
#: error rate per side of each kind (the interval's level is 1 − 2α)
ALPHA = {">": 0.025, "<": 0.025, "≳": 0.025, "≈": 0.05, "best or second": 0.025, "best": 0.025, "band": 0.05,
         "≤": 0.05}


@dataclass(frozen=True)
class Rule:
    """One decision rule: the kind of claim, the test behind its interval, α per side, the margin or threshold with
    its written reason, the gate (the regime the claim speaks of), and whether it was declared before its records
    existed. ``previous``: the rule it replaced, in words, where it was changed after the data."""

    relation: str
    test: str
    margin: float | None = None
    gate: str = "none"
    reason: str = ""
    declared: str = "before"
    previous: str = ""
    alpha: float = field(default=math.nan)

    def __post_init__(self):
        if self.relation not in RELATIONS:
            raise ValueError(f"relation: {self.relation!r} is not one of {RELATIONS}")
        if self.declared not in ("before", "after"):
            raise ValueError(f"declared: {self.declared!r} is neither 'before' nor 'after'")
        if self.relation in ("≈", "≳", "band", "≤") and not (self.margin is not None and self.margin > 0):
            raise ValueError(f"margin: an {self.relation!r} rule needs a margin > 0, got {self.margin!r}")
        if not math.isfinite(self.alpha):
            object.__setattr__(self, "alpha", ALPHA[self.relation])

    @property
    def level(self) -> float:
        """The confidence level of the interval this rule reads (1 − 2α: 0.95 for one side at 0.025, 0.90 for TOST)."""
        return round(1 - 2 * self.alpha, 6)

    def with_margin(self, margin: float, reason: str | None = None) -> "Rule":
        return replace(self, margin=margin, reason=self.reason if reason is None else reason)

    def fields(self) -> dict:
        """The ``rule`` object of a claim in ``claims.json``."""
        out = {k: v for k, v in asdict(self).items() if v not in ("", None)}
        out["level"] = self.level
        return out

    def words(self) -> str:
        """The rule in one line: "≈ within ±1.5 (TOST, paired t, α = 0.05 per side: the 90 % interval)"."""
        m = "" if self.margin is None else (f" ±{self.margin:g}" if self.relation == "≈" else
                                            f" −{self.margin:g}" if self.relation == "≳" else
                                            f" ×{self.margin:g}" if self.relation == "band" else f" {self.margin:g}")
        return f"{self.relation}{m} ({self.test}; {100 * self.level:.0f} % interval)"


def decide(rule: Rule, ci=None, contrasts=None, gate_ok: bool | None = True, seeds: int | None = None,
           real_data: bool = True, gate_words: str = "") -> tuple[str, str]:
    """The verdict word ("holds", "no", "undecided", "not judged") and its reason from ``rule`` and the published
    interval(s): ``ci`` [lo, hi] of the compared quantity (in the rule's units: a difference for ">", "<", "≈", "≳";
    a ratio for "band" and "≤"), or ``contrasts`` (grid kinds: the [lo, hi] of yellow − each other cell).
    ``gate_ok`` False makes any outcome *not judged* (``gate_words`` says which regime was not reached; the reason
    says which way the interval points, or that there is none)."""
    word, reason = _decide(rule, ci, contrasts, seeds, real_data)
    if gate_ok is False:
        return NOT_JUDGED, gate_reason(word, gate_words, reason)
    return word, reason


#: the word of a claim whose gate failed: the regime the claim speaks of was not reached
NOT_JUDGED = "not judged"


def gate_reason(word: str, gate_words: str = "", why: str = "") -> str:
    """The reason of a *not judged* verdict: the regime not reached, then which way the interval points (``word``:
    what the rule would have said in the regime; ``why``: its reason for an *undecided*)."""
    lean = ("the interval points the claimed way" if word == "holds" else
            "the interval points against the claim" if word == "no" else
            why if why == "the interval holds 0" or why == "no interval" or why.endswith(" needed") else
            "the interval decides neither way" + (f" ({why})" if why else ""))
    return f"{gate_words or 'before the regime the claim speaks of was reached'}; {lean}"


def _few_seeds(seeds) -> str:
    return f"{seeds} seed{'s' if seeds != 1 else ''} on real images, {MIN_SEEDS} needed"


def _decide(rule: Rule, ci, contrasts, seeds, real_data) -> tuple[str, str]:
    """:func:`decide` without the gate."""
    if real_data and seeds is not None and seeds < MIN_SEEDS:
        return "undecided", _few_seeds(seeds)
    rel, m = rule.relation, rule.margin
    if rel in ("best or second", "best"):
        cs = [c for c in (contrasts or []) if c is not None and _finite(c)]
        if not cs:
            return "undecided", "no interval"
        above = sum(lo > 0 for lo, _ in cs)       # other cells shown below the yellow one
        below = sum(hi < 0 for _, hi in cs)       # other cells shown above it
        need = len(cs) - (1 if rel == "best or second" else 0)
        if above >= need:
            word = "holds"
        elif below >= (2 if rel == "best or second" else 1):
            word = "no"
        else:
            return "undecided", (f"shown above {above} of the {len(cs)} other cells ({need} needed)"
                                 + (f", below {below}" if below else ""))
        return word, ""
    if ci is None or not _finite(ci):
        return "undecided", "no interval"
    lo, hi = ci
    if rel in (">", "<"):
        s = 1 if rel == ">" else -1
        lo, hi = sorted((s * lo, s * hi))
        if lo > 0:
            return "holds", ""
        if hi < 0:
            return "no", ""
        return "undecided", "the interval holds 0"
    if rel == "≈":
        if -m <= lo and hi <= m:
            return "holds", ""
        if lo > m or hi < -m:
            return "no", ""
        return "undecided", f"the {100 * rule.level:.0f} % interval reaches past the margin ±{m:g}"
    if rel == "≳":
        if lo > -m:
            return "holds", ""
        if hi < -m:
            return "no", ""
        return "undecided", f"the interval reaches below the margin −{m:g}"
    if rel == "band":
        if 1 / m <= lo and hi <= m:
            return "holds", ""
        if hi < 1 / m or lo > m:
            return "no", ""
        return "undecided", f"the interval reaches past the band ×{1 / m:g}–×{m:g}"
    # "≤"
    if hi <= m:
        return "holds", ""
    if lo > m:
        return "no", ""
    return "undecided", f"the interval holds the threshold {m:g}"


def _finite(ci) -> bool:
    try:
        lo, hi = ci
        return lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi)
    except (TypeError, ValueError):
        return False


# ------------------------------------------------------------------------------------------------ the rule table
_PAIRED = "paired t over seeds (the same seed: the same initialisation and data order)"
_POOLED = ("pooled two-way t: accuracy ~ cell + seed over the column's cells × seeds (randomized blocks, equal "
           "residual variance), df = (cells − 1)(seeds − 1)")
_SETTLED = "the yellow cells' Δθ settled before the first LR decay (drift ≤ 10 % over the last fifth of the phase)"

#: every rule a published claim uses, by key
RULES: dict[str, Rule] = {
    # -- Yun et al. grids (Tables 1-11, Sec. 3.2) -------------------------------------------------------------
    "grid best or second": Rule(
        "best or second", _POOLED, gate=_SETTLED,
        reason="the paper's own reading of its tables (the yellow cell is best or second); a rank from a few seeds "
               "is a point estimate, so each 'above' must be shown by an interval",
        declared="after", previous="holds on the yellow cell's mean rank alone (best or second); no when the paired "
                                   "interval to the second cell lies below 0"),
    "grid best": Rule(
        "best", _POOLED, gate=_SETTLED,
        reason="Sec. 3.2 says the searched value with the tuning factor 10/128 is the best one",
        declared="after", previous="paired t of yellow − best other cell (2 df), > 0"),
    "grid optimum": Rule(
        "band", "least squares accuracy ~ seed + x + x² in x = log2(TF / yellow TF), the optimum −b/2c with a "
                "delta-method t interval on the fit's residual error", margin=2.0, gate=_SETTLED,
        reason="one grid step: the paper's grids move η, λ or B by ×2 (×4 for B), so an optimum within ×2 of the "
               "yellow tuning factor is where the paper's grid would put it",
        declared="after", previous="a 3-seed bootstrap range of the fitted peak, reported without a verdict"),
    "shared angle": Rule(
        "≤", "per-seed max/min of the yellow cells' mean Δθ over the columns, t interval of its log over seeds",
        margin=1.25, gate=_SETTLED,
        reason="Fig. 2 (a) draws the best-tuned curves as one band and states no tolerance; 'within 25 %' was "
               "chosen after pilot runs had been seen and is kept unchanged (not tuned again to these records), "
               "so it is declared as set after the data",
        declared="after", previous="a 3-seed percentile bootstrap of max/min (its 10 distinct resamples' range) "
                                   "inside ×1.25"),
    "pooled gap": Rule(
        "≳", "random-effects meta-analysis (DerSimonian–Laird) over the grid columns of each column's yellow − best "
             "other cell and its pooled-error standard error", margin=1.0,
        reason="the paper's question is whether 10/128 is (near) the best setting; one point is the margin Sec. 6 "
               "also uses for 'as good as the optimum', and the winner's curse biases each column's gap against "
               "the yellow cell, so a pooled gap above −1 is conservative evidence",
        declared="after"),
    "pooled optimum": Rule(
        "band", "random-effects meta-analysis (DerSimonian–Laird) over the grid columns of log₂(optimum / yellow "
                "tuning factor) and its delta-method standard error", margin=2.0,
        reason="one grid step of the paper's ×2 grids, as for each column's own optimum", declared="after"),
    # -- Yun et al. Sec. 6 ----------------------------------------------------------------------------------------
    "sec6 non-inferior": Rule(
        "≳", _PAIRED, margin=1.0,
        reason="Sec. 6 calls the predicted λ 'optimal': within one point of every other λ searched on the full data",
        declared="after", previous="≳ −1 against the best other λ only"),
    # -- Li & Arora -----------------------------------------------------------------------------------------------
    "li_arora ≈": Rule(
        "≈", "TOST on the " + _PAIRED, margin=2.1,
        gate="‖w‖²/η̃ settled in the first phase (moves ≤ ×1.2 over its second half)",
        reason="calibrated on the twin runs: exact TEXP / step decay + WD and exact exp-cosine / cosine + WD are one "
               "schedule each in exact arithmetic (Thms 2.9, 2.12) and differ only by float rounding that training "
               "amplifies; the root mean square of their per-seed differences (true mean 0), pooled over both "
               "pairs, is what two runs of one schedule differ by, and so the finest 'similar performance' a figure "
               "with one run per curve, as the paper's, can show: 2.10 points over the 24 seed pairs of the cpu "
               "records (li_arora.report.twin_calibration), rounded to 2.1; measured on those records, after they "
               "existed",
        declared="after", previous="95 % interval inside ±1 point (fixed before the runs); the gate guarded only a "
                                   "result against the claim"),
    "li_arora >": Rule(">", _PAIRED, gate="‖w‖²/η̃ settled in the first phase (moves ≤ ×1.2 over its second half)",
                       reason="the paper's figure: one schedule ends above the other", declared="after",
                       previous="the same interval; the gate guarded only a result against the claim"),
    "li_arora <": Rule("<", _PAIRED, gate="‖w‖²/η̃ settled in the first phase (moves ≤ ×1.2 over its second half)",
                       reason="the paper's figure: one schedule ends below the other", declared="after",
                       previous="the same interval; the gate guarded only a result against the claim"),
    # -- AdamP, back-matching, the tuning rule ------------------------------------------------------------------
    "paired >": Rule(">", _PAIRED, reason="the paper's table: one optimizer ends above the other", declared="before"),
    "paired <": Rule("<", _PAIRED, reason="the paper's claim: one quantity ends below the other", declared="before"),
    "adamp norm <": Rule(
        "<", _PAIRED, gate="the baseline's weight norm grew (Table 1 reports the projection slowing a growth)",
        reason="Table 1 / Sec. 3.2: the projection slows the growth of the scale-invariant weights' norm",
        declared="after", previous="the same rule; the gate already held back both outcomes"),
    "adamp detection": Rule(
        "≳", "exact (Clopper–Pearson) binomial interval of the lowest detection rate − 100 over its (step, tensor) "
             "decisions", margin=0.005,
        gate="the scale-variant score settled (drift ≤ 10 % over the recorded steps)",
        reason="Table B.1 prints detection rates to two decimals, so its 100 is a rate of at least 99.995 %: a rate "
               "shown below that is a miss the paper would have printed",
        declared="after", previous="holds when every recorded decision is a detection (no interval); no on a miss, "
                                   "only with a settled score"),
    "tuning_rule same angle": Rule(
        "≈", "TOST on the paired t over seeds of log(Δθ at 4B with the rule's λ / Δθ tuned at B)",
        margin=math.log(1.25),
        gate="the Δθ of the tuned runs at B and the rule's at 4B settled before the first LR decay",
        reason="the same Δθ within ×1.25 (margin log 1.25 on the log ratio): the band Sec. 3's 'shared angular "
               "update' allows; the paper gives no number",
        declared="after", previous="95 % interval inside ±log 1.25; the gate guarded only a result against the claim"),
    "tuning_rule >": Rule(
        ">", _PAIRED, gate="the Δθ of the tuned runs at B and the rule's at 4B settled before the first LR decay",
        reason="Table 3 (b): at 4B the rule's weight decay ends above keeping the tuned one", declared="after",
        previous="the same interval; the gate guarded only a result against the claim"),
    "tuning_rule ≳": Rule(
        "≳", _PAIRED, margin=1.0,
        gate="the Δθ of the tuned runs at B and the rule's at 4B settled before the first LR decay",
        reason="the rule 'recovers' the tuned accuracy: not worse by more than one point, Sec. 6's margin",
        declared="after", previous="the same interval; the gate guarded only a result against the claim"),
    "tuning_rule best or second": Rule(
        "best or second", _POOLED,
        gate="the Δθ of the tuned runs at B and the rule's at 4B settled before the first LR decay",
        reason="Tables 3-4's reading: the rule's λ is best or second of the values searched at 4B; each 'above' "
               "shown by an interval", declared="after",
        previous="holds on the rule's λ's mean rank alone (best or second)"),
    "backmatching >": Rule(
        ">", _PAIRED, gate="every method converged (train accuracy ≥ 90 % at the end)",
        reason="the supplement's Table 1: scale-amended SGD ends above each baseline", declared="after",
        previous="the convergence gate guarded only a result against the claim"),
}


def rule(key: str) -> Rule:
    """The rule of :data:`RULES` named ``key`` (a ValueError naming the known keys otherwise)."""
    if key not in RULES:
        raise ValueError(f"rule: {key!r} is not one of {sorted(RULES)}")
    return RULES[key]
