"""The declared second stage of the ``cpu`` profile: which undecided claims get more seeds or grid columns, judged
how, at what overall error and cost (``reports/cpu/stage2_plan.json``), and the runs it trains.

Why a declared plan: adding runs to a claim because its first look came out *undecided* is a second look at the
same question, and judged again at the first level the procedure errs more often than that level says
(``repro_lib.results.stages``). So before any of its runs exists the plan fixes, per targeted claim:

* **what is added** — seeds to the claim's own runs (the stage-1 seeds are 0, 1, 2; the added ones follow), grid
  columns for the pooled gap, or one long run that measures how long a regime takes;
* **the stage-2 rule** — the claim's own rule (``repro_lib.results.rules``: the same test, margin and gate) on
  *all* the seeds, at one-sided 0.005 where the first stage used 0.025 and 0.01 where it used 0.05
  (``stages.STAGE2_ALPHA``); judged once, never a third time;
* **the procedure's overall error per side** — simulated under the rule's own null boundary for the claim's exact
  design (``stages.procedure_error``, the larger of a fixed size and the size aimed at the first stage's estimate);
* **the expected cpu minutes** — the added runs at the per-seed minutes the claim's own records measured.

How the targets were chosen (*choice*, stated here and in the plan): among the claims judged *undecided* with their
regime reached (gate passed or not measured), by claims decided per cpu hour were the first stage's estimate and
spread to hold — so sized on the estimate as well as the spread, the case that raises a second look's error, which
the published error accounts for (its "aimed" sizing) —, within about 20 cpu hours in all. A claim whose runs a
target shares but which is not itself a target keeps its stage-1 verdict on its stage-1 seeds.

Claims whose gate failed (*not judged*: the regime was not reached) cannot be decided by seeds; the plan measures,
on one seed, the schedule that would reach the regime (Li & Arora's ‖w‖²/η̃, back-matching's training fit) and
prices judging them there. A claim judged afresh under a new, longer protocol is a first look at that protocol
(its gate held back every verdict of the shorter one, so no error was spent on it), and the shorter runs stay
published as they are.

``python -m repro_lib.papers.stage2 plan`` writes the plan (``--check``: fails if the committed one differs);
``python -m repro_lib.papers.stage2 train --data-root DIR`` trains its runs into the store under ``reports/``
in the plan's order, resumable (a finished run is never trained again; ``--part I/K`` trains part I of K, so K
processes can share the work without training a run twice); ``status`` counts what is in the store and
the training minutes those runs recorded beside the plan's estimate.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from ..results import rules, stages
from .adamp import cifar as adamp_cifar
from .backmatching import backmatching
from .li_arora import exp_lr
from .yun2022 import grids

#: the data the published cpu records trained on (a stand-in for CIFAR-10, never CIFAR-10 numbers)
DATASET = "cifar10-jpeg"
PROFILE = "cpu"
#: the seeds every targeted claim's first stage used
STAGE1_SEEDS = (0, 1, 2)
PLAN_PATH = Path("reports") / PROFILE / "stage2_plan.json"
#: the total the plan's expected minutes are chosen within
BUDGET_CPU_HOURS = 20.0


@dataclass(frozen=True)
class Target:
    """One planned addition. ``kind``: "seeds" (the claim's runs at more seeds), "columns" (grid columns for a
    pooled claim) or "regime" (one long run measuring the schedule a regime needs; no verdict of its own).
    ``n``: seeds (columns) in all after stage 2; ``runs``: a function returning the added runs' plan (a DataFrame
    with a ``cfg`` column; for a "seeds" target it has ``.at(seeds)``, the same runs at other seeds);
    ``minutes_per_unit``: cpu minutes per added seed from the claim's records (the other kinds are priced by the
    cost model, :func:`expected_minutes`)."""

    key: str
    kind: str
    notebook: str
    item: str
    claim: str
    rule: str
    runs: Callable[[], pd.DataFrame] = field(repr=False)
    why: str
    n1: int = len(STAGE1_SEEDS)
    n: int = len(STAGE1_SEEDS)
    design: str = "paired"
    cells: int = 2
    minutes_per_unit: float = math.nan

    @property
    def added(self) -> int:
        return self.n - self.n1


# ---------------------------------------------------------------------------------------------- the added runs
def _yun_column(experiment: str, where: dict, seeds) -> Callable[[], pd.DataFrame]:
    """The runs of one published column of a Yun et al. grid at ``seeds`` (its notebook's plan, the cpu profile on
    :data:`DATASET`; ``where``: plan columns and values, e.g. ``{"paper_batch_size": 256}``)."""

    def runs() -> pd.DataFrame:
        plan = grids.get(experiment).plan(PROFILE, seeds=tuple(seeds), dataset=DATASET)
        keep = pd.Series(True, index=plan.index)
        for col, v in where.items():
            keep &= plan[col] == v
        out = plan[keep].reset_index(drop=True)
        out.attrs["max_members"] = plan.attrs.get("max_members", 1)
        return out

    runs.at = lambda other: _yun_column(experiment, where, other)  # the same runs at other seeds
    return runs


def _yun_extra_column(experiment: str, col: str, value) -> Callable[[], pd.DataFrame]:
    """A column of a Yun et al. table the cpu profile does not keep: the same shrink (N, B, η scale, width,
    epochs, the five tuning factors ×¼ … ×4 around the yellow one, or the four of them the paper's table holds),
    the stage-1 seeds, with ``keep[col]`` set to ``value`` (a paper N or B)."""

    def runs() -> pd.DataFrame:
        exp = grids.get(experiment)
        shrink = exp.profiles[PROFILE]
        cpu = dataclasses.replace(shrink, keep={**shrink.keep, col: (value,)})
        plan = dataclasses.replace(exp, profiles={**exp.profiles, PROFILE: cpu}).plan(
            PROFILE, seeds=STAGE1_SEEDS, dataset=DATASET)
        plan.attrs["max_members"] = shrink.max_members
        return plan

    return runs


def _adamp(optimizers, seeds) -> Callable[[], pd.DataFrame]:
    def runs() -> pd.DataFrame:
        base = adamp_cifar.SEEDS[PROFILE]          # the profile's seeds, offset by ``seed`` (0, 1, 2 → 3, 4, 5)
        plan = pd.concat([adamp_cifar.plan(PROFILE, seed=off, dataset=DATASET)
                          for off in range(min(seeds), max(seeds) + 1, len(base))], ignore_index=True)
        plan = plan[(plan.setting == "E.2") & plan.optimizer.isin(optimizers) & plan.seed.isin(seeds)]
        return plan.reset_index(drop=True)

    runs.at = lambda other: _adamp(optimizers, other)  # the same runs at other seeds
    return runs


def _preresnet_probe(label: str, num_epochs: int) -> Callable[[], pd.DataFrame]:
    def runs() -> pd.DataFrame:
        plan = exp_lr.preresnet_plan(PROFILE, dataset=DATASET, num_epochs=num_epochs)
        return plan[(plan.label == label) & (plan.seed == 0)].reset_index(drop=True)

    return runs


def _backmatching_probe(model: str, num_epochs: int) -> Callable[[], pd.DataFrame]:
    def runs() -> pd.DataFrame:
        plan = backmatching.table1_plan(PROFILE, seeds=(0,), dataset=DATASET, num_epochs=num_epochs, n_test=0,
                                        eval_every=num_epochs // 8)
        return plan[plan.model == model].reset_index(drop=True)

    return runs


def _seeds(n: int) -> tuple:
    return tuple(range(len(STAGE1_SEEDS), n))


_GRID = "the yellow cell (tuning factor 10/128) of each {} column is best or second best ({})"
_OPT = "the fitted optimum's tuning factor lies within one grid step (×½–×2) of the yellow one"
_BEST = "the best searched value of each combination has the tuning factor 10/128"

#: the columns added for the pooled gap: every column of Tables 1-7 and 11 the cpu shrink maps to at least 15 steps
#: per epoch (the shrink rules' floor, below which the published N = 500 column did not settle) and whose yellow
#: cell has paper cells on both sides, that the cpu profile does not already train and whose runs no counted column
#: shares (Table 3's B = 512 column is, at cpu size, Table 1's N = 1,000 column run for run; Table 1's N = 50,000
#: column shares its runs with Sec. 3.2's combinations 1-2; the pooled summary counts a shared run once)
POOLED_COLUMNS = (
    ("yun2022_table4", "batch_size", 512),
    ("yun2022_table11", "batch_size", 512), ("yun2022_table5", "n", 12500), ("yun2022_table5", "n", 6250),
    ("yun2022_table2", "n", 50000), ("yun2022_table6", "n", 50000),
    ("yun2022_table7", "n", 50000), ("yun2022_table5", "n", 50000),
    ("yun2022_table3", "batch_size", 128), ("yun2022_table4", "batch_size", 128),
    ("yun2022_table11", "batch_size", 128),
)


def _pooled_runs() -> pd.DataFrame:
    plans = [_yun_extra_column(*c)() for c in POOLED_COLUMNS]
    out = pd.concat(plans, ignore_index=True)
    out.attrs["max_members"] = 3
    return out


#: the plan, in training order (claims decided per cpu hour, then the regime measurements, then the pooled columns)
TARGETS: tuple[Target, ...] = (
    Target("adamp_adamw", "seeds", "adamp_cifar", "Table 2 direction, CIFAR-10 ResNet-18",
           "test accuracy: AdamP > AdamW", "paired >", _adamp(("adamp", "adamw"), _seeds(5)), n=5,
           minutes_per_unit=19.107732975300376 / 3,
           why="leaning against the claim (−2.11 [−4.38, +0.16]); at its spread 5 seeds would show a lead of "
               "that size at the stage-2 level"),
    Target("table4_b256", "seeds", "yun2022_tables3_4", "Table 4 (a), paper B = 256 (ours: B = 16, N = 1,000)",
           _GRID.format("B", "plain SGD"), "grid best or second",
           _yun_column("yun2022_table4", {"paper_batch_size": 256}, _seeds(6)), n=6, design="pooled", cells=5,
           minutes_per_unit=34.24803906266654 / 3,
           why="the regime reached; yellow − second other +1.24 [−0.06, +2.54] on 8 df"),
    Target("section3_c2_optimum", "seeds", "yun2022_section3", "Sec. 3.2 optimum, combination 2", _OPT,
           "grid optimum", _yun_column("yun2022_section3", {"combination": 2}, _seeds(10)), n=10,
           design="pooled", cells=3, minutes_per_unit=19.4 / 3,
           why="×1.28 [0.71, 2.33]: the optimum near ×1, its interval one fit too wide"),
    Target("section3_c3", "seeds", "yun2022_section3", "Sec. 3.2, combination 3", _BEST, "grid best",
           _yun_column("yun2022_section3", {"combination": 3}, _seeds(11)), n=11, design="pooled", cells=3,
           minutes_per_unit=24.41127686060014 / 3,
           why="yellow best by +2.62 [−2.02, +7.27] on 4 df"),
    Target("section3_c1_optimum", "seeds", "yun2022_section3", "Sec. 3.2 optimum, combination 1", _OPT,
           "grid optimum", _yun_column("yun2022_section3", {"combination": 1}, _seeds(14)), n=14,
           design="pooled", cells=3, minutes_per_unit=18.90338889626679 / 3,
           why="×1.32 [0.68, 2.56]"),
    Target("li_arora_regime", "regime", "li_arora_preresnet32", "Figs 2, 3, 5 and Sec. 2.3",
           "‖w‖²/η̃ settles in the first phase (moves ≤ ×1.2 over its second half)", "li_arora ≈",
           _preresnet_probe("TEXP", 80), n1=0, n=1,
           why="the gate of all seven PreResNet32 claims: ‖w‖²/η̃ still fell ×2.49 over the second half of the "
               "cpu schedule's 10-epoch first phase; before the first decay the step and TEXP schedules do not "
               "depend on the run's length, so one 80-epoch run (a 40-epoch first phase) gives, from its own "
               "history, the shortest first phase over whose second half ‖w‖²/η̃ moves ≤ ×1.2"),
    Target("backmatching_regime", "regime", "backmatching_vgg", "Table 1, CIFAR-10, VGG11-BN",
           "every method fits the training set (final train accuracy ≥ 90 %)", "backmatching >",
           _backmatching_probe("vgg11_bn", 208), n1=0, n=1,
           why="the gate of the three back-matching claims: final train accuracy 51-81 % after 26 (and 104) "
               "epochs; one seed of the four methods at 208 epochs (8x the table's) tells whether that schedule "
               "fits the training set"),
    Target("table6", "seeds", "yun2022_table6", "Table 6 (a), paper N = 25,000 (ours: B = 64, N = 1,000)",
           _GRID.format("N", "cosine LR"), "grid best or second",
           _yun_column("yun2022_table6", {"paper_n": 25000}, _seeds(14)), n=14, design="pooled", cells=5,
           minutes_per_unit=26.59385188651747 / 3,
           why="yellow second; yellow − second other +1.38 [−1.17, +3.93]"),
    Target("table11_b1024", "seeds", "yun2022_tables7_11", "Table 11 (a), paper B = 1,024 (ours: B = 64, N = 1,000)",
           _GRID.format("B", "unmodified"), "grid best or second",
           _yun_column("yun2022_table11", {"paper_batch_size": 1024}, _seeds(23)), n=23, design="pooled",
           cells=5, minutes_per_unit=20.474568588099412 / 3,
           why="leaning below second: yellow − second other −1.51 [−5.09, +2.08]"),
    Target("table11_b256_optimum", "seeds", "yun2022_tables7_11",
           "Table 11 optimum (a), paper B = 256 (ours: B = 16, N = 1,000)", _OPT, "grid optimum",
           _yun_column("yun2022_table11", {"paper_batch_size": 256}, _seeds(17)), n=17, design="pooled", cells=5,
           minutes_per_unit=45.65228884783383 / 3,
           why="×0.43 [0.33, 0.56]: the optimum below the band's ×0.5, its interval reaching into it"),
    Target("pooled_gap", "columns", "yun2022_summary", "Pooled, 11 settled grid columns",
           "across the grid columns, the yellow cell is within one point of the best other cell", "pooled gap",
           _pooled_runs, n1=11, n=11 + len(POOLED_COLUMNS), design="columns",
           why="−0.27 [−1.20, +0.65] over 11 settled columns; the columns below are every further one the cpu "
               "grids hold at 15 or more steps per epoch (a column that does not settle is left out of the pooling, "
               "as in stage 1)"),
)


#: claims the plan does not target, and why no cpu budget decides them
NOT_DECIDABLE = (
    ("yun2022_section3 combinations 4-6, yun2022_table1 N = 1,000, yun2022_table5, yun2022_table9, "
     "yun2022_tables3_4 Table 3 B = 256, yun2022_tables7_11 Table 7",
     "leads of 0.1-0.5 points against per-seed spreads of 1-2: more than 60 seeds at the observed spread "
     "(a smaller spread needs the gpu profile's larger N and longer schedules)"),
    ("every grid optimum whose quadratic misses the cells (Tables 4-7 and 9)", "a finer grid around the optimum, "
     "not more seeds"),
    ("yun2022_table1 N = 500, yun2022_tables3_4 B = 1,024 and Fig. 4, yun2022_tables8_10, yun2022_section3 Fig. 2 "
     "and combinations 4, 6", "not judged: the angular update had not settled before the first decay; a longer "
     "first phase is a new protocol of its own"),
    ("li_arora_preresnet32 (7 claims)", "not judged: the regime needs a longer first phase for all 99 runs (the "
     "regime measurement above prices it)"),
    ("backmatching_vgg (3 claims)", "not judged: the training set is not fitted in the cpu schedule (the regime "
     "measurement above prices a schedule that fits it)"),
    ("adamp_cifar SGDP > SGD", "−0.24 [−2.39, +1.91]: about 90 seeds (13 cpu hours) at the observed spread"),
    ("yun2022_table2, yun2022_tables7_11 Table 11 B = 256, yun2022_section3 combinations 1, 2, "
     "yun2022_section6", "19-33 seeds each (4-6 cpu hours a claim): below the plan's claims per cpu hour"),
    ("adamp_delta, adamp_imagenet", "ImageNet-scale or not judged: no cpu protocol reaches them"),
)


# ----------------------------------------------------------------------------------------------- the plan itself
def _rule(t: Target) -> rules.Rule:
    return rules.rule(t.rule)


def _summary_columns() -> pd.DataFrame:
    cols = pd.read_csv(Path("reports") / PROFILE / "yun2022_summary" / "columns.csv")
    return cols[cols["settled"] == True]  # noqa: E712  (a CSV bool column)


def error_of(t: Target, sims: int = stages.SIMS) -> dict:
    """The procedure's overall error per side of ``t`` (:func:`repro_lib.results.stages.procedure_error`)."""
    r = _rule(t)
    a2 = stages.stage2_alpha(r.alpha)
    if t.design == "columns":
        from .yun2022 import summary

        cols = _summary_columns()
        ses = cols["gap_se"].to_numpy()
        tau2 = summary.pooled(cols["gap"], ses)["tau2"]   # DerSimonian–Laird's between-column variance
        e = stages.two_stage_error("columns", t.n1, t.n, r.alpha, a2, ses=ses, tau2=tau2, sims=sims)
        return {"fixed": e, "aimed": e, "overall": e, "sims": sims, "between_column_variance": tau2}
    return stages.procedure_error(t.design, t.n1, t.n, r.alpha, a2, cells=t.cells, sims=sims)


def expected_minutes(t: Target, runs: pd.DataFrame) -> float:
    """The cpu minutes ``t``'s added runs are expected to take: per added seed as the claim's own records measured,
    else (columns, regime runs) the cost model of the published records (``profiles.estimate_cpu_minutes``)."""
    from ..profiles import estimate_cpu_minutes

    if t.kind == "seeds":
        return round(t.minutes_per_unit * t.added, 1)
    return round(estimate_cpu_minutes(runs), 1)


def pooled_decidable(t: Target) -> dict:
    """For the pooled gap: its standard error with ``t.n`` settled columns (the stage-1 error × √(n1/n): columns
    like the stage-1 ones), the estimate above which it would then be shown ≳ −margin at the stage-2 level, and
    the columns the stage-1 estimate itself would need."""
    from scipy import stats

    r = _rule(t)
    cols = _summary_columns()
    claims = json.loads((Path("reports") / PROFILE / t.notebook / "claims.json").read_text())
    c = next(c for c in claims if is_row_of(t, c))
    lo, hi = (c.get("stage1") or c)["ci"]
    z1, z2 = stats.norm.ppf(1 - r.alpha), stats.norm.ppf(1 - stages.stage2_alpha(r.alpha))
    se1, est = (hi - lo) / (2 * z1), (hi + lo) / 2
    se = se1 * math.sqrt(t.n1 / t.n)
    need = next((k for k in range(t.n1, 1000) if est - z2 * se1 * math.sqrt(t.n1 / k) > -r.margin), None)
    return {"stage1_estimate": round(est, 3), "stage1_se": round(se1, 3), "settled_columns_stage1": len(cols),
            "se_at_plan_size": round(se, 3), "holds_if_estimate_above": round(-r.margin + z2 * se, 3),
            "columns_needed_at_stage1_estimate": need}


def plan_dict(sims: int = stages.SIMS) -> dict:
    """The plan as written to :data:`PLAN_PATH` (no run hashes: the runs follow from the targets' functions)."""
    targets = []
    for t in TARGETS:
        r = _rule(t)
        runs = t.runs()
        entry = {"key": t.key, "kind": t.kind, "notebook": t.notebook, "item": t.item, "claim": t.claim,
                 "why": t.why, "rule": t.rule, "runs": len(runs), "expected_cpu_minutes": expected_minutes(t, runs),
                 "minutes_from": ("the claim's stage-1 records, per seed" if t.kind == "seeds" else
                                  "profiles.estimate_cpu_minutes (the cost model from the published records)")}
        if t.kind == "regime":
            entry["measures"] = t.claim
            entry["configs"] = sorted({f"{c.model} {c.optimizer} {c.schedule} {c.num_epochs} epochs seed {c.seed}"
                                       for c in runs.cfg})
        else:
            a2 = stages.stage2_alpha(r.alpha)
            entry.update({"stage1": {"n": t.n1, "alpha": r.alpha, "level": r.level},
                          "stage2": {"n": t.n, "alpha": a2, "level": round(1 - 2 * a2, 6),
                                     "adds": (f"seeds {t.n1}-{t.n - 1}" if t.kind == "seeds"
                                              else f"{t.n - t.n1} grid columns")},
                          "design": t.design, "cells": t.cells if t.design == "pooled" else None,
                          "error_per_side": {k: (round(v, 4) if isinstance(v, float) else v)
                                             for k, v in error_of(t, sims).items()}})
            if t.kind == "columns":
                entry["columns"] = [f"{e} {c} = {v:,}" for e, c, v in POOLED_COLUMNS]
                entry["decidable"] = pooled_decidable(t)
        targets.append(entry)
    total = sum(e["expected_cpu_minutes"] for e in targets)
    return {
        "profile": PROFILE, "dataset": DATASET, "stage1_seeds": list(STAGE1_SEEDS),
        "rule": ("each target is judged once more, on all its seeds, by its own rule (same test, margin and gate) at "
                 "the stage-2 level; no third stage; a claim sharing a target's runs keeps its stage-1 verdict"),
        "stage2_alpha": {str(k): v for k, v in stages.STAGE2_ALPHA.items()},
        "error": ("the two-stage procedure's overall error per side at the rule's null boundary, simulated "
                  "(repro_lib.results.stages): 'fixed' adds the planned seeds whatever stage 1 gave, 'aimed' "
                  "adds the fewest that stage 1's estimate says would decide; 'overall' is the larger"),
        "chosen_by": ("claims decided per cpu hour at the first stage's estimate and spread, within about "
                      f"{BUDGET_CPU_HOURS:g} cpu hours"),
        "expected_cpu_hours": round(total / 60, 1), "targets": targets,
        "not_decidable": [{"claims": c, "why": w} for c, w in NOT_DECIDABLE],
    }


def write_plan(path: Path = PLAN_PATH, sims: int = stages.SIMS) -> dict:
    d = plan_dict(sims)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(d, indent=1, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return d


def load_plan(path: Path = PLAN_PATH) -> dict:
    return json.loads(Path(path).read_text())


def all_runs(keys=None) -> list[tuple[str, pd.DataFrame]]:
    """``[(target key, its added runs)]`` in the plan's order (``keys``: only these)."""
    return [(t.key, t.runs()) for t in TARGETS if keys is None or t.key in keys]


def check_part(part) -> tuple[int, int]:
    """``part`` as ``(i, k)``, two integers with 1 <= i <= k; a ValueError naming it otherwise."""
    try:
        i, k = part
    except (TypeError, ValueError):
        raise ValueError(f"part: {part!r}; give (i, k) with 1 <= i <= k") from None
    if not (isinstance(i, int) and isinstance(k, int) and 1 <= i <= k):
        raise ValueError(f"part: {i}/{k}; give i/k with 1 <= i <= k")
    return i, k


def part_of(plan: pd.DataFrame, part: tuple[int, int]) -> pd.DataFrame:
    """Part ``i`` of ``k`` (``part``: ``(i, k)``, 1 <= i <= k) of a target's planned runs: its blocks of
    ``plan.attrs["max_members"]`` consecutive runs (one stacked group's worth: the same cell, successive seeds),
    dealt round-robin to the ``k`` parts. The split depends on the plan alone, not on what the store holds, so
    ``k`` processes started at any time, each with its own ``i``, never train the same run."""
    i, k = check_part(part)
    block = max(1, int(plan.attrs.get("max_members", 1)))
    out = plan[[(j // block) % k == i - 1 for j in range(len(plan))]]
    out.attrs = dict(plan.attrs)
    return out


def train(data_root: str, results_dir: str = "reports", keys=None, progress: bool = True,
          part: tuple[int, int] = (1, 1)) -> None:
    """Train every planned run the store lacks, target by target in the plan's order (resumable). ``part``
    ``(i, k)``: only part ``i`` of ``k`` of each target's runs (:func:`part_of`), for ``k`` processes sharing the
    cores, each on its own part."""
    from ..runs.sweep import run_sweep
    from ..store import Store

    store = Store(results_dir)
    for key, plan in all_runs(keys):
        plan = part_of(plan, part)
        todo = sum(store.get(c) is None for c in plan.cfg)
        print(f"{key}{'' if part == (1, 1) else f' (part {part[0]}/{part[1]})'}: {len(plan)} runs, "
              f"{todo} to train", flush=True)
        if todo:
            run_sweep(plan, store=store, data_root=data_root, progress=progress,
                      max_members=int(plan.attrs.get("max_members", 1)), label=key)


def status(results_dir: str = "reports", keys=None, plan_path: Path | None = None) -> pd.DataFrame:
    """Per target: its planned ``runs``, how many the store under ``results_dir`` holds (``finished``), the plan's
    ``planned_minutes`` for all of them and the training minutes the held ones recorded (``recorded_minutes``),
    so that the rest can be priced at the measured rate rather than the plan's estimate."""
    from ..store import Store

    store = Store(results_dir)
    path = Path(plan_path or Path(results_dir) / PROFILE / "stage2_plan.json")
    planned = {e["key"]: e["expected_cpu_minutes"] for e in load_plan(path)["targets"]} if path.exists() else {}
    rows = []
    for k, p in all_runs(keys):
        held = [store.get(c) for c in p.cfg]
        held = [r for r in held if r is not None]
        rows.append({"target": k, "runs": len(p), "finished": len(held), "planned_minutes": planned.get(k),
                     "recorded_minutes": round(sum(float(r.get("train_seconds") or 0) for r in held) / 60, 1)})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m repro_lib.papers.stage2", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan", help="write reports/cpu/stage2_plan.json")
    p.add_argument("--check", action="store_true", help="exit 1 if the committed plan differs from the code's")
    p.add_argument("--sims", type=int, default=stages.SIMS)
    t = sub.add_parser("train", help="train the planned runs the store lacks, in the plan's order")
    t.add_argument("--data-root", default=os.environ.get("REPRO_DATA_ROOT", "data"))
    t.add_argument("--results-dir", default="reports")
    t.add_argument("--only", nargs="*", default=None, help="target keys")
    t.add_argument("--part", default="1/1", metavar="I/K",
                   help="train only part I of K of each target's runs (K processes, each its own I)")
    s = sub.add_parser("status", help="planned runs, how many the store holds, planned and recorded minutes")
    s.add_argument("--results-dir", default="reports")
    a = ap.parse_args(argv)
    if a.cmd == "plan":
        if a.check:
            new, old = plan_dict(a.sims), load_plan()
            if new != old:
                print(f"{PLAN_PATH}: differs from the plan the code declares", file=sys.stderr)
                return 1
            return 0
        d = write_plan(sims=a.sims)
        print(f"{PLAN_PATH}: {len(d['targets'])} targets, {d['expected_cpu_hours']} cpu hours expected")
    elif a.cmd == "train":
        try:
            part = check_part(tuple(int(v) for v in a.part.split("/")))
        except ValueError:
            ap.error(f"--part: {a.part!r}; give I/K with 1 <= I <= K, e.g. 1/2")
        train(a.data_root, a.results_dir, a.only, part=part)
    else:
        print(status(a.results_dir).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------------------------------- judging stage 2
def _stage1_runs(t: Target) -> pd.DataFrame:
    """The target's stage-1 runs: its runs' function at the stage-1 seeds (the same configs the notebook trained)."""
    if not hasattr(t.runs, "at"):
        raise ValueError(f"target: {t.key!r} adds no seeds to runs of its own")
    return t.runs.at(STAGE1_SEEDS)()


def _collect(plan: pd.DataFrame, results_dir) -> pd.DataFrame:
    from ..runs.sweep import run_sweep

    return run_sweep(plan, store=results_dir, collect=True, progress=False)


def _stage2_fields(t: Target, res: pd.DataFrame, rule2: rules.Rule) -> dict:
    """The claim fields of ``t`` judged on every seed of ``res`` by ``rule2`` (the claim's rule at the stage-2
    level): ``ci``, ``estimate``, ``level``, ``seeds``, ``gate_ok``, ``word``, ``reason`` (and ``contrasts`` for a
    grid)."""
    from ..results import findings

    level = rule2.level
    ok = res["status"] == "finished"
    acc = res["test_acc"].where(ok)
    if t.rule == "paired >":
        a = pd.Series(acc[res.optimizer == "adamp"].to_numpy(), index=res.seed[res.optimizer == "adamp"])
        b = pd.Series(acc[res.optimizer == "adamw"].to_numpy(), index=res.seed[res.optimizer == "adamw"])
        both = a.dropna().index.intersection(b.dropna().index)  # the seeds the paired difference reads
        d = findings.difference(a.dropna(), b.dropna(), paired=True, level=level)
        word, reason = rules.decide(rule2, ci=(d.lo, d.hi), gate_ok=None, seeds=d.n)
        return {"ci": [d.lo, d.hi], "estimate": d.diff, "level": level, "seeds": d.n, "gate_ok": None,
                "word": word, "reason": reason, "text": f"AdamP − AdamW {d.diff:+.2f} [{d.lo:+.2f}, {d.hi:+.2f}]",
                "ours": f"AdamP {a[both].mean():.1f}, AdamW {b[both].mean():.1f}"}
    cell = res["tuning_factor"].round(6)
    yellow = float(cell[res["yellow"]].iloc[0])
    per_seed = pd.DataFrame({"seed": res.seed, "cell": cell, "acc": acc}).pivot_table(
        index="seed", columns="cell", values="acc", aggfunc="first", dropna=False)
    histories = [h for h, y in zip(res["history"], res["yellow"]) if y]
    reg = findings.regime(histories)
    settled = reg["settled"]
    regime = findings.regime_text({"settled": settled, "regime_window": reg["window"], "regime_drift": reg["drift"]})
    seeds = int(per_seed[yellow].notna().sum())
    if rules.rule(t.rule).relation == "band":
        fit = findings.fitted_optimum(res["tuning_factor"][ok.to_numpy()], acc[ok], res.seed[ok], yellow,
                                      level=level)
        if not math.isfinite(fit["lo"]):
            means = per_seed.mean()
            best = float(means.idxmax())
            lack = (f" (lack-of-fit p = {fit['fit_p']:.2g})" if math.isfinite(fit["fit_p"])
                    and fit["reason"] == "the quadratic misses the cells" else "")
            return {"ci": [None, None], "estimate": fit["ratio"], "level": level, "seeds": seeds,
                    "gate_ok": settled, "word": "undecided", "scale": "ratio", "ours": "", "regime": regime,
                    "reason": f"no fitted optimum: {fit['reason'] or 'no interval'}",
                    "text": (f"no fitted optimum{lack}; the best cell mean {means[best]:.2f} % at ×{best / yellow:.2g}"
                             f" of the yellow tuning factor, the yellow cell {means[yellow]:.2f} %")}
        word, reason = rules.decide(rule2, ci=(fit["lo"], fit["hi"]), gate_ok=settled, seeds=seeds)
        return {"ci": [fit["lo"], fit["hi"]], "estimate": fit["ratio"], "level": level, "seeds": seeds,
                "gate_ok": settled, "word": word, "reason": reason, "scale": "ratio", "regime": regime,
                "text": f"optimum / yellow tuning factor ×{fit['ratio']:.2f} [{fit['lo']:.2f}, {fit['hi']:.2f}]",
                "ours": f"×{fit['ratio']:.2f} [{fit['lo']:.2f}, {fit['hi']:.2f}]"}
    contrasts = findings.pooled_contrasts(per_seed, yellow, level=level)
    cs = {f"{k:g}": [d.lo, d.hi] for k, d in contrasts.items()}
    word, reason = rules.decide(rule2, contrasts=list(cs.values()), gate_ok=settled, seeds=seeds)
    ordered = sorted(contrasts.values(), key=lambda d: d.diff)
    need = len(ordered) - (1 if rules.rule(t.rule).relation == "best or second" else 0)
    deciding = ordered[len(ordered) - need] if need <= len(ordered) else ordered[0]
    name = "yellow − second other" if need < len(ordered) else "yellow − best other"
    return {"ci": [deciding.lo, deciding.hi], "estimate": deciding.diff, "level": level, "seeds": seeds,
            "gate_ok": settled, "word": word, "reason": reason, "contrasts": cs, "deciding": name, "regime": regime,
            "ours": "yellow " + findings.yellow_text({"yellow_mean": per_seed[yellow].mean(),
                                                      "yellow_sd": per_seed[yellow].std()}),
            "text": (f"deciding contrast yellow − {'second' if need < len(ordered) else 'best'} other cell "
                     f"{deciding.diff:+.2f} [{deciding.lo:+.2f}, {deciding.hi:+.2f}] (pooled, "
                     f"{deciding.df:.0f} df)")}


def judge(notebook: str, claims: list[dict], results_dir="reports", plan_path: Path | None = None) -> list[dict]:
    """``claims`` (a notebook's claim rows, as ``publish.record_claims`` takes them) with every stage-2 target of
    ``notebook`` judged once, where all its planned runs are in the store under ``results_dir``: the claim is
    re-judged on every seed (for the pooled gap: every column) by its rule at the stage-2 level and carries
    ``stage`` 2, ``stage1`` (its first-stage word, verdict, interval, seeds and level) and ``procedure_error`` (the
    two-stage procedure's overall error per side from the plan). A target whose runs are not all in the store
    leaves its claim as it was, with ``stage2`` saying how many of its planned runs exist. Returns new dicts; the
    input is not changed."""
    path = Path(plan_path or Path(results_dir) / PROFILE / "stage2_plan.json")
    out = [dict(c) for c in claims]
    if not path.exists():  # a store without the plan (a user's own results): every claim stays at stage 1
        return out
    plan = load_plan(path)
    by_key = {t.key: t for t in TARGETS}
    regime = REGIME_TEXT.get(notebook)
    text = regime(results_dir) if regime is not None else ""
    for c in out:
        if text and c.get("gate_ok") is False:
            c["to_decide"] = text
    for entry in plan["targets"]:
        t = by_key.get(entry["key"])
        if t is None or entry["notebook"] != notebook or t.kind == "regime":
            continue
        row = next((c for c in out if is_row_of(t, c)), None)
        if row is None:
            continue
        added = _collect(t.runs(), results_dir)
        have = int((added["status"] != "missing").sum())
        if have < len(added):
            row["stage2"] = f"{have} of {len(added)} planned stage-2 runs in the store; judged at stage 1"
            row["to_decide"] = waiting_text(entry, have, len(added))
            continue
        r1 = rules.rule(t.rule)
        if row.get("rule", {}).get("margin") is not None and r1.margin != row["rule"]["margin"]:
            r1 = r1.with_margin(row["rule"]["margin"])
        rule2 = dataclasses.replace(r1, alpha=entry["stage2"]["alpha"])
        if row.get("train_minutes") is not None:   # stage 1's and the added runs' measured minutes
            row["train_minutes"] = row["train_minutes"] + float(pd.to_numeric(added["seconds"], errors="coerce")
                                                                 .sum()) / 60
        if t.kind == "columns":
            _apply(row, _pooled_gap_fields(rule2, results_dir), entry, rule2, unit="columns")
        else:
            res = pd.concat([_collect(_stage1_runs(t), results_dir), added], ignore_index=True)
            _apply(row, _stage2_fields(t, res.drop_duplicates("hash").reset_index(drop=True), rule2), entry, rule2)
    return out


def waiting_text(entry: dict, have: int, runs: int) -> str:
    """What would decide a claim whose declared second stage is still training (its ``to_decide``): the plan's
    entry ``entry`` (what it adds, the stage-2 level, the procedure's error) and the runs left of ``runs``. It
    replaces the first stage's estimate, which was made at the first stage's level and is not the procedure that
    will judge the claim."""
    s2 = entry["stage2"]
    unit = "columns" if entry["kind"] == "columns" else "seeds"
    return (f"its declared second stage: {s2['adds']} ({s2['n']} {unit} in all), judged once at "
            f"α = {s2['alpha']:g} per side (the two-stage procedure errs at most "
            f"{entry['error_per_side']['overall']:.3f} per side); {runs - have} of its {runs} runs still to train "
            f"(`python -m repro_lib.papers.stage2 train`)")


def _li_arora_text(results_dir) -> str:
    m = li_arora_regime(results_dir)
    if not m.get("measured"):
        return ""
    if m["phase"] is None:
        return (f"the regime the claim speaks of: on one {m['probe_epochs']}-epoch TEXP run (the plan's regime "
                f"measurement) ‖w‖²/η̃ had not settled within its {m['probe_phase']}-epoch first phase; a longer "
                f"first phase than that, as the gpu and paper profiles' 80 epochs")
    least = "at least " if m["lower_bound"] else ""
    return (f"the regime the claim speaks of, measured on one {m['probe_epochs']}-epoch TEXP run (the plan's regime "
            f"measurement): ‖w‖²/η̃ moves ≤ ×1.2 over the second half of a first phase of {least}{m['phase']} "
            f"epochs ({m['cpu_phase']} in this schedule, where it moved ×{m['cpu_factor']:.2f}), so a "
            f"{m['num_epochs']}-epoch schedule; the notebook's {m['runs']} runs would take about "
            f"{m['cpu_minutes']:,.0f} cpu minutes there (its measured {m['stage1_minutes']:,.0f} scaled by the "
            f"epochs), beyond the cpu profile's budget; the gpu and paper profiles' first phase is 80 epochs")


#: how the back-matching methods are named in its notebook
METHOD_NAMES = {"sgd": "SGD", "lars": "LARS", "lsalr": "LSALR", "scale_amended_sgd": "SA-SGD"}


def _backmatching_text(results_dir) -> str:
    m = backmatching_regime(results_dir)
    if not m.get("measured"):
        return ""
    accs = ", ".join(f"{METHOD_NAMES.get(k, k)} {v:.1f} %" for k, v in m["train_acc"].items())
    cost = (f"the table's {m['runs']} runs at {m['num_epochs']} epochs alone would take about "
            f"{m['cpu_minutes']:,.0f} cpu minutes (its measured {m['stage1_minutes']:,.0f} scaled by the epochs)")
    if m["fits"]:
        return (f"the regime the claim speaks of, measured on one seed of the four methods (VGG11-BN) at "
                f"{m['num_epochs']} epochs (the plan's regime measurement): every method fits the training set "
                f"there ({accs}); {cost}")
    short = [METHOD_NAMES.get(k, k) for k, v in m["train_acc"].items() if v < 90.0]
    return (f"the regime the claim speaks of: at {m['num_epochs']} epochs (VGG11-BN, one seed of each method, the "
            f"plan's regime measurement) the final train accuracy is {accs}, so {', '.join(short)} still short of the gate's "
            f"90 %: a schedule longer than {m['num_epochs']} epochs, or more images per epoch (the gpu profile); "
            f"{cost}")


#: notebooks whose not-judged claims the plan's regime measurements speak to
REGIME_TEXT = {"li_arora_preresnet32": _li_arora_text, "backmatching_vgg": _backmatching_text}


def is_row_of(t: "Target", claim: dict) -> bool:
    """Whether ``claim`` is the row of target ``t``: its claim text, and its item up to the counts in it (the
    pooled gap's item names its settled columns, which stage 2 changes)."""
    def shape(s):
        return re.sub(r"\d[\d,]*", "#", str(s))
    return shape(claim.get("item")) == shape(t.item) and str(claim.get("claim", "")).startswith(t.claim[:40])


def _apply(row: dict, f: dict, entry: dict, rule2: rules.Rule, unit: str = "seeds") -> None:
    """Write stage 2's judgement ``f`` into the claim ``row``, the first stage's kept under ``stage1``."""
    err = entry["error_per_side"]["overall"]
    row["stage1"] = {k: row.get(k) for k in ("word", "verdict", "ci", "seeds", "level", "contrasts", "ours", "item")
                     if row.get(k) is not None}
    row.update(stage=2, procedure_error=err, ci=[_fin(v) for v in f["ci"]], estimate=_fin(f["estimate"]),
               level=f["level"], seeds=f["seeds"], gate_ok=f["gate_ok"], word=f["word"],
               rule=rule2.fields())
    for k in ("deciding", "regime"):
        if f.get(k):
            row[k] = f[k]
    if "ours" in f:   # the stage-2 values: the first stage's stay under ``stage1``
        row["ours"] = f["ours"]
    if unit == "columns":   # the item names the settled columns pooled: now stage 2's
        row["item"] = re.sub(r"\d[\d,]* settled", f"{f['seeds']} settled", row["item"])
    if unit == "seeds" and row.get("seeds_max") is not None:   # the most seeds a cell holds, now stage 2's
        row["seeds_max"] = max(int(row["seeds_max"]), int(f["seeds"]))
    if "contrasts" in f:
        row["contrasts"] = {k: [_fin(v) for v in ci] for k, ci in f["contrasts"].items()}
    if f.get("scale"):
        row["scale"] = f["scale"]
    lo, hi = row["ci"]
    row["resolution"] = None if lo is None or hi is None else (hi - lo) / 2
    lead = f["word"] if not f["reason"] else f"{f['word']} ({f['reason']})"
    row["verdict"] = (f"{lead}: {f['text']} ({f['seeds']} {unit}, {100 * f['level']:.0f} % interval; stage 2 of a "
                      f"declared two-stage procedure whose overall error is {err:.3f} per side; stage 1: "
                      f"{row['stage1'].get('word')})")
    row.pop("to_decide", None)
    row.pop("stage2", None)
    if f["word"] not in ("holds", "no"):
        row["to_decide"] = ("nothing within the cpu profile: this claim had its one declared second stage (no "
                            "third); the gpu profile's larger runs would")


def _pooled_gap_fields(rule2: rules.Rule, results_dir, added=None) -> dict:
    """The pooled gap over the stage-1 grid columns and the plan's added ones (``added``: default
    :data:`POOLED_COLUMNS`; ``()`` pools the stage-1 columns alone), a run counted once, the settled columns
    pooled, as ``yun2022.summary`` does, at the level of ``rule2``."""
    from .yun2022 import summary

    merged = dict(summary.collect(PROFILE, results_dir, dataset=DATASET))
    for spec in (POOLED_COLUMNS if added is None else added):
        extra = _collect(_yun_extra_column(*spec)(), results_dir)
        merged[spec[0]] = pd.concat([merged[spec[0]], extra], ignore_index=True) if spec[0] in merged else extra
    cols = summary.settled_columns(summary.columns(merged))
    g = summary.pooled(cols.gap, cols.gap_se, level=rule2.level)
    word, reason = rules.decide(rule2, ci=(g["lo"], g["hi"]), real_data=False)
    return {"ci": [g["lo"], g["hi"]], "estimate": g["estimate"], "level": rule2.level, "seeds": g["k"],
            "gate_ok": None, "word": word, "reason": reason, "ours": f"{g['estimate']:+.2f}",
            "text": (f"pooled yellow − best other cell {g['estimate']:+.2f} [{g['lo']:+.2f}, {g['hi']:+.2f}] points "
                     f"(random effects; between-column I² {100 * g['i2']:.0f} %)")}


def _fin(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


# ------------------------------------------------------------------------------------ the regime measurements
#: Li & Arora's Fig. 1 tensor, whose ‖w‖²/η̃ the PreResNet32 claims' gate reads
FIG1_LAYER = "blocks.1.conv1.weight"


def shortest_settled_phase(values, factor: float, min_epochs: int = 4) -> int | None:
    """The shortest first phase L (epochs) over whose second half a per-epoch series moves by at most ``factor``
    (|log(v[L] / v[L // 2])| ≤ log factor, the gate's own reading: ``li_arora.report.phase1_settling``) and stays
    so for every longer phase the series covers; None where no such L exists within it."""
    v = [float(x) for x in values]
    ok = []
    for L in range(min_epochs, len(v) + 1):
        half = v[L // 2:L]
        ok.append((L, half[0] > 0 and half[-1] > 0 and abs(math.log(half[-1] / half[0])) <= math.log(factor)))
    for i, (L, good) in enumerate(ok):
        if good and all(g for _, g in ok[i:]):
            return L
    return None


def _runs_minutes(plan: pd.DataFrame, results_dir) -> float:
    res = _collect(plan, results_dir)
    return float(pd.to_numeric(res["seconds"], errors="coerce").sum() / 60)


def li_arora_regime(results_dir="reports") -> dict:
    """What the one long TEXP run of the plan measured: ``phase`` (the shortest first phase over whose second half
    ‖w‖²/η̃ of :data:`FIG1_LAYER` moves ≤ ×1.2, ``li_arora.report.SETTLED_FACTOR``), ``num_epochs`` (the step
    schedule that has it: twice the phase), the factor over the cpu schedule's own phase, and ``cpu_minutes`` (the
    notebook's runs at that schedule: the published runs' measured minutes scaled by the epochs). ``measured``
    False until the run is in the store."""
    from ..runs.sweep import histories
    from .li_arora.report import SETTLED_FACTOR, phases

    t = {x.key: x for x in TARGETS}["li_arora_regime"]
    res = _collect(t.runs(), results_dir)
    if (res["status"] != "finished").any():
        return {"measured": False}
    hist = exp_lr.unscale_history(histories(res, keys=["label", "seed"], tensor=FIG1_LAYER))
    v = (hist.tensor_weight_norm ** 2 / hist.lr).to_numpy()
    long_epochs = int(res.cfg.iloc[0].num_epochs)
    first = phases(long_epochs)[0]
    phase = shortest_settled_phase(v[:first], SETTLED_FACTOR)
    cpu_epochs = exp_lr.PRERESNET_SIZES[PROFILE]["num_epochs"]
    cpu_phase = phases(cpu_epochs)[0]
    stage1 = exp_lr.preresnet_plan(PROFILE, dataset=DATASET)
    minutes = _runs_minutes(stage1, results_dir)
    epochs = None if phase is None else 2 * phase
    # a phase found within the probe's last tenth is a lower bound: the series may not stay flat past the probe
    lower_bound = phase is None or phase > 0.9 * first
    return {"measured": True, "probe_epochs": long_epochs, "probe_phase": first, "phase": phase,
            "lower_bound": lower_bound, "num_epochs": epochs,
            "cpu_phase": cpu_phase, "cpu_factor": float(v[cpu_phase - 1] / v[cpu_phase // 2]),
            "runs": len(stage1), "cpu_minutes": None if epochs is None else minutes * epochs / cpu_epochs,
            "stage1_minutes": minutes}


def backmatching_regime(results_dir="reports") -> dict:
    """What the plan's long back-matching runs measured: each method's final train accuracy after ``num_epochs``
    epochs (VGG11-BN, one seed), whether every one reaches the gate's 90 %, and the cpu minutes the table's runs
    (both models, every method, the stage-1 seeds) would take at that schedule (the published runs' measured
    minutes scaled by the epochs). ``measured`` False until the runs are in the store."""
    t = {x.key: x for x in TARGETS}["backmatching_regime"]
    res = _collect(t.runs(), results_dir)
    if (res["status"] == "missing").any():
        return {"measured": False}
    final = {m: float(h[-1]["train_acc"]) if h else math.nan for m, h in zip(res["method"], res["history"])}
    epochs = int(res.cfg.iloc[0].num_epochs)
    stage1 = backmatching.table1_plan(PROFILE, dataset=DATASET)
    minutes = _runs_minutes(stage1, results_dir)
    return {"measured": True, "num_epochs": epochs, "train_acc": final,
            "fits": all(v >= 90.0 for v in final.values()), "runs": len(stage1),
            "cpu_minutes": minutes * epochs / int(stage1.cfg.iloc[0].num_epochs), "stage1_minutes": minutes}
