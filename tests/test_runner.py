"""``python -m repro_lib run`` / ``make reproduce``: it keeps going past a failing notebook, ends with a table
(status, minutes, verdict, executed notebook) and a non-zero exit if any failed; a chosen subset by name; the same
data/ and results/ as ``make lab``; executed notebooks free of progress-bar floods; one clear message for a
missing dataset."""
import json
import os
import pickle
import re
import subprocess
import tarfile
from pathlib import Path

import nbformat
import numpy as np
import pytest

from repro_lib import data
from repro_lib.runs.notebook import find_notebooks, project_root, read_verdict, run_notebook, summary_table, work_in_project_root

ROOT = Path(__file__).resolve().parents[1]


def notebook(path: Path, *cells: str, tags=None) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    p = nbformat.v4.new_code_cell('profile: str = "cpu"  # help\nresults_dir: str = "results"  # help\n'
                                  'data_root: str = ""  # help\ndownload: bool = False  # help')
    p.metadata["tags"] = ["parameters"]
    code = [nbformat.v4.new_code_cell(c) for c in cells]
    for c, t in zip(code, tags or []):
        if t:
            c.metadata["tags"] = [t]
    nb.cells = [p, *code]
    nbformat.write(nb, path)
    return path


# --------------------------------------------------------------------------------------------- the run loop
def test_keeps_going_then_prints_a_table_and_fails(tmp_path, capsys, monkeypatch):
    from repro_lib.__main__ import main

    monkeypatch.chdir(tmp_path)
    bad = notebook(tmp_path / "bad.ipynb", "raise RuntimeError('boom')")
    good = notebook(tmp_path / "good.ipynb", "x = 41 + 1", "print(f'claim holds: {x} of 42 cells')",
                    tags=[None, "verdict"])
    plain = notebook(tmp_path / "plain.ipynb", "print('no verdict here')")
    assert main(["run", str(bad), str(good), str(plain), "--profile", "smoke", "--results-dir", "r"]) == 1
    out, err = capsys.readouterr()
    assert "bad.ipynb: cell" in err and "RuntimeError: boom" in err and "1 notebook(s) failed: bad" in err
    table = out[out.index("notebook  "):].splitlines()
    assert table[0].split() == ["notebook", "status", "minutes", "verdict", "executed", "notebook"]
    rows = {ln.split()[0]: ln for ln in table[2:]}
    assert rows["bad"].split()[1] == "FAILED:" and "RuntimeError: boom" in rows["bad"]
    assert rows["good"].split()[1] == "ok" and "claim holds: 42 of 42 cells" in rows["good"]
    assert rows["plain"].split()[1] == "ok" and "no verdict" not in rows["plain"]
    for name in ("bad", "good", "plain"):  # every executed notebook (partial for the failure) is kept and listed
        assert (tmp_path / "r" / "smoke" / f"{name}.ipynb").is_file()
        assert rows[name].endswith(str(Path("r") / "smoke" / f"{name}.ipynb"))
    # the same facts, one JSON line per executed notebook, survive the terminal (reproduce.jsonl)
    lines = [json.loads(ln) for ln in (tmp_path / "r" / "smoke" / "reproduce.jsonl").read_text().splitlines()]
    assert [(e["notebook"], e["status"]) for e in lines] == [("bad", "FAILED"), ("good", "ok"), ("plain", "ok")]
    assert lines[1]["verdict"] == "claim holds: 42 of 42 cells" and "RuntimeError: boom" in lines[0]["error"]
    assert all(e["profile"] == "smoke" and e["minutes"] >= 0 and e["torch"] and e["cpu_count"] for e in lines)
    assert main(["run", str(bad), str(good), "--profile", "smoke", "--results-dir", "r", "--fail-fast"]) == 1
    assert "good" not in capsys.readouterr().out.split("executed notebook")[-1]
    more = (tmp_path / "r" / "smoke" / "reproduce.jsonl").read_text().splitlines()
    assert len(more) == 4 and json.loads(more[-1])["notebook"] == "bad"  # appended, earlier lines kept


