"""The published notebooks against today's code, and the README blocks generated from them (the runs layer: it
reads the registry's plans, which ``repro_lib.results`` may not).

* :func:`stale_runs`: the runs a published notebook would ask for today that ``reports/runs/`` lacks;
* :func:`rerender`: every published notebook executed again from the store (``make report``; nothing trains);
* :func:`readme_blocks`, :func:`update_readme`, :func:`readme_current`, :func:`main`: the README's generated
  blocks -- the results table (``results.publish.readme_block``) and the cost table (``runs.costs``) -- and the
  full per-claim table ``reports/README.md`` (``results.publish.full_table``), written or checked
  (``python -m repro_lib summary``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..papers import registry
from ..results import publish
from ..results.executed import notebook_parameters, published_notebooks
from . import costs
from .notebook import find_notebooks, run_notebooks


def stale_runs(reports: str | os.PathLike = "reports") -> dict[str, list[str]]:
    """``{executed notebook: [run hashes]}`` of what makes a published notebook stale, for every published notebook
    with a registered grid (``papers.registry``), built with the parameters it was executed with:

    * a run the notebook would ask for today that it did not ask for when it was published (its ``*.csv`` files
      name the hashes of the runs it showed, ``sweep.run_sweep``'s ``hash`` column): a changed grid or a bumped
      ``config.RESULTS_VERSION``;
    * a run it showed as finished or diverged whose record is not in ``reports/runs/``;
    * a run whose record was trained with another value of a field that is not hashed but rounds differently
      (``ROUNDING_FIELDS``: ``compile``, ``channels_last``) than the notebook's plan asks for today: the same
      experiment, but ``make reproduce`` would not give the published numbers (at one seed the difference can
      reorder two neighbouring cells).

    A run the published notebook itself shows as "missing" (a grid still accumulating) is not stale. A notebook
    whose files name no hashes is held to every run of its grid. Empty lists everywhere: the published notebooks
    and their store agree with the current code."""
    import pandas as pd

    root = Path(reports)
    out = {}
    for nb in published_notebooks(root):
        if nb.stem not in registry.with_plans():
            continue
        params = {k: v for k, v in notebook_parameters(nb).items() if k not in ("results_dir", "collect")}
        profile = params.pop("profile", nb.parent.name)
        cfgs = [c for plan in registry.plans(nb.stem, profile, params) for c in plan["cfg"]]
        current = [c.hash for c in cfgs]
        shown = pd.concat([df for f in sorted((nb.parent / nb.stem).glob("*.csv"))
                           for df in [pd.read_csv(f)] if "hash" in df and "status" in df] or [pd.DataFrame()])
        have = lambda h: (root / "runs" / f"{h}.json").exists()  # noqa: E731
        if shown.empty:
            out[str(nb)] = [h for h in current if not have(h)]
            continue
        published = set(shown["hash"])
        done = set(shown.loc[shown["status"].isin(["finished", "diverged"]), "hash"])
        out[str(nb)] = ([h for h in current if h not in published] + sorted(h for h in done if not have(h))
                        + sorted({c.hash for c in cfgs if c.hash in done and have(c.hash)
                                  and _rounds_otherwise(root, c)}))
    return out


#: Config fields outside the run hash that still change the arithmetic's rounding (the same experiment, other
#: last bits): a published record must have been trained with the values its notebook's plan asks for today.
ROUNDING_FIELDS = ("compile", "channels_last")


def _rounds_otherwise(root: Path, cfg) -> bool:
    """Whether the record of ``cfg`` in ``root/runs`` was trained with other ``ROUNDING_FIELDS`` than ``cfg``."""
    stored = json.loads((root / "runs" / f"{cfg.hash}.json").read_text()).get("config", {})
    return any(f in stored and stored[f] != getattr(cfg, f) for f in ROUNDING_FIELDS)


def rerender(reports: str | os.PathLike = "reports", names=None, log=None) -> list:
    """Execute every published notebook again (``names``: only these stems) with the parameters it was published
    with and ``collect=True``: every table, figure and verdict is drawn anew from ``reports/runs/`` and nothing
    trains (a run the store lacks shows as "missing"). A notebook that computes from the images rather than from
    the store (``adamp_delta``) reads them from ``$REPRO_DATA_ROOT`` (published notebooks name no folder of the
    machine that ran them). Returns the runner's outcomes (``notebook.Outcome``); nothing is
    appended to the execution log (``notebook.RUN_LOG``)."""
    root = Path(reports)
    outcomes = []
    for nb in published_notebooks(root):
        if names and nb.stem not in names:
            continue
        params = {k: v for k, v in notebook_parameters(nb).items() if k not in ("profile", "results_dir")}
        params["collect"] = True
        (source,) = find_notebooks([nb.stem])
        outcomes += run_notebooks([source], nb.parent.name, [params], results_dir=root, log=log,
                                  run_log=False)  # a re-render is not a run: reports/ stays as published
    return outcomes


#: where the cost table lives, relative to the README's folder
PROFILES_DOC = Path("docs") / "profiles.md"


def readme_blocks(reports: str | os.PathLike = "reports") -> list[tuple[str, str, str]]:
    """The generated blocks: (begin marker, end marker, content) for the results table (the README) and the cost
    table (``docs/profiles.md``; a document holds the blocks whose markers it has)."""
    return [(publish.BEGIN, publish.END, publish.readme_block(reports)),
            (costs.BEGIN, costs.END, costs.cost_block(reports))]


def _documents(readme) -> list[Path]:
    """The README and, where it exists beside it, ``docs/profiles.md``."""
    path = Path(readme)
    doc = path.parent / PROFILES_DOC
    return [path, *([doc] if doc.exists() else [])]


def update_readme(readme: str | os.PathLike = "README.md", reports: str | os.PathLike = "reports") -> bool:
    """Replace the generated blocks of the README (results) and of ``docs/profiles.md`` beside it (costs) by what
    ``reports`` gives, and write ``reports/README.md`` (the full per-claim table, :func:`publish.full_table`); True
    if a file changed."""
    path = Path(readme)
    if publish.BEGIN not in path.read_text() or publish.END not in path.read_text():
        raise ValueError(f"{path}: no {publish.BEGIN} ... {publish.END} block to fill")
    blocks, changed = readme_blocks(reports), False
    for doc in _documents(readme):
        text = doc.read_text()
        new = publish.replace_blocks(text, blocks)
        if new != text:
            doc.write_text(new)
            changed = True
    full = Path(reports) / "README.md"
    table = publish.full_table(reports)
    if not full.exists() or full.read_text() != table:
        full.write_text(table)
        changed = True
    return changed


def readme_current(readme: str | os.PathLike = "README.md", reports: str | os.PathLike = "reports") -> bool:
    """Whether every generated block of the README and ``docs/profiles.md``, and ``reports/README.md``, are what
    ``reports`` gives."""
    full = Path(reports) / "README.md"
    blocks = readme_blocks(reports)
    return (all(publish.blocks_current(doc, blocks) for doc in _documents(readme)) and full.exists()
            and full.read_text() == publish.full_table(reports))


def main(argv=None) -> int:
    """``python -m repro_lib summary [REPORTS] [--readme README.md] [--check]``: print the results table; with
    ``--readme``, write it into the README's block and ``REPORTS/README.md`` (``--check``: only say whether they
    are current, exit 1 if not)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m repro_lib summary")
    ap.add_argument("reports", nargs="?", default="reports")
    ap.add_argument("--readme", default=None, help="fill this README's results block")
    ap.add_argument("--check", action="store_true", help="with --readme: exit 1 if the block is not current")
    args = ap.parse_args(argv)
    if args.readme is None:
        print(publish.summary(args.reports))
        return 0
    if args.check:
        current = readme_current(args.readme, args.reports)
        print("README results are current" if current else f"{args.readme}: a generated block is out of date; run "
              f"`python -m repro_lib summary {args.reports} --readme {args.readme}`")
        return 0 if current else 1
    changed = update_readme(args.readme, args.reports)
    print(f"{args.readme}: {'updated' if changed else 'already current'}")
    return 0
