"""The embedded results store: SQLite (standard library) plus atomic checkpoint files, under ``results/``.

Layout of a results directory::

    results/store.sqlite              runs (one row per run hash) and per-epoch metrics
    results/checkpoints/<hash>.pt     latest epoch-boundary state of an unfinished run

Guarantees:

* A finished (or diverged) run is never recomputed: ``get(cfg)`` returns its stored result.
* Every write is atomic: SQLite transactions for rows; checkpoints are written to a temporary file and
  ``os.replace``-d over the old one, so a crash leaves either the old or the new checkpoint, never half of one.
* A process killed mid-run loses at most the epoch in progress: ``fit`` checkpoints model, optimizer, tracker
  and history at every epoch boundary and resumes from there (data order is a function of (seed, epoch), so no
  RNG state needs saving; see ``data.TensorBatches``).

This module stores; it does not train.
"""
from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import torch

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    hash TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    status TEXT NOT NULL,            -- running | finished | diverged
    result TEXT,                     -- JSON summary once finished/diverged
    started REAL, updated REAL
);
CREATE TABLE IF NOT EXISTS epochs (
    hash TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    metrics TEXT NOT NULL,
    PRIMARY KEY (hash, epoch)
);
"""

DONE = ("finished", "diverged")


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


class Store:
    """Results of many runs, keyed by ``RunConfig.hash``."""

    def __init__(self, root: str | os.PathLike = "results"):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "checkpoints").mkdir(exist_ok=True)
        self.path = self.root / "store.sqlite"
        with self._connect() as con:
            con.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=60)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        return con

    def _exec(self, sql: str, args=()):
        con = self._connect()
        try:
            with con:  # one transaction
                return con.execute(sql, args).fetchall()
        finally:
            con.close()

    # ------------------------------------------------------------------ runs
    def get(self, cfg) -> dict | None:
        """The stored result of a finished or diverged run, else None."""
        rows = self._exec("SELECT status, result FROM runs WHERE hash=?", (cfg.hash,))
        if rows and rows[0][0] in DONE:
            return json.loads(rows[0][1])
        return None

    def status(self, cfg) -> str | None:
        rows = self._exec("SELECT status FROM runs WHERE hash=?", (cfg.hash,))
        return rows[0][0] if rows else None

    def start(self, cfg) -> None:
        now = time.time()
        self._exec("INSERT INTO runs(hash, config, status, started, updated) VALUES (?,?,?,?,?) "
                   "ON CONFLICT(hash) DO UPDATE SET updated=excluded.updated",
                   (cfg.hash, _json(cfg.to_dict()), "running", now, now))

    def log_epoch(self, cfg, metrics: dict[str, Any]) -> None:
        self._exec("INSERT OR REPLACE INTO epochs(hash, epoch, metrics) VALUES (?,?,?)",
                   (cfg.hash, int(metrics["epoch"]), _json(metrics)))

    def finish(self, cfg, result: dict[str, Any]) -> None:
        """Record the final result (status taken from ``result['status']``) and drop the checkpoint."""
        summary = {k: v for k, v in result.items() if k != "history"}
        self._exec("UPDATE runs SET status=?, result=?, updated=? WHERE hash=?",
                   (result["status"], _json(summary), time.time(), cfg.hash))
        ck = self._ckpt_path(cfg)
        if ck.exists():
            ck.unlink()

    def history(self, cfg_or_hash) -> list[dict]:
        h = getattr(cfg_or_hash, "hash", cfg_or_hash)
        rows = self._exec("SELECT metrics FROM epochs WHERE hash=? ORDER BY epoch", (h,))
        return [json.loads(r[0]) for r in rows]

    def runs(self) -> list[dict]:
        """Every run: config fields, status and result summary, one dict each."""
        out = []
        for h, config, status, result in self._exec("SELECT hash, config, status, result FROM runs"):
            row = {"hash": h, **json.loads(config), "status": status}
            if result:
                row.update({k: v for k, v in json.loads(result).items() if k not in ("config", "status")})
            out.append(row)
        return out

    # ------------------------------------------------------------------ checkpoints
    def _ckpt_path(self, cfg) -> Path:
        return self.root / "checkpoints" / f"{cfg.hash}.pt"

    def save_checkpoint(self, cfg, state: dict) -> None:
        path = self._ckpt_path(cfg)
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
        torch.save(state, tmp)
        os.replace(tmp, path)

    def load_checkpoint(self, cfg, map_location=None) -> dict | None:
        path = self._ckpt_path(cfg)
        if not path.exists():
            return None
        return torch.load(path, map_location=map_location, weights_only=False)
