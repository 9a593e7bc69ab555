"""Learner copies of the notebooks: the answers taken out, the checks kept.

In ``notebooks/`` every exercise is an ``answer`` cell (a worked answer, shown collapsed) followed
by a ``check`` cell whose ``assert``s test what the answer built. :func:`learner_copy` keeps every
cell but turns each answer into a ``# YOUR CODE HERE`` stub that leaves the names the check needs
set to ``None``, and starts each check by saying which of them is still missing. ``labkit
exercises`` writes the copies to ``exercises/`` (git-ignored); ``make lab`` does it too.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

from labkit import params
from labkit.tools import zh

ANSWER, CHECK = "answer", "check"


def tags(cell) -> list[str]:
    """A cell's tags (an empty list when it has none)."""
    return list(cell.get("metadata", {}).get("tags", []))


def defined_names(source: str) -> list[str]:
    """Names a cell binds at its top level (assignments, ``def``, ``class``, imports), in order."""
    names: list[str] = []

    def add(name: str) -> None:
        if name not in names:
            names.append(name)

    def targets(node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                targets(elt)
        elif isinstance(node, ast.Starred):
            targets(node.value)

    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                targets(target)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    targets(item.optional_vars)
            for inner in node.body:
                if isinstance(inner, ast.Assign):
                    for target in inner.targets:
                        targets(target)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                add((alias.asname or alias.name).split(".")[0])
    return names


def used_names(source: str) -> set[str]:
    """Names a cell reads anywhere (``Name`` loads), builtins left out."""
    used = {
        node.id
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
    return used - set(dir(builtins))


def needed_names(answer: str, check: str) -> list[str]:
    """The names the answer defines and the check reads: what a learner must provide."""
    used = used_names(check)
    needed = [n for n in defined_names(answer) if n in used]
    if not needed:
        raise ValueError("the check cell reads nothing that the answer cell defines")
    return needed


def stub(names: list[str], lang: str = "en") -> str:
    """The learner's answer cell: a prompt, and every needed name left unset."""
    lines = [zh.message("stub", lang, names=", ".join(names))]
    lines += [f"{name} = None" for name in names]
    return "\n".join(lines)


def missing_guard(names: list[str], lang: str = "en") -> str:
    """Lines that start a learner's check cell: say which answer is still missing."""
    return "\n".join(
        f"assert {name} is not None, {zh.message('not_set', lang, name=name)!r}" for name in names
    )


def not_set(evalue: str, name: str | None = None) -> bool:
    """Whether a check's error is the guard's "not set yet" (in either language), for ``name``
    or for any name."""
    for lang in zh.LANGS:
        template = zh.MESSAGES[lang]["not_set"]
        if name and template.format(name=name) in evalue:
            return True
        if not name and template.split("{name}", 1)[1] in evalue:
            return True
    return False


def exercise_pairs(nb) -> list[tuple[int, int]]:
    """``(answer index, check index)`` for each exercise; an answer must be followed by a check."""
    pairs = []
    for i, cell in enumerate(nb.cells):
        if ANSWER not in tags(cell):
            continue
        nxt = nb.cells[i + 1] if i + 1 < len(nb.cells) else None
        if nxt is None or CHECK not in tags(nxt):
            raise ValueError(f"cell {i} is tagged '{ANSWER}' but the next cell is not a check")
        pairs.append((i, i + 1))
    return pairs


def learner_sources(answer: str, check: str, lang: str = "en") -> tuple[list[str], str, str]:
    """The names an exercise needs, and its learner's answer and check cells' sources."""
    names = needed_names(answer, check)
    return names, stub(names, lang), missing_guard(names, lang) + "\n" + check


def learner_copy(nb, lang: str = "en"):
    """A copy of ``nb`` with each answer stubbed and each check guarded; all else kept."""
    import copy

    out = copy.deepcopy(nb)
    for a, c in exercise_pairs(out):
        answer, check = out.cells[a], out.cells[c]
        _, answer.source, check.source = learner_sources(answer.source, check.source, lang)
        answer.metadata.pop("jupyter", None)  # open, not collapsed
        answer.outputs, answer.execution_count = [], None
    return out


def copy_problems(nb, copy, lang: str = "en") -> list[str]:
    """What is wrong with ``copy`` as the learner copy of ``nb`` (nothing, when it is right):
    each answer a stub that compiles, each check guarded and otherwise kept, every other cell
    unchanged. What ``make test-exercises`` checks of the copies it writes; ``make test`` runs
    the stubs and checks themselves, in the lesson's kernel (:func:`labkit.nbrun.run_lesson`)."""
    problems = []
    if len(copy.cells) != len(nb.cells):
        return [f"{len(copy.cells)} cells, the lesson has {len(nb.cells)}"]
    answers = {a for a, _ in exercise_pairs(nb)}
    for i, (orig, new) in enumerate(zip(nb.cells, copy.cells)):
        if i in answers:
            header = zh.MESSAGES[lang]["stub_header"]
            if not (new.source.startswith(header) and "= None" in new.source):
                problems.append(f"cell {i}: the answer is not stubbed")
            try:
                compile(new.source, f"stub {i}", "exec")
            except SyntaxError as exc:
                problems.append(f"cell {i}: the stub does not compile: {exc}")
        elif i - 1 in answers:
            if not (new.source.endswith(orig.source) and not_set(new.source)):
                problems.append(f"cell {i}: the check is not the lesson's, guarded")
        elif new.source != orig.source or new.cell_type != orig.cell_type:
            problems.append(f"cell {i}: differs from the lesson's")
    return problems


def write_learner_copies(out_dir: str | Path | None = None, lang: str | None = None) -> list[Path]:
    """Write a learner copy of every notebook in ``notebooks/`` to ``out_dir`` (``exercises/``),
    in ``lang`` (default ``LABKIT_LANG``, else English): Chinese copies take their markdown from
    ``zh/`` (:mod:`labkit.tools.zh`) and say "not set yet" in Chinese."""
    import nbformat

    lang = zh.language(lang)
    root = params.repo_root()
    out = Path(out_dir) if out_dir else root / "exercises"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if lang == "zh":
            nb = zh.translate(nb, path)
        target = out / path.name
        nbformat.write(learner_copy(nb, lang), target)
        written.append(target)
    return written
