"""Every published notebook (``reports/<profile>/*.ipynb``) rendered to HTML, as a reader sees it, is held to what a
reader needs (:func:`problems`):

* **tables for people**: no snake_case column header (``lr_at_epoch``), no pandas index column (a blank first
  header over the row numbers 0, 1, 2, …), no number written with an exponent below 1e-4 (``-4.377e-17``,
  ``1.16e-06``), at most :data:`MAX_ROWS` body rows (a longer table is saved as CSV beside the notebook and linked,
  or shown whole in a scrolling box, ``tables.scrolling``; the result table under the claim lists every claim);
* **figures**: every figure drawn through pyplot after ``results.figures.theme()`` has a title and labelled axes
  (``figures.problems``, checked when the figure is drawn; a figure that lacks one prints
  ``figures.CHECK_MARK`` under itself), and a notebook with figures calls ``figures.theme()``;
* **the first screen**: the result under the claim links the glossary (``docs/glossary.md``, every term of
  ``results.screen.GLOSSARY`` defined once) and the notebook's ``## Audit``, and carries a conditions line and a
  re-run line with the exact command.

The unit tests feed :func:`problems` notebooks built to break each rule, and one that breaks none.
"""
from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path

import nbformat
import pytest

from repro_lib.results import figures, screen

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = sorted((ROOT / "reports").glob("*/*.ipynb"))

MAX_ROWS = 12  # body rows of a table on the page ("≤ ~10"; a paper's grid of 9 LRs and its header fit)
SNAKE = re.compile(r"\b[a-z][a-z0-9]*_[a-z0-9_]+\b")
# a float as a program prints it, below 1e-4: 1.16e-06, -4.377e-17, 3e-05 (decimals, a zero-padded or two-digit
# exponent); a hyperparameter in the papers' own notation ("WD 1e-5", "λ = 5e-5") is a reader's, not a raw float
SMALL_EXPONENT = re.compile(r"\d\.\d+[eE]-0*(?:[5-9]|[1-9]\d)\b|\d[eE]-(?:0[5-9]|[1-9]\d)\b")
TABLE = re.compile(r"<table\b.*?</table>", re.S)
HEAD_CELL = re.compile(r"<th\b([^>]*)>(.*?)</th>", re.S)
THEAD = re.compile(r"<thead>(.*?)</thead>", re.S)
TBODY = re.compile(r"<tbody>(.*?)</tbody>", re.S)
ROW = re.compile(r"<tr\b.*?</tr>", re.S)
TAG = re.compile(r"<[^>]+>")
SCROLL_BOX = re.compile(r'<div class="repro-scroll"[^>]*>.*?</table>\s*</div>', re.S)


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _plain(fragment: str) -> str:
    return html_lib.unescape(TAG.sub("", fragment)).strip()


def table_problems(page: str) -> list[str]:
    """The rules on tables, over every ``<table>`` of an HTML page (nbconvert's output: pandas Styler and
    DataFrame HTML, Markdown tables rendered to HTML)."""
    found = []
    # tables shown whole in a scrolling box (tables.scrolling): every row is on the page, the box keeps it short
    starts = [m.start() for m in TABLE.finditer(page)]
    boxes = [(m.start(), m.end()) for m in SCROLL_BOX.finditer(page)]
    scrolled = {k for k, at in enumerate(starts) if any(a < at < b for a, b in boxes)}
    for k, table in enumerate(TABLE.findall(page)):
        head = THEAD.search(table)
        heads = [(attrs, _plain(cell)) for attrs, cell in HEAD_CELL.findall(head.group(1) if head else "")]
        name = next((h for _, h in heads if h), f"table {k + 1}")[:40]
        for _, h in heads:
            for word in SNAKE.findall(h):
                found.append(f"table {k + 1} ({name!r}): snake_case header {word!r}")
        body = TBODY.search(table)
        rows = ROW.findall(body.group(1) if body else "")
        index_header = heads and (heads[0][1] == "" or "blank" in heads[0][0])
        row_heads = [HEAD_CELL.findall(r) for r in rows]
        numbers = [_plain(rh[0][1]) if rh else "" for rh in row_heads]
        if index_header and len(rows) > 1 and numbers == [str(i) for i in range(len(rows))]:
            found.append(f"table {k + 1} ({name!r}): an index column of row numbers")
        if len(rows) > MAX_ROWS and not (k == 0 and name == "claim") and k not in scrolled:  # every claim; a box
            found.append(f"table {k + 1} ({name!r}): {len(rows)} rows on the page (at most {MAX_ROWS}; the "
                         "rest in a linked CSV)")
        for m in SMALL_EXPONENT.finditer(_plain(body.group(1) if body else table)):
            found.append(f"table {k + 1} ({name!r}): {m.group(0)!r} written with an exponent")
            break
    return found


