"""Every lab report in ``bench/``, as ``make test`` runs it: at ``smoke`` (one point of each
sweep), through the kit's runner, written to ``$LABKIT_RESULTS_DIR/bench/<report>.ipynb``. A lab
report has no exercises; its records go where the lessons' do, and its outputs name no path of
this machine outside the repository (the site publishes them).

Which ones run: those the submission touches (their notebook, or a ``labkit`` module they reach)
and the day's in turn (``touched._lab_plan``): seven lab reports took about 260 s of the CI box's
60 minutes, and lesson 13 needed the room. ``LABKIT_LABS=all`` runs every one."""

import os
import time
from pathlib import Path

import pytest

from labkit.tools import nbrun, touched

ROOT = Path(__file__).resolve().parents[1]
REPORTS = sorted((ROOT / "bench").glob("lab_*.ipynb"))


def _chosen() -> tuple[list[Path], str]:
    if os.environ.get("LABKIT_LABS") == "all":
        return REPORTS, "LABKIT_LABS=all: every lab report"
    return touched._lab_plan(REPORTS, time.localtime().tm_yday, base=os.environ.get("RERUN_BASE"))


def test_there_are_lab_reports():
    assert REPORTS, "bench/ holds no lab report"


@pytest.mark.notebook
@pytest.mark.ray
@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.stem)
def test_lab_report(path):
    chosen, why = _chosen()
    print(why)
    if path not in chosen:
        pytest.skip(f"not touched and not the day's ({why})")
    out = Path(os.environ.get("LABKIT_RESULTS_DIR") or ROOT / "runs" / "test") / "bench"
    run = nbrun.run_lesson(path, out=out / path.name, exercises=False)
    print(f"{path.stem}: ran in {run['seconds']:.0f} s")
    assert not run["exercises"]
    assert not run["outside_paths"], f"paths of this machine in the outputs: {run['outside_paths']}"
