"""Learner copies: answers stubbed with their names left unset, checks kept and guarded."""

import ast
import re
from pathlib import Path

import nbformat
import pytest

from labkit.tools import exercises as ex
from labkit.tools import nbrun, zh

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _nb(answer: str, check: str):
    nb = nbformat.v4.new_notebook()
    a = nbformat.v4.new_code_cell(answer, metadata={"tags": ["answer"]})
    c = nbformat.v4.new_code_cell(check, metadata={"tags": ["check"]})
    nb.cells = [nbformat.v4.new_markdown_cell("## Exercise"), a, c]
    return nb


def test_names_the_check_needs_from_the_answer():
    answer = (
        "import numpy as np\nLIMIT = 10\ndef f(x):\n    return x\nclass C: pass\n"
        "a, (b, *c) = 1, (2, 3)\nwith open('x') as fh:\n    d = 1\n"
    )
    assert ex.defined_names(answer) == ["np", "LIMIT", "f", "C", "a", "b", "c", "fh", "d"]
    assert ex.needed_names(answer, "assert f(LIMIT) == d and len(c) == 1") == [
        "LIMIT",
        "f",
        "c",
        "d",
    ]
    with pytest.raises(ValueError, match="reads nothing"):
        ex.needed_names("x = 1", "assert True")


def test_learner_copy_stubs_answers_and_guards_checks():
    nb = _nb(
        "# ANSWER\ndef first_k(refs, k):\n    return refs[:k]\n", "assert first_k([1, 2], 1) == [1]"
    )
    nb.cells[1].metadata["jupyter"] = {"source_hidden": True}
    copy = ex.learner_copy(nb)
    assert len(copy.cells) == len(nb.cells) and copy.cells[0] == nb.cells[0]
    stub, check = copy.cells[1].source, copy.cells[2].source
    assert (
        stub.startswith(zh.MESSAGES["en"]["stub_header"])
        and "first_k = None" in stub
        and "return" not in stub
    )
    assert "jupyter" not in copy.cells[1].metadata  # the learner's cell opens expanded
    assert check.endswith("assert first_k([1, 2], 1) == [1]")
    namespace = {}
    exec(stub, namespace)
    with pytest.raises(AssertionError, match="first_k is not set yet"):
        exec(check, namespace)
    assert "def first_k" in nb.cells[1].source  # the original is untouched


def test_an_answer_without_a_check_is_an_error():
    nb = _nb("x = 1", "assert x == 1")
    nb.cells[2].metadata["tags"] = []
    with pytest.raises(ValueError, match="not a check"):
        ex.exercise_pairs(nb)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_lesson_has_learner_copies_that_keep_everything_but_the_answers(path):
    nb = nbformat.read(path, as_version=4)
    assert len(ex.exercise_pairs(nb)) >= 2, "each lesson has at least two exercises"
    assert ex.copy_problems(nb, ex.learner_copy(nb)) == []


def test_copy_problems_sees_an_answer_left_in_and_a_cell_changed():
    nb = _nb("def f():\n    return 1\n", "assert f() == 1")
    copy = ex.learner_copy(nb)
    assert ex.copy_problems(nb, copy) == []
    copy.cells[1].source = nb.cells[1].source
    copy.cells[0].source = "## Changed"
    problems = ex.copy_problems(nb, copy)
    assert any("not stubbed" in p for p in problems) and any("differs" in p for p in problems)


def test_write_learner_copies(tmp_path):
    written = ex.write_learner_copies(tmp_path)
    assert [o.path.name for o in written] == [p.name for p in NOTEBOOKS]
    assert {o.action for o in written} == {"written"}
    again = ex.write_learner_copies(tmp_path)
    assert {(o.action, o.said) for o in again} == {("up to date", "unchanged")}


# ---- a learner's work is never lost (issue 39) ---------------------------------------------


def _lesson_and_copy(tmp_path: Path, lang: str = "en"):
    """A tiny lesson in a notebooks/ of its own, and its learner copy written by sync_copy."""
    (tmp_path / "notebooks").mkdir()
    lesson = _tiny_lesson(tmp_path / "notebooks" / "99_tiny.ipynb", "x = 1")
    copy = tmp_path / "exercises" / "99_tiny.ipynb"
    copy.parent.mkdir()
    assert ex.sync_copy(lesson, copy, lang).action == "written"
    return lesson, copy


