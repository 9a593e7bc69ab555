"""Running a lesson cell by cell in one kernel: ``make test``'s lessons with their learner
cells (:func:`run_lesson`), ``labkit rerun`` and ``exercises --run``. The kernel is
:func:`labkit.runtime.nbexec.client`; a notebook run top to bottom is
:func:`labkit.runtime.nbexec.execute`.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from labkit.checks import error_line
from labkit.runtime.nbexec import cell_timeout, client


class LessonFailed(AssertionError):
    """A lesson run by :func:`run_lesson` failed: which cell, and what it raised."""


def _cell_head(source: str, lines: int = 6) -> str:
    body = source.strip().splitlines()
    more = f"\n    ... ({len(body) - lines} more lines)" if len(body) > lines else ""
    return "\n".join("    " + line for line in body[:lines]) + more


def probe_exercise(
    runner, nb, *, answer: str, check: str, lang: str = "en", wrong: tuple[str, ...] = ()
) -> tuple[list[str], bool, str]:
    """In a kernel that has run the lesson: run an exercise's learner cells (the stub, then the
    guarded check) and expect the check to stop at once, naming the first missing answer; then
    run the lesson's own check, unguarded, on the stub's values: it must fail too (a check that
    passes with the answer unset tests nothing). Then each ``wrong`` answer (the exercise's raw
    cells tagged ``wrong``): it must run, and the lesson's check must then fail on it with an
    ``AssertionError`` that says what it expected (a check that accepts the plausible mistake
    teaches the mistake). The names the stub unsets are saved before and put back after, so that
    later cells see the lesson's own values. Returns ``(names, ok, what the checks said)``."""
    import nbclient
    import nbformat

    from labkit.tools import exercises, zh

    names, stub, guarded = exercises.learner_sources(answer, check, lang)
    keep, restore = _keep_and_restore(names)
    cells = [nbformat.v4.new_code_cell(s) for s in (keep, stub, guarded, check, restore)]
    first = len(nb.cells)
    nb.cells += cells
    said = ["the guarded check passed with the answer unset"]
    ok = False
    try:
        runner.execute_cell(nb.cells[first], first)
        runner.execute_cell(nb.cells[first + 1], first + 1)
        try:
            runner.execute_cell(nb.cells[first + 2], first + 2)
        except nbclient.exceptions.CellExecutionError as exc:
            said = [error_line(exc)]
            expected = zh.message("not_set", lang, name=names[0])
            ok = exc.ename == "AssertionError" and expected in exc.evalue
        try:
            runner.execute_cell(nb.cells[first + 3], first + 3)
            said.append("the unguarded check PASSED with the answer unset: it tests nothing")
            ok = False
        except nbclient.exceptions.CellExecutionError as exc:
            said.append(f"unguarded: {error_line(exc)[:120]}")
        runner.execute_cell(nb.cells[first + 4], first + 4)
        for n, source in enumerate(wrong, 1):
            ok = _rejects(runner, nb, names, wrong=source, check=check, said=said, n=n) and ok
    finally:
        del nb.cells[first:]
    return names, ok, "; ".join(said)


def _keep_and_restore(names: list[str]) -> tuple[str, str]:
    """Two cells' sources: save ``names`` from the kernel's globals, and put them back after
    (deleting those that were not there), so later cells see the lesson's own values."""
    keep = f"_labkit_probe_saved = {{n: globals()[n] for n in {names!r} if n in globals()}}"
    restore = (
        f"for _labkit_name in {names!r}:\n"
        "    globals().pop(_labkit_name, None)\n"
        "globals().update(_labkit_probe_saved)\n"
        "del _labkit_probe_saved, _labkit_name"
    )
    return keep, restore


def _rejects(runner, nb, names: list[str], *, wrong: str, check: str, said: list, n: int) -> bool:
    """Run a wrong answer, then the lesson's check: whether the check rejected it, saying what
    it expected (appended to ``said``). The names the check needs are unset first, so nothing of
    the worked answer is left for a wrong answer to lean on; every name the wrong answer or the
    check binds is put back after."""
    import nbclient
    import nbformat

    from labkit.tools import exercises

    bound = list(
        dict.fromkeys(names + exercises.defined_names(wrong) + exercises.defined_names(check))
    )
    keep, restore = _keep_and_restore(bound)
    keep += "\n" + "\n".join(f"{n} = None" for n in names)  # the worked answer's values gone
    first = len(nb.cells)
    nb.cells += [nbformat.v4.new_code_cell(s) for s in (keep, wrong, check, restore)]
    runner.execute_cell(nb.cells[first], first)
    try:
        runner.execute_cell(nb.cells[first + 1], first + 1)
    except nbclient.exceptions.CellExecutionError as exc:
        said.append(f"wrong answer {n} itself raised (it must run): {error_line(exc)[:160]}")
        runner.execute_cell(nb.cells[first + 3], first + 3)
        return False
    try:
        runner.execute_cell(nb.cells[first + 2], first + 2)
        said.append(f"the check PASSED on wrong answer {n}: it accepts the mistake")
        rejected = False
    except nbclient.exceptions.CellExecutionError as exc:
        rejected = exc.ename == "AssertionError" and bool(exc.evalue.strip())
        what = "rejected" if rejected else "failed without saying what it expected"
        said.append(f"wrong answer {n} {what}: {error_line(exc)[:160]}")
    runner.execute_cell(nb.cells[first + 3], first + 3)
    return rejected


