"""Learner copies of the notebooks: the answers taken out, the checks kept.

In ``notebooks/`` every exercise is an ``answer`` cell (a worked answer, shown collapsed) followed
by a ``check`` cell whose ``assert``s test what the answer built. :func:`learner_copy` keeps every
cell but turns each answer into a ``# YOUR CODE HERE`` stub that leaves the names the check needs
set to ``None``, and starts each check by saying which of them is still missing. ``labkit
exercises`` writes the copies to ``exercises/`` (git-ignored); ``make lab`` does it too, and
never loses what a learner wrote there (:func:`sync_copy`).

Each check is followed by at least one **wrong answer**: a raw cell tagged ``wrong`` (so Run All
never runs it, and learner copies leave it out) holding the mistake a learner would plausibly
make. ``make test`` runs it in the lesson's kernel and requires the check to reject it
(:func:`labkit.tools.nbrun.probe_exercise`), as it requires the check to reject the empty stub.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
from dataclasses import dataclass
from pathlib import Path

from labkit import params
from labkit.tools import zh

ANSWER, CHECK, WRONG = "answer", "check", "wrong"


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


def stub(names: list[str], lang: str = "en", lesson: str | None = None) -> str:
    """The learner's answer cell: a prompt (and where the worked answer is, for ``lesson``'s
    copy), and every needed name left unset."""
    lines = [zh.message("stub", lang, names=", ".join(names))]
    lines += [zh.message("worked", lang, lesson=lesson)] if lesson else []
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


def wrong_answers(nb) -> dict[int, list[str]]:
    """For each check cell (by index), the wrong answers that follow it: raw cells tagged
    ``wrong``, in order. A ``wrong`` cell must be raw and follow a check or another wrong
    answer."""
    out: dict[int, list[str]] = {}
    check = None
    for i, cell in enumerate(nb.cells):
        if WRONG not in tags(cell):
            check = i if CHECK in tags(cell) else None
            continue
        if cell.cell_type != "raw":
            raise ValueError(
                f"cell {i} is tagged '{WRONG}' but is a {cell.cell_type} cell, not raw"
            )
        if check is None:
            raise ValueError(f"cell {i} is tagged '{WRONG}' but follows no check")
        out.setdefault(check, []).append(cell.source)
    return out


def without_wrong(nb):
    """A copy of ``nb`` without its wrong answers: what a learner's copy is made from."""
    import copy

    out = copy.deepcopy(nb)
    out.cells = [c for c in out.cells if WRONG not in tags(c)]
    return out


def learner_sources(
    answer: str, check: str, lang: str = "en", *, lesson: str | None = None
) -> tuple[list[str], str, str]:
    """The names an exercise needs, and its learner's answer and check cells' sources."""
    names = needed_names(answer, check)
    return names, stub(names, lang, lesson), missing_guard(names, lang) + "\n" + check


def learner_markdown(source: str, lang: str = "en", lesson: str | None = None) -> str:
    """A markdown cell as a learner copy shows it: where the lesson says its answer cell holds
    the worked answer, the copy says to write there, and where the worked answer is."""
    import re

    if not lesson:
        return source
    note = zh.message("learner_note", lang, lesson=lesson)
    return re.sub(zh.PREFILLED[lang], lambda _: note, source)


def learner_copy(nb, lang: str = "en", lesson: str | None = None):
    """A copy of ``nb`` with each answer stubbed and each check guarded, and the exercise text
    saying where to write (for ``lesson``, the notebook's file name); all else kept."""
    out = without_wrong(nb)
    for a, c in exercise_pairs(out):
        answer, check = out.cells[a], out.cells[c]
        _, answer.source, check.source = learner_sources(
            answer.source, check.source, lang, lesson=lesson
        )
        answer.metadata.pop("jupyter", None)  # open, not collapsed
        answer.outputs, answer.execution_count = [], None
    for cell in out.cells:
        if cell.cell_type == "markdown":
            cell.source = learner_markdown(cell.source, lang, lesson)
    return out


