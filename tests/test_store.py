"""Results store: atomic, never recomputes finished runs, resumes a killed sweep from its last checkpoint,
records divergence."""
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from repro_lib.config import RunConfig
from repro_lib.store import Store
from repro_lib.sweep import aggregate, run_sweep
from repro_lib.train import fit

ROOT = Path(__file__).resolve().parents[1]

SWEEP = """
import sys, torch
torch.set_num_threads(1)
import pandas as pd
from repro_lib.config import RunConfig
from repro_lib.store import Store
from repro_lib.sweep import run_sweep
cfgs = [RunConfig(width=4, synthetic=True, n=256, n_test=100, batch_size=64, lr=lr, num_epochs=8, device="cpu",
                  profile="smoke") for lr in (0.5, 1.0, 2.0)]
run_sweep(pd.DataFrame({"cfg": cfgs}), Store(sys.argv[1]), progress=False)
"""


def _cfgs():
    return [RunConfig(width=4, synthetic=True, n=256, n_test=100, batch_size=64, lr=lr, num_epochs=8, device="cpu",
                      profile="smoke") for lr in (0.5, 1.0, 2.0)]


def _epoch_rows(root, h):
    """epoch -> metrics of run ``h`` as the store holds them (logged epochs, or the final record's history)."""
    if not (root / "runs").exists():
        return {}
    return {r["epoch"]: r for r in Store(root).history(h)}


def test_killed_sweep_resumes_without_recomputing(tmp_path):
    store_dir = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", SWEEP, str(store_dir)], env=env, cwd=ROOT)
    cfgs = _cfgs()
    db = store_dir
    deadline = time.time() + 120
    # kill the process once the second run has completed 3 epochs (the first run is finished by then)
    while time.time() < deadline:
        if len(_epoch_rows(db, cfgs[1].hash)) >= 3:
            break
        assert proc.poll() is None, "sweep finished before it could be killed"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = Store(store_dir)
    assert store.status(cfgs[0]) == "finished"
    assert store.status(cfgs[1]) == "running" and store.status(cfgs[2]) is None
    first_before = store.get(cfgs[0])
    partial = _epoch_rows(db, cfgs[1].hash)
    ck = store.load_checkpoint(cfgs[1])
    assert ck is not None and ck["epoch"] >= 2  # the epoch logged last may not be checkpointed yet

    # restart the same sweep: run 0 is read back, run 1 resumes at its checkpoint, run 2 runs
    subprocess.run([sys.executable, "-c", SWEEP, str(store_dir)], env=env, cwd=ROOT, check=True)
    assert store.get(cfgs[0]) == first_before
    resumed = _epoch_rows(db, cfgs[1].hash)
    assert sorted(resumed) == list(range(1, 9))
    for e in range(1, ck["epoch"] + 1):  # epochs before the checkpoint were not recomputed (same timings)
        assert resumed[e]["seconds"] == partial[e]["seconds"]
    assert all(store.status(c) == "finished" for c in cfgs)
    assert not list((store_dir / "checkpoints").glob("*.pt"))

    # and the resumed run is exactly the uninterrupted one (same process settings: run the sweep again, whole)
    subprocess.run([sys.executable, "-c", SWEEP, str(tmp_path / "ref")], env=env, cwd=ROOT, check=True)
    ref = Store(tmp_path / "ref")
    for c in cfgs:
        for a, b in zip(ref.history(c), store.history(c), strict=True):
            assert a["train_loss"] == b["train_loss"] and a["angular_update"] == b["angular_update"]
        assert ref.get(c)["test_acc"] == store.get(c)["test_acc"]


def test_finished_run_is_not_recomputed(tmp_path, monkeypatch):
    store = Store(tmp_path)
    cfg = _cfgs()[0].replace(num_epochs=2)
    first = fit(cfg, store=store, progress=False)
    import repro_lib.train as train

    monkeypatch.setattr(train, "load_data", lambda *a, **k: pytest.fail("finished run was recomputed"))
    again = fit(cfg, store=store, progress=False)
    assert again["test_acc"] == first["test_acc"] and len(again["history"]) == 2


