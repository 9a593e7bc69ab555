"""Which lessons a change touches: what ``make test-rerun`` runs twice.

A lesson is touched when its notebook changed, or a ``labkit`` module it reaches did: the modules
its code cells name (``labkit.setup`` reaches ``labkit/__init__.py``, ``from labkit import
plots`` reaches ``plots.py``), and every ``labkit`` module those import, transitively. "The
change" is what the commits of the submission hold: every commit within :data:`SESSION_HOURS`
of the newest (a session lasts at most three hours, and sessions are hours apart), or the
commits after ``RERUN_BASE`` where that is set; edits to tracked files count too.

The pass keeps to a budget: each lesson costs about :data:`RERUN_COST` times its header's `smoke`
time (two passes in one kernel; the second is quicker: on the 2-core box 00, 01 and 02 took 1.7,
1.4 and 1.1 times their header's time), and the touched lessons beyond the budget are named, not
run.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

from labkit.params import repo_root

SESSION_HOURS = 3.0
#: A rerun (two passes in one kernel) costs about this many times the header's `smoke` time.
RERUN_COST = 1.5


def _git(*args: str, root: Path | None = None) -> str:
    out = subprocess.run(
        ["git", *args], cwd=root or repo_root(), capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def session_base(root: Path | None = None, hours: float = SESSION_HOURS) -> str | None:
    """The newest commit made more than ``hours`` before HEAD: the changes after it are this
    submission's. None when every commit is that recent (the whole history is new)."""
    head = int(_git("log", "-1", "--format=%ct", root=root))
    before = head - int(hours * 3600)
    base = _git("log", "-1", "--format=%H", f"--before={before}", "HEAD", root=root)
    return base or None


def changed_files(base: str | None, root: Path | None = None) -> list[str]:
    """Paths changed since ``base`` (commits, and edits to tracked files not yet committed; a new
    file counts once it is added); every tracked file when ``base`` is None. A Python module
    whose code is the same, only its docstrings or comments changed (a ``Used in:`` caption),
    is left out, and so is a notebook whose code and raw cells are the same, with their tags
    (only its prose or its metadata changed: a header's times), and the face when the only
    change to its code is a module added to its lazy set (:data:`LAZY`): no lesson runs
    differently for them. (``make test`` still runs every lesson, and the Chinese edition's
    checks read the prose.)"""
    if base is None:
        return _git("ls-files", root=root).splitlines()
    paths = [p for p in _git("diff", "--name-only", base, root=root).splitlines() if p]
    return [p for p in paths if _runs_differently(p, base, root=root)]


def _runs_differently(path: str, base: str, *, root: Path | None = None) -> bool:
    if path.endswith(".py"):
        return _code_changed(path, base, root=root)
    if path.endswith(".ipynb"):
        return _cells_changed(path, base, root=root)
    return True


def _run_cells(text: str) -> list[tuple[str, str, list[str]]]:
    """What runs of a notebook: each code and raw cell (the wrong answers are raw cells the
    probes run) as ``(type, source, tags)``, in order."""
    cells = json.loads(text)["cells"]
    return [
        (c["cell_type"], "".join(c["source"]), c.get("metadata", {}).get("tags", []))
        for c in cells
        if c["cell_type"] != "markdown"
    ]


def _cells_changed(path: str, base: str, *, root: Path | None = None) -> bool:
    """Whether the code or raw cells of notebook ``path`` differ from ``base``'s (a new,
    removed or unreadable notebook counts as changed)."""
    now = (root or repo_root()) / path
    try:
        return _run_cells(_git("show", f"{base}:{path}", root=root)) != _run_cells(now.read_text())
    except (subprocess.CalledProcessError, OSError, ValueError, KeyError):
        return True


#: The face's set of lazily loaded modules: a name added to it changes nothing for a lesson that
#: does not name that module (and one that does reaches the module itself, which is new).
LAZY = "_LAZY_MODULES"


