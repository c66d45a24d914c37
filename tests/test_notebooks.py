"""Every notebook executes under papermill with profile="smoke" (synthetic data, tiny sizes)."""
import json
import re
from pathlib import Path

import pytest

from repro_lib.runs.notebook import NotebookFailed, notebooks_in, run_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = notebooks_in(ROOT / "notebooks")


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_has_documented_parameters(path):
    cells = json.loads(path.read_text())["cells"]
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    src = "".join(tagged[0]["source"])
    for name in ("profile", "seed", "data_root", "results_dir"):
        assert f"\n{name}:" in "\n" + src, f"parameter {name} missing"
    for line in src.splitlines():
        if line.strip() and not line.startswith("#"):
            assert ":" in line.split("=")[0] and "#" in line, f"parameter without type or help: {line!r}"
    import papermill as pm

    documented = pm.inspect_notebook(str(path))  # what `papermill --help-notebook` shows
    names = [ln.split(":")[0] for ln in src.splitlines() if ln.strip() and not ln.startswith("#")]
    assert sorted(documented) == sorted(names), "papermill cannot parse some parameters (one '=' per line)"
    assert all(p["help"] for p in documented.values())
    assert not any(c.get("outputs") for c in cells if c["cell_type"] == "code"), "outputs committed"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_in_smoke_profile(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = run_notebook(path, "smoke", {}, results_dir=tmp_path / "results", progress=False)
    assert out.exists()
    # everything the notebook writes goes to results/<profile>/<notebook name>/ (besides the shared run store)
    assert (tmp_path / "results" / "smoke" / path.stem).is_dir()
    assert {p.name for p in (tmp_path / "results" / "smoke").iterdir()} <= {path.name, path.stem}
    # what the notebook shows a reader: no raw dumps, no long logs or lines, a short opening (the published notebooks
    # are held to the same rules, tests/test_published_text.py)
    from test_published_text import problems

    assert not problems(json.loads(out.read_text())), problems(json.loads(out.read_text()))


def test_failure_names_notebook_and_cell(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    p = nbformat.v4.new_code_cell('profile: str = "cpu"  # help\nresults_dir: str = "results"  # help')
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p, nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("raise ValueError('lr: bad')")]
    path = tmp_path / "broken.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(NotebookFailed, match=r"broken.ipynb: cell \d+ failed with ValueError: lr: bad"):
        run_notebook(path, "smoke", {}, results_dir=tmp_path / "results", progress=False)
    assert (tmp_path / "results" / "smoke" / "broken.ipynb").exists()  # partial output kept


def test_cli_exits_nonzero_and_names_the_failure(tmp_path, capsys):
    import nbformat

    from repro_lib.__main__ import main

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    p = nbformat.v4.new_code_cell('profile: str = "cpu"  # help\nresults_dir: str = "results"  # help\nx: int = 0  # help')
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p, nbformat.v4.new_code_cell("assert x == 3, f'x is {x}'")]
    path = tmp_path / "needs_x.ipynb"
    nbformat.write(nb, path)
    rd = str(tmp_path / "r")
    assert main(["run", str(path), "--profile", "smoke", "--results-dir", rd]) == 1
    assert re.search(r"needs_x.ipynb: cell \d+ failed with AssertionError: x is 0", capsys.readouterr().err)
    assert main(["run", str(path), "--profile", "smoke", "--results-dir", rd, "-p", "x", "3"]) == 0


def test_cli_checks_parameter_names_before_running(tmp_path, capsys):
    """``run -p``: a name no selected notebook declares is refused before anything runs (a typo would otherwise
    train the default); a name only some notebooks declare goes to those; ``true``/``false`` are booleans;
    ``profile`` / ``results_dir`` are the runner's options, not ``-p`` parameters."""
    import nbformat

    from repro_lib.__main__ import main
    from repro_lib.runs.notebook import parse_value, split_parameters

    def notebook(name, extra):
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
        p = nbformat.v4.new_code_cell('profile: str = "cpu"  # help\nresults_dir: str = "results"  # help\n' + extra)
        p.metadata["tags"] = ["parameters"]
        nb.cells = [p, nbformat.v4.new_code_cell("print('ran')")]
        nbformat.write(nb, tmp_path / name)
        return str(tmp_path / name)

    a, b = notebook("a.ipynb", "download: bool = False  # help"), notebook("b.ipynb", "seed: int = 0  # help")
    assert split_parameters([a, b], {"download": True, "seed": 2}) == [{"download": True}, {"seed": 2}]
    assert parse_value("false") is False and parse_value("True") is True and parse_value("0.1") == 0.1
    rd = str(tmp_path / "r")
    assert main(["run", a, b, "--profile", "smoke", "--results-dir", rd, "-p", "seeed", "3"]) == 2
    assert "seeed: not a parameter of any selected notebook" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()  # nothing ran
    assert main(["run", a, "--profile", "smoke", "--results-dir", rd, "-p", "profile", "paper"]) == 2
    assert "--profile" in capsys.readouterr().err
