"""The package's rooms (labkit/__init__.py): old names resolve, cells' names resolve, no import
loops, and Ray's private modules only through labkit.runtime.rayprivate."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import labkit
from labkit.runtime import rayprivate

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "labkit"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted(
    (ROOT / "bench").glob("*.ipynb")
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_an_old_name_is_the_same_module_object_in_every_import_form():
    code = (
        "import labkit, labkit.session, sys\n"
        "from labkit.runtime import session as new\n"
        "from labkit import cluster\n"
        "from labkit.net import free_port\n"
        "assert labkit.session is new is sys.modules['labkit.session']\n"
        "assert cluster is sys.modules['labkit.runtime.cluster']\n"
        "assert free_port is sys.modules['labkit.runtime.net'].free_port\n"
        "assert labkit.cpuuse.__name__ == 'labkit.bench.cpuuse'\n"
        "assert 'ray' not in sys.modules and 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def _names_cells_use(path: Path) -> set[str]:
    """Dotted ``labkit`` names the code cells use: ``labkit.a.b`` chains and ``from`` imports."""
    used: set[str] = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        # IPython lines (%magic, !shell) are not Python
        src = "\n".join(
            "" if line.lstrip().startswith(("%", "!")) else line
            for line in cell.source.splitlines()
        )
        tree = ast.parse(src)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "labkit":
                used.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                used.update(a.name for a in node.names if a.name.split(".")[0] == "labkit")
            elif isinstance(node, ast.Attribute):
                chain, inner = [], node
                while isinstance(inner, ast.Attribute):
                    chain.insert(0, inner.attr)
                    inner = inner.value
                if isinstance(inner, ast.Name) and inner.id == "labkit":
                    used.add(".".join(["labkit", *chain]))
    return used


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        if not hasattr(obj, part):
            try:
                obj = importlib.import_module(".".join(parts[: i + 1]))
                continue
            except ModuleNotFoundError:
                return False
        obj = getattr(obj, part)
    return True


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_labkit_name_a_cell_uses_resolves(path):
    used = _names_cells_use(path)
    assert used, f"{path.name}: found no labkit name at all (the scan is broken)"
    missing = sorted(name for name in used if not _resolves(name))
    assert not missing, f"{path.name}: these labkit names do not resolve: {missing}"


def test_the_scan_sees_a_name_that_does_not_resolve(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from labkit.session import nowhere\nlabkit.plots.x_y")]
    path = tmp_path / "01_x.ipynb"
    nbformat.write(nb, path)
    used = _names_cells_use(path)
    assert {"labkit.session.nowhere", "labkit.plots.x_y"} <= used
    assert not _resolves("labkit.session.nowhere") and not _resolves("labkit.plots.x_y")
    assert _resolves("labkit.plots") and _resolves("labkit.session.start")


def _import_graph() -> dict[str, set[str]]:
    """Module -> the kit's modules it imports anywhere (in functions too), by real names."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                t = labkit.MOVED.get(t, t)
                if t in modules and t != name and t != "labkit":
                    found.add(t)
        graph[name] = found
    return graph


def test_the_package_has_no_import_loops():
    graph = _import_graph()
    assert {"labkit.runtime.procs", "labkit.tools.nbrun"} <= graph["labkit.tools.cli"]
    loops = []
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            mod = todo.pop()
            if mod == start:
                loops.append(start)
                break
            if mod not in seen:
                seen.add(mod)
                todo += graph[mod]
    assert not loops, f"modules on an import loop: {sorted(loops)}"


def test_each_private_ray_name_the_kit_uses_resolves_on_this_ray():
    for name, (module, _attr, why) in rayprivate.PRIVATE.items():
        assert rayprivate.get(name) is not None, f"{name} ({module}): {why}"
        assert why, name


PRIVATE_RAY = re.compile(r"\bray\.(?:[\w.]*\.)?_(?:private|raylet|common)\b")


def test_no_module_but_rayprivate_names_a_private_ray_module():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "rayprivate.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.Attribute):
                names = [ast.unparse(node)]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if PRIVATE_RAY.search(n)]
    assert not offenders, sorted(set(offenders))
    assert PRIVATE_RAY.search("ray.autoscaler._private.util") and PRIVATE_RAY.search("ray._raylet")
