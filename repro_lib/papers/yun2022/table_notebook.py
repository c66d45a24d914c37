"""The setup every Yun et al. 2022 table notebook shares, as a few calls (``yun2022_table1`` … ``yun2022_table9``).

::

    tables = YunTables("yun2022_tables3_4", ["yun2022_table3", "yun2022_table4"], profile=profile, seed=seed,
                       results_dir=results_dir, device=device, dataset=dataset, num_epochs=num_epochs,
                       precision=precision, cuda_graphs=cuda_graphs)
    plans, out_dir = tables.plans, tables.out_dir   # {table name: plan}, <results_dir>/<profile>/<notebook>/
    tables.summary()                                # runs, model, data, sizes and GPU-hour estimates per table
    results = tables.run(data_root=data_root, download=download, collect=collect)   # {table name: results}

:func:`plans` is the grid a notebook trains for its parameters (``python -m repro_lib sweep`` builds the same
one, so the store keys agree).
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ... import data, profiles
from ...results.findings import (REGIME_DRIFT, VERDICTS, claim_rows, dataset_label, grid_difference, num,
                                 say_findings, seed_range, verdict_line, yellow_text)
from ...results.findings import findings as column_findings
from ...results import publish, rules, screen
from ...results.tables import readable
from ...runs import sweep
from ...store import Store
from .. import transcribed
from .grids import PRECISION_CHECK, get, plans, queue_plan


def grid(plan: pd.DataFrame) -> pd.DataFrame:
    """The distinct cells of a plan, one row each: the paper's (N, B, η, λ) beside ours and the tuning factor
    N·η·λ/(B(1−μ)) both share (a shrunk profile divides N and B and multiplies η or λ so that it is kept), the
    yellow flag and the number of seeds."""
    paper_cols = ["subtable", "paper_n", "paper_batch_size", "paper_lr", "paper_weight_decay"]
    ours = ["n", "batch_size", "lr", "weight_decay", "tuning_factor", "yellow"]
    keys = [c for c in paper_cols + ours if c in plan]
    out = plan.groupby(keys, sort=False, dropna=False).size().rename("seeds").reset_index()
    return out.rename(columns={"paper_n": "paper N", "paper_batch_size": "paper B", "paper_lr": "paper η",
                               "paper_weight_decay": "paper λ", "n": "N", "batch_size": "B", "lr": "η",
                               "weight_decay": "λ", "tuning_factor": "TF"})


#: the grid is printed cell by cell up to this many cells; a larger one (the paper profile: Table 1 has 315) is
#: summarised by its count and the cells whose runs are in the store
SHOW_CELLS = 30
#: the columns of the findings table shown in the notebook (every column goes to ``<name>_findings.csv``)
FINDINGS_SHOWN = 8
#: the width the printed summary wraps at (a reader's screen, not a log line)
LINE = 118


def findings_view(found: pd.DataFrame, col: str) -> pd.DataFrame:
    """The findings of a table as a reader scans them: one row per paper column and at most :data:`FINDINGS_SHOWN`
    columns (sub-table and column together, seeds as "lo–hi", the verdict word, the yellow cell's mean ± sd and its
    rank, yellow − best other cell with its seed-paired 95 % interval, whether Δθ settled before the first LR decay,
    how our ranking compares with the paper's, runs left out as diverged or missing), numbers as text rounded for
    reading, and no column that is empty throughout. Every column, the reasons and the fitted peak included, is in
    ``<name>_findings.csv``."""
    rows = []
    for _, r in found.iterrows():
        sub = f"({r['subtable']}) " if isinstance(r.get("subtable"), str) and r["subtable"] else ""
        seeds = seed_range(int(r["seeds"]), int(r.get("seeds_max", r["seeds"])))
        rank = {"no": "3rd or lower"}.get(r["rank"], r["rank"])
        yellow = yellow_text(r)
        settled = r.get("settled")
        out = [f"{int(r[k])} {k}" for k in ("diverged", "missing") if int(r.get(k, 0) or 0)]
        d = grid_difference(r)
        rho = r.get("rank_corr", float("nan"))
        same = ("" if r.get("paper_best_tf") != r.get("paper_best_tf") else
                ("same best" if abs(r["best_tf"] / r["paper_best_tf"] - 1) < 1e-6 else "other best")
                + (f", ρ {rho:.2f}" if rho == rho else ""))
        rows.append({col: f"{sub}{r[col]:,g}", "seeds": seeds, "verdict": r["verdict"],
                     "yellow cell": f"{yellow} ({rank})" if yellow else "",
                     "yellow − best other [95 %]": d.text() if d.diff == d.diff else "",
                     "Δθ settled": "" if settled is None or settled != settled else ("yes" if settled else "no"),
                     "vs paper's ranking": same, "runs left out": ", ".join(out)})
    view = pd.DataFrame(rows)
    empty = [c for c in view.columns if c not in (col, "seeds", "verdict") and view[c].isin(["", "0"]).all()]
    return view.drop(columns=empty).iloc[:, :FINDINGS_SHOWN]


def unrun_columns(found: pd.DataFrame) -> pd.Series:
    """Which columns of a findings table (``results.findings.findings``) have no run in the store at all: no
    finished or diverged run, only missing ones."""
    ran = found.get("seeds_max", found["seeds"]).fillna(0) + found.get("diverged", 0)
    return (ran == 0) & (found.get("missing", 0) > 0)


def say_columns(found: pd.DataFrame, col: str) -> str:
    """The findings in words (``results.findings.say_findings``) for the columns with runs, and one line for all
    the columns without any ("- **No run yet** in 14 columns: (a) N = 6,250, …; (b) every column …"), instead
    of a line each that says only that its runs are missing."""
    empty = unrun_columns(found)
    text = say_findings(found[~empty], col=col) if (~empty).any() else ""
    if not empty.any():
        return text
    name = {"n": "N", "batch_size": "B"}.get(col, col)
    subs = found["subtable"].fillna("") if "subtable" in found else pd.Series("", index=found.index)
    parts = []
    for sub in dict.fromkeys(subs):
        mine = subs == sub
        gone = found[mine & empty]
        if gone.empty:
            continue
        label = f"({sub}) " if sub else ""
        every = len(gone) == int(mine.sum()) and len(gone) > 1
        parts.append(f"{label}every column" if every
                     else f"{label}{name} = " + ", ".join(f"{v:,g}" for v in gone[col]))
    k, runs = int(empty.sum()), int(found.loc[empty, "missing"].sum())
    line = (f"- **No run yet** in {k} column{'s' if k != 1 else ''} ({'; '.join(parts)}): *not run*, "
            f"{runs:,} runs missing.")
    return f"{text}\n{line}" if text else line


def optimum_across_columns(found: pd.DataFrame, results: pd.DataFrame, col: str, short: bool = False) -> str:
    """Whether the optimum keeps its tuning factor while its η moves, across the columns of one sub-table of a
    swept grid (two or more columns of ``col`` = N or B): the yellow cell's η in each, the best cell's tuning
    factor and η, and the fitted peaks, in one sentence ("" with fewer than two columns run). ``short``: the
    columns, the best cells' tuning factors and the verdict only, for the notebook's first screen."""
    f = found[found["rank"] != "n/a"]
    if "subtable" in f:
        f = f[f["subtable"] == f["subtable"].iloc[0]] if len(f) else f
    if len(f) < 2:
        return ""
    name = {"n": "N", "batch_size": "B"}.get(col, col)
    ok = results[results["status"] == "finished"]
    lr_of = lambda v, tf: float(ok.loc[(ok[col] == v) & (abs(ok.tuning_factor / tf - 1) < 1e-6), "lr"].iloc[0])  # noqa: E731
    vals = list(f[col])
    ratio = max(vals) / min(vals)
    y = [lr_of(v, t) for v, t in zip(f[col], f["yellow_tf"])]
    best = [(t, lr_of(v, t)) for v, t in zip(f[col], f["best_tf"])]
    tfs = [t for t, _ in best]
    spread = max(tfs) / min(tfs)
    stays, one_step = spread < 1 + 1e-6, spread <= 2 + 1e-6
    verdict = "stays put" if stays else "moves by one grid step (×2)" if one_step else f"moves ×{spread:.3g}"
    peaks = [f"{p:.3g}" if p == p else "none" for p in f["peak_tf"]]
    best_lrs = [e for _, e in best]
    if short:
        where = (f"stays at {tfs[0]:.3g}" if stays else
                 f"moves {'one grid step' if one_step else f'×{spread:.3g}'}, {' → '.join(f'{t:.3g}' for t in tfs)},")
        return (f"across its {name} columns {', '.join(f'{v:,g}' for v in vals)} (×{ratio:g}) the best cell's tuning "
                f"factor {where} while the yellow cell's η goes {' → '.join(f'{v:.3g}' for v in y)}")
    return (f"Across the {name} columns {', '.join(f'{v:,g}' for v in vals)} (×{ratio:g}) the yellow cell's η goes "
            f"{' → '.join(f'{v:.3g}' for v in y)} at one tuning factor, {f['yellow_tf'].iloc[0]:.3g}; the best cell "
            f"is at tuning factor {', '.join(f'{t:.3g}' for t in tfs)} (η {' → '.join(f'{e:.3g}' for e in best_lrs)}) "
            f"and the fitted peaks at {', '.join(peaks)}: the measured optimum's tuning factor {verdict}, where "
            f"keeping it would move η as the yellow cells' does.")


def _show_grid(cells: pd.DataFrame, caption: str) -> None:
    """A plan's cells (:func:`grid`) as a table: HTML in a notebook (a table, not lines of printed text), the
    plain text indented outside one."""
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None  # noqa: N806
    if get_ipython is not None and get_ipython() is not None:
        from IPython.display import display

        display(readable(cells.reset_index(drop=True), caption=caption, digits=6))
    else:
        print("  " + cells.to_string(index=False).replace("\n", "\n  "))


def _wrap(text: str, indent: str = "  ", width: int = LINE) -> str:
    """``text`` as indented lines of at most ``width`` characters, broken after "; " (so that no clause is split;
    a clause longer than a line stays whole), the lines after the first indented further."""
    lines, line = [], ""
    for part in text.split("; "):
        joined = f"{line}; {part}" if line else part
        if line and len(indent) + len(joined) + 2 > width:
            lines.append(line + ";")
            line = part
        else:
            line = joined
    lines.append(line)
    return "\n".join((indent if i == 0 else indent + "  ") + ln for i, ln in enumerate(lines))


def _span(values, fmt: str = ",g") -> str:
    """"500–1,000" (or "500") from some numbers."""
    vals = sorted({float(v) for v in values if v == v})
    if not vals:
        return "n/a"
    lo, hi = format(vals[0], fmt), format(vals[-1], fmt)
    return lo if lo == hi else f"{lo}–{hi}"


def shrink_text(plan: pd.DataFrame, paper_plan: pd.DataFrame) -> str:
    """How a profile's runs differ from the paper's protocol, in words computed from the two plans: width, epochs,
    N, B, steps per epoch and the data, each only where it differs ("" when nothing does)."""
    ours, paper = plan.cfg.iloc[0], paper_plan.cfg.iloc[0]
    parts = []
    if ours.width != paper.width:
        parts.append(f"width {ours.width} instead of {paper.width}")
    if ours.num_epochs != paper.num_epochs:
        parts.append(f"{ours.num_epochs} epochs instead of {paper.num_epochs}")
    if "paper_n" in plan and sorted(plan.n.unique()) != sorted(plan.paper_n.unique()):
        parts.append(f"N = {_span(plan.n)} images instead of {_span(plan.paper_n)}")
    if "paper_batch_size" in plan and sorted(plan.batch_size.unique()) != sorted(plan.paper_batch_size.unique()):
        parts.append(f"B = {_span(plan.batch_size)} instead of {_span(plan.paper_batch_size)}")
    steps = [profiles.steps_per_epoch(c.n, c.batch_size) for c in plan.cfg]
    if "paper_n" in plan and "paper_batch_size" in plan:  # the paper's columns these runs stand for
        paper_steps = [profiles.steps_per_epoch(n, b) for n, b in zip(plan.paper_n, plan.paper_batch_size)]
    else:
        paper_steps = [profiles.steps_per_epoch(c.n, c.batch_size) for c in paper_plan.cfg]
    if sorted(set(steps)) != sorted(set(paper_steps)):
        parts.append(f"{_span(steps)} steps per epoch instead of {_span(paper_steps)}")
    if ours.dataset != paper.dataset or getattr(ours, "synthetic", False):
        parts.append(f"the data ({dataset_label([ours])} instead of {dataset_label([paper])})")
    return ", ".join(parts)


def rules_text(plan: pd.DataFrame, paper_plan: pd.DataFrame) -> str:
    """One line on the shrink rules (``repro_lib.profiles.shrink_rules``) for ``plan``: its steps per epoch beside
    the paper's, the first LR decay in relaxation times 1/(2 TF) (yellow cells, all cells), η/B where the net has
    scale-variant parameters, and which rules it keeps or breaks."""
    r = profiles.shrink_rules(plan, paper_plan)
    yellow = r[r.yellow]
    parts = [f"{_span(r.steps)} steps per epoch (paper {_span(r.paper_steps)}; at least "
             f"{_span(r.min_steps)})",
             "first LR decay after " + (f"{_span(yellow.settle, '.1f')} relaxation times 1/(2 TF) in the yellow "
                                        f"cells (at least {profiles.SETTLE_YELLOW:g}), " if len(yellow) else "")
             + f"{r.settle.min():.1f} at least in every cell (at least {profiles.SETTLE_EVERY:g})"]
    if not plan.cfg.iloc[0].scale_invariant:
        parts.append(f"η/B {_span(r.eta_over_b, '.3g')} (paper {_span(r.paper_eta_over_b, '.3g')})")
    broken = profiles.distinct_breaks(r)
    return ("shrink rules: " + "; ".join(parts) + (f" -- BROKEN: {'; '.join(broken)}" if broken else " -- kept"))


#: Table 1 (a), N = 3,125, at the paper's protocol on the CIFAR-10 JPEG stand-in, trained by an implementation
#: written apart from this package (its own model, ghost BN, training loop and subset draw) on an H100: one row
#: per (cell, seed), the same columns as a sweep
CROSS_CHECK = Path(__file__).with_name("crosscheck.csv")
#: the fields a run must share with a cross-check row to be compared with it
CROSS_KEYS = ["subtable", "n", "batch_size", "lr", "weight_decay", "width", "num_epochs", "dataset"]


def cross_check(results: pd.DataFrame) -> pd.DataFrame:
    """This package's finished runs beside the independent implementation's (:data:`CROSS_CHECK`) and the
    paper's, one row per cell both have run: η, λ, the paper's accuracy, the independent runs' mean ± sd and
    seeds, ours likewise, and ``difference`` (ours − independent) against ``spread`` (the larger seed sd of the
    two). Empty when the profile has no such cell (every profile but ``paper``)."""
    other = pd.read_csv(CROSS_CHECK)
    if results.empty or "cfg" not in results:
        return pd.DataFrame()
    ok = results[results.status == "finished"].copy()
    for k in ("width", "num_epochs", "dataset"):
        ok[k] = [getattr(c, k) for c in ok.cfg]
    rows = []
    for key, theirs in other.groupby(CROSS_KEYS, sort=False):
        sel = ok
        for k, v in zip(CROSS_KEYS, key):
            sel = sel[sel[k].astype(str) == str(v)] if k in ("subtable", "dataset") else sel[sel[k] == v]
        if sel.empty:
            continue
        paper = pd.to_numeric(sel["paper_accuracy"], errors="coerce").dropna() if "paper_accuracy" in sel else []
        o_sd, t_sd = sel.test_acc.std(), theirs.test_acc.std()
        rows.append({"η": f"{key[3]:g}", "λ": f"{key[4]:g}",
                     "paper": f"{paper.iloc[0]:.2f}" if len(paper) else "",
                     "independent": f"{theirs.test_acc.mean():.2f} ± {t_sd:.2f}", "seeds (indep.)": len(theirs),
                     "ours": f"{sel.test_acc.mean():.2f} ± {o_sd:.2f}", "seeds (ours)": len(sel),
                     "difference": sel.test_acc.mean() - theirs.test_acc.mean(),
                     "se": math.sqrt(o_sd ** 2 / len(sel) + t_sd ** 2 / len(theirs))})
    return pd.DataFrame(rows)


def cross_check_text(cc: pd.DataFrame) -> str:
    """:func:`cross_check` in a sentence or two: in how many cells the two implementations agree (their difference
    within two standard errors), how far this package is from the paper, and what that implies."""
    if cc.empty:
        return ("No cell of this profile was trained by the independent implementation (it ran Table 1 (a), "
                "N = 3,125, at the paper's protocol): nothing to compare here.")
    agree = cc["difference"].abs() <= 2 * cc["se"]
    paper = pd.to_numeric(cc["paper"], errors="coerce")
    ours = cc["ours"].str.split(" ± ").str[0].astype(float)
    below = (paper - ours).dropna()
    text = (f"The two implementations agree within two standard errors of their difference in {int(agree.sum())} "
            f"of {len(cc)} cells (largest difference {cc['difference'].abs().max():.2f} points, "
            f"{(cc['difference'].abs() / cc['se']).max():.1f} standard errors)")
    if len(below):
        text += f", and this package reads {_span(below, '.1f')} points below the paper's cells"
    text += "."
    if agree.all() and len(below) and (below > 0).all():
        text += (" Two implementations written apart reading the same on the same images put the gap to the paper "
                 "in the data (the stand-in is CIFAR-10 re-encoded as JPEG at 32×32, with lossy quantization and "
                 "subsampled chroma) or in a detail the paper does not state, not in this package.")
    return text


def precision_check(fp32: pd.DataFrame, bf16: pd.DataFrame | None) -> pd.DataFrame:
    """The bf16 check (``grids.PRECISION_CHECK``): per cell of the check (η, λ), the fp32 runs' test accuracy
    (mean ± sd, seeds) beside the bf16 runs' of the same cell and seeds, ``difference`` (bf16 − fp32 mean) against
    ``spread`` (the larger seed sd of the two), and ``agree`` (|difference| ≤ spread; None with fewer than two
    finished seeds on a side, where there is no sd). Empty when no bf16 run of the check exists (``bf16`` None:
    every profile but ``paper``)."""
    if bf16 is None or bf16.empty or fp32.empty:
        return pd.DataFrame()
    keys = ["subtable", "n", "batch_size", "lr", "weight_decay"]
    done = lambda r: r[r.status == "finished"]  # noqa: E731
    rows = []
    for key, b in done(bf16).groupby(keys, sort=False):
        f = done(fp32)
        for k, v in zip(keys, key):
            f = f[f[k] == v]
        f = f[f.seed.isin(b.seed)]
        if f.empty:
            continue
        sd = max(f.test_acc.std(), b.test_acc.std()) if min(len(f), len(b)) > 1 else float("nan")
        diff = b.test_acc.mean() - f.test_acc.mean()
        rows.append({"η": f"{key[3]:g}", "λ": f"{key[4]:g}", "fp32": _mean_sd(f.test_acc), "seeds (fp32)": len(f),
                     "bf16": _mean_sd(b.test_acc), "seeds (bf16)": len(b), "difference": diff, "spread": sd,
                     "agree": None if math.isnan(sd) else bool(abs(diff) <= sd)})
    return pd.DataFrame(rows)


def _mean_sd(acc: pd.Series) -> str:
    return f"{acc.mean():.2f} ± {acc.std():.2f}" if len(acc) > 1 else f"{acc.mean():.2f}"


def precision_check_text(pc: pd.DataFrame, runs: pd.DataFrame | None) -> str:
    """:func:`precision_check` in a sentence: in how many cells bf16 agrees with fp32 (the difference of the means
    within the larger seed sd), the differences, and what follows for the ``paper`` profile's arithmetic; ``runs``:
    the check's runs (``YunTables.precision_runs``; None: this profile does not run the check)."""
    if runs is None:
        return "This profile does not run the bf16 check (the `paper` profile does)."
    planned = len(runs)
    if pc.empty:
        return ("No bf16 run of the check is in the store yet" + (f" (0 of {planned} runs)" if planned else "")
                + ": the `paper` profile keeps fp32.")
    decided = pc[pc.agree.notna()]
    have = int(pc["seeds (bf16)"].sum())
    text = (f"bf16 against fp32 ({have}{f' of {planned}' if planned else ''} bf16 runs): the means differ by "
            + ", ".join(f"{d:+.2f} (η = {e}; larger seed sd {s:.2f})" for d, e, s in
                        zip(pc.difference, pc["η"], pc.spread)) + ". ")
    if decided.empty:
        return text + "No cell has two finished seeds on both sides yet: the `paper` profile keeps fp32."
    agree = int(decided.agree.astype(bool).sum())
    if agree == len(pc) and have == planned:
        return text + ("Every cell agrees within the larger seed sd: bf16 gives the same results as fp32 here, and "
                       "further paper-protocol runs may train in bf16 (their own run hashes, labelled bf16).")
    if agree < len(decided):
        return text + (f"{len(decided) - agree} of {len(decided)} cells differ by more than the larger seed sd: the "
                       "`paper` profile keeps fp32.")
    return text + "The cells so far agree within the larger seed sd; the check is not complete, so fp32 stays."


class YunTables:
    """One Yun et al. notebook's tables: their plans, the output folder ``<results_dir>/<profile>/<notebook>/``
    (created), a printed summary, and the sweep. A bad parameter is a ``ValueError`` naming it, raised here."""

    def __init__(self, notebook: str, names, profile: str, seed: int = 0, results_dir="results",
                 device: str = "auto", dataset: str = "", num_epochs: int = 0, precision: str = "",
                 cuda_graphs: bool = False):
        self.notebook, self.names, self.profile, self.results_dir = notebook, list(names), profile, results_dir
        self.plans = plans(self.names, profile, seed=seed, device=device, dataset=dataset, num_epochs=num_epochs,
                           precision=precision, cuda_graphs=cuda_graphs)
        self.out_dir = Path(results_dir) / profile / notebook
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.seed, self.device, self.dataset = seed, device, dataset
        self.params = dict(dataset=dataset, num_epochs=num_epochs, precision=precision, seed=seed)  # the re-run's
        self._results: dict[str, pd.DataFrame] = {}  # table name -> its runs, for the first screen's lines
        self._found: dict[str, pd.DataFrame] = {}
        self._claims: dict[str, list[dict]] = {}  # table name -> its claim rows
        self._judged: dict[str, list[dict]] = {}  # ... as recorded (the declared second stage applied)
        self._hashes: dict[str, set] = {}  # table name -> the store hashes of its runs
        self._sizes: dict[str, tuple] = {}  # table name -> (its column, {(cpu N, cpu B): paper column value})

    def summary(self) -> None:
        """Print per table what the chosen profile trains, computed from its plan (so the text cannot drift from
        the grid): runs, model, data (SYNTHETIC when it is), width, epochs and LR schedule, seeds, test images,
        image-epochs, the grid (:func:`grid`: each paper cell beside our N, B, η, λ and its tuning factor), and
        the GPU-hour estimates of this profile and of the gpu and paper profiles (the ``cpu`` profile also its
        minutes on 2 CPU threads). A grid larger than :data:`SHOW_CELLS` cells (the paper's own) opens with its
        progress (:meth:`progress`) and lists only the cells with runs in the store."""
        for name, plan in self.plans.items():
            cfg0 = plan.cfg.iloc[0]
            if len(grid(plan)) > SHOW_CELLS:
                print(self.progress(name))
            print(f"{name}: {len(plan)} runs, {cfg0.model} (scale_invariant={cfg0.scale_invariant}), "
                  f"dataset={cfg0.dataset}{' (SYNTHETIC)' if cfg0.synthetic else ''}, width={cfg0.width}, "
                  f"epochs={cfg0.num_epochs}, N={sorted(int(v) for v in plan.n.unique())}, "
                  f"B={sorted(int(v) for v in plan.batch_size.unique())}")
            cells = grid(plan)
            schedule = cfg0.schedule + (f" {dict(cfg0.schedule_kwargs)}" if cfg0.schedule_kwargs else
                                        " (÷10 at 1/2 and 3/4 of the epochs)" if cfg0.schedule == "step" else "")
            print(f"  seeds {sorted(int(v) for v in plan.seed.unique())} ({len(cells)} cells), LR schedule "
                  f"{schedule}, test images: {'the full test set' if not cfg0.n_test else f'{cfg0.n_test} class-balanced'}, "
                  f"{sum(c.n * c.num_epochs for c in plan.cfg) / 1e6:.2f}M image-epochs")
            if len(cells) <= SHOW_CELLS:
                _show_grid(cells, f"{name}: every cell, the paper's beside ours")
            else:  # the paper's whole grid: its size, and the cells with runs already in the store
                store = Store(self.results_dir)
                held = plan.cfg.map(lambda c: store.get(c) is not None).astype(bool)
                print(f"  {len(cells)} cells" + (", those with runs in the store:" if held.any()
                                                 else ", none with a run in the store yet"))
                if held.any():
                    _show_grid(grid(plan[held]), f"{name}: the cells with runs in the store")
            paper = get(name).plan("paper")
            print(_wrap(rules_text(plan, paper)))
            gpu_h = {"gpu": profiles.estimate_gpu_hours(get(name).plan("gpu")),
                     "paper": profiles.estimate_gpu_hours(paper)}
            print(_wrap(f"estimated GPU-hours (measured H200 rates, benchmarks/README.md): this profile "
                        f"{profiles.estimate_gpu_hours(plan):.1f}, gpu {gpu_h['gpu']:.1f}, paper {gpu_h['paper']:.1f}"
                        + (f"; estimated training minutes on 2 CPU threads: "
                           f"{profiles.estimate_cpu_minutes(plan):.0f}"
                           if self.profile == "cpu" and not cfg0.synthetic else "")))

    def progress(self, name: str) -> str:
        """How far table ``name``'s plan is, from the store under ``results_dir``: "yun2022_table1 so far: 17 of
        315 runs in the store; 1 of 15 columns checked (with runs), 0 complete"."""
        plan = self.plans[name]
        store = Store(self.results_dir)
        held = plan.cfg.map(lambda c: store.get(c) is not None).astype(bool)
        keys = [k for k in ("subtable", "col") if k in plan] or ["n", "batch_size"]
        per_col = held.groupby([plan[k] for k in keys]).agg(["sum", "size"])
        checked, complete = int((per_col["sum"] > 0).sum()), int((per_col["sum"] == per_col["size"]).sum())
        return (f"{name} so far: {int(held.sum()):,} of {len(plan):,} runs in the store; {checked} of "
                f"{len(per_col)} column{'s' if len(per_col) != 1 else ''} checked (with runs), {complete} complete")

    def run(self, data_root: str = "", download: bool = False, collect: bool = False,
            runs_csv: str = "{name}_runs.csv") -> dict[str, pd.DataFrame]:
        """Check the data (``repro_lib.data.require_for``: one message if it is missing), then train every table's
        plan through ``sweep.run_sweep`` into the store under ``results_dir`` (finished runs are read back; gpu/paper:
        cells sharing N and B train together as one stacked model, the profile's ``max_members``), say each
        table's status in one line (``sweep.status_line``), write ``runs_csv`` (per table) into the output folder.
        ``collect``: train nothing, read a cluster sweep's runs (absent ones: status "missing"). Returns
        ``{name: results}``."""
        if not collect:
            data.require_for([c for plan in self.plans.values() for c in plan.cfg], data_root or None, download)
        results = {}
        for name, plan in self.plans.items():
            progress = self.profile != "smoke"  # with progress, run_sweep ends with the status line itself
            r = sweep.run_sweep(plan, Store(self.results_dir), data_root=data_root or None, download=download,
                                progress=progress, max_members=get(name).profiles[self.profile].max_members,
                                collect=collect, label=name)
            if not progress:
                print(sweep.status_line(r, name))
            r.drop(columns=["cfg", "history"]).to_csv(self.out_dir / runs_csv.format(name=name), index=False)
            results[name] = r
        return results

    def precision_runs(self, data_root: str = "", download: bool = False, collect: bool = False,
                       runs_csv: str = "precision_check_runs.csv") -> pd.DataFrame | None:
        """The bf16 check's runs (``grids.PRECISION_CHECK``: Table 1 (a), N = 3,125, η = 3.2 and 0.8 in bf16, the
        profile's seeds offset by ``seed``), trained like :meth:`run` (``collect``: read from the store, absent ones
        "missing") and written to ``runs_csv``; None outside the ``paper`` profile, the only one that runs it."""
        if self.profile != "paper":
            return None
        seeds = [self.seed + s for s in get("yun2022_table1").profiles["paper"].seeds]
        plan = queue_plan(PRECISION_CHECK, seeds=seeds, device=self.device,
                          **({"dataset": self.dataset} if self.dataset else {}))
        if not collect:
            data.require_for(list(plan.cfg), data_root or None, download)
        r = sweep.run_sweep(plan, Store(self.results_dir), data_root=data_root or None, download=download,
                            progress=True, max_members=plan.attrs.get("max_members", 1), collect=collect,
                            label="bf16 check")
        r.drop(columns=["cfg", "history"]).to_csv(self.out_dir / runs_csv, index=False)
        return r

    # ------------------------------------------------------------------------------------------- findings
    def findings(self, results: pd.DataFrame, name: str, col: str, claim: str, item: str,
                 rule: str = "best or second") -> pd.DataFrame:
        """What the runs say about ``claim`` for table ``name`` (``results.findings.findings``: per column the
        verdict, the yellow cell's margin to the best other cell against the seed spread, the peak tuning factor of
        a quadratic fit with its delta-method interval), shown in words (:meth:`found_text`, then one line per column)
        and as a table (:func:`findings_view`; every
        column in ``<out_dir>/<name>_findings.csv``); also recorded as the notebook's claims
        (``<out_dir>/claims.json``, read by ``python -m repro_lib summary``). A table whose runs are exactly those
        of a table already shown (the same store hashes) is one measurement: it adds no verdict of its own, and the
        earlier claim names both tables' columns. Returns the table shown."""
        from IPython.display import Markdown, display

        found = column_findings(results, col=col, yellow_tf=transcribed.yellow_factor(name), claim=rule)
        data = dataset_label(results)
        rows = claim_rows(found, paper="Yun et al. 2022", item=item, claim=claim, data=data, col=col,
                          results=results)
        same = [other for other, h in self._hashes.items() if h == set(results["hash"])]
        self._hashes[name] = set(results["hash"])
        if same:  # the same runs as an earlier table (a shrunk profile can map two paper columns onto one grid)
            first = self._claims[same[0]]
            for a, b in zip(first, rows):
                a["item"] = f"{a['item']}; {b['item']}"
            note = (f"These are the runs of {same[0].replace('yun2022_table', 'Table ')} (the same configurations): "
                    f"one measurement, so one verdict, recorded under both tables' columns.")
            display(Markdown(f"**{item}** ({data}). {note}"))
        else:
            self._found[name] = found
            across = optimum_across_columns(found, results, col, short=True)
            for r in rows if across else ():  # the optimum across the columns, for the first screen
                r["note"] = f"{name.replace('yun2022_table', 'Table ')}: {across}."
            self._claims[name] = rows
            text = " ".join(t for t in (self.found_text(name, found, results),
                                        optimum_across_columns(found, results, col),
                                        self._untested(name, results, col)) if t)
            display(Markdown(f"**{item}** ({data}). {text}\n\n" + say_columns(found, col)))
        self._results[name] = results
        self._record()
        publish.show_stage_found(self._judged.get(name, []))   # this table's claims the second stage reached
        found.to_csv(self.out_dir / f"{name}_findings.csv", index=False)  # every column, for further analysis
        return readable(findings_view(found[~unrun_columns(found)], col))

    def _record(self) -> None:
        """Record every claim so far (``publish.record_claims``) with the first screen's conditions and re-run
        lines (:meth:`conditions`, :meth:`rerun`)."""
        from ..stage2 import judge

        named = [(name, r) for name, rows in self._claims.items() for r in rows]
        rows = judge(self.notebook, [r for _, r in named], self.results_dir)
        self._judged = {}
        for (name, _), r in zip(named, rows):   # the judged rows per table, for its second-stage paragraph
            self._judged.setdefault(name, []).append(r)
        publish.record_claims(self.out_dir, rows, caveat=self.conditions(), rerun=self.rerun())

    def conditions(self) -> str:
        """The first screen's caveat (``results.screen.conditions``): N, width, epochs and test images of the runs
        shown so far beside the paper's protocol, the yellow cells' accuracy beside the paper's, and in how many
        columns their Δθ settled before the first LR decay."""
        if not self._results:
            return ""
        runs = pd.concat(list(self._results.values()), ignore_index=True)
        paper = [c for name in self._results for c in get(name).plan("paper").cfg]
        found = pd.concat(list(self._found.values()), ignore_index=True) if self._found else pd.DataFrame()
        ours = found["yellow_mean"].dropna() if "yellow_mean" in found else []
        theirs = pd.to_numeric(runs.loc[runs.yellow.astype(bool), "paper_accuracy"], errors="coerce").dropna()
        settled = found["settled"].dropna() if "settled" in found else pd.Series(dtype=bool)
        regime = (f"the yellow cells' Δθ settled before the first LR decay in {int(settled.astype(bool).sum())} of "
                  f"{len(settled)} columns" if len(settled) else "")
        return screen.conditions(runs, paper=paper, accuracy=list(ours), paper_accuracy=list(theirs),
                                 regime=regime, what="yellow-cell")

    def rerun(self) -> str:
        """The first screen's re-run line (``results.screen.rerun``): the command, the minutes the records of the
        runs shown so far measured, or the cost model's estimate where none has run."""
        runs = pd.concat(list(self._results.values()), ignore_index=True) if self._results else None
        estimate = (profiles.estimate_cpu_minutes(list(self.plans.values()))
                    if self.profile in ("cpu", "smoke") else None)
        return screen.rerun(self.notebook, self.profile, self.params, runs=runs, store_dir=self.results_dir,
                            estimate_minutes=estimate)

    def _untested(self, name: str, results: pd.DataFrame, col: str) -> str:
        """A sentence where a column of this table runs at the same cpu N and B as a column of a table shown before
        in this notebook that varies the other dimension (Table 7's N column and Table 11's B column): at that size
        the runs do not tell the two dimensions apart ("" otherwise). Remembers this table's sizes."""
        names = {"n": "N", "batch_size": "B"}
        mine = {(int(n), int(b)): v for n, b, v in zip(results["n"], results["batch_size"], results[f"paper_{col}"])}
        out = []
        for other, (ocol, sizes) in self._sizes.items():
            if ocol == col:
                continue
            for nb in sorted(set(mine) & set(sizes)):
                out.append(f"{name.replace('yun2022_table', 'Table ')}'s column paper {names[col]} = {mine[nb]:,g} "
                           f"and {other.replace('yun2022_table', 'Table ')}'s column paper {names[ocol]} = "
                           f"{sizes[nb]:,g} both run at N = {nb[0]:,}, B = {nb[1]:,} here: at that size these runs "
                           f"vary neither N nor B, only η and λ at one tuning factor, so the dimension each table "
                           f"is about ({names[col]} here, {names[ocol]} there) is tested only across its own columns.")
        self._sizes[name] = (col, {(int(n), int(b)): v for n, b, v in
                                   zip(results["n"], results["batch_size"], results[f"paper_{col}"])})
        return " ".join(out)

    def found_text(self, name: str, found: pd.DataFrame, res: pd.DataFrame) -> str:
        """What table ``name``'s runs show, in a few sentences computed from them: the verdicts over its columns
        with their reasons, the yellow cells' accuracy beside the paper's, how the profile's runs differ from the
        paper's protocol (:func:`shrink_text`), whether Δθ settled before the first LR decay, and the runs left out
        as diverged."""
        words = found["verdict"].value_counts()
        counted = ", ".join(f"*{w}* in {int(words[w])}" for w in VERDICTS if w in words)
        reasons = sorted({r for r in found.loc[found.verdict == "undecided", "reason"] if r})
        n, ran = len(found), int((found["rank"] != "n/a").sum())
        where = (f"the {n} column{'s' if n != 1 else ''} run here" if ran == n else
                 f"the {n} columns of this profile's grid ({ran} with runs so far)")
        text = (f"Over {where} the claim {counted}"
                + (f" (undecided: {'; '.join(reasons)})" if reasons else "") + ".")
        ours = found["yellow_mean"].dropna()
        paper = pd.to_numeric(res.loc[res.yellow.astype(bool), "paper_accuracy"], errors="coerce").dropna()
        if len(ours) and len(paper):
            text += f" The yellow cells reach {_span(ours, '.1f')} % here, {_span(paper, '.1f')} % in the paper."
        paper_plan = get(name).plan("paper")
        shrink = shrink_text(self.plans[name], paper_plan)
        if shrink:
            text += (f" The gap is expected: these runs differ from the paper's protocol in {shrink}; the claim is "
                     f"about where the optimum lies, not about the accuracy.")
        breaks = profiles.shrink_breaks(self.plans[name], paper_plan)
        if breaks and self.profile != "paper":
            text += (f" This profile's shrink does not keep the paper's dynamics ({'; '.join(breaks)}; "
                     f"`repro_lib.profiles.shrink_rules`): its verdicts may test the shrink rather than the claim.")
        settled = found["settled"].dropna()
        if len(settled):
            k = int(settled.astype(bool).sum())
            text += (f" The yellow cells' Δθ had settled before the first LR decay (drift ≤ "
                     f"{100 * REGIME_DRIFT:.0f} %) in {k} of {len(settled)} column{'s' if len(settled) != 1 else ''}"
                     + ("" if k == len(settled) else
                        ": where it had not, the column is *not judged* whichever way its intervals point")
                     + ".")
        dropped = res[res.status == "diverged"]
        if len(dropped):
            reasons = dropped.get("diverged_reason", pd.Series("", index=dropped.index)).fillna("")
            collapsed = int(reasons.str.startswith(("collapsed", "weights stopped")).sum())
            text += (f" {len(dropped)} run{'s' if len(dropped) != 1 else ''} diverged and "
                     f"{'are' if len(dropped) != 1 else 'is'} left out of the means, as in the paper"
                     + (f" ({collapsed} of them ended collapsed at chance level, not with a non-finite loss)"
                        if collapsed else "") + ".")
        return text

    #: yellow cells "share" Δθ when their means differ by at most this factor (Sec. 3's reading of Fig. 2a; the
    #: threshold of ``rules.RULES["shared angle"]``)
    SHARED = rules.rule("shared angle").margin

    def shared_angle(self, results: pd.DataFrame, name: str, col: str, figure: str) -> str:
        """The figure claim of a table whose yellow cells keep one tuning factor across its columns (Table 5's
        Fig. 5: the yellow B ∝ N cells share the angular update per epoch), in words: with two or more columns, the
        ratio max/min of the yellow cells' mean Δθ over 30–45 % of training within each seed, with a 90 % t interval
        of its log over seeds (``findings.ratio_interval``), judged by ``rules.RULES["shared angle"]`` (≤ 1.25, gated
        by the columns' regime check both ways) and recorded as a claim; with one
        column, the sentence that says why it cannot be tested. Returns the Markdown shown."""
        from IPython.display import Markdown, display

        from ...results import findings as fnd

        y = results[results["yellow"].astype(bool) & (results["status"] == "finished")]
        cols = sorted(y[col].unique())
        label = {"n": "N", "batch_size": "B"}.get(col, col)
        if len(cols) < 2:
            where = f"{label} = {cols[0]:,g}" if cols else "no column"
            text = (f"**{figure}** compares the angular update per epoch of the yellow cells of the paper's "
                    f"{label} columns (one per column, all at the same tuning factor: their curves should coincide). "
                    f"This profile runs one column ({where}), so there is one yellow curve and nothing to compare it "
                    f"with: the figure's claim is not tested here (the `gpu` and `paper` profiles run every column).")
            display(Markdown(text))
            return text
        hist = sweep.histories(y, keys=[col, "seed"])
        epochs = int(hist.epoch.max())
        w = hist[(hist.epoch > 0.3 * epochs) & (hist.epoch <= 0.45 * epochs)]
        per_seed = w.groupby(["seed", col]).angular_update.mean().unstack(col).dropna()
        # within each seed: max/min over the columns; its 90 % interval a t interval of the log over seeds
        d = fnd.ratio_interval(per_seed.max(axis=1) / per_seed.min(axis=1))
        rule = rules.rule("shared angle")
        found = self._found.get(name)
        settled = (found["settled"].dropna() if found is not None and "settled" in found else pd.Series(dtype=bool))
        gate = None if not len(settled) else bool(settled.astype(bool).all())
        real = dataset_label(results) != fnd.SYNTHETIC
        word, reason = rules.decide(rule, ci=(d.lo, d.hi), gate_ok=gate, seeds=d.n, real_data=real,
                                    gate_words="before Δθ settled in every column")
        to_decide = (fnd.decide_text(d.log(), "≤", margin=math.log(rule.margin), units="(log ratio)",
                                     gated=word == fnd.NOT_JUDGED,
                                     gate_fix="a first phase long enough for Δθ to settle in every column")
                     if word in ("undecided", fnd.NOT_JUDGED) else "")
        detail = (f"yellow Δθ max/min across {label} = {', '.join(f'{c:,g}' for c in cols)}, within a seed: "
                  f"{d.diff:.2f} " + (f"[{d.lo:.2f}, {d.hi:.2f}] (90 % t interval over seeds)" if d.has_interval
                                      else "(one seed: no interval)") + f" (shared: ≤ {rule.margin:g})")
        row = dict(paper="Yun et al. 2022", item=f"{figure}, yellow cells", data=dataset_label(results),
                   claim="the yellow cells of every column share the angular update per epoch", seeds=d.n,
                   verdict=fnd.verdict_words(word, reason, detail), word=word,
                   ours=f"Δθ max/min {d.diff:.2f}", paper_value=f"the yellow curves coincide ({figure})",
                   regime=(f"Δθ settled before the first LR decay in {int(settled.astype(bool).sum())} of "
                           f"{len(settled)} columns" if len(settled) else "not measured"),
                   **fnd.interval_fields(d, margin=rule.margin, rule=rule, gate_ok=gate, to_decide=to_decide,
                                         scale="ratio"))
        self._claims[f"{name} {figure}"] = [row]
        self._record()
        text = f"**{figure}** ({row['data']}): *{word}*{f' ({reason})' if reason else ''}; {detail}."
        display(Markdown(text))
        return text

    def verdict(self) -> str:
        """The notebook's one-line verdict over every table shown with :meth:`findings` (the cell tagged
        ``verdict``, read by the runner's end table); with several tables, each table's verdict counts and yellow
        ranks (``findings.verdict_line(details=False)``), then the missing runs once."""
        if len(self._found) == 1:
            return "; ".join(f"{name.replace('yun2022_', '')}: {verdict_line(f)}" for name, f in self._found.items())
        # several tables on one line: each table's counts and ranks, then what they leave out, once
        missing = sum(int(f["missing"].sum()) for f in self._found.values())
        return ("; ".join(f"{name.replace('yun2022_', '')}: {verdict_line(f, details=False)}"
                          for name, f in self._found.items())
                + (f"; provisional: {missing} runs missing" if missing else ""))

    @property
    def data_label(self) -> str:
        """What the notebook's runs train on, for figure titles (``findings.dataset_label``: a stand-in says so)."""
        return dataset_label([c for plan in self.plans.values() for c in plan.cfg])


def prediction_text(measured, predicted, what: str = "the yellow cells") -> str:
    """The measured Δθ beside the first-order prediction arccos(1 − TF) of Eq. 27, in words: the range of the ratio
    measured / predicted over ``measured`` and ``predicted`` (radians, aligned), and what Eq. 27 neglects (Sec. 4:
    over one epoch, a time η of the rescaled SDE, the weight norm and the gradient are taken as constant, and the
    update is kept to first order in the tuning factor)."""
    m, p = pd.to_numeric(pd.Series(list(measured)), errors="coerce"), pd.to_numeric(pd.Series(list(predicted)),
                                                                                       errors="coerce")
    r = (m / p).dropna()
    if r.empty:
        return ""
    return (f"Measured against predicted: Δθ of {what} is {_span(r, '.2f')} × arccos(1 − TF), the dashed level "
            f"({_span(m.dropna(), '.3f')} rad measured, {_span(p.dropna(), '.3f')} rad predicted). Eq. 27 is a first-order "
            "reading: it takes the weight norm and the gradient as constant over one epoch (Sec. 4: \"the parameters "
            "do not move far enough for the gradients to significantly change\") and keeps the update to first order "
            "in the tuning factor, so the level it gives is a scale, not a value the curves must reach; the paper "
            "draws no such line and gives no measured Δθ in its text.")