def _lazy(tree: ast.Module) -> ast.Set | None:
    """The set literal assigned to :data:`LAZY` at the top of a module, if any."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == [LAZY]
            and isinstance(node.value, ast.Set)
        ):
            return node.value
    return None


def _code(source: str, *, lazy_added: bool = False) -> str:
    """A module's code without its docstrings (comments are not in the tree either); with
    ``lazy_added``, without the elements of its :data:`LAZY` set."""
    tree = ast.parse(source)
    if lazy_added and (names := _lazy(tree)) is not None:
        names.elts = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _code_changed(path: str, base: str, *, root: Path | None = None) -> bool:
    """Whether the code of ``path`` differs from ``base``'s (a new, removed or unparsable file
    counts as changed)."""
    now = (root or repo_root()) / path
    try:
        before, after = _git("show", f"{base}:{path}", root=root), now.read_text()
        old, new = _lazy(ast.parse(before)), _lazy(ast.parse(after))
        # names only added to the lazy set: compare the rest (a removed name still counts)
        added = bool(old and new) and {ast.dump(e) for e in old.elts} <= {
            ast.dump(e) for e in new.elts
        }
        return _code(before, lazy_added=added) != _code(after, lazy_added=added)
    except (subprocess.CalledProcessError, OSError, SyntaxError):
        return True


def _module_imports(path: Path) -> set[str]:
    """The ``labkit`` names a module of the package imports (at any depth in it), dotted: each
    imported module and each ``module.name`` imported from it, for :func:`_reach` to resolve."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "labkit":
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "labkit")
    return found


