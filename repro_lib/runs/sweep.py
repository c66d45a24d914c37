"""Run a list of configurations through ``fit`` with resume and progress, and aggregate seeds.

``run_sweep(plan, store)``: every row of ``plan`` (a DataFrame with a ``cfg`` column of ``RunConfig``) is trained
unless the store already holds it; an interrupted run resumes from its checkpoint. A sweep killed half-way and
started again recomputes nothing that finished. Returns the plan with result columns added.
``run_sweep(plan, store, collect=True)`` trains nothing: it reads what a cluster sweep (``python -m repro_lib
sweep``) left in the store; a cell not finished there gets status ``"missing"`` (NaN results, empty
history) so that tables show it as missing instead of dropping it.

``aggregate(df, by)``: the paper's rule (Yun et al. 2022, Sec. 5): mean test accuracy over the seeds that did not
diverge; NaN (a blank cell) when every seed diverged. The ``missing`` column counts runs not in the store, so a
group with missing runs is told apart from an all-diverged one.
"""
from __future__ import annotations

import math

import pandas as pd

from ..results.tables import aggregate  # noqa: F401  (sweep.aggregate: the notebooks' name for it)
from ..store import MISSING
from ..train import fit, judge_collapse, num_classes_of, progress_lines


# the per-epoch record of ``train.fit`` (DEVELOPERS.md, "Training")
HISTORY_COLUMNS = ["epoch", "lr", "train_loss", "train_acc", "test_loss", "test_acc", "angular_update",
                   "weight_norm", "effective_lr", "effective_lr_epoch", "seconds"]


def _missing_result() -> dict:
    return {"status": MISSING, "diverged_epoch": None, "diverged_reason": "", "test_acc": math.nan,
            "train_loss": math.nan, "train_seconds": math.nan, "data": None, "history": []}


def run_sweep(plan: pd.DataFrame, store=None, data_root=None, download: bool = False,
              progress: bool = True, max_members: int | None = None, collect: bool = False,
              label: str = "") -> pd.DataFrame:
    """Train every ``plan.cfg`` (skipping finished runs in ``store``) and return plan + result columns
    ``hash`` (the run's store key), ``status, diverged_epoch, diverged_reason, test_acc, train_loss,
    angular_update_last, seconds, data, history``. A stored run that ended collapsed (``train.collapse_reason``) is
    read as ``diverged`` with its reason, whenever it was recorded.

    ``store``: a ``store.Store``, a results directory (opened as one) or None (nothing stored).
    ``max_members`` (default: ``plan.attrs["max_members"]``, which ``Experiment.plan`` sets from the profile --
    16 on gpu/paper --, else 1) ``> 1``: configurations that differ only in lr, weight decay, momentum, seed (and
    schedule values) are trained together as one channel-stacked model by ``batched.fit_many`` (per-member exact;
    one result and one store record per run, resumable as with ``fit``).
    ``collect=True``: train nothing; every row is read from ``store`` (required), and a run the store does not
    hold as finished or diverged gets status ``"missing"``, NaN results and an empty history; a record the store
    finds damaged is set aside (``store.Store``), counts as missing, and one line ``N records set aside
    (unreadable): ...`` is printed.

    ``progress``: progress bars, and at the end the sweep's :func:`status_line` (``label`` names the sweep in it).
    Under the notebook runner (``train.progress_lines``) one output line takes the bars' place: it names each run
    as it finishes (:func:`run_names`: its method or cell, and its seed) and is overwritten by the next, so the
    saved notebook keeps only the status line."""
    if max_members is None:
        max_members = int(plan.attrs.get("max_members", 1))
    cfgs = list(plan["cfg"])
    if store is not None and not hasattr(store, "get"):
        from ..store import Store

        store = Store(store)
    if collect:
        if store is None:
            raise ValueError("store: collect=True reads the results from a store; none was given")
        results = []
        since = len(getattr(store, "set_aside", ()))
        for cfg in cfgs:
            done = store.get(cfg)
            results.append({**done, "history": store.history(cfg)} if done is not None else _missing_result())
        summary = store.set_aside_summary(since) if hasattr(store, "set_aside_summary") else None
        if summary:  # damaged records (each also warned about) now show as missing: say so once, under the table
            print(summary)
    elif max_members > 1:
        from ..batched import fit_grouped

        lines = progress and progress_lines()  # under the runner: one overwritten line, no bars in the notebook
        stored = [store is not None and store.get(c) is not None for c in cfgs]
        shown = _ProgressLine() if lines else None
        if shown is not None and not all(stored):
            shown.show(f"{label + ': ' if label else ''}training {len(cfgs) - sum(stored)} of {len(cfgs)} runs in "
                       f"stacked groups of up to {max_members} (the rest are in the store)")
        results = fit_grouped(cfgs, store=store, max_members=max_members, data_root=data_root, download=download,
                              progress=progress and not lines)
    else:
        results = []
        bar = None
        lines = progress and progress_lines()
        shown = _ProgressLine() if lines else None
        names = run_names(plan) if lines else []
        if progress and not lines:
            from ..train import progress_bar as tqdm

            bar = tqdm(total=len(cfgs), desc="runs")
        stored = []
        for i, cfg in enumerate(cfgs):
            stored.append(store is not None and store.get(cfg) is not None)
            if shown is not None and not stored[-1]:
                shown.show(f"run {i + 1}/{len(cfgs)} {names[i]}: training")
            results.append(fit(cfg, store=store, data_root=data_root, download=download,
                               progress=progress and not lines))
            if shown is not None:
                shown.show(run_line(i, len(cfgs), cfg, results[-1], stored[-1], name=names[i]))
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
    rows = []
    for cfg, res in zip(cfgs, results):
        hist = res.get("history", [])
        res = judge_collapse(res, hist, num_classes_of(cfg))  # a record from before the collapse rule, judged again
        ang = [h["angular_update"] for h in hist if "angular_update" in h]
        rows.append({"hash": cfg.hash, "status": res["status"], "diverged_epoch": res["diverged_epoch"],
                     "diverged_reason": res.get("diverged_reason", ""),
                     "test_acc": _num(res["test_acc"]), "train_loss": _num(res["train_loss"]),
                     "angular_update_last": ang[-1] if ang else math.nan,
                     "seconds": res.get("train_seconds", math.nan), "data": res.get("data"),
                     "history": hist})
    out = pd.concat([plan.reset_index(drop=True), pd.DataFrame(rows)], axis=1)
    if progress:
        line = status_line(out, label, read=None if collect else sum(stored))
        if collect or shown is None:
            print(line, flush=True)
        else:
            shown.show(line)
    return out


