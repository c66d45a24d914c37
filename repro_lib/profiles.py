"""The four profiles as data: how each one shrinks an experiment.

* ``smoke``: synthetic data, tiny widths, seconds; what the tests and CI execute.
* ``cpu``: real images, reduced models and grids, minutes on a 2-core laptop; the tutorial.
* ``gpu``: paper models, shortened schedules, 1 seed; hours on one GPU.
* ``paper``: exactly the paper's protocol.

A profile never changes the code path, only sizes. ``resolve(profile, sizes)`` picks one profile's sizes from a
dict declared by a notebook; a paper's grid declares its own (``repro_lib.papers.yun2022.grids.Experiment``).

What a plan costs on a GPU before it is run: ``estimate_gpu_hours(plan)`` from the rates below
(``seconds_per_image``): measured at the paper protocol once ``benchmarks/bench_paper_rate.py`` has written its
results, estimated from throughput benchmarks until then (``gpu_rate_basis``).
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from .config import PROFILES

def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise ValueError(f"profile: must be one of {PROFILES}, got {profile!r}")
    return profile


def resolve(profile: str, sizes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Return ``sizes[profile]`` after checking that the profile is known and that every profile declares
    the same keys (a profile only changes sizes, never which quantities exist)."""
    check_profile(profile)
    missing = [p for p in PROFILES if p not in sizes]
    if missing:
        raise ValueError(f"profile: sizes for {missing} are not declared")
    keys = set(sizes["paper"])
    for p in PROFILES:
        if set(sizes[p]) != keys:
            raise ValueError(f"profile: {p!r} declares keys {sorted(sizes[p])}, paper declares {sorted(keys)}")
    return dict(sizes[profile])


# ------------------------------------------------------------------------------------------- GPU cost
# Estimated training cost (benchmarks/bench_gpu.py --only graphs on one NVIDIA H200, torch 2.11, fp32 with
# cuda_graphs, channels_last and cudnn.benchmark -- the gpu/paper defaults; benchmarks/results_h200_graphs.json),
# seconds per training image of the scale-invariant ResNet-18 (width 64, 32x32), evaluation excluded:
#   fit, B = 128: 2.23 s per 50k-image epoch; fit, B = 1024: 1.75 s; fit_many with 16 members, B = 128: 27.0k img/s.
# Throughput benchmarks, not the paper protocol: they are the *estimated* rates, used until a paper-protocol rate is
# measured (below). The estimate interpolates geometrically in B between 128 and 1024 (B < 128 scales as
# sqrt(128/B), unmeasured); other widths scale with width^2, 64x64 images x4; DenseNet-100 (not stackable) is costed
# as ResNet-18 x 2 (unmeasured on GPU; ~6x on CPU at width 8 where its narrow layers dominate less).
SECONDS_PER_IMAGE_FIT = {128: 2.234 / 50000, 1024: 1.749 / 50000}
SECONDS_PER_IMAGE_STACKED = 1 / 26955  # B = 128, 16 members

# Measured rates at the paper protocol: ``benchmarks/bench_paper_rate.py`` writes results_paper_rate_<gpu>.json
# (Yun et al. Table 1 (a), N = 3,125, B = 128, width 64, every path of the package for groups of K runs). Where such
# a file exists (RATES_DIR; the first of RATE_GPUS, else any other GPU's), the GPU cost takes its rates instead of the
# estimate: the path of the fastest complete, validated fp32 row of the largest group (the path the GPU window trains
# with), and that path's training rate (``train_images_per_s``: the histories' seconds, evaluation excluded) for
# groups of every measured size, scaled to other batch sizes, widths and image sizes as the estimate is.
RATES_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
RATE_FILE = "results_paper_rate_{gpu}.json"
RATE_GPUS = ("h200", "h100")
RATE_PATHS = ("paper", "onegraph", "streams")  # the package's in-process paths (``plain`` is not the package)


