"""The user-facing documents describe the package, the papers and the results, not how the package was made.

Checked: README.md, docs/**/*.md, benchmarks/README.md and the markdown cells of every notebook. History
(dates, issue numbers, who measured what when, the state of the machine that measured it) belongs in
CHANGELOG.md, which is not checked.
"""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_MON = r"(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?"
_DAY = r"(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?"
_YEAR = r"(?:19|20)\d\d"

# (name, pattern); every pattern is matched case-insensitively against one line at a time
FORBIDDEN = [
    ("session", r"\bsessions?\b"),
    ("issue number", r"\bissues?\s*(?:no\.?\s*)?#?\d+"),
    ("#N issue reference", r"(?<![\w&#/])#\d{1,5}(?![\w-])"),  # '#8', '(#12)'; not '&#8212;', 'Eq. 27', '#channels'
    ("closing note", r"\bclosing\s+notes?\b"),
    ("ISO date", rf"\b{_YEAR}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b"),
    ("month-name date", rf"\b(?:{_MONTH}|{_MON})\s+{_DAY},?\s+{_YEAR}\b"),  # November 25, 2026 / Nov. 25 2026
    ("month-name date", rf"\b{_DAY}\s+(?:{_MONTH}|{_MON})\.?,?\s+{_YEAR}\b"),  # 25 November 2026
    ("month-name date", rf"\b{_MONTH}\s+{_YEAR}\b"),  # November 2026
    ("machine load", r"\bmachine\s+load\b|\bload\s+average\b|\bat\s+(?:a\s+)?load\s+(?:of\s+)?\d"),
    ("on this machine", r"\bon\s+this\s+machine\b"),
]
_COMPILED = [(name, re.compile(pat, re.IGNORECASE)) for name, pat in FORBIDDEN]


def offences(text: str) -> list[tuple[int, str, str]]:
    """``(line number, rule name, matched text)`` for every forbidden phrase in ``text`` (lines counted from 1)."""
    found = []
    for i, line in enumerate(text.splitlines(), 1):
        for name, rx in _COMPILED:
            for m in rx.finditer(line):
                found.append((i, name, m.group(0)))
    return found


def documents() -> list[tuple[str, str]]:
    """``(label, text)`` of every checked document; a notebook contributes one entry per markdown cell."""
    docs = []
    for p in [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        if p.exists():
            docs.append((str(p.relative_to(ROOT)), p.read_text()))
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        for k, cell in enumerate(cells):
            if cell["cell_type"] == "markdown":
                src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
                docs.append((f"{nb.relative_to(ROOT)}[cell {k}]", src))
    return docs


def test_documents_speak_about_the_package_not_its_history():
    bad = [f"{label}:{line}: {name}: {hit!r}" for label, text in documents() for line, name, hit in offences(text)]
    assert not bad, "history words in user-facing documents (move them to CHANGELOG.md):\n" + "\n".join(bad)


def test_documents_are_found():
    labels = [label for label, _ in documents()]
    assert "README.md" in labels
    assert any(label.startswith("notebooks/") for label in labels)


@pytest.mark.parametrize("text", [
    "measured in session 5", "Sessions 2 and 3", "the goals of issue 8", "fixed in issues 3", "see #12",
    "(#8)", "the closing note of the package", "on 2026-11-25", "November 25, 2026", "25 Nov 2026",
    "Nov. 25, 2026", "in November 2026", "at load 6–9", "load average 2.0", "machine load was high",
    "timed on this machine",
])
def test_patterns_catch_history(text):
    assert offences(text), text


@pytest.mark.parametrize("text", [
    "Eq. 27 gives the tuning factor", "Table 1 (a)", "#channels per layer", "Fig. 3/H.1", "Thm 2.12",
    "the issue with momentum", "&#8212;", "`#SBATCH --array=0-<n−1>%<max-parallel>`", "# 1. Submit",
    "ECCV 2022", "ICLR 2021", "arXiv:2006.08217", "the loss may 10x", "Lemma 2.1/2.2",
    "CUDA 12.4", "load the data", "2,000 test images", "colour #1f77b4", "epochs 150 and 225",
])
def test_patterns_spare_legitimate_text(text):
    assert not offences(text), offences(text)


@pytest.mark.parametrize("block, doc", [("results", "README.md"), ("costs", "docs/profiles.md")])
def test_readme_generated_blocks_are_delimited_once(block, doc):
    text = (ROOT / doc).read_text()
    begin, end = f"<!-- {block}:begin -->", f"<!-- {block}:end -->"
    assert text.count(begin) == 1 and text.count(end) == 1
    assert text.index(begin) < text.index(end)