def test_read_verdict_of_a_fake_executed_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    v1 = nbformat.v4.new_code_cell("print(v)")
    v1.metadata["tags"] = ["verdict"]
    v1.outputs = [nbformat.v4.new_output("stream", name="stdout", text="\nTable 1: supported (4 of 4 columns)\nmore\n")]
    v2 = nbformat.v4.new_code_cell("v")
    v2.metadata["tags"] = ["verdict", "other"]
    v2.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "'Fig. 3: not supported'"},
                                         execution_count=2)]
    other = nbformat.v4.new_code_cell("print('x')")
    other.outputs = [nbformat.v4.new_output("stream", name="stdout", text="not a verdict\n")]
    nb.cells = [other, v1, v2]
    nbformat.write(nb, tmp_path / "e.ipynb")
    assert read_verdict(tmp_path / "e.ipynb") == "Table 1: supported (4 of 4 columns); Fig. 3: not supported"
    nb.cells = [other]
    nbformat.write(nb, tmp_path / "none.ipynb")
    assert read_verdict(tmp_path / "none.ipynb") == "" and read_verdict(tmp_path / "missing.ipynb") == ""


def test_summary_table_columns():
    from repro_lib.runs.notebook import Outcome

    text = summary_table([Outcome("a", "ok", 1.25, "supported", "results/cpu/a.ipynb"),
                          Outcome("b", "FAILED", 0.5, "", "results/cpu/b.ipynb", "cell 3 failed with X: y")])
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["notebook", "status", "minutes", "verdict"] and set(lines[1]) <= {"-", " "}
    assert "1.2" in lines[2] and "supported" in lines[2] and lines[3].startswith("b ")
    assert "FAILED: cell 3 failed with X: y" in lines[3]


def test_a_subset_by_name(capsys, monkeypatch):
    from repro_lib.__main__ import main

    monkeypatch.chdir(ROOT)
    paths = find_notebooks(["yun2022_table1", "adamp_toys.ipynb", str(ROOT / "notebooks" / "yun2022_table2.ipynb")])
    assert [p.name for p in paths] == ["yun2022_table1.ipynb", "adamp_toys.ipynb", "yun2022_table2.ipynb"]
    assert all(p.is_file() for p in paths)
    assert main(["run", "yun2022_tabel1", "--profile", "smoke"]) == 2
    assert "yun2022_tabel1: no such notebook" in capsys.readouterr().err


def test_makefile_passes_notebooks_and_roots_lab_at_the_repository():
    def dry(*args):
        return subprocess.run(["make", "-n", "-C", str(ROOT), *args], capture_output=True, text=True,
                              check=True).stdout

    line = [ln for ln in dry("reproduce", "NOTEBOOKS=yun2022_table1 adamp_toys", "PROFILE=smoke",
                             "ARGS=-p download True").splitlines() if "repro_lib run" in ln]
    assert line and line[-1].endswith("run --profile smoke yun2022_table1 adamp_toys -p download True")
    lab = [ln for ln in dry("lab").splitlines() if "jupyter lab" in ln][-1]
    assert f"--ServerApp.root_dir={ROOT}" in lab


# --------------------------------------------------------------------------------------------- where
def test_relative_paths_resolve_against_the_project_root(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT / "notebooks")  # where a JupyterLab kernel starts
    assert project_root() == ROOT
    assert work_in_project_root() == ROOT and Path.cwd() == ROOT
    assert data.data_root("") == Path("data")  # ./data of the project, as under `make reproduce`
    monkeypatch.chdir(tmp_path)  # outside a checkout: the working directory
    assert project_root() == tmp_path.resolve() and work_in_project_root() == tmp_path.resolve()


