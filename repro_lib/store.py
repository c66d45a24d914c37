"""The results store: one JSON file per run plus atomic checkpoint files, under ``results/`` (safe for
many writers on many machines over a shared filesystem such as NFS, where SQLite's locking is not).

Layout of a results directory::

    results/runs/<hash>.json           the record of a finished or diverged run: config, status, result summary,
                                       per-epoch history and provenance. Created once, never rewritten.
    results/runs/<hash>.running.json   config, start time and provenance of a run that has started and not finished
    results/runs/<hash>.epochs.json    per-epoch metrics of that unfinished run (rewritten whole at every epoch)
    results/runs/corrupt/<name>.<UTC>  a record file found unreadable or malformed, set aside (see below)
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

* A damaged record never stops a reader: a record file that is not valid JSON, lacks a required key, holds a
  value of the wrong type, or whose config hashes to another hash than its file name (checked where the record
  says it was written under the current ``config.RESULTS_VERSION`` and its config can be rebuilt here as a
  ``RunConfig`` or ``config.ImageFolderConfig``; a config that does not validate under this code -- a model
  registered only where it ran, a rule tightened since -- is not taken for damage) is moved to
  ``runs/corrupt/<name>.<UTC time stamp>`` with one :class:`DamagedRecordWarning` naming the file and the fault;
  the run then counts as not stored, so a sweep trains it again (``collect=True``: shows it as missing).
  ``Store.set_aside`` lists the files this object moved. Two readers finding the same damaged file at once both
  go on (the second finds it already moved). A record of a newer format than this version reads is no damage:
  reading it raises a ``ValueError`` naming the file.

Record format (``"format"`` in a record; row-wise records of earlier versions, without the key, still load):

* ``2``: the history is stored column-wise -- ``{"epochs": N, "columns": {key: column}}`` -- and every
  ``history``/``runs``/``get`` reader gets back exactly the list of per-epoch dicts a row-wise record gives (NaN
  as None, +-inf as "inf"/"-inf", keys sorted). A column is a JSON list (one value per epoch), or an object with
  ``rows`` (the 0-based epochs that have the key, when not all do), ``names`` (per-epoch dicts with these keys,
  such as ``angular_update_per_tensor``: the names once instead of at every epoch) and either ``values`` (JSON)
  or ``f8``: float64 numbers (null as NaN, "inf"/"-inf" as +-inf; per name all epochs, then the next name) as
  little-endian bytes, byte-shuffled, zlib-compressed and base85-encoded. Nothing is rounded: every float reads
  back bit for bit. A 100-epoch record with the per-tensor tracker series is about a fifth of its row-wise size.
* Every record and running file also holds ``env`` (``repro_lib``: package version, ``torch``: its version,
  ``device``: "cpu" or the CUDA device name the run used, ``num_threads``: ``torch.get_num_threads()``, ``cpu``:
  :func:`cpu_identity`, the processor's model and vector capability) and ``results_version``
  (``config.RESULTS_VERSION`` when it was written). A run re-trains bit for bit on the same CPU with the same
  thread count; on another CPU the kernels may round differently, and the result agrees within the seed noise.

The index (``runs()``) is built by scanning ``runs/``. This module stores; it does not train.
"""
from __future__ import annotations

import base64
import contextlib
import datetime
import functools
import importlib.metadata
import json
import math
import os
import pickle
import re
import signal
import socket
import sqlite3
import struct
import threading
import time
import uuid
import warnings
import zlib
from pathlib import Path
from typing import Any

import torch

from . import config as _config

DONE = ("finished", "diverged")
MISSING = "missing"  # the status a reader gives a run this store does not hold (collect mode, tables)

_LEGACY = "store.sqlite"  # the SQLite store of earlier versions
_IMPORTED = ".sqlite_imported"  # marker in runs/: the (size, mtime) of the SQLite files imported last


FORMAT = 2  # record format written by this version (module docstring); records without the key are format 1


