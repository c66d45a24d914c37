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
from repro_lib.runs.sweep import aggregate, run_sweep
from repro_lib.train import fit

ROOT = Path(__file__).resolve().parents[1]

SWEEP = """
import sys, torch
torch.set_num_threads(1)
import pandas as pd
from repro_lib.config import RunConfig
from repro_lib.store import Store
from repro_lib.runs.sweep import run_sweep
cfgs = [RunConfig(width=4, synthetic=True, n=256, n_test=100, batch_size=64, lr=lr, num_epochs=8, device="cpu",
                  profile="smoke") for lr in (0.5, 1.0, 2.0)]
if len(sys.argv) > 2:  # killed (SIGKILL, nothing runs after it) once run <argv[2]> has stored epoch <argv[3]>
    import os, signal
    log_epoch = Store.log_epoch

    def log_then_die(self, cfg, rec):
        log_epoch(self, cfg, rec)
        if cfg.hash == cfgs[int(sys.argv[2])].hash and rec["epoch"] == int(sys.argv[3]):
            os.kill(os.getpid(), signal.SIGKILL)

    Store.log_epoch = log_then_die
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
    # the sweep is SIGKILLed once the second run has stored epoch 3 (the first run is finished by then), before
    # that epoch's checkpoint is written: the same moment on any machine, however fast or loaded
    proc = subprocess.run([sys.executable, "-c", SWEEP, str(store_dir), "1", "3"], env=env, cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL
    cfgs = _cfgs()
    db = store_dir
    store = Store(store_dir)
    assert store.status(cfgs[0]) == "finished"
    assert store.status(cfgs[1]) == "running" and store.status(cfgs[2]) is None
    first_before = store.get(cfgs[0])
    partial = _epoch_rows(db, cfgs[1].hash)
    assert sorted(partial) == [1, 2, 3]
    ck = store.load_checkpoint(cfgs[1])
    assert ck is not None and ck["epoch"] == 2  # the epoch logged last is not checkpointed yet

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
    # an unmodified (scale-variant) net with an absurd LR overflows to NaN/inf; the good run trains long enough
    # (12 steps at lr 0.1: train loss ~1.9) to stay clear of the chance-level collapse rule (loss within 0.01 of
    # ln 10), which a 6-step run at lr 0.05 can touch on some thread counts
    bad = RunConfig(width=4, synthetic=True, n=128, n_test=100, batch_size=64, lr=1e12, momentum=0.9,
                    scale_invariant=False, num_epochs=6, device="cpu", profile="smoke")
    good = bad.replace(lr=0.1)
    res = run_sweep(pd.DataFrame({"cfg": [bad, good], "cell": ["x", "x"], "seed": [0, 1]}), store, progress=False)
    assert list(res.status) == ["diverged", "finished"], list(zip(res.status, res.diverged_epoch, res.diverged_reason))
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


# ------------------------------------------------------------------ many writers (one file per run)
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
    """store.sqlite (of earlier versions) is read into runs/ once: finished runs with their epochs, an interrupted run
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


# ------------------------------------------------------------------ record format 2: compact history, provenance
def _tracker_history(epochs=100, tensors=20, seed=0):
    """Per-epoch dicts shaped like ``train.fit``'s (per-tensor dicts of the angular tracker), full float64 values,
    NaN / inf / None / a diverged last epoch / ints / evaluation only every other epoch included."""
    import random

    rng = random.Random(seed)
    names = [f"layer{i // 4}.{i % 4}.conv.weight" for i in range(tensors)]
    walk = {}

    def smooth(key, start):  # a slowly drifting series, as training metrics are
        walk[key] = walk.get(key, start) * (1 + 0.02 * (rng.random() - 0.5))
        return walk[key]

    out = []
    for e in range(1, epochs + 1):
        row = {"epoch": e, "lr": 0.1 * 0.99 ** e, "train_loss": smooth("l", 2.0), "train_acc": smooth("a", 30.0),
               "angular_update": smooth("u", 0.01), "weight_norm": smooth("w", 10.0),
               "effective_lr": smooth("e", 1e-3), "effective_lr_epoch": smooth("E", 0.1), "seconds": rng.random(),
               "angular_update_per_tensor": {n: smooth("u" + n, 0.01) for n in names},
               "weight_norm_per_tensor": {n: smooth("w" + n, 1.0) for n in names}}
        if e % 2 == 0:
            row.update(test_loss=smooth("L", 2.0), test_acc=smooth("A", 30.0))
        out.append(row)
    out[3]["angular_update_per_tensor"][names[0]] = math.nan  # a zero tensor
    out[4]["weight_norm_per_tensor"][names[1]] = math.inf
    out[5]["exp_lr_log2_rescale"] = 3
    out[6]["seconds"] = None
    out[-1] = {"epoch": epochs, "lr": 0.1, "train_loss": math.nan, "train_acc": 10.0}  # diverged
    return out


