"""Training rate at the paper protocol: the package's training paths next to K plain PyTorch processes, in one call.

**Protocol.** Yun et al. 2022, Table 1 (a), column N = 3,125. The runs are those of the package's own ``paper``
profile: ``grids.get("yun2022_table1").plan("paper")`` filtered on ``subtable == "a"`` and ``paper_n == 3125``, in
plan order, so member i of a group is the i-th run the GPU window would train. That is the scale-invariant
ResNet-18 at width 64 with ghost BN 64, B = 128, SGD momentum 0.9 with coupled L2 weight decay, the step schedule,
CUDA graphs, evaluation every ``ceil(n_test / N)`` epochs (4) on the 10,000-image test set, and the angular tracker
every epoch. Only ``num_epochs`` is shortened, to the warm-up and measured epochs plus one. The images are synthetic
(``synthetic=True``, the data set's shapes and 10,000 test images) unless ``--data-root`` is given: throughput
does not depend on pixel values.

**Paths.** Each measurement is one row: path x precision x members.

* ``paper``: the package's path as the GPU window runs it today. A group of K runs goes through
  ``batched.fit_many`` (K = 1 through ``train.fit``, as ``fit_grouped`` and the window do) with a results
  ``Store`` in a temporary folder, so every member logs every epoch as in the window. The configs are fp32 with
  CUDA graphs; ``--precisions bf16`` only replaces the config's ``precision``.

  Epochs are timed through the ``clock=`` hook of ``fit``/``fit_many``, which is asked after every epoch but the
  last, after that epoch's evaluation (the store logs one epoch per member per span either way). A hook that
  always says "no checkpoint now" stamps the wall clock. The paper profile writes a checkpoint at most once a
  minute; those writes are not measured.
* ``onegraph`` and ``streams``: the same group through ``repro_lib.lockstep.fit_lockstep`` with that engine (every
  member its own network with dense convolutions; ``onegraph``: one CUDA graph per step of the whole group, a
  branch per member on its own stream, the SGD step inside; ``streams``: ``fit``'s step per member on its own
  stream), with the same store, clock and timing as ``paper``. Before its first row in a precision, such a path is
  checked against ``fit`` on the device (:func:`validate`: three runs of the plan, one epoch of two full batches and
  a ragged one, trained by the path as one group and by ``fit`` one by one; the weight updates, running statistics
  and losses must agree to ``VALIDATE_TOL``, exactly on a CPU). The report keeps the check under ``validation``;
  every row says ``valid`` (``paper``: True, the reference; ``plain``: None).
* ``plain``: the user's alternative. K independent processes (``benchmarks/plain_loop.py``), each a plain eager
  loop over one run of the group (its lr, weight decay and seed). They share the same data, cadence and tracker,
  and no package code runs per step. Its settings are the usual ones: NCHW, ``cudnn.benchmark`` on, TF32
  convolutions (PyTorch's default); the paper path runs channels_last. The K processes start together. Each
  warms up (1 epoch and 1 evaluation) and reports ready; all then time their epochs from one go signal.
  ``images_per_s`` is the sum of the K per-process rates. ``images_per_s_span`` is all their images over the
  span from go to the last finish. fp32 only.

A new path is one entry of :data:`PATHS`: ``name: TrainingPath(run, precisions)``, where ``run(bench, members,
precision)`` returns the row's fields (at least ``images_per_s``, ``s_per_epoch``, ``epochs_measured``,
``complete``, ``valid``). ``--paths`` picks and orders the paths. :func:`fastest` picks the row the GPU window
trains with (``python -m repro_lib window --engine auto``): the fastest complete, validated fp32 row of the
largest group, every member finished.

**Timing.** The in-process paths warm up for W epochs, the smallest multiple of the evaluation cadence >= 2 (graph
capture, cuDNN autotuning, the first evaluation's shapes). ``plain`` warms up with 1 epoch + 1 evaluation. Then E
epochs are measured, with E = ``--epochs`` (default 10) rounded up to a multiple of the cadence, so each path
evaluates E / cadence times in its measured span (12 epochs, 3 evaluations at N = 3,125). Each epoch includes its
evaluation, the tracker and, for the in-process paths, the store's log. ``s_per_epoch`` is one epoch of all K
members (in-process paths) or of one process (``plain``, mean over the processes); ``train_images_per_s`` (in-process
paths) counts the training alone (the histories' ``seconds``, without the evaluation). TFLOP/s counts the training
FLOPs only: ``images_per_s`` times the FLOPs of one training step per image (``bench_fit.step_flops`` on the meta
device: 426 GFLOP per B = 128 step on the paper network, 3.33 GFLOP per image). The evaluation's forward passes are
not counted in the FLOPs, but they are in the time.

**Order and profile.** Precision by precision (``--precisions`` order, fp32 first by default), then path by path
(``--paths`` order: paper, onegraph, streams, plain), each with ``--members`` ascending (1, 8). After the last row,
one epoch of the fastest usable group (:func:`fastest`, fp32; without one, the largest ``paper`` group;
``--profile-path`` names another) runs under ``torch.profiler``: a training call of its own, the first epoch after
graph capture without evaluation (25 steps), so that no measured row runs after the profiler was first started in
this process (``plain`` rows run in other processes). ``profile_paper_rate_<gpu>.txt`` gets two tables, the top 25
ops by self and by total device time (CPU time on a CPU), and the kernel time as a share of that epoch's wall time.
On CUDA a profiler session opens and closes before that call's graph is captured (the workaround of
``torch.profiler._utils._init_for_cuda_graphs``), so the replayed graph's kernels are traced. ``--no-profile`` skips
it.

**Budget.** ``--budget-s`` counts from the start of the script. A measurement starts only with at least
``MIN_START_S`` left (the profile: ``PROFILE_MIN_S``, a validation: ``VALIDATE_MIN_S``; without it the path's rows
are measured with ``valid: None``), and it stops at the epoch boundary where the next epoch
would overrun. A row cut that way says ``complete: false``, with the epochs it measured. Measurements that could
not start are listed under ``skipped``. The JSON (``<out>/results_paper_rate_<gpu>.json``, <gpu> = ``h100``,
``h200``, ... or ``cpu``) is rewritten atomically after every row, so a killed call keeps what it measured.

    PYTHONPATH=. python benchmarks/bench_paper_rate.py --out $OUT --budget-s 230 --epochs 4 --precisions fp32 bf16
    # the same code at smoke size on a CPU:
    .venv/bin/python benchmarks/bench_paper_rate.py --device cpu --width 4 --n 64 --n-test 128 --batch-size 16 \\
        --epochs 2 --members 1 2 --out /tmp/bench
"""
from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from bench_fit import step_flops  # noqa: E402

