"""What ``notebooks/tuning_rule.ipynb`` shows from its runs (``tuning_rule.plan``): the search at B, the three
settings compared by seed (tuned at B, the rule's λ at 4B, λ kept at 4B), their angular update per epoch and
accuracy, the verdicts and the "What we found" text. Kept apart from ``tuning_rule`` because the registry imports
that module, which may not reach ``repro_lib.results``.

Each comparison pairs the runs of one seed (same class-balanced subset and initialization) and gives the mean
difference with its Student-t 95 % interval over seeds (:func:`paired_interval`; ``scipy.stats``).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ... import data as data_mod
from ... import profiles, tuning
from ...results import findings as fnd
from ...results import rules
from ...runs import sweep
from .tuning_rule import BATCH_FACTOR, rule_weight_decay

#: epochs, ending at the first LR decay, over which a run's angular update per epoch is averaged
WINDOW = 5
#: the rule "recovers" Δθ when the rule's Δθ at 4B is within this factor of the tuned Δθ at B (the 25 % the Sec. 3
#: notebook allows for "shared" Δθ; our reading, the paper gives no number)
SAME_ANGLE = 1.25
#: the rule "recovers" the tuned accuracy when it is not worse by more than this many points (a non-inferiority
#: margin, ``results.findings.judge_difference`` "≳"; Sec. 6 of the Yun et al. notebooks uses the same point)
RECOVER_MARGIN = 1.0
#: the level of the paired intervals
LEVEL = fnd.LEVEL
#: the three settings compared, in the order of tables and figures
ARMS = ("tuned at B", "rule at 4B", "control at 4B")
PAPER = "Yun et al. 2022"
#: the rule of each claim (``results.rules.RULES``), in the order of :func:`findings`
RULE_KEYS = ("tuning_rule same angle", "tuning_rule >", "tuning_rule ≳", "tuning_rule best or second")
#: what would reach the regime the claims speak of where the gate is closed
GATE_FIX = ("a longer first phase (more epochs before the first LR decay), so that the Δθ of the tuned runs at B and "
            "the rule's at 4B settle")


# ------------------------------------------------------------------------------------------- numbers
def paired_interval(diffs, level: float = LEVEL) -> dict:
    """Mean of per-seed paired differences and its Student-t interval (``results.findings.difference`` of the
    differences against zero): ``mean``, ``lo``, ``hi``, ``half`` (the half-width), ``n`` (finite differences used),
    ``diff`` (the ``findings.Difference``). NaN bounds with fewer than two differences."""
    d = pd.Series([float(v) for v in diffs if v is not None and math.isfinite(float(v))], dtype=float)
    iv = fnd.difference(d, pd.Series(0.0, index=d.index), level=level) if len(d) else fnd.NO_DIFFERENCE
    n = len(d)
    return dict(mean=iv.diff if n else math.nan, lo=iv.lo, hi=iv.hi, half=iv.resolution, n=n, diff=iv)


def window_angle(history: list[dict], cfg) -> float:
    """Mean Δθ per epoch (rad, Eq. 11) over the :data:`WINDOW` epochs that end at the run's first LR decay (the
    last epoch when the schedule has none); NaN when the run has none of them."""
    decay = profiles.first_decay_epoch(cfg) or cfg.num_epochs
    vals = [h["angular_update"] for h in history or [] if decay - WINDOW < h.get("epoch", 0) <= decay
            and h.get("angular_update") is not None and math.isfinite(h["angular_update"])]
    return float(np.mean(vals)) if vals else math.nan


def first_batch(cfg, data_root=None, size: int = 64):
    """``size`` training images of ``cfg``'s data, normalized as training sees them (no augmentation), and their
    labels: the batch Lemma 1 is measured on."""
    from ...train import load_data

    train, _ = load_data(cfg, data_root or None)
    return next(iter(data_mod.TensorBatches(train, min(size, len(train)), train=False).epoch()))


def search(results: pd.DataFrame) -> pd.DataFrame:
    """Mean test accuracy over the finished seeds per (stage, B, λ), with the tuning factor, the seed sd and the
    mean Δθ of :func:`window_angle`; ``rank`` within each B (1 = best)."""
    r = results.assign(dtheta=[window_angle(h, c) for h, c in zip(results.history, results.cfg)])
    cells = sweep.aggregate(r, by=["stage", "batch_size", "weight_decay", "tuning_factor"])
    ok = r[r.status == "finished"]
    cells["dtheta"] = [ok[(ok.batch_size == b) & (ok.weight_decay == w)].dtheta.mean()
                       for b, w in zip(cells.batch_size, cells.weight_decay)]
    cells["rank"] = cells.groupby("batch_size").test_acc.rank(ascending=False, method="min")
    return cells


def tuned_weight_decay(results: pd.DataFrame) -> float:
    """The λ with the best mean accuracy at B over the finished seeds (NaN when no run at B finished)."""
    cells = search(results)
    tune = cells[(cells.stage == "tune") & cells.test_acc.notna()]
    return float(tune.loc[tune.test_acc.idxmax(), "weight_decay"]) if len(tune) else math.nan


def arms(results: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, seed) of :data:`ARMS`: the tuned λ at B, the rule's λ at 4B (same tuning factor) and
    the control (the tuned λ at 4B), with ``setting`` (one of :data:`ARMS`), ``batch_size``, ``weight_decay``,
    ``tuning_factor``, ``status``, ``test_acc``, ``dtheta`` (:func:`window_angle`) and ``history``."""
    wd = tuned_weight_decay(results)
    cols = ["setting", "seed", "batch_size", "weight_decay", "tuning_factor", "status", "test_acc", "dtheta", "history"]
    if not math.isfinite(wd):
        return pd.DataFrame(columns=cols)
    tune = results[results.stage == "tune"]
    c = tune.cfg.iloc[0]
    big = BATCH_FACTOR * c.batch_size
    pick = {ARMS[0]: ("tune", wd), ARMS[1]: ("transfer", rule_weight_decay(wd, c.n, c.batch_size, big, c.lr,
                                                                            c.momentum)),
            ARMS[2]: ("transfer", wd)}
    rows = []
    for arm, (stage, w) in pick.items():
        sel = results[(results.stage == stage) & np.isclose(results.weight_decay, w, rtol=1e-9, atol=0)]
        for _, r in sel.iterrows():
            rows.append(dict(setting=arm, seed=r.seed, batch_size=r.batch_size, weight_decay=r.weight_decay,
                             tuning_factor=r.tuning_factor, status=r.status,
                             test_acc=r.test_acc if r.status == "finished" else math.nan,
                             dtheta=window_angle(r.history, r.cfg) if r.status == "finished" else math.nan,
                             history=r.history))
    return pd.DataFrame(rows, columns=cols)