def test_a_notebook_started_in_notebooks_folder_works_in_the_project_root(tmp_path, monkeypatch):
    """A kernel started in the notebook's folder (as JupyterLab starts it) writes to <root>/results, the folder
    the runner, started anywhere in the checkout, writes to."""
    import papermill as pm

    root = tmp_path / "proj"
    (root / "notebooks").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    nb = notebook(root / "notebooks" / "where.ipynb", "from repro_lib.runs.notebook import work_in_project_root\n"
                  "work_in_project_root()\nimport os; os.makedirs(results_dir, exist_ok=True)\n"
                  "open(os.path.join(results_dir, 'here'), 'w').write(os.getcwd())")
    pm.execute_notebook(str(nb), str(tmp_path / "lab.ipynb"), parameters={"results_dir": "results"},
                        cwd=str(root / "notebooks"), progress_bar=False)
    assert (root / "results" / "here").read_text() == str(root.resolve())
    (root / "results" / "here").unlink()
    monkeypatch.chdir(root / "notebooks")
    out = run_notebook(nb, "smoke", {}, results_dir="results", progress=False)
    assert out == root.resolve() / "results" / "smoke" / "where.ipynb"
    assert (root / "results" / "here").read_text() == str(root.resolve())
    assert not (root / "notebooks" / "results").exists()


# --------------------------------------------------------------------------------------------- progress
def test_executed_notebook_holds_one_status_line_per_sweep_not_progress_bars(tmp_path):
    nb = notebook(tmp_path / "progress.ipynb", """
import pandas as pd
from repro_lib.config import RunConfig
from repro_lib.runs.sweep import run_sweep
cfgs = [RunConfig(dataset="cifar10", synthetic=True, width=4, n=64, n_test=64, batch_size=32, num_epochs=12, lr=0.1,
                  seed=s, device="cpu", profile="smoke", schedule="constant") for s in (0, 1)]
res = run_sweep(pd.DataFrame({"cfg": cfgs}), None, progress=True)
print(res.status.tolist())""")
    out = run_notebook(nb, "smoke", {}, results_dir=tmp_path / "r", progress=False)
    outputs = [o for c in json.loads(out.read_text())["cells"] for o in c.get("outputs", [])]
    stream = "".join("".join(o["text"]) for o in outputs if o["output_type"] == "stream")
    assert len(stream.encode()) < 20_000 and "\r" not in stream
    # one display line per sweep, overwritten as each run finishes: the saved notebook keeps its last text, the
    # sweep's status line (sweep.status_line), and no line per run
    shown = ["".join(o["data"]["text/plain"]) for o in outputs if o["output_type"] == "display_data"]
    # the duration's unit depends on the machine's speed (s under a minute, min above): match the format only
    assert len(shown) == 1 and re.fullmatch(r"2 runs; all trained now; training time \d+ (s|min)", shown[0]), shown
    assert "run 1/2" not in stream and "run 2/2" not in stream
    assert "['finished', 'finished']" in stream


# --------------------------------------------------------------------------------------------- missing data
def test_the_runner_downloads_by_default_and_minus_p_turns_it_off():
    """``python -m repro_lib run`` (``make reproduce``) passes download=True to the notebooks that declare it,
    unless ``-p download False``; notebooks without the parameter get nothing."""
    from repro_lib.runs.notebook import RUN_DEFAULTS, split_parameters

    nbs = [ROOT / "notebooks" / "yun2022_table2.ipynb", ROOT / "notebooks" / "adamp_toys.ipynb"]
    assert "download" not in split_parameters(nbs[1:], {}, defaults=RUN_DEFAULTS)[0]
    table2, toys = split_parameters(nbs, {}, defaults=RUN_DEFAULTS)
    assert table2["download"] is True and "download" not in toys
    assert split_parameters(nbs, {"download": "False"}, defaults=RUN_DEFAULTS)[0]["download"] is False
    assert split_parameters(nbs, {})[0] == {}  # no defaults: only what -p gives


def test_missing_dataset_is_one_message_naming_it_the_folder_and_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(data.DataNotFoundError) as e:
        data.require("cifar10", empty, download=False)
    msg = str(e.value)
    assert msg.startswith(f"dataset 'cifar10' not found under the data root '{empty}'")
    assert "cifar-10-batches-py" in msg and "make reproduce " in msg and "-p download False" in msg
    assert "-p download True" in msg and "cifar-10-python.tar.gz" in msg
    for name, where in (("tiny_imagenet", "cs231n.stanford.edu/tiny-imagenet-200.zip"),
                        ("imagenet", "image-net.org"), ("cifar10-jpeg", "{train,test}/<class>/*.jpg")):
        with pytest.raises(data.DataNotFoundError, match=f"(?s)dataset '{name}' not found.*not downloaded "
                                                         f"automatically.*{re.escape(where)}"):
            data.require(name, empty)


