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

from .executed import notebook_parameters, published_notebooks
from .findings import NOT_JUDGED, VERDICTS, seed_range, word_counts
from .tables import markdown_lines

#: the display id of the result shown under a notebook's claim (:func:`result_first`, filled by :func:`record_claims`)
RESULT_ID = "repro-lib-result"
RESULT_PENDING = "*The result appears here when the notebook has run to its end (its last cell records the claims).*"

#: columns of the full results table (``reports/README.md``), in the notebooks' order: ours before the paper's
COLUMNS = ("paper", "item", "claim", "ours", "paper's value", "verdict", "deciding interval", "rule", "notebook")
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


#: where the glossary lives, relative to the repository root (terms defined once; the README and the book link it)
GLOSSARY = "docs/glossary.md"
#: the anchor of a notebook's audit (:func:`audit`, under a Markdown cell ``## Audit``)
AUDIT_ANCHOR = "audit"
#: the claims the last :func:`record_claims` call recorded in this kernel, for :func:`audit`
_RECORDED: dict = {}


def record_claims(out_dir: str | os.PathLike, rows: list[dict], caveat: str = "", rerun: str = "") -> Path:
    """Write the notebook's claims (``out_dir/claims.json``, atomically) and show them as the notebook's result under
    its claim (:func:`result_first`). Each row: ``paper``, ``item`` (e.g. "Table 1 (a), N = 1000"), ``claim`` (in
    words), ``data`` (``findings.dataset_label``), ``seeds``, ``verdict`` (computed from the runs, e.g. "holds:
    +1.20 [+0.30, +2.10]"), optionally ``word`` (the verdict word; derived from ``verdict`` where absent),
    ``peak_tf`` (text), ``train_minutes``, ``ours`` and ``paper_value`` (the measured value and the paper's, as
    text), ``note`` (a sentence the first screen shows under the table, once however many rows carry it),
    ``deciding`` (the name of the contrast ``estimate``/``ci`` are, for a claim with several contrasts) and
    ``regime`` (the gate's measurement in words). A claim whose gate failed (``gate_ok`` False) reads *not judged*
    (:func:`normalized`). ``caveat`` and ``rerun``: the first screen's conditions and re-run lines
    (``results.screen.conditions`` / ``screen.rerun``). The notebook's last cell shows the :func:`audit`."""
    from ..store import _write_atomic

    required = ("paper", "item", "claim", "data", "seeds", "verdict")
    for r in rows:
        missing = [k for k in required if k not in r]
        if missing:
            raise ValueError(f"claims: row {r} lacks {missing}")
    rows = [normalized(r) for r in rows]
    path = Path(out_dir) / "claims.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, json.dumps(rows, indent=1, sort_keys=True, default=_jsonable) + "\n")
    glossary = _glossary_link(path.parent.parent)
    _RECORDED.update(rows=rows, glossary=glossary)
    _show_result(rows, caveat, rerun, glossary)
    return path


def normalized(row: dict) -> dict:
    """A claim as published: its ``word`` (from its verdict where the row lacks one), and *not judged* where its gate
    failed (``gate_ok`` False) and the row still said *undecided* (the word and the verdict's first word both)."""
    out = dict(row)
    word = out.get("word") or verdict_word(out.get("verdict", ""))
    if out.get("gate_ok") is False and word == "undecided" and not not_run(out):
        word = NOT_JUDGED
        v = str(out["verdict"])
        if v.startswith("undecided ("):  # the regime first, then the reason it gave
            v = f"{NOT_JUDGED} (the regime the claim speaks of was not reached; {v[len('undecided ('):]}"
        out["verdict"] = NOT_JUDGED + v[len("undecided"):] if v.startswith("undecided") else v
    if word:
        out["word"] = word
    return out


def _glossary_link(notebook_dir: Path) -> str:
    """The glossary's path relative to the folder of the executed notebook (the repository root is the working
    folder: ``runs.notebook.work_in_project_root``)."""
    try:
        return Path(os.path.relpath(Path.cwd() / GLOSSARY, notebook_dir.resolve())).as_posix()
    except ValueError:  # another drive
        return GLOSSARY


