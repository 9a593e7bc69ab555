"""``labkit grade DIR``: run each learner's copy in a fresh kernel and write a sheet of who passed
which check.

``DIR`` holds the learners' copies: one folder per learner (``DIR/alice/09_serve.ipynb``), or
notebooks directly in it (``DIR/alice.ipynb``, a learner each, named by the file; a notebook named
as a lesson is the copy of a learner named by ``DIR`` itself). Each copy is matched to its lesson
by its cell ids, and graded on **the lesson's checks**, not the copy's: a learner who edited a
check is still graded on the lesson's. The copies are only read.

Each copy runs in a process of its own (``python -m labkit.tools.grade --one``), local Ray, at
``--size`` (``smoke``), with a limit per cell (an interrupted cell fails, and the run goes on to
the next cell) and per copy (past it the process tree is stopped), and with each cell's output
cut past ``--max-output`` bytes: an answer that hangs, prints forever or raises is contained, its
row says so, and grading goes on with the next copy. An exercise is **passed** (its check ran
without an error), **failed** (with the check's message, or the answer's error that caused it),
**not attempted** (the stub's names still unset, or its cells gone from the copy), **timed out**
(its answer or its check was interrupted), or **not run** (the copy stopped before its check).

It writes ``grades.csv`` (a row per learner, copy, lesson and exercise; a learner's text that a
spreadsheet would run as a formula is quoted), ``grades.html`` (learner × exercise on one page,
styled inline: nothing from another host) and each graded copy as it ran with its log, under
``--out``: a new folder under ``runs/grade/`` by default, else a new or empty one outside
``DIR``, so that nothing is overwritten. It prints one line per learner. It is no sandbox: a
copy's code runs as the instructor, with their environment and files.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from labkit import params
from labkit.contract import SIZES
from labkit.tools import exercises as ex

STATUSES = ("passed", "failed", "not attempted", "timed out", "not run")


@dataclass
class Grade:
    """One learner's result on one exercise."""

    learner: str
    notebook: str  # the copy's file name
    lesson: str  # the lesson it was graded against
    exercise: str
    status: str  # one of STATUSES
    message: str = ""


def lesson_files(folder: Path | None = None) -> list[Path]:
    """The lessons a copy can be the copy of (the workbook's lessons unless told a folder)."""
    if folder is None:
        return ex.lessons()
    return sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))


def find_copies(root: Path, lessons: list[Path]) -> list[tuple[str, Path]]:
    """``(learner, copy)`` for every notebook under ``root``: a folder per learner, or notebooks
    in ``root`` itself (a learner each, named by the file, unless it is named as a lesson: then
    the learner is ``root``'s name)."""
    stems = {p.stem for p in lessons}
    found = []
    for path in sorted(root.iterdir()):
        if path.name.startswith("."):  # .ipynb_checkpoints, macOS's ._x.ipynb, editors' .~x
            continue
        if path.is_dir():
            mine = [nb for nb in sorted(path.glob("*.ipynb")) if not nb.name.startswith(".")]
            found += [(path.name, nb) for nb in mine] or [(path.name, path)]  # said: no notebook
        elif path.suffix == ".ipynb":
            found.append((root.name if path.stem in stems else path.stem, path))
    return found


def lesson_of(copy, lessons: list[Path]) -> Path | None:
    """The lesson whose cell ids the copy shares most (at least half of the lesson's checks)."""
    import nbformat

    ids = {c.get("id") for c in copy.cells}
    best, best_n = None, 0
    for path in lessons:
        nb = nbformat.read(path, as_version=4)
        checks = [nb.cells[c].id for _, c in ex.exercise_pairs(nb)]
        shared = sum(1 for c in nb.cells if c.id in ids)
        if checks and 2 * sum(c in ids for c in checks) >= len(checks) and shared > best_n:
            best, best_n = path, shared
    return best


HEADING = re.compile(r"^#+\s+(.+?)\s*$", re.M)


