"""The workshop tracks (issue 44): every lesson a track lists exists, each with its learner time;
the READMEs' tables are what ``labkit tracks`` prints from the kept tracks sweep, so the run
times in them are measured ones; and the command reads a sweep run as written."""

import csv
import json
from pathlib import Path

import pytest

from labkit.tools import exercises as ex
from labkit.tools import readme, tracks

ROOT = Path(__file__).resolve().parents[1]


def _run(folder: Path, seconds: dict[str, float], sweep: str = tracks.SWEEP) -> Path:
    folder.mkdir(parents=True)
    with (folder / "points.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "notebook", "point", "repeat", "status", "seconds", "error"])
        for nn, s in seconds.items():
            stem = ex.lesson(nn).stem
            w.writerow([f"{stem}--default--r0", stem, "default", 0, "ok", s, ""])
    machine = {"cpu_model": "Test CPU", "cpus": 2, "gpu": ""}
    sweep_json = {"sweep": sweep, "size": "small", "started": folder.name, "machine": machine}
    (folder / "sweep.json").write_text(json.dumps(sweep_json))
    return folder


def test_every_tracked_lesson_has_a_learner_time_and_exercises():
    for days in tracks.TRACKS.values():
        for nn in (nn for day in days for nn in day):
            assert tracks.learner_minutes(nn) > 0 and tracks.exercise_count(nn) >= 1


def test_each_lessons_prerequisites_come_before_it_in_its_track():
    for title, days in tracks.TRACKS.items():
        order = [nn for day in days for nn in day]
        for i, nn in enumerate(order):
            missing = [pre for pre in tracks.prerequisites(nn) if pre not in order[:i]]
            assert not missing, f"{title}: {nn} needs {missing} before it"
    assert tracks.prerequisites("09") == ["02", "05"]


def test_the_table_adds_the_learner_times_and_the_runs(tmp_path):
    lessons = {nn for days in tracks.TRACKS.values() for day in days for nn in day}
    run = _run(tmp_path / "results" / "m" / "2026-12-07", {nn: 60.0 for nn in lessons})
    table = tracks.table(run)
    three = next(line for line in table.splitlines() if line.startswith("| 3 hours"))
    learn = sum(tracks.learner_minutes(nn) for nn in tracks.TRACKS["3 hours"][0])
    assert f"| {learn / 60:.1f} h | 3.0 min |" in three  # three lessons of 60 s each
    assert f"01 (2 ex.; {tracks.learner_minutes('01')} min; 1.0 min)" in three
    assert "<br>day 2: 06" in table and "2 cores (Test CPU)" in table
    assert "| 两天 | 第 1 天：00（" in tracks.table(run, "zh")
    del_one = _run(tmp_path / "short", {"00": 1.0})
    with pytest.raises(SystemExit, match="no finished run of"):
        tracks.table(del_one)
    _run(tmp_path / "results" / "m" / "2026-12-08", {}, sweep="bench/sweeps/core.yaml")
    assert tracks.kept_run(tmp_path / "results") == run  # the newest run of the tracks sweep


@pytest.mark.parametrize("name, lang", [("README.md", "en"), ("README.zh.md", "zh")])
def test_the_readmes_tables_are_the_kept_sweeps(name, lang):
    text = (ROOT / name).read_text()
    assert tracks.table(tracks.kept_run(), lang) in text, (
        f"{name}'s workshop tracks are not `labkit tracks --lang {lang}`'s: run it and paste"
    )


def test_the_workshop_block_runs_as_written():
    import subprocess

    script = readme.script("workshop")
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]  # the last command, labkit tracks
    assert "| 3 hours |" in done.stdout and "ray " in done.stdout and "torch " in done.stdout
    # what the README says doctor must show, or the problems it names (a machine without
    # Chromium for make test-browser, a port taken: each said in one line)
    problems = [line for line in done.stdout.splitlines() if "PROBLEM" in line]
    assert "nothing missing" in done.stdout or problems