def run_lesson(
    path: str | Path,
    out: str | Path | None = None,
    timeout: int | None = None,
    *,
    twice: bool = False,
    exercises: bool = True,
    lang: str = "en",
) -> dict:
    """Run a lesson as ``make test`` does: every code cell but the teardown; with ``twice``,
    all of them again in the same kernel (a learner's second Run All); then, in that kernel,
    each exercise's learner cells (:func:`probe_exercise`); then the teardown, which runs
    whatever failed before it. The executed lesson is written to ``out`` (its outputs; the
    probes' cells are not kept). Raises :class:`LessonFailed` naming the cell and its error,
    or the exercises whose stub or wrong answer their check did not reject. Returns the seconds,
    each exercise's ``(names, ok, what the check said)`` and the paths of this machine the
    outputs print (:func:`outside_paths`). A cell may run ``timeout`` seconds
    (:func:`labkit.runtime.nbexec.cell_timeout` when not given). With ``lang="zh"`` it runs
    the Chinese copy (:func:`labkit.tools.zh.translate`) in a kernel with ``LABKIT_LANG=zh``."""
    import time

    import nbformat

    from labkit.tools import zh

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    if lang == "zh":  # the Chinese copy: its markdown, comments and printed words (zh/)
        nb = zh.translate(nb, path)
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    sources = _exercise_sources(nb) if exercises else []
    runner = client(nb, path, timeout or cell_timeout())
    failed: tuple[int, BaseException] | None = None
    probes: list[tuple[list[str], bool, str]] = []
    start = time.monotonic()
    stops = _stops()
    current = -1
    with runner.setup_kernel(env={**os.environ, "LABKIT_LANG": lang}):
        try:
            for i in code[:-1] * (2 if twice else 1):
                current = i
                runner.execute_cell(nb.cells[i], i)
            # The Chinese learner copies' cells too, for a lesson with its Chinese in zh/ (every
            # lesson of the workbook; a planted test lesson has none).
            langs = ["en", "zh"] if zh.path_for(path).exists() else ["en"]
            for n, (answer, check, wrong) in enumerate(sources, 1):
                current = -n
                for lang in langs:  # the wrong answers once: the check's code is the same
                    once = tuple(wrong) if lang == langs[0] else ()
                    probes.append(
                        probe_exercise(
                            runner, nb, answer=answer, check=check, lang=lang, wrong=once
                        )
                    )
        except stops as exc:
            failed = (current, exc)
        finally:
            try:
                runner.execute_cell(nb.cells[code[-1]], code[-1])
            except stops as exc:
                failed = failed or (code[-1], exc)
    seconds = time.monotonic() - start
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(out))
    _raise_what_failed(path, nb, failed, probes=probes)
    return {"seconds": seconds, "exercises": probes, "outside_paths": outside_paths(nb)}


def _exercise_sources(nb) -> list[tuple[str, str, list[str]]]:
    """Each exercise of ``nb`` as ``(answer's source, check's source, wrong answers' sources)``."""
    from labkit.tools import exercises as ex

    wrongs = ex.wrong_answers(nb)
    return [
        (nb.cells[a].source, nb.cells[c].source, wrongs.get(c, []))
        for a, c in ex.exercise_pairs(nb)
    ]


def _stops() -> tuple[type[BaseException], ...]:
    """What stops a lesson run: a cell's error, its timeout, the kernel's death."""
    import nbclient

    errors = nbclient.exceptions
    return (errors.CellExecutionError, errors.CellTimeoutError, errors.DeadKernelError)


def _raise_what_failed(path: Path, nb, failed: tuple | None, *, probes: list) -> None:
    """:class:`LessonFailed` for :func:`run_lesson`: the cell that failed (``(index, error)``, a
    negative index for an exercise's learner cells) with its first lines, else the exercises
    whose check did not reject the stub or a wrong answer."""
    if failed is not None:
        index, exc = failed
        where = f"cell {index}" if index >= 0 else f"exercise {-index}'s learner cells"
        head = f"\n{_cell_head(nb.cells[index].source)}" if index >= 0 else ""
        raise LessonFailed(f"{path.name} failed at {where}: {error_line(exc)}{head}")
    bad = [f"{', '.join(names)}: {said}" for names, ok, said in probes if not ok]
    if bad:
        raise LessonFailed(
            f"{path.name}: an exercise's check did not reject the empty stub (saying which "
            "answer is missing) or its wrong answer (saying what it expected):\n  "
            + "\n  ".join(bad)
        )


