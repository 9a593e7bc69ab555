"""The package's rooms (labkit/__init__.py): one name per module, cells' names resolve and stay on
the top floor but for the listed exceptions, arrows run down, no import loops, and Ray's private
modules only through labkit.runtime.rayprivate."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from labkit.runtime import rayprivate

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "labkit"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted(
    (ROOT / "bench").glob("*.ipynb")
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_each_module_has_one_name_and_importing_the_face_stays_light():
    """Issue 42: no alias layer: a module is imported by its path only, and ``import labkit``
    loads neither Ray nor torch."""
    code = (
        "import importlib, sys, labkit\n"
        "assert not hasattr(labkit, 'MOVED') and not hasattr(labkit, '_ROOMS')\n"
        "assert not [f for f in sys.meta_path if type(f).__module__.startswith('labkit')]\n"
        "for old in ('labkit.session', 'labkit.net', 'labkit.cli', 'labkit.sweep'):\n"
        "    try:\n"
        "        importlib.import_module(old)\n"
        "    except ModuleNotFoundError:\n"
        "        continue\n"
        "    raise AssertionError(f'{old} still imports')\n"
        "from labkit.runtime import session\n"
        "assert labkit.tools.doctor.report and labkit.runtime.procs.wait_gone  # as cells write\n"
        "assert labkit.bench.yardsticks.__name__ == 'labkit.bench.yardsticks'\n"
        "assert labkit.cluster.__name__ == 'labkit.cluster' and labkit.cpuuse.__file__\n"
        "assert 'ray' not in sys.modules and 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


#: Room modules a cell may name, and why (issue 42): everything else a lesson uses is on the top
#: floor. A lab report may name ``labkit.bench``, the apparatus only lab reports need.
ROOM_NAMES_IN_CELLS = {
    "labkit.runtime.net": "00 and 10 start and query a Ray by hand: 127.0.0.1, ports, the token",
    "labkit.tools.doctor": "00 shows what `labkit doctor` prints, from the same function",
    "labkit.runtime.procs": "05 waits for a killed node's processes; 10 counts a PID's children",
    "labkit.runtime.logs.expect_worker_starts": "12 warns Ray's worker-start timeout aside",
}


def room_names(path: Path) -> list[str]:
    """The room modules' names a notebook's cells use that no exception allows."""
    allowed = tuple(ROOM_NAMES_IN_CELLS) + (
        ("labkit.bench",) if path.parent.name == "bench" else ()
    )
    return sorted(
        name
        for name in _names_cells_use(path)
        if name.startswith(("labkit.runtime.", "labkit.tools.", "labkit.bench."))
        and not name.startswith(allowed)
        and not any(a.startswith(name + ".") for a in allowed)  # a chain's own prefix
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_cells_name_the_top_floor_and_the_listed_room_modules_only(path):
    assert room_names(path) == [], f"{path.name}: move these to the top floor, or list why"


def test_a_room_name_in_a_cell_is_caught(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("labkit.runtime.session.store_stats()")]
    path = tmp_path / "01_x.ipynb"
    nbformat.write(nb, path)
    assert "labkit.runtime.session.store_stats" in room_names(path)


def test_runtime_never_imports_tools_or_the_face():
    """The arrows run down: ``runtime/`` imports neither ``tools/`` nor names from the face
    (``from labkit import start_session``; ``from labkit import lang`` is a module)."""
    graph = _import_graph()
    up = [f"{m} -> {t}" for m, ts in graph.items() if m.startswith("labkit.runtime") for t in ts]
    up = [arrow for arrow in up if " -> labkit.tools" in arrow]
    for path in (PACKAGE / "runtime").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "labkit" for a in node.names):
                up.append(f"{path.name} -> import labkit")
            elif isinstance(node, ast.ImportFrom) and node.module == "labkit" and node.level == 0:
                faces = [a.name for a in node.names if not (PACKAGE / f"{a.name}.py").exists()]
                up += [f"{path.name} -> labkit.{name}" for name in faces]
    assert not up, f"arrows up from runtime/: {up}"


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
    nb.cells = [
        nbformat.v4.new_code_cell("from labkit.runtime.session import nowhere\nlabkit.plots.x_y")
    ]
    path = tmp_path / "01_x.ipynb"
    nbformat.write(nb, path)
    used = _names_cells_use(path)
    assert {"labkit.runtime.session.nowhere", "labkit.plots.x_y"} <= used
    assert not _resolves("labkit.runtime.session.nowhere") and not _resolves("labkit.plots.x_y")
    assert _resolves("labkit.plots") and _resolves("labkit.runtime.session.start")


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
                if t in modules and t != name and t != "labkit":
                    found.add(t)
        graph[name] = found
    return graph


def test_the_package_has_no_import_loops():
    graph = _import_graph()
    assert "labkit.runtime.procs" in graph["labkit.tools.cli_machine"]
    assert "labkit.tools.nbrun" in graph["labkit.tools.cli_runs"]  # imported inside a function
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


def _module_files() -> dict[str, Path]:
    """Each module of the package but the face and the rooms' ``__init__``, by dotted name."""
    return {
        _module_name(p): p
        for p in PACKAGE.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    }