def _show_result(rows: list[dict], caveat: str = "", rerun: str = "", glossary: str = GLOSSARY) -> None:
    """Fill the notebook's result placeholder (:func:`result_first`) when running in a kernel; nothing elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, update_display
    except ImportError:  # pragma: no cover - IPython is a dependency
        return
    if get_ipython() is not None:
        update_display(Markdown(result_markdown(rows, caveat, rerun, glossary)), display_id=RESULT_ID)


def result_first() -> None:
    """Show the placeholder of the notebook's result right under its claim (a code cell after the first markdown
    cell). :func:`record_claims`, in the notebook's last cells, replaces it with :func:`result_markdown` of the
    claims, so the executed notebook's first screen says whether the claim reproduced."""
    from IPython.display import Markdown, display

    display(Markdown(RESULT_PENDING), display_id=RESULT_ID)


def audit() -> None:
    """Show the audit of the claims :func:`record_claims` recorded in this kernel (:func:`audit_markdown`): the last
    cell of a notebook, under a Markdown cell ``## Audit``."""
    from IPython.display import Markdown, display

    rows = _RECORDED.get("rows")
    display(Markdown(audit_markdown(rows) if rows else "No claim was recorded (the notebook stopped before its "
                                                        "claims)."))


#: what each verdict word says, in the words of the first screen's count line
WORD_MEANS = {"holds": "", "no": "", "undecided": "within the noise",
              NOT_JUDGED: "the regime the claim speaks of was not reached", "not run": ""}


def result_markdown(rows: list[dict], caveat: str = "", rerun: str = "", glossary: str = GLOSSARY) -> str:
    """The story of a notebook's result, for its first screen: one line with the verdict words counted and links
    to the glossary and the audit; one table row per claim with a run (claim, ours and the paper's where the claims
    carry them, the verdict word, the deciding interval: :func:`deciding_text`); the claims' distinct ``note``
    sentences; the ``caveat`` (conditions) and ``rerun`` lines; how many claims have no run yet. Rules, gates,
    every contrast and what would decide a claim are in :func:`audit_markdown`, at the end of the notebook."""
    rows = [normalized(r) for r in rows]
    ran = [r for r in rows if not not_run(r)]
    has = [k for k in ("ours", "paper_value") if any(r.get(k) for r in ran)]
    same = [k for k in has if len(ran) > 1 and len({r.get(k, "") for r in ran}) == 1]  # said once, above
    has = [k for k in has if k not in same]
    texts = list(dict.fromkeys(r["claim"] for r in ran))
    shared = len(texts) < len(ran)  # claims repeated over rows (a table's columns): each said once, above
    mark = {t: "" if len(texts) == 1 else f" ({chr(ord('a') + i)})" for i, t in enumerate(texts)}
    head = ["claim", *({"ours": "ours", "paper_value": "paper"}[k] for k in has), "verdict", "deciding interval"]
    lines = markdown_lines(head, [[r["item"] + mark[r["claim"]] if shared else f"{r['item']}: {r['claim']}",
                                   *(r.get(k, "") for k in has),
                                   r["word"] + (" (stage 2)" if r.get("stage") == 2 else ""),
                                   deciding_text(r) or "—"]
                                  for r in ran])
    data = sorted({r["data"] for r in rows if r.get("data")})
    counted = word_counts([r["word"] for r in ran], mark="*", none="")
    said = f" Of {len(ran)} claim{'s' if len(ran) != 1 else ''} checked: {counted}." if counted else ""
    links = f" [Terms]({glossary}) · [Audit](#{AUDIT_ANCHOR}): every rule, contrast and regime."
    out = [f"**Result** ({'; '.join(data) or 'see below'}; computed from this notebook's runs).{said}{links}", ""]
    ranked = [r for r in ran if r.get("rank") in ("best", "second", "no")]
    if len(ranked) > 1:  # a grid's columns: the ranks by mean, then what the intervals show
        k = {w: sum(r["rank"] == w for r in ranked) for w in ("best", "second")}
        shown = sum(r["word"] == "holds" for r in ranked)
        out += [f"By mean, the yellow cell is best in {k['best']} and second in {k['second']} of {len(ranked)} "
                f"columns; its intervals show the claim in {shown} of them (the deciding interval of each below).",
                ""]
    if shared:
        out += [("*Claim, in every row:* " if len(texts) == 1 else "*Claims:* ")
                + "; ".join(f"{mark[t].strip()} {t}".strip() for t in texts) + ".", ""]
    for k in same:
        out += [f"*{'Ours' if k == 'ours' else 'The paper'}, in every row:* {ran[0][k]}.", ""]
    out += lines if ran else ["No claim has a run behind it yet."]
    if any(r.get("stage") == 2 for r in ran):
        out += ["", "*(stage 2)*: judged once more at the declared second stage (`reports/cpu/stage2_plan.json`), "
                    "on more seeds at a stricter level; the audit gives both stages and the procedure's error."]
    notes = list(dict.fromkeys(r["note"] for r in ran if r.get("note")))
    out += ["", *(f"- {n}" for n in notes)] if notes else []
    if len(ran) < len(rows):
        out += ["", f"{len(rows) - len(ran)} more claim(s) without any run yet (see the tables below)."]
    out += [x for line in (caveat, rerun) if line for x in ("", line)]
    return "\n".join(out)