def exercise_titles(lesson) -> dict[str, str]:
    """Each check cell's id -> its exercise's title: the last heading written before its answer
    (a heading may stand anywhere in a markdown cell), numbered where two would read the same."""
    titles: dict[str, str] = {}
    for n, (a, c) in enumerate(ex.exercise_pairs(lesson), 1):
        title = f"exercise {n}"
        for cell in reversed(lesson.cells[:a]):
            found = HEADING.findall(cell.source) if cell.cell_type == "markdown" else []
            if found:
                title = found[-1]
                break
        if title in titles.values():
            title = f"{title} ({n})"
        titles[lesson.cells[c].id] = title
    return titles


def graded_notebook(copy, lesson, lang: str):
    """The copy with each check replaced by the lesson's (guarded, as a learner copy has it), by
    cell id; and ``{check id: (answer id or None, title)}`` for every exercise of the lesson."""
    reference = ex.learner_copy(lesson, lang)
    checks = {reference.cells[c].id: reference.cells[c] for _, c in ex.exercise_pairs(reference)}
    titles = exercise_titles(lesson)
    answers = {lesson.cells[c].id: lesson.cells[a].id for a, c in ex.exercise_pairs(lesson)}
    for cell in copy.cells:
        if cell.get("id") in checks:
            cell.cell_type, cell.source = "code", checks[cell.id].source
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
    present = {c.get("id") for c in copy.cells}
    plan = {
        check: (answers[check] if answers[check] in present else None, titles[check])
        for check in checks
    }
    return copy, plan


def judge(
    nb, plan: dict, timed_out: set[str], *, cell_timeout: int, not_run: str
) -> list[tuple[str, str, str]]:
    """``(title, status, message)`` per exercise of a graded (run) notebook: ``timed_out`` holds
    the ids of the cells interrupted past ``cell_timeout``; ``not_run`` says why a check that did
    not run did not."""
    by_id = {c.get("id"): c for c in nb.cells}
    out = []
    for check, (answer, title) in plan.items():
        cell = by_id.get(check)
        answer_cell = by_id.get(answer) if answer else None
        if cell is None:
            out.append((title, "not attempted", "the check's cell is not in the copy"))
        elif answer_cell is None:
            out.append((title, "not attempted", "the answer's cell is not in the copy"))
        elif answer in timed_out:
            out.append((title, "timed out", f"the answer ran past {cell_timeout} s: interrupted"))
        elif check in timed_out:
            out.append((title, "timed out", f"the check ran past {cell_timeout} s: interrupted"))
        elif cell.get("execution_count") is None:
            out.append((title, "not run", not_run))
        elif (err := _error(cell)) is None:
            out.append((title, "passed", ""))
        elif ex.not_set(err[1]):
            out.append((title, "not attempted", err[1]))
        elif raised := _error(answer_cell):  # the check's error follows from the answer's
            out.append((title, "failed", f"the answer raised {raised[0]}: {raised[1]}"))
        else:
            out.append((title, "failed", f"{err[0]}: {err[1]}" if err[1] else err[0]))
    return out


def _error(cell) -> tuple[str, str] | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return output.get("ename", ""), " ".join(str(output.get("evalue", "")).split())[:300]
    return None


#: Seconds a kernel has to answer a trivial cell after an interrupted one, or it is stuck (at
#: most: no more than a cell's own limit, and at least 5).
PROBE_S = 15


