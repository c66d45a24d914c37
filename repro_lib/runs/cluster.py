"""A notebook's grid as one job array on a cluster (SLURM, or local subprocesses), through ``submitit``.

``python -m repro_lib sweep NOTEBOOK --profile P --executor {local,slurm} …`` (see ``__main__``):

1. **Grid.** The notebook's parameters (its ``parameters`` cell, overridden by ``-p name value``) are turned into
   the plans the notebook itself builds (``repro_lib.papers.registry``: the same ``Experiment.plan`` /
   ``exp_lr.preresnet_plan`` / ``backmatching.table1_plan`` calls with the same arguments), so the configs, and
   hence the store keys, are exactly those the notebook reads back.
2. **Skip and group.** Cells already finished or diverged in the store (``<results_dir>``) are skipped; the rest
   are grouped as ``batched.fit_grouped`` groups them (runs ``fit_many`` can stack, by ``group_configs``; the
   others alone), ``max_members`` per group (default: the notebook's own). A job runs its group through
   ``fit_grouped``, which may split it further to fit the memory of the job's GPU.
3. **Submit.** One ``executor.map_array`` call: on SLURM one array task per group (``--max-parallel`` =
   ``%`` array throttle); locally (``submitit.LocalExecutor``: subprocesses of this machine) the groups are dealt
   over ``--max-parallel`` jobs that each train their groups in turn. Every job writes into the shared store
   (``repro_lib.store``: one file per run, atomic, first finisher wins).
4. **Requeue.** The job callable is ``submitit.helpers.Checkpointable``: on preemption or timeout SLURM (or the
   local controller) sends USR2, submitit calls :meth:`TrainGroups.checkpoint`, which resubmits the same call,
   and the requeued job resumes every run from the store's last epoch-boundary checkpoint (``fit`` /
   ``fit_many`` resume). Finished runs of the group are read back, not retrained.

Then ``python -m repro_lib run NOTEBOOK --profile P -p collect True`` renders the tables from the store; cells not
finished yet show as "missing".
"""
from __future__ import annotations

import ast
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import submitit
from submitit.helpers import Checkpointable, DelayedSubmission

from ..config import RunConfig
from ..papers import registry

# ------------------------------------------------------------------------------------------- notebook grids


def notebook_parameters(path: str | Path, overrides: dict | None = None) -> dict:
    """The notebook's parameters: the defaults of its ``parameters`` cell updated by ``overrides`` (an unknown
    name is a ``ValueError`` listing the notebook's parameters)."""
    import papermill as pm

    params = {name: ast.literal_eval(p["default"]) for name, p in pm.inspect_notebook(str(path)).items()}
    for k, v in (overrides or {}).items():
        if k not in params:
            raise ValueError(f"{k}: not a parameter of {Path(path).name} (its parameters: {sorted(params)})")
        params[k] = v
    return params


def notebook_plans(path: str | Path, profile: str, params: dict | None = None) -> list[pd.DataFrame]:
    """The plans the notebook at ``path`` builds for ``profile`` and ``params`` (``papers.registry``)."""
    stem = Path(path).stem
    if stem not in registry.with_plans():
        raise ValueError(f"notebook: {Path(path).name} has no registered grid for cluster sweeps; supported: "
                         f"{', '.join(registry.with_plans())} (the others build their runs inline or train "
                         "nothing worth a cluster: run them with `python -m repro_lib run`)")
    return registry.plans(stem, profile, params)


def default_max_members(path: str | Path, profile: str) -> int:
    """The ``max_members`` the notebook passes to ``run_sweep`` (its experiment's, else 1)."""
    stem = Path(path).stem
    return registry.get(stem).max_members(profile) if stem in registry.NOTEBOOKS else 1


# ------------------------------------------------------------------------------------------- grouping


def unique_configs(items) -> list[RunConfig]:
    """The configs of ``items`` (a plan, i.e. a DataFrame with a ``cfg`` column, or a list of plans and/or
    ``RunConfig``) without duplicates (by hash), in order."""
    items = [items] if isinstance(items, pd.DataFrame) else list(items)
    seen: dict[str, RunConfig] = {}
    for item in items:
        for cfg in (item["cfg"] if isinstance(item, pd.DataFrame) else [item]):
            seen.setdefault(cfg.hash, cfg)
    return list(seen.values())


