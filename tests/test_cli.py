import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from labkit.runtime import procs
from labkit.tools import cli, cli_machine, cli_runs, doctor

ROOT = Path(__file__).resolve().parents[1]
LABKIT = [sys.executable, "-m", "labkit"]


def test_parse_parameters_takes_a_list_for_a_knob():
    assert cli_runs.parse_parameters(["SIZES_MB=[64, 1024]", "TASK_MS=[0.5"]) == {
        "SIZES_MB": [64, 1024],
        "TASK_MS": "[0.5",
    }


def test_parse_parameters():
    assert cli_runs.parse_parameters(["SIZE=smoke", "SEED=3", "RESULTS_DIR=a=b"]) == {
        "SIZE": "smoke",
        "SEED": 3,
        "RESULTS_DIR": "a=b",
    }
    with pytest.raises(SystemExit):
        cli_runs.parse_parameters(["SIZE"])


def test_notebooks_to_run_by_prefix_and_default():
    every = cli_runs.notebooks_to_run([])
    assert every and all(p.suffix == ".ipynb" for p in every)
    assert every == sorted(every)
    assert cli_runs.notebooks_to_run(["00"])[0].name.startswith("00_")
    with pytest.raises(SystemExit):
        cli_runs.notebooks_to_run(["99"])


def test_doctor_reports_what_a_helper_needs():
    report = doctor.report()
    for key in (
        "python",
        "ray",
        "torch",
        "cpu cores",
        "memory",
        "/dev/shm",
        "ray auth token",
        "nvidia-smi gpus",
        "ports busy on 127.0.0.1",
        "browser",
        "browser driver",
    ):
        assert key in report
    assert report["ray"].startswith("2.60")
    if shutil.which("chromium") and shutil.which("chromedriver"):  # after `make browser`
        assert report["browser"].startswith("Chromium ")
        assert report["browser driver"].startswith("ChromeDriver ")
    out = subprocess.run(LABKIT + ["doctor", "--json"], capture_output=True, text=True)
    said = json.loads(out.stdout)
    assert said["ray"].startswith("2.60")
    assert out.returncode == (1 if said["problems"] else 0), said["problems"]


def test_doctor_names_a_taken_port_in_one_line_and_fails():
    import socket

    from labkit.runtime.net import listening

    if listening(doctor.LAB_PORT):
        pytest.skip(f"port {doctor.LAB_PORT} is taken already")
    with socket.socket() as held:
        held.bind(("127.0.0.1", doctor.LAB_PORT))
        held.listen()
        out = subprocess.run(LABKIT + ["doctor"], capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("labkit doctor: PROBLEM")]
    (line,) = [ln for ln in lines if f"port {doctor.LAB_PORT}" in ln]  # one line for the port
    assert f"port {doctor.LAB_PORT} on 127.0.0.1 is taken" in line