def modules(package: Path) -> dict[str, Path]:
    """Each module of the package by its dotted name (``labkit.runtime.session``); a package's
    ``__init__`` by the package's (``labkit``, ``labkit.runtime``)."""
    out = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def module_of(path: str) -> str | None:
    """The dotted module a changed file ``labkit/.../x.py`` is, else None."""
    parts = Path(path).with_suffix("").parts
    if not parts or parts[0] != "labkit" or not path.endswith(".py"):
        return None
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _reach(dotted: str, files: dict[str, Path]) -> list[str]:
    """The modules a dotted name passes through: ``labkit.runtime.procs.wait_gone`` imports
    ``labkit``, ``labkit.runtime`` and ``labkit.runtime.procs``."""
    parts = dotted.split(".")
    prefixes = (".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return [name for name in prefixes if name in files]


_NAMED = re.compile(r"\blabkit(?:\.[A-Za-z_]\w*)*")
_FROM = re.compile(r"^[ \t]*from\s+(labkit(?:\.\w+)*)\s+import\s+(\([^)]*\)|[\w \t,]+)", re.M)


def lesson_modules(notebook: Path, package: Path | None = None) -> set[str]:
    """Every ``labkit`` module (dotted: ``labkit``, ``labkit.runtime.session``) the lesson
    reaches, and what those import."""
    package = package or repo_root() / "labkit"
    files = modules(package)
    code = "\n".join(
        "".join(c["source"])
        for c in json.loads(notebook.read_text())["cells"]
        if c["cell_type"] == "code"
    )
    named = set(_NAMED.findall(code))
    for module, names in _FROM.findall(code):
        named.update(f"{module}.{n}" for n in re.split(r"[\s,()]+", names) if n)
    reached: set[str] = set()
    todo = [m for n in named for m in _reach(n, files)]
    while todo:
        module = todo.pop()
        if module in reached:
            continue
        reached.add(module)
        todo += [m for n in _module_imports(files[module]) for m in _reach(n, files)]
    return reached


def _folder(notebook: Path) -> str:
    """Where a notebook lives: ``bench/`` for a lab report, else ``notebooks/``."""
    return "bench" if notebook.name.startswith("lab_") else "notebooks"


def touched_lessons(changed: list[str], lessons: list[Path]) -> tuple[list[Path], list[Path]]:
    """``(lessons whose notebook changed, lessons reached only through a changed module)``."""
    changed_set = set(changed)
    changed_modules = {module_of(p) for p in changed} - {None}
    direct = [p for p in lessons if f"{_folder(p)}/{p.name}" in changed_set]
    through = [p for p in lessons if p not in direct and lesson_modules(p) & changed_modules]
    return direct, through


def smoke_seconds(notebook: Path) -> float:
    """The lesson's `smoke` time from its header (``\\`smoke\\` ≈ 1.5 min``), in seconds."""
    header = "".join(json.loads(notebook.read_text())["cells"][0]["source"])
    found = re.search(r"`(?:SIZE=)?smoke` ≈ ([\d.]+) (min|s)\b", header)
    if found is None:
        raise ValueError(f"{notebook.name}: its header gives no `smoke` time")
    return float(found.group(1)) * (60 if found.group(2) == "min" else 1)


def plan(
    first: list[Path], candidates: list[Path], budget_s: float
) -> tuple[list[Path], list[Path], float]:
    """``(run, left out, estimated seconds)``: ``first`` always runs; each candidate follows, in
    order, while :data:`RERUN_COST` times its `smoke` time still fits in ``budget_s``."""
    run = list(first)
    cost = sum(RERUN_COST * smoke_seconds(p) for p in run)
    left = []
    for path in candidates:
        if path in run:
            continue
        extra = RERUN_COST * smoke_seconds(path)
        if cost + extra <= budget_s:
            run.append(path)
            cost += extra
        else:
            left.append(path)
    return run, left, cost


def _rotated(paths: list[Path], day: int) -> list[Path]:
    """``paths`` starting at the day's place, so that a budget cuts a different tail each day."""
    if not paths:
        return paths
    k = day % len(paths)
    return paths[k:] + paths[:k]


def rerun_plan(
    first: list[Path],
    lessons: list[Path],
    day: int,
    *,
    budget_s: float,
    skips: tuple[str, ...] = (),
    base: str | None = None,
) -> tuple[list[Path], list[str]]:
    """What ``labkit rerun --touched`` runs, and the log lines that say why: ``first`` (the
    named lessons and the day's), then the touched lessons (their notebook first, then through
    a module; each group rotated by ``day``) within ``budget_s`` (:func:`plan`). Lessons whose
    number is in ``skips`` are named but not run (``make test`` runs 04 twice already).
    ``base``: changes after it (``RERUN_BASE``); by default :func:`session_base`."""
    given = base is not None
    base = base or session_base()
    if not base:
        since = "(every commit is new: all of it)"
    else:
        since = f"since {base[:9]}" + (
            "" if given else f" (the commits within {SESSION_HOURS:g} h of HEAD)"
        )
    changed = changed_files(base)
    direct, through = touched_lessons(changed, lessons)
    skipped = [p.name[:2] for p in direct + through if p.name[:2] in skips]
    direct = [p for p in direct if p.name[:2] not in skips]
    through = [p for p in through if p.name[:2] not in skips]

    def names(paths: list[Path]) -> str:
        return " ".join(p.name[:2] for p in paths)

    lines = [
        f"{len(changed)} file(s) changed {since}; lessons touched: notebook "
        f"{names(direct) or '-'}, labkit modules {names(through) or '-'}"
        + (f" (and {' '.join(skipped)}: make test runs it twice already)" if skipped else "")
    ]
    run, left, cost = plan(first, _rotated(direct, day) + _rotated(through, day), budget_s)
    lines.append(
        f"running {names(run) or 'nothing'} (about {cost:.0f} s: {RERUN_COST:g} x each "
        f"header's smoke time; budget {budget_s:.0f} s)"
    )
    if left:
        lines.append(
            f"touched but not rerun, over the budget: {names(left)} (RERUN=all runs every lesson)"
        )
    return run, lines


def _lab_plan(reports: list[Path], day: int, *, base: str | None = None) -> tuple[list[Path], str]:
    """The lab reports ``make test`` runs, and a line that says why: those the submission
    touches (their notebook, or a ``labkit`` module they reach, changed since ``base``: by default
    :func:`session_base`), and the day's in turn (one a day), so that each still runs within a
    week. The others wait for their day (and for ``labkit small --rotation`` in the journeys
    stage)."""
    base = base or session_base()
    direct, through = touched_lessons(changed_files(base), reports)
    pick = reports[day % len(reports)] if reports else None
    run = [p for p in reports if p in direct or p in through or p == pick]
    left = [p.stem for p in reports if p not in run]
    why = (
        f"lab reports touched: {' '.join(p.stem for p in direct + through) or '-'}; "
        f"day {day}'s: {pick.stem if pick else '-'}; left to their days: {' '.join(left) or '-'}"
    )
    return run, why


def cluster_plan(
    lessons: list[Path], day: int, *, budget_s: float, base: str | None = None
) -> tuple[list[Path], str]:
    """The joining lessons ``make test-cluster`` runs, and a line that says why: every one the
    submission touches (its notebook, or a ``labkit`` module it reaches, changed since ``base``:
    by default :func:`session_base`), then the others from the day's place in turn while their
    headers' `smoke` times still fit ``budget_s``. The rest wait for their day."""
    base = base or session_base()
    direct, through = touched_lessons(changed_files(base), lessons)
    run = direct + through
    cost = sum(smoke_seconds(p) for p in run)
    for path in _rotated([p for p in lessons if p not in run], day):
        if cost + smoke_seconds(path) <= budget_s:
            run.append(path)
            cost += smoke_seconds(path)
    run.sort()
    left = [p.name[:2] for p in lessons if p not in run]
    why = (
        f"touched: {' '.join(p.name[:2] for p in direct + through) or '-'}; with the day's "
        f"rotation, {' '.join(p.name[:2] for p in run)} (about {cost:.0f} s by their headers; "
        f"budget {budget_s:.0f} s); left to their days: {' '.join(left) or '-'}"
    )
    return run, why