def audit_markdown(rows: list[dict]) -> str:
    """The audit of a notebook's claims: for each claim its verdict with the reason and numbers, its rule (test, α
    per side, interval level, margin or threshold with its reason, gate, declared before or after the records, the
    rule it replaced and the verdict that gave), the measured regime, every contrast, and what would decide it."""
    out = []
    for r in (normalized(x) for x in rows):
        out += [f"**{r['item']}** — {r['claim']}", "", f"- *Verdict:* {r['verdict']}"]
        rule = r.get("rule") or {}
        if rule:
            m = rule.get("margin")
            out.append(f"- *Rule:* {rule_words(r)}; α = {rule['alpha']:g} per side"
                       + (f"; margin or threshold {m:g}" if m is not None else "")
                       + (f". Why: {rule['reason']}" if rule.get("reason") else ""))
            if rule.get("declared") == "after":
                out.append("- *Set after the records existed*" + (f"; it replaced: {rule['previous']}"
                                                                   if rule.get("previous") else "")
                           + (f"; verdict under that rule: *{r['previous_word']}*" if r.get("previous_word") else ""))
        if rule.get("gate") and rule["gate"] != "none" or r.get("regime"):
            out.append(f"- *Gate:* {rule.get('gate', 'none')}; measured: {r.get('regime') or 'not recorded'}"
                       + ("" if r.get("gate_ok") is None else f" ({'passed' if r['gate_ok'] else 'failed'})"))
        cs = r.get("contrasts") or {}
        if cs:
            out.append("- *Contrasts* (each [lo, hi]): " + "; ".join(
                f"{k}: {_interval(v)}" for k, v in cs.items()))
        d = deciding_text(r)
        if d:
            out.append(f"- *Deciding interval:* {d}")
        out += stage_lines(r)
        if r.get("to_decide"):
            out.append(f"- *What would decide it:* {r['to_decide']}")
        out.append("")
    return "\n".join(out).rstrip("\n")


def _settled(item) -> str | None:
    """The number of settled grid columns a pooled claim's item names ("Pooled, 21 settled grid columns"), else
    None."""
    m = re.search(r"(\d+) settled", str(item or ""))
    return m.group(1) if m else None


def stage_lines(r: dict) -> list[str]:
    """The audit's lines on a claim's declared second stage (``reports/cpu/stage2_plan.json``): judged at stage 2
    (``stage`` 2: the procedure's overall error per side and the first stage's verdict beside it), or planned and
    waiting for its runs (``stage2``)."""
    if r.get("stage") == 2:
        s1 = r.get("stage1") or {}
        alpha = (r.get("rule") or {}).get("alpha", 0)
        # a pooled claim counts grid columns (its item names them: "Pooled, 21 settled grid columns"), not seeds
        cols2, cols1 = _settled(r.get("item")), _settled(s1.get("item"))
        n2 = f"{r.get('seeds')} {'columns' if cols2 else 'seeds'}"
        n1 = f"{cols1} columns" if cols1 else f"{s1.get('seeds')} seeds"
        return [f"- *Second stage*, declared before its runs (`reports/cpu/stage2_plan.json`): judged once on "
                f"{n2} at α = {alpha:g} per side; the two-stage procedure errs at most "
                f"{r['procedure_error']:.3f} per side. Stage 1 ({n1}, {100 * (s1.get('level') or 0):.0f} %): "
                f"*{s1.get('word')}* — {s1.get('verdict', '')}"]
    if r.get("stage2"):
        return [f"- *Second stage:* planned (`reports/cpu/stage2_plan.json`); {r['stage2']}"]
    return []