def copy_problems(nb, copy, lang: str = "en", *, lesson: str | None = None) -> list[str]:
    """What is wrong with ``copy`` as the learner copy of ``nb`` (nothing, when it is right):
    each answer a stub that compiles, each check guarded and otherwise kept, every other cell
    unchanged. What ``make test-exercises`` checks of the copies it writes; ``make test`` runs the
    stubs and checks themselves, in the lesson's kernel (:func:`labkit.tools.nbrun.run_lesson`)."""
    problems = []
    nb = without_wrong(nb)
    if any(WRONG in tags(c) for c in copy.cells):
        return ["a wrong answer is in the learner copy"]
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
        elif new.cell_type != orig.cell_type or new.source != (
            learner_markdown(orig.source, lang, lesson)
            if orig.cell_type == "markdown"
            else orig.source
        ):
            problems.append(f"cell {i}: differs from the lesson's")
    return problems


#: Where a learner copy records what the kit wrote: the copy's language and a fingerprint of
#: each cell as written (by cell id), so a later write knows which cells the learner changed.
META = "labkit"


def cell_hash(cell) -> str:
    """A short fingerprint of a cell's type and source (outputs and metadata left out: running
    a cell or folding it changes neither)."""
    return hashlib.sha1(f"{cell.cell_type}\0{cell.source}".encode()).hexdigest()[:12]


def stamp(nb, lang: str):
    """Record in ``nb``'s metadata its language and each cell's fingerprint, as written."""
    nb.metadata[META] = {"lang": lang, "cells": {c.id: cell_hash(c) for c in nb.cells}}
    return nb


def copy_language(nb, default: str) -> str:
    """The language a learner copy is in: as stamped, else told by its stubs' first line."""
    lang = nb.metadata.get(META, {}).get("lang")
    if lang in zh.LANGS:
        return lang
    for lang in zh.LANGS:
        if any(c.source.startswith(zh.MESSAGES[lang]["stub_header"]) for c in nb.cells):
            return lang
    return default


@dataclass
class Outcome:
    """What a write did to one learner copy, said in one line by :meth:`line`."""

    path: Path
    action: str  # written, up to date, updated, merged, beside, reset
    said: str
    yours: int = 0  # cells the learner changed, added or removed: the copy is theirs when > 0

    def line(self) -> str:
        return f"{self.path.name}: {self.action}: {self.said}"


def _changed(written: dict[str, str], nb) -> set[str]:
    """Cell ids whose cell differs from what was written: changed, added or removed."""
    now = {c.id: cell_hash(c) for c in nb.cells}
    return {i for i, h in now.items() if written.get(i) != h} | (written.keys() - now.keys())


def merge(mine, fresh, *, learner: set[str], upstream: set[str]):
    """``fresh`` (the lesson's new learner copy) with the cells the learner changed, added or
    removed (``learner``, by id) taken from ``mine``, the cells the lesson changed
    (``upstream``) from ``fresh``, and the rest from ``fresh`` with ``mine``'s outputs. Only for
    changes that do not overlap (:func:`sync_copy` checks)."""
    import copy as copying

    out = copying.deepcopy(fresh)
    by_id = {c.id: c for c in mine.cells}
    cells = []
    for cell in fresh.cells:
        if cell.id in learner and cell.id in by_id:
            cells.append(copying.deepcopy(by_id[cell.id]))
        elif cell.id in learner:
            continue  # the learner removed it; the lesson did not change it
        elif cell.id in by_id and cell.id not in upstream and cell.cell_type == "code":
            kept = copying.deepcopy(cell)  # the lesson's cell, with what the learner ran
            kept.outputs = copying.deepcopy(by_id[cell.id].get("outputs", []))
            kept.execution_count = by_id[cell.id].get("execution_count")
            cells.append(kept)
        else:
            cells.append(cell)
    placed = {c.id for c in cells}
    anchor = None  # the last of the learner's cells already placed: added cells go after it
    for cell in mine.cells:
        if cell.id in learner and cell.id not in placed:
            at = next((k + 1 for k, c in enumerate(cells) if c.id == anchor), 0)
            cells.insert(at, copying.deepcopy(cell))
            placed.add(cell.id)
        if cell.id in placed:
            anchor = cell.id
    out.cells = cells
    return out


