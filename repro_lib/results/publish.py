"""Published results: ``reports/`` in the repository, and the README's "Results at a glance" made from it.

Layout (the results directory of ``python -m repro_lib run --results-dir reports``)::

    reports/runs/<hash>.json              the run store that produced every number (compact records, repro_lib.store)
    reports/<profile>/<notebook>.ipynb    the executed notebook: every table, figure and verdict, readable on GitHub
    reports/<profile>/<notebook>/         its tables (HTML, LaTeX, CSV), figures (PNG) and ``claims.json``

A notebook states its claims with :func:`record_claims` (one row per claim: the paper's table or figure, the claim
in words, the verdict computed from its runs, the peak tuning factor where it applies); :func:`summary` collects
them into one Markdown row per claim, and :func:`readme_block` is what the README holds between its
``<!-- results:begin -->`` / ``<!-- results:end -->`` markers (``tests/test_reports.py`` regenerates it from the
committed store and fails if the README differs). :func:`stale_runs` lists the runs a published notebook would ask
for today that the published store does not hold: a changed grid or a bumped ``config.RESULTS_VERSION`` shows up
there until the notebook is run again.

``make report`` re-renders every published notebook from the store without training (``-p collect True``).
"""
from __future__ import annotations

import itertools
import json
import math
import os
import re
from pathlib import Path

from . import costs
from .executed import notebook_parameters, published_notebooks
from .findings import VERDICTS, seed_range, word_counts
from .tables import markdown_lines

#: the display id of the result shown under a notebook's claim (:func:`result_first`, filled by :func:`record_claims`)
RESULT_ID = "repro-lib-result"
RESULT_PENDING = "*The result appears here when the notebook has run to its end (its last cell records the claims).*"

#: columns of the results tables, in order (one table per profile and data set, named above it)
COLUMNS = ("paper", "item", "claim", "paper's value", "ours", "verdict", "notebook")
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def record_claims(out_dir: str | os.PathLike, rows: list[dict]) -> Path:
    """Write the notebook's claims (``out_dir/claims.json``, atomically) and show them as the notebook's result under
    its claim (:func:`result_first`). Each row: ``paper``, ``item`` (e.g. "Table 1 (a), N = 1000"), ``claim`` (in
    words), ``data`` (``findings.dataset_label``), ``seeds``, ``verdict`` (computed from the runs, e.g. "best
    (margin +1.2, within the seed spread 1.5)"), optionally ``peak_tf`` (text), ``train_minutes``, ``ours`` and
    ``paper_value`` (the measured value and the paper's, as text)."""
    from ..store import _write_atomic

    required = ("paper", "item", "claim", "data", "seeds", "verdict")
    for r in rows:
        missing = [k for k in required if k not in r]
        if missing:
            raise ValueError(f"claims: row {r} lacks {missing}")
    path = Path(out_dir) / "claims.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, json.dumps(rows, indent=1, sort_keys=True, default=_jsonable) + "\n")
    _show_result(rows)
    return path


def _show_result(rows: list[dict]) -> None:
    """Fill the notebook's result placeholder (:func:`result_first`) when running in a kernel; nothing elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, update_display
    except ImportError:  # pragma: no cover - IPython is a dependency
        return
    if get_ipython() is not None:
        update_display(Markdown(result_markdown(rows)), display_id=RESULT_ID)


def result_first() -> None:
    """Show the placeholder of the notebook's result right under its claim (a code cell after the first markdown
    cell). :func:`record_claims`, in the notebook's last cells, replaces it with :func:`result_markdown` of the
    claims, so the executed notebook's first screen says whether the claim reproduced."""
    from IPython.display import Markdown, display

    display(Markdown(RESULT_PENDING), display_id=RESULT_ID)