def stage_found(claims: list[dict], restated: bool = False) -> str:
    """A "What we found" paragraph on the claims of ``claims`` that the declared second stage reached
    (``reports/cpu/stage2_plan.json``): each claim judged at stage 2 with its new verdict and its first stage's word
    (the sentences computed before it read the first stage's seeds), each still waiting with how many of its runs
    are in the store; "" when no claim has a second stage. ``restated``: the sentences above were computed from
    the judged claims (the pooled summary's answer, ``summary.restate``), so they are not said to read stage 1."""
    judged = [c for c in claims if c.get("stage") == 2]
    waiting = [c for c in claims if c.get("stage2") and c.get("stage") != 2]
    if not judged and not waiting:
        return ""
    lines = ["**The declared second stage** (planned before its runs, `reports/cpu/stage2_plan.json`; each claim "
             "judged once more on all its seeds at a stricter level)."
             + ((" These claims were judged again:" if restated else
                 " The sentences above read the first stage's seeds; these claims were judged again:") if judged
                else "")]
    lines += [f"- *{c.get('item')}* — {c.get('claim')}: {c.get('verdict')}" for c in judged]
    lines += [f"- *{c.get('item')}* — {c.get('claim')}: {c['stage2']}" for c in waiting]
    return "\n".join(lines)


def show_stage_found(claims: list[dict], restated: bool = False) -> None:
    """Display :func:`stage_found`'s paragraph under a notebook's *What we found*, where it has one."""
    text = stage_found(claims, restated)
    if text:
        from IPython.display import Markdown, display

        display(Markdown(text))


def _finite(v) -> bool:
    """``v`` is a finite number (a claims.json field may be absent, None or NaN)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _interval(v) -> str:
    try:
        lo, hi = v
    except (TypeError, ValueError):
        return str(v)
    return f"[{_num(lo)}, {_num(hi)}]" if _finite(lo) and _finite(hi) else "no interval"


def _num(v, spec: str = "+.2f") -> str:
    return format(v, spec) if _finite(v) else "n/a"


def deciding_label(c: dict) -> str:
    """The name of the quantity a claim's ``estimate`` and ``ci`` are: its ``deciding`` field, "yellow − second
    other" / "yellow − best other" for a grid claim, "a − b" for a claim "a > b", "" for a ratio."""
    if c.get("deciding"):
        return str(c["deciding"])
    rel = (c.get("rule") or {}).get("relation", "")
    if rel in ("best or second", "best") and c.get("rank"):
        return "yellow − second other" if rel == "best or second" else "yellow − best other"
    m = re.search(r"(?:^|: )([^:|]{1,30}?) (?:>|<|≈|≳) ([^:|]{1,30}?)$", str(c.get("claim", "")))
    if m and rel in (">", "<", "≈", "≳") and c.get("scale") not in ("ratio", "log"):
        return f"{m.group(1)} − {m.group(2)}"
    return ""


def deciding_text(c: dict, label: bool = True) -> str:
    """The deciding interval of a claim: its estimate and [lo, hi] (a ratio as ×estimate [lo, hi], a log ratio
    exponentiated), named by :func:`deciding_label`; "" without an estimate."""
    if not_run(c):
        return ""
    est, ci = c.get("estimate"), c.get("ci") or []
    if not _finite(est):
        return ""
    both = len(ci) == 2 and all(map(_finite, ci))
    if c.get("scale") in ("ratio", "log"):
        f = math.exp if c.get("scale") == "log" else (lambda v: v)
        text = f"×{f(est):.2f}" + (f" [{f(ci[0]):.2f}, {f(ci[1]):.2f}]" if both else "")
    else:
        text = f"{est:+.2f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if both else "")
    name = deciding_label(c) if label else ""
    return f"{name} {text}" if name else text


