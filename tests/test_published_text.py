"""What a published notebook (``reports/<profile>/*.ipynb``) shows a reader is text for people, not raw dumps.

The scanner, :func:`problems`, reads the outputs of every code cell (stream text, ``text/plain``,
``text/markdown``) and finds:

* a **dict repr**: a line that is a Python dict literal (``{'finished': 15}``), or a dict printed after some words
  (``yun2022_table5 {'finished': 15} train time 2213 s``), outside Markdown code spans;
* a **long log**: more than :data:`MAX_STREAM_LINES` non-blank lines of stream output (stdout and stderr) in one
  cell;
* a **long line**: a line over :data:`MAX_LINE` characters where the reader sees it as one unbroken line -- stream
  output, a ``text/plain`` output shown as such (not one whose HTML or Markdown is shown instead: HTML tables are
  excluded), and code blocks inside Markdown output (Markdown paragraphs and tables wrap when rendered);
* a **long opening**: a first Markdown cell over :data:`MAX_FIRST_CELL` characters (the claim and what the notebook
  tests; the protocol goes under its own heading after the parameters).

``test_published_notebooks_read_cleanly`` holds every published notebook to it; the unit tests feed it notebooks
built to break each rule, and one that breaks none.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"
PUBLISHED = sorted(REPORTS.glob("*/*.ipynb"))

MAX_STREAM_LINES = 20
MAX_LINE = 200
MAX_FIRST_CELL = 1500

_KEY = r"""(?:'[^']*'|"[^"]*"|-?\d[\w.+-]*|None|True|False|\([^()]*\))"""
DICT_LINE = re.compile(rf"^\{{\s*{_KEY}\s*:.*\}}$")  # a line that is a dict literal
DICT_AFTER_WORDS = re.compile(r"""\{\s*(?:'[^']*'|"[^"]*")\s*:\s*[^,}]+[,}]""")  # {'key': value, … inside a line
CODE_SPAN = re.compile(r"`[^`]*`")


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _shown(output: dict) -> list[tuple[str, str]]:
    """What a reader sees of one output, as (kind, text): ``stream``, ``plain`` (``text/plain`` where nothing
    richer is shown instead), ``markdown``; HTML and images are not text to scan."""
    if output.get("output_type") == "stream":
        return [("stream", _text(output.get("text")))]
    data = output.get("data", {})
    shown = []
    if "text/markdown" in data:
        shown.append(("markdown", _text(data["text/markdown"])))
    if "text/plain" in data and not any(k in data for k in ("text/html", "text/markdown", "image/png",
                                                              "image/svg+xml", "image/jpeg")):
        shown.append(("plain", _text(data["text/plain"])))
    return shown


def _dict_repr(line: str, markdown: bool) -> bool:
    s = line.strip()
    if markdown:
        s = CODE_SPAN.sub("", s)
    return bool(DICT_LINE.match(s) or DICT_AFTER_WORDS.search(s))