def _edit(path: Path, index: int, source: str) -> None:
    nb = nbformat.read(path, as_version=4)
    nb.cells[index].source = source
    nbformat.write(nb, path)


def _sources(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells]


def test_a_copy_the_learner_changed_is_kept_when_the_lesson_did_not_change(tmp_path):
    lesson, copy = _lesson_and_copy(tmp_path)
    _edit(copy, 1, "answer = 42")
    outcome = ex.sync_copy(lesson, copy, "en")
    assert (outcome.action, outcome.said) == ("up to date", "1 cell(s) yours, kept")
    assert _sources(copy)[1] == "answer = 42"


def test_an_unchanged_copy_takes_the_lessons_change(tmp_path):
    lesson, copy = _lesson_and_copy(tmp_path)
    _edit(lesson, 0, "x = 2")
    outcome = ex.sync_copy(lesson, copy, "en")
    assert outcome.action == "updated", outcome.line()
    assert _sources(copy)[0] == "x = 2"


def test_changes_in_other_cells_are_merged_and_the_old_copy_kept(tmp_path):
    lesson, copy = _lesson_and_copy(tmp_path)
    _edit(copy, 1, "answer = 42")
    mine = nbformat.read(copy, as_version=4)
    mine.cells.insert(2, nbformat.v4.new_markdown_cell("my note"))
    nbformat.write(mine, copy)
    _edit(lesson, 0, "x = 2")
    outcome = ex.sync_copy(lesson, copy, "en")
    assert outcome.action == "merged", outcome.line()
    assert _sources(copy)[:3] == ["x = 2", "answer = 42", "my note"]
    (old,) = (copy.parent / ".old").iterdir()
    assert _sources(old)[:3] == ["x = 1", "answer = 42", "my note"]
    assert ".old/" in outcome.said
    # The merged copy still knows which cells are the learner's: a later change to the lesson's
    # check (a cell the learner kept as written) merges again, and the answer stays.
    _edit(lesson, 2, "assert answer == 42, answer")
    assert ex.sync_copy(lesson, copy, "en").action == "merged"
    assert _sources(copy)[1] == "answer = 42" and _sources(copy)[3].endswith(", answer")


def test_a_cell_both_changed_is_kept_and_the_new_lesson_written_beside(tmp_path):
    lesson, copy = _lesson_and_copy(tmp_path)
    _edit(copy, 0, "x = 10  # mine")
    _edit(lesson, 0, "x = 2")
    outcome = ex.sync_copy(lesson, copy, "en")
    assert outcome.action == "beside", outcome.line()
    assert _sources(copy)[0] == "x = 10  # mine"
    beside = copy.with_name("99_tiny.new.ipynb")
    assert _sources(beside)[0] == "x = 2" and beside.name in outcome.said
    _edit(beside, 1, "answer = 42  # worked on the new one")  # a .new the learner changed ...
    _edit(lesson, 3, "print('bye')")
    outcome = ex.sync_copy(lesson, copy, "en")
    assert _sources(beside)[1] == "answer = 42  # worked on the new one"  # ... stays as it is
    assert "has your changes too and was left as it is" in outcome.said
    assert ex.sync_copy(lesson, copy, "en", reset=True).action == "reset"  # both kept in .old/
    kept = sorted(_sources(p)[1] for p in (copy.parent / ".old").iterdir())
    assert kept == ["answer = 42  # worked on the new one", "answer = 42"] or len(kept) == 2
    assert not beside.exists()


def test_reset_gives_a_fresh_copy_and_keeps_the_old_one(tmp_path):
    lesson, copy = _lesson_and_copy(tmp_path)
    _edit(copy, 1, "answer = 42")
    outcome = ex.sync_copy(lesson, copy, "en", reset=True)
    assert outcome.action == "reset"
    assert _sources(copy)[1].startswith("# YOUR CODE HERE")
    (old,) = (copy.parent / ".old").iterdir()
    assert _sources(old)[1] == "answer = 42"