def result_markdown(rows: list[dict]) -> str:
    """The result in a few lines: one table row per claim with a verdict (claim, ours, the paper's, verdict; the
    ours/paper columns where the claims carry them), the data the runs used, and how many claims have no run yet."""
    ran = [r for r in rows if not not_run(r)]
    has = [k for k in ("ours", "paper_value") if any(r.get(k) for r in ran)]
    head = ["claim", *({"ours": "ours", "paper_value": "paper"}[k] for k in has), "verdict"]
    lines = markdown_lines(head, [[f"{r['item']}: {r['claim']}", *(r.get(k, "") for k in has), r["verdict"]]
                                  for r in ran])
    data = sorted({r["data"] for r in rows if r.get("data")})
    words = [verdict_word(r["verdict"]) for r in ran]
    counted = word_counts(words, mark="*", none="")
    said = (f" Of {len(ran)} claim{'s' if len(ran) != 1 else ''} checked: {counted}." if counted else "")
    out = [f"**Result** ({'; '.join(data) or 'see below'}; computed from this notebook's runs).{said}", ""]
    out += lines if ran else ["No claim has a run behind it yet."]
    if len(ran) < len(rows):
        out += ["", f"{len(rows) - len(ran)} more claim(s) without any run yet (see the tables below)."]
    return "\n".join(out)


def verdict_word(verdict: str) -> str:
    """The first word of a published verdict ("holds", "no", "undecided"; ``results.findings.VERDICTS``), or ""
    for a verdict written before the three words (e.g. "n/a")."""
    word = re.split(r"[\s:(,]", str(verdict).strip(), maxsplit=1)[0]
    return word if word in VERDICTS else ""


def _jsonable(v):
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    return str(v)


def summary_rows(reports: str | os.PathLike = "reports") -> list[dict]:
    """One dict per claim of every published notebook (``claims.json`` beside it), with the profile and the link
    to the executed notebook (relative to the repository root); a published notebook without claims gets one row
    that says so. Consecutive claims of one notebook that no run has reached yet (verdict "n/a", no training
    minutes) share one row ("not run yet"); ``seeds`` reads "lo–hi" where the cells of a column hold different
    numbers of finished seeds."""
    root = Path(reports)
    rows = []
    for nb in published_notebooks(root):
        profile = nb.parent.name
        link = f"[{nb.stem}]({nb.as_posix()})"
        claims_path = nb.parent / nb.stem / "claims.json"
        claims = json.loads(claims_path.read_text()) if claims_path.exists() else []
        if not claims:
            rows.append({"paper": "", "item": nb.stem, "claim": "", "profile": profile, "data": "", "seeds": "",
                         "verdict": "", "peak tuning factor": "", "train min": "", "paper's value": "", "ours": "",
                         "notebook": link})
        # consecutive claims that no run has reached yet (key: their claim) fold into one row; the rest (key None)
        # get a row each
        for key, group in itertools.groupby(claims, key=lambda c: c["claim"] if not_run(c) else None):
            group = list(group)
            if key is not None:
                rows.append(_not_run_row(group, profile, link))
                continue
            for c in group:
                minutes = c.get("train_minutes")
                rows.append({"paper": c["paper"], "item": c["item"], "claim": c["claim"], "profile": profile,
                             "data": c["data"], "seeds": seed_range(c["seeds"], c.get("seeds_max", c["seeds"])),
                             "verdict": c["verdict"], "peak tuning factor": c.get("peak_tf", ""),
                             "train min": "" if minutes is None or not math.isfinite(minutes) else f"{minutes:.0f}",
                             "paper's value": c.get("paper_value", ""), "ours": c.get("ours", ""),
                             "notebook": link})
    return rows


def not_run(claim: dict) -> bool:
    """A claim whose verdict has no run behind it yet (every run of its column missing, or none planned in the
    profile)."""
    v = str(claim.get("verdict", ""))
    no_run = v.startswith("n/a") or re.fullmatch(r"undecided \((\d+ runs? missing|not run in this profile)\)",
                                                  v) is not None
    return no_run and not claim.get("train_minutes")


def _not_run_row(claims: list[dict], profile: str, link: str) -> dict:
    c = claims[0]
    missing = [int(m.group(1)) for x in claims if (m := re.search(r"(\d+) runs? missing", str(x["verdict"])))]
    item = c["item"] if len(claims) == 1 else f"{c['item']} … {claims[-1]['item']} ({len(claims)} columns)"
    return {"paper": c["paper"], "item": item, "claim": c["claim"], "profile": profile, "data": c["data"],
            "seeds": "0", "verdict": "not run yet" + (f" ({sum(missing)} runs)" if missing else ""),
            "peak tuning factor": "", "train min": "", "paper's value": "", "ours": "", "notebook": link}


