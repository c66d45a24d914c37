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

from ..train import fit, judge_collapse, num_classes_of, progress_lines


MISSING = "missing"  # status of a run the store does not hold (collect mode)
# the per-epoch record of ``train.fit`` (DEVELOPERS.md, "Training")
HISTORY_COLUMNS = ["epoch", "lr", "train_loss", "train_acc", "test_loss", "test_acc", "angular_update",
                   "weight_norm", "effective_lr", "effective_lr_epoch", "seconds"]


def _missing_result() -> dict:
    return {"status": MISSING, "diverged_epoch": None, "diverged_reason": "", "test_acc": math.nan,
            "train_loss": math.nan, "train_seconds": math.nan, "data": None, "history": []}


def run_sweep(plan: pd.DataFrame, store=None, data_root=None, download: bool = False,
              progress: bool = True, max_members: int | None = None, collect: bool = False) -> pd.DataFrame:
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
    (unreadable): ...`` is printed."""
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

        lines = progress and progress_lines()  # under the runner: one line per run, no bars in the notebook
        stored = [store is not None and store.get(c) is not None for c in cfgs] if lines else []
        results = fit_grouped(cfgs, store=store, max_members=max_members, data_root=data_root, download=download,
                              progress=progress and not lines)
        for i, (cfg, res) in enumerate(zip(cfgs, results)):
            if lines:
                print(run_line(i, len(cfgs), cfg, res, stored[i]), flush=True)
    else:
        results = []
        bar = None
        lines = progress and progress_lines()
        if progress and not lines:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(cfgs), desc="runs")
        for i, cfg in enumerate(cfgs):
            stored = lines and store is not None and store.get(cfg) is not None
            results.append(fit(cfg, store=store, data_root=data_root, download=download,
                               progress=progress and not lines))
            if lines:
                print(run_line(i, len(cfgs), cfg, results[-1], stored), flush=True)
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
    return pd.concat([plan.reset_index(drop=True), pd.DataFrame(rows)], axis=1)


def run_line(i: int, total: int, cfg, res: dict, stored: bool = False) -> str:
    """One line for a finished run (what ``run_sweep`` prints instead of progress bars under the runner)."""
    acc = _num(res.get("test_acc"))
    what = (f"diverged at epoch {res.get('diverged_epoch')}" if res.get("status") == "diverged"
            else f"{res.get('status')}, test acc {acc:.2f} %")
    took = "from the store" if stored else f"{_num(res.get('train_seconds')):.0f} s"
    return (f"run {i + 1}/{total} {cfg.model} n={cfg.n} B={cfg.batch_size} lr={cfg.lr:g} wd={cfg.weight_decay:g} "
            f"seed={cfg.seed}: {what} ({took})")


def _num(v) -> float:
    """A stored number (the store keeps NaN as null) as a float."""
    return math.nan if v is None else v


def aggregate(df: pd.DataFrame, by: list[str], value: str = "test_acc") -> pd.DataFrame:
    """Mean of ``value`` over the finished runs per group, plus ``std`` (the sample standard deviation over them,
    as ``results.findings`` uses; NaN for a single run), ``runs`` (rows of the group),
    ``diverged`` and ``missing`` (runs the store does not hold, ``run_sweep(collect=True)``) columns.
    ``value`` is NaN both when every run diverged (``diverged == runs``) and when none is there yet
    (``missing > 0``): the two counts tell them apart."""

    def agg(g):
        ok = g[g["status"] == "finished"][value]
        return pd.Series({value: ok.mean() if len(ok) else math.nan,
                          "std": ok.std(ddof=1) if len(ok) > 1 else math.nan,
                          "runs": len(g), "diverged": int((g["status"] == "diverged").sum()),
                          "missing": int((g["status"] == MISSING).sum())})

    return df.groupby(by, dropna=False, sort=False).apply(agg, include_groups=False).reset_index()


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
