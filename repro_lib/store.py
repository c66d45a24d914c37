"""The results store: one JSON file per run plus atomic checkpoint files, under ``results/`` (issue 9: safe for
many writers on many machines over a shared filesystem such as NFS, where SQLite's locking is not).

Layout of a results directory::

    results/runs/<hash>.json           the record of a finished or diverged run: config, status, result summary
                                       and per-epoch history. Created once, never rewritten.
    results/runs/<hash>.running.json   config and start time of a run that has started and not finished
    results/runs/<hash>.epochs.json    per-epoch metrics of that unfinished run (rewritten whole at every epoch)
    results/checkpoints/<hash>.pt      latest epoch-boundary state of an unfinished run
    results/store.sqlite               the store of earlier versions, if any: its rows are imported into
                                       ``runs/`` when a ``Store`` opens the directory (again if the file changed)

Guarantees:

* A finished (or diverged) run is never recomputed: ``get(cfg)`` returns its stored result.
* Every write is atomic: a file is written under a temporary name in the same directory (unique per host,
  process and call) and ``os.replace``-d over the old one, so a reader, or a crash, sees the old or the new
  file, never half of one; no temporary file is left behind.
* One record per run, never double-counted: the final record is published with ``os.link`` (an atomic
  create-if-absent, also on NFS), so when two jobs finish the same cell at the same moment the first one wins
  and the second result is dropped; ``start`` and ``log_epoch`` never touch a finished record.
* A process killed mid-run loses at most the epoch in progress: ``fit`` checkpoints model, optimizer, tracker
  and history at every epoch boundary and resumes from there (data order is a function of (seed, epoch), so no
  RNG state needs saving; see ``data.TensorBatches``).

The index (``runs()``) is built by scanning ``runs/``. This module stores; it does not train.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import signal
import socket
import sqlite3
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import torch

DONE = ("finished", "diverged")

_LEGACY = "store.sqlite"  # the SQLite store of earlier versions
_IMPORTED = ".sqlite_imported"  # marker in runs/: the (size, mtime) of the SQLite files imported last


def _json(obj) -> str:
    def fix(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [fix(x) for x in v]
        return v

    return json.dumps(fix(obj), sort_keys=True)


def _tmp_name(path: Path) -> Path:
    """A temporary name next to ``path``, unique across hosts, processes and calls (starts with a dot)."""
    return path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


#: what a scheduler sends before it stops a job (SLURM: --signal=USR1/USR2@..., then SIGTERM; submitit's
#: preemption handler uses USR2)
_PREEMPTION_SIGNALS = tuple(getattr(signal, n) for n in ("SIGUSR1", "SIGUSR2", "SIGTERM") if hasattr(signal, n))


@contextlib.contextmanager
def _signals_deferred():
    """Run the block with the preemption signals' Python handlers deferred, then handle what arrived. A handler
    that requeues and exits (submitit) would otherwise run in the middle of ``torch.save`` -- Python code runs
    between its writes -- where its ``SystemExit`` surfaces as a ``RuntimeError`` of the zip writer: the job dies
    with an exception instead of being requeued (seen in ``tests/test_cluster.py``). Main thread only (Python runs
    signal handlers there); elsewhere the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    old = {}
    for sig in _PREEMPTION_SIGNALS:
        if signal.getsignal(sig) is not None:  # None: a handler installed outside Python, left alone
            old[sig] = signal.signal(sig, lambda s, _frame: caught.append(s))
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for sig in caught:
            signal.raise_signal(sig)


def save_torch_atomic(path: Path, state) -> None:
    """``torch.save`` atomically: to a temporary file next to ``path``, flushed to disk (fsync), then renamed over
    the old file -- a crash leaves the old file or the new one, never half of one. A preemption signal arriving
    meanwhile is handled once the file is on disk (:func:`_signals_deferred`)."""
    with _signals_deferred():
        _write_atomic(path, lambda f: torch.save(state, f))


def load_torch_checkpoint(path: Path, map_location=None):
    """The checkpoint at ``path``, or None. An unreadable one (a node that died mid-write on a file system without
    ordered renames) is set aside as ``<name>.corrupt`` with a warning and the run starts over, rather than failing
    every requeue of the job."""
    if not path.exists():
        return None
    try:
        return torch.load(path, map_location=map_location, weights_only=False)
    except (EOFError, RuntimeError, pickle.UnpicklingError) as e:
        os.replace(path, path.with_name(path.name + ".corrupt"))
        warnings.warn(f"checkpoint {path} is unreadable ({e}); moved to {path.name}.corrupt, the run restarts")
        return None