@dataclass(frozen=True)
class MeasuredRate:
    """One path's measured training cost at the paper protocol: ``seconds`` maps a group size K to seconds per
    training image of the group (1 / the K runs' images per second together), measured at ``batch_size`` and
    ``width`` on ``device`` (``file``: the benchmark's JSON)."""

    file: str
    device: str
    path: str
    precision: str
    batch_size: int
    width: int
    seconds: Mapping[int, float]

    def per_image(self, members: int = 1) -> float:
        """Seconds per training image in a group of ``members`` runs: the measured group size, geometric in K
        between two measured sizes, the nearest measured size outside them (no gain assumed past the largest)."""
        ks = sorted(self.seconds)
        if members <= ks[0]:
            return self.seconds[ks[0]]
        if members >= ks[-1]:
            return self.seconds[ks[-1]]
        hi = next(k for k in ks if k >= members)
        lo = max(k for k in ks if k <= members)
        if hi == lo:
            return self.seconds[lo]
        t = math.log(members / lo) / math.log(hi / lo)
        return self.seconds[lo] * (self.seconds[hi] / self.seconds[lo]) ** t


def _rate_file(source) -> Path | None:
    """The results file ``source`` names: a file, or a folder with results_paper_rate_<gpu>.json (the first of
    :data:`RATE_GPUS`, else any other GPU's; never ``cpu``). None when there is none."""
    p = Path(source) if source is not None else RATES_DIR
    if p.is_file():
        return p
    if not p.is_dir():
        return None
    for gpu in RATE_GPUS:
        if (p / RATE_FILE.format(gpu=gpu)).is_file():
            return p / RATE_FILE.format(gpu=gpu)
    others = sorted(q for q in p.glob(RATE_FILE.format(gpu="*")) if q.stem != RATE_FILE.format(gpu="cpu")[:-5])
    return others[0] if others else None


@functools.lru_cache(maxsize=16)
def _read_rates(path: str, mtime: float) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def _usable(row: dict, precision: str) -> bool:
    return (row.get("path") in RATE_PATHS and row.get("precision") == precision and bool(row.get("complete"))
            and row.get("valid") is True and bool(row.get("train_images_per_s"))
            and all(s == "finished" for s in row.get("statuses", ["finished"])))


def measured_rate(source=None, path: str | None = None, precision: str = "fp32") -> MeasuredRate | None:
    """The measured rate of ``path`` (None: the fastest usable row of the largest group measured) in ``precision``
    from the benchmark's results (``source``: a file or a folder; default :data:`RATES_DIR`), or None while no such
    row exists (then the cost is estimated). A usable row is complete, validated (``valid``), with every member
    finished and a training rate."""
    f = _rate_file(source)
    data = _read_rates(str(f), f.stat().st_mtime) if f is not None else None
    if not data or str(data.get("device", "cpu")).lower() == "cpu":
        return None
    rows = [r for r in data.get("rows", []) if _usable(r, precision)]
    if path is None and rows:  # the window's choice (bench_paper_rate.fastest): evaluation included
        top = max(r["members"] for r in rows)
        path = max((r for r in rows if r["members"] == top), key=lambda r: r["images_per_s"])["path"]
    rows = [r for r in rows if r["path"] == path]
    if not rows:
        return None
    seconds = {}
    for r in rows:  # the fastest of repeated rows of one size
        seconds[int(r["members"])] = min(seconds.get(int(r["members"]), math.inf), 1.0 / r["train_images_per_s"])
    proto = data.get("protocol", {})
    return MeasuredRate(file=str(f), device=str(data["device"]), path=path, precision=precision,
                        batch_size=int(proto.get("batch_size", 128)), width=int(proto.get("width", 64)),
                        seconds=seconds)


def gpu_rate_basis(source=None) -> str:
    """``"measured"`` when :func:`measured_rate` finds a paper-protocol rate (``source`` as there), else
    ``"estimated"`` (the throughput benchmarks of :data:`SECONDS_PER_IMAGE_FIT`)."""
    return "measured" if measured_rate(source) is not None else "estimated"


def gpu_hours_label(source=None) -> str:
    """What the GPU-hours figures rest on, for a table header: "one H200, estimated" until a rate is measured,
    then the device and path it was measured with (e.g. "one NVIDIA H100 80GB HBM3, measured, onegraph path")."""
    rate = measured_rate(source)
    if rate is None:
        return "one H200, estimated"
    return f"one {rate.device}, measured, {rate.path} path"


def estimated_seconds_per_image(batch_size: int, stacked: bool = False) -> float:
    """The estimated H200 training seconds per image at ``batch_size`` (the throughput benchmarks above;
    ``stacked``: a 16-member ``fit_many`` group)."""
    if stacked:
        return SECONDS_PER_IMAGE_STACKED * estimated_seconds_per_image(batch_size) / SECONDS_PER_IMAGE_FIT[128]
    lo, hi = SECONDS_PER_IMAGE_FIT[128], SECONDS_PER_IMAGE_FIT[1024]
    if batch_size <= 128:
        return lo * math.sqrt(128 / batch_size)
    if batch_size >= 1024:
        return hi
    return lo * (hi / lo) ** (math.log(batch_size / 128) / math.log(8))