def _outputs(cell) -> list[str]:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(_text(o.get("text")))
        for kind in ("text/markdown", "text/plain"):
            if kind in o.get("data", {}):
                out.append(_text(o["data"][kind]))
    return out


def figure_problems(nb: dict) -> list[str]:
    """Figures: no output says a figure lacks a title or a label; a notebook with figures themes (and so checks)
    them before its first figure."""
    found, themed = [], False
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        themed = themed or "figures.theme()" in _text(cell.get("source"))
        for text in _outputs(cell):
            for line in text.splitlines():
                if line.startswith(figures.CHECK_MARK):
                    found.append(f"cell {i}: {line}")
        if any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])) and not themed:
            found.append(f"cell {i}: a figure before figures.theme() (its title and labels are not checked)")
    return found


def first_screen_problems(nb: dict) -> list[str]:
    """The result under the claim: its first line links the glossary (``docs/glossary.md``, where every term a
    result table uses is defined once: ``results.screen.GLOSSARY``) and the audit (``#audit``, a ``## Audit``
    section the notebook ends with); a conditions line and a re-run line follow its table."""
    cells = nb.get("cells", [])
    lead = []
    for cell in cells:
        if cell.get("cell_type") != "markdown":
            break
        lead.append(_text(cell.get("source")))
    result = next((t for c in cells[len(lead):len(lead) + 1] for t in _outputs(c) if t.startswith("**Result**")),
                  None)
    if result is None:
        return ["no result under the claim (publish.result_first, filled by publish.record_claims)"]
    lines = result.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.startswith("|")), len(lines))
    table = "\n".join(ln for ln in lines[first:] if ln.startswith("|"))
    found = []
    if "glossary.md)" not in lines[0]:
        found.append("the result's first line does not link the glossary (docs/glossary.md)")
    if "](#audit)" not in lines[0]:
        found.append("the result's first line does not link the audit (#audit)")
    elif not any("## Audit" in _text(c.get("source")) for c in cells if c.get("cell_type") == "markdown"):
        found.append("no '## Audit' section for the result's link")
    if table and not any(ln.startswith("**Conditions:**") for ln in lines):
        found.append("no conditions line under the result (screen.conditions)")
    if not any(ln.startswith("**Re-run:** `python -m repro_lib run") for ln in lines):
        found.append("no re-run line under the result (screen.rerun)")
    return found


def test_every_glossary_term_is_defined_in_the_glossary():
    """Every term a result table may use (``screen.GLOSSARY``) has its entry in ``docs/glossary.md``."""
    text = (ROOT / "docs" / "glossary.md").read_text()
    heads = {h.strip().lower() for h in re.findall(r"^###\s+(.+)$", text, re.M)}
    alias = {"[a, b]": "interval", "±": "interval", "Δθ": "angular update", "yellow": "yellow cell"}
    missing = [t for t in screen.GLOSSARY if not any(part.strip().lower() in heads for part in
                                                     re.split(r"/|,", alias.get(t, t)))
               and alias.get(t, t).lower() not in text.lower()]
    assert not missing, missing
    for word in ("holds", "no", "undecided", "not judged", "not run", "tuning factor", "yellow cell", "angular update",
                 "gate", "margin", "tost", "pooled contrasts", "stage"):
        assert word in heads, word


def render(nb: dict) -> str:
    """``nb`` as HTML, the way nbconvert renders it (images left out: they are not text to check)."""
    from nbconvert import HTMLExporter

    node = nbformat.reads(json.dumps(nb), as_version=4)
    for cell in node.cells:
        for o in cell.get("outputs", []):
            for kind in ("image/png", "image/jpeg", "image/svg+xml"):
                o.get("data", {}).pop(kind, None)
    for k, cell in enumerate(node.cells):
        cell.setdefault("id", f"cell-{k}")
    body, _ = HTMLExporter(template_name="classic").from_notebook_node(node)
    return body


def problems(nb: dict) -> list[str]:
    """Everything in notebook ``nb`` (nbformat's JSON as a dict) that breaks the rules of this module."""
    return table_problems(render(nb)) + figure_problems(nb) + first_screen_problems(nb)


# ------------------------------------------------------------------------------------------------ the reports


@pytest.mark.parametrize("path", PUBLISHED, ids=[f"{p.parent.name}/{p.stem}" for p in PUBLISHED])
def test_published_notebook_renders_for_readers(path):
    found = problems(json.loads(path.read_text()))
    assert not found, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(found)


# ------------------------------------------------------------------------------------------------ the rules


