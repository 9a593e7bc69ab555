"""Every lab report in ``bench/``, as ``make test`` runs it: at ``smoke`` (one point of each
sweep), through the kit's runner, written to ``$LABKIT_RESULTS_DIR/bench/<report>.ipynb``. A lab
report has no exercises; its records go where the lessons' do, and its outputs name no path of
this machine outside the repository (the site publishes them)."""

import os
from pathlib import Path

import pytest

from labkit.tools import nbrun

ROOT = Path(__file__).resolve().parents[1]
REPORTS = sorted((ROOT / "bench").glob("lab_*.ipynb"))


def test_there_are_lab_reports():
    assert REPORTS, "bench/ holds no lab report"


@pytest.mark.notebook
@pytest.mark.ray
@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.stem)
def test_lab_report(path):
    out = Path(os.environ.get("LABKIT_RESULTS_DIR") or ROOT / "runs" / "test") / "bench"
    run = nbrun.run_lesson(path, out=out / path.name, exercises=False)
    print(f"{path.stem}: ran in {run['seconds']:.0f} s")
    assert not run["exercises"]
    assert not run["outside_paths"], f"paths of this machine in the outputs: {run['outside_paths']}"