def _old_copy(tmp_path: Path) -> tuple[Path, Path]:
    """A lesson committed in a git checkout, and its learner copy as the kit wrote copies before
    issue 39: no fingerprint, no note on where the worked answer is."""
    import subprocess

    (tmp_path / "notebooks").mkdir()
    lesson = _tiny_lesson(tmp_path / "notebooks" / "99_tiny.ipynb", "x = 1")
    copy = tmp_path / "exercises" / "99_tiny.ipynb"
    copy.parent.mkdir()
    nbformat.write(ex.learner_copy(nbformat.read(lesson, as_version=4)), copy)
    git = ["git", "-c", "user.name=kit", "-c", "user.email=kit@example.invalid"]
    for args in (["init", "-q"], ["add", "notebooks"], ["commit", "-qm", "lesson"]):
        subprocess.run([*git, *args], cwd=tmp_path, check=True, capture_output=True)
    return lesson, copy


def test_an_untouched_copy_from_before_fingerprints_takes_the_lessons_changes(tmp_path):
    lesson, copy = _old_copy(tmp_path)
    _edit(lesson, 0, "x = 2")
    outcome = ex.sync_copy(lesson, copy, "en")
    assert outcome.action == "updated", outcome.line()
    assert _sources(copy)[0] == "x = 2" and "notebooks/99_tiny.ipynb" in _sources(copy)[1]
    assert ex.sync_copy(lesson, copy, "en").action == "up to date"


def test_a_changed_copy_from_before_fingerprints_is_merged_and_kept(tmp_path):
    lesson, copy = _old_copy(tmp_path)
    _edit(copy, 1, "answer = 42")
    _edit(lesson, 0, "x = 2")
    outcome = ex.sync_copy(lesson, copy, "en")
    assert outcome.action == "merged", outcome.line()
    assert _sources(copy)[:2] == ["x = 2", "answer = 42"]
    (old,) = (copy.parent / ".old").iterdir()
    assert _sources(old)[1] == "answer = 42"


def test_a_cell_the_learner_added_at_the_top_stays_at_the_top(tmp_path):
    lesson, copy = _lesson_and_copy(tmp_path)
    mine = nbformat.read(copy, as_version=4)
    mine.cells.insert(0, nbformat.v4.new_markdown_cell("my notes for today"))
    nbformat.write(mine, copy)
    _edit(lesson, 3, "print('bye')")
    assert ex.sync_copy(lesson, copy, "en").action == "merged"
    assert _sources(copy)[0] == "my notes for today" and _sources(copy)[-1] == "print('bye')"


def test_a_copy_keeps_its_own_language(tmp_path):
    lesson, copy = _lesson_and_copy(tmp_path)
    nb = nbformat.read(copy, as_version=4)
    nb.metadata[ex.META]["lang"] = "zh"  # as if written by make lab LABKIT_LANG=zh
    nbformat.write(nb, copy)
    _edit(lesson, 0, "x = 2")
    outcome = ex.sync_copy(lesson, copy, "en")
    assert "kept in zh" in outcome.said and "--reset 99" in outcome.said
    assert "还没有设置" in _sources(copy)[2]


@pytest.mark.notebook
def test_a_learner_copy_stops_at_its_first_check(tmp_path):
    """Executed as a learner gets it, a copy runs its lesson and fails at the first check, which
    names what is missing. (A tiny lesson: the in-kernel probe of make test covers every real
    exercise, and `make test-exercises RUN=1` executes every real copy from the top.)"""
    lesson = _tiny_lesson(tmp_path / "99_tiny.ipynb", "x = 1")
    copy = tmp_path / "copy" / "99_tiny.ipynb"
    copy.parent.mkdir()
    nbformat.write(ex.learner_copy(nbformat.read(lesson, as_version=4)), copy)
    ok, why = nbrun.stops_at_first_check(copy, timeout=60)
    assert ok, why
    assert "answer is not set yet" in why and "the first check" in why


def _tiny_lesson(
    path: Path, lesson_code: str, check: str = "assert answer == 42", wrong: tuple = ()
) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(lesson_code),
        nbformat.v4.new_code_cell("# ANSWER\nanswer = 41 + x", metadata={"tags": ["answer"]}),
        nbformat.v4.new_code_cell(check, metadata={"tags": ["check"]}),
        *[nbformat.v4.new_raw_cell(w, metadata={"tags": ["wrong"]}) for w in wrong],
        nbformat.v4.new_code_cell("print('teardown sees', answer)"),
    ]
    nbformat.write(nb, path)
    return path