def verdict_word(verdict: str) -> str:
    """The first word(s) of a published verdict ("holds", "no", "undecided", "not judged";
    ``results.findings.VERDICTS``), or "" for a verdict written before the words (e.g. "n/a")."""
    v = str(verdict).strip()
    if v.startswith(NOT_JUDGED):
        return NOT_JUDGED
    word = re.split(r"[\s:(,]", v, maxsplit=1)[0]
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
                         "deciding interval": "", "rule": "", "notebook": link})
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
                             "deciding interval": deciding_text(c), "rule": rule_words(c), "notebook": link})
                if c.get("word") in ("undecided", NOT_JUDGED) and c.get("to_decide"):
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
            "peak tuning factor": "", "train min": "", "paper's value": "", "ours": "", "deciding interval": "",
            "rule": "", "notebook": link}


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


#: the sections of the README's table (and the book's landing page), in order: (paper, section, the claim in a
#: few words, which claims: a notebook stem, or (stem, item prefix)); a published notebook no section names gets a
#: row of its own after these
SECTIONS = (
    ("Yun et al. 2022", "Tables 1–11, Sec. 3.2, pooled", "the accuracy optimum lies within one grid step of the "
     "tuning factor 10/128", [("yun2022_summary", "Pooled optimum")]),
    ("Yun et al. 2022", "Tables 1–11, Sec. 3.2, pooled", "the yellow cell is within one point of the best other "
     "cell", [("yun2022_summary", "Pooled,")]),
    ("Yun et al. 2022", "Sec. 3, Figs 1–2", "the best value of each (N, B) combination has the tuning factor 10/128",
     ["yun2022_section3"]),
    ("Yun et al. 2022", "Sec. 5, Tables 1–11", "the yellow cell is best or second in every column; the optimum "
     "within a grid step", ["yun2022_table1", "yun2022_table2", "yun2022_tables3_4", "yun2022_table5",
                            "yun2022_table6", "yun2022_tables7_11", "yun2022_tables8_10", "yun2022_table9"]),
    ("Yun et al. 2022", "Sec. 6, Fig. 8", "the λ predicted from a 1/16 subset is as good as every other λ",
     ["yun2022_section6"]),
    ("Yun et al. 2022", "Eq. 27 on a new network", "at 4× the batch, the rule's λ keeps Δθ and the accuracy",
     ["tuning_rule"]),
    ("Heo et al. 2021 (AdamP)", "Sec. 2, toys and lemmas", "the projection stops the norm growth momentum causes",
     ["adamp_toys"]),
    ("Heo et al. 2021 (AdamP)", "Sec. 3–4, CIFAR-10", "SGDP / AdamP slow the norm growth and beat SGD / AdamW",
     ["adamp_cifar"]),
    ("Heo et al. 2021 (AdamP)", "Appendix C, Table B.1", "|cos(grad, w)| < δ/√d detects scale-invariant weights",
     ["adamp_delta"]),
    ("Heo et al. 2021 (AdamP)", "Tables 1–2, ImageNet", "the projected optimizers beat their baselines",
     ["adamp_imagenet"]),
    ("Li & Arora 2020", "Sec. 2, Thms 2.9–2.12", "an exponential LR without weight decay is step decay + WD",
     ["li_arora_equivalence"]),
    ("Li & Arora 2020", "Sec. 3, Thm 3.1", "BN + WD does not stay ε-close where each alone converges",
     ["li_arora_bn_wd_toy"]),
    ("Li & Arora 2020", "Sec. 4, Figs 2–5", "TEXP ≈ step decay + WD; TEXP−− < TEXP; cosine schedules > step",
     ["li_arora_preresnet32"]),
    ("Zhang et al. (back-matching)", "supplement, Table 1", "scale-amended SGD beats SGD, LARS (and LSALR)",
     ["backmatching_vgg"]),
)
#: the columns of the README's table (:func:`summary`): one row per paper section
SHORT_COLUMNS = ("paper", "section", "claim", "ours", "verdict", "notebook")


def _published(reports) -> list[tuple[str, str, list[dict]]]:
    """(profile, notebook path, claims) of every published notebook (``claims.json`` beside it), claims normalized."""
    out = []
    for nb in published_notebooks(Path(reports)):
        path = nb.parent / nb.stem / "claims.json"
        claims = [normalized(c) for c in json.loads(path.read_text())] if path.exists() else []
        out.append((nb.parent.name, nb.as_posix(), claims))
    return out