def arm_table(a: pd.DataFrame) -> pd.DataFrame:
    """Per setting: B, λ, tuning factor, the expected Δθ arccos(1 − TF), mean Δθ and accuracy over seeds (± sd)."""
    rows = []
    for arm in ARMS:
        g = a[a.setting == arm]
        if not len(g):
            continue
        tf = float(g.tuning_factor.iloc[0])
        rows.append({"setting": arm, "B": int(g.batch_size.iloc[0]), "λ": float(g.weight_decay.iloc[0]),
                     "tuning factor": tf,
                     "arccos(1 − TF)": tuning.angular_update_per_epoch(tf) if tf <= 2 else math.nan,
                     "Δθ (rad)": g.dtheta.mean(), "Δθ sd": g.dtheta.std(ddof=1),
                     "test acc": g.test_acc.mean(), "acc sd": g.test_acc.std(ddof=1),
                     "seeds": int(g.test_acc.notna().sum())})
    return pd.DataFrame(rows)


def _pairs(a: pd.DataFrame, value: str, x: str, y: str) -> pd.Series:
    """Per seed: ``value`` of setting ``x`` and of ``y`` side by side (seeds where both finished)."""
    w = a.pivot_table(index="seed", columns="setting", values=value, aggfunc="first")
    if x not in w or y not in w:
        return pd.DataFrame(columns=[x, y])
    return w[[x, y]].dropna()


def paper_protocol(batch_size: int = 128) -> dict:
    """This notebook's protocol read off the paper's Table 3 (b) (scale-invariant ResNet-18, CIFAR-10, SGDM, η = 0.1,
    λ searched per B; ``repro_lib.papers.transcribed``): the best λ at ``batch_size`` (tuned), and at
    :data:`BATCH_FACTOR` × ``batch_size`` the rule's λ (× 4) and the control (λ kept), with their accuracies and the
    rule's rank among the λ the paper searched there. Empty when the table lacks a cell."""
    from ..transcribed import table

    t = table("yun2022_table3")
    t = t[t.subtable == "b"]
    big = BATCH_FACTOR * batch_size
    at = {b: t[t.batch_size == b].set_index("weight_decay").accuracy for b in (batch_size, big)}
    if not len(at[batch_size]) or not len(at[big]):
        return {}
    wd = float(at[batch_size].idxmax())
    c = t.iloc[0]
    rule = rule_weight_decay(wd, int(c.n), batch_size, big, float(c.lr), float(c.momentum))
    if rule not in at[big].index or wd not in at[big].index:
        return {}
    rank = int(at[big].rank(ascending=False, method="min")[rule])
    return dict(batch_size=batch_size, big=big, tuned_wd=wd, tuned=float(at[batch_size][wd]), rule_wd=rule,
                rule=float(at[big][rule]), control=float(at[big][wd]), rank=rank, values=len(at[big]))


