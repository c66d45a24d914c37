"""The package's layers (``repro_lib/__init__.py``): engine at the top level, ``runs/``, ``results/``, ``papers/``.

Every import of every module is read from its source (function-level imports included) and checked against the
rule: the engine imports only the engine; ``results`` imports only the engine and itself -- no ``runs``, no paper
code, not even the registry (it stands below both: it judges and publishes what it is handed); ``runs`` reaches paper
code only through ``repro_lib.papers.registry`` and may use ``results``; no module imports the command line
(``__main__``); and no chain of imports comes back to where it started.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "repro_lib"
REGISTRY = "repro_lib.papers.registry"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(importer: str, level: int, module: str | None) -> str:
    """The absolute name of ``from <level dots><module> import …`` written in ``importer``."""
    if level == 0:
        return module or ""
    is_pkg = MODULES[importer].name == "__init__.py"
    base = importer.split(".")
    base = base if is_pkg else base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports_of(name: str) -> set[str]:
    """The package modules ``name`` imports anywhere in its source."""
    tree = ast.parse(MODULES[name].read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, node.level, node.module)
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
            # `from pkg import module`: an edge to the module; `from pkg import name`: to pkg itself
            targets = subs + ([base] if len(subs) < len(node.names) else [])
        else:
            continue
        for t in targets:
            if t.startswith("repro_lib"):
                while t not in MODULES and "." in t:  # an imported name, not a module: its module
                    t = t.rsplit(".", 1)[0]
                if t in MODULES and t != name:
                    out.add(t)
    return out


GRAPH = {m: imports_of(m) for m in MODULES}


def layer(name: str) -> str:
    parts = name.split(".")
    if name == "repro_lib.__main__":
        return "command line"
    if len(parts) > 1 and parts[1] in ("runs", "results", "papers"):
        return parts[1]
    return "engine"


ALLOWED = {  # layer -> the layers it may import (runs: papers only through the registry, see below)
    "engine": {"engine"},
    "runs": {"engine", "results", "runs"},
    "results": {"engine", "results"},
    "papers": {"engine", "runs", "results", "papers"},
    "command line": {"engine", "runs", "results", "papers"},
}


def test_the_folders_show_the_layers():
    subpackages = {p.parent.name for p in PKG.glob("*/__init__.py")}
    assert subpackages == {"models", "optim", "runs", "results", "papers"}
    papers = {p.parent.name for p in (PKG / "papers").glob("*/__init__.py")}
    assert papers == {"yun2022", "adamp", "li_arora", "backmatching"}
    assert not [m for m in MODULES if m.endswith("_extra")]


def test_every_import_points_down():
    upward = []
    for m, targets in GRAPH.items():
        for t in targets:
            lm, lt = layer(m), layer(t)
            if lt not in ALLOWED[lm] and not (lt == "papers" and t == REGISTRY and lm == "runs"):
                upward.append(f"{m} ({lm}) imports {t} ({lt})")
    assert not upward, "\n".join(upward)


def test_the_registry_reaches_only_engine_and_paper_code():
    """``runs`` imports the registry, so nothing the registry imports may import ``runs`` or ``results`` back."""
    seen, todo = set(), [REGISTRY]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += GRAPH[m]
    assert {layer(m) for m in seen} <= {"engine", "papers"}, sorted(m for m in seen if layer(m) not in
                                                                      ("engine", "papers"))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    assert _cycles(GRAPH) == []


def test_the_checks_see_a_circle_and_an_upward_import():
    """The walker itself: a function-level import is an edge, and the cycle finder reports a circle."""
    assert "repro_lib.papers.registry" in GRAPH["repro_lib.runs.cluster"]
    assert "repro_lib.store" in GRAPH["repro_lib.results.publish"]  # imported inside record_claims()
    assert "runs" not in ALLOWED["results"] and "papers" not in ALLOWED["results"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer("repro_lib.train") == "engine" and layer("repro_lib.models.resnet") == "engine"


@pytest.mark.parametrize("notebook", sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_every_notebook_is_registered(notebook):
    from repro_lib.papers import registry

    assert notebook in registry.NOTEBOOKS
    assert registry.get(notebook).paper and registry.get(notebook).reproduces


def test_the_registry_names_only_existing_notebooks():
    from repro_lib.papers import registry

    assert set(registry.NOTEBOOKS) == {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    with pytest.raises(ValueError, match="no registered grid"):
        registry.plans("adamp_toys", "smoke")
