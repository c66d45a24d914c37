"""Published results: ``reports/`` in the repository, and the README's "Results at a glance" made from it.

Layout (the results directory of ``python -m repro_lib run --results-dir reports``)::

    reports/runs/<hash>.json              the run store that produced every number (compact records, repro_lib.store)
    reports/<profile>/<notebook>.ipynb    the executed notebook: every table, figure and verdict, readable on GitHub
    reports/<profile>/<notebook>/         its tables (HTML, LaTeX, CSV), figures (PNG) and ``claims.json``

A notebook states its claims with :func:`record_claims` (one row per claim: the paper's table or figure, the claim
in words, the verdict computed from its runs, the interval of the tested difference and its resolution where the
claim is measured on real images, the peak tuning factor where it applies). Two tables are made from them:
:func:`summary`, one scannable row per claim group (a table's columns, a figure: :func:`claim_groups`) with the
verdict as a word, is what the README holds between its ``<!-- results:begin -->`` / ``<!-- results:end -->``
markers (:func:`readme_block`); :func:`full_table`, one row per claim with the verdict's reason and numbers, is
``reports/README.md`` (``repro_lib.runs.published`` writes both; ``tests/test_reports.py`` regenerates them from
the committed store and fails if either differs).

``make report`` re-renders every published notebook from the store without training (``-p collect True``).
"""
from __future__ import annotations

import itertools
import json
import math
import os
import re
from pathlib import Path

from . import screen
from .executed import notebook_parameters, published_notebooks
from .findings import VERDICTS, seed_range, word_counts
from .tables import markdown_lines

#: the display id of the result shown under a notebook's claim (:func:`result_first`, filled by :func:`record_claims`)
RESULT_ID = "repro-lib-result"
RESULT_PENDING = "*The result appears here when the notebook has run to its end (its last cell records the claims).*"

#: columns of the full results table (``reports/README.md``), in the notebooks' order: ours before the paper's
COLUMNS = ("paper", "item", "claim", "ours", "paper's value", "verdict", "rule", "notebook")
#: columns of the README's scannable table (:func:`summary`): one row per claim group, the verdict as a word
SHORT_COLUMNS = ("paper", "what", "claim", "ours", "paper's", "verdict", "notebook")
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def record_claims(out_dir: str | os.PathLike, rows: list[dict], caveat: str = "", rerun: str = "") -> Path:
    """Write the notebook's claims (``out_dir/claims.json``, atomically) and show them as the notebook's result under
    its claim (:func:`result_first`). Each row: ``paper``, ``item`` (e.g. "Table 1 (a), N = 1000"), ``claim`` (in
    words), ``data`` (``findings.dataset_label``), ``seeds``, ``verdict`` (computed from the runs, e.g. "best
    (margin +1.2, within the seed spread 1.5)"), optionally ``peak_tf`` (text), ``train_minutes``, ``ours`` and
    ``paper_value`` (the measured value and the paper's, as text), ``note`` (a sentence the first screen shows under
    the table, once however many rows carry it). ``caveat`` and ``rerun``: the first screen's conditions and re-run
    lines, shown above the table (``results.screen.conditions`` / ``screen.rerun``)."""
    from ..store import _write_atomic

    required = ("paper", "item", "claim", "data", "seeds", "verdict")
    for r in rows:
        missing = [k for k in required if k not in r]
        if missing:
            raise ValueError(f"claims: row {r} lacks {missing}")
    path = Path(out_dir) / "claims.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, json.dumps(rows, indent=1, sort_keys=True, default=_jsonable) + "\n")
    _show_result(rows, caveat, rerun)
    return path


def _show_result(rows: list[dict], caveat: str = "", rerun: str = "") -> None:
    """Fill the notebook's result placeholder (:func:`result_first`) when running in a kernel; nothing elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, update_display
    except ImportError:  # pragma: no cover - IPython is a dependency
        return
    if get_ipython() is not None:
        update_display(Markdown(result_markdown(rows, caveat, rerun)), display_id=RESULT_ID)


def result_first() -> None:
    """Show the placeholder of the notebook's result right under its claim (a code cell after the first markdown
    cell). :func:`record_claims`, in the notebook's last cells, replaces it with :func:`result_markdown` of the
    claims, so the executed notebook's first screen says whether the claim reproduced."""
    from IPython.display import Markdown, display

    display(Markdown(RESULT_PENDING), display_id=RESULT_ID)