def word_of(claim: dict) -> str:
    """A claim's verdict word for counting: "not run" where no run is behind it (:func:`not_run`), else its word."""
    return "not run" if not_run(claim) else (claim.get("word") or verdict_word(claim.get("verdict", "")) or "not run")


def counts(claims: list[dict], sep: str = " · ") -> str:
    """"holds 2 · not judged 1" in the order of the verdict words, "not run" last."""
    words = [word_of(c) for c in claims]
    return sep.join(f"{w} {words.count(w)}" for w in (*VERDICTS, "not run") if w in words)


def sections(reports: str | os.PathLike = "reports") -> list[dict]:
    """The rows of the README's table: one dict per paper section (:data:`SECTIONS`) of the ``cpu`` and ``gpu``
    profiles' notebooks, then one per section of another profile (the ``paper`` protocol), then a row per published
    notebook no section names. Keys: ``paper``, ``section``, ``claim``, ``profile``, ``claims`` (claims.json rows),
    ``notebooks`` ({stem: path of the executed notebook})."""
    pubs = _published(reports)
    rows, used = [], set()
    profiles = sorted({p for p, _, _ in pubs}, key=lambda p: (p not in ("cpu", "gpu"), p))
    for profile in profiles:
        for paper, section, claim, which in SECTIONS:
            got, nbs = [], {}
            for w in which:
                stem, prefix = (w, "") if isinstance(w, str) else w
                for prof, path, claims in pubs:
                    if prof == profile and Path(path).stem == stem:
                        picked = [c for c in claims if str(c["item"]).startswith(prefix)]
                        got += picked
                        nbs[stem] = path
                        used.add((prof, stem))
            if nbs:
                label = section if profile in ("cpu", "gpu") else f"{section} (`{profile}` profile)"
                rows.append(dict(paper=paper, section=label, claim=claim, profile=profile, claims=got, notebooks=nbs))
    for prof, path, claims in pubs:
        if (prof, Path(path).stem) not in used:
            rows.append(dict(paper=claims[0]["paper"] if claims else "", section=Path(path).stem,
                             claim=claims[0]["claim"] if claims else "", profile=prof, claims=claims,
                             notebooks={Path(path).stem: path}))
    return rows


def _found(claims: list[dict]) -> str:
    """What a section found, in a few characters: for the grids, in how many columns the yellow cell is best or
    second by mean; else the deciding interval of one claim (a decided one first, then a not judged one), with a
    count of the rest."""
    ran = [c for c in claims if not not_run(c)]
    ranked = [c for c in ran if c.get("rank") in ("best", "second", "no")]
    if len(ranked) > 2:
        top = sum(c["rank"] in ("best", "second") for c in ranked)
        return f"yellow best or 2nd by mean in {top} of {len(ranked)} columns"
    shown = [c for c in ran if deciding_text(c)]
    shown.sort(key=lambda c: (word_of(c) not in ("holds", "no"), word_of(c) != NOT_JUDGED))
    texts = [deciding_text(c) for c in shown[:1]]
    more = len(shown) - len(texts)
    return "; ".join(texts) + (f" (+{more} more)" if more > 0 else "") if texts else "—"


def _links(notebooks: dict, link) -> str:
    """The notebooks of a section as links: the notebook's name for one, short names for several."""
    if len(notebooks) == 1:
        (stem, path), = notebooks.items()
        return f"[{stem}]({link(path)})"
    short = {stem: re.sub(r"^yun2022_tables?", "", stem).replace("_", ", ") for stem in notebooks}
    return "Tables " + " · ".join(f"[{short[s]}]({link(p)})" for s, p in notebooks.items())