def test_compact_history_reads_back_exactly_as_a_row_wise_record(tmp_path):
    """Format 2 (column-wise history, float64 bit-exact) reads back exactly what a row-wise record gives: the same
    list of per-epoch dicts, NaN as None, inf as "inf", keys sorted; the record on disk is about a fifth of the size."""
    from repro_lib.store import _json, decode_history, encode_history

    hist = _tracker_history()
    row_wise = json.loads(_json(hist))  # what the row-wise store returned
    assert decode_history(json.loads(_json(encode_history(hist), compact=True))) == row_wise
    store = Store(tmp_path)
    cfg = _cfgs()[0]
    store.finish(cfg, {"status": "diverged", "test_acc": math.nan, "diverged_epoch": 100, "history": hist})
    back = Store(tmp_path).history(cfg)
    assert back == row_wise and [list(r) for r in back] == [sorted(r) for r in row_wise]
    assert back[3]["angular_update_per_tensor"]["layer0.0.conv.weight"] is None
    assert back[4]["weight_norm_per_tensor"]["layer0.1.conv.weight"] == "inf"
    assert all(a["train_loss"].hex() == b["train_loss"].hex() for a, b in zip(back[:-1], hist[:-1]))
    assert Store(tmp_path).get(cfg)["test_acc"] is None
    rec = json.loads((tmp_path / "runs" / f"{cfg.hash}.json").read_text())
    assert rec["format"] == 2 and set(rec["history"]) == {"epochs", "columns"}
    size = (tmp_path / "runs" / f"{cfg.hash}.json").stat().st_size
    assert size < len(_json({"history": hist})) / 4  # about 43 KB instead of 216 KB


def test_running_epochs_file_is_compact_and_resumes(tmp_path):
    """The epochs file of a running run is written column-wise too and read back by a new Store (resume)."""
    cfg = _cfgs()[0]
    hist = _tracker_history(epochs=8)[2:6]
    for r in hist[:3]:
        Store(tmp_path).log_epoch(cfg, r)
    assert json.loads((tmp_path / "runs" / f"{cfg.hash}.epochs.json").read_text())["format"] == 2
    Store(tmp_path).log_epoch(cfg, hist[3])
    from repro_lib.store import _json

    assert Store(tmp_path).history(cfg) == json.loads(_json(hist))


def test_row_wise_records_of_earlier_versions_still_load(tmp_path):
    """Records written before format 2 (row-wise history, no format / env / results_version keys, and hashes made
    by the rules of their time) load as they are, as does an old epochs file, which logging then continues."""
    from repro_lib.store import _json

    finished, running = _cfgs()[:2]
    hist = _tracker_history(epochs=8)[4:6]
    runs_dir = tmp_path / "runs"
    runs_dir.mkdir()
    (runs_dir / "0123456789abcdef.json").write_text(_json({
        "hash": "0123456789abcdef", "config": finished.to_dict(), "status": "finished",
        "result": {"status": "finished", "test_acc": 12.5}, "history": hist, "finished": 1.0, "host": "h"}))
    (runs_dir / f"{running.hash}.running.json").write_text(_json({
        "hash": running.hash, "config": running.to_dict(), "status": "running", "started": 1.0, "updated": 1.0,
        "host": "h"}))
    (runs_dir / f"{running.hash}.epochs.json").write_text(json.dumps(json.loads(_json(hist[:1])), sort_keys=True))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store = Store(tmp_path)
        assert store.history("0123456789abcdef") == json.loads(_json(hist))
        assert sorted((r["hash"], r["status"], r.get("test_acc")) for r in store.runs()) == sorted(
            [("0123456789abcdef", "finished", 12.5), (running.hash, "running", None)])
        assert store.status(running) == "running" and store.history(running) == json.loads(_json(hist[:1]))
        store.log_epoch(running, hist[1])
        assert Store(tmp_path).history(running) == json.loads(_json(hist))
    assert not (runs_dir / "corrupt").exists()


def test_records_carry_provenance(tmp_path):
    """Every final record and running file says what produced it: package and torch versions, the device the run
    used, torch's thread count, the CPU (model and the vector capability torch's kernels use: two CPUs may round
    the same run differently), and RESULTS_VERSION."""
    import importlib.metadata

    import torch

    from repro_lib import store as store_mod
    from repro_lib.config import RESULTS_VERSION

    cfg = _cfgs()[0].replace(num_epochs=1)
    store = Store(tmp_path)
    store.start(cfg)
    running = json.loads((tmp_path / "runs" / f"{cfg.hash}.running.json").read_text())
    fit(cfg, store=store, progress=False)
    done = json.loads((tmp_path / "runs" / f"{cfg.hash}.json").read_text())
    for rec in (running, done):
        assert rec["env"] == {"repro_lib": importlib.metadata.version("repro_lib"), "torch": torch.__version__,
                              "device": "cpu", "num_threads": torch.get_num_threads(), "cpu": store_mod.cpu_identity()}
        assert rec["env"]["cpu"]["capability"] == torch.backends.cpu.get_cpu_capability() and rec["env"]["cpu"]["model"]
        assert rec["results_version"] == RESULTS_VERSION
    assert store.get(cfg)["status"] == "finished" and "env" not in store.runs()[0]