def group_todo(cfgs: list[RunConfig], store, max_members: int = 1) -> tuple[list[list[RunConfig]], int]:
    """(groups of the configs ``store`` does not hold as finished or diverged, how many it does hold).

    Groups as ``batched.fit_grouped`` trains them: configs ``fit_many`` can stack are grouped by
    ``batched.group_configs`` (at most ``max_members`` each), every other config is a group of one."""
    from ..batched import group_configs, stackable

    todo = [c for c in cfgs if store.get(c) is None]
    n_done = len(cfgs) - len(todo)
    if max_members <= 1:
        return [[c] for c in todo], n_done
    ok = [c for c in todo if stackable(c)]
    groups = [[c] for c in todo if not stackable(c)]
    groups += [[ok[i] for i in idx] for idx in group_configs(ok, max_members=max_members)]
    return groups, n_done


# ------------------------------------------------------------------------------------------- the job


class TrainGroups(Checkpointable):
    """One job of a cluster sweep: train ``groups`` (lists of ``RunConfig``) one after the other into the store at
    ``results_dir`` (``train.fit`` for a group of one, ``batched.fit_grouped`` otherwise). Returns one summary
    dict per run. Requeued on preemption/timeout by :meth:`checkpoint`; the store makes the rerun resume."""

    def __call__(self, groups: list[list[RunConfig]], results_dir: str, data_root: str | None = None,
                 download: bool = False) -> list[dict]:
        from ..batched import fit_grouped
        from ..store import Store
        from ..train import fit

        store = Store(results_dir)
        out = []
        for g, cfgs in enumerate(groups):
            resumed = {}
            for c in cfgs:
                st = store.status(c)
                ck = store.load_checkpoint(c, map_location="cpu") if st == "running" else None
                resumed[c.hash] = "done" if st in ("finished", "diverged") else (
                    f"resumes at epoch {ck['epoch']}" if ck else "starts")
            print(f"group {g + 1}/{len(groups)}: " + ", ".join(f"{h} {s}" for h, s in resumed.items()), flush=True)
            if len(cfgs) == 1:
                results = [fit(cfgs[0], store=store, data_root=data_root, download=download, progress=False)]
            else:
                results = fit_grouped(cfgs, store=store, max_members=len(cfgs), data_root=data_root,
                                      download=download, progress=False)
            for c, r in zip(cfgs, results):
                out.append({"hash": c.hash, "status": r["status"], "test_acc": r["test_acc"]})
                print(f"  {c.hash} {r['status']} test_acc={r['test_acc']}", flush=True)
        return out

    def checkpoint(self, *args, **kwargs):
        """Called by submitit on preemption/timeout: resubmit the same call. Nothing to save here: every run's
        state is in the store (epoch-boundary checkpoint), and the rerun resumes from it."""
        print("checkpoint: requeued; runs resume from the store's last epoch", flush=True)
        return DelayedSubmission(self, *args, **kwargs)


# ------------------------------------------------------------------------------------------- submission


@dataclass
class Submission:
    """What :func:`submit` did: ``total`` cells, ``done`` already in the store, ``groups`` to train, ``jobs``
    (submitit jobs, empty for a dry run or when nothing is left), ``per_job`` (the groups of each job)."""

    total: int
    done: int
    groups: list
    per_job: list = field(default_factory=list)
    jobs: list = field(default_factory=list)
    sbatch: str = ""  # the sbatch script of a SLURM dry run

    @property
    def submitted(self) -> int:
        return sum(len(g) for g in self.groups)

    def summary(self) -> str:
        return (f"{self.total} cells: {self.done} already done, {self.submitted} submitted in "
                f"{len(self.per_job)} job{'s' if len(self.per_job) != 1 else ''}")


