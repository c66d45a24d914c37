"""A damaged results store never stops a notebook: an unreadable or malformed record file is set aside to
``runs/corrupt/`` with one warning naming it, the run counts as not stored and is trained again (collect mode:
shown as missing); records of older versions and of other config kinds are not taken for damage; concurrent
sweeps on one store leave only valid records."""
import contextlib
import json
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from repro_lib import config as config_mod
from repro_lib.config import RunConfig
from repro_lib.store import DamagedRecordWarning, Store, decode_history
from repro_lib.runs.sweep import run_sweep
from repro_lib.train import fit

ROOT = Path(__file__).resolve().parents[1]
CFG = RunConfig(width=4, synthetic=True, n=128, n_test=100, batch_size=64, lr=0.5, num_epochs=2, device="cpu",
                profile="smoke")
OTHER = CFG.replace(lr=0.25)


@pytest.fixture(scope="module")
def template(tmp_path_factory, one_thread):
    """A store holding CFG finished (fit once for the module) and OTHER started with one logged epoch."""
    root = tmp_path_factory.mktemp("template")
    store = Store(root)
    fit(CFG, store=store, progress=False)
    store.start(OTHER)
    store.log_epoch(OTHER, {"epoch": 1, "train_loss": 1.0})
    return root


@pytest.fixture
def root(template, tmp_path):
    shutil.copytree(template, tmp_path / "results")
    return tmp_path / "results"


def _edit(path: Path, change) -> None:
    rec = json.loads(path.read_text())
    change(rec)
    path.write_text(json.dumps(rec))


def _done(root, cfg=CFG) -> Path:
    return root / "runs" / f"{cfg.hash}.json"


def _set_aside(root) -> list[str]:
    d = root / "runs" / "corrupt"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


@contextlib.contextmanager
def _warns_once(name: str):
    """Exactly one DamagedRecordWarning, naming the file ``name`` and where it went; yields a dict that then holds
    its ``message``."""
    out = {}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield out
    ours = [str(w.message) for w in seen if issubclass(w.category, DamagedRecordWarning)]
    assert len(ours) == 1, ours
    assert name in ours[0] and "corrupt" in ours[0]
    out["message"] = ours[0]


@contextlib.contextmanager
def _no_damage_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DamagedRecordWarning)
        yield


# ------------------------------------------------------------------ each kind of damage
def _truncate(root):
    p = _done(root)
    p.write_bytes(p.read_bytes()[:300])
    return p.name, "not valid JSON"


def _running_not_json(root):
    p = root / "runs" / f"{OTHER.hash}.running.json"
    p.write_bytes(b"\x00\x01 not json at all")
    return p.name, "not valid JSON"


def _epochs_not_rows(root):
    p = root / "runs" / f"{OTHER.hash}.epochs.json"
    p.write_text(json.dumps([1, 2, 3]))
    return p.name, "history: not a list of objects"


def _epochs_without_epoch(root):
    p = root / "runs" / f"{OTHER.hash}.epochs.json"
    p.write_text(json.dumps({"format": 2, "hash": OTHER.hash, "history": {"epochs": 1,
                                                                          "columns": {"train_loss": [1.0]}}}))
    return p.name, "without an integer 'epoch'"


def _missing_config(root):
    _edit(_done(root), lambda r: r.pop("config"))
    return _done(root).name, "config: missing"


def _missing_status(root):
    _edit(_done(root), lambda r: r.pop("status"))
    return _done(root).name, "status: missing"


def _wrong_type(root):
    _edit(_done(root), lambda r: r.update(result=[1, 2]))
    return _done(root).name, "result: missing or not an object"


def _bad_columns(root):
    _edit(_done(root), lambda r: r["history"]["columns"]["weight_norm_per_tensor"].update(f8="@@@"))
    return _done(root).name, "history column 'weight_norm_per_tensor'"


def _config_hash_mismatch(root):
    _edit(_done(root), lambda r: r["config"].update(lr=0.75))
    return _done(root).name, f"hashes to {CFG.replace(lr=0.75).hash}"