def result_markdown(rows: list[dict], caveat: str = "", rerun: str = "") -> str:
    """The result in a few lines: one table row per claim with a verdict (claim, ours, the paper's, verdict; the
    ours/paper columns where the claims carry them), the data the runs used, the definitions of the terms the
    table uses (``screen.glossary``), the ``caveat`` and ``rerun`` lines (all three above the table, so that a long
    table leaves them on the first screen), the claims' distinct ``note`` sentences, and how many claims have no run
    yet."""
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
    notes = list(dict.fromkeys(r["note"] for r in ran if r.get("note")))
    terms = screen.glossary("\n".join([*lines, *notes, caveat])) if ran else ""
    out += [x for line in (terms, caveat, rerun) if line for x in (line, "")]  # on the first screen, however long
    out += lines if ran else ["No claim has a run behind it yet."]
    out += ["", *(f"- {n}" for n in notes)] if notes else []
    out += decisions_markdown(ran)
    if len(ran) < len(rows):
        out += ["", f"{len(rows) - len(ran)} more claim(s) without any run yet (see the tables below)."]
    return "\n".join(out)


def decisions_markdown(rows: list[dict]) -> list[str]:
    """Under the result: what would decide each *undecided* claim (its ``to_decide``), and each claim whose rule was
    set after its records existed (``rule.declared`` "after") with the verdict under the rule it replaced
    (``previous_word``, where the claim carries it)."""
    out = []
    decide = [f"- *{r['item']}*: {r['to_decide']}" for r in rows if r.get("word") == "undecided" and r.get("to_decide")]
    if decide:
        out += ["", "**What would decide the undecided claims:**", *decide]
    changed = [r for r in rows if (r.get("rule") or {}).get("declared") == "after" and r.get("previous_word")]
    if changed:
        moved = [r for r in changed if r["previous_word"] != r.get("word")]
        out += ["", f"*Rules set after the records existed* (`repro_lib.results.rules`): {len(changed)} claim"
                    f"{'s' if len(changed) != 1 else ''} here; "
                + (f"under the rules they replaced, {len(moved)} read differently: "
                   + "; ".join(f"{r['item']}: *{r['previous_word']}* then, *{r.get('word')}* now" for r in moved)
                   if moved else "each reads the same under the rule it replaced") + "."]
    return out


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
                         "rule": "", "notebook": link})
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
                             "rule": rule_words(c), "notebook": link})
                if c.get("word") == "undecided" and c.get("to_decide"):
                    rows[-1]["verdict"] += f" — would be decided by: {c['to_decide']}"
    return rows


def rule_words(claim: dict) -> str:
    """A claim's rule in a few words: "≳ −1 · 95 % · paired t … · gate: … · set after the records" ("" without
    one)."""
    r = claim.get("rule") or {}
    if not r:
        return ""
    m = r.get("margin")
    rel = r["relation"]
    margin = ("" if m is None else f" ±{m:g}" if rel == "≈" else f" −{m:g}" if rel == "≳" else
              f" ×{m:g}" if rel == "band" else f" {m:g}" if rel == "≤" else "")
    gate = f"; gate: {r['gate']}" if r.get("gate") and r["gate"] != "none" else ""
    return (f"{rel}{margin}, {100 * r['level']:.0f} % interval ({r['test'].split(':')[0].split(' (')[0]}){gate}; "
            f"set {r.get('declared', 'before')} the records")


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
            "peak tuning factor": "", "train min": "", "paper's value": "", "ours": "", "rule": "", "notebook": link}