def slurm_parameters(partition: str | None = None, gpus_per_job: int = 1, cpus_per_task: int | None = None,
                     timeout_min: int = 240, max_parallel: int = 0, name: str = "repro_lib",
                     extra: dict | None = None) -> dict:
    """``submitit.SlurmExecutor.update_parameters`` arguments: one node, one task per job (a multi-GPU run
    inside a job is launched by ``torchrun``, see the README), ``--signal=USR2@90`` for requeueing."""
    p = dict(nodes=1, ntasks_per_node=1, gpus_per_node=gpus_per_job, time=int(timeout_min), job_name=name,
             signal_delay_s=90)
    if partition:
        p["partition"] = partition
    if cpus_per_task:
        p["cpus_per_task"] = int(cpus_per_task)
    if max_parallel:
        p["array_parallelism"] = int(max_parallel)
    if extra:
        p["additional_parameters"] = dict(extra)
    return p


def make_executor(executor: str, folder: str | Path, gpus_per_job: int = 0, timeout_min: int = 240,
                  max_requeues: int = 20, **slurm):
    """A submitit executor: ``"local"`` (``LocalExecutor``, subprocesses of this machine) or ``"slurm"``."""
    if executor == "local":
        ex = submitit.LocalExecutor(folder, max_num_timeout=max_requeues)
        ex.update_parameters(timeout_min=timeout_min, gpus_per_node=gpus_per_job)
        return ex
    if executor == "slurm":
        ex = submitit.SlurmExecutor(folder, max_num_timeout=max_requeues)
        ex.update_parameters(**slurm_parameters(gpus_per_job=gpus_per_job, timeout_min=timeout_min, **slurm))
        return ex
    raise ValueError(f"executor: 'local' or 'slurm', got {executor!r}")


def submit(cfgs, results_dir: str | Path = "results", executor: str = "local", max_members: int = 1,
           max_parallel: int = 0, gpus_per_job: int | None = None, timeout_min: int = 240, data_root=None,
           download: bool = False, log_dir: str | Path | None = None, dry_run: bool = False, max_requeues: int = 20,
           **slurm) -> Submission:
    """Submit the configs ``cfgs`` (``RunConfig``s and/or plans, see :func:`unique_configs`) that the store at
    ``results_dir`` does not hold yet as one submitit job array.

    ``max_parallel``: SLURM: array throttle (0: no limit); local: number of concurrent jobs the groups are dealt
    over (0: 1). ``gpus_per_job``: default 1 on SLURM, 0 locally. ``slurm``: ``partition``, ``cpus_per_task``,
    ``name``, ``extra`` (any other sbatch option) — see :func:`slurm_parameters`. ``dry_run``: group and
    submit nothing (for SLURM the sbatch script is returned in ``Submission.sbatch``)."""
    from ..store import Store

    cfgs = unique_configs(cfgs)
    store = Store(results_dir)
    groups, n_done = group_todo(cfgs, store, max_members)
    if executor == "local":
        n_jobs = min(max(1, max_parallel), len(groups))
        per_job = [groups[j::n_jobs] for j in range(n_jobs)]
    elif executor == "slurm":
        per_job = [[g] for g in groups]
    else:
        raise ValueError(f"executor: 'local' or 'slurm', got {executor!r}")
    sub = Submission(total=len(cfgs), done=n_done, groups=groups, per_job=per_job)
    gpus = gpus_per_job if gpus_per_job is not None else (1 if executor == "slurm" else 0)
    folder = Path(log_dir) if log_dir is not None else Path(results_dir) / "submitit"
    if dry_run:
        if executor == "slurm" and per_job:
            from submitit.slurm.slurm import _make_sbatch_string

            command = f"{shlex.quote(sys.executable)} -u -m submitit.core._submit {shlex.quote(str(folder / '%j'))}"
            sub.sbatch = _make_sbatch_string(command=command, folder=folder / "%j", map_count=len(per_job),
                                             **slurm_parameters(gpus_per_job=gpus, timeout_min=timeout_min,
                                                                max_parallel=max_parallel, **slurm))
        return sub
    if not per_job:
        return sub
    per_cluster = dict(slurm, max_parallel=max_parallel) if executor == "slurm" else {}
    ex = make_executor(executor, folder / "%j", gpus_per_job=gpus, timeout_min=timeout_min,
                       max_requeues=max_requeues, **per_cluster)
    n = len(per_job)
    sub.jobs = ex.map_array(TrainGroups(), per_job, [str(results_dir)] * n,
                            [str(data_root) if data_root else None] * n, [bool(download)] * n)
    return sub