def bottom_line(reports: str | os.PathLike = "reports", link=lambda path: path) -> str:
    """The README's bottom line, computed from the claims: the pooled optimum of Yun et al. with its interval and
    where it lies against 10/128, how many claims hold / no / undecided / not judged / not run, and the pooled gap of
    the yellow cell to the best other cell. ``link`` maps a path relative to the repository root to the link the
    page needs (the book's pages live elsewhere)."""
    pubs = _published(reports)
    every = [c for _, _, claims in pubs for c in claims]
    if not every:
        return "(nothing published yet)"
    summary = next(((prof, path, claims) for prof, path, claims in pubs if Path(path).stem == "yun2022_summary"),
                   None)
    out = []
    if summary:
        prof, path, claims = summary
        opt = next((c for c in claims if str(c["item"]).startswith("Pooled optimum")), None)
        gap = next((c for c in claims if str(c["item"]).startswith("Pooled,")), None)
        data = claims[0]["data"] if claims else ""
        head = f"**What we found** (`{prof}` profile: {data}; reduced sizes)."
        if opt and _finite(opt.get("estimate")) and len(opt.get("ci") or []) == 2 and all(map(_finite, opt["ci"])):
            k = _settled(opt["item"])
            lo, hi = opt["ci"]
            where = ("below it" if hi < 1 else "above it" if lo > 1 else "not distinguishable from it")
            band = opt["word"] == "holds"
            head += (f" Pooled over the {k + ' ' if k else ''}grid columns where the angular update "
                     f"settled, the accuracy optimum lies at ×{opt['estimate']:.2f} [{lo:.2f}, {hi:.2f}] of Yun et "
                     f"al.'s tuning factor 10/128 ({100 * opt.get('level', 0.9):.0f} % interval): "
                     + ("within one grid step (×½–×2), and " if band else f"*{opt['word']}* within one grid step; ")
                     + f"{where}.")
        if gap and _finite(gap.get("estimate")):
            lo, hi = gap["ci"]
            k = _settled(gap.get("item"))
            over = f" over {k} columns" if k else ""
            head += (f" The yellow cell against the best other cell, pooled{over}: "
                     f"{gap['estimate']:+.2f} [{lo:+.2f}, {hi:+.2f}] points ({100 * gap.get('level', 0.95):.0f} % "
                     f"interval{', a declared second stage' if gap.get('stage') == 2 else ''}) — *{gap['word']}* "
                     "whether it is within one point.")
        head += f" [The pooled answer]({link(path)})."
        out.append(head)
    words = [word_of(c) for c in every]
    n = {w: words.count(w) for w in (*VERDICTS, "not run")}
    out.append(f"Of {len(every)} published claims: *holds* {n['holds']}, *no* {n['no']}, *undecided* "
               f"{n['undecided']} (the interval within the noise), *not judged* {n[NOT_JUDGED]} (the regime the "
               f"claim speaks of was not reached), *not run* {n['not run']}; the papers' margins of tenths of a "
               f"point need the `gpu` profile.{_stage2_words(every)} Every claim with its numbers and rule: "
               f"[`reports/README.md`]({link('reports/README.md')}); the words: [glossary]({link(GLOSSARY)}).")
    return " ".join(out)


def _stage2_words(claims: list[dict]) -> str:
    """The bottom line's sentence on the declared second stage (a leading space), or "" without one: how many of
    the verdicts it gave, how many targeted claims still wait for its runs."""
    judged = sum(c.get("stage") == 2 for c in claims)
    planned = sum(bool(c.get("stage2")) for c in claims)
    if not judged and not planned:
        return ""
    wait = (f"; {planned} more {'claim waits' if planned == 1 else 'claims wait'} for its runs" if planned else "")
    return (f" {judged} of these verdicts come from a declared second stage (more seeds or grid cells, planned "
            f"before their runs: `reports/cpu/stage2_plan.json`){wait}.")


def section_table(reports: str | os.PathLike = "reports", link=lambda path: path) -> str:
    """The README's compact table: one row per paper section (:func:`sections`), pooled rows first; the claim in a
    few words, what we found (:func:`_found`: deciding intervals as [lo, hi]), the verdict words counted, the
    notebook(s)."""
    rows = [[r["paper"], r["section"], r["claim"], _found(r["claims"]), counts(r["claims"]) or "no claim",
             _links(r["notebooks"], link)] for r in sections(reports)]
    return "\n".join(markdown_lines(SHORT_COLUMNS, rows)) if rows else "(nothing published yet)"


def summary(reports: str | os.PathLike = "reports", link=lambda path: path) -> str:
    """The results as a reader meets them first (the README's generated block, and the book's landing page): the
    :func:`bottom_line` and the :func:`section_table`. ``link`` maps a repository path to the page's link."""
    return f"{bottom_line(reports, link)}\n\n{section_table(reports, link)}"


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