def seconds_per_image(batch_size: int, stacked: bool = False, members: int | None = None, source=None) -> float:
    """GPU training seconds per image of the width-64 ResNet-18 (32x32) at ``batch_size``, evaluation excluded: the
    measured paper-protocol rate (:func:`measured_rate`; ``members``: the group size, default 1, or the largest
    measured with ``stacked``) scaled from its batch size as the estimate scales, else the estimated H200 rate
    (``stacked``: a 16-member ``fit_many`` group). :func:`gpu_rate_basis` says which."""
    return _seconds_per_image(batch_size, stacked, members, measured_rate(source))


def _seconds_per_image(batch_size: int, stacked: bool, members: int | None, rate: MeasuredRate | None) -> float:
    if rate is None:
        return estimated_seconds_per_image(batch_size, stacked)
    k = members if members is not None else (max(rate.seconds) if stacked else 1)
    return rate.per_image(k) * batch_scale(batch_size, rate.batch_size)


def batch_scale(batch_size: int, reference: int = 128) -> float:
    """How the cost per image at ``batch_size`` compares with that at ``reference`` (the estimate's B rule), for
    carrying a rate measured at one batch size to another."""
    return estimated_seconds_per_image(batch_size) / estimated_seconds_per_image(reference)


def estimate_gpu_hours(plan: pd.DataFrame, max_members: int | None = None, source=None) -> float:
    """GPU-hours of a plan on one GPU: Σ n · epochs · s/image(B) · (width/64)² · (image area / 32²), with the rate of
    a group of ``max_members`` runs when the plan's profile groups runs (``max_members`` > 1; default:
    ``plan.attrs["max_members"]`` set by ``Experiment.plan``). s/image is :func:`seconds_per_image`: measured at
    the paper protocol where the benchmark's results hold a rate (:func:`gpu_rate_basis` says "measured"; the
    device is the benchmark's), else estimated from H200 throughput benchmarks. Training only; evaluation adds
    ~10 % (auto interval)."""
    from .data import DATASETS

    members = plan.attrs.get("max_members", 1) if max_members is None else max_members
    rate = measured_rate(source)
    total = 0.0
    for cfg in plan["cfg"]:
        area = (DATASETS[cfg.dataset].image_size / 32) ** 2
        model = 2.0 if cfg.model.startswith("densenet") else 1.0
        stacked = members > 1 and not cfg.model.startswith("densenet")
        s = _seconds_per_image(cfg.batch_size, stacked, members if stacked else 1, rate)
        total += cfg.n * cfg.num_epochs * s * (cfg.width / 64) ** 2 * area * model
    return total / 3600


# ------------------------------------------------------------------------------------------- shrink rules
# A shrunk profile (``cpu``) must keep the dynamics the papers' claims depend on, not only the tuning factor:
#
# 1. steps per epoch: at least MIN_STEPS_PER_EPOCH, or the paper's own count for that cell where it has fewer
#    (drop_last=False: ceil(N / B), less a lone last image: ``data.train_steps``). At 4-8 steps per epoch an
#    epoch is shorter than momentum's and the equilibrium's time scale, and plain SGD turns the weights further
#    per epoch than SGDM at the same tuning factor;
# 2. eta / B: the paper's, for a net with scale-variant parameters (``scale_invariant=False``: BN affine, trainable
#    FC), whose SGD noise and stability limit scale with eta / B rather than with the tuning factor; for the Adam
#    family (``ADAPTIVE``) eta itself: its per-coordinate step eta·m/sqrt(v) is set by eta whatever the batch (a
#    linear eta/B rule at a 4x smaller batch left AdamW and AdamP at 57-71 % train accuracy where SGD fits the set);
# 3. settling: the first LR decay comes after SETTLE_YELLOW relaxation times of the yellow cells and after one of
#    every cell, or as many as the paper's own cell has where it has fewer (a paper grid reaching TF/64 has cells
#    that never settle: they stand for the paper's "too little regularization" side). With coupled L2 the squared
#    weight norm shrinks by (1 - eta*lambda/(1-mu))^2 per step, a time constant of (1-mu)/(2*eta*lambda) steps =
#    1/(2*TF) epochs with TF = N*eta*lambda/(B(1-mu)) (Eq. 27): the weight decay's own time (near equilibrium the
#    gradient's growth term halves it: the linearized relaxation time is 1/(4*TF), ``tuning.relaxation_epochs``, so
#    3 of these units are 6 relaxation times), in epochs independent of how N and B are shrunk (other weight-decay conventions, SGDP's and the
#    Adam family's: ``relaxation_tuning_factor``);
# 4. cost: a notebook's cpu grid trains within CPU_CAP_MINUTES on 2 cores (``estimate_cpu_minutes``).
MIN_STEPS_PER_EPOCH = 16
#: optimizers whose step is normalized per coordinate (rule 2 keeps their eta, not eta / B)
ADAPTIVE = {"adam", "adamw", "adamp"}
SETTLE_YELLOW = 3.0
SETTLE_EVERY = 1.0
CPU_CAP_MINUTES = 45.0

