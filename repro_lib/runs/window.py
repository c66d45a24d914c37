"""The budgeted GPU window: Yun et al. 2022, Table 1 (and Table 2) at the paper's own protocol, trained a bounded
stretch of GPU time at a time (``python -m repro_lib window``).

Each call trains what fits into ``--budget-s`` seconds of wall time (from the start of ``main``; the data set-up and
the output included) and leaves every run it finished in the results store ``--store``; the next call skips those
and goes on with the queue.

**Queue** (``repro_lib.papers.registry.window_queue``, defined in ``repro_lib.papers.yun2022.grids``:
``PAPER_QUEUE``; in this order; the ``paper`` profile of ``grids.get("yun2022_table1")`` / ``"yun2022_table2"``,
``Experiment.plan("paper", seeds=(0, 1, 2), dataset="cifar10-jpeg")`` filtered on ``subtable``, ``paper_n`` and, for
the bf16 check, ``paper_lr`` (``grids.queue_plan``):
scale-invariant ResNet-18 width 64, ghost BN 64, B = 128, 300 epochs, LR /10 at 150 and 225, coupled L2 weight
decay, fp32, CUDA graphs, the full test set; ``cifar10-jpeg`` is a stand-in, never CIFAR-10):

1. Table 1 (a), column N = 3,125 (21 runs);
2. the bf16 check of that column (``grids.PRECISION_CHECK``): its η = 3.2 and η = 0.8 cells in bf16 autocast with
   fp32 master weights, seeds 0-2 (6 runs, their own hashes), to be set beside the fp32 runs before any later
   window trains in bf16;
3. Table 1 (b) and (c), N = 3,125 (36 runs: their base row LR 0.1, WD 1e-4 is (a)'s, the same content hash,
   trained once);
4. Table 1 (a), N = 6,250 (21 runs);
5. Table 2 (plain SGD), sub-tables (a)-(c), N = 3,125 (57 runs).

**Groups.** The pending runs are taken in queue order; those that ``batched.fit_many`` can stack (equal
``batched.SHARED_FIELDS``: N, B, epochs, ...) are trained together, at most the profile's ``max_members`` and the
memory cap of ``batched.group_configs`` (``member_bytes`` against 70 % of the free GPU memory), and trained by the
call's path (below). A resume checkpoint of the paper's network is about 130 MB per run
(weights, momentum, the angular tracker's previous weights), far more than a file brought back from the GPU
machine may weigh, so progress within a run does not outlive the call: a group is sized to *finish* in the time
left. The size comes from the path's rate measured at the paper protocol (``profiles.measured_rate``: the benchmark's
results, per group size) or, until one is measured, from the estimated H200 rates of ``repro_lib.profiles``
(``estimated_seconds_per_image``: one graphed run to a 16-member stack; an H100 starts from its own measured scale,
``DEVICE_RATE_SCALE``), with evaluation and the periodic checkpoints added, rescaled by what this call has
measured (:func:`model_epoch_s`).
After ``--probe-epochs`` epochs past the first, a group projects its own end; if it would overrun, it stops at that
epoch boundary with every member checkpointed in the store and the call goes on with as many of them as fit --
they resume from those checkpoints (never as large a group again).

**Path** (``--engine``): ``paper`` trains a group through ``batched.fit_many`` (a group of one through
``train.fit``, as ``fit_grouped``); ``onegraph`` and ``streams`` through ``lockstep.fit_lockstep`` (each member its
own network, the group as one CUDA graph per step or per-member CUDA streams; a member is ``fit``'s run, its records
and checkpoints in ``fit``'s format, so runs move between paths freely). ``auto`` (the default) takes the path of
``profiles.measured_rate``: the fastest complete fp32 row of the largest group in ``benchmarks/bench_paper_rate.py``'s
results (``--rates``: its JSON or folder; default ``benchmarks/``) that passed the benchmark's check against ``fit``
on the device; without such results, ``paper``. A group whose path fails with an error other than running out of
memory goes on through ``paper`` (from the checkpoints it wrote), and so does the rest of the call. ``window.json``
says the path (``engine``, ``engine_why``), whether the time model started from measured or estimated rates
(``rate_basis``) and, per group, its ``engine``.

**Stopping.** ``fit`` and ``fit_many`` build their between-epochs hook from their ``clock`` argument and ask it
once per finished epoch, after its evaluation; the window passes its own (:class:`_Clock`, one :class:`Monitor`
per training call). It estimates the next epoch from the epochs so far and, if that epoch would end after the
deadline (``--budget-s`` less ``--reserve-s``), has every member's checkpoint written and stops the call between
epochs. Nothing finished is lost; a run cut there resumes from its checkpoint wherever the store still holds it
(the same checkout, or ``checkpoints.tar.gz`` unpacked into it), else it starts over. Members that diverged in a
group that is then stopped get their final record.

**Data.** ``--data-root`` is a folder holding ``cifar10-jpeg-window.pt`` (``python -m repro_lib window
--pack-data``, :mod:`repro_lib.runs.window_data`: the JPEG files of the training images that the queue's
(N, seed) draw, the full label vector, the test set), or a data root with ``cifar10-jpeg/{train,test}``. The
carried file is decoded into full-size tensors (50,000 training rows; zeros in the rows no run of the queue draws,
since ``data.balanced_subset`` indexes the full training set) and handed to the library as its decoded-dataset
cache (``data.cache_dir()``, a temporary folder for the call). It is checked first: its rows are exactly the
subsets it was built for, they hold every subset the pending runs draw, and every decoded image matches the pixel
checksum taken where the file was built.

**Output** (``--out``, at most three files): ``records.tar.gz`` (``runs/<hash>.json`` of every run finished in
this call), ``checkpoints.tar.gz`` (only when the unfinished runs' checkpoints compress to at most 16 MiB:
``checkpoints/<hash>.pt`` with ``runs/<hash>.running.json`` and ``.epochs.json``), ``window.json`` (device, torch
and repro_lib versions, the queue's state, every group with its members, seconds, epochs and seconds per epoch,
what finished, what was cut and whether its checkpoints came back). Records and log are rewritten after every
group, so a call killed at its time limit still returns what finished.

Before the first call in a checkout, pack the data file (24.3 MiB; ``gpu_data/`` is git-ignored; the working tree
that travels, the store's records included, must stay under 64 MiB)::

    .venv/bin/python -m repro_lib window --pack-data --data-root <folder holding cifar10-jpeg>

which writes ``gpu_data/cifar10-jpeg-window.pt`` (``--data-file`` to write it elsewhere). The GPU call (the device
``run`` tool; leave ``kind`` out, ``timeout_s`` 600, ``carry`` ``["gpu_data"]``)::

    PYTHONUNBUFFERED=1 PYTHONPATH=. python3 -m repro_lib window --budget-s 540 --store reports --out $OUT --data-root gpu_data

540 s leaves a minute of the 600 s limit for the interpreter's start and slack (the command imports neither
papermill nor notebook code: the GPU machine's own torch is enough). After the call, from the repository root,
with ``<files_at>`` the folder its files came back to::

    tar -xzf <files_at>/records.tar.gz -C reports        # -> reports/runs/<hash>.json
    tar -xzf <files_at>/checkpoints.tar.gz -C reports    # only if it came back (never commit checkpoints/)
    .venv/bin/python -m repro_lib window --tidy --store reports   # drop files of runs now finished
    git add reports/runs/*.json && git commit -m "Yun et al. Table 1, paper protocol: more runs"

and read ``<files_at>/window.json`` for what was trained (``finished``, ``cut``, ``queue``). Time left on a warm
machine after the call can go to a second call with a smaller ``--budget-s``, once the records are unpacked
(the store travels with the working tree); the warm machine still holds
the git-ignored ``reports/checkpoints/`` of the first call, so its cut runs resume where they stopped.

``--plan-only`` prints the queue with each item's GPU seconds (``profiles.estimate_gpu_hours``, measured or
estimated as ``profiles.gpu_hours_label`` says) and what the store already holds; ``--tiny`` is the same code at
smoke size on the CPU (width 4, N/100, B = 16, a few epochs) for the tests (its ``auto`` path is ``paper`` unless
``--rates`` is given).

Right after the benchmark, in one call on the GPU machine (``benchmarks/gpu_window.sh``; ``benchmarks/README.md``
has the exact call and what to do with its files)::

    PYTHONUNBUFFERED=1 PYTHONPATH=. python3 -m repro_lib window --budget-s <left> --store reports --out $OUT \
        --data-root gpu_data --engine auto --rates $OUT
"""
from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import sys
import tarfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from .. import batched
from .. import data as data_mod
from .. import lockstep
from .. import train as train_mod
from ..papers import registry
from ..profiles import (batch_scale, estimate_gpu_hours, estimated_seconds_per_image, gpu_hours_label,
                        measured_rate)