def _write_tmp(path: Path, content) -> Path:
    """A temporary file next to ``path`` holding ``content`` (text, or a function writing to the open binary file),
    flushed to disk (fsync); removed again if writing fails."""
    tmp = _tmp_name(path)
    try:
        with open(tmp, "wb") as f:
            if callable(content):
                content(f)
            else:
                f.write(content.encode())
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _write_atomic(path: Path, content) -> None:
    """Replace ``path`` by a file holding ``content`` (as :func:`_write_tmp`), atomically."""
    tmp = _write_tmp(path, content)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _create_once(path: Path, text: str) -> bool:
    """Create ``path`` holding ``text`` if it does not exist, atomically; False if it existed (nothing written).

    ``os.link`` of a complete temporary file is an atomic create-if-absent (the classic NFS-safe lock). On a
    filesystem without hard links it falls back to check-then-rename (safe for one writer per run)."""
    tmp = _write_tmp(path, text)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError:  # no hard links here
        if path.exists():
            return False
        os.replace(tmp, path)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def _read(path: Path):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


class Store:
    """Results of many runs, keyed by ``RunConfig.hash`` (see the module docstring for the layout)."""

    def __init__(self, root: str | os.PathLike = "results"):
        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        (self.root / "checkpoints").mkdir(exist_ok=True)
        self._logged: dict[str, dict[int, dict]] = {}  # hash -> epoch -> metrics, of the runs this object logs
        if (self.root / _LEGACY).exists():
            self._import_sqlite()

    # ------------------------------------------------------------------ files of one run
    def _done_path(self, h: str) -> Path:
        return self.runs_dir / f"{h}.json"

    def _running_path(self, h: str) -> Path:
        return self.runs_dir / f"{h}.running.json"

    def _epochs_path(self, h: str) -> Path:
        return self.runs_dir / f"{h}.epochs.json"

    def _record(self, h: str) -> dict | None:
        """The final record of run ``h`` (finished or diverged), else None."""
        return _read(self._done_path(h))

    def _epochs(self, h: str) -> list[dict]:
        return _read(self._epochs_path(h)) or []

    # ------------------------------------------------------------------ runs
    def get(self, cfg) -> dict | None:
        """The stored result of a finished or diverged run, else None."""
        rec = self._record(cfg.hash)
        return rec["result"] if rec is not None else None

    def status(self, cfg) -> str | None:
        """``"finished"`` / ``"diverged"``, ``"running"`` (started, not finished: running or interrupted), or None."""
        rec = self._record(cfg.hash)
        if rec is not None:
            return rec["status"]
        return "running" if self._running_path(cfg.hash).exists() else None

    def start(self, cfg) -> None:
        """Mark ``cfg`` as started (keeps the first start time). A finished record is left as it is."""
        h = cfg.hash
        if self._done_path(h).exists():
            return
        now = time.time()
        old = _read(self._running_path(h)) or {}
        _write_atomic(self._running_path(h), _json({
            "hash": h, "config": cfg.to_dict(), "status": "running", "started": old.get("started", now),
            "updated": now, "host": socket.gethostname()}))

    def log_epoch(self, cfg, metrics: dict[str, Any]) -> None:
        """Record one epoch's metrics (replacing an earlier record of the same epoch)."""
        h = cfg.hash
        if self._done_path(h).exists():
            return
        if h not in self._logged:
            self._logged[h] = {int(r["epoch"]): r for r in self._epochs(h)}
        rows = self._logged[h]
        rows[int(metrics["epoch"])] = json.loads(_json(metrics))
        _write_atomic(self._epochs_path(h), json.dumps([rows[e] for e in sorted(rows)], sort_keys=True))

    def finish(self, cfg, result: dict[str, Any]) -> None:
        """Record the final result (status taken from ``result['status']``; history from ``result['history']``,
        else the logged epochs) and drop the checkpoint. If the run already has a final record (another job
        finished it first) that record is kept and this result is discarded."""
        h = cfg.hash
        history = result["history"] if "history" in result else self._epochs(h)
        summary = {k: v for k, v in result.items() if k != "history"}
        _create_once(self._done_path(h), _json({
            "hash": h, "config": cfg.to_dict(), "status": result["status"], "result": summary,
            "history": history, "finished": time.time(), "host": socket.gethostname()}))
        self._logged.pop(h, None)
        for p in (self._running_path(h), self._epochs_path(h), self._ckpt_path(cfg)):
            p.unlink(missing_ok=True)

    def history(self, cfg_or_hash) -> list[dict]:
        """Per-epoch metrics in epoch order (of the final record once the run is done)."""
        h = getattr(cfg_or_hash, "hash", cfg_or_hash)
        rec = self._record(h)
        return rec["history"] if rec is not None else self._epochs(h)

    def runs(self) -> list[dict]:
        """Every run: config fields, status and result summary, one dict each (built by scanning ``runs/``)."""
        done, running = {}, {}
        for p in self.runs_dir.glob("*.json"):
            if p.name.startswith("."):
                continue
            h, _, kind = p.name[:-len(".json")].partition(".")
            if kind == "":
                done[h] = p
            elif kind == "running":
                running[h] = p
        out = []
        for h in sorted(set(done) | set(running)):
            rec = _read(done[h]) if h in done else None
            if rec is None:
                rec = _read(running[h]) if h in running else None
                if rec is None:  # finished while we were scanning
                    rec = self._record(h)
            if rec is None:
                continue
            row = {"hash": h, **rec["config"], "status": rec["status"]}
            row.update({k: v for k, v in (rec.get("result") or {}).items() if k not in ("config", "status")})
            out.append(row)
        return out

    # ------------------------------------------------------------------ checkpoints
    def _ckpt_path(self, cfg) -> Path:
        return self.root / "checkpoints" / f"{cfg.hash}.pt"

    def save_checkpoint(self, cfg, state: dict) -> None:
        save_torch_atomic(self._ckpt_path(cfg), state)

    def load_checkpoint(self, cfg, map_location=None) -> dict | None:
        """The run's resume checkpoint, or None (:func:`load_torch_checkpoint`)."""
        return load_torch_checkpoint(self._ckpt_path(cfg), map_location)

    # ------------------------------------------------------------------ the SQLite store of earlier versions
    def _legacy_signature(self) -> list:
        out = []
        for suffix in ("", "-wal"):
            p = self.root / (_LEGACY + suffix)
            if p.exists():
                st = p.stat()
                out.append([suffix, st.st_size, st.st_mtime_ns])
        return out

    def _import_sqlite(self) -> int:
        """Copy the rows of ``store.sqlite`` (the store before issue 9) into ``runs/``; return how many runs were
        written. Idempotent: a final record is created only if absent, an unfinished run's files only if they
        hold fewer epochs. Skipped when the SQLite files are unchanged since the last import."""
        sig = self._legacy_signature()
        marker = self.runs_dir / _IMPORTED
        if _read(marker) == sig:
            return 0
        con = sqlite3.connect(self.root / _LEGACY, timeout=60)
        try:
            runs = con.execute("SELECT hash, config, status, result, started, updated FROM runs").fetchall()
            epochs: dict[str, list] = {}
            for h, m in con.execute("SELECT hash, metrics FROM epochs ORDER BY hash, epoch"):
                epochs.setdefault(h, []).append(json.loads(m))
        except sqlite3.OperationalError:  # an empty file, or no tables
            runs, epochs = [], {}
        finally:
            con.close()
        written = 0
        for h, config, status, result, started, updated in runs:
            hist = epochs.get(h, [])
            if status in DONE and result:
                written += _create_once(self._done_path(h), _json({
                    "hash": h, "config": json.loads(config), "status": status, "result": json.loads(result),
                    "history": hist, "finished": updated, "host": "store.sqlite"}))
            elif not self._done_path(h).exists():
                if not self._running_path(h).exists():
                    _write_atomic(self._running_path(h), _json({
                        "hash": h, "config": json.loads(config), "status": "running", "started": started,
                        "updated": updated, "host": "store.sqlite"}))
                if len(self._epochs(h)) < len(hist):
                    _write_atomic(self._epochs_path(h), json.dumps(hist, sort_keys=True))
                written += 1
        _write_atomic(marker, json.dumps(sig))
        return written