# Measured cpu training cost, milliseconds per image-epoch on 2 threads at width 8 and B = 128: the medians of the
# published cpu records' ``train_seconds`` / (N x epochs) (``reports/runs``; a stacked run's seconds are its share
# of the stack), and the factor by batch size from the ResNet-18 records. Below B = 32 the factor carries each
# step's fixed cost: B = 4, 8 and 16 are the records' B = 32 factor times the ratio to B = 32 that one run of
# ``benchmarks/bench_fit.py`` measured (a 3-member stack, 2 threads, real images; benchmarks/README.md, "Small
# batches on CPU"): 1.90, 1.47 and 1.23, where a sqrt(32 / B) rule would give 2.83, 2.00 and 1.41. Unstacked runs
# (the optimizers ``fit_many`` does not implement) cost more per image than these stack-based rates. The same run
# measured up to 2x apart on different days of the same 2-core machine type, so an estimate is good to a factor
# of 2.
#: the models whose rate above comes from stacked records (3-member ``fit_many`` groups), and what a run of them
#: costs more when it trains alone (a plan with ``max_members`` 1, or an optimizer ``fit_many`` does not implement:
#: SGDP, the Adam family): 1.32 per member at B = 64 in one ``bench_fit.py`` run, 1.43 in the AdamP CIFAR records
#: (2 threads); the other models' rates come from unstacked records already
STACKED_RATES = {"resnet18"}
UNSTACKED_FACTOR = 1.35
#: VGG: the back-matching records (2 threads, B = 128) took 1.6x the first rates (0.30 / 0.47 for VGG11 / VGG16,
#: from a shorter benchmark), so all four VGG rates carry that factor (VGG13 and VGG19 are not measured themselves)
CPU_MS_PER_IMAGE_EPOCH = {"resnet18": 0.86, "preresnet32": 3.0, "densenet100": 5.2, "vgg11_bn": 0.49,
                          "vgg13_bn": 0.64, "vgg16_bn": 0.75, "vgg19_bn": 0.91,
                          # timm test_byobnet (width ignored): fit on the JPEG stand-in, 3 epochs each at B = 16, 32,
                          # 64, 128 on 1 thread, scaled to B = 128 by the factors below (an upper bound for 2 threads)
                          "test_byobnet": 1.6}
CPU_BATCH_FACTOR = {4: 3.25, 8: 2.52, 16: 2.11, 32: 1.71, 64: 1.26, 128: 1.0, 256: 1.25, 512: 1.51}
#: per-model corrections to ``CPU_BATCH_FACTOR`` where a model's records disagree with the shared shape: ResNet-18
#: width 8 at B = 128 took 1.47x (Sec. 3, combination 3) and 1.49x (Table 5's B = 128 column) the shared factor's
#: estimate on 2 threads, while its B = 16 ... 64 records agree within 0.7-1.3x; above 128 the shared ratios to 128
#: are kept (not measured for this model)
CPU_BATCH_FACTOR_BY_MODEL = {"resnet18": {128: 1.48, 256: 1.48 * 1.25, 512: 1.48 * 1.51}}
#: corrections for compiled runs (``compile=True``) where their records disagree with the (eager-based) factors
#: above: ResNet-18 width 8 in 3-member stacks on 2 threads took a median 1.12 ms per image-epoch at B = 32 (48
#: records of Table 1 and Sec. 3: 0.98-1.00 at N >= 1,000, 1.83 at N = 500), 0.76x the eager-based estimate; at
#: B = 16 (1.82 ms, Sec. 3), 64 (1.08, 90 records) and 128 (1.39, Sec. 3) they agree with it. One ``fit_many``
#: benchmark on 2 threads: compiled epochs 1.5x (B = 16), 1.36x (B = 32) and 1.05x (B = 128) shorter than eager ones
CPU_COMPILED_BATCH_FACTOR_BY_MODEL = {"resnet18": {32: 1.30}}