def _past_versions(lesson: Path, limit: int = 30) -> list[str]:
    """The lesson's text at its last ``limit`` commits (newest first), from the git checkout it
    is in; none outside one."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=lesson.parent, capture_output=True, text=True, timeout=30,
            check=True,
        ).stdout  # fmt: skip

    try:
        commits = git("log", f"-n{limit}", "--format=%H", "--", lesson.name).split()
        return [git("show", f"{commit}:./{lesson.name}") for commit in commits]
    except (OSError, subprocess.SubprocessError):
        return []


def _unstamped(lesson: Path, mine, lang: str) -> tuple[set[str], set[str]]:
    """``(learner, upstream)`` cell ids for a copy written before fingerprints: the base is the
    copy the kit wrote then (no note on where the worked answer is), from the lesson's version,
    today's or one of its past commits, that the copy matches best; ``upstream`` compares that
    base with today's lesson rendered the same way."""
    import nbformat

    today = learner_copy(lesson_in(lesson, lang), lang)
    candidates = [today]
    for text in _past_versions(lesson):
        try:
            nb = nbformat.reads(text, as_version=4)
            candidates.append(learner_copy(zh.translate(nb, lesson) if lang == "zh" else nb, lang))
        except Exception:  # noqa: BLE001 - a version the kit could not have written a copy of
            continue
    now = {c.id: cell_hash(c) for c in mine.cells}
    best = max(candidates, key=lambda nb: sum(now.get(c.id) == cell_hash(c) for c in nb.cells))
    base = {c.id: cell_hash(c) for c in best.cells}
    return _changed(base, mine), _changed(base, today)


def _keep_old(path: Path, old_dir: Path) -> Path:
    """Move ``path`` into ``old_dir`` under a name with the time, never over another file."""
    import time

    old_dir.mkdir(parents=True, exist_ok=True)
    when = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        target = old_dir / f"{path.stem}.{when}{f'-{n}' if n else ''}{path.suffix}"
        if not target.exists():
            path.rename(target)
            return target
    raise FileExistsError(f"no free name for {path.name} in {old_dir}")


def _write_beside(fresh, target: Path) -> tuple[Path, bool]:
    """Write ``fresh`` as ``NN_x.new.ipynb`` beside ``target``, unless a ``.new`` copy is there
    that the learner changed: that one is theirs, and stays. Returns the path and whether it
    was written."""
    import nbformat

    beside = _beside(target)
    if beside.exists():
        there = nbformat.read(beside, as_version=4)
        written = there.metadata.get(META, {}).get("cells")
        if written is None or _changed(written, there):
            return beside, False
    nbformat.write(fresh, beside)
    return beside, True


def _beside(target: Path) -> Path:
    """Where the lesson's new copy goes when it cannot be merged into ``target``."""
    return target.with_name(target.stem + ".new.ipynb")


def _beside_said(beside: Path, wrote: bool) -> str:
    if wrote:
        return f"the lesson as it is now is {beside.name}"
    return f"{beside.name} has your changes too and was left as it is"


