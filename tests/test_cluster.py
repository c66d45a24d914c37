"""Cluster sweeps: a notebook's grid as a submitit job array into the shared store, requeue on
preemption, nothing submitted twice, and the notebook collecting what is there (missing cells shown as missing)."""
import math
import os
import re
import signal
import time
from pathlib import Path

import pandas as pd
import pytest

from repro_lib.papers import registry
from repro_lib.runs import cluster
from repro_lib.papers.yun2022 import grids as experiments
from repro_lib.results import tables
from repro_lib.__main__ import main
from repro_lib.config import RunConfig
from repro_lib.store import Store
from repro_lib.runs.sweep import aggregate, run_sweep
from repro_lib.train import fit

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "notebooks"


def _cfgs(epochs=6):
    return [RunConfig(width=4, synthetic=True, n=256, n_test=100, batch_size=64, lr=lr, seed=s, num_epochs=epochs,
                      device="cpu", profile="smoke") for lr in (0.5, 1.0) for s in (0, 1)]


def test_notebook_grids_are_the_notebooks_own():
    """The sweep trains exactly the configs the notebook reads back (same hashes), for its parameters."""
    plans = cluster.notebook_plans(NB / "yun2022_tables3_4.ipynb", "smoke", {"seed": 1, "num_epochs": 2})
    for name, plan in zip(("yun2022_table3", "yun2022_table4"), plans):
        exp = experiments.get(name)
        ref = exp.plan("smoke", seeds=[1 + s for s in exp.profiles["smoke"].seeds], device="auto", num_epochs=2)
        assert [c.hash for c in plan.cfg] == [c.hash for c in ref.cfg]
    for stem in registry.with_plans():  # every registered notebook expands with its own default parameters
        params = cluster.notebook_parameters(NB / f"{stem}.ipynb")
        assert all(len(p) for p in cluster.notebook_plans(NB / f"{stem}.ipynb", "smoke", params))
    assert cluster.default_max_members(NB / "yun2022_table1.ipynb", "gpu") == 16
    assert cluster.default_max_members(NB / "yun2022_table2.ipynb", "gpu") == 16
    assert cluster.default_max_members(NB / "yun2022_tables8_10.ipynb", "gpu") == 1  # DenseNet: not stackable


def test_unsupported_notebook_and_unknown_parameter_are_refused(capsys):
    with pytest.raises(ValueError, match="adamp_delta.ipynb has no registered grid.*yun2022_table2"):
        cluster.notebook_plans(NB / "adamp_delta.ipynb", "smoke")
    with pytest.raises(ValueError, match="lr: not a parameter of yun2022_table2.ipynb"):
        cluster.notebook_parameters(NB / "yun2022_table2.ipynb", {"lr": 0.1})
    assert main(["sweep", str(NB / "adamp_delta.ipynb"), "--profile", "smoke", "--dry-run"]) == 2
    assert "supported: adamp_cifar, backmatching_vgg" in capsys.readouterr().err


