"""Notebook parameters: every typed parameter rejects a value of the wrong type, naming it, before anything runs
(``python -m repro_lib run -p``, and ``check_params`` inside a notebook); the paper's datasets are the defaults."""
import json
from pathlib import Path

import nbformat
import pytest

from repro_lib.runs.notebook import NotebookFailed, check_params, coerce_parameter, run_notebook, split_parameters

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "notebooks"
PARAMS = '''profile: str = "cpu"  # help
results_dir: str = "results"  # help
seed: int = 0  # help
lr: float = 0.1  # help
download: bool = False  # help
dataset: str = ""  # help'''


def notebook(path: Path, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    p = nbformat.v4.new_code_cell(PARAMS)
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p, *(nbformat.v4.new_code_cell(c) for c in cells)]
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("type_name, text, value", [
    ("int", "2", 2), ("int", "-3", -3), ("float", "1", 1.0), ("float", "1.5", 1.5), ("float", "1e-3", 1e-3),
    ("bool", "true", True), ("bool", "False", False), ("str", "bf16", "bf16"), ("str", "3", "3"), ("str", "", ""),
    ("str", "True", "True"),
])
def test_values_of_the_declared_type_are_accepted(type_name, text, value):
    got = coerce_parameter("x", text, type_name)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("type_name, value", [
    ("int", "1.5"), ("int", "true"), ("int", "abc"), ("int", 1.5), ("int", True), ("float", "abc"), ("float", "true"),
    ("bool", "1"), ("bool", "yes"), ("bool", 0), ("str", 3),
])
def test_values_of_another_type_are_refused_naming_the_parameter(type_name, value):
    with pytest.raises(ValueError, match=rf"^seed: expected (an?) {type_name}"):
        coerce_parameter("seed", value, type_name)


def test_run_checks_types_before_anything_runs(tmp_path, capsys):
    from repro_lib.__main__ import main

    a = notebook(tmp_path / "a.ipynb", "open('ran', 'w').write('x')")
    assert split_parameters([a], {"seed": "2", "lr": "1", "download": "true", "dataset": "3"}) == [
        {"seed": 2, "lr": 1.0, "download": True, "dataset": "3"}]
    rd = str(tmp_path / "r")
    for name, text, word in (("seed", "1.5", "an int"), ("lr", "fast", "a float"), ("download", "1", "a bool (true or false)")):
        assert main(["run", str(a), "--profile", "smoke", "--results-dir", rd, "-p", name, text]) == 2
        err = capsys.readouterr().err
        assert f"{name}: expected {word}, got" in err and "a.ipynb's parameters cell" in err
    assert not (tmp_path / "r").exists() and not (tmp_path / "ran").exists()


def test_sweep_checks_types_too(capsys):
    from repro_lib.__main__ import main

    assert main(["sweep", str(NB / "yun2022_table2.ipynb"), "--profile", "smoke", "--dry-run",
                 "-p", "seed", "1.5"]) == 2
    assert "seed: expected an int, got 1.5" in capsys.readouterr().err


def test_check_params_reads_the_annotations():
    ns = {"__annotations__": {"seed": int, "lr": float, "download": bool, "dataset": str, "other": "list"},
          "seed": 2, "lr": 1, "download": False, "dataset": "cifar10", "other": 5}
    check_params(ns)  # int for a float is fine; unchecked annotations are skipped
    for name, bad in (("seed", 1.5), ("seed", True), ("lr", "0.1"), ("download", "false"), ("dataset", None)):
        with pytest.raises(ValueError, match=f"^{name}: expected"):
            check_params({**ns, name: bad})


def test_a_notebook_refuses_a_bad_value_set_past_the_runner(tmp_path):
    """papermill injects whatever it is given; the notebook's own check_params stops it before any work."""
    path = notebook(tmp_path / "typed.ipynb", "from repro_lib.runs.notebook import check_params\ncheck_params(globals())",
                    "print('trained')")
    with pytest.raises(NotebookFailed, match=r"typed.ipynb: cell \d+ failed with ValueError: seed: expected an int, "
                                             r"got 1.5 \(float\)"):
        run_notebook(path, "smoke", {"seed": 1.5}, results_dir=tmp_path / "r", progress=False)
    out = run_notebook(path, "smoke", {"seed": 2, "lr": 1}, results_dir=tmp_path / "r", progress=False)
    assert "trained" in out.read_text()


def _defaults(path) -> dict:
    import ast

    import papermill as pm

    return {k: ast.literal_eval(v["default"]) for k, v in pm.inspect_notebook(str(path)).items()}


IMAGE_NOTEBOOKS = ["yun2022_section3", "yun2022_table1", "yun2022_table2", "yun2022_tables3_4", "yun2022_table5",
                   "yun2022_table6", "yun2022_tables7_11", "yun2022_tables8_10", "yun2022_table9", "yun2022_section6",
                   "backmatching_vgg", "li_arora_preresnet32", "adamp_cifar", "adamp_delta", "adamp_imagenet"]


@pytest.mark.parametrize("stem", IMAGE_NOTEBOOKS)
def test_image_notebooks_take_dataset_data_root_download(stem):
    d = _defaults(NB / f"{stem}.ipynb")
    assert {"dataset", "data_root", "download"} <= set(d) and d["download"] is False
    assert d["dataset"] in ("", "cifar10"), "no notebook defaults to a stand-in dataset"


def test_every_notebook_checks_its_parameters_and_works_in_the_project_root():
    for path in sorted(NB.glob("*.ipynb")):
        code = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                         if c["cell_type"] == "code")
        assert "check_params(globals())" in code and "work_in_project_root()" in code, path.name


def test_the_cpu_profiles_train_on_the_papers_datasets():
    """CIFAR-10 where the paper uses it (the JPEG mirror only when asked for), CIFAR-100 kept where it is used."""
    from repro_lib import distributed
    from repro_lib.papers.backmatching import backmatching
    from repro_lib.papers.li_arora import exp_lr
    from repro_lib.papers.yun2022.section6 import section6_plan

    cpu = backmatching.table1_plan("cpu")
    assert {c.dataset for c in cpu.cfg} == {"cifar10"} and set(cpu.paper_dataset) == {"cifar10"}
    gpu = backmatching.table1_plan("gpu", dataset="cifar10-jpeg")  # the override: the CIFAR-10 runs only
    assert {(p, c.dataset) for p, c in zip(gpu.paper_dataset, gpu.cfg)} == {("cifar10", "cifar10-jpeg"),
                                                                          ("cifar100", "cifar100")}
    assert {c.dataset for c in exp_lr.preresnet_plan("cpu").cfg} == {"cifar10"}
    sub, full, _ = section6_plan("cpu")
    assert {(c.dataset, c.val_split) for c in sub + full} == {("cifar10", "test")}
    assert distributed.in_memory("cifar10") and not distributed.in_memory("cifar10-jpeg")
    jpeg, _, _ = section6_plan("gpu", dataset="cifar10-jpeg")
    assert {(c.dataset, c.val_split) for c in jpeg} == {("cifar10-jpeg", "test")}
    assert {(c.dataset, c.val_split) for c in section6_plan("gpu")[0]} == {("imagenet", "val")}