def _face() -> dict[str, str]:
    """What the face (``labkit/__init__.py``) hands on, and from where: ``labkit.record`` is
    ``labkit.measure``'s, ``labkit.start_session`` is ``labkit.runtime.session``'s."""
    out = {}
    for node in ast.parse((PACKAGE / "__init__.py").read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            out.update({f"labkit.{a.name}": node.module for a in node.names})
        elif isinstance(node, ast.FunctionDef):
            inner = [n for n in ast.walk(node) if isinstance(n, ast.ImportFrom)]
            out.update({f"labkit.{node.name}": n.module for n in inner if n.module})
    return out


def users() -> dict[str, list[str]]:
    """Module -> the lessons and lab reports whose cells name it (``03``, ``lab_data``), derived
    from the cells (the deepest module each dotted name reaches; a name on the face counts for
    the module it comes from)."""
    files = _module_files()
    face = _face()
    found: dict[str, set[str]] = {name: set() for name in files}
    for path in NOTEBOOKS:
        short = path.stem[:2] if path.stem[:2].isdigit() else path.stem
        for name in _names_cells_use(path):
            name = next((m for f, m in face.items() if name == f or name.startswith(f + ".")), name)
            parts = name.split(".")
            deepest = [".".join(parts[:i]) for i in range(2, len(parts) + 1)]
            hits = [m for m in deepest if m in files]
            if hits:
                found[hits[-1]].add(short)
    return {name: sorted(s, key=lambda x: (not x[:2].isdigit(), x)) for name, s in found.items()}


def caption(used: list[str]) -> str:
    """``Used in: 00-03, 06, lab_data.``: runs of lessons joined, lab reports by name."""
    lessons = [int(u) for u in used if u.isdigit()]
    runs: list[list[int]] = []
    for n in lessons:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    said = [
        f"{r[0]:02d}-{r[-1]:02d}" if len(r) > 2 else ", ".join(f"{n:02d}" for n in r) for r in runs
    ]
    said += [u for u in used if not u.isdigit()]
    return f"Used in: {', '.join(said)}." if said else "Used in: no lesson or lab report."


def said_caption(doc: str) -> str | None:
    """The docstring's ``Used in: ...`` paragraph, as one line."""
    found = re.search(r"^Used in: .*?\.$", doc, re.M | re.S)
    return " ".join(found.group(0).split()) if found else None


def test_each_modules_caption_says_which_lessons_use_it():
    """Issue 42: a module's docstring names the lessons and lab reports whose cells use it
    (``Used in: 06, 07, lab_data.``), as the cells say: a new use or a dropped one shows here."""
    wrong = []
    for name, used in users().items():
        doc = ast.get_docstring(ast.parse(_module_files()[name].read_text())) or ""
        said = said_caption(doc)
        if said != caption(used):
            wrong.append(f"{name}: says {said or 'nothing'!r}, the cells: {caption(used)!r}")
    assert not wrong, "\n".join(wrong)


def test_notebooks_are_executed_in_one_place():
    """Issue 42: one home per job. Only :mod:`labkit.runtime.nbexec` starts a notebook kernel
    (``nbclient.NotebookClient``) or calls papermill; the runner, rerun, exercises, sweeps and
    gpu-check go through it."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "runtime" / "nbexec.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            name = ""
            if isinstance(node, ast.Attribute):
                name = node.attr
            elif isinstance(node, ast.ImportFrom):
                name = " ".join(a.name for a in node.names) + f" {node.module}"
            elif isinstance(node, ast.Import):
                name = " ".join(a.name for a in node.names)
            if any(w in name.split() for w in ("NotebookClient", "execute_notebook", "papermill")):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not found, f"notebook execution outside labkit/runtime/nbexec.py: {found}"


#: A function longer than this (its docstring apart) says why with a ``# Long: ...`` comment.
LONGEST = 60


def _code_lines(node: ast.FunctionDef) -> int:
    lines = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        lines -= first.end_lineno - first.lineno + 1
    return lines


def test_a_long_function_says_why_and_a_short_one_does_not():
    """Issue 42: a function over 60 lines of code is split, or says in a ``# Long:`` comment
    why it reads better whole; the comment goes when a split makes it short."""
    unsaid, stale = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = "\n".join(lines[node.lineno - 1 : node.end_lineno])
            said = f"\n{' ' * (node.col_offset + 4)}# Long: " in body
            where = f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"
            if _code_lines(node) > LONGEST and not said:
                unsaid.append(f"{where} ({_code_lines(node)} lines)")
            elif said and _code_lines(node) <= LONGEST:
                stale.append(where)
    assert not unsaid, f"split these, or say why with a '# Long:' comment: {unsaid}"
    assert not stale, f"short now: drop their '# Long:' comment: {stale}"


#: Functions whose callers pass every argument by position, which the rule below cannot change.
POSITIONAL_CALLERS = {
    "train._ddp_worker": "torch.multiprocessing.spawn calls it with (rank, *args)",
    "runtime.nbexec.output": "nbclient calls its override with (outs, msg, display_id, cell_index)",
}


def test_past_three_parameters_the_rest_are_keyword_only():
    """Issue 42 (DESIGN: keyword-only past three parameters): ``f(a, b, c, *, d, e)``, so a call
    names what its fourth argument means and a new parameter cannot shift the others."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            names = [a.arg for a in node.args.posonlyargs + node.args.args]
            names = names[1:] if names[:1] in (["self"], ["cls"]) else names
            if len(names) > 3 and f"{module}.{node.name}" not in POSITIONAL_CALLERS:
                found.append(f"{module}.{node.name}({', '.join(names)})")
    assert not found, f"make the parameters past the third keyword-only: {found}"


def _size_table(path: Path) -> dict[str, str]:
    """A notebook's ``by_size`` rows, each as its source, with the constants its set-up cell
    names in them (``GPT_SMALL``) spelled out."""
    setup = next(
        c.source for c in nbformat.read(path, as_version=4).cells if "by_size=" in c.source
    )
    tree = ast.parse(setup)
    consts = {
        n.targets[0].id: ast.unparse(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
    }
    call = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "setup"
    )
    table = next(k.value for k in call.keywords if k.arg == "by_size")
    rows = {}
    for key, row in zip(table.keys, table.values):
        text = ast.unparse(row)
        for name, value in consts.items():
            text = re.sub(rf"\b{name}\b", value, text)
        rows[key.value] = text
    return rows


@pytest.mark.parametrize(
    "report, lesson, shared",
    [
        (
            "lab_train",
            "07_train_ddp_amp",
            ["n_rows", "hidden", "depth", "epochs", "batch_size", "n_cpu_workers"],
        ),
        ("lab_amp", "07_train_ddp_amp", ["gpt"]),
        ("lab_lm", "13_language_model", ["gpt", "n_new_tokens"]),
    ],
)
def test_a_lab_reports_copy_of_its_lessons_sizes_is_the_lessons(report, lesson, shared):
    """Issue 42: lab_train runs "lesson 07's DDP job at each SIZE" and lab_amp "the decoder's
    shape (07's at each SIZE)", as their set-up cells say (and lab_lm 13's decoder and tokens
    per prompt); a change to the lesson's table that the report does not follow fails here,
    naming the row."""
    table = _size_table(ROOT / "notebooks" / f"{lesson}.ipynb")
    copy = _size_table(ROOT / "bench" / f"{report}.ipynb")
    differ = [k for k in shared if copy.get(k) != table.get(k)]
    assert not differ, f"{report}'s by_size rows {differ} are not {lesson}'s: {table} vs {copy}"
