"""Which notebook reproduces what: notebook name → its paper, the tables and figures it reproduces, and (for the
notebooks that train a grid) its plans, the runs it asks for at a profile and its parameters.

This is the one place where the rest of the package meets paper code. ``repro_lib.runs`` (cluster sweeps, the
budgeted GPU window) and ``repro_lib.results`` (the stale-run check of the published notebooks) read it; they
import nothing else from ``repro_lib.papers``. So that they can, this module and the plan functions it calls
import only the engine (``repro_lib.config``, ``profiles``, …) and other paper modules that do the same
(``tests/test_layers.py`` checks it).

A notebook's plans are the same calls with the same arguments the notebook itself makes (``grids.plans`` for the
Yun et al. tables, ``exp_lr.preresnet_plan``, ``backmatching.table1_plan``, ``adamp.cifar.plan``), so the configs,
and hence the store keys, of a cluster sweep, a GPU window and a stale-run check are exactly those the notebook
reads back.
Notebooks that build their runs inline or train nothing worth a cluster have no plans (``plans`` is None).

To add a paper: a folder ``repro_lib/papers/<paper>/`` with its code, its transcribed tables under
``<paper>/tables/`` (``transcribed.table``), one entry per notebook below.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from ..profiles import CPU_CAP_MINUTES
from .adamp import cifar as adamp_cifar
from .backmatching import backmatching
from .li_arora import exp_lr
from .yun2022 import grids, tuning_rule

YUN = "Yun et al. 2022"
ADAMP = "Heo et al. 2021"
LI_ARORA = "Li & Arora 2020"
BACKMATCHING = "Zhang et al. (back-matching)"


def _overrides(**values) -> dict:
    """The override parameters a notebook passes on: those that are set (``""``, 0 and False mean "the profile's
    default", so unset parameters change no config and no hash)."""
    return {k: v for k, v in values.items() if v}


def _yun(*names: str) -> Callable:
    """The plans of a Yun et al. 2022 notebook: ``grids.plans(names, ...)`` as the notebook calls it (seeds offset
    by ``seed``; ``dataset``, ``num_epochs``, ``precision``, ``cuda_graphs`` overrides when set, so their defaults
    leave every config and hash unchanged)."""

    def plans(profile: str, seed: int = 0, dataset: str = "", num_epochs: int = 0, device: str = "auto",
              precision: str = "", cuda_graphs: bool = False, **_) -> list[pd.DataFrame]:
        return list(grids.plans(names, profile, seed=seed, device=device, dataset=dataset, num_epochs=num_epochs,
                                precision=precision, cuda_graphs=cuda_graphs).values())

    def max_members(profile: str) -> int:
        return max(grids.get(n).profiles[profile].max_members for n in names)

    plans.max_members = max_members
    return plans


def _preresnet(profile: str, seed: int = 0, dataset: str = "", num_epochs: int = 0, device: str = "auto",
               precision: str = "", cuda_graphs: bool = False, **_) -> list[pd.DataFrame]:
    overrides = _overrides(dataset=dataset, num_epochs=num_epochs, precision=precision, cuda_graphs=cuda_graphs)
    return [exp_lr.preresnet_plan(profile, seed=seed, device=device, **overrides)]


def _backmatching(profile: str, seed: int = 0, dataset: str = "", num_epochs: int = 0, device: str = "auto",
                  precision: str = "", cuda_graphs: bool = False, **_) -> list[pd.DataFrame]:
    overrides = _overrides(dataset=dataset, num_epochs=num_epochs, device=device, precision=precision,
                           cuda_graphs=cuda_graphs)
    plans = [backmatching.table1_plan(profile, seed_offset=seed, **overrides),
             backmatching.table1_plan(profile, seed_offset=seed, long=True, **overrides)]
    return [p for p in plans if len(p)]  # gpu and paper train no longer comparison


def _adamp_cifar(profile: str, seed: int = 0, dataset: str = "", device: str = "auto", precision: str = "",
                 cuda_graphs: bool = False, **_) -> list[pd.DataFrame]:
    overrides = _overrides(precision=precision, cuda_graphs=cuda_graphs)
    return [adamp_cifar.plan(profile, seed=seed, dataset=dataset or "cifar10", device=device, **overrides)]


#: the cpu cap of the notebooks that need more than ``profiles.CPU_CAP_MINUTES`` to decide their claims (each says
#: why in its text): two tables in one notebook, Sec. 3's 54 runs of six (N, B) combinations, AdamP's 24 unstacked
#: runs, back-matching's 104-epoch VGG11 runs that separate the method from the schedule
LONG_CAP = 2 * CPU_CAP_MINUTES
#: the cap of a notebook whose claims need many seeds for their intervals to resolve the paper's effects (Li & Arora:
#: 7 to 19 seeds of seven schedules, for resolutions of about 2 points: 99 runs of ~2-3 minutes)
SEEDS_CAP = 240.0


def _tuning_rule(profile: str, seed: int = 0, dataset: str = "", device: str = "auto", precision: str = "",
                 cuda_graphs: bool = False, **_) -> list[pd.DataFrame]:
    overrides = _overrides(precision=precision, cuda_graphs=cuda_graphs)
    return [tuning_rule.plan(profile, seed=seed, dataset=dataset or "cifar10", device=device, **overrides)]


@dataclass(frozen=True)
class Notebook:
    """One notebook of ``notebooks/``: the paper and what of it the notebook reproduces; ``plans(profile,
    **parameters)`` → list of plan DataFrames (a ``cfg`` column each), with ``plans.max_members(profile)``, or
    None for a notebook without a registered grid."""

    name: str
    paper: str
    reproduces: str
    plans: Callable[..., list[pd.DataFrame]] | None = None
    #: the minutes its ``cpu`` grid may train on 2 threads (the cost model's estimate,
    #: ``profiles.estimate_cpu_minutes``); above ``profiles.CPU_CAP_MINUTES`` only where the notebook says why
    cpu_cap: float = CPU_CAP_MINUTES
    #: the shrink rules its ``cpu`` plan keeps: None for a paper's protocol shrunk (``profiles.shrink_breaks``
    #: against its ``paper`` plan), else a function plan -> the rules it breaks, for a notebook whose protocol is
    #: its own (the tuning-rule tutorial changes B at a fixed η on purpose)
    rules: Callable[[pd.DataFrame], list[str]] | None = None

    def max_members(self, profile: str) -> int:
        """The ``max_members`` the notebook passes to ``run_sweep`` (its experiment's, else 1)."""
        return self.plans.max_members(profile) if hasattr(self.plans, "max_members") else 1


NOTEBOOKS: dict[str, Notebook] = {nb.name: nb for nb in (
    # 54 runs of six (N, B) combinations: three values x 3 seeds each
    Notebook("yun2022_section3", YUN, "Sec. 3, Figs 1-2", _yun("yun2022_section3"),
             cpu_cap=LONG_CAP),
    Notebook("yun2022_table1", YUN, "Table 1, Fig. 3", _yun("yun2022_table1")),
    Notebook("yun2022_table2", YUN, "Table 2", _yun("yun2022_table2")),
    # two tables, each with two B columns
    Notebook("yun2022_tables3_4", YUN, "Tables 3-4, Fig. 4", _yun("yun2022_table3", "yun2022_table4"),
             cpu_cap=LONG_CAP),
    Notebook("yun2022_table5", YUN, "Table 5, Fig. 5", _yun("yun2022_table5")),
    Notebook("yun2022_table6", YUN, "Table 6, Fig. 6", _yun("yun2022_table6")),
    Notebook("yun2022_tables7_11", YUN, "Tables 7 and 11, Figs 7 and 9", _yun("yun2022_table7", "yun2022_table11"),
             cpu_cap=LONG_CAP),  # two tables, Table 11 with two B columns
    Notebook("yun2022_tables8_10", YUN, "Tables 8 and 10", _yun("yun2022_table8", "yun2022_table10")),
    Notebook("yun2022_table9", YUN, "Table 9", _yun("yun2022_table9")),
    Notebook("yun2022_section6", YUN, "Sec. 6, Fig. 8"),
    # trains nothing: reads the grid notebooks' runs and pools their columns
    Notebook("yun2022_summary", YUN, "Tables 1-11 and Sec. 3.2 pooled over every grid column"),
    Notebook("tuning_rule", YUN, "the tuning rule (Eq. 27) on a network the papers did not use",
             _tuning_rule, rules=tuning_rule.breaks),
    Notebook("adamp_toys", ADAMP, "Figs 1, 3 and H.1, Lemmas 2.1-2.2, Cor. 2.3"),
    # four optimizers x two weight decays x 3 seeds, none of them stacked (fit_many trains plain SGD only)
    Notebook("adamp_cifar", ADAMP, "norm growth and accuracy on CIFAR-10 (Sec. 3-4)", _adamp_cifar,
             cpu_cap=LONG_CAP),
    Notebook("adamp_delta", ADAMP, "Appendix C, Table B.1"),
    Notebook("adamp_imagenet", ADAMP, "Tables 1-2"),
    Notebook("li_arora_equivalence", LI_ARORA, "Sec. 2, Thm 1.1 / 2.9"),
    Notebook("li_arora_bn_wd_toy", LI_ARORA, "Sec. 3, Thm 3.1"),
    # 7 to 19 seeds of seven schedules: the seed-paired intervals of the contrasts resolve about 2 points
    Notebook("li_arora_preresnet32", LI_ARORA, "Sec. 4, Figs 1-5", _preresnet, cpu_cap=SEEDS_CAP),
    # the 26-epoch table and the 104-epoch VGG11 runs, 3 seeds each
    Notebook("backmatching_vgg", BACKMATCHING, "supplement, Table 1", _backmatching, cpu_cap=LONG_CAP),
)}


def get(name: str) -> Notebook:
    """The registered notebook ``name`` (a notebook stem); ``ValueError`` listing the known ones."""
    if name not in NOTEBOOKS:
        raise ValueError(f"notebook: {name!r} is not registered in repro_lib.papers.registry; known: "
                         f"{', '.join(sorted(NOTEBOOKS))}")
    return NOTEBOOKS[name]


def with_plans() -> list[str]:
    """The notebooks whose grid is registered (cluster sweeps, stale-run checks), sorted."""
    return sorted(n for n, nb in NOTEBOOKS.items() if nb.plans is not None)


def plans(name: str, profile: str, params: dict | None = None) -> list[pd.DataFrame]:
    """The plans notebook ``name`` builds for ``profile`` and its ``params`` (``profile`` in ``params`` is
    ignored); a ``ValueError`` for a notebook without a registered grid."""
    nb = get(name)
    if nb.plans is None:
        raise ValueError(f"notebook: {name} has no registered grid for cluster sweeps; supported: "
                         f"{', '.join(with_plans())} (the others build their runs inline or train nothing worth a "
                         "cluster: run them with `python -m repro_lib run`)")
    return nb.plans(profile, **{k: v for k, v in (params or {}).items() if k != "profile"})


def window_queue(seeds=grids.PAPER_QUEUE_SEEDS, dataset: str = grids.PAPER_QUEUE_DATASET,
                 tiny: bool = False) -> list[tuple[str, str, pd.DataFrame]]:
    """What the budgeted GPU window (``repro_lib.runs.window``) trains, in order: ``[(label, table name, plan),
    ...]``, the Yun et al. 2022 Tables 1-2 at the ``paper`` profile (``grids.paper_queue``: its items, the seeds
    and data set, ``tiny``'s rows). Each plan is an ``Experiment.plan`` DataFrame (a ``cfg`` column, ``subtable``,
    ``row``, ``seed``; ``attrs["max_members"]``), not yet de-duplicated across items."""
    return grids.paper_queue(seeds, dataset=dataset, tiny=tiny)