#: Places every machine has, which an output may name: not a person's or a build's.
SYSTEM_PATHS = ("/dev/", "/proc/", "/sys/", "/usr/", "/etc/", "/bin/")


def outside_paths(nb, root: Path | None = None) -> list[str]:
    """Absolute paths outside the repository that ``nb``'s outputs print (the site publishes
    them): a home folder, a temporary file, another install. Paths inside ``root`` (the
    repository) and :data:`SYSTEM_PATHS` pass. Returns ``"cell N: path"`` for each."""
    import re

    from labkit import params

    root = Path(root or params.repo_root())
    # The kit's own output folders may be set outside the repository (LABKIT_RESULTS_DIR,
    # LABKIT_DATA_DIR): paths under them are where the user asked, not the machine's own.
    chosen = [
        Path(os.environ[k]).resolve()
        for k in ("LABKIT_RESULTS_DIR", "LABKIT_DATA_DIR")
        if os.environ.get(k)
    ]
    found = []
    pattern = re.compile(r"(?<![\w.:/~-])/(?:[\w.@+-]+/)*[\w.@+-]+")
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            text = out.get("text", "") + out.get("evalue", "")
            text += "".join(str(v) for k, v in out.get("data", {}).items() if k.startswith("text/"))
            for path in set(pattern.findall(text)):
                if path.count("/") < 2 or path.startswith(SYSTEM_PATHS):
                    continue
                if not Path("/" + path.split("/")[1]).exists():
                    continue  # not a path here (a cut display, a URL's tail)
                if any(Path(path) == r or r in Path(path).parents for r in (root, *chosen)):
                    continue
                found.append(f"cell {i}: {path}")
    return sorted(found)


def run_until_first_error(path: str | Path, timeout: int | None = None):
    """Execute a notebook until its first error; return ``(cell index, ename, evalue)``.

    ``(None, None, None)`` if it ran to the end. After an error it still runs the notebook's
    last code cell (its teardown: stopping the session or cluster), as a learner would, so no
    Ray process outlives the kernel. Used to show that a learner copy stops at its first
    check, with the message that says what is missing.
    """
    import nbclient
    import nbformat

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    failed = None
    runner = client(nb, path, timeout or cell_timeout())
    with runner.setup_kernel():
        for i in code:
            try:
                runner.execute_cell(nb.cells[i], i)
            except nbclient.exceptions.CellExecutionError:
                failed = i
                break
        if failed is not None and failed != code[-1]:
            try:
                runner.execute_cell(nb.cells[code[-1]], code[-1])
            except nbclient.exceptions.CellExecutionError:
                pass
    if failed is None:
        return None, None, None
    error = next(o for o in nb.cells[failed].outputs if o.get("output_type") == "error")
    return failed, error["ename"], error["evalue"]


def stops_at_first_check(path: str | Path, timeout: int | None = None) -> tuple[bool, str]:
    """Run a learner copy: it must stop at its first ``check`` cell, saying what is missing."""
    import nbformat

    from labkit.tools.exercises import CHECK, not_set, tags

    nb = nbformat.read(path, as_version=4)
    first_check = next(i for i, c in enumerate(nb.cells) if CHECK in tags(c))
    index, ename, evalue = run_until_first_error(path, timeout=timeout)
    if index is None:
        return False, "ran to the end: an answer was not stubbed"
    where = f"cell {index} ({'the first check' if index == first_check else 'not the first check'})"
    ok = index == first_check and ename == "AssertionError" and not_set(evalue)
    return ok, f"{where}: {ename}: {evalue}"


def write_summary(run_dir: Path, outcomes: list[dict[str, Any]]) -> Path:
    """``summary.md``: each notebook's status and time, then every metric it recorded."""
    lines = [f"# labkit run {run_dir.name}", "", "| notebook | status | seconds |", "|---|---|---|"]
    for o in outcomes:
        lines.append(f"| {o['notebook']} | {o['status']} | {o['seconds']:.1f} |")
    failed = [o for o in outcomes if o["status"] != "ok"]
    if failed:
        lines += ["", "## Failed", ""]
        for o in failed:
            lines.append(f"- **{o['notebook']}**: {o['error']}")
    from labkit.measure import read_records

    records = read_records(run_dir) if any(run_dir.glob("*.jsonl")) else []
    lines += ["", "## Metrics", ""]
    if records:
        lines += [
            "| notebook | metric | value | unit | size | device |",
            "|---|---|---|---|---|---|",
        ]
        for r in records:
            lines.append(
                f"| {r['notebook']} | {r['metric']} | {r['value']:.4g} | {r['unit']} | "
                f"{r['size']} | {r['device']} |"
            )
    else:
        lines.append("(none recorded)")
    path = run_dir / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path
