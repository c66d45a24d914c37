"""A declared second stage: its level, and the error of the two-stage procedure it makes.

Adding seeds (or grid columns) to a claim because its first look came out *undecided* is a second look at the same
question. Judged again at the first level, the procedure errs more often than that level says (for a paired t on
3 seeds, then more seeds judged on all of them at one-sided 0.025: about 0.045 per side). The second stage of this
package is therefore declared before its runs (``reports/cpu/stage2_plan.json``, built by
``repro_lib.papers.stage2``) and judged **once**, on all the seeds, by the claim's own rule at a stricter level
(:data:`STAGE2_ALPHA`: one-sided 0.005 where the first stage used 0.025, 0.01 where it used 0.05 — intervals at
99 % and 98 %); no claim gets a third stage. Every stage-2 verdict is published with the *procedure's* overall
error per side, :func:`two_stage_error`, simulated under the rule's own null boundary for the claim's exact design.

The simulated procedure (per side, at the boundary of the claimed side: a true difference of 0, or exactly the
margin):

1. stage 1: the first-stage test on ``n1`` seeds at one-sided ``alpha1``; a decision there is final;
2. otherwise ``n`` seeds in all, ``n1 < n ≤ n_max``: ``sizing="fixed"`` always ``n_max`` (the plan's size);
   ``sizing="aimed"`` the smallest ``n`` at which the stage-1 estimate, were it the truth, would clear the stage-2
   bound at the stage-1 spread — no second stage where none up to ``n_max`` would (this is how the plan chose its
   targets: by the first stage's estimate as well as its spread, which is what raises a second look's error);
3. stage 2: the same test on all ``n`` seeds at one-sided ``alpha2``.

Designs (the test statistic of the rule, whose null distribution does not depend on the unknown spread):

* ``"paired"``: a paired t over seeds (df n − 1): the ">", "<", "≳", "≈" rules and ratio rules on a log scale;
* ``"pooled"``: one contrast of a ``cells``-cell grid column with the pooled two-way error, df (cells − 1)(n − 1)
  (the grid rules; the deciding contrast of "best or second"); a fitted optimum's delta-method t (df
  cells·n − n − 2) is approximated by this design with the same cells and seeds;
* ``"columns"``: a DerSimonian–Laird random-effects mean over grid columns, z interval (the pooled gap): stage 1
  the observed columns' standard errors and between-column variance, stage 2 adds ``n_max − n1`` columns at the
  median standard error.
"""
from __future__ import annotations

import math

import numpy as np

#: the one-sided level of the second stage, by the first stage's
STAGE2_ALPHA = {0.025: 0.005, 0.05: 0.01}
#: simulated repetitions of :func:`two_stage_error` for a published plan
SIMS = 200_000
DESIGNS = ("paired", "pooled", "columns")


def stage2_alpha(alpha1: float) -> float:
    """The second stage's one-sided level for a rule whose first stage used ``alpha1`` (:data:`STAGE2_ALPHA`)."""
    for a, a2 in STAGE2_ALPHA.items():
        if math.isclose(a, alpha1, rel_tol=1e-6):
            return a2
    raise ValueError(f"alpha1: no second-stage level declared for {alpha1!r} (known: {sorted(STAGE2_ALPHA)})")


def _df(design: str, n, cells: int):
    return (cells - 1) * (np.asarray(n) - 1) if design == "pooled" else np.asarray(n) - 1


def _t_stats(design: str, x: np.ndarray, n: int, cells: int) -> tuple[np.ndarray, np.ndarray]:
    """(t statistic, per-seed sd of the contrast) on the first ``n`` seeds of ``x`` (sims × cells × seeds, or
    sims × seeds for "paired"), at a true contrast of 0."""
    if design == "paired":
        d = x[:, :n]
        m = d.mean(axis=1)
        s = d.std(axis=1, ddof=1)
        return m / (s / math.sqrt(n)), s
    y = x[:, :, :n]
    resid = y - y.mean(axis=2, keepdims=True) - y.mean(axis=1, keepdims=True) + y.mean(axis=(1, 2), keepdims=True)
    s2 = (resid ** 2).sum(axis=(1, 2)) / ((cells - 1) * (n - 1))
    contrast = y[:, 0].mean(axis=1) - y[:, 1].mean(axis=1)
    sd = np.sqrt(2 * s2)
    return contrast / (sd / math.sqrt(n)), sd