def _unbroken_lines(kind: str, text: str) -> list[str]:
    """The lines of ``text`` a reader sees unbroken: every line of stream and plain text; in Markdown only the lines
    of fenced code blocks."""
    if kind != "markdown":
        return text.splitlines()
    out, fenced = [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        elif fenced:
            out.append(line)
    return out


def problems(nb: dict) -> list[str]:
    """Everything in notebook ``nb`` (nbformat's JSON as a dict) that breaks the rules of this module, one line
    each, naming the cell (its index in the notebook) and what is wrong; [] for a notebook that reads cleanly."""
    found = []
    cells = nb.get("cells", [])
    first = next((c for c in cells if c.get("cell_type") == "markdown"), None)
    if first is not None and len(_text(first.get("source"))) > MAX_FIRST_CELL:
        found.append(f"first markdown cell: {len(_text(first.get('source'))):,} characters "
                     f"(at most {MAX_FIRST_CELL:,}: the claim and what is tested; the rest under '## Protocol')")
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        stream_lines = 0
        for output in cell.get("outputs", []):
            for kind, text in _shown(output):
                if kind == "stream":
                    stream_lines += sum(1 for ln in text.splitlines() if ln.strip())
                for line in text.splitlines():
                    if _dict_repr(line, kind == "markdown"):
                        found.append(f"cell {i}: a dict printed as is ({kind}): {line.strip()[:80]!r}")
                for line in _unbroken_lines(kind, text):
                    if len(line) > MAX_LINE:
                        found.append(f"cell {i}: a {len(line):,}-character line ({kind}): {line[:60]!r}…")
        if stream_lines > MAX_STREAM_LINES:
            found.append(f"cell {i}: {stream_lines} lines of printed output (at most {MAX_STREAM_LINES})")
    return found


# ------------------------------------------------------------------------------------------------ the reports


def test_there_are_published_notebooks():
    assert PUBLISHED, "no executed notebook under reports/"


@pytest.mark.parametrize("path", PUBLISHED, ids=[f"{p.parent.name}/{p.stem}" for p in PUBLISHED])
def test_published_notebooks_read_cleanly(path):
    found = problems(json.loads(path.read_text()))
    assert not found, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(found)


# ------------------------------------------------------------------------------------------- the scanner itself


def _notebook(*cells, first: str = "# Title\n\nThe claim, and what is tested.") -> dict:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(first), *cells]
    return json.loads(nbformat.writes(nb))


def _code(*outputs) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("x = 1")
    cell.outputs = list(outputs)
    return cell


def _stream(text: str, name: str = "stdout"):
    return nbformat.v4.new_output("stream", name=name, text=text)


def _data(**data):
    return nbformat.v4.new_output("display_data", data={k.replace("_", "/"): v for k, v in data.items()})


def test_a_clean_notebook_has_no_problems():
    table = "<table>" + "<td>x</td>" * 400 + "</table>"
    nb = _notebook(
        _code(_stream("yun2022_table5: 15 runs; 15 read from the store; training time 37 min\n")),
        _code(_data(text_html=table, text_plain="   a  b\n0  " + "1 " * 150)),  # the HTML is shown, not the text
        _code(_data(text_markdown="A paragraph " * 60 + "\n\n| a | b |\n|---|---|\n| " + "x " * 150 + "| y |\n")),
        _code(_data(text_markdown="Pass `optimizer_kwargs={'delta': 0.1}` to change δ.")),  # code, not a dump
        _code(_stream("".join(f"line {k}\n\n" for k in range(MAX_STREAM_LINES)))),  # blank lines do not count
    )
    assert problems(nb) == []


@pytest.mark.parametrize("text", ["{'finished': 15}", "{'missing': 298, 'finished': 17} train time 897 s",
                                  "yun2022_table5 {'finished': 15} train time 2213 s", '{"a": 1, "b": [1, 2]}',
                                  "{0: 'a', 1: 'b'}"])
def test_a_dict_repr_is_found(text):
    found = problems(_notebook(_code(_stream(text + "\n"))))
    assert len(found) == 1 and "dict printed as is" in found[0] and found[0].startswith("cell 1")
    assert problems(_notebook(_code(_data(text_plain=text))))
    if "{'" in text or '{"' in text:  # a dict with string keys, also after words in a sentence
        assert problems(_notebook(_code(_data(text_markdown=f"The runs: {text}."))))


def test_text_with_braces_is_not_a_dict_repr():
    for text in ("η ∈ {0.1, 0.2}", "LaTeX: \\frac{N}{B}", "{a, b}", "a set() and {}"):
        assert problems(_notebook(_code(_stream(text + "\n")))) == [], text