def steps_per_epoch(n: int, batch_size: int) -> int:
    """Optimizer steps per epoch: ``ceil(n / batch_size)`` (``drop_last=False``), less a last batch of one image
    (``data.train_steps``)."""
    from .data import train_steps

    return train_steps(n, batch_size)[0]


def relaxation_epochs(tuning_factor: float) -> float:
    """1 / (2·TF) epochs, the unit rule 3 counts in: the e-folding time of ‖w‖² under the weight decay alone (how
    fast a norm far above its equilibrium comes down). Near equilibrium the norm relaxes twice as fast, in
    1 / (4·TF) epochs (``repro_lib.tuning.relaxation_epochs`` derives it), so SETTLE_YELLOW = 3 of these units are 6
    relaxation times."""
    return math.inf if tuning_factor <= 0 else 1 / (2 * tuning_factor)


#: the projected optimizers (Heo et al.): decoupled decay scaled by ``wd_ratio`` on the tensors they project
_PROJECTED = {"sgdp", "adamp"}
#: the Adam family with decoupled decay: ``w <- w (1 - lr·wd·r)`` per step, no momentum in the shrink
_DECOUPLED_ADAM = {"adamw", "adamp"}


def relaxation_tuning_factor(cfg) -> float:
    """The TF of ``cfg``'s weight decay on its scale-invariant weights, so that 1/(2·TF) is their squared norm's
    relaxation time in epochs (rule 3), whatever the optimizer:

    * SGD with coupled L2 and PyTorch momentum (and the other SGD-momentum optimizers of this package):
      N·η·λ/(B(1−μ)), the tuning factor of Yun et al. Eq. 27;
    * SGDP: its decoupled shrink ``w(1 − η·λ·r/(1−μ))`` per step, r = ``wd_ratio`` (0.1 unless set) on the tensors
      it projects, the scale-invariant ones: N·η·λ·r/(B(1−μ));
    * AdamW / AdamP: ``w(1 − η·λ·r)`` per step (r = 1 for AdamW; AdamP's ``wd_ratio`` on projected tensors):
      N·η·λ·r/B.

    Adam with coupled L2 has none (its L2 gradient is divided by the second moment): a ``ValueError``."""
    if cfg.optimizer == "adam" and cfg.weight_decay > 0:
        raise ValueError("optimizer: Adam with coupled L2 has no relaxation time (its L2 gradient is rescaled)")
    r = _wd_ratio(cfg) if cfg.optimizer in _PROJECTED else 1.0
    keep = 1.0 if cfg.optimizer in _DECOUPLED_ADAM else 1 - cfg.momentum
    return cfg.n * cfg.lr * cfg.weight_decay * r / (cfg.batch_size * keep)  # cfg.tuning_factor's order: same bits


def _wd_ratio(cfg) -> float:
    """``cfg``'s ``wd_ratio`` (``optimizer_kwargs``), else the optimizer's own default."""
    import inspect

    from .optim import adamp, sgdp

    cls = {"sgdp": sgdp.SGDP, "adamp": adamp.AdamP}[cfg.optimizer]
    default = inspect.signature(cls.__init__).parameters["wd_ratio"].default
    return float(dict(cfg.optimizer_kwargs).get("wd_ratio", default))


def first_decay_epoch(cfg) -> float | None:
    """The epoch of the first LR decay: the first milestone of a step-shaped schedule (``step``, the TEXP family,
    ``exp_decay``), half the epochs for a cosine-shaped one (where the LR has halved); None for a schedule without
    one (constant, ``exp``)."""
    if cfg.schedule in ("constant", "exp"):
        return None
    if cfg.schedule in ("cosine", "cosine_epoch", "exp_cosine"):
        return cfg.num_epochs / 2
    milestones = dict(cfg.schedule_kwargs).get("milestones", (0.5, 0.75))
    return float(round(float(milestones[0]) * cfg.num_epochs))