# ------------------------------------------------------------------------------------------- verdicts
def findings(results: pd.DataFrame) -> pd.DataFrame:
    """One row per claim: ``item``, ``claim``, ``paper_value``, ``ours`` (text), ``mean``/``lo``/``hi`` (the paired
    interval, or the rank), ``seeds``, ``word``/``reason`` (``results.findings.judge``) and ``verdict`` (published
    text). The regime check (``results.findings.regime``) is that of the two runs the claims compare, the tuned
    runs at B and the rule's at 4B: any result before the Δθ of either settled is *not judged*."""
    a = arms(results)
    real = fnd.dataset_label(results) != fnd.SYNTHETIC
    reg, reg_rule = (fnd.regime(list(a[a.setting == arm].history) if len(a) else []) for arm in ARMS[:2])
    both = (reg["settled"], reg_rule["settled"])
    settled = False if False in both else None if None in both else True
    n_seeds = results["seed"].nunique() if "seed" in results and len(results) else 0
    minutes = fnd.train_minutes(results) / n_seeds if n_seeds else None  # one more seed of the whole plan
    rows = []

    def row(item, claim, paper_value, ours, iv, word_reason, detail, interval=None):
        word, reason = word_reason
        if interval is not None and word not in ("undecided", fnd.NOT_JUDGED):
            interval.pop("to_decide", None)
        rows.append(dict(item=item, claim=claim, paper_value=paper_value, ours=ours, mean=iv.get("mean"),
                         lo=iv.get("lo"), hi=iv.get("hi"), seeds=iv.get("n", 0), word=word, reason=reason,
                         verdict=fnd.verdict_words(word, reason, detail),
                         interval=interval or fnd.interval_fields(iv.get("diff", fnd.NO_DIFFERENCE))))

    # 1. Δθ: the rule's at 4B over the tuned one at B (paired log-ratio); the control's beside it
    p = _pairs(a, "dtheta", ARMS[1], ARMS[0])
    q = _pairs(a, "dtheta", ARMS[2], ARMS[0])
    rule = rules.rule(RULE_KEYS[0])  # "≈" by TOST: the 90 % interval of the log ratio inside ±log(SAME_ANGLE)
    iv = paired_interval(np.log(p[ARMS[1]] / p[ARMS[0]]), rule.level) if len(p) else paired_interval([])
    ivc = paired_interval(np.log(q[ARMS[2]] / q[ARMS[0]])) if len(q) else paired_interval([])
    band = math.log(SAME_ANGLE)
    ratio = {k: math.exp(iv[k]) if math.isfinite(iv[k]) else math.nan for k in ("mean", "lo", "hi")}
    cratio = math.exp(ivc["mean"]) if math.isfinite(ivc["mean"]) else math.nan
    # "the same Δθ": the paired log-ratio's interval inside ±log(SAME_ANGLE) (an "≈" with that margin)
    judged = (fnd.judge_difference(iv["diff"], "≈", margin=band, settled=settled, real_data=real, rule=rule)
              if iv["n"] else fnd.judge(None, False))
    pp = paper_protocol()
    t3 = f"Table 3 (b), B = {pp['batch_size']} → {pp['big']}" if pp else "Table 3 (b)"
    row("Eq. 27, λ × 4 at B × 4", "the rule's weight decay at 4B recovers the angular update per epoch of the "
        "tuned setting at B", "the same tuning factor, the same Δθ per epoch (Eq. 27; Fig. 4, after 50 epochs)",
        f"Δθ rule / tuned {_ratio(ratio)}, control / tuned {fnd.num(cratio)}",
        dict(iv, mean=ratio["mean"], lo=ratio["lo"], hi=ratio["hi"]), judged,
        f"ratio {_ratio(ratio)} (90 %; same: within ×{SAME_ANGLE:g}); keeping λ: {fnd.num(cratio)}",
        interval={**fnd.interval_fields(iv["diff"], margin=band, rule=rule, gate_ok=settled,
                                        to_decide=_to_decide(iv["diff"], "≈", band, settled, judged, minutes, real,
                                                             units="(log ratio)")),
                  "scale": "log"})  # estimate, ci: log ratios

    # 2./3. accuracy: rule − control and rule − tuned, paired by seed
    paper_d = {(ARMS[1], ARMS[2]): pp.get("rule", math.nan) - pp.get("control", math.nan),
               (ARMS[1], ARMS[0]): pp.get("rule", math.nan) - pp.get("tuned", math.nan)}
    for item, x, y, claim, directional in (
            ("Eq. 27, λ × 4 at B × 4", ARMS[1], ARMS[2], "at 4B the rule's weight decay beats keeping the tuned one "
             "(test accuracy)", True),
            ("Eq. 27, λ × 4 at B × 4", ARMS[1], ARMS[0], "the rule's weight decay at 4B recovers the tuned "
             "accuracy at B", False)):
        paper_value = f"{t3}: {_short(x)} − {_short(y)} {fnd.num(paper_d[(x, y)], '+.2f')} points"
        p = _pairs(a, "test_acc", x, y)
        iv = paired_interval(p[x] - p[y]) if len(p) else paired_interval([])
        rel, margin = (">", None) if directional else ("≳", RECOVER_MARGIN)  # recovered: not worse by > margin
        rule = rules.rule(RULE_KEYS[1] if directional else RULE_KEYS[2])
        judged = (fnd.judge_difference(iv["diff"], rel, margin=margin, settled=settled, real_data=real, rule=rule)
                  if iv["n"] else fnd.judge(None, False))
        row(item, claim, paper_value, f"{_short(x)} − {_short(y)} {_points(iv)}", iv, judged,
            f"{_short(x)} − {_short(y)} {_points(iv)}" + (f" (margin −{margin:g})" if margin else ""),
            interval=fnd.interval_fields(iv["diff"], paper_effect=paper_d[(x, y)], margin=margin, rule=rule,
                                         gate_ok=settled,
                                         to_decide=_to_decide(iv["diff"], rel, margin, settled, judged, minutes, real,
                                                              paper_effect=paper_d[(x, y)])))

    # 4. the paper's own reading (Tables 3-4): the rule's λ is best or second of the searched values at 4B
    cells = search(results)
    big = cells[(cells.stage == "transfer") & cells.test_acc.notna()]
    rule = a[a.setting == ARMS[1]]
    if len(big) and len(rule):
        w = float(rule.weight_decay.iloc[0])
        mine = big[np.isclose(big.weight_decay, w, rtol=1e-9, atol=0)]
        rank = int(mine["rank"].iloc[0])
        others = big[~np.isclose(big.weight_decay, w, rtol=1e-9, atol=0)].sort_values("test_acc", ascending=False)
        margin = float(mine.test_acc.iloc[0] - others.test_acc.iloc[0]) if len(others) else math.nan
        # the paired interval of (rule − best other λ), and for a rank below second the one to the second cell
        per = results[(results.stage == "transfer") & (results.status == "finished")].pivot_table(
            index="seed", columns="weight_decay", values="test_acc", aggfunc="mean")
        col = lambda wd: next((per[c] for c in per.columns if np.isclose(c, wd, rtol=1e-9, atol=0)),  # noqa: E731
                              pd.Series(dtype=float))
        d_best = fnd.difference(col(w), col(float(others.weight_decay.iloc[0]))) if len(others) else fnd.NO_DIFFERENCE
        seeds = int(mine.runs.iloc[0] - mine.diverged.iloc[0])
        # the rule's λ against every other λ, each contrast from the pooled error of the 4B search (seed blocks)
        rule4 = rules.rule(RULE_KEYS[3])
        ref = next((c for c in per.columns if np.isclose(c, w, rtol=1e-9, atol=0)), None)
        contrasts = fnd.pooled_contrasts(per, ref) if ref is not None else {}
        bounds = [(d.lo, d.hi) for d in contrasts.values()]
        if real and seeds < fnd.MIN_SEEDS:
            judged = ("undecided", f"{seeds} seed{'s' if seeds != 1 else ''} on real images, {fnd.MIN_SEEDS} needed")
        else:
            judged = rules.decide(rule4, contrasts=bounds, gate_ok=settled, real_data=real,
                                  gate_words="before the regime settled")
        # the deciding contrast, with its own interval: the one with the second-lowest lower bound (holds needs all
        # but one lower bound above 0)
        by_lo = sorted(contrasts.items(), key=lambda kv: kv[1].lo)
        near_wd, deciding = by_lo[min(1, len(by_lo) - 1)] if by_lo else (None, fnd.NO_DIFFERENCE)
        word = {1: "best", 2: "second"}.get(rank, f"rank {rank} of {len(big)}")
        pooled = (f"; pooled: shown above {sum(lo > 0 for lo, _ in bounds)} of the {len(bounds)} other λ, the "
                  f"deciding contrast (against λ {near_wd:g}) {deciding.text()}" if bounds else "")
        row("Eq. 27, λ × 4 at B × 4 (Tables 3-4's reading)", "at 4B the rule's weight decay is best or second of "
            "the searched values", _paper_rank(pp, t3),
            f"{word} of {len(big)}, {d_best.text()} to the best other", dict(mean=rank, lo=math.nan, hi=math.nan,
                                                                              n=int(mine.runs.iloc[0])),
            judged, f"{word} of {len(big)} values of λ at 4B, {d_best.text()} points to the best other λ "
                    f"(paired by seed){pooled}",
            interval={**fnd.interval_fields(deciding, rule=rule4, gate_ok=settled,
                                            to_decide=_to_decide(deciding, ">", None, settled, judged, minutes, real,
                                                                 blocks=max(1, len(bounds)))),
                      "contrasts": {f"{c:g}": [fnd.finite_or_none(d.lo), fnd.finite_or_none(d.hi)]
                                    for c, d in contrasts.items()},
                      "deciding": f"rule's λ − λ {near_wd:g}" if near_wd is not None else ""})
    else:
        row("Eq. 27, λ × 4 at B × 4 (Tables 3-4's reading)", "at 4B the rule's weight decay is best or second of "
            "the searched values", _paper_rank(pp, t3), "", {}, fnd.judge(None, False), "")
    out = pd.DataFrame(rows)
    out.attrs.update(regime=reg, regime_rule=reg_rule)
    return out


