"""Every lesson, as ``make test`` runs it: executed through the kit's runner
(:func:`labkit.tools.nbrun.run_lesson`), written to ``$LABKIT_RESULTS_DIR/<lesson>.ipynb``
(``runs/test/`` under ``make test``), and then, in the same kernel, each exercise's learner cells
run: the stub, then its check, which must stop at once saying which answer is missing; then each
wrong answer, which the check must reject. Its outputs may name no path of this machine outside the
repository. ``LABKIT_NB`` (``make test NB="01 06"``) picks lessons by number. Lessons 00, 07 and 12
run as their Chinese copy (:data:`IN_CHINESE`), and must print no English-only line. Lessons a
module of their own runs whole (:data:`COVERED_BY`) are run there, with the same runner.
"""

import os
from pathlib import Path

import pytest

from labkit.tools import nbrun, zh
from labkit.tools.cli_runs import notebooks_to_run

ROOT = Path(__file__).resolve().parents[1]
#: Lessons run whole by a module of their own (with :func:`run_lesson`): skipped here when that
#: module is collected too (``-m "not network"`` leaves 10's out: then 10 runs here).
COVERED_BY = {
    "04_scheduling_and_resources.ipynb": "tests/test_rerun.py",  # Run All twice in one kernel
    "10_observability_and_security.ipynb": "tests/test_observability.py",  # nothing left running
}


def executed_path(path: Path) -> Path:
    """Where the executed lesson goes: the results folder, as ``labkit run`` writes it."""
    return Path(os.environ.get("LABKIT_RESULTS_DIR") or ROOT / "runs" / "test") / path.name


def test_lessons_are_picked_by_number():
    assert [p.name[:2] for p in notebooks_to_run(["01", "06"])] == ["01", "06"]
    every = list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks_to_run([])) == len(every)
    assert [p.relative_to(ROOT).as_posix() for p in notebooks_to_run(["lab_tasks"])] == [
        "bench/lab_tasks.ipynb"
    ]


def test_the_modules_that_run_a_lesson_whole_exist():
    for name, module in COVERED_BY.items():
        assert (ROOT / "notebooks" / name).is_file() and name[:2] in (ROOT / module).read_text()


CHOSEN = notebooks_to_run(os.environ.get("LABKIT_NB", "").split())  # make test NB="01 06"
#: Lessons run as their Chinese copy (issue 41), in place of the English run: the same code, so
#: the same checks, and the output must hold no English-only line of the kit's own words.
IN_CHINESE = ("00", "07", "12")


@pytest.mark.notebook
@pytest.mark.ray
@pytest.mark.parametrize("path", CHOSEN, ids=lambda p: p.stem)
def test_lesson(path, request):
    module = COVERED_BY.get(path.name)
    if module and any(item.nodeid.startswith(module) for item in request.session.items):
        pytest.skip(f"{module} runs this lesson (with the same runner)")
    lang = "zh" if path.name[:2] in IN_CHINESE else "en"
    out = executed_path(path)
    run = nbrun.run_lesson(path, out=out, lang=lang)
    said = "; ".join(f"{', '.join(names)}: {what}" for names, _, what in run["exercises"])
    print(f"{path.stem}: ran in {run['seconds']:.0f} s; learner checks: {said}")
    assert run["exercises"], "every lesson has exercises"
    # the site publishes the outputs: no home folder, temporary file or other install of this
    # machine in them (labkit.params.shown prints a path the portable way)
    assert not run["outside_paths"], f"paths of this machine in the outputs: {run['outside_paths']}"
    if lang == "zh":  # 00's promise: what the kit prints speaks Chinese (labkit zh english)
        english = zh.english_lines(out)
        assert not english, "English-only lines in the Chinese run:\n" + "\n".join(
            f"  {cell}: {line[:120]}" for cell, line in english
        )