def test_divergence_is_recorded_not_raised(tmp_path):
    """A run whose loss becomes NaN is stored as diverged with its epoch; aggregation skips it."""
    store = Store(tmp_path)
    # an unmodified (scale-variant) net with an absurd LR overflows to NaN/inf
    bad = RunConfig(width=4, synthetic=True, n=128, n_test=100, batch_size=64, lr=1e12, momentum=0.9,
                    scale_invariant=False, num_epochs=3, device="cpu", profile="smoke")
    good = bad.replace(lr=0.05)
    res = run_sweep(pd.DataFrame({"cfg": [bad, good], "cell": ["x", "x"], "seed": [0, 1]}), store, progress=False)
    assert list(res.status) == ["diverged", "finished"]
    assert res.diverged_epoch.iloc[0] == 1 and math.isnan(res.test_acc.iloc[0])
    assert store.get(bad)["status"] == "diverged" and store.get(bad)["diverged_epoch"] == 1
    agg = aggregate(res, by=["cell"])
    assert agg.test_acc.iloc[0] == pytest.approx(res.test_acc.iloc[1]) and agg.diverged.iloc[0] == 1
    all_bad = aggregate(res.iloc[:1], by=["cell"])
    assert math.isnan(all_bad.test_acc.iloc[0])  # blank cell when every seed diverged


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    """A crash while writing a checkpoint leaves the previous one intact."""
    store = Store(tmp_path)
    cfg = _cfgs()[0]
    store.save_checkpoint(cfg, {"epoch": 1})
    import torch

    def boom(obj, f, *a, **k):
        f.write(b"half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(KeyboardInterrupt):
        store.save_checkpoint(cfg, {"epoch": 2})
    monkeypatch.undo()
    assert store.load_checkpoint(cfg)["epoch"] == 1
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == [f"{cfg.hash}.pt"]  # no temporary left


def test_preemption_signal_is_handled_after_the_checkpoint_is_written(tmp_path, monkeypatch):
    """A preemption signal (SIGUSR2: submitit's requeue-and-exit handler) arriving while a checkpoint is being
    written runs its handler once the new checkpoint is on disk -- not in the middle of torch.save, where the
    handler's exit would surface as a zip-writer error and the job would die instead of being requeued."""
    import signal

    import torch

    store = Store(tmp_path)
    cfg = _cfgs()[0]
    seen = []
    real_save = torch.save

    def save(obj, f, *a, **k):
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.05)  # an undeferred Python handler runs here, before anything is written
        real_save(obj, f, *a, **k)

    old = signal.signal(signal.SIGUSR2, lambda s, _f: seen.append(store.load_checkpoint(cfg)))
    try:
        monkeypatch.setattr(torch, "save", save)
        store.save_checkpoint(cfg, {"epoch": 2})
        time.sleep(0.05)
    finally:
        signal.signal(signal.SIGUSR2, old)
    assert len(seen) == 1 and seen[0]["epoch"] == 2  # the handler ran once, after the write
    assert signal.getsignal(signal.SIGUSR2) is old


def test_unreadable_checkpoint_restarts_the_run(tmp_path):
    """A truncated checkpoint (a node that died mid-write) is set aside with a warning and the run starts over,
    instead of failing every requeue; the next checkpoint is written normally."""
    store = Store(tmp_path)
    cfg = _cfgs()[0]
    store.save_checkpoint(cfg, {"epoch": 1})
    path = tmp_path / "checkpoints" / f"{cfg.hash}.pt"
    path.write_bytes(path.read_bytes()[:20])
    with pytest.warns(UserWarning, match="unreadable"):
        assert store.load_checkpoint(cfg) is None
    assert not path.exists() and (tmp_path / "checkpoints" / f"{cfg.hash}.pt.corrupt").exists()
    assert store.load_checkpoint(cfg) is None
    store.save_checkpoint(cfg, {"epoch": 2})
    assert store.load_checkpoint(cfg)["epoch"] == 2


def test_sweep_groups_runs_into_one_stacked_model(tmp_path):
    """max_members > 1: the runs go through batched.fit_many and are stored one per run; a second sweep reads
    them back."""
    cfgs = [c.replace(num_epochs=2) for c in _cfgs()]
    store = Store(tmp_path)
    res = run_sweep(pd.DataFrame({"cfg": cfgs}), store, progress=False, max_members=3)
    assert list(res.status) == ["finished"] * 3
    assert all(h["group_size"] == 3 for h in res.history.iloc[0])
    assert all(store.get(c)["status"] == "finished" for c in cfgs)
    again = run_sweep(pd.DataFrame({"cfg": cfgs}), store, progress=False, max_members=3)
    assert list(again.test_acc) == list(res.test_acc)


# ------------------------------------------------------------------ many writers (issue 9: one file per run)
def _finish_many(root, cfgs, marker, barrier):
    store = Store(root)
    for c in cfgs:
        barrier.wait()
        store.start(c)
        store.log_epoch(c, {"epoch": 1, "train_loss": marker})
        store.finish(c, {"status": "finished", "test_acc": marker, "history": [{"epoch": 1, "writer": marker}]})