def summary(reports: str | os.PathLike = "reports") -> str:
    """The results in Markdown: one table per (profile, data set), named once above it, one row per claim
    (:func:`summary_rows`; the columns :data:`COLUMNS`); then the published notebooks without a claim to judge."""
    rows = summary_rows(reports)
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["claim"]:
            groups.setdefault((r["profile"], r["data"]), []).append(r)
    out = []
    for (profile, data), group in groups.items():
        seeds = sorted({r["seeds"] for r in group if r["seeds"]}, key=lambda s: (len(s), s))
        out += [f"**`{profile}` profile · {data}** (seeds per claim: {', '.join(seeds)})", "",
                *markdown_lines(COLUMNS, [[r[c] for c in COLUMNS] for r in group]), ""]
    bare = [r["notebook"] for r in rows if not r["claim"]]
    if bare:
        out.append(f"Published without a claim to judge: {', '.join(bare)}.")
    if not rows:
        out.append("(nothing published yet)")
    return "\n".join(out).rstrip("\n")


def readme_block(reports: str | os.PathLike = "reports") -> str:
    """What the README holds between its results markers."""
    return (f"{BEGIN}\n<!-- generated by `python -m repro_lib summary reports/`; do not edit by hand -->\n"
            f"{summary(reports)}\n{END}")


def _blocks(reports) -> list[tuple[str, str, str]]:
    """The README's generated blocks: (begin marker, end marker, content) for the results and the cost table."""
    return [(BEGIN, END, readme_block(reports)), (costs.BEGIN, costs.END, costs.cost_block(reports))]


def update_readme(readme: str | os.PathLike = "README.md", reports: str | os.PathLike = "reports") -> bool:
    """Replace the README's results block by :func:`readme_block` and, where the README has one, its cost block by
    ``costs.cost_block``; True if the file changed."""
    path = Path(readme)
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{path}: no {BEGIN} ... {END} block to fill")
    new = text
    for begin, end, block in _blocks(reports):
        if begin in new and end in new:
            head, rest = new.split(begin, 1)
            new = head + block + rest.split(end, 1)[1]
    if new != text:
        path.write_text(new)
    return new != text


def _block_of(text: str, begin: str, end: str, where) -> str:
    if begin not in text or end not in text:
        raise ValueError(f"{where}: no {begin} ... {end} block")
    return begin + text.split(begin, 1)[1].split(end, 1)[0] + end


def readme_block_of(readme: str | os.PathLike, begin: str, end: str) -> str:
    """The README's block between ``begin`` and ``end`` (markers included); ``ValueError`` without one."""
    return _block_of(Path(readme).read_text(), begin, end, readme)


def readme_results(readme: str | os.PathLike = "README.md") -> str:
    """The README's current results block (markers included)."""
    return readme_block_of(readme, BEGIN, END)


def readme_current(readme: str | os.PathLike = "README.md", reports: str | os.PathLike = "reports") -> bool:
    """Whether every generated block the README has (results; costs where present) is what ``reports`` gives."""
    text = Path(readme).read_text()
    return all(_block_of(text, b, e, readme) == block for b, e, block in _blocks(reports) if b in text and e in text)


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

    from ..papers import registry

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
    from ..runs.notebook import find_notebooks, run_notebooks

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


def main(argv=None) -> int:
    """``python -m repro_lib summary [REPORTS] [--readme README.md] [--check]``: print the results table; with
    ``--readme``, write it into the README's block (``--check``: only say whether the README is current, exit 1
    if not)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m repro_lib summary")
    ap.add_argument("reports", nargs="?", default="reports")
    ap.add_argument("--readme", default=None, help="fill this README's results block")
    ap.add_argument("--check", action="store_true", help="with --readme: exit 1 if the block is not current")
    args = ap.parse_args(argv)
    if args.readme is None:
        print(summary(args.reports))
        return 0
    if args.check:
        current = readme_current(args.readme, args.reports)
        print("README results are current" if current else f"{args.readme}: a generated block is out of date; run "
              f"`python -m repro_lib summary {args.reports} --readme {args.readme}`")
        return 0 if current else 1
    changed = update_readme(args.readme, args.reports)
    print(f"{args.readme}: {'updated' if changed else 'already current'}")
    return 0