def test_a_notebook_shows_the_message_not_a_torchvision_traceback(tmp_path, capsys, monkeypatch):
    """The table 2 notebook on an empty data root: it stops before training, the runner names the notebook and
    the error, the executed notebook's error is ours (no torchvision frames chained to it)."""
    from repro_lib.__main__ import main

    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)
    empty = tmp_path / "empty"
    empty.mkdir()
    rc = main(["run", "yun2022_table2", "--profile", "cpu", "--results-dir", str(tmp_path / "r"),
               "-p", "download", "False", "-p", "data_root", str(empty), "-p", "dataset", "cifar10", "-p", "num_epochs", "1"])
    out, err = capsys.readouterr()
    assert rc == 1 and "yun2022_table2.ipynb: cell" in err and "DataNotFoundError: dataset 'cifar10' not found" in err
    assert "python -m repro_lib run notebooks/yun2022_table2.ipynb -p download True" in err
    assert "FAILED: cell" in out.split("executed notebook")[-1]
    cells = json.loads((tmp_path / "r" / "cpu" / "yun2022_table2.ipynb").read_text())["cells"]
    errors = [o for c in cells for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert len(errors) == 1 and errors[0]["ename"] == "DataNotFoundError"
    trace = "".join(errors[0]["traceback"])
    assert "site-packages/torchvision" not in trace and "-p download True" in trace
    assert not list((tmp_path / "r").glob("runs/*.json"))  # nothing trained


@pytest.fixture
def fake_cifar10(tmp_path, monkeypatch):
    """torchvision's CIFAR10 pointed at a tiny archive served over HTTP from this process (127.0.0.1), with its own
    MD5s: the real download path (download, checksum, extract) without the internet."""
    import functools
    import hashlib
    import http.server
    import threading

    import torchvision

    src = tmp_path / "src" / "cifar-10-batches-py"
    src.mkdir(parents=True)
    rng = np.random.default_rng(0)

    def batch(name, n):
        with open(src / name, "wb") as f:
            pickle.dump({"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                         "labels": [i % 10 for i in range(n)]}, f)

    batch("data_batch_1", 40)
    batch("test_batch", 20)
    with open(src / "batches.meta", "wb") as f:
        pickle.dump({"label_names": [f"c{i}" for i in range(10)]}, f)
    archive = tmp_path / "src" / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        t.add(src, arcname="cifar-10-batches-py")

    def md5(p):
        return hashlib.md5(Path(p).read_bytes()).hexdigest()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):  # torchvision's HEAD check closes the connection early
            pass

    server = Server(("127.0.0.1", 0), functools.partial(Quiet, directory=str(archive.parent)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cls = torchvision.datasets.CIFAR10
    monkeypatch.setattr(cls, "url", f"http://127.0.0.1:{server.server_address[1]}/{archive.name}")
    monkeypatch.setattr(cls, "tgz_md5", md5(archive))
    monkeypatch.setattr(cls, "train_list", [["data_batch_1", md5(src / "data_batch_1")]])
    monkeypatch.setattr(cls, "test_list", [["test_batch", md5(src / "test_batch")]])
    monkeypatch.setattr(cls, "meta", {"filename": "batches.meta", "key": "label_names",
                                      "md5": md5(src / "batches.meta")})
    yield archive
    server.shutdown()
    server.server_close()


def test_download_true_fetches_checks_and_extracts(tmp_path, fake_cifar10):
    root = tmp_path / "data"
    with pytest.raises(data.DataNotFoundError, match="-p download True"):
        data.require("cifar10", root)
    assert data.require("cifar10", root, download=True) == root
    assert (root / "cifar-10-batches-py" / "data_batch_1").is_file()
    train = data.load_split("cifar10", "train", root)
    assert train.x.shape == (40, 3, 32, 32) and train.name == "cifar10"
    data.require("cifar10", root)  # there now: no download needed


def test_an_offline_download_says_so(tmp_path, fake_cifar10, monkeypatch):
    import torchvision

    monkeypatch.setattr(torchvision.datasets.CIFAR10, "url", (tmp_path / "nowhere.tar.gz").as_uri())
    with pytest.raises(data.DataNotFoundError, match=r"(?s)dataset 'cifar10'.*the download failed.*internet access"):
        data.require("cifar10", tmp_path / "data", download=True)


def test_in_memory_cifar_is_served_like_an_image_folder(tmp_path, fake_cifar10):
    """Sec. 6 on CIFAR-10 (cpu): the tensors give exactly the items the same images give as PNG files."""
    import torch
    from PIL import Image

    from repro_lib import distributed, imagefolder
    from repro_lib.papers.yun2022.section6 import section6_plan

    root = tmp_path / "data"
    data.require("cifar10", root, download=True)
    mem = distributed.TensorImageDataset("cifar10", "train", root, image_size=32, train=True, seed=3)
    folder = tmp_path / "png" / "cifar10png" / "train"
    for i in range(len(mem.labels)):  # one folder per image: file k of the folder dataset is image k
        (folder / f"{i:05d}").mkdir(parents=True)
        Image.fromarray(mem.images[i].permute(1, 2, 0).numpy()).save(folder / f"{i:05d}" / "x.png")
    files = imagefolder.ImageFolderDataset("cifar10png", "train", tmp_path / "png", image_size=32, train=True, seed=3)
    for epoch in (0, 1):
        mem.set_epoch(epoch)
        files.set_epoch(epoch)
        for i in (0, 7, 39):
            (x, y, k), (fx, _, fk) = mem[i], files[i]
            assert k == fk == i and y == i % 10 and torch.equal(x, fx)
    files.train = mem.train = False
    assert torch.equal(mem[5][0], files[5][0])
    sub, full, _ = section6_plan("cpu")
    train, val = distributed.build_data(sub[0].replace(n=20, batch_size=8, n_val=10), root)
    assert len(train) == 20 and len(val) == 10 and train.num_classes == 10 and val[0][0].shape == (3, 32, 32)
    assert os.path.basename(train.name) == "train"


def test_an_executed_notebook_names_no_machine_folder(tmp_path, monkeypatch):
    """A data root outside the project reaches the notebook as $REPRO_DATA_ROOT (the parameter reads ""); a
    results_dir inside it, and papermill's own paths, are written relative to the project root."""
    root = tmp_path / "proj"
    (root / "notebooks").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    elsewhere = tmp_path / "elsewhere"
    nb = notebook(root / "notebooks" / "paths.ipynb",
                  "import os\nfrom repro_lib import data\nprint('root:', data.data_root(data_root))")
    monkeypatch.chdir(root)
    monkeypatch.delenv("REPRO_DATA_ROOT", raising=False)
    out = run_notebook(nb, "smoke", {"data_root": str(elsewhere)}, results_dir=root / "results", progress=False)
    executed = nbformat.read(str(out), as_version=4)
    assert f"root: {elsewhere}" in executed.cells[-1].outputs[0]["text"]
    meta = executed.metadata["papermill"]
    assert meta["parameters"]["data_root"] == "" and meta["parameters"]["results_dir"] == "results"
    assert meta["input_path"] == "notebooks/paths.ipynb" and meta["output_path"] == "results/smoke/paths.ipynb"
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and str(tmp_path) not in injected[0].source and str(tmp_path) not in str(executed.metadata)
    assert "REPRO_DATA_ROOT" not in os.environ  # set for the execution only
    out = run_notebook(nb, "smoke", {"data_root": "data"}, results_dir="results", progress=False)  # relative: kept
    assert "root: data" in nbformat.read(str(out), as_version=4).cells[-1].outputs[0]["text"]
