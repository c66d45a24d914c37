"""Run a list of configurations through ``fit`` with resume and progress, and aggregate seeds.

``run_sweep(plan, store)``: every row of ``plan`` (a DataFrame with a ``cfg`` column of ``RunConfig``) is trained
unless the store already holds it; an interrupted run resumes from its checkpoint. A sweep killed half-way and
started again recomputes nothing that finished. Returns the plan with result columns added.

``aggregate(df, by)``: the paper's rule (Yun et al. 2022, Sec. 5): mean test accuracy over the seeds that did not
diverge; NaN (a blank cell) when every seed diverged.
"""
from __future__ import annotations

import math

import pandas as pd

from .train import fit


def run_sweep(plan: pd.DataFrame, store=None, data_root=None, download: bool = False,
              progress: bool = True, max_members: int = 1) -> pd.DataFrame:
    """Train every ``plan.cfg`` (skipping finished runs in ``store``) and return plan + result columns
    ``status, diverged_epoch, test_acc, train_loss, angular_update_last, seconds, data, history``.

    ``max_members > 1``: configurations that differ only in lr, weight decay, momentum, seed (and schedule values)
    are trained together as one channel-stacked model by ``batched.fit_many`` (per-member exact; one result and
    one store record per run, resumable as with ``fit``)."""
    cfgs = list(plan["cfg"])
    if max_members > 1:
        from .batched import fit_grouped

        results = fit_grouped(cfgs, store=store, max_members=max_members, data_root=data_root, download=download,
                              progress=progress)
    else:
        results = []
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(cfgs), desc="runs")
        for cfg in cfgs:
            results.append(fit(cfg, store=store, data_root=data_root, download=download, progress=progress))
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
    rows = []
    for res in results:
        hist = res.get("history", [])
        ang = [h["angular_update"] for h in hist if "angular_update" in h]
        rows.append({"status": res["status"], "diverged_epoch": res["diverged_epoch"],
                     "test_acc": res["test_acc"], "train_loss": res["train_loss"],
                     "angular_update_last": ang[-1] if ang else math.nan,
                     "seconds": res.get("train_seconds", math.nan), "data": res.get("data"),
                     "history": hist})
    return pd.concat([plan.reset_index(drop=True), pd.DataFrame(rows)], axis=1)


def aggregate(df: pd.DataFrame, by: list[str], value: str = "test_acc") -> pd.DataFrame:
    """Mean of ``value`` over non-diverged runs per group, plus ``runs``, ``diverged`` and ``std`` columns."""

    def agg(g):
        ok = g[g["status"] == "finished"][value]
        return pd.Series({value: ok.mean() if len(ok) else math.nan,
                          "std": ok.std(ddof=0) if len(ok) else math.nan,
                          "runs": len(g), "diverged": int((g["status"] == "diverged").sum())})

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
    return pd.DataFrame(out)