def test_two_processes_finishing_the_same_cells_store_each_once(tmp_path):
    """Two jobs finish the same 20 cells at the same moment: one record per cell, result and history from the
    same writer, nothing half-written, no temporary file left."""
    import multiprocessing as mp

    cfgs = [c.replace(seed=s) for s in range(10) for c in _cfgs()[:2]]
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_finish_many, args=(tmp_path, cfgs, float(m), barrier)) for m in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    store = Store(tmp_path)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted(f"{c.hash}.json" for c in cfgs)
    assert sorted(r["hash"] for r in store.runs()) == sorted(c.hash for c in cfgs)
    for c in cfgs:
        res, hist = store.get(c), store.history(c)
        assert res["test_acc"] in (1.0, 2.0) and hist == [{"epoch": 1, "writer": res["test_acc"]}]


def test_start_and_log_never_touch_a_finished_record(tmp_path):
    store = Store(tmp_path)
    cfg = _cfgs()[0]
    store.start(cfg)
    store.log_epoch(cfg, {"epoch": 1, "train_loss": 1.0})
    assert store.status(cfg) == "running" and store.history(cfg) == [{"epoch": 1, "train_loss": 1.0}]
    store.finish(cfg, {"status": "diverged", "test_acc": math.nan, "diverged_epoch": 1})
    assert store.history(cfg) == [{"epoch": 1, "train_loss": 1.0}]  # the logged epochs became the record's
    store.start(cfg)  # a second job on the same cell
    store.log_epoch(cfg, {"epoch": 1, "train_loss": 9.0})
    store.finish(cfg, {"status": "finished", "test_acc": 50.0, "history": []})
    assert store.status(cfg) == "diverged" and store.get(cfg)["diverged_epoch"] == 1
    assert store.history(cfg) == [{"epoch": 1, "train_loss": 1.0}]
    assert [r["status"] for r in store.runs()] == ["diverged"]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [f"{cfg.hash}.json"]


def test_record_writes_are_atomic(tmp_path, monkeypatch):
    """A crash while a record is written leaves the previous file and no temporary file; a run leaves one file."""
    store = Store(tmp_path)
    cfg = _cfgs()[0].replace(num_epochs=2)
    store.log_epoch(cfg, {"epoch": 1, "train_loss": 1.0})

    def boom(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(KeyboardInterrupt):
        Store(tmp_path).log_epoch(cfg, {"epoch": 2, "train_loss": 0.5})
    monkeypatch.undo()
    assert Store(tmp_path).history(cfg) == [{"epoch": 1, "train_loss": 1.0}]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [f"{cfg.hash}.epochs.json"]

    fit(cfg, store=store, progress=False)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [f"{cfg.hash}.json"]
    assert [h["epoch"] for h in store.history(cfg)] == [1, 2]


def test_sqlite_store_of_earlier_versions_is_imported(tmp_path):
    """store.sqlite (before issue 9) is read into runs/ once: finished runs with their epochs, an interrupted run
    with its logged epochs (its checkpoint file is where it was); reopening does not import again."""
    finished, running = _cfgs()[:2]
    con = sqlite3.connect(tmp_path / "store.sqlite")
    con.executescript("CREATE TABLE runs (hash TEXT PRIMARY KEY, config TEXT NOT NULL, status TEXT NOT NULL, "
                      "result TEXT, started REAL, updated REAL);"
                      "CREATE TABLE epochs (hash TEXT NOT NULL, epoch INTEGER NOT NULL, metrics TEXT NOT NULL, "
                      "PRIMARY KEY (hash, epoch));")
    result = {"status": "finished", "test_acc": 42.0, "config": finished.to_dict()}
    con.execute("INSERT INTO runs VALUES (?,?,?,?,?,?)", (finished.hash, json.dumps(finished.to_dict()), "finished",
                                                          json.dumps(result), 1.0, 2.0))
    con.execute("INSERT INTO runs VALUES (?,?,?,?,?,?)", (running.hash, json.dumps(running.to_dict()), "running",
                                                          None, 1.0, 1.0))
    for h, e in ((finished.hash, 2), (finished.hash, 1), (running.hash, 1)):
        con.execute("INSERT INTO epochs VALUES (?,?,?)", (h, e, json.dumps({"epoch": e, "train_loss": 1.0 / e})))
    con.commit()
    con.close()
    store = Store(tmp_path)
    assert store.get(finished) == result and [h["epoch"] for h in store.history(finished)] == [1, 2]
    assert store.status(running) == "running" and store.get(running) is None
    assert store.history(running) == [{"epoch": 1, "train_loss": 1.0}]
    assert sorted((r["hash"], r["status"]) for r in store.runs()) == sorted(
        [(finished.hash, "finished"), (running.hash, "running")])
    assert store._import_sqlite() == 0  # unchanged since the import: nothing read again