def _to_decide(d, rel, margin, settled, judged, minutes, real, paper_effect=None, units="points", blocks=1) -> str:
    """What would decide an *undecided* claim (``to_decide``): the regime where the gate is closed (:data:`GATE_FIX`),
    and the seeds (cpu minutes at ``minutes`` per seed of the plan) at the observed spread (``findings.decide_text``)."""
    word, reason = judged
    if word not in ("undecided", fnd.NOT_JUDGED) or not real or not math.isfinite(d.diff):
        return ""
    gated = word == fnd.NOT_JUDGED and "within the noise" not in reason and "holds 0" not in reason
    pe = paper_effect if paper_effect is not None and math.isfinite(paper_effect) else None
    seeds = "" if gated else fnd.decide_text(d, rel, margin=margin, minutes_per_seed=minutes, paper_effect=pe,
                                             units=units, blocks=blocks)
    if settled is False:
        return fnd.decide_text(d, rel, gated=True, gate_fix=GATE_FIX) + (f"; then {seeds}" if seeds else "")
    return seeds


def _paper_rank(pp: dict, t3: str) -> str:
    """The paper's reading of the rank claim: the rule's cell among the λ of Table 3 (b) at 4B."""
    if not pp:
        return "best or second in every column (Tables 3-4)"
    word = {1: "best", 2: "second"}.get(pp["rank"], f"rank {pp['rank']}")
    return f"{t3}: {word} of {pp['values']}"