def shrink_rules(plan: pd.DataFrame, paper_plan: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rules 1-3 for every row of ``plan`` beside the paper's cell it stands for: steps per epoch (``steps``,
    ``paper_steps``, ``min_steps``), eta / B (``eta_over_b``, ``paper_eta_over_b``, checked where the net is not
    scale-invariant), the first decay in relaxation times (``settle``, ``paper_settle``, ``min_settle``:
    SETTLE_YELLOW for yellow cells, SETTLE_EVERY otherwise, or the paper cell's own where lower; the paper's protocol
    comes from ``paper_plan``, without which only these thresholds apply) and ``breaks`` (a tuple of the rules a row
    breaks, in words; empty when none).

    The paper's cell comes from the plan's ``paper_n``, ``paper_batch_size``, ``paper_lr`` columns (a paper table's
    grid) or else from ``paper_plan``: the row of its first seed with the same values in the columns both plans
    share (labels such as ``model``, ``method``, ``schedule``); a row without one is a ``ValueError``."""
    from .angular import tuning_factor

    rows = plan
    if "paper_n" in plan and "paper_batch_size" in plan:
        decay = None if paper_plan is None else first_decay_epoch(paper_plan.cfg.iloc[0])  # one protocol per table
        paper = [(int(n), int(b), float(lr), tuning_factor(n, b, lr, wd, c.momentum), decay) for n, b, lr, wd, c in
                 zip(plan.paper_n, plan.paper_batch_size, plan.paper_lr, plan.paper_weight_decay, plan.cfg)]
    else:
        if paper_plan is None:
            raise ValueError("paper_plan: needed for a plan without paper_n / paper_batch_size / paper_lr columns")
        first = lambda p: p[p["seed"] == p["seed"].min()].reset_index(drop=True)  # noqa: E731
        rows, theirs = first(plan), first(paper_plan)
        sizes = ("seed", "cfg", "n", "batch_size", "lr", "weight_decay", "num_epochs", "width")  # sizes, not labels
        keys = [k for k in rows.columns if k in theirs.columns and k not in sizes
                and rows[k].map(lambda v: isinstance(v, (str, int, bool))).all()]
        index = {tuple(r[k] for k in keys): c for (_, r), c in zip(theirs.iterrows(), theirs.cfg)}
        missing = [tuple(r[k] for k in keys) for _, r in rows.iterrows() if tuple(r[k] for k in keys) not in index]
        if missing or not keys:
            raise ValueError(f"paper_plan: no paper cell for {missing[:3]} (matched on {keys})")
        paper = [(c.n, c.batch_size, c.lr, relaxation_tuning_factor(c), first_decay_epoch(c))
                 for c in (index[tuple(r[k] for k in keys)] for _, r in rows.iterrows())]
    yellow = rows["yellow"].astype(bool).tolist() if "yellow" in rows else [False] * len(rows)
    out = []
    for cfg, (pn, pb, plr, ptf, pdecay), y in zip(rows.cfg, paper, yellow):
        steps, paper_steps = steps_per_epoch(cfg.n, cfg.batch_size), steps_per_epoch(pn, pb)
        need = min(MIN_STEPS_PER_EPOCH, paper_steps)
        decay = first_decay_epoch(cfg)
        settle = math.inf if decay is None else decay / relaxation_epochs(relaxation_tuning_factor(cfg))
        paper_settle = math.inf if pdecay is None else pdecay / relaxation_epochs(ptf)
        need_settle = min(SETTLE_YELLOW if y else SETTLE_EVERY, paper_settle)
        breaks = []
        if steps < need:
            breaks.append(f"{steps} steps per epoch (at least {need})")
        if not cfg.scale_invariant and cfg.optimizer in ADAPTIVE:
            if not math.isclose(cfg.lr, plr, rel_tol=1e-6):
                breaks.append(f"η {cfg.lr:.3g} instead of the paper's {plr:.3g} (an Adam-family step is set by η)")
        elif not cfg.scale_invariant and not math.isclose(cfg.lr / cfg.batch_size, plr / pb, rel_tol=1e-6):
            breaks.append(f"η/B {cfg.lr / cfg.batch_size:.3g} instead of the paper's {plr / pb:.3g}")
        if settle < need_settle * (1 - 1e-9):
            breaks.append(f"first LR decay after {settle:.2g} relaxation times 1/(2 TF) (at least {need_settle:.2g})")
        out.append(dict(n=cfg.n, batch_size=cfg.batch_size, lr=cfg.lr, tuning_factor=cfg.tuning_factor, yellow=y,
                        steps=steps, paper_steps=paper_steps, min_steps=need,
                        eta_over_b=cfg.lr / cfg.batch_size, paper_eta_over_b=plr / pb,
                        first_decay=decay, settle=settle, paper_settle=paper_settle, min_settle=need_settle,
                        breaks=tuple(breaks)))
    return pd.DataFrame(out)


def distinct_breaks(rules: pd.DataFrame) -> list[str]:
    """The distinct rule breaks in a :func:`shrink_rules` table, each once, sorted; [] when every row keeps them."""
    return sorted({b for row in rules["breaks"] for b in row})


def shrink_breaks(plan: pd.DataFrame, paper_plan: pd.DataFrame | None = None) -> list[str]:
    """The distinct rule breaks of ``plan`` (:func:`shrink_rules`), each once; [] when the shrink keeps them all."""
    return distinct_breaks(shrink_rules(plan, paper_plan))


def estimate_cpu_minutes(plans) -> float:
    """Training minutes of ``plans`` (one plan DataFrame or a list) on 2 CPU threads from the measured rates
    (``CPU_MS_PER_IMAGE_EPOCH`` x ``CPU_BATCH_FACTOR`` x (width / 8)^2 x image area / 32^2, x ``UNSTACKED_FACTOR``
    for a run of a ``STACKED_RATES`` model that trains alone: its plan's ``attrs["max_members"]`` is 1 or absent, or
    its optimizer is not plain SGD), each distinct run (config hash) once, evaluation excluded.
    An estimate from the published records, not a timed run; an unknown model is a ``ValueError``."""
    from .data import DATASETS

    plans = [plans] if isinstance(plans, pd.DataFrame) else list(plans)
    total_ms = 0.0
    cfgs = {}
    for plan in plans:  # a run two tables share trains once
        members = int(plan.attrs.get("max_members", 1))
        for cfg in plan["cfg"]:
            cfgs.setdefault(cfg.hash, (cfg, members > 1 and cfg.optimizer == "sgd"))
    for cfg, stacked in cfgs.values():
        if cfg.model not in CPU_MS_PER_IMAGE_EPOCH:
            raise ValueError(f"model: no measured cpu rate for {cfg.model!r} ({sorted(CPU_MS_PER_IMAGE_EPOCH)})")
        area = (DATASETS[cfg.dataset].image_size / 32) ** 2 if cfg.dataset in DATASETS else 1.0
        alone = UNSTACKED_FACTOR if cfg.model in STACKED_RATES and not stacked else 1.0
        total_ms += (cfg.n * cfg.num_epochs * CPU_MS_PER_IMAGE_EPOCH[cfg.model]
                     * _batch_factor(cfg.batch_size, cfg.model, compiled=cfg.compile)
                     * ((cfg.width or 8) / 8) ** 2 * area * alone)
    return total_ms / 60000


def _batch_factor(b: int, model: str = "", compiled: bool = False) -> float:
    """``CPU_BATCH_FACTOR`` (with ``model``'s ``CPU_BATCH_FACTOR_BY_MODEL`` corrections, and for a ``compiled`` run
    its ``CPU_COMPILED_BATCH_FACTOR_BY_MODEL`` ones) at ``b``: geometric interpolation between the measured batch
    sizes, flat above the largest, sqrt(smallest / b) below the smallest (B < 4, unmeasured)."""
    table = {**CPU_BATCH_FACTOR, **CPU_BATCH_FACTOR_BY_MODEL.get(model, {}),
             **(CPU_COMPILED_BATCH_FACTOR_BY_MODEL.get(model, {}) if compiled else {})}
    sizes = sorted(table)
    if b <= sizes[0]:
        return table[sizes[0]] * math.sqrt(sizes[0] / b)
    if b >= sizes[-1]:
        return table[sizes[-1]]
    lo, hi = max(s for s in sizes if s <= b), min(s for s in sizes if s >= b)
    t = 0.0 if lo == hi else math.log(b / lo) / math.log(hi / lo)
    return table[lo] * (table[hi] / table[lo]) ** t
