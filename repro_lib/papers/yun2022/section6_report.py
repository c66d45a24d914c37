"""The verdict of ``yun2022_section6.ipynb`` (Sec. 6, Fig. 8): the λ predicted from the subset's tuning factor is not
worse than **every** other λ of the full-data search by more than the margin of ``results.rules.RULES["sec6
non-inferior"]``, each contrast paired by seed. Kept apart from ``section6`` (which the registry imports, and so may
not import ``repro_lib.results``).
"""
from __future__ import annotations

import math

import pandas as pd

from ...results import findings, rules
from ...results.tables import number

RULE = "sec6 non-inferior"


def noninferior_to_every(per_seed: pd.DataFrame, chosen: float, real_data: bool = True,
                         minutes_per_seed: float | None = None) -> dict:
    """The claim "λ ``chosen`` is not worse than any other λ by more than m" on ``per_seed`` (final test accuracy,
    one row per seed, one column per λ): each contrast chosen − other λ, paired by seed, with the 95 % interval of
    the rule (one side at α = 0.025). An intersection: *holds* only when every lower end lies above −m, *no* when
    any whole interval lies below −m, else *undecided* naming the λ whose interval reaches below −m.

    Returns ``word``, ``reason``, ``contrasts`` ({λ: ``findings.Difference``}), ``ci`` (the deciding contrast, with
    its own interval: the one with the lowest upper bound where one lies wholly below −m, else the one with the
    lowest lower bound, so that ``rules.decide`` on it gives the intersection's verdict), ``deciding`` (its λ),
    ``rule`` and
    ``to_decide`` (for an *undecided* claim: the seeds, and cpu minutes at ``minutes_per_seed`` per seed of the
    whole search, that would decide every open contrast at the observed spreads, ``findings.decide_text``)."""
    rule = rules.rule(RULE)
    m = rule.margin
    others = [c for c in per_seed.columns if not math.isclose(c, chosen, rel_tol=1e-9)]
    mine = next((c for c in per_seed.columns if math.isclose(c, chosen, rel_tol=1e-9)), None)
    if mine is None or not others:
        return dict(word="undecided", reason="no finished run", contrasts={}, ci=findings.NO_DIFFERENCE, rule=rule,
                    to_decide="", deciding=None)
    contrasts = {c: findings.difference(per_seed[mine], per_seed[c], level=rule.level) for c in others}
    judged = {c: findings.judge_difference(d, "≳", margin=m, settled=None, real_data=real_data, rule=rule)
              for c, d in contrasts.items()}
    finite = [d for d in contrasts.values() if math.isfinite(d.diff)]
    if len(finite) < len(contrasts):
        word, reason = "undecided", "a λ without a finished run"
    elif all(w == "holds" for w, _ in judged.values()):
        word, reason = "holds", ""
    elif any(w == "no" for w, _ in judged.values()):
        word, reason = "no", ""
    else:
        open_ = {c: r for c, (w, r) in judged.items() if w == "undecided"}
        few = [r for r in open_.values() if "needed" in r or "no interval" in r]
        reason = few[0] if few else ("the interval against λ " + ", ".join(f"{number(c)}" for c in open_)
                                     + f" reaches below −{m:g}")
        word = "undecided"
    deciding = None
    if finite:  # the deciding contrast with its own interval: one wholly below −m decides *no*, else the lowest
        below = [c for c, d in contrasts.items() if d.hi < -m]  # lower end decides whether every one lies above −m
        deciding = (min(below, key=lambda c: contrasts[c].hi) if below else
                    min(contrasts, key=lambda c: contrasts[c].lo if math.isfinite(contrasts[c].lo) else -math.inf))
        ci = contrasts[deciding]
    else:
        ci = findings.NO_DIFFERENCE
    to_decide = ""
    if word == "undecided" and finite:
        need = {c: findings.seeds_needed(contrasts[c].sd, findings.target_half_width(contrasts[c].diff, "≳", m),
                                         level=rule.level)
                for c, (w, _) in judged.items() if w == "undecided"}
        hardest = max(need, key=lambda c: math.inf if need[c] is None else need[c])
        to_decide = findings.decide_text(contrasts[hardest], "≳", margin=m, minutes_per_seed=minutes_per_seed)
        if len(need) > 1:
            to_decide += f" (the widest of the open contrasts, against λ {number(hardest)})"
    return dict(word=word, reason=reason, contrasts=contrasts, ci=ci, rule=rule, to_decide=to_decide,
                deciding=deciding)


def contrasts_text(contrasts: dict) -> str:
    """"λ 2.5e-05: +2.18 [−4.86, +9.22]; λ 0.0001: …" (each contrast chosen − that λ)."""
    return "; ".join(f"λ {number(c)}: {d.text()}" for c, d in sorted(contrasts.items()))


def contrasts_view(contrasts: dict, chosen: float):
    """The contrasts for people: per other λ, chosen − λ with its interval, as a DataFrame."""
    return pd.DataFrame([{"other λ": f"{number(c)}", f"λ {number(chosen)} − other [95 % interval]": d.text(), "seeds": d.n}
                         for c, d in sorted(contrasts.items())])