def _json(obj, compact: bool = False) -> str:
    def fix(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [fix(x) for x in v]
        return v

    return json.dumps(fix(obj), sort_keys=True, separators=(",", ":") if compact else None)


# ------------------------------------------------------------------ compact (column-wise) history, format 2
_AS_F8 = {None: math.nan, "inf": math.inf, "-inf": -math.inf}  # what ``_json`` made of NaN and +-inf


def _pack_f8(values: list) -> str:
    """float64 values (None as NaN, "inf"/"-inf" as +-inf): little-endian bytes, byte-shuffled (all first bytes, then
    all second bytes, ...: the sign/exponent bytes of a slowly changing series compress well), zlib, base85 (no
    quote or backslash)."""
    raw = struct.pack(f"<{len(values)}d", *(v if type(v) is float else _AS_F8[v] for v in values))
    return base64.b85encode(zlib.compress(b"".join(raw[i::8] for i in range(8)), 9)).decode("ascii")


def _unpack_f8(text: str, n: int) -> list:
    shuffled = zlib.decompress(base64.b85decode(text))
    if len(shuffled) != 8 * n:
        raise ValueError(f"{len(shuffled)} bytes where {n} float64 values were expected")
    raw = bytearray(8 * n)
    for i in range(8):
        raw[i::8] = shuffled[i * n:(i + 1) * n]
    return [v if math.isfinite(v) else (None if v != v else ("inf" if v > 0 else "-inf"))
            for v in struct.unpack(f"<{n}d", raw)]


def _floats(values: list) -> bool:
    """Every value a float, None, "inf" or "-inf" (after ``_json``: no NaN/inf floats left), one at least a float."""
    return any(type(v) is float for v in values) and all(
        type(v) is float or v is None or (type(v) is str and v in _AS_F8) for v in values)


def encode_history(history: list[dict]) -> dict:
    """The column-wise form of a list of per-epoch dicts (module docstring, format 2); ``decode_history`` gives
    back exactly ``json.loads(_json(history))``: what a row-wise record reads back as."""
    rows = json.loads(_json(history))
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise TypeError(f"history: a list of per-epoch dicts expected, got {str(history)[:80]}")
    n = len(rows)
    cols = {}
    for key in sorted({k for r in rows for k in r}):
        at = [i for i, r in enumerate(rows) if key in r]
        vals = [rows[i][key] for i in at]
        col: dict[str, Any] = {} if len(at) == n else {"rows": at}
        names = sorted(vals[0]) if isinstance(vals[0], dict) else None
        if names is not None and all(isinstance(v, dict) and sorted(v) == names for v in vals):
            col["names"] = names
            flat = [v[name] for name in names for v in vals]  # name-major: one series per name
            if _floats(flat):
                col["f8"] = _pack_f8(flat)
            else:
                col["values"] = [[v[name] for name in names] for v in vals]
        elif _floats(vals):
            col["f8"] = _pack_f8(vals)
        elif not col:
            col = vals
        else:
            col["values"] = vals
        cols[key] = col
    return {"epochs": n, "columns": cols}


class _Malformed(Exception):
    """A record file that cannot be used (the message says why)."""


def _need(ok: bool, why: str) -> None:
    if not ok:
        raise _Malformed(why)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def decode_history(h) -> list[dict]:
    """Per-epoch dicts from a stored history: a list (row-wise, format 1) or ``encode_history``'s columns."""
    if isinstance(h, list):
        _need(all(isinstance(r, dict) for r in h), "history: not a list of objects")
        return h
    _need(isinstance(h, dict) and _is_int(h.get("epochs")) and h["epochs"] >= 0
          and isinstance(h.get("columns"), dict), "history: neither a list of epochs nor {epochs, columns}")
    n = h["epochs"]
    rows: list[dict] = [{} for _ in range(n)]
    for key, col in h["columns"].items():
        try:
            if isinstance(col, list):
                at, vals = range(n), col
            else:
                _need(isinstance(col, dict), f"history column {key!r}: neither a list nor an object")
                at = col.get("rows", range(n))
                _need(isinstance(at, (list, range)) and all(_is_int(i) and 0 <= i < n for i in at)
                      and len(set(at)) == len(at), f"history column {key!r}: bad rows")
                names = col.get("names")
                if names is not None:
                    _need(isinstance(names, list) and all(isinstance(x, str) for x in names),
                          f"history column {key!r}: bad names")
                    if "f8" in col:
                        flat = _unpack_f8(col["f8"], len(at) * len(names))
                        vals = [dict(zip(names, flat[j::len(at)])) for j in range(len(at))]
                    else:
                        _need(isinstance(col.get("values"), list)
                              and all(isinstance(v, list) and len(v) == len(names) for v in col["values"]),
                              f"history column {key!r}: bad values")
                        vals = [dict(zip(names, v)) for v in col["values"]]
                elif "f8" in col:
                    vals = _unpack_f8(col["f8"], len(at))
                else:
                    vals = col.get("values")
                    _need(isinstance(vals, list), f"history column {key!r}: no values")
        except (ValueError, TypeError, zlib.error, struct.error) as e:
            raise _Malformed(f"history column {key!r}: {e}") from None
        _need(len(vals) == len(at), f"history column {key!r}: {len(vals)} values for {len(at)} epochs")
        for i, v in zip(at, vals):
            rows[i][key] = v
    return [dict(sorted(r.items())) for r in rows]


# ------------------------------------------------------------------ provenance
@functools.lru_cache(maxsize=1)
def package_version() -> str:
    """The installed ``repro_lib`` version, else the one in the checkout's ``pyproject.toml``, else "unknown"."""
    try:
        return importlib.metadata.version("repro_lib")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    except OSError:
        return "unknown"
    project = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    m = re.search(r'^version\s*=\s*"([^"]+)"', project.group(1), re.M) if project else None
    return m.group(1) if m else "unknown"


def _device_name(device: str) -> str:
    """The device a run with config field ``device`` uses here: "cpu" or the CUDA device's name."""
    from .train import resolve_device

    try:
        d = resolve_device(device)
    except Exception:  # e.g. 'cuda' named where there is none: the record is not written by the run itself
        return str(device)
    if d.type == "cuda":
        try:
            return torch.cuda.get_device_name(d)
        except Exception:
            return "cuda"
    return d.type


@functools.lru_cache(maxsize=1)
def cpu_identity() -> dict:
    """The CPU a run trains on, as far as this machine tells: ``model`` (the model name of ``/proc/cpuinfo``, else
    ``platform.processor()``), ``family`` and ``model_id`` (the x86 family / model numbers, where known) and
    ``capability`` (``torch.backends.cpu.get_cpu_capability()``, the vector instructions torch's kernels use).
    Two CPUs that differ here may round a run differently: bit-for-bit reproduction needs the same CPU and thread
    count."""
    import platform

    info = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "cpu family", "model") and key not in info:
                info[key] = value.strip()
            if len(info) == 3:
                break
    except OSError:
        pass
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except Exception:  # an old torch
        capability = "unknown"
    as_int = lambda v: int(v) if v is not None and str(v).isdigit() else v  # noqa: E731
    return {"model": info.get("model name") or platform.processor() or platform.machine(),
            "family": as_int(info.get("cpu family")), "model_id": as_int(info.get("model")),
            "capability": capability}


