"""Execute notebooks with papermill: ``python -m repro_lib run [NOTEBOOK …] --profile P [-p name value …]``.

Each notebook is executed into ``<results_dir>/<profile>/<notebook>.ipynb`` with ``profile`` and
``results_dir`` injected (plus any ``-p`` parameters). On failure the partial output notebook is kept and a
``NotebookFailed`` names the notebook and the failing cell.
"""
from __future__ import annotations

import ast
from pathlib import Path

KERNEL = "repro_lib"


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


def notebooks_in(folder: str | Path = "notebooks") -> list[Path]:
    return sorted(p for p in Path(folder).glob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def parse_value(text: str):
    """A ``-p`` value: a Python literal if it parses as one (``3``, ``0.1``, ``True``, ``[1, 2]``), else a string;
    ``true``/``false`` in any case are booleans (as a string, "false" would be truthy in the notebook)."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def split_parameters(paths, parameters: dict) -> list[dict]:
    """The ``-p`` parameters each notebook of ``paths`` declares (papermill's inspection of its ``parameters``
    cell), so ``make reproduce ARGS="-p download True"`` reaches the notebooks that have ``download`` and skips the
    rest. A name no selected notebook declares is a typo: ``ValueError`` naming it. ``profile`` and
    ``results_dir`` are the runner's own options (``--profile``, ``--results-dir``), not ``-p`` parameters."""
    import papermill as pm

    for own in ("profile", "results_dir"):
        if own in parameters:
            raise ValueError(f"{own}: set it with --{own.replace('_', '-')}, not -p (the output folder follows it)")
    declared = [set(pm.inspect_notebook(str(p))) for p in paths]
    unknown = sorted(set(parameters) - set().union(*declared)) if declared else sorted(parameters)
    if unknown:
        raise ValueError(f"{unknown[0]}: not a parameter of any selected notebook "
                         f"(`papermill --help-notebook <notebook>` lists them)")
    return [{k: v for k, v in parameters.items() if k in d} for d in declared]


def run_notebook(path: str | Path, profile: str, parameters: dict | None = None, results_dir: str | Path = "results",
                 progress: bool = True, kernel: str | None = None) -> Path:
    """Execute one notebook; return the output notebook's path."""
    import papermill as pm

    from .profiles import check_profile

    check_profile(profile)
    path = Path(path)
    out = Path(results_dir) / profile / path.name
    out.parent.mkdir(parents=True, exist_ok=True)
    params = {"profile": profile, "results_dir": str(results_dir), **(parameters or {})}
    try:
        pm.execute_notebook(str(path), str(out), parameters=params, kernel_name=kernel or kernel_name(),
                            progress_bar=progress, cwd=str(Path.cwd()))
    except pm.PapermillExecutionError as e:
        raise NotebookFailed(f"{path}: cell {e.exec_count} failed with {e.ename}: {e.evalue}\n"
                             f"partial output kept at {out}") from None
    return out