def _short(arm: str) -> str:
    return arm.split(" at ")[0]


def _ratio(r: dict) -> str:
    if not math.isfinite(r["mean"]):
        return "n/a"
    ci = f" [{r['lo']:.2f}, {r['hi']:.2f}]" if math.isfinite(r["lo"]) else " (one seed: no interval)"
    return f"{r['mean']:.2f}{ci}"


def _points(iv: dict) -> str:
    if not iv["n"]:
        return "n/a"
    ci = (f", {int(LEVEL * 100)} % interval [{iv['lo']:+.2f}, {iv['hi']:+.2f}]" if math.isfinite(iv["lo"])
          else " (one seed: no interval)")
    return f"{iv['mean']:+.2f} points{ci}"


def regime_words(results: pd.DataFrame) -> str:
    """Whether the two runs the claims compare (the tuned runs at B, the rule's at 4B) reached the regime the
    claims speak of, in words for the first screen's conditions line (``results.findings.regime``)."""
    a = arms(results)
    parts = []
    for arm in ARMS[:2]:
        r = fnd.regime(list(a[a.setting == arm].history) if len(a) else [])
        state = ("Δθ settled" if r["settled"] else "Δθ not settled" if r["settled"] is False else "Δθ not measured")
        drift = f" (drift {100 * r['drift']:.0f} %)" if math.isfinite(r["drift"]) else ""
        parts.append(f"{_short(arm)}: {state}{drift}")
    return "; ".join(parts) + " before the first LR decay"


def claims(found: pd.DataFrame, data: str, results: pd.DataFrame, model: str) -> list[dict]:
    """The rows ``results.publish.record_claims`` writes (one per claim of :func:`findings`), with the interval
    fields of ``results.findings.interval_fields``."""
    minutes = fnd.train_minutes(results)
    regime = regime_words(results)  # the measured regime of the two arms the claims compare (their gate)
    return [dict(paper=PAPER, item=f"{r.item}, timm {model}", claim=r.claim, data=data, seeds=int(r.seeds),
                 ours=r.ours, paper_value=r.paper_value, verdict=r.verdict, word=r.word, train_minutes=minutes,
                 regime=regime, **r.interval)
            for r in found.itertuples()]