def test_ray_starts_without_the_slow_jsonschema_import(monkeypatch):
    # `make install` removes rfc3987-syntax: each Ray process would build its parsers at import.
    probe = "import sys, ray; print(sorted(m for m in sys.modules if m in {names!r}))"
    names = set(doctor.SLOW_IMPORTS)
    out = subprocess.run(
        [sys.executable, "-c", probe.format(names=names)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stdout
    assert doctor.slow_imports() == []
    monkeypatch.setitem(doctor.SLOW_IMPORTS, "json", "json: planted")  # an installed module
    assert doctor.slow_imports() == ["json: planted"]


def _notebook(path: Path, body: str) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(
        "SIZE = None\nDEVICE = None\nSEED = None\nRESULTS_DIR = None"
    )
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)
    return path


GOOD = """import labkit
p = labkit.setup("00_good", SIZE=SIZE, DEVICE=DEVICE, SEED=SEED, RESULTS_DIR=RESULTS_DIR)
labkit.record("demo.answer", 42, "x", size=p.size)
"""
BAD = "raise RuntimeError('boom')"


def test_run_goes_on_past_a_failure_and_summarises(tmp_path):
    good = _notebook(tmp_path / "00_good.ipynb", GOOD)
    bad = _notebook(tmp_path / "01_bad.ipynb", BAD)
    out_dir = tmp_path / "run"
    proc = subprocess.run(
        LABKIT + ["run", str(bad), str(good), "-p", "SIZE=smoke", "--out", str(out_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    assert (out_dir / "00_good.ipynb").is_file() and (out_dir / "01_bad.ipynb").is_file()
    rec = json.loads((out_dir / "00_good.jsonl").read_text())
    assert rec["metric"] == "demo.answer" and rec["size"] == "smoke"
    summary = (out_dir / "summary.md").read_text()
    assert "| 01_bad | FAILED |" in summary and "| 00_good | ok |" in summary
    assert "boom" in summary and "demo.answer" in summary


def test_run_in_chinese_runs_its_kernels_in_chinese(tmp_path, monkeypatch):
    """Issue 41: `labkit run --lang zh` sets LABKIT_LANG for the kernels it starts, so the
    verdicts they print are Chinese too (not only the markdown it swaps in)."""
    import argparse

    import papermill

    from labkit.tools import zh

    seen = []
    monkeypatch.setenv("LABKIT_LANG", "en")  # --lang wins, and the test's env is put back
    monkeypatch.setattr(zh, "translate", lambda nb, path: nb)
    monkeypatch.setattr(
        papermill, "execute_notebook", lambda *a, **k: seen.append(os.environ["LABKIT_LANG"])
    )
    good = _notebook(tmp_path / "00_good.ipynb", GOOD)
    args = argparse.Namespace(
        notebooks=[str(good)], param=[], out=str(tmp_path / "r"), kernel="python3", lang="zh",
        cell_timeout=60, verbose=False,
    )  # fmt: skip
    cli_runs.cmd_run(args)
    assert seen == ["zh"]


def test_run_fails_fast_on_a_bad_parameter(tmp_path):
    good = _notebook(tmp_path / "00_good.ipynb", GOOD)
    proc = subprocess.run(
        LABKIT + ["run", str(good), "-p", "SIZE=huge", "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    assert "ParameterError" in proc.stderr and "smoke, small, full" in proc.stderr
    assert not (tmp_path / "r" / "00_good.jsonl").exists()


def test_clean_removes_cache_and_old_runs_and_stops_recorded_processes(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "labkit").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    for name in ("20260101-000000", "20260102-000000", "20260103-000000"):
        (root / "runs" / name).mkdir(parents=True)
    (root / "data" / "cache").mkdir(parents=True)
    (root / "data" / "cache" / "x.parquet").write_text("x")
    monkeypatch.setenv("LABKIT_ROOT", str(root))
    monkeypatch.delenv("LABKIT_DATA_DIR", raising=False)
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path / "state"))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        procs.remember({"leftover": [sleeper.pid]}, "session:test")
        assert cli.main(["clean", "--keep-runs", "1"]) == 0
        assert sleeper.wait(timeout=15) is not None
    finally:
        sleeper.kill()
    assert not (root / "data" / "cache").exists()
    left = sorted(p.name for p in (root / "runs").iterdir())
    assert len(left) == 1
    assert procs.alive() == []


def test_lab_command_is_pinned_to_loopback_with_a_token():
    cmd = cli_machine.lab_command(8899, "secret", open_browser=False)
    assert "--ip=127.0.0.1" in cmd and "--IdentityProvider.token=secret" in cmd
    assert "--no-browser" in cmd and not any("0.0.0.0" in c for c in cmd)


def test_rerun_runs_all_but_the_teardown_then_all_again_in_one_kernel(tmp_path, capsys):
    import nbformat

    log = tmp_path / "log.txt"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "runs = globals().get('runs', 0) + 1\n"
            f"open({str(log)!r}, 'a').write(f'body {{runs}}\\n')"
        ),
        nbformat.v4.new_code_cell(f"open({str(log)!r}, 'a').write('teardown\\n')"),
    ]
    path = tmp_path / "99_tiny.ipynb"
    nbformat.write(nb, path)
    assert cli.main(["rerun", str(path), "--cell-timeout", "60"]) == 0
    # one kernel: the second pass sees the first pass's state; teardown only at the end
    assert log.read_text().splitlines() == ["body 1", "body 2", "teardown"]
    assert "99_tiny.ipynb ok" in capsys.readouterr().out


def test_the_rerun_rotation_reaches_every_other_lesson_in_as_many_days():
    lessons = cli_runs.notebooks_to_run([])
    chosen = cli_runs.notebooks_to_run(["07"])
    others = [p for p in lessons if p not in chosen and p.name[:2] != "04"]
    picked = {cli_runs.rotation_pick(day, lessons, chosen).name[:2] for day in range(len(others))}
    assert picked == {path.name[:2] for path in others}
    assert {"10", "11", "12"} <= picked and not {"04", "07"} & picked
    assert cli_runs.rotation_pick(1, lessons, lessons) is None


def test_the_small_rotation_reaches_every_notebook_within_four_weeks():
    items = cli_runs.small_rotation()
    assert len(items) <= 28, "more notebooks than days in four weeks: run two a day"
    picks = {cli_runs.small_pick(day, [])[0] for day in range(1, len(items) + 1)}
    assert picks == set(items)
    assert any(p.name.startswith("lab_") for p in items) and any(p.name[:2] == "10" for p in items)


def test_a_touched_lesson_goes_first_at_small():
    lessons = cli_runs.notebooks_to_run([])
    touched = [lessons[9], lessons[10]]
    pick, why = cli_runs.small_pick(7, touched)
    assert pick in touched and "the submission touches 09, 10" in why
    pick, why = cli_runs.small_pick(7, [])
    assert pick == cli_runs.small_rotation()[7 % len(cli_runs.small_rotation())] and "day 7" in why