def test_slurm_dry_run_prints_one_array(tmp_path, capsys):
    rd = tmp_path / "results"
    assert main(["sweep", str(NB / "yun2022_tables3_4.ipynb"), "--profile", "smoke", "--executor", "slurm",
                 "--partition", "gpu", "--gpus-per-job", "1", "--cpus-per-task", "8", "--timeout-min", "30",
                 "--max-parallel", "2", "--slurm-arg", "account", "proj", "--results-dir", str(rd),
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    for line in ("#SBATCH --array=0-3%2", "#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=1",
                 "#SBATCH --cpus-per-task=8", "#SBATCH --time=30", "#SBATCH --signal=USR2@90",
                 "#SBATCH --account=proj", "submitit.core._submit"):
        assert line in out
    assert "dry run: 4 cells: 0 already done, 4 submitted in 4 jobs" in out
    assert not (rd / "submitit").exists()


def _worker_pid(job) -> int:
    """The task process of a local submitit job (a child of its controller)."""
    ctrl = job._process.pid
    kids = Path(f"/proc/{ctrl}/task/{ctrl}/children").read_text().split()
    assert len(kids) == 1, kids
    return int(kids[0])


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc to find the worker process")
def test_local_sweep_survives_preemption_and_is_not_resubmitted(tmp_path):
    """2 concurrent local workers train a 4-cell grid into one store; one worker is preempted (USR2, what SLURM
    sends) mid-run, requeued by submitit, and resumes that run from its checkpoint; every cell is stored once;
    submitting again submits nothing; collecting with one more cell shows it as missing."""
    root = tmp_path / "results"
    cfgs = _cfgs()
    sub = cluster.submit(cfgs, root, executor="local", max_parallel=2)
    assert len(sub.jobs) == 2 and sub.summary() == "4 cells: 0 already done, 4 submitted in 2 jobs"
    store = Store(root)
    target = sub.per_job[0][0][0]
    deadline = time.time() + 1800  # a guard against a hung worker only, far above what the work takes
    # preempt job 0 once its first run has 2 epochs and a resume checkpoint on disk
    while len(store.history(target)) < 2 or store.load_checkpoint(target) is None:
        assert time.time() < deadline and sub.jobs[0].state == "RUNNING", sub.jobs[0].stderr()
        time.sleep(0.05)
    before = {h["epoch"]: h for h in store.history(target)}
    os.kill(_worker_pid(sub.jobs[0]), signal.SIGUSR2)
    outs = [job.result() for job in sub.jobs]

    log = sub.jobs[0].stdout()
    assert "this job is preempted" in log and "Requeued job" in log, log
    resumed = re.search(rf"{target.hash} resumes at epoch (\d+)", log)
    assert resumed, log  # the requeued job found the run's checkpoint (the whole log if not)
    resumed_at = int(resumed.group(1))
    assert resumed_at >= 1
    after = store.history(target)
    assert [h["epoch"] for h in after] == list(range(1, 7))
    for h in after[:resumed_at]:  # the epochs before the checkpoint were not recomputed
        assert h["seconds"] == before[h["epoch"]]["seconds"]

    # every cell exactly once, nothing half-written left behind
    assert sorted(r["hash"] for o in outs for r in o) == sorted(c.hash for c in cfgs)
    files = sorted(p.name for p in (root / "runs").iterdir())
    assert files == sorted(f"{c.hash}.json" for c in cfgs)
    assert not list((root / "checkpoints").iterdir())
    assert sorted(r["hash"] for r in store.runs()) == sorted(c.hash for c in cfgs)
    assert all(store.status(c) == "finished" for c in cfgs)

    again = cluster.submit(cfgs, root, executor="local", max_parallel=2)
    assert again.jobs == [] and again.summary() == "4 cells: 4 already done, 0 submitted in 0 jobs"

    extra = cfgs[0].replace(lr=2.0)
    plan = pd.DataFrame({"cfg": [*cfgs, extra], "lr": [c.lr for c in cfgs] + [2.0]})
    res = run_sweep(plan, store, collect=True)
    assert list(res.status) == ["finished"] * 4 + ["missing"]
    assert math.isnan(res.test_acc.iloc[4]) and res.history.iloc[4] == []
    assert res.test_acc.iloc[0] == store.get(cfgs[0])["test_acc"]
    agg = aggregate(res, by=["lr"])
    assert list(agg.missing) == [0, 0, 1] and list(agg.diverged) == [0, 0, 0]


def test_cli_local_sweep_then_notebook_collects_with_missing_cells(tmp_path, capsys, monkeypatch):
    """`python -m repro_lib sweep` (local executor, waiting) on a grid half in the store trains only the rest;
    the notebook run with collect=True renders a partial store with its missing cells marked "missing"."""
    from repro_lib.runs.notebook import run_notebook

    monkeypatch.chdir(tmp_path)
    rd = tmp_path / "results"
    nb = NB / "yun2022_table2.ipynb"
    cfgs = list(cluster.notebook_plans(nb, "smoke", cluster.notebook_parameters(nb, {"num_epochs": 1}))[0].cfg)
    assert len(cfgs) == 4
    store = Store(rd)
    fit(cfgs[0], store=store, progress=False)  # one cell done before the sweep

    # collect before the rest is trained: the column with a run shows its other cell as missing and the verdict
    # says so; the column without any run is one line under the tables, not a grid of "missing"
    out = run_notebook(nb, "smoke", {"collect": True, "num_epochs": 1}, results_dir=rd, progress=False)
    text = out.read_text()
    assert text.count(">missing<") == 1 and "1 cell missing runs" in text
    assert "No run in the store yet, so not shown above: (a) N = 500 (paper 50,000) (2 runs)." in text
    assert not (rd / "runs" / f"{cfgs[1].hash}.json").exists()  # collect trained nothing

    args = ["sweep", str(nb), "--profile", "smoke", "--executor", "local", "--max-parallel", "2",
            "--results-dir", str(rd), "-p", "num_epochs", "1"]
    assert main([*args, "--wait"]) == 0
    printed = capsys.readouterr().out
    assert "4 cells: 1 already done, 3 submitted in 2 jobs" in printed and "job ids: " in printed
    assert all(Store(rd).status(c) == "finished" for c in cfgs)
    assert main(args) == 0
    assert "4 cells: 4 already done, 0 submitted in 0 jobs" in capsys.readouterr().out


def test_report_marks_missing_cells_and_verdicts():
    rows = []
    for r, lr in enumerate((0.4, 0.2, 0.1)):
        for n in (1000, 2000):
            st = "missing" if (r == 2 and n == 2000) else "diverged" if (r == 0 and n == 1000) else "finished"
            rows.append({"row": r, "lr": lr, "weight_decay": 1e-4, "n": n, "yellow": r == 1, "status": st,
                         "test_acc": 50.0 + r if st == "finished" else math.nan})
    agg = aggregate(pd.DataFrame(rows), by=["row", "lr", "weight_decay", "n", "yellow"])
    grid, yellow = tables.pivot_cells(agg, "test_acc")
    assert grid.attrs["missing"] == {((0.1, 1e-4), 2000): 1}
    html = tables.style_grid(grid, yellow).to_html()
    cells = dict(re.findall(r'<td id="T_\w+_(row\d_col\d)"[^>]*>([^<]*)</td>', html))
    assert cells["row2_col1"] == "missing" and cells["row0_col0"] == "diverged"  # missing vs all diverged
    v = tables.verdict(grid, yellow)
    assert v[1000] == "second" and v[2000] == "best (1 cell missing runs)"
    theirs, _ = tables.pivot_cells(agg.assign(paper_accuracy=90.0), "paper_accuracy")
    assert "missing" not in theirs.attrs  # the paper's own numbers are never missing


def test_fast_path_parameters_reach_every_grid(tmp_path, capsys):
    """The ``precision`` and ``cuda_graphs`` are parameters of every swept notebook (papermill sees them, with
    defaults "" and False); set, they reach every config of its grid; at their defaults the grid, and so every
    store key, is the one built with no override at all (bf16 is hashed, CUDA graphs are not)."""
    import papermill as pm

    for stem in registry.with_plans():
        path = NB / f"{stem}.ipynb"
        found = pm.inspect_notebook(str(path))
        assert (found["precision"]["default"], found["cuda_graphs"]["default"]) == ('""', "False"), stem
        params = cluster.notebook_parameters(path, {"precision": "bf16", "cuda_graphs": True})
        cfgs = [c for plan in cluster.notebook_plans(path, "smoke", params) for c in plan.cfg]
        assert cfgs and {(c.precision, c.cuda_graphs) for c in cfgs} == {("bf16", True)}, stem
    path = NB / "yun2022_table1.ipynb"
    exp = experiments.get("yun2022_table1")
    ref = [c.hash for c in exp.plan("smoke", seeds=list(exp.profiles["smoke"].seeds), device="auto").cfg]

    def grid(**overrides):
        return list(cluster.notebook_plans(path, "smoke", cluster.notebook_parameters(path, overrides))[0].cfg)

    default = grid()
    assert [c.hash for c in default] == ref
    assert {(c.precision, c.cuda_graphs) for c in default} == {("fp32", False)}
    assert [c.hash for c in grid(cuda_graphs=True)] == ref
    fast = grid(precision="bf16", cuda_graphs=True)
    assert {(c.precision, c.cuda_graphs) for c in fast} == {("bf16", True)} and len(fast) == len(ref)
    assert not {c.hash for c in fast} & set(ref)
    assert main(["sweep", str(path), "--profile", "smoke", "--results-dir", str(tmp_path), "--dry-run",
                 "-p", "precision", "bf16", "-p", "cuda_graphs", "True"]) == 0
    assert f"dry run: {len(ref)} cells: 0 already done" in capsys.readouterr().out