def what_we_found(found: pd.DataFrame, results: pd.DataFrame, data: str) -> str:
    """The "What we found" paragraph, every number computed from the runs."""
    cells = search(results)
    a = arms(results)
    if not len(a):
        return f"**{data}.** No run at B has finished yet: nothing to compare."
    t = arm_table(a).set_index("setting")
    tune = cells[cells.stage == "tune"].sort_values("weight_decay")
    lead = tune.test_acc.max() - tune.test_acc.nlargest(2).iloc[-1] if tune.test_acc.notna().sum() > 1 else math.nan
    def regime_words(reg: dict) -> str:
        return ("not measured" if reg.get("settled") is None else
                f"{'settled' if reg['settled'] else 'still drifting'} before the first LR decay (drift "
                f"{100 * reg['drift']:.0f} % over epochs {reg['window'][0]}–{reg['window'][1]})")

    settled = regime_words(found.attrs.get("regime", {}))
    tuned = t.loc[ARMS[0]]
    lines = [f"**{data}.** The search at B = {int(tuned['B'])} picked λ = {tuned['λ']:g} (tuning factor "
             f"{tuned['tuning factor']:.3g}; {fnd.num(tuned['test acc'])} %, ahead of the next searched value by "
             f"{fnd.num(lead)} points; its Δθ {settled})."]
    if ARMS[1] in t.index and ARMS[2] in t.index:
        rule, ctrl = t.loc[ARMS[1]], t.loc[ARMS[2]]
        lines.append(f"At B = {int(rule['B'])} the rule sets λ = {rule['λ']:g} (the same factor) and turns the "
                     f"weights by {fnd.num(rule['Δθ (rad)'], '.3f')} rad per epoch before the decay, against "
                     f"{fnd.num(tuned['Δθ (rad)'], '.3f')} for the tuned setting; keeping λ = {ctrl['λ']:g} quarters "
                     f"the factor and gives {fnd.num(ctrl['Δθ (rad)'], '.3f')}. Accuracy: rule "
                     f"{fnd.num(rule['test acc'])} %, control {fnd.num(ctrl['test acc'])} %, tuned "
                     f"{fnd.num(tuned['test acc'])} %. The rule's Δθ at B = {int(rule['B'])} is "
                     f"{regime_words(found.attrs.get('regime_rule', {}))}; a result against a claim counts as *no* "
                     f"only where both settled.")
    pp = paper_protocol()
    if pp:
        lines.append(f"The paper's Table 3 (b) (scale-invariant ResNet-18, CIFAR-10) read with the same protocol: "
                     f"tuned λ = {pp['tuned_wd']:g} at B = {pp['batch_size']} ({pp['tuned']:.2f} %); at B = "
                     f"{pp['big']} the rule's λ = {pp['rule_wd']:g} gives {pp['rule']:.2f} % and the kept λ "
                     f"{pp['control']:.2f} %.")
    lines.append("")
    lines += [f"* {r.claim}: *{r.verdict}*" for r in found.itertuples()]
    return "\n".join(lines)


def verdict_line(found: pd.DataFrame) -> str:
    """One short line for the runner's verdict column: the count of each verdict word, and each claim's word in the
    order of :func:`findings` (Δθ, rule vs control, rule vs tuned, rank)."""
    return (fnd.word_counts(list(found.word)) + " (" + ", ".join(found.word) + ")")


# ------------------------------------------------------------------------------------------- figures
def plot_search(cells: pd.DataFrame, a: pd.DataFrame, ax=None, title: str = ""):
    """Test accuracy against the tuning factor at B and at 4B (mean ± sd over seeds): with the rule, the two
    curves meet at the same factor. The tuned, rule's and control's settings are marked."""
    import matplotlib.pyplot as plt

    from ...results.figures import legend_outside

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.6))
    for b, g in cells.groupby("batch_size"):
        g = g.sort_values("tuning_factor")
        ax.errorbar(g.tuning_factor, g.test_acc, yerr=g["std"].fillna(0), marker="o", capsize=3, label=f"B = {b}")
    marks = {ARMS[0]: "*", ARMS[1]: "D", ARMS[2]: "X"}
    for arm, m in marks.items():
        g = a[a.setting == arm]
        if len(g) and g.test_acc.notna().any():
            ax.scatter([g.tuning_factor.iloc[0]], [g.test_acc.mean()], marker=m, s=110, zorder=5,
                       facecolors="none", edgecolors="k", label=arm)
    ax.set_xscale("log")
    _factor_ticks(ax, cells.tuning_factor)
    ax.set_xlabel("tuning factor N·η·λ / (B(1−μ))")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.legend()
    legend_outside(ax)
    return ax