def sync_copy(lesson: Path, target: Path, lang: str, *, reset: bool = False) -> Outcome:
    """Bring the learner copy ``target`` of ``lesson`` up to date without losing anything the
    learner wrote (nbgitpuller's rule):

    * no copy yet, or ``reset`` (the old copy moved to ``.old/`` first): the lesson's copy;
    * a copy the learner has not changed: replaced when the lesson changed;
    * a copy the learner changed, the lesson unchanged: kept as it is;
    * both changed, in different cells: merged (the learner's cells kept, the lesson's changed
      cells taken; the copy before the merge kept in ``.old/``);
    * both changed in the same cell: kept, and the lesson's copy written beside it as
      ``NN_x.new.ipynb`` (unless a ``.new`` copy there has the learner's changes: it stays).

    A copy from before fingerprints is compared with the copy the kit wrote then (no note on
    where the worked answer is), so an untouched one updates and a changed one merges.

    A copy stays in its own language (``lang`` is for new copies): a Chinese copy is updated in
    Chinese by a plain ``make lab``, and the line says so."""
    import nbformat

    old_dir = target.parent / ".old"
    moved = _keep_old(target, old_dir) if reset and target.exists() else None
    if reset and _beside(target).exists():  # a fresh copy replaces both; both are kept
        _keep_old(_beside(target), old_dir)
    if not target.exists():
        fresh = stamp(learner_copy(lesson_in(lesson, lang), lang, lesson.name), lang)
        nbformat.write(fresh, target)
        if moved:
            return Outcome(target, "reset", f"a fresh copy; yours is in {_rel(moved)}")
        return Outcome(target, "written", f"a new copy ({lang})")
    mine = nbformat.read(target, as_version=4)
    own = copy_language(mine, lang)
    fresh = stamp(learner_copy(lesson_in(lesson, own), own, lesson.name), own)
    note = f" (kept in {own}, its own language; --reset {lesson.name[:2]} for {lang})"
    note = note if own != lang else ""
    written = mine.metadata.get(META, {}).get("cells")
    if written is None:  # a copy from before fingerprints: what did the kit write then?
        if [cell_hash(c) for c in mine.cells] == list(fresh.metadata[META]["cells"].values()):
            mine.metadata[META] = fresh.metadata[META]
            nbformat.write(mine, target)
            return Outcome(target, "up to date", "unchanged since the kit wrote it" + note)
        learner, upstream = _unstamped(lesson, mine, own)
        upstream |= {i for i in _changed(fresh.metadata[META]["cells"], mine) if i not in learner}
    else:
        learner, upstream = _changed(written, mine), _changed(written, fresh)
    if not upstream:
        said = f"{len(learner)} cell(s) yours, kept" if learner else "unchanged"
        return Outcome(target, "up to date", said + note, len(learner))
    if not learner:
        nbformat.write(fresh, target)
        return Outcome(target, "updated", f"the lesson changed {len(upstream)} cell(s)" + note)
    if learner & upstream:
        beside, wrote = _write_beside(fresh, target)
        return Outcome(
            target,
            "beside",
            f"yours kept; the lesson changed {len(learner & upstream)} cell(s) you changed too: "
            f"{_beside_said(beside, wrote)} (copy your answers across, or "
            f"--reset {lesson.name[:2]}, which keeps yours in .old/)" + note,
            len(learner),
        )
    merged = merge(mine, fresh, learner=learner, upstream=upstream)
    moved = _keep_old(target, old_dir)
    nbformat.write(merged, target)
    return Outcome(
        target,
        "merged",
        f"the lesson's {len(upstream)} changed cell(s) taken, your {len(learner)} kept "
        f"(your copy before: {_rel(moved)})" + note,
        len(learner),
    )


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(params.repo_root()))
    except ValueError:
        return str(path)


def lesson_in(path: Path, lang: str):
    """The lesson at ``path``, its markdown in ``lang`` (Chinese from ``zh/``)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return zh.translate(nb, path) if lang == "zh" else nb


def lessons() -> list[Path]:
    """The lessons, in order: what learner copies are made of."""
    return sorted((params.repo_root() / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def lesson(name: str) -> Path:
    """The lesson ``name`` names (``"09"`` or ``"09_serve"``); ``ValueError`` naming the lessons
    there are when it names none."""
    found = [p for p in lessons() if p.stem == name or p.name.startswith(f"{name}_")]
    if len(found) != 1:
        known = " ".join(p.name[:2] for p in lessons())
        raise ValueError(f"{name!r} names no one lesson; the lessons: {known}")
    return found[0]


def write_learner_copies(
    out_dir: str | Path | None = None, lang: str | None = None, reset: tuple[str, ...] = ()
) -> list[Outcome]:
    """Bring a learner copy of every lesson in ``notebooks/`` up to date in ``out_dir``
    (``exercises/``), never losing what a learner wrote (:func:`sync_copy`); new copies in
    ``lang`` (default ``LABKIT_LANG``, else English): Chinese copies take their markdown from
    ``zh/`` (:mod:`labkit.tools.zh`) and say "not set yet" in Chinese. ``reset`` names the
    lessons (``"01"``, or ``"all"``) whose copies are replaced, the old ones kept in ``.old/``."""
    lang = zh.language(lang)
    out = Path(out_dir) if out_dir else params.repo_root() / "exercises"
    out.mkdir(parents=True, exist_ok=True)
    return [
        sync_copy(path, out / path.name, lang, reset="all" in reset or path.name[:2] in reset)
        for path in lessons()
    ]