def full_table(reports: str | os.PathLike = "reports") -> str:
    """``reports/README.md``: every published claim, one table per (profile, data set), named once above it, one
    row per claim (:func:`summary_rows`; the columns :data:`COLUMNS`, the verdict with its reason and numbers); then
    the published notebooks without a claim to judge."""
    rows = summary_rows(reports)
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["claim"]:
            groups.setdefault((r["profile"], r["data"]), []).append(r)
    out = ["# Published results: every claim", "",
           "<!-- generated by `python -m repro_lib summary reports/ --readme README.md`; do not edit by hand -->",
           "", "One row per claim of every published notebook: ours beside the paper's value, the verdict with its "
           "reason and the numbers behind it (the 95 % interval of the tested difference where the claim is measured "
           "on real images). The README's *Results at a glance* groups these rows; the executed notebooks say how "
           "each verdict is reached.", ""]
    for (profile, data), group in groups.items():
        seeds = sorted({r["seeds"] for r in group if r["seeds"]}, key=lambda s: (len(s), s))
        out += [f"**`{profile}` profile · {data}** (seeds per claim: {', '.join(seeds)})", "",
                *markdown_lines(COLUMNS, [[r[c] for c in COLUMNS] for r in group]), ""]
    bare = [r["notebook"] for r in rows if not r["claim"]]
    if bare:
        out.append(f"Published without a claim to judge: {', '.join(bare)}.")
    if not rows:
        out.append("(nothing published yet)")
    return "\n".join(out).rstrip("\n") + "\n"


#: data labels of claims that are exact or deterministic (identities, toys): such a notebook is one row of the
#: README's table, whatever its number of claims
DETERMINISTIC = ("exact arithmetic", "synthetic toy")


def claim_groups(reports: str | os.PathLike = "reports") -> list[dict]:
    """The claims of every published notebook grouped for the README, one dict per group: the claims of one
    notebook that share the part of their item before the first comma (a table's or figure's columns: "Table 1
    (a)"), or every claim of a notebook of exact or toy claims (:data:`DETERMINISTIC`). Keys: ``profile``, ``data``,
    ``notebook`` (link), ``claims`` (the claims.json rows)."""
    root = Path(reports)
    out = []
    for nb in published_notebooks(root):
        claims_path = nb.parent / nb.stem / "claims.json"
        claims = json.loads(claims_path.read_text()) if claims_path.exists() else []
        link = f"[{nb.stem}]({nb.as_posix()})"
        groups: dict[str, list[dict]] = {}
        for c in claims:
            key = ("" if str(c.get("data", "")).startswith(DETERMINISTIC)
                   else re.split(r",|;", str(c["item"]), maxsplit=1)[0].strip())
            groups.setdefault(key, []).append(c)
        for key, group in groups.items():
            out.append({"profile": nb.parent.name, "data": group[0]["data"], "notebook": link, "key": key,
                        "claims": group})
    return out


def _short_ours(c: dict) -> str:
    """Our value of one claim in a few characters: the yellow cell's rank for a grid claim, the tested difference ±
    its resolution where the claim carries an interval (a ratio and its interval where the claim's ``scale`` is
    "log": its estimate and ``ci`` are log ratios), else ""."""
    if not_run(c):
        return "—"
    if c.get("rank") in ("best", "second", "no"):
        return {"no": "3rd+"}.get(c["rank"], c["rank"])
    est, res, ci = c.get("estimate"), c.get("resolution"), c.get("ci") or []
    if not _finite(est):
        return ""
    if c.get("scale") == "ratio":
        span = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if len(ci) == 2 and all(map(_finite, ci)) else ""
        return f"×{est:.2f}{span}"
    if c.get("scale") == "log":
        span = f" [{math.exp(ci[0]):.2f}, {math.exp(ci[1]):.2f}]" if len(ci) == 2 and all(map(_finite, ci)) else ""
        return f"×{math.exp(est):.2f}{span}"
    return f"{est:+.2f}" + (f" ± {res:.2f}" if _finite(res) else "")


def _finite(v) -> bool:
    """``v`` is a finite number (a claims.json field may be absent, None or NaN)."""
    return isinstance(v, (int, float)) and math.isfinite(v)


