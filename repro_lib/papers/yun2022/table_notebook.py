"""The setup every Yun et al. 2022 table notebook shares, as a few calls (``yun2022_table1`` … ``yun2022_table9``).

::

    tables = YunTables("yun2022_tables3_4", ["yun2022_table3", "yun2022_table4"], profile=profile, seed=seed,
                       results_dir=results_dir, device=device, dataset=dataset, num_epochs=num_epochs,
                       precision=precision, cuda_graphs=cuda_graphs)
    plans, out_dir = tables.plans, tables.out_dir   # {table name: plan}, <results_dir>/<profile>/<notebook>/
    tables.summary()                                # runs, model, data, sizes and GPU-hour estimates per table
    results = tables.run(data_root=data_root, download=download, collect=collect)   # {table name: results}

:func:`plans` is the grid a notebook trains for its parameters (``python -m repro_lib sweep`` builds the same
one, so the store keys agree).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ... import data, profiles
from ...results.findings import claim_rows, dataset_label, num, say_findings, seed_range, verdict_line, yellow_text
from ...results.findings import findings as column_findings
from ...results import publish
from ...runs import sweep
from ...store import Store
from .. import transcribed
from .grids import get, plans


def grid(plan: pd.DataFrame) -> pd.DataFrame:
    """The distinct cells of a plan, one row each: the paper's (N, B, η, λ) beside ours and the tuning factor
    N·η·λ/(B(1−μ)) both share (a shrunk profile divides N and B and multiplies η or λ so that it is kept), the
    yellow flag and the number of seeds."""
    paper_cols = ["subtable", "paper_n", "paper_batch_size", "paper_lr", "paper_weight_decay"]
    ours = ["n", "batch_size", "lr", "weight_decay", "tuning_factor", "yellow"]
    keys = [c for c in paper_cols + ours if c in plan]
    out = plan.groupby(keys, sort=False, dropna=False).size().rename("seeds").reset_index()
    return out.rename(columns={"paper_n": "paper N", "paper_batch_size": "paper B", "paper_lr": "paper η",
                               "paper_weight_decay": "paper λ", "n": "N", "batch_size": "B", "lr": "η",
                               "weight_decay": "λ", "tuning_factor": "TF"})


#: the grid is printed cell by cell up to this many cells; a larger one (the paper profile: Table 1 has 315) is
#: summarised by its count and the cells whose runs are in the store
SHOW_CELLS = 30
#: the columns of the findings table shown in the notebook (every column goes to ``<name>_findings.csv``)
FINDINGS_SHOWN = 8


def findings_view(found: pd.DataFrame, col: str) -> pd.DataFrame:
    """The findings of a table as a reader scans them: one row per paper column and at most :data:`FINDINGS_SHOWN`
    columns (sub-table and column together, seeds as "lo–hi", the yellow cell's mean ± sd, the margin to the best
    other cell, the seed spread, the peak tuning factor with its 95 % interval, runs missing), numbers as text
    rounded for reading, and no column that is empty (or zero) throughout."""
    rows = []
    for _, r in found.iterrows():
        sub = f"({r['subtable']}) " if isinstance(r.get("subtable"), str) and r["subtable"] else ""
        peak = num(r["peak_tf"], ".3g", missing="")
        if peak and pd.notna(r["peak_lo"]):
            peak += f" [{r['peak_lo']:.3g}, {r['peak_hi']:.3g}]"
        seeds = seed_range(int(r["seeds"]), int(r.get("seeds_max", r["seeds"])))
        rows.append({col: f"{sub}{r[col]:g}", "seeds": seeds, "verdict": r["verdict"], "yellow": yellow_text(r),
                     "margin": num(r["margin"], "+.2f", missing=""), "seed spread": num(r["spread"], ".2f", missing=""),
                     "peak TF [95 %]": peak,
                     "runs missing": str(int(r.get("missing", 0) or 0))})
    view = pd.DataFrame(rows)
    empty = [c for c in view.columns if c not in (col, "seeds", "verdict") and view[c].isin(["", "0"]).all()]
    return view.drop(columns=empty).iloc[:, :FINDINGS_SHOWN]


class YunTables:
    """One Yun et al. notebook's tables: their plans, the output folder ``<results_dir>/<profile>/<notebook>/``
    (created), a printed summary, and the sweep. A bad parameter is a ``ValueError`` naming it, raised here."""

    def __init__(self, notebook: str, names, profile: str, seed: int = 0, results_dir="results",
                 device: str = "auto", dataset: str = "", num_epochs: int = 0, precision: str = "",
                 cuda_graphs: bool = False):
        self.notebook, self.names, self.profile, self.results_dir = notebook, list(names), profile, results_dir
        self.plans = plans(self.names, profile, seed=seed, device=device, dataset=dataset, num_epochs=num_epochs,
                           precision=precision, cuda_graphs=cuda_graphs)
        self.out_dir = Path(results_dir) / profile / notebook
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._found: dict[str, pd.DataFrame] = {}
        self._claims: dict[str, list[dict]] = {}  # table name -> its claim rows

    def summary(self) -> None:
        """Print per table what the chosen profile trains, computed from its plan (so the text cannot drift from
        the grid): runs, model, data (SYNTHETIC when it is), width, epochs and LR schedule, seeds, test images,
        image-epochs, the grid (:func:`grid`: each paper cell beside our N, B, η, λ and its tuning factor), and
        the GPU-hour estimates of this profile and of the gpu and paper profiles."""
        for name, plan in self.plans.items():
            cfg0 = plan.cfg.iloc[0]
            print(f"{name}: {len(plan)} runs, {cfg0.model} (scale_invariant={cfg0.scale_invariant}), "
                  f"dataset={cfg0.dataset}{' (SYNTHETIC)' if cfg0.synthetic else ''}, width={cfg0.width}, "
                  f"epochs={cfg0.num_epochs}, N={sorted(int(v) for v in plan.n.unique())}, "
                  f"B={sorted(int(v) for v in plan.batch_size.unique())}")
            cells = grid(plan)
            schedule = cfg0.schedule + (f" {dict(cfg0.schedule_kwargs)}" if cfg0.schedule_kwargs else
                                        " (÷10 at 1/2 and 3/4 of the epochs)" if cfg0.schedule == "step" else "")
            print(f"  seeds {sorted(int(v) for v in plan.seed.unique())} ({len(cells)} cells), LR schedule "
                  f"{schedule}, test images: {'the full test set' if not cfg0.n_test else f'{cfg0.n_test} class-balanced'}, "
                  f"{sum(c.n * c.num_epochs for c in plan.cfg) / 1e6:.2f}M image-epochs")
            if len(cells) <= SHOW_CELLS:
                print("  " + cells.to_string(index=False).replace("\n", "\n  "))
            else:  # the paper's whole grid: its size, and the cells with runs already in the store
                store = Store(self.results_dir)
                held = plan.cfg.map(lambda c: store.get(c) is not None).astype(bool)
                print(f"  {len(cells)} cells, {len(plan)} runs; {int(held.sum())} of the runs in the store"
                      + (", in these cells:" if held.any() else ""))
                if held.any():
                    print("  " + grid(plan[held]).to_string(index=False).replace("\n", "\n  "))
            gpu_h = {p: profiles.estimate_gpu_hours(get(name).plan(p)) for p in ("gpu", "paper")}
            print(f"  estimated GPU-hours (measured H200 rates, benchmarks/README.md): this profile "
                  f"{profiles.estimate_gpu_hours(plan):.1f}, gpu {gpu_h['gpu']:.1f}, paper {gpu_h['paper']:.1f}")

    def run(self, data_root: str = "", download: bool = False, collect: bool = False,
            runs_csv: str = "{name}_runs.csv") -> dict[str, pd.DataFrame]:
        """Check the data (``repro_lib.data.require_for``: one message if it is missing), then train every table's
        plan through ``sweep.run_sweep`` into the store under ``results_dir`` (finished runs are read back; gpu/paper:
        cells sharing N and B train together as one stacked model, the profile's ``max_members``), print each
        table's status counts and train time, write ``runs_csv`` (per table) into the output folder. ``collect``:
        train nothing, read a cluster sweep's runs (absent ones: status "missing"). Returns ``{name: results}``."""
        if not collect:
            data.require_for([c for plan in self.plans.values() for c in plan.cfg], data_root or None, download)
        results = {}
        for name, plan in self.plans.items():
            r = sweep.run_sweep(plan, Store(self.results_dir), data_root=data_root or None, download=download,
                                progress=self.profile != "smoke",
                                max_members=get(name).profiles[self.profile].max_members,
                                collect=collect)
            print(name, r.status.value_counts().to_dict(), f"train time {r.seconds.sum():.0f} s")
            r.drop(columns=["cfg", "history"]).to_csv(self.out_dir / runs_csv.format(name=name), index=False)
            results[name] = r
        return results

    # ------------------------------------------------------------------------------------------- findings
    def findings(self, results: pd.DataFrame, name: str, col: str, claim: str, item: str) -> pd.DataFrame:
        """What the runs say about ``claim`` for table ``name`` (``results.findings.findings``: per column the
        verdict, the yellow cell's margin to the best other cell against the seed spread, the peak tuning factor of
        a quadratic fit with its bootstrap interval), shown in words and as a table (:func:`findings_view`; every
        column in ``<out_dir>/<name>_findings.csv``); also recorded as the notebook's claims
        (``<out_dir>/claims.json``, read by ``python -m repro_lib summary``). Returns the table shown."""
        from IPython.display import Markdown, display

        found = column_findings(results, col=col, yellow_tf=transcribed.yellow_factor(name))
        self._found[name] = found
        data = dataset_label(results)
        self._claims[name] = claim_rows(found, paper="Yun et al. 2022", item=item, claim=claim, data=data,
                                        col=col, results=results)
        publish.record_claims(self.out_dir, [row for rows in self._claims.values() for row in rows])
        display(Markdown(f"**{item}** ({data}):\n\n" + say_findings(found, col=col)))
        found.to_csv(self.out_dir / f"{name}_findings.csv", index=False)  # every column, for further analysis
        return findings_view(found, col)

    def verdict(self) -> str:
        """The notebook's one-line verdict over every table shown with :meth:`findings` (the cell tagged
        ``verdict``, read by the runner's end table)."""
        return "; ".join(f"{name.replace('yun2022_', '')}: {verdict_line(f)}" for name, f in self._found.items())

    @property
    def data_label(self) -> str:
        """What the notebook's runs train on, for figure titles (``findings.dataset_label``: a stand-in says so)."""
        return dataset_label([c for plan in self.plans.values() for c in plan.cfg])