DAMAGE = {
    "truncated finished record": (_truncate, CFG),
    "running file not JSON": (_running_not_json, OTHER),
    "epochs file not a list of dicts": (_epochs_not_rows, OTHER),
    "epochs file rows without epoch": (_epochs_without_epoch, OTHER),
    "record missing config": (_missing_config, CFG),
    "record missing status": (_missing_status, CFG),
    "record with a wrong type": (_wrong_type, CFG),
    "record with undecodable columns": (_bad_columns, CFG),
    "config hash not the file name's": (_config_hash_mismatch, CFG),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damaged_file_is_set_aside_and_the_run_trained_again(root, kind):
    damage, cfg = DAMAGE[kind]
    name, why = damage(root)
    store = Store(root)
    with _warns_once(name) as w:
        if name.endswith(".epochs.json"):
            assert store.history(cfg) == []
        else:
            assert store.status(cfg) is None and store.get(cfg) is None
    assert why in w["message"]
    assert not (root / "runs" / name).exists()
    (moved,) = _set_aside(root)
    assert re.fullmatch(re.escape(name) + r"\.\d{8}T\d{6}\.\d{6}Z", moved)
    assert store.set_aside == [root / "runs" / name]
    assert cfg.hash not in {r["hash"] for r in store.runs()} or kind.startswith(("running", "epochs"))
    # the run is absent: fit trains it again, from its first epoch, and stores a good record
    with _no_damage_warnings():
        res = fit(cfg, store=store, progress=False)
        again = Store(root)
        assert res["status"] == "finished" and [h["epoch"] for h in res["history"]] == [1, 2]
        assert again.status(cfg) == "finished" and again.history(cfg) == res["history"]


def test_a_record_under_another_runs_name_is_set_aside(root):
    """A copy of CFG's record under OTHER's file name: its hash field gives it away (older records too)."""
    shutil.copy(_done(root), _done(root, OTHER))
    with _warns_once(f"{OTHER.hash}.json") as w:
        assert Store(root).get(OTHER) is None
    assert "hash field" in w["message"]
    assert Store(root).get(CFG) is not None  # the original is untouched


@pytest.mark.parametrize("reader", ["runs", "get", "status", "history", "start", "log_epoch", "finish",
                                    "sweep", "collect"])
def test_every_reader_sets_a_truncated_record_aside(root, reader, capsys):
    name, _ = _truncate(root)
    store = Store(root)
    plan = pd.DataFrame({"cfg": [CFG]})
    with _warns_once(name):
        if reader == "runs":
            assert CFG.hash not in {r["hash"] for r in store.runs()}
        elif reader == "get":
            assert store.get(CFG) is None
        elif reader == "status":
            assert store.status(CFG) is None
        elif reader == "history":
            assert store.history(CFG) == []
        elif reader == "start":
            store.start(CFG)
            assert store.status(CFG) == "running"
        elif reader == "log_epoch":
            store.log_epoch(CFG, {"epoch": 1, "train_loss": 2.0})
            assert store.history(CFG) == [{"epoch": 1, "train_loss": 2.0}]
        elif reader == "finish":  # a job finishing the run publishes its result in place of the damaged one
            store.finish(CFG, {"status": "finished", "test_acc": 1.0, "history": [{"epoch": 1}]})
            assert store.get(CFG)["test_acc"] == 1.0
        elif reader == "sweep":
            res = run_sweep(plan, store, progress=False)
            assert list(res.status) == ["finished"] and len(res.history.iloc[0]) == 2
        else:
            res = run_sweep(plan, store, progress=False, collect=True)
            assert list(res.status) == ["missing"]
    assert [n.split(".json.")[0] + ".json" for n in _set_aside(root)] == [name]
    if reader == "collect":
        assert f"1 record set aside (unreadable): {name}" in capsys.readouterr().out
    else:
        assert "set aside" not in capsys.readouterr().out


def test_collect_prints_one_summary_line(root, capsys):
    _truncate(root)
    shutil.copy(_done(root), _done(root, OTHER.replace(seed=1)))  # a second damaged one (truncated copy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DamagedRecordWarning)
        res = run_sweep(pd.DataFrame({"cfg": [CFG, OTHER, OTHER.replace(seed=1)]}), root, progress=False,
                        collect=True)
    assert list(res.status) == ["missing"] * 3
    out = capsys.readouterr().out
    assert len(re.findall("set aside", out)) == 1 and out.startswith("2 records set aside (unreadable): ")


# ------------------------------------------------------------------ not damage
def test_records_of_older_versions_and_other_kinds_are_not_set_aside(root):
    """A row-wise record without format/results_version whose hash was made by older rules, a record whose config
    does not validate under this code (a model registered only where it ran), and an ImageFolderConfig record all
    load as they are."""
    from repro_lib.distributed import ImageFolderConfig

    rec = json.loads(_done(root).read_text())
    history = decode_history(rec["history"])
    old = {"hash": "00000000000000aa", "config": {**rec["config"], "lr": 0.125}, "status": "finished",
           "result": rec["result"], "history": history, "finished": 1.0, "host": "h"}
    (root / "runs" / "00000000000000aa.json").write_text(json.dumps(old, sort_keys=True))
    unknown = {**rec, "hash": "00000000000000bb", "config": {**rec["config"], "model": "registered_elsewhere"}}
    (root / "runs" / "00000000000000bb.json").write_text(json.dumps(unknown))
    icfg = ImageFolderConfig(n=64, batch_size=8, num_epochs=1)
    store = Store(root)
    store.finish(icfg, {"status": "finished", "test_acc": 3.0, "history": [{"epoch": 1, "val_acc": 3.0}]})
    assert json.loads(_done(root, icfg).read_text())["results_version"] == config_mod.RESULTS_VERSION
    with _no_damage_warnings():
        fresh = Store(root)
        hashes = {r["hash"] for r in fresh.runs()}
        assert {"00000000000000aa", "00000000000000bb", icfg.hash, CFG.hash} <= hashes
        assert fresh.history("00000000000000aa") == history and fresh.get(icfg)["test_acc"] == 3.0
        assert fresh.set_aside == [] and _set_aside(root) == []


def test_an_imagefolder_record_is_checked_as_one(root):
    """The hash check rebuilds the config of the record's own kind (ImageFolderConfig hashes carry their kind)."""
    from repro_lib.distributed import ImageFolderConfig

    icfg = ImageFolderConfig(n=64, batch_size=8, num_epochs=1)
    Store(root).finish(icfg, {"status": "finished", "test_acc": 3.0, "history": [{"epoch": 1}]})
    _edit(_done(root, icfg), lambda r: r["config"].update(lr=0.5))
    with _warns_once(f"{icfg.hash}.json") as w:
        assert Store(root).get(icfg) is None
    assert f"hashes to {icfg.replace(lr=0.5).hash}" in w["message"]


def test_a_record_of_a_newer_format_is_an_error_not_damage(root):
    _edit(_done(root), lambda r: r.update(format=99))
    with pytest.raises(ValueError, match="newer repro_lib"):
        Store(root).get(CFG)
    assert _done(root).exists()


# ------------------------------------------------------------------ many readers and writers at once
def _read_all(root, barrier, q):
    barrier.wait()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DamagedRecordWarning)
        store = Store(root)
        q.put((len(store.runs()), len(store.set_aside)))