@pytest.mark.notebook
def test_run_lesson_runs_the_learner_cells_in_the_lessons_kernel(tmp_path):
    from labkit.tools import nbrun

    lesson = _tiny_lesson(tmp_path / "99_tiny.ipynb", "x = 1")
    run = nbrun.run_lesson(lesson, out=tmp_path / "out" / "99_tiny.ipynb", timeout=60)
    ((names, ok, said),) = run["exercises"]
    assert names == ["answer"] and ok and "answer is not set yet" in said
    written = nbformat.read(tmp_path / "out" / "99_tiny.ipynb", as_version=4)
    assert len(written.cells) == 4  # the probes' cells are not kept
    assert "teardown sees 42" in written.cells[-1].outputs[0]["text"]  # the answer put back


@pytest.mark.notebook
def test_run_lesson_names_the_failed_cell_and_still_runs_the_teardown(tmp_path):
    from labkit.tools import nbrun

    lesson = _tiny_lesson(tmp_path / "99_tiny.ipynb", "x = 1 / 0")
    with pytest.raises(nbrun.LessonFailed, match=r"cell 0: ZeroDivisionError: .*\n    x = 1 / 0"):
        nbrun.run_lesson(lesson, out=tmp_path / "out.ipynb", timeout=60)
    written = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert written.cells[-1].outputs[0]["ename"] == "NameError"  # it ran, after the failure


@pytest.mark.notebook
def test_run_lesson_fails_a_check_that_passes_with_the_answer_unset(tmp_path):
    from labkit.tools import nbrun

    weak = "assert answer is None or answer == 42"
    lesson = _tiny_lesson(tmp_path / "99_tiny.ipynb", "x = 1", check=weak)
    with pytest.raises(nbrun.LessonFailed, match="unguarded check PASSED"):
        nbrun.run_lesson(lesson, timeout=60)


@pytest.mark.notebook
def test_run_lesson_fails_a_cell_that_runs_past_its_timeout(tmp_path):
    from labkit.tools import nbrun

    lesson = _tiny_lesson(tmp_path / "99_tiny.ipynb", "import time\nx = 1\ntime.sleep(30)")
    with pytest.raises(nbrun.LessonFailed, match="cell 0: CellTimeoutError: the cell ran past 2 s"):
        nbrun.run_lesson(lesson, out=tmp_path / "out.ipynb", timeout=2)
    written = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert written.cells[-1].outputs[0]["ename"] == "NameError"  # the teardown ran after it


# ---- what a learner copy says (issue 39) ---------------------------------------------------


def _exercise_text(nb, answer_index: int) -> str:
    """The markdown that introduces an exercise: the nearest markdown cell above its answer."""
    k = answer_index - 1
    while nb.cells[k].cell_type != "markdown":
        k -= 1
    return nb.cells[k].source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_each_exercise_names_every_variable_its_check_reads(path):
    """A learner's stub sets these to None; the text must say which names to fill."""
    nb = nbformat.read(path, as_version=4)
    for a, c in ex.exercise_pairs(nb):
        names = ex.needed_names(nb.cells[a].source, nb.cells[c].source)
        text = _exercise_text(nb, a)
        unnamed = [n for n in names if not re.search(rf"`{n}[`(\[.]", text)]
        assert not unnamed, f"{path.name}: the exercise above cell {a} never names {unnamed}"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_learner_copy_says_where_to_write_and_where_the_worked_answer_is(tmp_path, lang):
    for outcome in ex.write_learner_copies(tmp_path, lang=lang):
        copy = nbformat.read(outcome.path, as_version=4)
        text = "\n".join(c.source for c in copy.cells if c.cell_type == "markdown")
        assert not re.search(zh.PREFILLED[lang], text), (
            f"{outcome.path.name}: the copy still says its answer is filled in"
        )
        lesson = ex.without_wrong(nbformat.read(ROOT / "notebooks" / outcome.path.name, 4))
        for a, _ in ex.exercise_pairs(lesson):
            stub = copy.cells[a].source
            assert f"notebooks/{outcome.path.name}" in stub.splitlines()[1], stub
            intro = _exercise_text(copy, a)
            if zh.message("learner_note", lang, lesson=outcome.path.name) not in intro:
                assert not re.search(r"(?i)pre-?filled|预先填好", intro), intro


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_every_check_assert_says_what_it_expected_and_got(path):
    """A bare ``AssertionError`` tells a learner nothing: each assert carries a message."""
    import ast

    nb = nbformat.read(path, as_version=4)
    for _, c in ex.exercise_pairs(nb):
        source = nb.cells[c].source
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Assert):
                assert isinstance(node.msg, ast.Constant | ast.JoinedStr), (
                    f"{path.name}, cell {nb.cells[c].id}: give this assert a message saying what "
                    f"it expected and what it got: {ast.get_source_segment(source, node)[:80]}"
                )