def test_a_long_log_is_found():
    log = "".join(f"run {k + 1}/24 vgg11_bn n=5000 seed={k}: finished\n" for k in range(MAX_STREAM_LINES + 1))
    found = problems(_notebook(_code(_stream(log))))
    assert found == [f"cell 1: {MAX_STREAM_LINES + 1} lines of printed output (at most {MAX_STREAM_LINES})"]
    half = "".join(f"line {k}\n" for k in range(MAX_STREAM_LINES // 2 + 1))
    assert problems(_notebook(_code(_stream(half), _stream(half, "stderr"))))  # the cell's streams together


def test_a_long_line_is_found():
    line = "Fig. 1 (2D toy): holds: " + "x" * MAX_LINE
    assert "character line (stream)" in problems(_notebook(_code(_stream(line + "\n"))))[0]
    assert "character line (plain)" in problems(_notebook(_code(_data(text_plain=line))))[0]
    fenced = f"Run this:\n\n```\n{line}\n```\n"
    assert "character line (markdown)" in problems(_notebook(_code(_data(text_markdown=fenced))))[0]
    assert problems(_notebook(_code(_stream("x" * MAX_LINE + "\n")))) == []  # at the limit


def test_a_long_first_cell_is_found():
    found = problems(_notebook(first="# Title\n\n" + "The protocol in detail. " * 70))
    assert len(found) == 1 and found[0].startswith("first markdown cell")
    assert problems(_notebook(first="# Title\n\n" + "x" * (MAX_FIRST_CELL - 9))) == []


# ------------------------------------------------------------------------------------ what the package prints


def test_a_sweep_under_the_runner_leaves_one_line_naming_its_runs(tmp_path):
    """Under the notebook runner ``run_sweep`` reports each finished run on one output line that the next
    overwrites, naming the run (its cell and seed), and leaves the sweep's status line in the saved notebook: no
    log of one line per run, no dict."""
    from repro_lib.runs.notebook import run_notebook
    from repro_lib.runs.sweep import run_names

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    params = nbformat.v4.new_code_cell('profile: str = "smoke"  # help\nresults_dir: str = "results"  # help')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# A sweep"), params, nbformat.v4.new_code_cell(
        "from repro_lib.papers.yun2022 import grids\nfrom repro_lib.runs import sweep\n"
        "plan = grids.get('yun2022_table2').plan('smoke', num_epochs=1)\n"
        "res = sweep.run_sweep(plan, results_dir, progress=True, max_members=1, label='Table 2')")]
    path = tmp_path / "sweep.ipynb"
    nbformat.write(nb, path)
    out = json.loads(run_notebook(path, "smoke", {}, results_dir=tmp_path / "results", progress=False).read_text())
    outputs = out["cells"][-1]["outputs"]
    shown = [line for o in outputs for _, text in _shown(o) for line in text.splitlines() if line.strip()]
    assert shown == ["Table 2: 4 runs; all trained now; training time " + shown[0].rsplit("time ", 1)[1]], shown
    assert problems(out) == []
    from repro_lib.papers.yun2022 import grids

    names = run_names(grids.get("yun2022_table2").plan("smoke"))
    assert names[:2] == ["N = 250, η = 200, seed 0", "N = 500, η = 200, seed 0"]  # what tells the runs apart


def test_a_grid_line_is_named_by_what_it_is():
    """Legends name a line of a grid's runs by what tells it apart, never by an empty "()" or a constant."""
    import pandas as pd

    from repro_lib.results.figures import cell_labels

    t5 = pd.DataFrame({"subtable": [""] * 5, "n": [1562] * 5, "batch_size": [8, 16, 32, 64, 128], "lr": [0.1] * 5,
                       "weight_decay": [0.0016] * 5, "yellow": [False, False, True, False, False]})
    assert cell_labels(t5[t5.yellow], t5) == ["B = 32 (yellow)"]  # one line: the dimension the table varies
    assert cell_labels(t5, t5)[:3] == ["B = 8", "B = 16", "B = 32 (yellow)"]
    t1 = pd.DataFrame({"subtable": ["a", "a", "b", "b"], "n": [500, 500, 1000, 1000], "batch_size": [32] * 4,
                       "lr": [3.2, 1.6, 6.4, 3.2], "weight_decay": [1e-4] * 4, "yellow": [True, False, True, False]})
    assert cell_labels(t1[t1.yellow], t1) == ["(a) N = 500, η = 3.2 (yellow)", "(b) N = 1,000, η = 6.4 (yellow)"]
    t7 = pd.DataFrame({"subtable": ["a", "a"], "n": [1000, 1000], "batch_size": [64, 64], "lr": [0.1, 0.2],
                       "weight_decay": [1e-4, 1e-4], "yellow": [True, False]})
    assert cell_labels(t7[t7.yellow], t7) == ["N = 1,000, B = 64 (yellow)"]  # nothing varies but η: its size


