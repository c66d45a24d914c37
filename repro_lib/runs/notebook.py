"""Execute notebooks with papermill (``python -m repro_lib run [NOTEBOOK …] --profile P [-p name value …]``), and
the few things a notebook asks of the package about its own execution.

Running:

* Each notebook is executed into ``<results_dir>/<profile>/<notebook>.ipynb`` with ``profile`` and ``results_dir``
  injected (plus the ``-p`` parameters it declares). A failing notebook does not stop the others
  (:func:`run_notebooks`); its partial output notebook is kept and :class:`NotebookFailed` names the notebook and
  the failing cell. At the end :func:`summary_table` lists every notebook: status, minutes, claim verdict, path.
  The same facts, one JSON line per executed notebook as it finishes (with its parameters, the time it finished,
  the torch version, the CPU and the thread setting), are appended to ``<results_dir>/<profile>/reproduce.jsonl``
  (:func:`log_outcome`), so an hours-long run that is stopped still shows what it did and what each notebook cost.
  A notebook whose runs were already in the store (resumed) shows the minutes of that execution, not of training.
* Verdicts: a notebook may end with a code cell tagged ``verdict`` whose text output (printed, or the cell's
  value) is a one-line verdict on the paper's claim; :func:`read_verdict` reads it from the executed notebook
  (blank for a notebook without one).
* Parameters: every ``-p`` value is checked against the type annotation of the parameter in the notebook's
  ``parameters`` cell before anything runs (:func:`split_parameters`); inside a notebook, :func:`check_params`
  does the same for values set by hand.

Where a notebook runs: relative paths (``results_dir``, ``./data``) are relative to the **project root**, the
nearest folder at or above the working directory that holds ``notebooks/`` and ``pyproject.toml`` (the working
directory itself outside such a checkout). The runner executes notebooks there, and a notebook opened in
JupyterLab (whose kernel starts in ``notebooks/``) moves there with :func:`work_in_project_root`, so both see the
same ``data/`` and ``results/``.

Progress: under the runner (``$REPRO_PROGRESS=lines``, set for the kernel) a sweep writes one line, overwritten as
each run finishes and naming it, that ends as the sweep's status line (``sweep.status_line``), instead of progress
bars (:func:`progress_lines`), so that executed notebooks stay small and readable.
"""
from __future__ import annotations

import ast
import contextlib
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..data import DATA_ROOT_ENV
from ..train import PROGRESS_ENV

KERNEL = "repro_lib"
NOTEBOOK_ENV = "REPRO_NOTEBOOK"  # the notebook being executed (for messages that tell how to rerun it)
VERDICT_TAG = "verdict"
RUN_LOG = "reproduce.jsonl"  # one line per executed notebook, under <results_dir>/<profile>/ (log_outcome)


class NotebookFailed(RuntimeError):
    pass


def kernel_name() -> str:
    """The venv's named kernel (``make`` registers it) if installed, else the default ``python3``."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        if KERNEL in KernelSpecManager().find_kernel_specs():
            return KERNEL
    except Exception:  # pragma: no cover - jupyter_client missing or broken
        pass
    return "python3"


# ------------------------------------------------------------------------------------------------ where
def project_root(start: str | Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working directory) holding both ``notebooks/`` and
    ``pyproject.toml``; ``start`` itself when there is none."""
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "notebooks").is_dir() and (d / "pyproject.toml").is_file():
            return d
    return here


def work_in_project_root() -> Path:
    """Make the project root the working directory (a notebook's first code cell calls this): a notebook opened
    from ``notebooks/`` in JupyterLab then reads ``./data`` and writes ``results/`` where ``make reproduce`` does."""
    root = project_root()
    if Path.cwd().resolve() != root:
        os.chdir(root)
    return root