def provenance(cfg) -> dict:
    """``env`` and ``results_version`` of a record written now for ``cfg`` (module docstring)."""
    return {"env": {"repro_lib": package_version(), "torch": torch.__version__,
                    "device": _device_name(getattr(cfg, "device", "auto")), "num_threads": torch.get_num_threads(),
                    "cpu": cpu_identity()},
            "results_version": _config.RESULTS_VERSION}


class DamagedRecordWarning(UserWarning):
    """A record file of the results store was unreadable or malformed and has been set aside."""


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
    """The JSON in ``path``; None if there is none or it does not parse (used for the import marker only)."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def _rebuilt_hash_problem(config: dict, h: str) -> str | None:
    """Why ``config`` cannot be the config of run ``h``, or None. Checked only with the config kinds whose fields
    hold every key of ``config`` and that validate it here; one that does not validate under this code (written
    by other code, a model registered only in the process that ran it) cannot be checked and passes."""
    from dataclasses import fields

    from .config import ImageFolderConfig, RunConfig

    kinds = [RunConfig]
    if not set(config) <= {f.name for f in fields(RunConfig)}:
        kinds.append(ImageFolderConfig)
    others = []
    for cls in kinds:
        if not set(config) <= {f.name for f in fields(cls)}:
            continue
        try:
            rebuilt = cls.from_dict(config).hash
        except Exception:  # does not validate here: cannot tell
            continue
        if rebuilt == h:
            return None
        others.append(rebuilt)
    return f"its config hashes to {others[0]}, not to the file name's {h}" if others else None


class Store:
    """Results of many runs, keyed by ``RunConfig.hash`` (see the module docstring for the layout)."""

    def __init__(self, root: str | os.PathLike = "results"):
        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        (self.root / "checkpoints").mkdir(exist_ok=True)
        self._logged: dict[str, dict[int, dict]] = {}  # hash -> epoch -> metrics, of the runs this object logs
        self._hash_checked: dict[tuple, str | None] = {}  # (hash, config JSON) -> _rebuilt_hash_problem
        #: the record files (their paths in ``runs/``) this object found unreadable or malformed and moved to
        #: ``runs/corrupt/``, in the order it did so
        self.set_aside: list[Path] = []
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
        """The final record of run ``h`` (finished or diverged; history as per-epoch dicts), else None."""
        return self._load(self._done_path(h), "done", h)

    def _epochs(self, h: str) -> list[dict]:
        return self._load(self._epochs_path(h), "epochs", h) or []

    # ------------------------------------------------------------------ reading, and setting damaged files aside
    def _load(self, path: Path, kind: str, h: str):
        """The checked content of a record file (``kind``: "done" -> the record with its history decoded,
        "running" -> the running record, "epochs" -> the list of per-epoch dicts), or None when there is no such
        file or it was damaged (then it is set aside, :meth:`_set_aside_file`)."""
        for _ in range(3):  # again only if the file was replaced by a writer while it was being judged
            try:
                with open(path, "rb") as f:
                    seen = os.fstat(f.fileno())
                    data = f.read()
            except FileNotFoundError:
                return None
            try:
                return self._parse(data, path, kind, h)
            except _Malformed as e:
                why = str(e)
            if not self._set_aside_file(path, seen, why):
                return None
        return None

    def _parse(self, data: bytes, path: Path, kind: str, h: str):
        try:
            obj = json.loads(data)
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
            raise _Malformed(f"not valid JSON: {e}") from None
        if kind == "epochs" and isinstance(obj, list):  # row-wise, format 1
            rows = decode_history(obj)
        else:
            _need(isinstance(obj, dict), f"a JSON {type(obj).__name__}, not an object")
            fmt = obj.get("format", 1)
            _need(_is_int(fmt), f"format: {fmt!r} is not an integer")
            if fmt > FORMAT:
                raise ValueError(f"{path}: written by a newer repro_lib (record format {fmt}; this "
                                 f"version reads formats up to {FORMAT}): upgrade repro_lib to read this store")
            _need(obj.get("hash", h) == h, f"its hash field {obj.get('hash')!r} is not the file name's {h}")
            if kind == "epochs":
                _need("history" in obj, "history: missing")
                rows = decode_history(obj["history"])
            else:
                return self._check_record(obj, kind, h)
        _need(all(_is_int(r.get("epoch")) for r in rows), "an epoch without an integer 'epoch'")
        return rows

    def _check_record(self, rec: dict, kind: str, h: str) -> dict:
        config, status = rec.get("config"), rec.get("status")
        _need(isinstance(config, dict), "config: missing or not an object")
        _need(isinstance(status, str), "status: missing or not a string")
        rv = rec.get("results_version")
        _need(rv is None or _is_int(rv), f"results_version: {rv!r} is not an integer")
        if kind == "done":
            _need(status in DONE, f"status: {status!r} is not one of {DONE}")
            _need(isinstance(rec.get("result"), dict), "result: missing or not an object")
            _need("history" in rec, "history: missing")
            rec = {**rec, "history": decode_history(rec["history"])}
        else:
            _need(status == "running", f"status: {status!r}, not 'running'")
            for k in ("started", "updated"):
                v = rec.get(k)  # None: not known (runs imported from store.sqlite)
                _need(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)),
                      f"{k}: {v!r} is not a number")
        if rv == _config.RESULTS_VERSION:  # hashed as this code hashes: the config must give the file's hash
            key = (h, json.dumps(config, sort_keys=True))
            if key not in self._hash_checked:
                self._hash_checked[key] = _rebuilt_hash_problem(config, h)
            _need(self._hash_checked[key] is None, str(self._hash_checked[key]))
        return rec

    def _set_aside_file(self, path: Path, seen: os.stat_result, why: str) -> bool:
        """Move the damaged ``path`` to ``runs/corrupt/<name>.<UTC time stamp>`` with one warning. False when
        there is nothing left to move (another reader moved it first, or it went with its run's end); True when
        ``path`` has been replaced by a writer since it was read (read it again: not moved)."""
        try:
            now = os.stat(path)
        except FileNotFoundError:
            return False
        if (now.st_ino, now.st_dev, now.st_size, now.st_mtime_ns) != (
                seen.st_ino, seen.st_dev, seen.st_size, seen.st_mtime_ns):
            return True
        dest_dir = self.runs_dir / "corrupt"
        dest_dir.mkdir(exist_ok=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        dest = dest_dir / f"{path.name}.{stamp}"
        try:
            os.replace(path, dest)
        except FileNotFoundError:  # another reader set it aside at the same moment
            return False
        self.set_aside.append(path)
        warnings.warn(f"results store: {path} is unreadable or malformed ({why}); moved to {dest}, the run "
                      f"counts as not stored", DamagedRecordWarning)
        return False

    def set_aside_summary(self, since: int = 0) -> str | None:
        """One line naming the record files set aside by this object (from the ``since``-th on), or None."""
        moved = self.set_aside[since:]
        if not moved:
            return None
        return (f"{len(moved)} record{'s' if len(moved) != 1 else ''} set aside (unreadable): "
                f"{', '.join(p.name for p in moved)} (moved to {self.runs_dir / 'corrupt'})")

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
        return "running" if self._load(self._running_path(cfg.hash), "running", cfg.hash) is not None else None

    def start(self, cfg) -> None:
        """Mark ``cfg`` as started (keeps the first start time). A finished record is left as it is."""
        h = cfg.hash
        if self._done_path(h).exists() and self._record(h) is not None:
            return
        now = time.time()
        old = self._load(self._running_path(h), "running", h) or {}
        _write_atomic(self._running_path(h), _json({
            "format": FORMAT, "hash": h, "config": cfg.to_dict(), "status": "running",
            "started": old.get("started", now), "updated": now, "host": socket.gethostname(), **provenance(cfg)}))

    def log_epoch(self, cfg, metrics: dict[str, Any]) -> None:
        """Record one epoch's metrics (replacing an earlier record of the same epoch)."""
        h = cfg.hash
        if self._done_path(h).exists() and self._record(h) is not None:
            return
        if h not in self._logged:
            self._logged[h] = {int(r["epoch"]): r for r in self._epochs(h)}
        rows = self._logged[h]
        rows[int(metrics["epoch"])] = json.loads(_json(metrics))
        _write_atomic(self._epochs_path(h), _json({
            "format": FORMAT, "hash": h, "history": encode_history([rows[e] for e in sorted(rows)])}, compact=True))

    def finish(self, cfg, result: dict[str, Any]) -> None:
        """Record the final result (status taken from ``result['status']``; history from ``result['history']``,
        else the logged epochs) and drop the checkpoint. If the run already has a final record (another job
        finished it first) that record is kept and this result is discarded."""
        h = cfg.hash
        history = result["history"] if "history" in result else self._epochs(h)
        summary = {k: v for k, v in result.items() if k != "history"}
        text = _json({
            "format": FORMAT, "hash": h, "config": cfg.to_dict(), "status": result["status"], "result": summary,
            "history": encode_history(history), "finished": time.time(), "host": socket.gethostname(),
            **provenance(cfg)}, compact=True)
        if not _create_once(self._done_path(h), text) and self._record(h) is None:
            _create_once(self._done_path(h), text)  # the record there was damaged and is now set aside
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
            rec = self._load(done[h], "done", h) if h in done else None
            if rec is None and h in running:
                rec = self._load(running[h], "running", h)
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
        """Copy the rows of ``store.sqlite`` (the store of earlier versions) into ``runs/``; return how many runs were
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
            if status in DONE and result:  # no env / results_version: not known for these
                written += _create_once(self._done_path(h), _json({
                    "format": FORMAT, "hash": h, "config": json.loads(config), "status": status,
                    "result": json.loads(result), "history": encode_history(hist), "finished": updated,
                    "host": "store.sqlite"}, compact=True))
            elif not self._done_path(h).exists():
                if not self._running_path(h).exists():
                    _write_atomic(self._running_path(h), _json({
                        "hash": h, "config": json.loads(config), "status": "running", "started": started,
                        "updated": updated, "host": "store.sqlite"}))
                if len(self._epochs(h)) < len(hist):
                    _write_atomic(self._epochs_path(h), _json({"format": FORMAT, "hash": h,
                                                               "history": encode_history(hist)}, compact=True))
                written += 1
        _write_atomic(marker, json.dumps(sig))
        return written
