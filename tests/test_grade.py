"""``labkit grade`` (issue 44): planted copies of a planted lesson, graded as an instructor would:
one correct, one wrong (with its check edited to pass), one empty, one whose answer prints
forever, one that ignores the interrupt and hangs; each row says what happened, and grading goes
on past the bad ones."""

import csv
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_raw_cell

from labkit.tools import exercises as ex
from labkit.tools import grade

SQUARES = "squares = [i * i for i in range(5)]"
TOTAL = "def total(xs):\n    return sum(xs)"


def _lesson(folder: Path) -> Path:
    cells = [
        new_markdown_cell("# ZZ · A planted lesson"),
        new_code_cell("import math"),
        new_markdown_cell("## Exercise 1 · Squares\n\nThe first five squares."),
        new_code_cell(SQUARES, metadata={"tags": ["answer"]}),
        new_code_cell(
            'assert squares == [0, 1, 4, 9, 16], f"expected the first five squares, got {squares}"',
            metadata={"tags": ["check"]},
        ),
        new_raw_cell("squares = [2 * i for i in range(5)]", metadata={"tags": ["wrong"]}),
        new_markdown_cell("## Exercise 2 · Total"),
        new_code_cell(TOTAL, metadata={"tags": ["answer"]}),
        new_code_cell(
            'assert total([1, 2, 3]) == 6, "expected total([1, 2, 3]) == 6"',
            metadata={"tags": ["check"]},
        ),
        new_code_cell('print("the end")'),
    ]
    for i, cell in enumerate(cells):
        cell.id = f"zz-{i}"
    folder.mkdir(parents=True)
    path = folder / "ZZ_planted.ipynb"
    nbformat.write(new_notebook(cells=cells), str(path))
    return path


def _copy(lesson: Path, to: Path, answers: dict[int, str] | None = None, checks=None) -> Path:
    nb = ex.learner_copy(nbformat.read(lesson, as_version=4))
    pairs = ex.exercise_pairs(nb)
    for n, source in (answers or {}).items():
        nb.cells[pairs[n][0]].source = source
    for n, source in (checks or {}).items():
        nb.cells[pairs[n][1]].source = source
    to.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(to))
    return to


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.notebook
def test_grade_sheets_the_planted_copies_and_survives_the_bad_ones(tmp_path):
    lesson = _lesson(tmp_path / "lessons")
    subs = tmp_path / "room"
    name = lesson.name
    _copy(lesson, subs / "alice" / name, {0: SQUARES, 1: TOTAL})
    wrong = {0: "squares = [2 * i for i in range(5)]", 1: "def total(xs):\n    return len(xs)"}
    _copy(lesson, subs / "bob" / name, wrong, checks={0: 'print("✓ correct")'})
    _copy(lesson, subs / "carol <b>&" / name)  # a name the page must escape
    _copy(lesson, subs / "dave" / name, {0: 'while True:\n    print("again " * 20)', 1: TOTAL})
    hang = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    hang += "while True:\n    time.sleep(0.1)"  # an interrupt cannot stop it
    _copy(lesson, subs / "erin" / name, {0: hang, 1: TOTAL})
    loops = "def total(xs):\n    while True:\n        pass"  # hangs only when the check calls it
    _copy(lesson, subs / "fay" / name, {0: SQUARES, 1: loops})
    before = _digest(subs)
    out = tmp_path / "sheet"
    labkit = str(Path(sys.executable).parent / "labkit")  # the command, as an instructor runs it
    cmd = [labkit, "grade", str(subs), "--lessons", str(lesson.parent),
           "--out", str(out), "--cell-timeout", "4", "--copy-timeout", "60",
           "--max-output", "20000"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert _digest(subs) == before, "grading changed a learner's copy"

    rows = list(csv.DictReader((out / "grades.csv").open(encoding="utf-8-sig")))
    got = {(r["learner"], r["exercise"]): (r["status"], r["message"]) for r in rows}
    ex1, ex2 = "Exercise 1 · Squares", "Exercise 2 · Total"
    assert got[("alice", ex1)] == ("passed", "") and got[("alice", ex2)] == ("passed", "")
    # bob's edited check does not count: the lesson's check fails, with its message
    assert got[("bob", ex1)][0] == "failed"
    assert "expected the first five squares, got [0, 2, 4, 6, 8]" in got[("bob", ex1)][1]
    assert got[("bob", ex2)] == ("failed", "AssertionError: expected total([1, 2, 3]) == 6")
    assert {got[("carol <b>&", e)][0] for e in (ex1, ex2)} == {"not attempted"}
    assert got[("dave", ex1)][0] == "timed out" and "4 s" in got[("dave", ex1)][1]
    assert got[("dave", ex2)] == ("passed", "")  # the run went on past the interrupted cell
    assert got[("erin", ex1)][0] == "timed out"  # and the kernel, stuck, was given up
    assert got[("erin", ex2)] == (
        "not run",
        "the kernel did not answer after the interrupt at cell 3",
    )
    assert got[("fay", ex1)] == ("passed", "")
    assert got[("fay", ex2)] == ("timed out", "the check ran past 4 s: interrupted")
    assert {r["lesson"] for r in rows} == {"ZZ_planted"}

    # the looping answer's output was cut, not kept whole
    dave = nbformat.read(out / "dave" / name, as_version=4)
    printed = json.dumps(dave.cells[ex.exercise_pairs(dave)[0][0]].outputs)
    assert len(printed) < 40_000 and printed.count("output cut past 20,000 bytes") == 1

    page = (out / "grades.html").read_text(encoding="utf-8")
    assert "alice: 2 of 2 passed" in page and "carol &lt;b&gt;&amp;: 0 of 2 passed" in page
    assert "<b>" not in page and "http://" not in page and "https://" not in page
    assert "alice: 2 of 2 passed" in run.stdout and "dave: 1 of 2 passed; 1 timed out" in run.stdout

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "is not empty" in again.stderr  # a sheet is never overwritten
    inside = [labkit, "grade", str(subs), "--out", str(subs / "sheet")]
    refused = subprocess.run(inside, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "give a folder outside it" in refused.stderr
    assert _digest(subs) == before


def test_copies_are_found_by_folder_or_by_file(tmp_path):
    lesson = _lesson(tmp_path / "lessons")
    flat = tmp_path / "flat"
    _copy(lesson, flat / "alice.ipynb")
    _copy(lesson, flat / "bob.ipynb")
    assert [who for who, _ in grade.find_copies(flat, [lesson])] == ["alice", "bob"]
    mine = tmp_path / "carol"  # one learner's folder, its notebooks named as the lessons
    _copy(lesson, mine / lesson.name)
    assert grade.find_copies(mine, [lesson]) == [("carol", mine / lesson.name)]
    other = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    assert grade.lesson_of(other, [lesson]) is None
    assert grade.lesson_of(nbformat.read(flat / "alice.ipynb", as_version=4), [lesson]) == lesson


def test_a_bad_folder_or_size_is_refused_by_name(tmp_path):
    room = tmp_path / "room"
    room.mkdir()
    for args, said in (
        ([str(tmp_path / "nowhere")], "is not a folder"),
        ([str(room), "--size", "huge"], "smoke, small, full"),
        ([str(room)], "no notebook in"),
    ):
        with pytest.raises(SystemExit, match=said):
            grade.main(args + ["--out", str(tmp_path / "out")])
