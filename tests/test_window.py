"""The budgeted GPU window (``repro_lib.runs.window``, ``python -m repro_lib window``) at smoke size on the CPU: a
call whose budget cannot finish its queue stops between epochs with every member checkpointed, and its output
brings the checkpoints back; the next call, on a fresh copy of the store rebuilt from that output, resumes them and
finishes the queue; a third call finds nothing to do. The stop goes through the ``clock=`` hook of ``fit`` /
``fit_many``: nothing of the engine is swapped. Also the carried data file (``--pack-data``): the images a run
sees through it are the images the JPEG folder gives."""
from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
import torch

from repro_lib import batched, lockstep, profiles, train
from repro_lib import data as data_mod
from repro_lib.__main__ import main as cli
from repro_lib.runs import window as pw
from repro_lib.store import Store

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny tensors

EPOCHS = 5
SEED_ARGS = ["--seeds", "0"]
QUEUE_ARGS = ["--tiny", "--epochs", str(EPOCHS), "--max-runs", "4", "--max-members", "2", *SEED_ARGS]
AMPLE = 3600.0  # a budget far above what a call that should finish its queue needs, on any machine


def slow_epochs(m, seconds: float) -> None:
    """Every logged epoch takes ``seconds`` of the window's clock (``window.now``, patched through ``m``, a
    monkeypatch): the clock is made virtual and moves only by those seconds, so what fits into a budget, and where a
    call stops, is the same on any machine, however fast or loaded (nothing is slept)."""
    t = [0.0]
    m.setattr(pw, "now", lambda: t[0])
    real_log = pw.WindowStore.log_epoch

    def slow_log(self, cfg, metrics):
        t[0] += seconds
        real_log(self, cfg, metrics)

    m.setattr(pw.WindowStore, "log_epoch", slow_log)


