"""The executed notebooks under ``reports/<profile>/`` and the parameters each ran with: what ``publish`` (the
results table, the stale-run check, re-rendering) and ``costs`` (the cost table) both read."""
from __future__ import annotations

import json
import os
from pathlib import Path


def published_notebooks(reports: str | os.PathLike = "reports") -> list[Path]:
    """Every executed notebook under ``reports/<profile>/``, sorted."""
    root = Path(reports)
    return sorted(p for p in root.glob("*/*.ipynb") if p.parent.name != "runs")


def notebook_parameters(executed: str | os.PathLike) -> dict:
    """The parameters an executed notebook ran with (papermill's record in its metadata)."""
    nb = json.loads(Path(executed).read_text())
    return dict(nb.get("metadata", {}).get("papermill", {}).get("parameters", {}))