from ..store import Store, _write_atomic, package_version
from .window_data import DATA_FILE, DATASET, window_data
from .window_data import build as build_data_file

COMMAND = "python -m repro_lib window"
SEEDS = (0, 1, 2)  # the queue's seeds (those of ``registry.window_queue``)
OUT_FILE_LIMIT = 16 * 2 ** 20  # what one file back from the GPU machine may weigh
# until measured: a group's fixed cost until its first epoch ends (build, stack, graph capture), and the seconds to
# write M checkpoints at a stop (GPU, ~90 MB each; --tiny: the CPU at width 4)
FIRST_SETUP_S = {"gpu": 20.0, "tiny": 0.5}
# the time model is the H200's; a card measured slower starts from its measured scale (the ``rate_scale`` of its
# window.json: two H100 80GB HBM3 calls measured 1.187 and 1.198) so that its first group is not oversized
DEVICE_RATE_SCALE = {"H100": 1.19}
STOP_S = {"gpu": (1.0, 0.25), "tiny": (0.1, 0.05)}
PATHS = ("paper", *lockstep.ENGINES)  # how a group is trained (--engine): fit / fit_many, or a lockstep engine


def now() -> float:
    return time.monotonic()


# ============================================================================================== the queue
@dataclass
class Item:
    label: str
    table: str  # the experiment (repro_lib.papers.yun2022.grids)
    plan: object  # the filtered Experiment.plan rows (DataFrame), before de-duplication
    cfgs: list = field(default_factory=list)  # the runs first asked for by this item (queue order)
    shared: int = 0  # rows of the plan that an earlier item already asks for (same hash)