def _nb(result: str, *cells, lead: str = "# Title\n\nThe claim.") -> dict:
    def code(outputs, source="x = 1"):
        return {"cell_type": "code", "source": source, "metadata": {}, "execution_count": 1, "outputs": outputs}

    md = {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": result, "text/plain": "<md>"}}
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"cell_type": "markdown", "source": lead, "metadata": {}}, code([md]),
                      *[code(*c) for c in cells], _AUDIT]}


_TABLE = "| claim | ours | verdict |\n|---|---|---|\n| the yellow cell is best | 50.1 | holds |"
GOOD_RESULT = ("**Result** (data). [Terms](../../docs/glossary.md) · [Audit](#audit).\n\n"
               f"{_TABLE}\n\n"
               "**Conditions:** N = 1,000 training images.\n\n**Re-run:** `python -m repro_lib run --profile cpu x`.")
_AUDIT = {"cell_type": "markdown", "source": "## Audit", "metadata": {}}


def _html_output(html: str) -> list:
    return [{"output_type": "display_data", "metadata": {}, "data": {"text/html": html, "text/plain": "t"}}]


def test_a_clean_notebook_passes():
    table = ("<table><thead><tr><th>learning rate η</th><th>test acc. (%)</th></tr></thead>"
             "<tbody><tr><td>0.1</td><td>50.1</td></tr></tbody></table>")
    src = "from repro_lib.results import figures\nfigures.theme()"
    img = [{"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgo=", "text/plain": "f"}}]
    assert problems(_nb(GOOD_RESULT, (_html_output(table),), (img, src))) == []


def test_each_rule_fails_what_breaks_it():
    snake = "<table><thead><tr><th>lr_at_epoch</th></tr></thead><tbody><tr><td>1</td></tr></tbody></table>"
    assert any("snake_case" in p for p in problems(_nb(GOOD_RESULT, (_html_output(snake),))))
    index = ("<table><thead><tr><th></th><th>a</th></tr></thead><tbody><tr><th>0</th><td>1</td></tr>"
             "<tr><th>1</th><td>2</td></tr></tbody></table>")
    assert any("index column" in p for p in problems(_nb(GOOD_RESULT, (_html_output(index),))))
    tiny = "<table><thead><tr><th>a</th></tr></thead><tbody><tr><td>-4.377e-17</td></tr></tbody></table>"
    assert any("exponent" in p for p in problems(_nb(GOOD_RESULT, (_html_output(tiny),))))
    for raw in ("1.16e-06", "3e-05", "5.1e-15", "2e-12"):
        assert SMALL_EXPONENT.search(raw), raw
    ok = "<table><thead><tr><th>a</th></tr></thead><tbody><tr><td>1e-4, WD 1e-5</td></tr></tbody></table>"
    assert problems(_nb(GOOD_RESULT, (_html_output(ok),))) == []
    long = ("<table><thead><tr><th>a</th></tr></thead><tbody>" + "<tr><td>1</td></tr>" * (MAX_ROWS + 1)
            + "</tbody></table>")
    assert any("rows on the page" in p for p in problems(_nb(GOOD_RESULT, (_html_output(long),))))
    said = [{"output_type": "stream", "name": "stderr", "text": f"{figures.CHECK_MARK} axes 1: no title\n"}]
    assert any("no title" in p for p in problems(_nb(GOOD_RESULT, (said, "figures.theme()"))))
    img = [{"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgo=", "text/plain": "f"}}]
    assert any("before figures.theme()" in p for p in problems(_nb(GOOD_RESULT, (img,))))
    unlinked = GOOD_RESULT.replace("[Terms](../../docs/glossary.md) · ", "")
    assert any("glossary" in p for p in problems(_nb(unlinked)))
    assert any("audit" in p for p in problems(_nb(GOOD_RESULT.replace("[Audit](#audit)", ""))))
    scrolled = ('<div class="repro-scroll" style="max-height: 26em; overflow: auto"><table><thead><tr><th>a</th>'
                "</tr></thead><tbody>" + "<tr><td>1</td></tr>" * (MAX_ROWS + 1) + "</tbody></table></div>")
    assert problems(_nb(GOOD_RESULT, (_html_output(scrolled),))) == []  # shown whole, in a box that scrolls
    assert any("re-run" in p for p in problems(_nb(GOOD_RESULT.split("\n\n**Re-run:**")[0])))
    assert any("conditions" in p for p in problems(_nb(GOOD_RESULT.replace("**Conditions:**", "Conditions"))))


def test_a_figure_without_title_or_labels_is_named(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, sharey=True)
    a.plot([0, 1]), b.plot([1, 0])
    a.set_title("(a)"), a.set_xlabel("epoch"), a.set_ylabel("Δθ (rad)"), b.set_xlabel("epoch")
    assert figures.problems(fig) == ["axes 2: no title"]  # a shared y label on the row's first axes is enough
    b.set_title("(b)")
    assert figures.problems(fig) == []
    plt.close(fig)