def _factor_ticks(ax, factors) -> None:
    """Ticks at the tuning factors drawn, labelled as plain numbers, and no minor labels: a log axis's default
    labels its minor ticks too (2×10⁻², 3×10⁻², 4×10⁻² …), which run into each other."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    values = sorted({round(float(v), 12) for v in factors if v is not None and math.isfinite(v) and v > 0})
    if not values:
        return
    ax.xaxis.set_major_locator(FixedLocator(values))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticklabels([f"{v:.3g}" for v in values])


# ------------------------------------------------------------------------------------------- Eq. 27 beside the runs
#: where the tutorial's published cpu runs leave the table of :func:`angle_table` (read by ``python -m repro_lib tune``)
PUBLISHED_ANGLES = Path(__file__).resolve().parents[3] / "reports" / "cpu" / "tuning_rule" / "angles.csv"


def angle_table(a: pd.DataFrame) -> pd.DataFrame:
    """Per setting (:data:`ARMS`): the tuning factor, the first-order reading arccos(1 − TF) of Eq. 27, the measured
    Δθ per epoch before the LR decay (mean over seeds, :func:`window_angle`) and their ratio."""
    rows = []
    for arm in ARMS:
        g = a[a.setting == arm]
        if not len(g):
            continue
        tf = float(g.tuning_factor.iloc[0])
        first = tuning.angular_update_per_epoch(tf) if tf <= 2 else math.nan
        measured = float(g.dtheta.mean())
        rows.append({"setting": arm, "tuning factor": tf, "arccos(1 − TF) (rad)": first,
                     "measured Δθ (rad)": measured, "measured / arccos(1 − TF)": measured / first})
    return pd.DataFrame(rows)


def published_angle_ratios(path: Path | str | None = None, optimizer: str = "sgd") -> str:
    """One line: what the tutorial's published runs (SGD) measured as a fraction of arccos(1 − TF) (from the table
    the published notebook wrote, :data:`PUBLISHED_ANGLES`); '' when it is not there or for another optimizer."""
    path = Path(path or PUBLISHED_ANGLES)
    if optimizer != "sgd" or not path.is_file():
        return ""
    t = pd.read_csv(path)
    parts = [f"{r['setting']} (TF {r['tuning factor']:.3g}) {r['measured / arccos(1 − TF)']:.2f}"
             for _, r in t.iterrows() if math.isfinite(r["measured / arccos(1 − TF)"])]
    return ("measured/first-order in the published tutorial runs (reports/cpu/tuning_rule, timm test_byobnet, "
            "before the LR decay): " + ", ".join(parts)) if parts else ""


def plot_angles(hist: pd.DataFrame, a: pd.DataFrame, ax=None, title: str = ""):
    """Δθ per epoch of the three settings (mean and band over seeds, ``results.figures.plot_angular``) with
    arccos(1 − TF) of each distinct factor as a gray dashed reference, labelled in the right margin, off the curves."""
    import matplotlib.pyplot as plt

    from ...results import figures

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.8))
    figures.plot_angular(hist, hue="setting", ax=ax, title=title)
    levels = {}
    for arm in ARMS:
        g = a[a.setting == arm]
        if len(g):
            levels.setdefault(round(float(g.tuning_factor.iloc[0]), 12), []).append(_short(arm))
    trans = ax.get_yaxis_transform()  # x in axes units, y in data units
    for tf, who in levels.items():
        if 0 < tf <= 2:
            y = math.acos(1 - tf)
            ax.axhline(y, color="gray", ls="--", lw=1, zorder=1)
            ax.text(1.01, y, f"arccos(1−TF), TF {tf:.2g}\n({', '.join(who)})", transform=trans, fontsize=figures.MIN_FONT,
                    color="gray", va="center", ha="left", clip_on=False)
    seen = float(hist["angular_update"].max()) if "angular_update" in hist and len(hist) else math.nan
    top = max([math.acos(1 - tf) for tf in levels if 0 < tf <= 2] + ([seen] if math.isfinite(seen) else []) + [0.1])
    ax.set_ylim(0, 1.1 * top)  # every epoch shown, the references included
    ax.set_ylabel("Δθ per epoch (rad)")
    return ax


def recipe_table(runs: dict, tuning_factor: float) -> pd.DataFrame:
    """The recipe's runs side by side, one row per epoch: Δθ (Eq. 11, rad) and ‖x‖ of the invariant tensors at each
    batch size of ``runs`` ({B: (λ, ``StepTracker.history``)}), and arccos(1 − TF) beside them."""
    rows = {}
    for b, (wd, history) in runs.items():
        for h in history:
            r = rows.setdefault(h["epoch"], {"epoch": h["epoch"]})
            r[f"Δθ at B = {b}, λ = {wd:.3g} (rad)"] = h["angular_update"]
            r[f"‖x‖ at B = {b}"] = h["weight_norm"]
    out = pd.DataFrame([rows[e] for e in sorted(rows)])
    out["arccos(1 − TF) (rad)"] = tuning.angular_update_per_epoch(tuning_factor)
    return out


# ------------------------------------------------------------------------------------------- a joint group, per step
def group_angle_run(model, found, x, y, steps: int, batch_size: int, lr: float, momentum: float,
                    weight_decay: float, other_weight_decay: float, seed: int = 0) -> pd.DataFrame:
    """Train ``model`` (in place) for ``steps`` SGD steps on ``(x, y)`` (shuffled each pass, ``seed``) with
    ``repro_lib.tuning.param_groups(model, found, weight_decay, other_weight_decay)`` and record every step's angle
    with ``repro_lib.angular.StepTracker`` (``steps_per_epoch=1``): one row per step, ``step``, ``loss``, and per
    joint group of ``found`` the angle it turned (``angle_<k>``, rad) and its norm (``norm_<k>``)."""
    import torch
    import torch.nn.functional as F

    from ...angular import StepTracker

    opt = torch.optim.SGD(tuning.param_groups(model, found, weight_decay=weight_decay,
                                              other_weight_decay=other_weight_decay), lr=lr, momentum=momentum)
    tracker = StepTracker(opt, model, found, steps_per_epoch=1)
    order = torch.Generator().manual_seed(seed)
    losses, model = [], model.train()
    while len(losses) < steps:
        for i in torch.randperm(len(x), generator=order).split(batch_size):
            if len(losses) == steps or len(i) < batch_size:
                break
            opt.zero_grad()
            loss = F.cross_entropy(model(x[i]), y[i])
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    tracker.remove()
    rows = []
    for h, loss in zip(tracker.history, losses):
        row = dict(step=h["epoch"], loss=loss)
        for k, (a, n) in enumerate(zip(h.get("angular_update_per_group", []), h.get("weight_norm_per_group", []))):
            row[f"angle_{k}"], row[f"norm_{k}"] = a, n
        rows.append(row)
    return pd.DataFrame(rows)


#: where the tutorial's published deit_tiny run leaves :func:`step_angle_table` (read by ``python -m repro_lib tune``)
PUBLISHED_STEP_ANGLES = PUBLISHED_ANGLES.parent / "step_angles.csv"


def step_angle_table(run: pd.DataFrame, found, lr: float, weight_decay: float, momentum: float,
                     settle: int) -> pd.DataFrame:
    """Per joint group of ``found`` tracked in ``run`` (:func:`group_angle_run`): its size, the measured angle per step
    after ``settle`` steps (the root mean square: the derivation's δ² = E‖d‖²/‖w‖²), its spread over 50-step blocks
    (min and max of their RMS), the prediction sqrt(2ηλ/(1+μ)) (``repro_lib.tuning.angular_update_per_step``, SGD) and
    the ratio measured / predicted."""
    predicted = tuning.angular_update_per_step(lr, weight_decay, momentum)
    rows = []
    late = run[run.step > settle]
    for k, group in enumerate(found.groups):
        col = f"angle_{k}"
        if col not in late or not len(late):
            continue
        blocks = [float(np.sqrt((b[col] ** 2).mean())) for _, b in late.groupby((late.step - settle - 1) // 50)
                  if len(b) >= 25]
        measured = float(np.sqrt((late[col] ** 2).mean()))
        rows.append({"group": k, "tensors": len(group), "first tensors": ", ".join(group[:3]) + " …",
                     "steps measured": len(late), "optimizer": "sgd", "lr": lr, "weight decay": weight_decay,
                     "momentum": momentum, "measured angle per step (rad)": measured,
                     "lowest 50-step block (rad)": min(blocks) if blocks else math.nan,
                     "highest 50-step block (rad)": max(blocks) if blocks else math.nan,
                     "sqrt(2ηλ/(1+μ)) (rad)": predicted, "measured / predicted": measured / predicted})
    return pd.DataFrame(rows)


def published_step_angles(path: Path | str | None = None, optimizer: str = "sgd") -> str:
    """One line: the published tutorial's joint group of timm deit_tiny, its measured angle per step against
    sqrt(2ηλ/(1+μ)) (:data:`PUBLISHED_STEP_ANGLES`); '' when it is not there or for another optimizer than the
    run's."""
    path = Path(path or PUBLISHED_STEP_ANGLES)
    if not path.is_file():
        return ""
    t = pd.read_csv(path)
    t = t[t["optimizer"] == optimizer]
    if not len(t):
        return ""
    r = t.iloc[0]
    return (f"measured per step in the published tutorial run (reports/cpu/tuning_rule, timm deit_tiny, its "
            f"{int(r['tensors'])} residual-stream writers as one group, SGD lr {r['lr']:g}, wd {r['weight decay']:g}, "
            f"momentum {r['momentum']:g}): {r['measured angle per step (rad)']:.4g} rad against "
            f"sqrt(2 lr wd/(1+momentum)) = {r['sqrt(2ηλ/(1+μ)) (rad)']:.4g} (ratio "
            f"{r['measured / predicted']:.2f})")


def plot_step_angles(run: pd.DataFrame, lr: float, weight_decay: float, momentum: float, settle: int, ax=None,
                     title: str = ""):
    """Each step's angle of the first joint group (a 20-step running RMS over the raw steps) and its norm, with
    sqrt(2ηλ/(1+μ)) as a dashed reference and the first measured step marked."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.6))
    ax.plot(run.step, run.angle_0, lw=0.6, alpha=0.35, color="C0", label="angle of a step")
    ax.plot(run.step, np.sqrt((run.angle_0 ** 2).rolling(20, min_periods=5).mean()), color="C0",
            label="running RMS over 20 steps")
    ax.axhline(tuning.angular_update_per_step(lr, weight_decay, momentum), color="gray", ls="--", lw=1,
               label="sqrt(2ηλ/(1+μ))")
    ax.axvline(settle, color="k", lw=0.8, ls=":", label="measured after this step")
    ax.set_xlabel("step")
    ax.set_ylabel("angle per step (rad)")
    ax.set_ylim(0, 2.5 * tuning.angular_update_per_step(lr, weight_decay, momentum))
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper right")
    return ax