from repro_lib import lockstep  # noqa: E402
from repro_lib.batched import fit_many  # noqa: E402
from repro_lib.config import RunConfig  # noqa: E402
from repro_lib.data import DATASETS  # noqa: E402
from repro_lib.lockstep import fit_lockstep  # noqa: E402
from repro_lib.papers.yun2022 import grids  # noqa: E402
from repro_lib.store import Store, _write_atomic  # noqa: E402
from repro_lib.train import fit, load_data  # noqa: E402

T0 = time.monotonic()  # the script's start: the budget counts from here (imports included)
MIN_START_S = 30.0  # do not start a measurement with less time left (CUDA; 0 on a CPU)
PROFILE_MIN_S = 45.0  # nor the profiled epoch
PROFILE_TABLE_S = 15.0  # time kept free for the profiler's tables
GRACE_S = 10.0  # how long the plain workers may overrun the deadline before they are killed
VALIDATE_ROWS = (0, 4, 8)  # plan rows a path is checked on against fit: eta 6.4, 3.2, 1.6; seeds 0, 1, 2
VALIDATE_TOL = {"fp32": 1e-2, "bf16": 5e-2}  # on CUDA; a CPU must agree exactly
VALIDATE_MIN_S = 40.0  # do not start a validation with less time left (CUDA)
PLAIN_LOOP = HERE / "plain_loop.py"


class OutOfTime(Exception):
    """The budget ends before the next epoch would."""


# ============================================================================================== output
class Report:
    """The results JSON, rewritten atomically after every change; ``t0``: the budget's start (``time.monotonic``)."""

    def __init__(self, path: Path, header: dict, t0: float):
        self.path, self.t0 = path, t0
        self.data = {**header, "rows": [], "validation": {}, "skipped": [], "errors": []}
        self.dump()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def dump(self) -> None:
        self.data["elapsed_s"] = round(self.elapsed(), 1)
        _write_atomic(self.path, json.dumps(self.data, indent=1, default=str))

    def add(self, key: str, item: dict) -> None:
        """Append ``item`` to the list ``key`` (rows, skipped, errors)."""
        item = {**item, "t": round(self.elapsed(), 1)}
        self.data[key].append(item)
        print(key, json.dumps(item, default=str), flush=True)
        self.dump()

    def set(self, key: str, item: dict) -> None:
        self.data[key] = {**item, "t": round(self.elapsed(), 1)}
        print(key, json.dumps(self.data[key], default=str), flush=True)
        self.dump()