def _jpeg_folder(root: Path, per_class_train: int = 8, per_class_test: int = 2) -> Path:
    """A tiny ``cifar10-jpeg`` folder: 10 classes of random 32x32 JPEGs."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, k in (("train", per_class_train), ("test", per_class_test)):
        for c in range(10):
            d = root / "cifar10-jpeg" / split / f"class{c}"
            d.mkdir(parents=True)
            for i in range(k):
                Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(d / f"{i:03d}.jpg")
    return root


def _untar(archive: Path, dest: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        tar.extractall(dest)
    return names


@pytest.fixture(scope="module")
def carried(tmp_path_factory):
    base = tmp_path_factory.mktemp("pw_data")
    src = _jpeg_folder(base / "src")
    info = pw.main(["--pack-data", "--data-root", str(src), "--data-file", str(base / "gpu_data" / pw.DATA_FILE),
                    "--tiny", *SEED_ARGS])
    return src, base / "gpu_data", info


def test_carried_file_gives_the_folder_images(carried, tmp_path, monkeypatch):
    src, gpu_data, info = carried
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    cfgs = [c for it in pw.build_queue((0,), tiny=True) for c in it.cfgs]
    pairs = pw.pairs_of(cfgs)
    assert [tuple(p) for p in info["pairs"]] == pairs == [(31, 0), (62, 0)]
    ref_train = data_mod.load_split(pw.DATASET, "train", src)
    ref_test = data_mod.load_split(pw.DATASET, "test", src)
    assert info["train_total"] == 80 and info["train_rows"] < 80  # rows never drawn are not carried
    with pw.window_data(str(gpu_data), pairs) as (root, desc):
        assert desc["drawn_rows"] == desc["train_rows"] == info["train_rows"]
        for c in cfgs:
            tr, te = train.load_data(c, root)
            i = data_mod.balanced_subset(ref_train.y, c.n, c.seed)
            assert torch.equal(tr.x, ref_train.x[i]) and torch.equal(tr.y, ref_train.y[i])
            assert torch.equal(te.x, ref_test.x) and torch.equal(te.y, ref_test.y)
    with pytest.raises(ValueError, match="does not carry"):  # a seed the file was not built for
        with pw.window_data(str(gpu_data), [(31, 5)]):
            pass


def test_window_stops_resumes_and_skips(carried, tmp_path, monkeypatch):
    _, gpu_data, _ = carried
    local = tmp_path / "local"  # the checkout's store: what the calls' outputs are unpacked into
    local.mkdir()

    def call(k: int, budget: float) -> tuple[dict, Path, Path]:
        device_store = tmp_path / f"device{k}"  # each call sees a fresh copy of the checkout's store
        shutil.copytree(local, device_store)
        out = tmp_path / f"out{k}"
        log = pw.main([*QUEUE_ARGS, "--budget-s", str(budget), "--reserve-s", "0", "--store", str(device_store),
                       "--out", str(out), "--data-root", str(gpu_data)])
        for name in ("records.tar.gz", "checkpoints.tar.gz"):
            if (out / name).exists():
                _untar(out / name, local)
        return log, out, device_store

    # 1: too short for the first group: it stops between epochs, every member checkpointed, checkpoints carried.
    # Every epoch of a run takes 0.65 s of the window's (virtual) clock here, so a group of 2 needs 5 epochs x 1.3 s:
    # longer than the budget
    with monkeypatch.context() as m:
        slow_epochs(m, 0.65)
        log1, out1, dev1 = call(1, 5.0)
    assert (out1 / "window.json").is_file() and not (out1 / "records.tar.gz").exists()
    assert log1["stopped"].startswith("budget") and log1["groups"][0]["status"] == "budget"
    cut = {c["hash"]: c["epoch"] for c in log1["cut"]}
    assert len(cut) == 2 and all(1 <= e < EPOCHS for e in cut.values())
    assert log1["checkpoints"]["carried"] and (out1 / "checkpoints.tar.gz").is_file()
    for h, e in cut.items():
        assert torch.load(dev1 / "checkpoints" / f"{h}.pt", weights_only=False)["epoch"] == e
        assert (local / "checkpoints" / f"{h}.pt").is_file()  # unpacked from the output

    # 2: resumes the cut group from its checkpoints, then trains the second group; brings back four records
    log2, out2, _ = call(2, AMPLE)
    assert log2["stopped"] == "queue finished"
    first = log2["groups"][0]
    assert {r["hash"] for r in first["runs"]} == set(cut) and first["start_epoch"] == min(cut.values())
    assert [g["status"] for g in log2["groups"]] == ["finished", "finished"]
    names = _untar(out2 / "records.tar.gz", tmp_path / "records2")
    assert len(names) == 4 and all(n.startswith("runs/") and n.endswith(".json") for n in names)
    assert log2["checkpoints"]["runs"] == [] and not (out2 / "checkpoints.tar.gz").exists()
    store = Store(local)
    queue = [c for it in pw.build_queue((0,), tiny=True, epochs=EPOCHS, max_runs=4) for c in it.cfgs]
    for c in queue:
        assert store.get(c) is not None
        assert [h["epoch"] for h in store.history(c)] == list(range(1, EPOCHS + 1))
    removed = pw.main([*QUEUE_ARGS, "--tidy", "--store", str(local)])["removed"]  # the unpacked checkpoints
    assert len(removed) >= 2 and not any((local / "checkpoints").glob("*.pt"))

    # 3: nothing left to do
    log3, out3, _ = call(3, AMPLE)
    assert log3["groups"] == [] and log3["stopped"] == "queue finished"
    assert sum(q["finished_before"] for q in log3["queue"]) == 4 and not (out3 / "records.tar.gz").exists()


def test_plan_only_lists_the_queue(capsys):
    pw.main(["--plan-only", "--store", ""])
    out = capsys.readouterr().out
    assert cli(["window", "--plan-only", "--store", ""]) == 0  # python -m repro_lib window: the same call
    assert capsys.readouterr().out == out
    for label, runs in (("table1 (a) N=3125", 21), ("table1 (a) bf16 check", 6),
                        ("table1 (b)+(c) N=3125", 36), ("table1 (a) N=6250", 21), ("table2 (a)-(c) N=3125", 57)):
        line = next(x for x in out.splitlines() if x.startswith(label))
        assert int(line[len(label):].split()[0]) == runs
    assert next(x for x in out.splitlines() if x.startswith("total")).split()[1] == "141"


def test_the_stop_goes_through_the_clock_hook(carried, tmp_path, monkeypatch):
    """The window hands ``fit`` / ``fit_many`` its own between-epochs hook (``clock=``) and leaves the engine's
    ``CheckpointClock`` alone, before, during and after the call; a group it cuts between epochs resumes from its
    checkpoints in the next call on the same store and finishes every epoch."""
    _, gpu_data, _ = carried
    engine = train.CheckpointClock, batched.CheckpointClock
    calls = []

    def spy(real):
        def wrapped(*a, **kw):
            calls.append((kw.get("clock"), train.CheckpointClock, batched.CheckpointClock))
            return real(*a, **kw)
        return wrapped

    monkeypatch.setattr(train, "fit", spy(train.fit))
    monkeypatch.setattr(batched, "fit_many", spy(batched.fit_many))
    store = tmp_path / "store"
    args = ["--tiny", "--epochs", str(EPOCHS), "--max-runs", "2", "--max-members", "2", *SEED_ARGS, "--reserve-s",
            "0", "--store", str(store), "--data-root", str(gpu_data)]
    with monkeypatch.context() as m:
        slow_epochs(m, 0.65)
        log1 = pw.main([*args, "--budget-s", "5", "--out", str(tmp_path / "out1")])
    assert log1["script"] == "python -m repro_lib window"
    assert log1["groups"][0]["status"] == "budget" and log1["groups"][0]["members"] == 2
    cut = {c["hash"]: c["epoch"] for c in log1["cut"]}
    assert len(cut) == 2 and all(1 <= e < EPOCHS for e in cut.values())
    assert calls and all(clock is not None and clock is not engine[0] and (tc, bc) == engine
                         for clock, tc, bc in calls)
    assert (train.CheckpointClock, batched.CheckpointClock) == engine

    log2 = pw.main([*args, "--budget-s", str(AMPLE), "--out", str(tmp_path / "out2")])
    assert log2["stopped"] == "queue finished" and [g["status"] for g in log2["groups"]] == ["finished"]
    assert log2["groups"][0]["start_epoch"] == min(cut.values())
    assert (train.CheckpointClock, batched.CheckpointClock) == engine
    s = Store(store)
    queue = [c for it in pw.build_queue((0,), tiny=True, epochs=EPOCHS, max_runs=2) for c in it.cfgs]
    assert {c.hash for c in queue} == set(cut)
    for c in queue:
        assert s.get(c)["status"] == "finished"
        assert [h["epoch"] for h in s.history(c)] == list(range(1, EPOCHS + 1))


def test_group_too_long_for_the_budget_shrinks(carried, tmp_path, monkeypatch):
    """Checkpoints too large to bring back (as the paper's network's): a group checks its projection after the probe
    epochs and, as it would overrun, stops with every member checkpointed; the log says the runs restart."""
    _, gpu_data, _ = carried
    monkeypatch.setattr(pw, "OUT_FILE_LIMIT", 1024)
    slow_epochs(monkeypatch, 0.3)  # a group of 2 needs 12 epochs x 0.6 s: more than the budget
    store, out = tmp_path / "store", tmp_path / "out"
    log = pw.main(["--tiny", "--epochs", "12", "--max-runs", "2", "--max-members", "2", *SEED_ARGS,
                   "--budget-s", "6", "--reserve-s", "0", "--probe-epochs", "1", "--store", str(store),
                   "--out", str(out), "--data-root", str(gpu_data)])
    first = log["groups"][0]  # predicted from the GPU rates to fit; measured after epoch 2 not to
    assert first["members"] == 2 and first["status"] == "shrink" and first["end_epoch"] == 2
    finished = {r["hash"] for r in log["finished"]}  # the members that fit in the time left went on
    assert len(finished) < 2 and all(g["members"] == 1 for g in log["groups"][1:])
    assert all(torch.load(store / "checkpoints" / f"{r['hash']}.pt", weights_only=False)["epoch"] >= 2
               for r in first["runs"] if r["hash"] not in finished)
    assert not log["checkpoints"]["carried"] and "restart" in log["checkpoints"]["note"]
    assert not (out / "checkpoints.tar.gz").exists() and (out / "window.json").is_file()


def test_a_cut_group_goes_on_smaller_even_where_the_estimate_says_it_fits(carried, tmp_path, monkeypatch):
    """The probe and the group planner use one time model; even where the planner's estimate (forced here to 0 s)
    says the cut group would fit, the next group from its members is smaller, so a shrink never restarts the same
    group; a single run cut by its probe ends the call."""
    _, gpu_data, _ = carried
    monkeypatch.setattr(pw, "OUT_FILE_LIMIT", 1024)
    slow_epochs(monkeypatch, 0.3)
    monkeypatch.setattr(pw.Rates, "group_s", lambda self, cfg, members, epochs: 0.0)
    log = pw.main(["--tiny", "--epochs", "12", "--max-runs", "2", "--max-members", "2", *SEED_ARGS,
                   "--budget-s", "6", "--reserve-s", "0", "--probe-epochs", "1", "--store", str(tmp_path / "s"),
                   "--out", str(tmp_path / "o"), "--data-root", str(gpu_data)])
    sizes = [(g["members"], g["status"]) for g in log["groups"]]
    assert sizes[0] == (2, "shrink") and sizes[1][0] == 1, sizes
    if sizes[1][1] == "shrink":
        assert len(sizes) == 2 and "single run" in log["stopped"]


# ---------------------------------------------------------------- training paths (--engine) and measured rates
def _fit_history(cfg, root):
    return [{k: v for k, v in h.items() if k not in ("seconds", "group_size")}
            for h in train.fit(cfg, data_root=root, progress=False)["history"]]


@pytest.mark.parametrize("engine", ["onegraph", "streams"])
def test_window_with_a_lockstep_engine_stops_resumes_and_equals_fit(carried, tmp_path, monkeypatch, engine):
    """``--engine onegraph|streams``: the group goes through ``lockstep.fit_lockstep`` with the window's clock; cut
    between epochs by the budget, it resumes in the next call, and every run's record equals its own ``fit`` run
    (bit for bit on a CPU)."""
    _, gpu_data, _ = carried
    store = tmp_path / "store"
    args = ["--tiny", "--epochs", str(EPOCHS), "--max-runs", "2", "--max-members", "2", *SEED_ARGS, "--reserve-s",
            "0", "--store", str(store), "--data-root", str(gpu_data), "--engine", engine]
    with monkeypatch.context() as m:
        slow_epochs(m, 0.65)
        log1 = pw.main([*args, "--budget-s", "5", "--out", str(tmp_path / "out1")])
    assert log1["engine"] == engine and log1["rate_basis"] == "estimated"
    assert log1["groups"][0]["status"] == "budget" and log1["groups"][0]["engine"] == engine
    assert len(log1["cut"]) == 2
    log2 = pw.main([*args, "--budget-s", str(AMPLE), "--out", str(tmp_path / "out2")])
    assert [(g["status"], g["engine"]) for g in log2["groups"]] == [("finished", engine)]
    s = Store(store)
    queue = [c for it in pw.build_queue((0,), tiny=True, epochs=EPOCHS, max_runs=2) for c in it.cfgs]
    with pw.window_data(str(gpu_data), pw.pairs_of(queue)) as (root, _):
        for c in queue:
            got = [{k: v for k, v in h.items() if k not in ("seconds", "group_size")} for h in s.history(c)]
            assert got == _fit_history(c, root)


def test_a_failing_engine_falls_back_to_the_paper_path(carried, tmp_path, monkeypatch):
    _, gpu_data, _ = carried

    def broken(*a, **kw):
        raise RuntimeError("capture failed")

    monkeypatch.setattr(lockstep, "fit_lockstep", broken)
    log = pw.main(["--tiny", "--epochs", "2", "--max-runs", "2", "--max-members", "2", *SEED_ARGS, "--budget-s",
                   str(AMPLE), "--reserve-s", "0", "--store", str(tmp_path / "s"), "--out", str(tmp_path / "o"),
                   "--data-root", str(gpu_data), "--engine", "onegraph"])
    assert [(g["engine"], g["status"]) for g in log["groups"]] == [("onegraph", "error"), ("paper", "finished")]
    assert log["engine"] == "paper" and "capture failed" in log["engine_why"] and len(log["finished"]) == 2


def test_auto_engine_and_time_model_take_the_measured_rate(tmp_path):
    rows = [dict(path=p, precision="fp32", members=k, images_per_s=r, train_images_per_s=1.25 * r, complete=True,
                 valid=v, statuses=["finished"] * k)
            for p, k, r, v in (("paper", 1, 14e3, True), ("paper", 8, 15e3, True), ("onegraph", 1, 16e3, True),
                               ("onegraph", 8, 48e3, True), ("streams", 8, 60e3, None))]
    f = tmp_path / "results_paper_rate_h100.json"
    f.write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "protocol": {"batch_size": 128, "width": 64},
                             "rows": rows}))
    path, rate, why = pw.select_path("auto", tmp_path)
    assert path == "onegraph" and rate.seconds == {1: 1 / 20e3, 8: 1 / 60e3} and str(f) in why
    assert pw.select_path("paper", f)[1].seconds == {1: 1 / (1.25 * 14e3), 8: 1 / (1.25 * 15e3)}
    assert pw.select_path("auto", tmp_path / "none")[:2] == ("paper", None)
    assert pw.select_path("auto", None, tiny=True)[:2] == ("paper", None)
    cfg = next(c for it in pw.build_queue() for c in it.cfgs)  # Table 1 (a), N = 3,125, evaluation every 4 epochs
    evals = 1 + 10000 / 4 / (3 * 3125)
    assert pw.model_epoch_s(cfg, 8, rate) == pytest.approx(8 * 3125 / 60e3 * evals)
    assert pw.model_epoch_s(cfg, 1, rate) == pytest.approx(3125 / 20e3 * evals)
    assert pw.model_epoch_s(cfg, 1) == pytest.approx(3125 * profiles.SECONDS_PER_IMAGE_FIT[128] * evals)


def test_the_gpu_call_script_runs_the_benchmark_then_the_window(carried, tmp_path):
    """``benchmarks/gpu_window.sh`` (the prepared GPU call) at smoke size on the CPU: the benchmark writes its JSON
    into OUT, then the window trains with the rates it finds there and writes its records into the same OUT."""
    import os
    import subprocess
    import sys

    _, gpu_data, _ = carried
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS="1",
               BENCH_ARGS="--device cpu --width 4 --n 32 --n-test 64 --batch-size 16 --epochs 1 --paths onegraph "
                          "--precisions fp32 --members 1 --no-profile",
               WINDOW_ARGS=f"--tiny --epochs 2 --max-runs 2 --max-members 2 --seeds 0 --store {tmp_path / 'store'} "
                           f"--data-root {gpu_data}")
    # budgets far above what the smoke-size work needs (each part stops when its work is done), so that a slow or
    # loaded machine does not cut it
    p = subprocess.run(["bash", "benchmarks/gpu_window.sh", str(out), "3000", "1200"], cwd=root, env=env,
                       capture_output=True, text=True, timeout=3600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    bench = json.loads((out / "results_paper_rate_cpu.json").read_text())
    assert [(r["path"], r["valid"]) for r in bench["rows"]] == [("onegraph", True)]
    log = json.loads((out / "window.json").read_text())
    assert log["stopped"] == "queue finished" and len(log["finished"]) == 2 and log["rate_basis"] == "estimated"
    assert all((out / f).is_file() for f in ("records.tar.gz", "bench_log.txt", "window_log.txt"))
    assert "benchmark: exit 0" in p.stdout and "window: exit 0" in p.stdout