def test_figure_text_is_at_least_9_pt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from repro_lib.results import figures

    figures.theme()
    for key in ("font.size", "xtick.labelsize", "ytick.labelsize", "axes.labelsize", "legend.fontsize"):
        assert matplotlib.rcParams[key] >= figures.MIN_FONT, key
    fig, ax = plt.subplots()
    ax.plot([0, 1], label="B = 32 (yellow)")
    ax.legend()
    figures.legend_outside(ax, title="")
    legend = ax.get_legend()
    assert all(t.get_fontsize() >= figures.MIN_FONT for t in legend.get_texts())
    assert legend.get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1  # beside the axes, off the lines
    plt.close(fig)


def _grid_results(missing_columns=(), subtables=("a",)):
    import pandas as pd

    rows = []
    for sub in subtables:
        for n in (1000, 2000):
            for r, lr in enumerate((0.4, 0.2, 0.1)):
                for seed in (0, 1):
                    gone = (sub, n) in missing_columns
                    rows.append({"subtable": sub, "row": r, "n": n, "paper_n": n * 25, "lr": lr, "weight_decay": 1e-4,
                                 "paper_lr": lr, "paper_weight_decay": 1e-4, "yellow": r == 1,
                                 "paper_accuracy": 90.0 + r, "seed": seed, "status": "missing" if gone else "finished",
                                 "test_acc": float("nan") if gone else 50.0 + r + seed,
                                 "seconds": float("nan") if gone else 60.0})
    return pd.DataFrame(rows)


def test_columns_without_runs_are_one_line_not_grids_of_missing():
    from repro_lib.results import tables

    res = _grid_results(missing_columns={("a", 2000), ("b", 1000), ("b", 2000)}, subtables=("a", "b"))
    html, v = tables.table_report(res, col="n")
    assert "Reproduced (a)" in html and "Reproduced (b)" not in html and ">missing<" not in html
    assert ("No run in the store yet, so not shown above: (a) N = 2,000 (paper 50,000); (b) every column "
            "(18 runs).") in html
    assert len(v) == 4 and list(v["runs"]) == [6, 0, 0, 0]  # every column is still in the verdicts (and the CSV)
    view = tables.verdict_view(v)
    assert len(view) == 1 and "runs" not in view and "missing_runs" not in view


def test_a_sweep_status_is_one_line_of_words():
    from repro_lib.runs.sweep import status_line

    res = _grid_results(missing_columns={("a", 2000)})
    assert status_line(res, "Table 1") == "Table 1: 6 of 12 runs in the store, 6 missing; training time 6 min"
    res.loc[0, "status"] = "diverged"
    line = status_line(res.iloc[:6], "Table 1", read=6)
    assert line == ("Table 1: 6 runs; 1 diverged (η = 0.4, seed 0); 6 read from the store; training time 6 min")


def test_findings_say_the_columns_without_runs_in_one_line():
    import pandas as pd

    from repro_lib.papers.yun2022.table_notebook import say_columns, unrun_columns

    found = pd.DataFrame([dict(subtable=s, n=n, seeds=0, seeds_max=0, diverged=0, missing=21, rank="n/a",
                               verdict="undecided", reason="21 runs missing")
                          for s in ("a", "b") for n in (3125, 6250) if (s, n) != ("a", 3125)])
    assert list(unrun_columns(found)) == [True, True, True]
    assert say_columns(found, "n") == ("- **No run yet** in 3 columns ((a) N = 6,250; (b) every column): "
                                       "*not run*, 63 runs missing.")