def device_slug(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``h100``, ``NVIDIA A100-SXM4-80GB`` -> ``a100``; ``cpu`` stays ``cpu``."""
    low = name.lower().replace("nvidia", " ")
    m = re.search(r"\b([a-z]+\d+[a-z]*)\b", low)
    return m.group(1) if m else (re.sub(r"[^a-z0-9]+", "_", low).strip("_") or "device")


# ============================================================================================== configuration
def paper_configs(args) -> list[RunConfig]:
    """The runs of the ``paper`` profile of Table 1 (a), column N = 3,125, in plan order, with this call's sizes
    and data (everything else as the profile sets it)."""
    plan = grids.get("yun2022_table1").plan("paper")
    plan = plan[(plan["subtable"] == "a") & (plan["paper_n"] == 3125)]
    real = bool(args.data_root)
    over = dict(device=args.device, synthetic=not real)
    if real:
        over.update(dataset=args.dataset, n_test=args.n_test)
    else:  # synthetic data default to 1000 test images; the paper evaluates on the full test set
        over.update(n_test=args.n_test or DATASETS[plan["cfg"].iloc[0].dataset].n_test)
    for name in ("width", "n", "batch_size"):
        if getattr(args, name):
            over[name] = getattr(args, name)
    return [c.replace(**over) for c in plan["cfg"]]


def round_up(x: int, k: int) -> int:
    return k * math.ceil(x / k)


@dataclass
class Bench:
    """What every path shares: the arguments, the runs, the epoch counts, the FLOPs and the report."""

    args: argparse.Namespace
    device: torch.device
    cfgs: list[RunConfig]
    report: Report
    out: Path
    slug: str
    tmp: Path
    deadline: float  # time.monotonic() at which the budget ends
    eval_every: int = 1
    warmup: int = 2  # paper path warm-up epochs
    epochs: int = 10  # measured epochs
    flops_per_image: float | None = None
    _data_file: Path | None = None
    validation: dict = field(default_factory=dict)  # (path, precision) -> what validate() found
    references: dict = field(default_factory=dict)  # precision -> the fit runs validate() compares with

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def data_file(self) -> Path:
        """The first run's training and test tensors (CPU, uint8), saved once for the plain workers."""
        if self._data_file is None:
            train, test = load_data(self.cfgs[0], self.args.data_root or None)
            path = self.tmp / "data.pt"
            torch.save({"x": train.x, "y": train.y, "x_test": test.x, "y_test": test.y, "mean": list(train.mean),
                        "std": list(train.std), "num_classes": train.num_classes}, path)
            self._data_file = path
        return self._data_file

    def tflops(self, images_per_s: float) -> float | None:
        return self.flops_per_image * images_per_s / 1e12 if self.flops_per_image else None


def release_memory(cuda: bool) -> None:
    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


# ============================================================================================== the paper path
class EpochClock:
    """The ``clock=`` hook of ``fit``/``fit_many``. Asked after every epoch but the last, it stamps the wall time,
    runs the hook registered for that epoch and raises :class:`OutOfTime` when the next epoch would end after the
    deadline. It never asks for a checkpoint."""

    def __init__(self, deadline: float, cuda: bool, hooks: dict[int, Callable[[], None]] | None = None):
        self.deadline, self.cuda, self.hooks = deadline, cuda, hooks or {}
        self.times: list[float] = []  # perf_counter at the end of epoch 1, 2, ...

    def __call__(self, _every_s: float) -> "EpochClock":  # fit / fit_many build their clock from checkpoint_every_s
        return self

    def due(self) -> bool:
        if self.cuda:
            torch.cuda.synchronize()
        self.times.append(time.perf_counter())
        hook = self.hooks.get(len(self.times))
        if hook is not None:
            hook()
        last = self.times[-1] - self.times[-2] if len(self.times) > 1 else 0.0
        if time.monotonic() + last > self.deadline:
            raise OutOfTime(f"stopped after epoch {len(self.times)}")
        return False

    def span(self, warmup: int, epochs: int) -> tuple[int, float]:
        """(epochs measured, their seconds): epochs ``warmup + 1 .. warmup + epochs``, or as many as were stamped."""
        done = min(epochs, len(self.times) - warmup)
        if done < 1:
            raise OutOfTime(f"stopped after epoch {len(self.times)}, before the first measured epoch ended")
        return done, self.times[warmup + done - 1] - self.times[warmup - 1]


class EpochProfiler:
    """``torch.profiler`` over one epoch, started and stopped by :class:`EpochClock` hooks, written as text."""

    def __init__(self, cuda: bool):
        self.cuda = cuda
        self.prof = None
        self.running = False
        self.wall_s = None  # set once a whole epoch was profiled
        self.kernel_s = None  # set by write() on CUDA

    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        self.prof = profile(activities=acts)
        self.prof.start()
        self.running = True
        self.t0 = time.perf_counter()

    def stop(self, complete: bool = True) -> None:
        """End the session; ``complete=False``: the epoch was cut, nothing will be written."""
        if not self.running:
            return
        if self.cuda:
            torch.cuda.synchronize()
        self.prof.stop()
        self.running = False
        if complete:
            self.wall_s = time.perf_counter() - self.t0

    def write(self, path: Path, title: str) -> None:
        averages = self.prof.key_averages()
        lines = [title, f"profiled epoch: {self.wall_s:.3f} s wall (with the profiler's own overhead)"]
        us = _kernel_time_us(averages) if self.cuda else None
        self.kernel_s = us / 1e6 if us is not None else None
        if self.kernel_s is not None:
            lines.append(f"kernel time (sum of the self device time of device-side events): {self.kernel_s:.3f} s = "
                         f"{100 * self.kernel_s / self.wall_s:.0f} % of the epoch's wall time")
        sort_keys = ([("self_device_time_total", "self_cuda_time_total"), ("device_time_total", "cuda_time_total")]
                     if self.cuda else [("self_cpu_time_total",), ("cpu_time_total",)])
        for keys in sort_keys:
            table, key = _table(averages, keys)
            lines += ["", f"==== top 25 ops by {key}", table]
        path.write_text("\n".join(lines) + "\n")
        print("\n".join(lines[:3]), flush=True)


def _table(averages, keys: tuple) -> tuple[str, str]:
    """``averages.table`` sorted by the first key this torch version knows."""
    for key in keys:
        try:
            return averages.table(sort_by=key, row_limit=25, max_name_column_width=60), key
        except (AttributeError, KeyError):
            continue
    raise ValueError(f"profiler: none of the sort keys {keys} is known")


def _kernel_time_us(averages) -> float | None:
    try:
        from torch.autograd import DeviceType

        return float(sum(e.self_device_time_total for e in averages if e.device_type == DeviceType.CUDA))
    except Exception:  # an attribute this torch version lacks: leave the line out
        return None


def _paper_configs(b: Bench, members: int, precision: str, num_epochs: int) -> list[RunConfig]:
    if members > len(b.cfgs):
        raise ValueError(f"members: the plan has {len(b.cfgs)} runs, {members} asked for")
    return [c.replace(num_epochs=num_epochs, precision=precision) for c in b.cfgs[:members]]


def _train(b: Bench, cfgs: list[RunConfig], clock: EpochClock, path: str = "paper", **kw
           ) -> tuple[list[dict] | None, str | None]:
    """The group through ``path``, as the window trains it: ``paper``: ``fit`` (one run) or ``fit_many`` (a group);
    an engine of ``repro_lib.lockstep`` (``onegraph``, ``streams``): ``fit_lockstep`` (any size). With a results
    store (a temporary folder) and ``clock``. Returns (results, None), or (None, why) when the clock stopped it."""
    with tempfile.TemporaryDirectory(dir=b.tmp) as d:
        kw = dict(store=Store(d), data_root=b.args.data_root or None, progress=False, clock=clock, **kw)
        try:
            if path in lockstep.ENGINES:
                return fit_lockstep(cfgs, engine=path, **kw), None
            return ([fit(cfgs[0], **kw)] if len(cfgs) == 1 else fit_many(cfgs, **kw)), None
        except OutOfTime as e:
            return None, str(e)


def runner_of(path: str, members: int) -> str:
    if path in lockstep.ENGINES:
        return f"fit_lockstep({path})"
    return "fit" if members == 1 else "fit_many"


def measure_group(b: Bench, members: int, precision: str, path: str = "paper") -> dict:
    """One group of ``members`` runs of the paper profile through ``path`` (:func:`_train`); epochs timed by
    :class:`EpochClock`: W warm-up epochs, E measured ones, one more (the last epoch is never stamped). A path of
    ``repro_lib.lockstep`` is first checked against ``fit`` on this device (:func:`validate`, once per precision);
    a row's ``valid`` says whether it agreed (``paper`` is the reference: True)."""
    if path in lockstep.ENGINES and (path, precision) not in b.validation:
        b.validation[(path, precision)] = _validate_or_why(b, path, precision)
    cfgs = _paper_configs(b, members, precision, b.warmup + b.epochs + 1)
    clock = EpochClock(b.deadline, b.cuda)
    if b.cuda:
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    res, cut = _train(b, cfgs, clock, path)
    done, span = clock.span(b.warmup, b.epochs)
    rate = members * cfgs[0].n * done / span
    row = dict(runner=runner_of(path, members), images_per_s=rate, tflops=b.tflops(rate),
               s_per_epoch=span / done, epochs_measured=done, warmup_epochs=b.warmup, eval_every=b.eval_every,
               complete=done == b.epochs, setup_s=clock.times[0] - t, lrs=[c.lr for c in cfgs],
               seeds=[c.seed for c in cfgs])
    row["valid"] = True if path == "paper" else b.validation[(path, precision)].get("passed")
    if cut is not None:
        row["cut"] = cut
    if res is not None:
        row["train_s_per_epoch"] = _train_seconds(res, b.warmup, done)
        if row["train_s_per_epoch"]:
            row["train_images_per_s"] = members * cfgs[0].n / row["train_s_per_epoch"]
        row["statuses"] = [r["status"] for r in res]
        row["dtheta_last"] = [r["history"][-1].get("angular_update") for r in res]
    if b.cuda:
        row["peak_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
    return row


def measure_paper(b: Bench, members: int, precision: str) -> dict:
    return measure_group(b, members, precision, "paper")


# ============================================================================================== validation
def validation_configs(b: Bench, precision: str) -> list[RunConfig]:
    """Three runs of the plan with different LRs and seeds (plan rows ``VALIDATE_ROWS``: η 6.4, 3.2, 1.6; seeds 0, 1,
    2), one epoch of two full batches and a ragged one (N = 2B + B/3), evaluated at its end on at most 1,000 test
    images."""
    c0 = b.cfgs[0]
    picks = [b.cfgs[i] for i in VALIDATE_ROWS if i < len(b.cfgs)] or b.cfgs[:1]
    n = 2 * c0.batch_size + max(1, c0.batch_size // 3)
    n_test = min(c0.n_test or DATASETS[c0.dataset].n_test, 1000)
    return [c.replace(num_epochs=1, n=n, n_test=n_test, precision=precision) for c in picks]


def _fit_reference(b: Bench, cfgs: list[RunConfig]) -> list[tuple[dict, dict, dict]]:
    """``fit`` of each run: (result, its initial trainable weights, its final state dict), as CPU copies."""
    from repro_lib import train as train_mod

    build, out = train_mod.build_model, []
    for c in cfgs:
        models = []

        def capture(cfg, num_classes):
            models.append(build(cfg, num_classes))
            return models[-1]

        train_mod.build_model = capture
        try:
            res = fit(c, data_root=b.args.data_root or None, progress=False)
        finally:
            train_mod.build_model = build
        init = build(c, DATASETS[c.dataset].num_classes)  # the same seed: fit's initial weights
        out.append((res, {n: p.detach().clone() for n, p in init.named_parameters() if p.requires_grad},
                    {k: v.detach().cpu().clone() for k, v in models[0].state_dict().items()}))
    return out


def validate(b: Bench, path: str, precision: str) -> dict:
    """``path`` against ``fit`` on this device: the runs of :func:`validation_configs` trained once by the path (one
    group) and once each by ``fit``. Per run: the difference of the two weight updates relative to ``fit``'s update
    (trainable tensors, L2), of the running statistics (relative to their largest value) and of the training and
    test losses; the path passes when every one is at most ``VALIDATE_TOL`` (on a CPU, where the path is
    bit-identical to ``fit``: 0). On a GPU two ``fit`` calls already differ by the kernels cuDNN picks and by
    non-deterministic reductions; a path that read a stale batch, mixed up members or lost a step differs by order
    one."""
    t = time.perf_counter()
    cfgs = validation_configs(b, precision)
    if precision not in b.references:
        b.references[precision] = _fit_reference(b, cfgs)
    refs = b.references[precision]
    res = fit_lockstep(cfgs, engine=path, data_root=b.args.data_root or None, progress=False, keep_states=True)
    worst = {"update": 0.0, "running_stats": 0.0, "loss": 0.0}
    for (ref, init, final), r in zip(refs, res):
        got = r["state_dict"]
        num = sum(float((got[n].double() - final[n].double()).square().sum()) for n in init)
        den = sum(float((final[n].double() - init[n].double()).square().sum()) for n in init)
        worst["update"] = max(worst["update"], math.sqrt(num / den) if den > 0 else math.sqrt(num))
        for k in (k for k in final if "running" in k):
            scale = float(final[k].double().abs().max()) + 1e-12
            worst["running_stats"] = max(worst["running_stats"],
                                         float((got[k].double() - final[k].double()).abs().max()) / scale)
        for k in ("train_loss", "test_loss"):
            a, g = ref[k], r[k]
            if a == g:
                rel = 0.0
            elif math.isfinite(a) and math.isfinite(g):
                rel = abs(a - g) / max(abs(a), 1e-12)
            else:
                rel = math.inf
            worst["loss"] = max(worst["loss"], rel)
    tol = VALIDATE_TOL[precision] if b.cuda else 0.0
    return dict(passed=all(v <= tol for v in worst.values()), tol=tol,
                **{f"max_rel_{k}": v for k, v in worst.items()}, runs=len(cfgs), n=cfgs[0].n,
                steps=-(-cfgs[0].n // cfgs[0].batch_size), statuses=[r["status"] for r in res],
                seconds=round(time.perf_counter() - t, 2))


def _validate_or_why(b: Bench, path: str, precision: str) -> dict:
    """:func:`validate`, recorded under ``validation`` in the report (``<path>/<precision>``); a failure or a short
    budget is recorded as ``passed: None`` with the reason (the rows are still measured; the window does not
    take them)."""
    if b.left() < (VALIDATE_MIN_S if b.cuda else 0.0):
        v = dict(passed=None, why=f"budget: {b.left():.0f} s left")
    else:
        try:
            v = validate(b, path, precision)
        except Exception as e:
            traceback.print_exc()
            v = dict(passed=None, why=f"{type(e).__name__}: {e}")
        release_memory(b.cuda)
    b.report.data["validation"][f"{path}/{precision}"] = {**v, "t": round(b.report.elapsed(), 1)}
    print("validation", f"{path}/{precision}", json.dumps(v, default=str), flush=True)
    b.report.dump()
    return v


def profile_paper(b: Bench, members: int, precision: str, path: str = "paper") -> dict:
    """One epoch of a group of ``path`` under ``torch.profiler``, in a training call of its own after every
    measured row (so that no measured row runs after the profiler was first started in this process): the first
    epoch that is past graph capture and has no evaluation, written to ``profile_paper_rate_<gpu>.txt``."""
    if b.cuda:
        _init_profiler_for_graphs()  # before this call's graph is captured
    epoch = next(e for e in range(2, 2 + b.eval_every + 1) if b.eval_every == 1 or e % b.eval_every)
    cfgs = _paper_configs(b, members, precision, epoch + 1)
    prof = EpochProfiler(b.cuda)
    clock = EpochClock(b.deadline - PROFILE_TABLE_S, b.cuda, {epoch - 1: prof.start, epoch: prof.stop})
    try:
        _, cut = _train(b, cfgs, clock, path)
    finally:
        prof.stop(complete=False)  # still running only when the profiled epoch was cut
    if prof.wall_s is None:
        raise OutOfTime(cut or "the profiled epoch did not finish")
    c0 = cfgs[0]
    out = b.out / f"profile_paper_rate_{b.slug}.txt"
    prof.write(out, f"torch.profiler: {path} path ({runner_of(path, members)}, {members} members, "
                    f"{precision}, CUDA graphs {c0.cuda_graphs}), epoch {epoch}: {-(-c0.n // c0.batch_size)} steps "
                    f"of B = {c0.batch_size}, {'with' if epoch % b.eval_every == 0 else 'no'} evaluation; "
                    f"width {c0.width}, N = {c0.n}; {b.report.data['device']}, torch {torch.__version__}")
    return dict(file=out.name, path=path, members=members, precision=precision, epoch=epoch, wall_s=prof.wall_s,
                kernel_s=prof.kernel_s)


def _train_seconds(results: list[dict], warmup: int, done: int) -> float | None:
    """Median over the measured epochs of the group's training seconds (the histories' ``seconds``: each member's
    share of the stacked epoch, without evaluation); None when a member stopped early."""
    hist = [r["history"][warmup:warmup + done] for r in results]
    if any(len(h) < done for h in hist):
        return None
    return statistics.median(sum(h[e]["seconds"] for h in hist) for e in range(done))


# ============================================================================================== the plain path
def _tail(path: Path, chars: int = 1500) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def _launch(b: Bench, folder: Path, members: int) -> list[subprocess.Popen]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    if not b.cuda:
        env["OMP_NUM_THREADS"] = "1"
    procs = []
    for rank in range(members):
        log = open(folder / f"log_{rank}.txt", "w")
        procs.append(subprocess.Popen([sys.executable, str(PLAIN_LOOP), str(folder / "spec.json"), str(rank)],
                                      stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT)))
        log.close()
    return procs


def _wait_ready(procs, folder: Path, deadline: float) -> None:
    """Until every worker has written ``ready_<rank>``; a worker that exits first is an error."""
    while True:
        for rank, p in enumerate(procs):
            if p.poll() is not None and not (folder / f"ready_{rank}").exists():
                raise RuntimeError(f"plain worker {rank} exited ({p.returncode}) before warming up:\n"
                                   + _tail(folder / f"log_{rank}.txt"))
        if all((folder / f"ready_{r}").exists() for r in range(len(procs))):
            return
        if time.monotonic() > deadline:
            raise OutOfTime("the plain workers were still warming up at the deadline")
        time.sleep(0.05)


def _wait_done(procs, deadline: float) -> None:
    while any(p.poll() is None for p in procs):
        if time.monotonic() > deadline + GRACE_S:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            return
        time.sleep(0.05)


def measure_plain(b: Bench, members: int, precision: str) -> dict:
    """``members`` plain processes (``plain_loop.py``) started together, each one run of the group."""
    cfgs = _paper_configs(b, members, precision, b.cfgs[0].num_epochs)
    c0 = cfgs[0]
    folder = Path(tempfile.mkdtemp(dir=b.tmp))
    unix_deadline = time.time() + b.left()
    spec = dict(dir=str(folder), data=str(b.data_file()), device=b.device.type, model=c0.model, width=c0.width,
                ghost_batch=c0.ghost_batch, batch_size=c0.batch_size, warmup_epochs=1, epochs=b.epochs,
                eval_every=b.eval_every, deadline=unix_deadline, threads=0 if b.cuda else 1,
                members=[dict(lr=c.lr, weight_decay=c.weight_decay, momentum=c.momentum, seed=c.seed) for c in cfgs])
    (folder / "spec.json").write_text(json.dumps(spec))
    t = time.monotonic()
    procs = _launch(b, folder, members)
    try:
        _wait_ready(procs, folder, b.deadline)
        setup_s = time.monotonic() - t
        t_go = time.time()
        (folder / "go").write_text(str(t_go))
        _wait_done(procs, b.deadline)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    results = []
    for rank, p in enumerate(procs):
        path = folder / f"result_{rank}.json"
        if not path.exists():
            raise RuntimeError(f"plain worker {rank} wrote no result (exit {p.returncode}):\n"
                               + _tail(folder / f"log_{rank}.txt"))
        results.append(json.loads(path.read_text()))
    if not all(r["epoch_s"] for r in results):
        raise OutOfTime("a plain worker measured no epoch before the deadline")
    rates = [r["images_per_epoch"] * len(r["epoch_s"]) / sum(r["epoch_s"]) for r in results]
    images = sum(r["images_per_epoch"] * len(r["epoch_s"]) for r in results)
    rate = sum(rates)
    done = min(len(r["epoch_s"]) for r in results)
    complete = all(r["complete"] for r in results) and done == b.epochs
    span = max(r["t_end"] for r in results) - t_go
    row = dict(runner=f"plain_loop.py x {members}", images_per_s=rate, tflops=b.tflops(rate),
               s_per_epoch=statistics.mean(statistics.mean(r["epoch_s"]) for r in results), epochs_measured=done,
               warmup_epochs=1, eval_every=b.eval_every, complete=complete, setup_s=setup_s,
               images_per_s_span=images / span, per_process_images_per_s=rates, lrs=[c.lr for c in cfgs],
               seeds=[c.seed for c in cfgs], finite=[r["finite"] for r in results],
               dtheta_last=[r["dtheta"] for r in results], valid=None)  # not the package: nothing to validate
    if b.cuda:
        row["peak_gib"] = max(r["peak_gib"] for r in results)
    shutil.rmtree(folder, ignore_errors=True)
    return row


# ============================================================================================== paths
@dataclass(frozen=True)
class TrainingPath:
    """A way of training the group: ``run(bench, members, precision) -> row fields``; the precisions it has."""

    run: Callable[[Bench, int, str], dict]
    precisions: tuple = ("fp32",)
    doc: str = ""


PATHS: dict[str, TrainingPath] = {
    "paper": TrainingPath(measure_paper, ("fp32", "bf16"), "fit / fit_many, the paper profile's flags (CUDA graphs)"),
    "onegraph": TrainingPath(functools.partial(measure_group, path="onegraph"), ("fp32", "bf16"),
                             "lockstep.fit_lockstep(engine='onegraph'): one CUDA graph per step of the whole group, "
                             "a branch per member on its stream, the SGD step inside"),
    "streams": TrainingPath(functools.partial(measure_group, path="streams"), ("fp32", "bf16"),
                            "lockstep.fit_lockstep(engine='streams'): fit's step per member (its CUDA graph and "
                            "torch.optim step) on its own CUDA stream"),
    "plain": TrainingPath(measure_plain, ("fp32",), "K independent plain eager PyTorch processes (plain_loop.py)"),
}
DEFAULT_PATHS = ("paper", "onegraph", "streams", "plain")
IN_PROCESS = ("paper", "onegraph", "streams")  # paths this process trains (the profile's candidates)


def measurements(args) -> list[tuple[str, str, int]]:
    """(path, precision, members) in the order they run: precision by precision (as given: fp32 first by default),
    then path by path (``--paths`` order), then members ascending."""
    return [(p, prec, m) for prec in args.precisions for p in args.paths for m in sorted(args.members)]


def fastest(rows: list[dict], paths=IN_PROCESS, precision: str = "fp32") -> dict | None:
    """The fastest usable row of ``paths`` in ``precision`` among those of the largest group measured: complete,
    validated (``valid`` True), every member finished. None when there is none."""
    ok = [r for r in rows if r["path"] in paths and r["precision"] == precision and r.get("complete")
          and r.get("valid") is True and all(s == "finished" for s in r.get("statuses", ["finished"]))]
    if not ok:
        return None
    top = max(r["members"] for r in ok)
    return max((r for r in ok if r["members"] == top), key=lambda r: r["images_per_s"])


# ============================================================================================== main
def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=".", help="folder for results_paper_rate_<gpu>.json and the profile")
    ap.add_argument("--budget-s", type=float, default=220.0, help="seconds from the script's start")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--paths", nargs="+", default=list(DEFAULT_PATHS), choices=sorted(PATHS))
    ap.add_argument("--precisions", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    ap.add_argument("--members", type=int, nargs="+", default=[1, 8], help="runs per group / processes (K)")
    ap.add_argument("--epochs", type=int, default=10, help="measured epochs (rounded up to the eval cadence)")
    ap.add_argument("--width", type=int, default=0, help="0: the profile's (64)")
    ap.add_argument("--n", type=int, default=0, help="training images; 0: the plan's 3125")
    ap.add_argument("--n-test", type=int, default=0, help="test images; 0: the full test set (10,000)")
    ap.add_argument("--batch-size", type=int, default=0, help="0: the plan's 128")
    ap.add_argument("--data-root", default="", help="folder holding --dataset (default: synthetic images)")
    ap.add_argument("--dataset", default="cifar10-jpeg", help="the data set under --data-root")
    ap.add_argument("--threads", type=int, default=0, help="torch threads of this process (0: leave)")
    ap.add_argument("--no-profile", action="store_true", help="skip the torch.profiler epoch")
    ap.add_argument("--profile-path", default="auto", choices=["auto", *IN_PROCESS],
                    help="the path whose largest group is profiled (auto: the fastest usable row)")
    return ap.parse_args(argv)


def header(args, device: torch.device, cfgs: list[RunConfig]) -> dict:
    c = cfgs[0]
    return {
        "what": "training rate at the paper protocol (Yun et al. Table 1 (a), N = 3,125): the package's paths "
                "(fit / fit_many, lockstep engines) vs plain processes (benchmarks/bench_paper_rate.py)",
        "paths": {p: PATHS[p].doc for p in args.paths},
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if device.type == "cuda" else None,
        "cpus": os.cpu_count(), "command": sys.argv, "budget_s": args.budget_s,
        "protocol": dict(model=c.model, width=c.width, ghost_batch=c.ghost_batch, n=c.n, n_test=c.n_test,
                         batch_size=c.batch_size, momentum=c.momentum, weight_decay_mode=c.weight_decay_mode,
                         optimizer=c.optimizer, schedule=c.schedule, dataset=c.dataset, synthetic=c.synthetic,
                         eval_every=c.eval_every, cuda_graphs=c.cuda_graphs, channels_last=c.channels_last,
                         checkpoint_every_s=c.checkpoint_every_s, profile=c.profile),
    }


def main(argv=None, t0: float | None = None) -> dict:
    """Run the measurements; ``t0`` (``time.monotonic()``): where the budget starts (default: now; the script
    passes its start, imports included). Returns the report's data."""
    t0 = time.monotonic() if t0 is None else t0
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cfgs = paper_configs(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    head = header(args, device, cfgs)
    slug = device_slug(head["device"])
    report = Report(out / f"results_paper_rate_{slug}.json", head, t0)
    tmp = Path(tempfile.mkdtemp(prefix="paper_rate_"))
    c0 = cfgs[0]
    cadence = c0.eval_interval(c0.n, c0.n_test or DATASETS[c0.dataset].n_test)
    b = Bench(args, device, cfgs, report, out, slug, tmp, deadline=t0 + args.budget_s, eval_every=cadence,
              warmup=round_up(2, cadence), epochs=round_up(max(1, args.epochs), cadence))
    report.data["protocol"].update(eval_interval=cadence, paper_warmup_epochs=b.warmup, measured_epochs=b.epochs)
    plan = measurements(args)
    try:
        b.flops_per_image = _flops_per_image(c0, device, report)
        for path, precision, members in plan:
            _step(b, dict(path=path, precision=precision, members=members), lambda: PATHS[path].run(
                b, members, precision), "rows", MIN_START_S, PATHS[path].precisions)
        target = profile_target(args, plan, report.data["rows"])
        if target is not None:
            _step(b, dict(zip(("path", "precision", "members"), target)),
                  lambda: profile_paper(b, target[2], target[1], target[0]), "profile", PROFILE_MIN_S)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        report.dump()
    print_summary(report.data)
    return report.data


def profile_target(args, plan, rows) -> tuple[str, str, int] | None:
    """(path, precision, members) of the profiled epoch: ``--profile-path`` (``auto``: the fastest usable row of
    the largest group, fp32 when measured, else the largest ``paper`` group or, without it, the first in-process
    path's); None with ``--no-profile`` or no in-process path."""
    inproc = [p for p in args.paths if p in IN_PROCESS]
    if args.no_profile or not inproc:
        return None
    prec = "fp32" if "fp32" in args.precisions else args.precisions[0]
    biggest = max(m for _, pr, m in plan if pr == prec)
    if args.profile_path != "auto":
        return args.profile_path, prec, biggest
    best = fastest(rows, inproc, prec)
    if best is not None:
        return best["path"], prec, best["members"]
    return ("paper" if "paper" in inproc else inproc[0]), prec, biggest


def _flops_per_image(cfg: RunConfig, device: torch.device, report: Report) -> float | None:
    """Training FLOPs per image (one step of B images / B), counted on the meta device (no memory, no kernels)."""
    for dev in (torch.device("meta"), device):
        try:
            flops = step_flops(cfg, dev)
        except Exception as e:
            report.add("errors", {"what": f"flops on {dev}", "error": f"{type(e).__name__}: {e}"})
            continue
        report.data["step_gflop"] = flops / 1e9
        report.data["gflop_per_image"] = flops / cfg.batch_size / 1e9
        return flops / cfg.batch_size
    return None


def _step(b: Bench, what: dict, fn: Callable[[], dict], key: str, min_s: float, precisions=None) -> None:
    """Run ``fn`` unless its precision is not offered or the budget is spent; its result goes to ``report[key]``
    (a list for "rows", one entry otherwise), a failure to "errors", a skip to "skipped"."""
    if precisions is not None and what["precision"] not in precisions:
        b.report.add("skipped", {**what, "what": key, "reason": f"{what['path']} has no {what['precision']}"})
        return
    if b.left() < (min_s if b.cuda else 0.0):
        b.report.add("skipped", {**what, "what": key, "reason": f"budget: {b.left():.0f} s left"})
        return
    try:
        item = {**what, **fn()}
        if key == "rows":
            b.report.add("rows", item)
        else:
            b.report.set(key, item)
    except Exception as e:
        traceback.print_exc()
        b.report.add("errors", {**what, "what": key, "error": f"{type(e).__name__}: {e}"})
    release_memory(b.cuda)


def _init_profiler_for_graphs() -> None:
    """Open and close a CPU + CUDA profiler session, so that a later session traces the kernels of CUDA graphs
    captured in between (``torch.profiler._utils._init_for_cuda_graphs``, with the CUDA activity named)."""
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            torch.cuda.synchronize()
    except Exception as e:  # the profile may then miss the graph's kernels
        print(f"profiler init for CUDA graphs: {type(e).__name__}: {e}", flush=True)


def print_summary(data: dict) -> None:
    print(f"\n{data['device']}, torch {data['torch']}, {data['cpus']} CPUs, {data['elapsed_s']} s")
    print(f"{'path':<9} {'prec':<5} {'K':>3} {'s/epoch':>8} {'images/s':>9} {'train/s':>9} {'TFLOP/s':>8} "
          f"{'epochs':>6} complete valid")
    for r in data["rows"]:
        tf = f"{r['tflops']:.1f}" if r.get("tflops") is not None else "-"
        tr = f"{r['train_images_per_s']:.0f}" if r.get("train_images_per_s") else "-"
        print(f"{r['path']:<9} {r['precision']:<5} {r['members']:>3} {r['s_per_epoch']:>8.3f} "
              f"{r['images_per_s']:>9.0f} {tr:>9} {tf:>8} {r['epochs_measured']:>6} {r['complete']!s:<8} "
              f"{r.get('valid')}")
    for key, v in data.get("validation", {}).items():
        print("validation", key, {k: v[k] for k in v if k.startswith(("passed", "max_rel", "why"))})
    for s in data["skipped"] + data["errors"]:
        print("not measured:", s)


if __name__ == "__main__":
    main(t0=T0)
