"""What each notebook with a registered grid costs: the README's cost table, made from the plans and the published
records (``python -m repro_lib summary reports --readme README.md`` fills it between ``<!-- costs:begin -->`` and
``<!-- costs:end -->``; ``tests/test_reports.py`` fails when it is out of date).

Per notebook (``papers.registry``, its ``cpu`` plan built with the parameters its published notebook ran with):

* runs and image-epochs of the ``cpu`` grid (N × epochs summed over distinct runs);
* the estimated ``cpu`` minutes of the cost model (``profiles.estimate_cpu_minutes``; good to a factor of 2);
* the minutes its published records trained (the sum of their ``train_seconds``, a stacked run's share of its
  stack; evaluation excluded), with the thread count the records name and how many of the plan's runs they are;
* the estimated GPU-hours of the ``gpu`` and ``paper`` profiles on one H200 (``profiles.estimate_gpu_hours``, from
  the measured ResNet-18 rates: Yun et al. grids only; other networks' rates are not measured).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .. import profiles
from ..papers import registry
from ..results.executed import notebook_parameters
from ..results.tables import markdown_lines

BEGIN, END = "<!-- costs:begin -->", "<!-- costs:end -->"
COLUMNS = ("notebook", "reproduces", "`cpu` runs", "image-epochs", "estimated min", "trained min (records)",
           "`gpu` / `paper` GPU-hours (one H200, estimated)")


def _published(root: Path, name: str) -> Path | None:
    nb = root / "cpu" / f"{name}.ipynb"
    return nb if nb.exists() else None


def _records(root: Path, hashes) -> list[dict]:
    out = []
    for h in hashes:
        p = root / "runs" / f"{h}.json"
        if p.exists():
            out.append(json.loads(p.read_text()))
    return out


def cost_rows(reports: str | os.PathLike = "reports") -> list[dict]:
    """One dict per registered notebook (registry order): ``notebook``, ``reproduces``, ``runs``,
    ``image_epochs``, ``estimated_min``, ``trained_min`` (None when the notebook is not published), ``recorded`` (how
    many of the plan's runs have a record), ``threads`` (the sorted thread counts the records name),
    ``gpu_hours`` / ``paper_hours`` (None where the cost model has no rate for the network)."""
    root = Path(reports)
    rows = []
    for name, nb in registry.NOTEBOOKS.items():
        if nb.plans is None:
            continue
        published = _published(root, name)
        params = {}
        if published is not None:
            params = {k: v for k, v in notebook_parameters(published).items()
                      if k not in ("profile", "results_dir", "collect")}
        plans = registry.plans(name, "cpu", params)
        cfgs = {c.hash: c for plan in plans for c in plan["cfg"]}
        records = _records(root, cfgs) if published is not None else []
        seconds = [float(r.get("result", {}).get("train_seconds") or 0.0) for r in records]
        yun = name.startswith("yun2022")
        hours = {p: (sum(profiles.estimate_gpu_hours(plan) for plan in registry.plans(name, p, {})) if yun else None)
                 for p in ("gpu", "paper")}
        rows.append(dict(notebook=name, reproduces=f"{nb.paper}: {nb.reproduces}", runs=len(cfgs),
                         image_epochs=sum(c.n * c.num_epochs for c in cfgs.values()),
                         estimated_min=profiles.estimate_cpu_minutes(plans),
                         trained_min=sum(seconds) / 60 if published is not None else None, recorded=len(records),
                         threads=sorted({int(r["env"]["num_threads"]) for r in records if "env" in r}),
                         gpu_hours=hours["gpu"], paper_hours=hours["paper"]))
    return rows


def _millions(x: int) -> str:
    return f"{x / 1e6:.2f}M"


def _hours(x: float | None) -> str:
    return "not estimated" if x is None else f"{x:.2g}" if x < 10 else f"{x:.0f}"


def cost_table(reports: str | os.PathLike = "reports") -> str:
    """The cost table in Markdown (:data:`COLUMNS`), one row per :func:`cost_rows` entry."""
    rows = []
    for r in cost_rows(reports):
        trained = "not published" if r["trained_min"] is None else f"{r['trained_min']:.0f}"
        threads = "/".join(map(str, r["threads"]))
        notes = ([f"{threads} thread{'' if threads == '1' else 's'}"] if r["threads"] else []) + (
            [f"{r['recorded']} of {r['runs']} runs"] if r["trained_min"] is not None and r["recorded"] < r["runs"]
            else [])
        trained += f" ({', '.join(notes)})" if notes else ""
        hours = ("not estimated" if r["gpu_hours"] is None
                 else f"{_hours(r['gpu_hours'])} / {_hours(r['paper_hours'])}")
        rows.append([f"`{r['notebook']}`", r["reproduces"], str(r["runs"]), _millions(r["image_epochs"]),
                     f"~{r['estimated_min']:.0f}", trained, hours])
    head = (*COLUMNS[:-1], f"`gpu` / `paper` GPU-hours ({profiles.gpu_hours_label()})")
    return "\n".join(markdown_lines(head, rows))


def cost_block(reports: str | os.PathLike = "reports") -> str:
    """What the README holds between its cost markers."""
    return (f"{BEGIN}\n<!-- generated by `python -m repro_lib summary reports/ --readme README.md`; do not edit by "
            f"hand -->\n{cost_table(reports)}\n{END}")