def test_two_processes_finding_the_same_damaged_files_both_go_on(root):
    good = _done(root).read_bytes()
    cfgs = [CFG.replace(seed=s) for s in range(1, 21)]
    for c in cfgs:
        _done(root, c).write_bytes(good[:300])
    ctx = mp.get_context("fork")
    barrier, q = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_read_all, args=(root, barrier, q)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(600)
        assert p.exitcode == 0
    counts = [q.get(timeout=5) for _ in procs]
    assert [n for n, _ in counts] == [2, 2]  # CFG (finished) and OTHER (running) in each
    assert sum(m for _, m in counts) == 20  # every damaged file moved by exactly one of them
    assert len(_set_aside(root)) == 20 and all(not _done(root, c).exists() for c in cfgs)


def test_a_file_moved_by_another_reader_meanwhile_is_tolerated(root, monkeypatch):
    """The other reader's os.replace wins between this reader's check and its own: FileNotFoundError is no
    failure, and only the mover warns."""
    import repro_lib.store as store_mod

    name, _ = _truncate(root)
    real = os.replace

    def raced(src, dst):
        real(src, str(dst) + ".other")  # the other process got there first
        return real(src, dst)

    monkeypatch.setattr(store_mod.os, "replace", raced)
    with _no_damage_warnings():
        store = Store(root)
        assert store.get(CFG) is None and store.set_aside == []
    assert not (root / "runs" / name).exists() and len(_set_aside(root)) == 1


SWEEP = """
import sys, torch
torch.set_num_threads(1)
import pandas as pd
from repro_lib.config import RunConfig
from repro_lib.runs.sweep import run_sweep
cfgs = [RunConfig(width=4, synthetic=True, n=128, n_test=100, batch_size=64, lr=float(lr), num_epochs=2,
                  device="cpu", profile="smoke") for lr in sys.argv[2:]]
run_sweep(pd.DataFrame({"cfg": cfgs}), sys.argv[1], progress=False)
"""


def test_two_sweeps_on_one_store_at_once_leave_only_valid_records(tmp_path):
    root = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    lrs = (["0.5", "1.0", "2.0"], ["2.0", "1.0", "0.25"])  # overlapping, met in opposite orders
    procs = [subprocess.Popen([sys.executable, "-c", SWEEP, str(root), *a], env=env, cwd=ROOT) for a in lrs]
    assert [p.wait(timeout=1800) for p in procs] == [0, 0]  # a guard against a hang only
    files = sorted((root / "runs").iterdir())
    want = {CFG.replace(lr=float(lr)).hash for a in lrs for lr in a}
    assert sorted(p.name for p in files) == sorted(f"{h}.json" for h in want)  # nothing half-written or left
    for p in files:
        rec = json.loads(p.read_text())
        assert rec["format"] == 2 and rec["hash"] == p.stem == RunConfig.from_dict(rec["config"]).hash
        assert [h["epoch"] for h in decode_history(rec["history"])] == [1, 2]
    with _no_damage_warnings():
        assert sorted(r["hash"] for r in Store(root).runs()) == sorted(want)