def _columns_error(n1: int, n_max: int, alpha1: float, alpha2: float, ses, tau2: float, sims: int,
                   rng: np.random.Generator) -> float:
    from scipy import stats

    ses = np.asarray(ses, dtype=float)
    if len(ses) != n1:
        raise ValueError(f"ses: {len(ses)} standard errors for n1 = {n1} columns")
    extra = np.full(n_max - n1, float(np.median(ses)))
    se = np.concatenate([ses, extra])
    v = se ** 2
    y = rng.normal(0.0, np.sqrt(v + tau2), size=(sims, len(se)))   # true pooled gap at the boundary (0 here)

    def dl_z(k: int) -> np.ndarray:
        yy, vv = y[:, :k], v[:k]
        w = 1 / vv
        mu = (yy * w).sum(axis=1) / w.sum()
        q = ((yy - mu[:, None]) ** 2 * w).sum(axis=1)
        c = w.sum() - (w ** 2).sum() / w.sum()
        t2 = np.maximum(0.0, (q - (k - 1)) / c)
        ws = 1 / (vv[None, :] + t2[:, None])
        m = (yy * ws).sum(axis=1) / ws.sum(axis=1)
        return m * np.sqrt(ws.sum(axis=1))

    z1 = dl_z(n1)
    first = z1 > stats.norm.ppf(1 - alpha1)
    if n_max == n1:
        return float(first.mean())
    z = dl_z(n_max)
    other = z1 < -stats.norm.ppf(1 - alpha1)
    second = ~first & ~other & (z > stats.norm.ppf(1 - alpha2))
    return float((first | second).mean())


def two_stage_error(design: str, n1: int, n_max: int, alpha1: float, alpha2: float, *, cells: int = 2,
                    sizing: str = "fixed", sims: int = SIMS, seed: int = 0, ses=None, tau2: float = 0.0) -> float:
    """The overall error per side of the two-stage procedure of the module docstring: the probability, at the
    null boundary, that the claim is decided the claimed way at stage 1 or at stage 2. ``design``: one of
    :data:`DESIGNS`; ``cells``: the grid column's cells ("pooled"); ``ses``/``tau2``: the first stage's column
    standard errors and between-column variance ("columns"). ``n_max == n1``: the first stage alone (its own
    level, up to the simulation's error of about 2·√(α/sims))."""
    from scipy import stats

    if design not in DESIGNS:
        raise ValueError(f"design: {design!r} is not one of {DESIGNS}")
    if sizing not in ("fixed", "aimed"):
        raise ValueError(f"sizing: {sizing!r} is neither 'fixed' nor 'aimed'")
    if not (2 <= n1 <= n_max):
        raise ValueError(f"n1, n_max: need 2 ≤ n1 ≤ n_max, got {n1}, {n_max}")
    if not (0 < alpha2 <= alpha1 < 0.5):
        raise ValueError(f"alpha1, alpha2: need 0 < alpha2 ≤ alpha1 < 0.5, got {alpha1}, {alpha2}")
    if design == "pooled" and cells < 2:
        raise ValueError(f"cells: a pooled contrast needs at least 2 cells, got {cells}")
    rng = np.random.default_rng(seed)
    if design == "columns":
        return _columns_error(n1, n_max, alpha1, alpha2, ses, tau2, sims, rng)
    shape = (sims, n_max) if design == "paired" else (sims, cells, n_max)
    x = rng.standard_normal(shape, dtype=np.float32).astype(np.float64)
    t1, sd1 = _t_stats(design, x, n1, cells)
    q1 = stats.t.ppf(1 - alpha1, _df(design, n1, cells))
    first, other = t1 > q1, t1 < -q1
    if n_max == n1:
        return float(first.mean())
    go = ~first & ~other
    if sizing == "fixed":
        n_of = np.where(go, n_max, 0)
    else:
        est = np.abs(t1) * sd1 / math.sqrt(n1)                       # |stage-1 estimate|
        n_of = np.zeros(sims, dtype=int)
        for n in range(n_max, n1, -1):                               # the smallest n that would clear wins
            q2 = stats.t.ppf(1 - alpha2, _df(design, n, cells))
            n_of = np.where(go & (q2 * sd1 / math.sqrt(n) < est), n, n_of)
    second = np.zeros(sims, dtype=bool)
    for n in np.unique(n_of[n_of > 0]):
        rows = n_of == n
        t, _ = _t_stats(design, x[rows], int(n), cells)
        second[rows] = t > stats.t.ppf(1 - alpha2, _df(design, int(n), cells))
    return float((first | second).mean())


def procedure_error(design: str, n1: int, n_max: int, alpha1: float, alpha2: float, **kw) -> dict:
    """The overall error per side under both sizings (:func:`two_stage_error`) and the larger one, which the plan
    publishes: ``{"fixed": …, "aimed": …, "overall": …, "sims": …}``."""
    sims = kw.pop("sims", SIMS)
    out = {s: two_stage_error(design, n1, n_max, alpha1, alpha2, sizing=s, sims=sims, **kw)
           for s in ("fixed", "aimed")}
    return {**out, "overall": max(out.values()), "sims": sims}