def run_one(copy_path: Path, lesson_path: Path, out: Path, *, cell_timeout: int, max_output: int):
    """In this process: run the graded copy in a fresh kernel, cell by cell, writing the verdicts
    to ``out.json`` after every cell (so a copy stopped from outside still says how far it got)
    and the run notebook to ``out``. A cell that runs past ``cell_timeout`` is interrupted; if
    the kernel then does not answer a trivial cell within :data:`PROBE_S`, the run stops there."""
    import nbformat

    from labkit.runtime import nbexec, procs

    copy = nbformat.read(copy_path, as_version=4)
    lesson = nbformat.read(lesson_path, as_version=4)
    nb, plan = graded_notebook(copy, lesson, ex.copy_language(copy, "en"))
    verdicts = out.with_suffix(".json")
    timed_out: set[str] = set()
    stopped = {"why": "the copy stopped before this check"}

    def save() -> None:
        said = judge(nb, plan, timed_out, cell_timeout=cell_timeout, not_run=stopped["why"])
        procs.write_json(verdicts, said)  # whole or not at all: the parent may stop us any time

    def executed(cell, cell_index, execute_reply) -> None:  # nbclient's hook, after each cell
        if (execute_reply or {}).get("content", {}).get("ename") == nbexec.TIMEOUT_ENAME:
            timed_out.add(cell.id)

    client = nbexec.client(
        nb,
        lesson_path,
        cell_timeout,
        max_output=max_output,
        allow_errors=True,  # a failing check is a grade, and the run goes on
        on_cell_executed=executed,
    )
    # stopped from outside (the copy's time limit): still write what ran
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped from outside"))
    save()
    try:
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                client.execute_cell(cell, index)
                if cell.id in timed_out:
                    if _stuck(client, nb, timed_out):
                        stopped["why"] = (
                            f"the kernel did not answer after the interrupt at cell {index}"
                        )
                        save()
                        break
                save()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a dead kernel, or stopped: what ran
        stopped["why"] = f"the kernel stopped: {type(exc).__name__}"
        print(f"labkit grade: {copy_path.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        save()
        nbformat.write(nb, str(out))


def _stuck(client, nb, timed_out: set[str]) -> bool:
    """Whether the kernel, just interrupted, fails to run a trivial cell within
    :data:`PROBE_S` (``timed_out`` gets its id then). The cell runs as the notebook's last and is
    taken out again (nbclient writes the cell it ran back into the notebook at its index)."""
    import nbformat

    probe = nbformat.v4.new_code_cell("pass")
    nb.cells.append(probe)
    limit = client.timeout
    client.timeout = min(PROBE_S, max(5, limit))
    try:
        client.execute_cell(probe, len(nb.cells) - 1)
    finally:
        client.timeout = limit
        nb.cells.pop()
    return probe.id in timed_out


def grade_copy(
    learner: str, copy: Path, lesson: Path, *, out: Path, size: str, cell_timeout: int,
    copy_timeout: int, max_output: int,
) -> tuple[list[Grade], float]:  # fmt: skip
    """Grade one copy in a child process (its log beside ``out``); stop its whole process tree
    past ``copy_timeout``."""
    import psutil

    from labkit.runtime import procs

    out.parent.mkdir(parents=True, exist_ok=True)
    verdicts, log = out.with_suffix(".json"), out.with_suffix(".log")
    verdicts.unlink(missing_ok=True)  # only this run's verdicts are read
    env = os.environ | {
        "LABKIT_SIZE": size,
        "LABKIT_RESULTS_DIR": str(out.parent.resolve() / "results"),
        "RAY_ADDRESS": "",  # graded on this machine, in a local Ray of the copy's own
    }
    cmd = [sys.executable, "-m", "labkit.tools.grade", "--one", str(copy), "--lesson",
           str(lesson), "--to", str(out), "--cell-timeout", str(cell_timeout), "--max-output",
           str(max_output)]  # fmt: skip
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as errors:
        child = subprocess.Popen(cmd, env=env, stdout=errors, stderr=subprocess.STDOUT)
        stopped = ""
        try:
            child.wait(copy_timeout)
        except subprocess.TimeoutExpired:
            try:
                procs.terminate(procs.with_children([psutil.Process(child.pid)]), timeout=10)
            except psutil.Error:
                pass  # it ended on its own meanwhile
            child.wait()
            stopped = f"the copy ran past {copy_timeout} s and was stopped"
    seconds = time.monotonic() - start
    try:
        judged = json.loads(verdicts.read_text()) if verdicts.exists() else []
    except ValueError:
        judged = []
    name = lesson.stem
    if not judged:  # it never got as far as its first cell
        lines = log.read_text(errors="replace").strip().splitlines()
        why = stopped or (lines[-1] if lines else f"exit code {child.returncode}")
        return [Grade(learner, copy.name, name, "(the copy)", "not run", why)], seconds
    grades = []
    for title, status, message in judged:
        if status == "not run" and stopped:
            message = stopped
        grades.append(Grade(learner, copy.name, name, title, status, message))
    return grades, seconds


def write_sheet(grades: list[Grade], out: Path) -> tuple[Path, Path]:
    """``grades.csv`` (a row per grade) and ``grades.html`` (learner × exercise) in ``out``."""
    csv_path, html_path = out / "grades.csv", out / "grades.html"
    with csv_path.open("x", newline="", encoding="utf-8-sig") as f:  # utf-8-sig: for Excel
        writer = csv.DictWriter(f, fieldnames=list(Grade.__dataclass_fields__))
        writer.writeheader()
        writer.writerows({k: _inert(v) for k, v in asdict(g).items()} for g in grades)
    with html_path.open("x", encoding="utf-8") as f:
        f.write(sheet_html(grades))
    return csv_path, html_path


def _inert(value: str) -> str:
    """A learner's text as a spreadsheet shows it, never as a formula it would run."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


COLORS = {
    "passed": "#d7f0dc",
    "failed": "#f8d7da",
    "not attempted": "#eeeeee",
    "timed out": "#fde8c8",
    "not run": "#e6e0f3",
}


def sheet_html(grades: list[Grade]) -> str:
    """One self-contained page: a row per learner, a column per exercise, each cell its status
    with the check's message under it."""
    e = html.escape
    columns = list(dict.fromkeys((g.lesson, g.exercise) for g in grades))
    learners = list(dict.fromkeys(g.learner for g in grades))
    cell = {(g.learner, g.lesson, g.exercise): g for g in grades}
    head = "".join(f"<th>{e(nb)}<br>{e(title)}</th>" for nb, title in columns)
    rows = []
    for learner in learners:
        tds = []
        for nb, title in columns:
            g = cell.get((learner, nb, title))
            if g is None:
                tds.append("<td></td>")
                continue
            said = f"<div class='msg'>{e(g.message)}</div>" if g.message else ""
            tds.append(f"<td style='background:{COLORS[g.status]}'>{e(g.status)}{said}</td>")
        rows.append(f"<tr><th>{e(learner)}</th>{''.join(tds)}</tr>")
    summary = "".join(f"<li>{e(summary_line(learner, grades))}</li>" for learner in learners)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Ray LabKit: grades</title>
<style>
body {{ font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem;
  color: #222; }}
h1 {{ font-size: 1.4rem; }}
table {{ border-collapse: collapse; font-size: .9rem; }}
th, td {{ border: 1px solid #ccc; padding: .35rem .5rem; vertical-align: top; text-align: left; }}
thead th {{ background: #f4f4f4; }}
.msg {{ font-size: .75rem; color: #555; max-width: 22rem; white-space: pre-wrap; }}
</style></head><body>
<h1>Ray LabKit: who passed which check</h1>
<ul>{summary}</ul>
<table><thead><tr><th>learner</th>{head}</tr></thead>
<tbody>{"".join(rows)}</tbody></table>
</body></html>
"""


def summary_line(learner: str, grades: list[Grade]) -> str:
    mine = [g for g in grades if g.learner == learner]
    counts = {s: sum(g.status == s for g in mine) for s in STATUSES}
    said = ", ".join(f"{n} {s}" for s, n in counts.items() if n and s != "passed")
    return f"{learner}: {counts['passed']} of {len(mine)} passed" + (f"; {said}" if said else "")


def _new_folder(parent: Path, name: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out, n = parent / f"{name}-{stamp}", 1
    while out.exists():
        n += 1
        out = parent / f"{name}-{stamp}-{n}"
    return out


def cmd_grade(args: argparse.Namespace) -> int:
    import nbformat

    if getattr(args, "one", None):
        run_one(Path(args.one), Path(args.lesson), Path(args.to), cell_timeout=args.cell_timeout,
                max_output=args.max_output)  # fmt: skip
        return 0
    if not args.dir:
        raise SystemExit("labkit grade: name the folder of learners' copies (labkit grade DIR)")
    root = Path(args.dir).resolve()
    if not root.is_dir():
        raise SystemExit(f"labkit grade: {args.dir} is not a folder of learners' copies")
    if args.size not in SIZES:
        raise SystemExit(f"labkit grade: --size {args.size!r}; give one of {', '.join(SIZES)}")
    lessons = lesson_files(Path(args.lessons) if args.lessons else None)
    out = Path(args.out).resolve() if args.out else None
    out = out or _new_folder(params.resolve_path("runs/grade"), root.name)
    if out == root or out.is_relative_to(root) or root.is_relative_to(out):
        raise SystemExit(f"labkit grade: --out {args.out} is in or around {args.dir}: the copies "
                         f"are only read; give a folder outside it")  # fmt: skip
    if out.exists() and any(out.iterdir()):
        raise SystemExit(
            f"labkit grade: {params.shown(out)} is not empty (a sheet already?): give --out a new "
            "folder"
        )
    copies = find_copies(root, lessons)
    if not copies:
        raise SystemExit(
            f"labkit grade: no notebook in {args.dir} (a folder per learner, or notebooks)"
        )
    grades: list[Grade] = []
    for learner, path in copies:
        if path.is_dir():
            grades.append(Grade(learner, "-", "-", "(the copy)", "not run", "no notebook in it"))
            continue
        try:
            lesson = lesson_of(nbformat.read(path, as_version=4), lessons)
        except Exception as exc:  # noqa: BLE001 - a file that is not a notebook: said, and on
            why = f"unreadable: {exc}"
            grades.append(Grade(learner, path.name, "-", "(the copy)", "not run", why))
            continue
        if lesson is None:
            why = "no lesson matches its cells"
            grades.append(Grade(learner, path.name, "-", "(the copy)", "not run", why))
            continue
        mine, seconds = grade_copy(
            learner, path, lesson, out=out / learner / path.name, size=args.size,
            cell_timeout=args.cell_timeout, copy_timeout=args.copy_timeout,
            max_output=args.max_output,
        )  # fmt: skip
        grades += mine
        print(f"labkit grade: {learner} · {path.name} ({lesson.stem}): {seconds:.0f} s", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, html_path = write_sheet(grades, out)
    for learner in dict.fromkeys(g.learner for g in grades):
        print(summary_line(learner, grades))
    print(f"labkit grade: wrote {params.shown(csv_path)} and {params.shown(html_path)}")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "grade",
        help="run learners' copies in fresh kernels and write who passed which check (CSV, HTML)",
    )
    p.add_argument("dir", nargs="?", help="a folder of learners' folders, or of their notebooks")
    p.add_argument("--size", default="smoke", help="the SIZE each copy runs at (smoke)")
    p.add_argument("--out", help="the folder for the sheet (a new one under runs/grade/)")
    p.add_argument("--lessons", help="the lessons the copies come from (notebooks/)")
    p.add_argument("--cell-timeout", type=int, default=300, help="seconds a cell may run (300)")
    p.add_argument("--copy-timeout", type=int, default=1800, help="seconds a copy may run (1800)")
    p.add_argument("--max-output", type=int, default=200_000, help="bytes kept of a cell's output")
    p.add_argument("--one", help=argparse.SUPPRESS)  # the child: grade this copy
    p.add_argument("--lesson", help=argparse.SUPPRESS)
    p.add_argument("--to", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_grade)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="labkit grade")
    register(parser.add_subparsers(dest="command", required=True))
    return cmd_grade(parser.parse_args(["grade", *(argv or sys.argv[1:])]))


if __name__ == "__main__":  # pragma: no cover - the child process of grade_copy
    sys.exit(main())