def _short_paper(c: dict) -> str:
    """The paper's value of one claim in a few characters: its yellow cell's rank, its own difference, or "—"."""
    m = re.search(r"\((best|second|below second|no)\)", str(c.get("paper_value", "")))
    if c.get("rank") and m:
        return {"no": "3rd+", "below second": "3rd+"}.get(m.group(1), m.group(1))
    pe = c.get("paper_effect")
    if _finite(pe):
        return f"{pe:+.2f}"
    return "—"


def group_word(claims: list[dict]) -> str:
    """The verdict of a claim group as words only: "holds", or "holds 2 / undecided 1" where they differ; "not run"
    for claims no run has reached."""
    words = ["not run" if not_run(c) else (c.get("word") or verdict_word(c["verdict"])) for c in claims]
    order = [*VERDICTS, "not run"]
    kinds = [w for w in order if w in words]
    if len(kinds) == 1:
        return kinds[0]
    return " / ".join(f"{w} {words.count(w)}" for w in kinds)


#: the longest claim text a row of the README's table quotes in full (a longer group names its first claim)
CLAIM_CHARS = 140
#: the heading of the README's table of exact and toy claims
DETERMINISTIC_TABLE = "exact identities and synthetic toys (deterministic)"


def _joined(values) -> str:
    """Non-empty short values joined by " · " ("—" when there is none)."""
    vals = [v for v in values if v and v != "—"]
    return " · ".join(vals) if vals else "—"


def _what(key: str, claims: list[dict]) -> str:
    if key:
        return key + (f" ({len(claims)} columns)" if len(claims) > 1 and claims[0].get("rank") else "")
    return f"{len(claims)} claims" if len(claims) > 1 else claims[0]["item"]


def summary(reports: str | os.PathLike = "reports") -> str:
    """The README's results: one table per (profile, data set), one row per claim group (:func:`claim_groups`),
    the columns :data:`SHORT_COLUMNS` -- ours and the paper's as short numbers (a grid's yellow-cell ranks; a
    difference ± its resolution), the verdict as words only; the reasons are in the notebooks and in
    ``reports/README.md`` (:func:`full_table`)."""
    groups = claim_groups(reports)
    tables: dict[tuple, list[list[str]]] = {}
    for g in groups:
        cl = g["claims"]
        texts = list(dict.fromkeys(c["claim"] for c in cl))
        claim = "; ".join(texts) if len("; ".join(texts)) <= CLAIM_CHARS else (
            f"{texts[0]} (+{len(texts) - 1} more)")
        row = [cl[0]["paper"], _what(g["key"], cl), claim, _joined(_short_ours(c) for c in cl),
               _joined(_short_paper(c) for c in cl), group_word(cl), g["notebook"]]
        kind = DETERMINISTIC_TABLE if not g["key"] else g["data"]
        tables.setdefault((g["profile"], kind), []).append(row)
    out = []
    for (profile, data), rows in tables.items():
        out += [f"**`{profile}` profile · {data}**", "", *markdown_lines(SHORT_COLUMNS, rows), ""]
    if not groups:
        out.append("(nothing published yet)")
    return "\n".join(out).rstrip("\n")


def readme_block(reports: str | os.PathLike = "reports") -> str:
    """What the README holds between its results markers."""
    return (f"{BEGIN}\n<!-- generated by `python -m repro_lib summary reports/`; do not edit by hand -->\n"
            f"{summary(reports)}\n{END}")


def replace_blocks(text: str, blocks) -> str:
    """``text`` with every generated block ``(begin, end, content)`` it holds replaced by ``content`` (a block whose
    markers ``text`` lacks is left out)."""
    for begin, end, block in blocks:
        if begin in text and end in text:
            head, rest = text.split(begin, 1)
            text = head + block + rest.split(end, 1)[1]
    return text


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


def blocks_current(readme: str | os.PathLike, blocks) -> bool:
    """Whether every generated block ``(begin, end, content)`` the README has is ``content``."""
    text = Path(readme).read_text()
    return all(_block_of(text, b, e, readme) == block for b, e, block in blocks if b in text and e in text)