# the plan columns that name a run in progress lines, in the order a name lists them, and how it writes each
_NAME_KEYS = ("combination", "label", "setting", "model", "method", "optimizer", "stage", "subtable", "n",
              "batch_size", "lr", "weight_decay")
_SHORT = {"n": "N", "batch_size": "B", "lr": "η", "weight_decay": "λ"}


def run_names(plan: pd.DataFrame) -> list[str]:
    """What each run of ``plan`` is, in a few words: the plan's columns that tell its runs apart (a run's label, a
    method, the cell of a grid: sub-table, N, B, η, λ), then its seed ("(a) N = 500, η = 3.2, seed 1",
    "vgg11_bn SGD, seed 0"). A ``label`` column, where the plan has one, names the run alone."""
    if not len(plan):
        return []
    varying = [k for k in _NAME_KEYS if k in plan and plan[k].astype(str).nunique() > 1]
    if "label" in varying:
        varying = ["label"]
    if "combination" in varying and "subtable" in varying:  # Sec. 3: the combination is the sub-table
        varying.remove("subtable")
    names = []
    for _, r in plan.iterrows():
        parts = []
        for k in varying:
            v = r[k]
            if k == "subtable":
                parts.append(f"({v})" if str(v) else "")
            elif k == "combination":
                parts.append(f"combination {v}")
            elif k in _SHORT:
                parts.append(f"{_SHORT[k]} = {int(v):,}" if k in ("n", "batch_size") else f"{_SHORT[k]} = {v:g}")
            else:
                parts.append(str(v))
        what = " ".join(p for p in parts if p.startswith("(")) + " " + ", ".join(
            p for p in parts if p and not p.startswith("("))
        what = what.strip() or (r["cfg"].model if "cfg" in r else "run")
        seed = r["seed"] if "seed" in r else (r["cfg"].seed if "cfg" in r else None)
        names.append(what + (f", seed {seed}" if seed is not None else ""))
    return names