def notebooks_in(folder: str | Path = "notebooks") -> list[Path]:
    return sorted(p for p in Path(folder).glob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def find_notebooks(names) -> list[Path]:
    """Notebook paths for ``names``: a path to an ``.ipynb`` file, or a notebook's name (``yun2022_table1``, with
    or without ``.ipynb``) in the project's ``notebooks/``; no names: every notebook there. An unknown name is a
    ``ValueError`` listing the notebooks."""
    folder = project_root() / "notebooks"
    if not names:
        return notebooks_in(folder)
    out = []
    for name in names:
        p = Path(name)
        if p.is_file():
            out.append(p)
            continue
        cand = folder / (p.name if p.suffix == ".ipynb" else f"{p.name}.ipynb")
        if not cand.is_file():
            known = " ".join(q.stem for q in notebooks_in(folder))
            raise ValueError(f"{name}: no such notebook (in {folder}: {known})")
        out.append(cand)
    return out


# ------------------------------------------------------------------------------------------------ parameters
def parse_value(text: str):
    """A ``-p`` value: a Python literal if it parses as one (``3``, ``0.1``, ``True``, ``[1, 2]``), else a string;
    ``true``/``false`` in any case are booleans (as a string, "false" would be truthy in the notebook)."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


_TYPE_WORDS = {"int": "an int", "float": "a float", "bool": "a bool (true or false)", "str": "a string"}


def _type_ok(value, type_name: str) -> bool:
    if type_name == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_name == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_name == "bool":
        return isinstance(value, bool)
    if type_name == "str":
        return isinstance(value, str)
    return True  # not a checked annotation


def coerce_parameter(name: str, value, type_name: str | None, where: str = ""):
    """``value`` as parameter ``name`` of declared type ``type_name`` (``int``, ``float``, ``bool``, ``str``; any
    other is not checked). Text (a ``-p`` value) is parsed (:func:`parse_value`) unless the type is ``str``. ``int``
    takes 2, not 1.5 or True; ``float`` takes 1 and 1.5 (an int becomes a float); ``bool`` takes true/false; ``str``
    takes any text. Anything else: a ``ValueError`` naming the parameter (and ``where`` it is declared)."""
    if isinstance(value, str) and type_name != "str":
        value = parse_value(value)
    if not _type_ok(value, type_name):
        raise ValueError(f"{name}: expected {_TYPE_WORDS[type_name]}, got {value!r} ({type(value).__name__})"
                         + (f" -- the type declared in {where}" if where else ""))
    if type_name == "float" and isinstance(value, int):
        value = float(value)
    return value


def parameter_types(path) -> dict[str, str]:
    """``{name: type name}`` of a notebook's ``parameters`` cell, as papermill reads the annotations
    (``"None"`` for a parameter without one)."""
    import papermill as pm

    return {k: v["inferred_type_name"] for k, v in pm.inspect_notebook(str(path)).items()}


#: what ``python -m repro_lib run`` (and so ``make reproduce``) passes to every notebook that declares the parameter,
#: unless ``-p`` sets it: a missing CIFAR-10/100 is downloaded by torchvision (MD5-checked); ``-p download False``
#: for offline use (a missing dataset then stops the notebook with the message of ``data.require``)
RUN_DEFAULTS = {"download": True}


def split_parameters(paths, parameters: dict, defaults: dict | None = None) -> list[dict]:
    """The ``-p`` parameters each notebook of ``paths`` declares (papermill's inspection of its ``parameters``
    cell), so ``make reproduce ARGS="-p download False"`` reaches the notebooks that have ``download`` and skips the
    rest, each value checked against (and converted to) the type the notebook declares (:func:`coerce_parameter`;
    text values, as ``-p`` gives them, are parsed by that type). A name no selected notebook declares is a typo:
    ``ValueError`` naming it, as for a value of the wrong type. ``profile`` and ``results_dir`` are the runner's own
    options (``--profile``, ``--results-dir``), not ``-p`` parameters. ``defaults`` (e.g. :data:`RUN_DEFAULTS`)
    are added for the notebooks that declare them, where ``parameters`` does not set them."""
    for own in ("profile", "results_dir"):
        if own in parameters:
            raise ValueError(f"{own}: set it with --{own.replace('_', '-')}, not -p (the output folder follows it)")
    declared = [parameter_types(p) for p in paths]
    unknown = sorted(set(parameters) - set().union(*declared)) if declared else sorted(parameters)
    if unknown:
        raise ValueError(f"{unknown[0]}: not a parameter of any selected notebook "
                         f"(`papermill --help-notebook <notebook>` lists them)")
    given = {**(defaults or {}), **parameters}
    return [{k: coerce_parameter(k, v, types[k], f"{Path(p).name}'s parameters cell")
             for k, v in given.items() if k in types} for p, types in zip(paths, declared)]


def check_params(namespace: dict) -> None:
    """Check every parameter of a notebook against the annotation of its ``parameters`` cell (the validation cell
    calls ``check_params(globals())``): a value of the wrong type (``seed = 1.5`` for ``seed: int``) is a
    ``ValueError`` naming the parameter, before anything trains. Module-level annotations of the kernel's namespace
    (``__annotations__``) are those of the parameters cell; papermill's injected values carry none."""
    for name, ann in dict(namespace.get("__annotations__", {})).items():
        type_name = ann if isinstance(ann, str) else getattr(ann, "__name__", "")
        if type_name in _TYPE_WORDS and name in namespace and not _type_ok(namespace[name], type_name):
            v = namespace[name]
            raise ValueError(f"{name}: expected {_TYPE_WORDS[type_name]}, got {v!r} ({type(v).__name__})")


@contextlib.contextmanager
def _environ(**values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ------------------------------------------------------------------------------------------------ running
def _outside(path, root: Path) -> bool:
    """Whether ``path`` is an absolute path outside the project ``root`` (a folder of this machine only)."""
    if not path or not os.path.isabs(str(path)):
        return False
    try:
        Path(path).resolve().relative_to(root)
        return False
    except ValueError:
        return True


def _portable(out: Path, root: Path) -> None:
    """The executed notebook names no folder of this machine: papermill's ``input_path`` / ``output_path`` and an
    absolute ``results_dir`` under the project root are written relative to it."""
    import nbformat

    nb = nbformat.read(str(out), as_version=4)
    meta = nb.metadata.get("papermill", {})
    changed = False
    for key in ("input_path", "output_path"):
        p = meta.get(key)
        if p and os.path.isabs(p):
            try:
                meta[key] = Path(p).resolve().relative_to(root).as_posix()
                changed = True
            except ValueError:
                pass
    if changed:
        nbformat.write(nb, str(out))


def run_notebook(path: str | Path, profile: str, parameters: dict | None = None, results_dir: str | Path = "results",
                 progress: bool = True, kernel: str | None = None) -> Path:
    """Execute one notebook in the project root (:func:`project_root`; a relative ``results_dir`` is relative to
    it); return the output notebook's path. ``progress``: papermill's own cell progress bar. A sweep inside the
    notebook leaves one status line (:func:`progress_lines`, ``sweep.status_line``).

    The executed notebook names no folder of this machine: a ``results_dir`` under the project root is passed
    relative to it, a ``data_root`` outside it reaches the notebook through ``$REPRO_DATA_ROOT`` (the parameter
    reads ""; ``data.data_root`` falls back to the variable), and papermill's paths are made relative
    (:func:`_portable`)."""
    import papermill as pm

    from ..profiles import check_profile

    check_profile(profile)
    path = Path(path).resolve()
    root = project_root()
    out = root / results_dir / profile / path.name
    out.parent.mkdir(parents=True, exist_ok=True)
    if os.path.isabs(str(results_dir)) and not _outside(results_dir, root):
        results_dir = Path(results_dir).resolve().relative_to(root)
    params = {"profile": profile, "results_dir": str(results_dir), **(parameters or {})}
    try:
        rel = path.relative_to(root)
    except ValueError:
        rel = path
    env = {PROGRESS_ENV: os.environ.get(PROGRESS_ENV) or "lines", NOTEBOOK_ENV: str(rel)}
    if _outside(params.get("data_root"), root):
        env[DATA_ROOT_ENV] = str(params["data_root"])
        params["data_root"] = ""
    try:
        with _environ(**env):
            pm.execute_notebook(str(path), str(out), parameters=params, kernel_name=kernel or kernel_name(),
                                progress_bar=progress, cwd=str(root))
    except pm.PapermillExecutionError as e:
        raise NotebookFailed(f"{path.name}: cell {e.exec_count} failed with {e.ename}: {e.evalue}\n"
                             f"partial output kept at {out}") from None
    _portable(out, root)
    return out


def read_verdict(executed: str | Path) -> str:
    """The claim verdict of an executed notebook: the text output (stdout, or the value's ``text/plain``) of its
    code cells tagged ``verdict``, first non-empty line of each, joined by "; " ("" when it has none)."""
    try:
        cells = json.loads(Path(executed).read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return ""
    found = []
    for c in cells:
        if c.get("cell_type") != "code" or VERDICT_TAG not in c.get("metadata", {}).get("tags", []):
            continue
        text = ""
        for o in c.get("outputs", []):
            if o.get("output_type") == "stream" and o.get("name") == "stdout":
                text += "".join(o.get("text", ""))
            elif o.get("output_type") in ("execute_result", "display_data"):
                text += "".join(o.get("data", {}).get("text/plain", "")) + "\n"
        line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        if line:
            found.append(line.strip("'\""))
    return "; ".join(found)


@dataclass
class Outcome:
    """What :func:`run_notebooks` reports per notebook."""

    notebook: str
    status: str  # "ok" | "FAILED"
    minutes: float
    verdict: str = ""
    output: str = ""  # the executed notebook (partial on failure)
    error: str = ""


def _print(text: str, error: bool = False) -> None:
    print(text, file=sys.stderr if error else sys.stdout, flush=True)


def run_notebooks(paths, profile: str, parameters: list[dict] | None = None, results_dir: str | Path = "results",
                  fail_fast: bool = False, log=None, run_log: bool = True) -> list[Outcome]:
    """Execute every notebook (``parameters``: one dict per notebook, :func:`split_parameters`); a failure is
    reported and the next notebook runs (``fail_fast``: stop at the first). ``log(text, error=False)`` prints;
    ``run_log``: append each outcome to ``<results_dir>/<profile>/reproduce.jsonl`` (:func:`log_outcome`)."""
    parameters = parameters or [{} for _ in paths]
    log = log or _print
    outcomes = []
    for i, (path, params) in enumerate(zip(paths, parameters), 1):
        name = Path(path).stem
        out = project_root() / results_dir / profile / Path(path).name
        log(f"[{i}/{len(paths)}] {name} (profile={profile})")
        t0 = time.time()
        try:
            out = run_notebook(path, profile, params, results_dir)
        except NotebookFailed as e:
            first = str(e).splitlines()[0]
            log(f"FAILED {e}", error=True)
            outcomes.append(Outcome(name, "FAILED", (time.time() - t0) / 60, "", _shown(out),
                                    first.split(": ", 1)[1] if ": " in first else first))
        else:
            minutes = (time.time() - t0) / 60
            log(f"    done in {minutes * 60:.0f} s -> {_shown(out)}")
            outcomes.append(Outcome(name, "ok", minutes, read_verdict(out), _shown(out)))
        if run_log:
            log_outcome(out.parent / RUN_LOG, outcomes[-1], profile, params)
        if fail_fast and outcomes[-1].status == "FAILED":
            break
    return outcomes


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else what ``platform`` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def log_outcome(path: str | Path, outcome: Outcome, profile: str, parameters: dict | None = None) -> dict:
    """Append one JSON line for an executed notebook to ``path`` (created with its folder if missing) and return
    it: the :class:`Outcome` fields, the profile and ``-p`` parameters, when it finished (UTC), and what the minutes
    depend on: torch version, CPU model, CPU count and ``$OMP_NUM_THREADS`` (the kernel's thread setting). One
    ``write`` of a whole line in append mode, flushed to disk: an interrupted run leaves complete lines."""
    from importlib import metadata

    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = None
    entry = {**asdict(outcome), "minutes": round(outcome.minutes, 3), "profile": profile,
             "parameters": dict(parameters or {}),
             "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "torch": torch_version, "cpu": cpu_model(), "cpu_count": os.cpu_count(),
             "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return entry


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def summary_table(outcomes: list[Outcome], width: int = 60) -> str:
    """A plain-text table: notebook, status (with the failing cell's error), minutes, verdict, executed notebook."""
    def cut(s: str) -> str:
        return s if len(s) <= width else s[:width - 1] + "…"

    rows = [("notebook", "status", "minutes", "verdict", "executed notebook")]
    for o in outcomes:
        status = o.status if not o.error else f"{o.status}: {o.error}"
        rows.append((o.notebook, cut(status), f"{o.minutes:.1f}", cut(o.verdict), o.output))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    lines = ["  ".join(v.ljust(w) if k != 2 else v.rjust(w) for k, (v, w) in enumerate(zip(r, widths))).rstrip()
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