# ---- every check rejects the plausible wrong answer (issue 40) -----------------------------


def test_wrong_answers_follow_their_check_and_never_reach_a_learner():
    nb = _nb("# ANSWER\nanswer = 42", "assert answer == 42, f'expected 42, got {answer}'")
    wrong = nbformat.v4.new_raw_cell("answer = 41", metadata={"tags": ["wrong"]})
    nb.cells.append(wrong)
    assert ex.wrong_answers(nb) == {2: ["answer = 41"]}
    copy = ex.learner_copy(nb)
    assert [c.source for c in copy.cells if "answer = 41" in c.source] == []
    assert len(copy.cells) == 3 and ex.copy_problems(nb, copy) == []
    nb.cells.insert(1, nbformat.v4.new_raw_cell("x = 1", metadata={"tags": ["wrong"]}))
    with pytest.raises(ValueError, match="follows no check"):
        ex.wrong_answers(nb)
    nb.cells[1] = nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["wrong"]})
    with pytest.raises(ValueError, match="not raw"):
        ex.wrong_answers(nb)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_every_exercise_carries_a_wrong_answer_that_sets_what_its_check_reads(path):
    nb = nbformat.read(path, as_version=4)
    wrongs = ex.wrong_answers(nb)
    for a, c in ex.exercise_pairs(nb):
        names = ex.needed_names(nb.cells[a].source, nb.cells[c].source)
        assert wrongs.get(c), (
            f"{path.name}: the exercise at cell {a} has no wrong answer (a raw cell tagged "
            "'wrong' after its check, holding the mistake a learner would make)"
        )
        for source in wrongs[c]:
            assert source.startswith("# WRONG"), f"{path.name}: say why it is wrong: {source[:80]}"
            compile(source, "wrong", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)  # as IPython
            unset = [n for n in names if n not in ex.defined_names(source)]
            assert not unset, f"{path.name}: a wrong answer at cell {c} leaves {unset} unset"
            assert source.split("\n", 1)[1] != nb.cells[a].source.split("\n", 1)[1]


@pytest.mark.notebook
def test_run_lesson_fails_a_check_that_accepts_the_wrong_answer(tmp_path):
    from labkit.tools import nbrun

    weak = "assert answer > 40, f'expected more than 40, got {answer}'"
    wrong = ("# WRONG: one off\nanswer = 41",)
    lesson = _tiny_lesson(tmp_path / "99_tiny.ipynb", "x = 1", check=weak, wrong=wrong)
    with pytest.raises(nbrun.LessonFailed, match="the check PASSED on wrong answer 1"):
        nbrun.run_lesson(lesson, timeout=60)
    strict = "assert answer == 42, f'expected 42, got {answer}'"
    lesson = _tiny_lesson(tmp_path / "99_tiny.ipynb", "x = 1", check=strict, wrong=wrong)
    run = nbrun.run_lesson(lesson, out=tmp_path / "out.ipynb", timeout=60)
    ((_, ok, said),) = run["exercises"]
    assert ok and "wrong answer 1 rejected: AssertionError: expected 42, got 41" in said, said
    assert (
        "teardown sees 42" in nbformat.read(tmp_path / "out.ipynb", 4).cells[-1].outputs[0]["text"]
    )


def test_outside_paths_names_a_home_file_and_a_temp_file_but_not_the_repository(monkeypatch):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print()")
    text = (
        f"token in {Path.home()}/.ray/auth_token; traceback in /tmp/ipykernel_1/2.py; "
        f"cache in {ROOT}/data/cache; shm in /dev/shm; a cut display: /main/.venv/bin/python; "
        "results the user chose: /tmp/chosen-results/job"
    )
    monkeypatch.setenv("LABKIT_RESULTS_DIR", "/tmp/chosen-results")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    nb.cells = [cell]
    found = nbrun.outside_paths(nb, ROOT)
    assert found == sorted(
        [f"cell 0: {Path.home()}/.ray/auth_token", "cell 0: /tmp/ipykernel_1/2.py"]
    )