def run_line(i: int, total: int, cfg, res: dict, stored: bool = False, name: str = "") -> str:
    """One short line for a finished run: which (``name``, :func:`run_names`; without one, its model, sizes and
    seed), how it ended and whether it trained or was read from the store."""
    acc = _num(res.get("test_acc"))
    what = (f"diverged at epoch {res.get('diverged_epoch')}" if res.get("status") == "diverged"
            else f"{res.get('status')}, test acc {acc:.2f} %")
    took = "from the store" if stored else f"{_num(res.get('train_seconds')):.0f} s"
    name = name or (f"{cfg.model} N = {cfg.n:,}, B = {cfg.batch_size:,}, η = {cfg.lr:g}, λ = {cfg.weight_decay:g}, "
                    f"seed {cfg.seed}")
    return f"run {i + 1}/{total} {name}: {what} ({took})"


def status_line(results: pd.DataFrame, label: str = "", read: int | None = None, named: int = 3) -> str:
    """One line on a sweep's runs (``run_sweep`` output): how many there are, how many the store holds when some
    are missing ("17 of 315 runs in the store, 298 missing"), how many diverged (the first ``named`` by
    :func:`run_names`), how many were read from the store (``read``, when known) and the training time they
    took (a run two rows share counted once, as ``results.screen.rerun`` counts it). ``label`` opens the line."""
    status = results["status"] if len(results) else pd.Series([], dtype=object)
    total, missing = len(results), int((status == MISSING).sum())
    diverged = results[status == "diverged"]
    head = (f"{total - missing} of {total} runs in the store, {missing} missing" if missing
            else f"{total} run{'s' if total != 1 else ''}")
    parts = [head]
    if len(diverged):
        names = run_names(results)
        which = [names[i] for i in range(len(results)) if status.iloc[i] == "diverged"][:named]
        more = ", …" if len(diverged) > named else ""
        parts.append(f"{len(diverged)} diverged ({'; '.join(which)}{more})")
    if read is not None and total - missing:
        parts.append(f"{read} read from the store" if read else "all trained now")
    once = results.drop_duplicates("hash") if "hash" in results else results  # a run two rows share counts once
    seconds = pd.to_numeric(once.get("seconds", pd.Series(dtype=float)), errors="coerce").sum()
    if total - missing:
        parts.append(f"training time {seconds / 60:.0f} min" if seconds >= 60 else f"training time {seconds:.0f} s")
    return (f"{label}: " if label else "") + "; ".join(parts)


class _ProgressLine:
    """One line of notebook output that each call to :meth:`show` overwrites (an IPython display handle; the
    notebook runner keeps only its last text in the saved notebook); outside a kernel, one printed line per call."""

    def __init__(self):
        self.handle = None
        try:
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:
            return
        shell = get_ipython()
        if shell is not None and getattr(shell, "kernel", None) is not None:
            self.handle = display({"text/plain": ""}, raw=True, display_id=True)

    def show(self, text: str) -> None:
        if self.handle is None:
            print(text, flush=True)
        else:
            self.handle.update({"text/plain": text}, raw=True)


def _num(v) -> float:
    """A stored number (the store keeps NaN as null) as a float."""
    return math.nan if v is None else v


def histories(df: pd.DataFrame, keys: list[str], tensor: str | None = None) -> pd.DataFrame:
    """Long-form per-epoch metrics of every run in a sweep result, tagged with the run's ``keys`` columns.

    A key that is also a per-epoch metric (e.g. ``lr``: the run's base LR vs the LR in force that epoch) keeps
    the run's value; the per-epoch value is renamed ``epoch_<name>``. ``tensor``: a parameter name whose own
    norm and angular update (the tracker's per-tensor records) become the columns ``tensor_weight_norm`` and
    ``tensor_angular_update``."""
    out = []
    for _, r in df.iterrows():
        for h in r["history"]:
            metrics = {(f"epoch_{k}" if k in keys else k): v for k, v in h.items() if not isinstance(v, dict)}
            if tensor is not None and "weight_norm_per_tensor" in h:
                metrics["tensor_weight_norm"] = h["weight_norm_per_tensor"][tensor]
                metrics["tensor_angular_update"] = h["angular_update_per_tensor"][tensor]
            out.append({**metrics, **{k: r[k] for k in keys}})
    if not out:  # no run has a history yet (collect mode on a store still empty): the usual columns, no rows
        cols = [f"epoch_{c}" if c in keys else c for c in HISTORY_COLUMNS]
        if tensor is not None:
            cols += ["tensor_weight_norm", "tensor_angular_update"]
        return pd.DataFrame(columns=[*cols, *keys])
    return pd.DataFrame(out)
