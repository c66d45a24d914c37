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
    """A ``-p`` value: a Python literal if it parses as one (``3``, ``0.1``, ``True``, ``[1, 2]``), else a string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


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