def tiny_config(cfg, epochs: int):
    """A smoke-sized stand-in of a paper run (CPU, width 4, N/100, B = 16): the same code path, seconds of work."""
    return cfg.replace(n=max(cfg.n // 100, 20), batch_size=16, width=4, num_epochs=epochs, device="cpu")


def build_queue(seeds=SEEDS, tiny: bool = False, epochs: int = 0, max_runs: int = 0) -> list[Item]:
    """The queue's items, each with its de-duplicated runs (``Item.cfgs``), from ``registry.window_queue``
    (``Experiment.plan("paper", seeds=..., dataset="cifar10-jpeg")`` filtered on ``subtable``/``paper_n``).
    ``tiny``: :func:`tiny_config`, the queue's smoke rows only; ``epochs``: override the epoch count;
    ``max_runs``: only the first runs."""
    seen: set[str] = set()
    items, total = [], 0
    for label, name, plan in registry.window_queue(tuple(seeds), dataset=DATASET, tiny=tiny):
        cfgs = list(plan["cfg"])
        if tiny:
            cfgs = [tiny_config(c, epochs or 4) for c in cfgs]
        elif epochs:
            cfgs = [c.replace(num_epochs=epochs) for c in cfgs]
        plan = plan.assign(cfg=cfgs)
        item = Item(label, name, plan)
        for c in cfgs:
            if c.hash in seen:
                item.shared += 1
            elif not max_runs or total < max_runs:
                seen.add(c.hash)
                item.cfgs.append(c)
                total += 1
        items.append(item)
    return items


def run_meta(items: list[Item]) -> dict[str, dict]:
    """hash -> where the run sits in the paper's tables (every item and cell that asks for it)."""
    meta: dict[str, dict] = {}
    for it in items:
        for _, r in it.plan.iterrows():
            h = r["cfg"].hash
            m = meta.setdefault(h, {"hash": h, "item": it.label, "cells": [], "seed": int(r["seed"]),
                                    "lr": float(r["cfg"].lr), "weight_decay": float(r["cfg"].weight_decay),
                                    "momentum": float(r["cfg"].momentum), "n": int(r["cfg"].n)})
            m["cells"].append(f"{it.table} ({r['subtable']}) row {int(r['row'])}")
    return meta


def pairs_of(cfgs) -> list[tuple[int, int]]:
    """The (n, seed) pairs whose class-balanced training subsets the runs draw."""
    return sorted({(c.n, c.seed) for c in cfgs if not c.synthetic and c.n < 50000})


# ============================================================================================== time model
def model_epoch_s(cfg, members: int, rate=None) -> float:
    """Seconds of one epoch of a group of ``members`` runs like ``cfg``: training from ``rate`` (a
    ``profiles.MeasuredRate``: the rate the benchmark measured for the path that trains the group, for groups of
    that size; scaled from its batch size and width) or, without one, from the estimated H200 rates of
    ``repro_lib.profiles`` (single graphed run -> 16-member stack, geometric in between); plus the evaluation every
    ``cfg.eval_interval`` epochs (a forward pass costs about a third of a training step per image)."""
    if rate is not None:
        s = rate.per_image(members) * batch_scale(cfg.batch_size, rate.batch_size) * (64 / rate.width) ** 2
    else:
        s1 = estimated_seconds_per_image(cfg.batch_size)
        s16 = estimated_seconds_per_image(cfg.batch_size, stacked=True)
        s = s1 * (s16 / s1) ** min(1.0, math.log(members) / math.log(16)) if members > 1 else s1
    n_test = cfg.n_test or data_mod.DATASETS[cfg.dataset].n_test
    evals = n_test / cfg.eval_interval(cfg.n, n_test) / (3 * cfg.n)
    return members * cfg.n * s * (cfg.width / 64) ** 2 * (1 + evals)


def select_path(engine: str, source=None, tiny: bool = False) -> tuple[str, object, str]:
    """(path, its measured rate or None, why) for ``--engine``: a path of :data:`PATHS` as asked, with its measured
    rate where the benchmark's results (``source``: ``--rates``; default ``benchmarks/``) hold one; ``auto``: the
    path of ``profiles.measured_rate`` (the fastest complete, validated fp32 row of the largest group), else
    ``paper`` with the estimated rates. ``tiny`` (the CPU): a GPU's rates mean nothing there; ``auto`` is ``paper``
    unless ``source`` is given."""
    if tiny and source is None:
        return ("paper" if engine == "auto" else engine), None, "smoke size on the CPU: estimated rates"
    if engine != "auto":
        rate = measured_rate(source, path=engine)
        return engine, rate, "asked for" + ("" if rate is not None else "; no measured rate: estimated")
    rate = measured_rate(source)
    if rate is None:
        return "paper", None, "no measured rate: the paper path, estimated rates"
    return rate.path, rate, f"the fastest validated path of {rate.file}"


def checkpoint_bytes(cfg) -> int:
    """Bytes of one run's resume checkpoint: weights and buffers, momentum, the tracker's reference weights."""
    return _checkpoint_bytes(cfg.model, cfg.scale_invariant, cfg.width, cfg.ghost_batch, cfg.dataset)


@functools.lru_cache(maxsize=8)
def _checkpoint_bytes(model: str, scale_invariant: bool, width: int, ghost_batch: int, dataset: str) -> int:
    from ..models import create

    info = data_mod.DATASETS[dataset]
    m = create(model, num_classes=info.num_classes, scale_invariant=scale_invariant, width=width,
               ghost_batch=ghost_batch)
    return 4 * (3 * sum(p.numel() for p in m.parameters()) + sum(b.numel() for b in m.buffers()))


class Rates:
    """Seconds per epoch, per group set-up and per checkpoint round (every member's checkpoint written once):
    :func:`model_epoch_s` times a scale this call measures, and the set-up and rounds as measured."""

    def __init__(self, tiny: bool = False, basis=None):
        self.kind = "tiny" if tiny else "gpu"
        self.basis = basis  # profiles.MeasuredRate of the training path, or None: the estimated rates
        self.scale = 1.0
        self.setup_s = FIRST_SETUP_S[self.kind]
        self.round_s: dict[int, float] = {}  # members -> seconds of one checkpoint round
        self.measured = False

    def epoch_s(self, cfg, members: int) -> float:
        return self.scale * model_epoch_s(cfg, members, self.basis)

    def stop_s(self, members: int) -> float:
        """Seconds to write every member's checkpoint (at a stop, or every ``checkpoint_every_s``)."""
        if members in self.round_s:
            return self.round_s[members]
        if self.round_s:  # measured for another group size: per member
            m, sec = max(self.round_s.items())
            return sec * members / m
        a, b = STOP_S[self.kind]
        return a + b * members

    def group_s(self, cfg, members: int, epochs: int) -> float:
        """Set-up, training with evaluation, the checkpoint rounds every ``checkpoint_every_s``, a final round."""
        train_s = epochs * self.epoch_s(cfg, members)
        rounds = train_s / cfg.checkpoint_every_s if cfg.checkpoint_every_s > 0 else epochs
        return self.setup_s + train_s + (rounds + 1) * self.stop_s(members)

    def update(self, cfg, members: int, mon: "Monitor") -> None:
        """Calibrate from one training call (``mon``: its epoch intervals, set-up and checkpoint rounds)."""
        if mon.round_s() is not None:
            self.round_s[members] = mon.round_s()
        mean = mon.steady_mean()
        if mean is None:
            return
        self.scale = mean / model_epoch_s(cfg, members, self.basis)
        self.setup_s = max(0.0, (mon.t_begin - mon.t_call) + mon.intervals[0] - mean)
        self.measured = True


# ============================================================================================== stopping
class Cut(Exception):
    """A training call stopped at an epoch boundary, every member checkpointed (``reason``: budget | shrink)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Monitor:
    """Watches one ``fit`` / ``fit_many`` call: asked once per finished epoch by the checkpoint clock, it decides
    whether another epoch fits before ``deadline``; if not it forces the checkpoint of every live member and raises
    :class:`Cut` once the last one is written (:class:`WindowStore` reports the writes). With ``probe_epochs``,
    after that many epochs past the first it also projects the whole group: if the group would not finish, it
    stops the same way (``shrink``: the caller goes on with fewer members, from these checkpoints)."""

    def __init__(self, hashes, start_epoch: int, num_epochs: int, deadline: float, stop_s: float,
                 probe_epochs: int = 0):
        self.hashes = list(hashes)
        self.start, self.num_epochs, self.deadline, self.stop_s = start_epoch, num_epochs, deadline, stop_s
        self.probe_epochs = probe_epochs
        self.t_call = now()
        self.t_begin = self.last = self.last_save = None
        self.intervals: list[float] = []  # wall seconds from one epoch's end to the next (evaluation included)
        self.after_round: list[bool] = []  # the interval began with a checkpoint round
        self.rounds = 0  # regular checkpoint rounds (not the stop)
        self.round_seconds = 0.0  # time spent writing them
        self.diverged: dict[str, int] = {}
        self.stopping: str | None = None
        self.expected = self.saved = 0
        self.t_stop = None
        self.stop_took = None
        self.epoch = start_epoch
        self._round_pending = False

    def steady_mean(self) -> float | None:
        """Mean epoch interval without the first (warm-up, graph capture) and those holding a checkpoint round."""
        steady = [iv for i, iv in enumerate(self.intervals) if i > 0 and not self.after_round[i]]
        steady = steady or self.intervals[1:] or self.intervals
        return sum(steady) / len(steady) if steady else None

    def round_s(self) -> float | None:
        if self.stop_took is not None:
            return self.stop_took
        return self.round_seconds / self.rounds if self.rounds else None

    # the checkpoint clock of the training call
    def begin(self):
        if self.t_begin is not None:
            raise RuntimeError("one training call per Monitor (the group's members must share their start epoch)")
        self.t_begin = self.last = self.last_save = now()

    def due(self, every_s: float) -> bool:
        t = now()
        self.intervals.append(t - self.last)
        self.after_round.append(self._round_pending)
        self._round_pending = False
        self.last = t
        self.epoch = self.start + len(self.intervals)
        mean = self.steady_mean()
        est = max(mean, self.intervals[-1])
        remaining = self.num_epochs - self.epoch
        stop_s = self.round_s() or self.stop_s
        reason = None
        if t + est + stop_s > self.deadline:
            reason = "budget"
        elif self.probe_epochs and len(self.intervals) == self.probe_epochs + 1:
            train_s = remaining * mean
            rounds = train_s / every_s if every_s > 0 else remaining
            if t + train_s + (rounds + 1) * stop_s > self.deadline:  # Rates.group_s without the set-up
                reason = "shrink"
        if reason is not None:
            self.stopping, self.t_stop = reason, t
            self.expected = len([h for h in self.hashes if h not in self.diverged])
            if self.expected == 0:
                raise Cut(reason)
            return True
        if every_s <= 0 or t - self.last_save >= every_s:
            self.last_save = t
            self.rounds += 1
            self._round_pending = True
            return True
        return False

    # reported by the store
    def logged(self, h: str, rec: dict) -> None:
        if "seconds" not in rec:  # fit / fit_many log a diverged epoch without timing or tracker columns
            self.diverged[h] = int(rec["epoch"])

    def saved_one(self, h: str, seconds: float) -> None:
        if self.stopping is None:
            self.round_seconds += seconds
            return
        self.saved += 1
        if self.saved >= self.expected:
            self.stop_took = now() - self.t_stop
            raise Cut(self.stopping)


class _Clock:
    """The between-epochs hook (``clock=`` of ``fit`` / ``fit_many``, in place of ``train.CheckpointClock``) of a
    training call that a :class:`Monitor` watches: ``functools.partial(_Clock, monitor)`` is the factory passed,
    called with the run's ``checkpoint_every_s``."""

    def __init__(self, monitor: Monitor, every_s: float):
        self.monitor, self.every_s = monitor, every_s
        monitor.begin()

    def due(self) -> bool:
        return self.monitor.due(self.every_s)


class WindowStore(Store):
    """The results store, telling the current :class:`Monitor` about logged epochs and written checkpoints."""

    monitor: Monitor | None = None

    def __init__(self, root):
        super().__init__(root)
        self.saved_epoch: dict[str, int] = {}  # hash -> epoch of the checkpoint written last by this object

    def log_epoch(self, cfg, metrics):
        super().log_epoch(cfg, metrics)
        if self.monitor is not None:
            self.monitor.logged(cfg.hash, metrics)

    def save_checkpoint(self, cfg, state):
        t = now()
        super().save_checkpoint(cfg, state)
        self.saved_epoch[cfg.hash] = int(state["epoch"])
        if self.monitor is not None:
            self.monitor.saved_one(cfg.hash, now() - t)

    def checkpoint_path(self, h: str) -> Path:
        return self.root / "checkpoints" / f"{h}.pt"

    def checkpoint_epoch(self, h: str) -> int:
        """The epoch a run resumes from (0: no checkpoint)."""
        p = self.checkpoint_path(h)
        if not p.is_file():
            return 0
        if h in self.saved_epoch:
            return self.saved_epoch[h]
        state = torch.load(p, map_location="cpu", weights_only=False)
        return int(state["epoch"])


# ============================================================================================== output
def _atomic_tar(path: Path, members: list[tuple[Path, str]]) -> int:
    """A gzipped tar of ``members`` ((file, name in the archive)) written atomically (``store._write_atomic``);
    returns its size in bytes."""
    def write(f):
        with tarfile.open(fileobj=f, mode="w:gz", compresslevel=6) as tar:
            for src, arc in members:
                tar.add(src, arcname=arc)

    _write_atomic(path, write)
    return path.stat().st_size


def _write_json(path: Path, obj) -> None:
    _write_atomic(path, json.dumps(obj, indent=1, default=str))


class Window:
    """One call: the deadline, the store, the queue's state, the log and the files under ``--out``."""

    def __init__(self, args, items: list[Item], t0: float):
        self.t0 = t0
        self.args = args
        self.deadline = self.t0 + args.budget_s - args.reserve_s
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.items = items
        self.order = [c for it in items for c in it.cfgs]
        self.by_hash = {c.hash: c for c in self.order}
        self.meta = run_meta(items)
        self.store = WindowStore(args.store)
        self.results: dict[str, dict] = {}  # hash -> stored result of a finished or diverged run
        self.refresh(self.order)
        self.done_before = set(self.results)
        self.skipped: set[str] = set()  # runs given up on in this call (an error)
        self.engine, basis, why = select_path(args.engine, args.rates, args.tiny)
        self.rates = Rates(args.tiny, basis)
        self.shrunk_from = 0  # size of the group that its probe has just cut
        self.max_members = args.max_members or (int(items[0].plan.attrs.get("max_members", 16)) if items else 16)
        self.data_root = None
        self.log = {
            "script": COMMAND, "argv": sys.argv[1:] if args.argv is None else args.argv,
            "device": None, "torch": torch.__version__,
            "repro_lib": package_version(), "budget_s": args.budget_s, "reserve_s": args.reserve_s,
            "store": str(args.store), "groups": [], "finished": [], "cut": [], "errors": [],
            "engine": self.engine, "engine_why": why, "rate_basis": "measured" if basis is not None else "estimated",
            "rate_file": basis.file if basis is not None else None,
        }

    def left(self) -> float:
        return self.deadline - now()

    def refresh(self, cfgs) -> None:
        for c in cfgs:
            r = self.store.get(c)
            if r is not None:
                self.results[c.hash] = r

    def done(self, h: str) -> bool:
        return h in self.results

    def epoch_of(self, h: str) -> int:
        return self.store.checkpoint_epoch(h)

    def pending(self) -> list:
        return [c for c in self.order if c.hash not in self.skipped and not self.done(c.hash)]

    # ------------------------------------------------------------------ writing back
    def queue_state(self) -> list[dict]:
        out = []
        for it in self.items:
            hs = [c.hash for c in it.cfgs]
            fin = [h for h in hs if self.done(h)]
            out.append({"item": it.label, "runs": len(hs), "shared_with_earlier": it.shared,
                        "finished_before": len([h for h in hs if h in self.done_before]),
                        "finished_now": len([h for h in fin if h not in self.done_before]),
                        "remaining": len(hs) - len(fin)})
        return out

    def write(self, final: bool = False) -> None:
        self.log["cut"] = [c for c in self.log["cut"] if not self.done(c["hash"])]
        new = [c.hash for c in self.order if c.hash not in self.done_before and self.done(c.hash)]
        self.log["finished"] = [{**self.meta[h], "status": self.results[h]["status"],
                                 "diverged_epoch": self.results[h].get("diverged_epoch"),
                                 "test_acc": self.results[h].get("test_acc")} for h in new]
        if new:
            self.log["records_tar_bytes"] = _atomic_tar(
                self.out / "records.tar.gz", [(self.store.runs_dir / f"{h}.json", f"runs/{h}.json") for h in new])
        self.log["queue"] = self.queue_state()
        pending = self.pending()
        m = max(1, min(len(pending), self.max_members))
        self.log["remaining_runs"] = len(pending)
        self.log["remaining_estimate_s"] = round(sum(  # as if every pending run started over
            self.rates.epoch_s(c, m) / m * c.num_epochs for c in pending), 1)
        if final:
            self.log["checkpoints"] = self.carry_checkpoints(pending)
        self.log["elapsed_s"] = round(now() - self.t0, 2)
        self.log["rate_scale"] = round(self.rates.scale, 4) if self.rates.measured else None
        _write_json(self.out / "window.json", self.log)

    def carry_checkpoints(self, pending) -> dict:
        """``checkpoints.tar.gz`` with the unfinished runs' checkpoints (and their running/epochs files), when it
        stays under the size limit of one file; else none, and the log says that those runs restart."""
        cut = [c.hash for c in pending if self.store.checkpoint_path(c.hash).is_file()]
        if not cut:
            return {"runs": [], "carried": False, "note": "no unfinished run holds a checkpoint"}
        files = []
        for h in cut:
            files.append((self.store.checkpoint_path(h), f"checkpoints/{h}.pt"))
            for kind in ("running", "epochs"):
                p = self.store.runs_dir / f"{h}.{kind}.json"
                if p.is_file():
                    files.append((p, f"runs/{h}.{kind}.json"))
        raw = sum(p.stat().st_size for p, _ in files)
        runs = [{"hash": h, "epoch": self.epoch_of(h), **{k: self.meta[h][k] for k in ("item", "seed", "lr")}}
                for h in cut]
        target = self.out / "checkpoints.tar.gz"
        if raw <= 3 * OUT_FILE_LIMIT:
            size = _atomic_tar(target, files)
            if size <= OUT_FILE_LIMIT:
                return {"runs": runs, "carried": True, "bytes": size, "raw_bytes": raw,
                        "note": "unpack checkpoints.tar.gz into the store: these runs resume at their epoch"}
            target.unlink()
        return {"runs": runs, "carried": False, "raw_bytes": raw,
                "note": f"checkpoints too large to bring back ({raw / 2 ** 20:.0f} MiB before compression, limit "
                        f"{OUT_FILE_LIMIT / 2 ** 20:.0f} MiB a file): these runs restart from epoch 0 next time"}

    # ------------------------------------------------------------------ training
    def next_group(self):
        """The next group (a list of configs) and why it is that size, or (None, why not)."""
        pending = self.pending()
        if not pending:
            return None, "queue finished"
        key = tuple(getattr(pending[0], f) for f in batched.SHARED_FIELDS)
        segment = []
        for c in pending:  # the run of queue-consecutive runs that can stack with the first pending one
            if tuple(getattr(c, f) for f in batched.SHARED_FIELDS) != key:
                break
            segment.append(c)
        e0 = self.epoch_of(pending[0].hash)
        cands = [c for c in segment if self.epoch_of(c.hash) == e0]
        cfg = cands[0]
        cap = self.max_members
        if self.shrunk_from:  # the group just cut by its probe goes on smaller (never restarts at the same size)
            cap = min(cap, self.shrunk_from - 1)
            self.shrunk_from = 0
            if cap == 0:
                return None, "the probe of a single run projected that it does not finish in the time left"
        budget = batched.default_memory_budget(cfg.device)
        if budget is not None:
            cap = max(1, min(cap, budget // batched.member_bytes(cfg)))
        cap = min(cap, len(cands))
        left = self.left()
        carriable = checkpoint_bytes(cfg) * cap <= 0.9 * OUT_FILE_LIMIT
        epochs = cfg.num_epochs - e0
        if carriable:  # progress survives the call: start whatever gets at least one epoch done
            if left < self.rates.setup_s + self.rates.epoch_s(cfg, 1) + self.rates.stop_s(1):
                return None, f"{left:.0f} s left: not one epoch of the next run"
            return cands[:cap], "checkpoints come back: largest group"
        fits = [m for m in range(1, cap + 1) if self.rates.group_s(cfg, m, epochs) <= left]
        if not fits:
            return None, (f"{left:.0f} s left: the next run needs ~{self.rates.group_s(cfg, 1, epochs):.0f} s "
                          f"({epochs} epochs)")
        return cands[:fits[-1]], f"{fits[-1]} members finish in ~{self.rates.group_s(cfg, fits[-1], epochs):.0f} s"

    def train_group(self, group, why: str) -> str:
        """Train one group; returns "finished", "budget", "shrink" or "error"."""
        hs = [c.hash for c in group]
        e0 = self.epoch_of(hs[0])
        carriable = checkpoint_bytes(group[0]) * len(group) <= 0.9 * OUT_FILE_LIMIT
        mon = Monitor(hs, e0, group[0].num_epochs, self.deadline, self.rates.stop_s(len(group)),
                      probe_epochs=0 if carriable else self.args.probe_epochs)
        entry = {"runs": [{k: self.meta[h][k] for k in ("hash", "item", "seed", "lr", "weight_decay", "momentum")}
                          for h in hs], "members": len(group), "n": group[0].n, "start_epoch": e0, "why": why,
                 "predicted_s": round(self.rates.group_s(group[0], len(group), group[0].num_epochs - e0), 1)}
        print(f"[{now() - self.t0:6.1f} s] group of {len(group)} (N={group[0].n}, from epoch {e0}): {why}",
              flush=True)
        self.store.monitor = mon
        status = "finished"
        clock = functools.partial(_Clock, mon)  # fit / fit_many build it with the run's checkpoint_every_s
        engine = self.path_for(group[0])
        entry["engine"] = engine
        try:
            kw = dict(store=self.store, data_root=self.data_root, progress=False, clock=clock)
            if engine in lockstep.ENGINES:
                lockstep.fit_lockstep(group, engine=engine, **kw)
            elif len(group) == 1:
                train_mod.fit(group[0], **kw)
            else:
                batched.fit_many(group, **kw)
        except Cut as cut:
            status = cut.reason
        except torch.cuda.OutOfMemoryError as e:
            status = "error"
            if len(group) == 1:
                self.skipped.update(hs)
            self.max_members = max(1, len(group) // 2)
            entry["error"] = f"out of memory ({e}); groups of at most {self.max_members} from now on"
        except Exception as e:  # keep going with the rest of the queue
            status = "error"
            entry["error"] = f"{type(e).__name__}: {e}"
            self.log["errors"].append(traceback.format_exc())
            if engine != "paper":  # the group goes on through fit / fit_many (from any checkpoint it wrote)
                self.fall_back(f"{engine} failed: {type(e).__name__}: {e}")
            else:
                self.skipped.update(hs)
        finally:
            self.store.monitor = None
        end = now()
        self.refresh(group)
        self.finish_diverged(mon)
        self.refresh(group)
        if mon.intervals:
            self.rates.update(group[0], len(group), mon)
        if status == "shrink":
            self.shrunk_from = len(group)
        if status in ("budget", "shrink"):
            self.log["cut"] = [c for c in self.log["cut"] if c["hash"] not in hs] + [
                {"hash": h, "epoch": mon.epoch, "reason": status} for h in hs if not self.done(h)]
        entry.update(status=status, end_epoch=group[0].num_epochs if status == "finished" else mon.epoch,
                     seconds=round(end - mon.t_call, 2),
                     epoch_s=round(mon.steady_mean(), 4) if mon.intervals else None,
                     checkpoint_round_s=round(mon.round_s(), 3) if mon.round_s() is not None else None,
                     diverged={h: e for h, e in mon.diverged.items()})
        self.log["groups"].append(entry)
        print(f"[{now() - self.t0:6.1f} s] group {status} at epoch {entry['end_epoch']} after "
              f"{end - mon.t_call:.1f} s", flush=True)
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return status

    def path_for(self, cfg) -> str:
        """The call's path for a group like ``cfg``, or ``paper`` where that path cannot train it (``onegraph``:
        SGD with coupled L2 and an LR-only schedule) or, with measured rates, was not validated in ``cfg``'s
        precision (the bf16 check is trained in bf16)."""
        engine = self.engine
        if engine == "onegraph" and not batched.stackable(cfg):
            return "paper"
        basis = self.rates.basis
        if engine != "paper" and basis is not None and cfg.precision != basis.precision \
                and measured_rate(self.args.rates, path=engine, precision=cfg.precision) is None:
            return "paper"
        return engine

    def fall_back(self, why: str) -> None:
        """Train the rest of the call with the ``paper`` path (``fit`` / ``fit_many``) and its rates."""
        self.engine = "paper"
        self.rates = Rates(self.args.tiny, None if self.args.tiny and self.args.rates is None
                           else measured_rate(self.args.rates, path="paper"))
        self.log["engine"], self.log["engine_why"] = "paper", why
        self.log["rate_basis"] = "measured" if self.rates.basis is not None else "estimated"
        print(f"[{now() - self.t0:6.1f} s] {why}: the paper path from here on", flush=True)

    def finish_diverged(self, mon: Monitor) -> None:
        """Members that diverged in a call that was then cut: their final record, as ``fit_many`` would write it."""
        for h, epoch in mon.diverged.items():
            cfg = self.by_hash[h]
            if self.done(h):
                continue
            hist = self.store.history(cfg)
            self.store.finish(cfg, train_mod.summarize(cfg, hist, "diverged", epoch, DATASET))

    def run(self) -> None:
        self.write()
        pending = self.pending()
        if not pending:
            self.log["stopped"] = "queue finished"
            self.write(final=True)
            return
        with window_data(self.args.data_root, pairs_of(pending)) as (root, info):  # before CUDA: decodes in forks
            self.data_root = root
            self.log["data"] = info
            self.log["data_s"] = round(now() - self.t0, 2)
            dev = train_mod.resolve_device(pending[0].device)
            self.log["device"] = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
            if self.rates.basis is None:  # the H200 estimate: a card measured slower starts from its scale
                self.rates.scale = next((v for k, v in DEVICE_RATE_SCALE.items() if k in self.log["device"]), 1.0)
            print(f"[{now() - self.t0:6.1f} s] engine {self.engine} ({self.log['engine_why']}); rates "
                  f"{self.log['rate_basis']}", flush=True)
            while True:
                group, why = self.next_group()
                if group is None:
                    self.log["stopped"] = why
                    break
                status = self.train_group(group, why)
                self.write()
                if status == "budget":
                    self.log["stopped"] = "budget: the next epoch would end after the deadline"
                    break
        self.write(final=True)


# ============================================================================================== plan only
def plan_only(args, items: list[Item]) -> None:
    store = Store(args.store) if args.store and Path(args.store).is_dir() else None  # creates no store
    engine, basis, why = select_path(args.engine, args.rates, args.tiny)
    rates = Rates(args.tiny, basis)
    members = args.max_members or 16
    print(f"{'item':<24} {'runs':>4} {'shared':>6} {'stored':>6} {'est. s':>8} {'+eval s':>8}")
    tot = tot_eval = 0.0
    for it in items:
        plan = pd.DataFrame({"cfg": it.cfgs})
        plan.attrs["max_members"] = members
        stored = sum(store.get(c) is not None for c in it.cfgs) if store is not None else 0
        todo = [c for c in it.cfgs if store is None or store.get(c) is None]
        est = estimate_gpu_hours(plan, source=args.rates) * 3600 if it.cfgs else 0.0
        with_eval = sum(rates.epoch_s(c, members) / members * c.num_epochs for c in todo)
        tot += est
        tot_eval += with_eval
        print(f"{it.label:<24} {len(it.cfgs):>4} {it.shared:>6} {stored:>6} {est:>8.0f} {with_eval:>8.0f}")
    usable = args.budget_s - args.reserve_s - 30
    print(f"{'total':<24} {sum(len(i.cfgs) for i in items):>4} {'':>6} {'':>6} {tot:>8.0f} {tot_eval:>8.0f}")
    print(f"est. s: profiles.estimate_gpu_hours ({gpu_hours_label(args.rates)}, groups of {members}, training "
          f"only); +eval s: the window's own model (engine {engine}, rates "
          f"{'measured' if basis is not None else 'estimated'}; evaluation included) for the runs the store does "
          f"not hold; about {math.ceil(tot_eval / max(1.0, usable))} calls of --budget-s {args.budget_s:g}")


def tidy(store_dir, items: list[Item]) -> list[str]:
    """Remove what an unpacked ``checkpoints.tar.gz`` left for runs that have finished since (``Store.finish`` does
    this where a run finishes; the checkout that the outputs are unpacked into never finishes a run itself)."""
    store = Store(store_dir)
    removed = []
    for c in (c for it in items for c in it.cfgs):
        if store.get(c) is None:
            continue
        for p in (store.root / "checkpoints" / f"{c.hash}.pt", store.runs_dir / f"{c.hash}.running.json",
                  store.runs_dir / f"{c.hash}.epochs.json"):
            if p.exists():
                p.unlink()
                removed.append(str(p))
    print(f"removed {len(removed)} files of finished runs", flush=True)
    return removed


# ============================================================================================== main
def parse(argv=None):
    ap = argparse.ArgumentParser(
        prog=COMMAND, description="Train what the store lacks of the paper-protocol queue (Yun et al. 2022, Tables "
        "1-2) within a time budget, stopping between epochs; or, with --pack-data, write the data file it carries.")
    ap.add_argument("--budget-s", type=float, default=540.0, help="wall seconds this call may use, set-up included")
    ap.add_argument("--reserve-s", type=float, default=15.0, help="seconds kept for writing --out at the end")
    ap.add_argument("--store", default="reports", help="results store (runs/, checkpoints/)")
    ap.add_argument("--out", default="paper_window_out", help="where the records, checkpoints and log go ($OUT)")
    ap.add_argument("--data-root", default=None, help=f"folder with {DATA_FILE}, or a data root with "
                    "cifar10-jpeg/ (default gpu_data); with --pack-data: the folder holding cifar10-jpeg/ (default "
                    "$REPRO_DATA_ROOT, else ./data)")
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    ap.add_argument("--max-members", type=int, default=0, help="largest stack (0: the profile's max_members)")
    ap.add_argument("--engine", default="auto", choices=["auto", *PATHS],
                    help="how groups are trained: paper (fit / fit_many), onegraph or streams (repro_lib.lockstep); "
                    "auto: the fastest path the benchmark validated (--rates), else paper")
    ap.add_argument("--rates", default=None, help="bench_paper_rate.py's results (a results_paper_rate_<gpu>.json "
                    "or its folder) for --engine auto and the time model (default: benchmarks/)")
    ap.add_argument("--probe-epochs", type=int, default=4, help="epochs after the first before a group checks that "
                    "it will finish (and shrinks if not)")
    ap.add_argument("--plan-only", action="store_true", help="print the queue and its estimated GPU seconds")
    ap.add_argument("--tidy", action="store_true", help="remove the checkpoints and running/epochs files of runs "
                    "the store holds as finished (left behind by unpacking an earlier checkpoints.tar.gz)")
    ap.add_argument("--tiny", action="store_true", help="smoke size on the CPU (width 4, N/100, B 16): for tests")
    ap.add_argument("--epochs", type=int, default=0, help="override the epochs (--tiny: default 4)")
    ap.add_argument("--max-runs", type=int, default=0, help="only the first runs of the queue (0: all)")
    ap.add_argument("--pack-data", action="store_true", help=f"write the data file the GPU call carries ({DATA_FILE}: "
                    "the JPEG files of the training images the queue's (N, seed) draw, the test set) from "
                    "--data-root's cifar10-jpeg/ to --data-file; trains nothing")
    ap.add_argument("--data-file", default=f"gpu_data/{DATA_FILE}", help="with --pack-data: where it goes")
    args = ap.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    return args


def pack_data(args) -> dict:
    """``--pack-data``: the data file for the (N, seed) pairs of the queue (``--seeds``, ``--tiny``), from
    ``<--data-root>/cifar10-jpeg`` (:func:`repro_lib.runs.window_data.build`)."""
    pairs = pairs_of(c for it in build_queue(args.seeds, tiny=args.tiny) for c in it.cfgs)
    info = build_data_file(args.data_root or None, args.data_file, pairs)
    print(f"{info['file']}: {info['bytes'] / 2 ** 20:.1f} MiB, {info['train_rows']} of {info['train_total']} "
          f"training images (pairs (N, seed) {info['pairs']}), {info['test_rows']} test images", flush=True)
    return info


def main(argv=None) -> dict | None:
    """``python -m repro_lib window [options]``: the window call, ``--plan-only``, ``--tidy`` or ``--pack-data``
    (see the module docstring); returns the window's log (``window.json``), ``{"removed": [...]}`` (``--tidy``),
    the data file's summary (``--pack-data``) or None (``--plan-only``)."""
    t0 = now()
    args = parse(argv)
    if args.pack_data:
        return pack_data(args)
    if args.data_root is None:
        args.data_root = "gpu_data"
    items = build_queue(args.seeds, tiny=args.tiny, epochs=args.epochs, max_runs=args.max_runs)
    if args.plan_only:
        plan_only(args, items)
        return None
    if args.tidy:
        return {"removed": tidy(args.store, items)}
    win = Window(args, items, t0)
    win.run()
    q = win.log["queue"]
    print(f"[{win.log['elapsed_s']:6.1f} s] {win.log.get('stopped')}; finished now: "
          f"{sum(x['finished_now'] for x in q)}, remaining: {sum(x['remaining'] for x in q)}", flush=True)
    return win.log


if __name__ == "__main__":
    main()
