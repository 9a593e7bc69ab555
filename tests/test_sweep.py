"""labkit bench: a sweep file validated before anything runs, run through papermill, collected,
reported and compared (a planted 2x regression is flagged). No timing is asserted."""

import csv
import json
import shutil
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from labkit.bench import report, store, sweep
from labkit.checks import error_line
from labkit.measure import read_records
from labkit.runtime import nbexec
from labkit.tools import cli

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "fixtures" / "lab_tiny.ipynb"


def _write(tmp_path, text, name="s.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_sweeps_in_bench_are_valid():
    files = sorted((ROOT / "bench" / "sweeps").glob("*.yaml"))
    assert {f.stem for f in files} >= {"core", "full"}
    for f in files:
        spec = sweep.load(f)
        assert sweep.points(spec)


@pytest.mark.parametrize(
    "text, message",
    [
        ("notebooks: [{notebook: lab_nothing, grid: {N: [1]}}]", "'lab_nothing' is not found"),
        ("notebooks: [{notebook: lab_tasks, grid: {N_TASK: [1]}}]", "no parameter 'N_TASK'"),
        ("notebooks: [{notebook: lab_tasks, grid: {SIZE: [smoke]}}]", "SIZE is set by the sweep"),
        ("notebooks: [{notebook: lab_tasks, grid: {TASK_MS: []}}]", "non-empty list"),
        ("notebooks: [{notebook: lab_tasks, repeats: 0}]", "repeats must be a whole number"),
        ("notebooks: [{notebook: lab_tasks, grids: {}}]", "unknown key(s) ['grids']"),
        ("size: huge\nnotebooks: [{notebook: lab_tasks}]", "size 'huge' is not one of"),
        ("notebook: lab_tasks", "expected 'notebooks:"),
    ],
)
def test_a_bad_sweep_fails_at_once_naming_what_is_wrong(tmp_path, text, message):
    with pytest.raises(sweep.SweepError) as err:
        sweep.load(_write(tmp_path, text))
    assert message in str(err.value)
    with pytest.raises(SystemExit) as stop:  # the command says it too, before running anything
        cli.main(["bench", str(_write(tmp_path, text, "c.yaml"))])
    assert message in str(stop.value)


def test_points_are_the_grid_product_times_the_repeats(tmp_path):
    spec = sweep.load(
        _write(
            tmp_path,
            "notebooks: [{notebook: lab_tasks, grid: {TASK_MS: [1, 10], N_ROUNDS: [2]}, "
            "repeats: 3}]",
        )
    )
    pts = sweep.points(spec)
    assert len(pts) == 6
    assert [p.label for p in pts[:2]] == ["TASK_MS=1,N_ROUNDS=2", "TASK_MS=10,N_ROUNDS=2"]
    assert sorted({p.repeat for p in pts}) == [0, 1, 2]
    assert len({p.run_id for p in pts}) == 6


def test_series_keep_labels_and_a_verdicts_numbers_are_left_out():
    ctx = {"shard": "kept", "workers": 2, "task_ms": 10.0}
    assert sweep.series_key(ctx) == "shard=kept, task_ms=10.0, workers=2"
    verdict = {"shard": "kept", "shortest": 0, "ratio": 1.2, "sentence": "x", "key": "a:yes"}
    assert sweep.series_key(verdict) == "shard=kept"


def test_fixed_parameters_keep_two_entries_of_one_notebook_apart(tmp_path):
    spec = sweep.load(
        _write(
            tmp_path,
            "notebooks: [{notebook: lab_tasks, params: {N_ROUNDS: 2}}, "
            "{notebook: lab_tasks, params: {N_ROUNDS: 3}}]",
        )
    )
    ids = [p.run_id for p in sweep.points(spec)]
    assert ids == ["lab_tasks--N_ROUNDS=2--r0", "lab_tasks--N_ROUNDS=3--r0"]
    many = "[" + "1, " * 60 + "2]"
    long = sweep.load(
        _write(tmp_path, f"notebooks: [{{notebook: lab_tasks, grid: {{TASK_MS: [{many}]}}}}]")
    )
    assert len(sweep.points(long)[0].run_id) < 100


def test_compare_flags_only_worse_changes_past_the_noise_band():
    def run(values):
        rows = []
        for metric, better, vals in values:
            rows += [
                {"notebook": "n", "metric": metric, "unit": "u", "series": "", "point": "p"}
                | {"better": better, "value": v}
                for v in vals
            ]
        return pd.DataFrame(rows)

    a = run(
        [
            ("m.up", "higher", [100, 100]),
            ("m.noisy", "higher", [60, 100, 140]),
            ("m.down", "lower", [10, 10]),
            ("m.unknown", "", [1, 1]),
            ("m.slow", "lower", [10, 10]),
            ("m.part", "lower", [0, 0]),
            ("m.gone", "higher", [5, 5]),
        ]
    )
    b = run(
        [
            ("m.up", "higher", [80, 80]),
            ("m.noisy", "higher", [70, 70, 70]),
            ("m.down", "lower", [5, 5]),
            ("m.unknown", "", [3, 3]),
            ("m.slow", "lower", [12, 12]),
            ("m.part", "lower", [-1, -1]),
            ("m.new", "higher", [1, 1]),
        ]
    )
    changes = {c.key[1]: c for c in report.compare(a, b)}
    assert changes["m.up"].worse and changes["m.up"].ratio == pytest.approx(0.8)
    assert not changes["m.noisy"].worse  # 30% lower, inside 2 x its 40% coefficient of variation
    assert changes["m.noisy"].threshold == pytest.approx(0.8)
    assert not changes["m.down"].worse  # lower is better: halved is an improvement
    assert not changes["m.unknown"].worse  # no direction: never flagged
    assert changes["m.slow"].worse  # lower is better, and 20% higher
    assert not changes["m.part"].worse and changes["m.part"].ratio is None  # at or below zero
    assert changes["m.gone"].worse and changes["m.gone"].b is None  # stopped recording
    assert not changes["m.new"].worse and changes["m.new"].a is None
    table = "\n".join(report.compare_table(list(changes.values())))
    assert "**missing in B**" in table and "new in B" in table


def test_keep_never_overwrites(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.csv").write_text("metric,value\n")
    (run / "points").mkdir()
    day = pd.Timestamp("2026-12-05").date()
    kept = store.keep(run, machine="cpu2-x", day=day, sha="abc", root=tmp_path)
    assert kept == tmp_path / "results" / "cpu2-x" / "2026-12-05-abc"
    assert (kept / "results.csv").is_file() and not (kept / "points").exists()
    with pytest.raises(FileExistsError, match="never overwritten"):
        store.keep(run, machine="cpu2-x", day=day, sha="abc", root=tmp_path)


def test_machine_names():
    assert store.machine_name({"gpu": "NVIDIA H200", "cpus": 16}) == "nvidia-h200"
    h100s = {"gpu": "NVIDIA H100 80GB HBM3 SXM5", "gpu_count": 8}
    assert store.machine_name(h100s) == "8x-nvidia-h100-80gb-hbm3"
    assert store.machine_name({"gpu": "", "cpus": 2, "cpu_model": "AMD EPYC"}) == "cpu2-amd-epyc"
    fp = store.fingerprint()
    assert {"cpu_model", "cpus", "memory_gb", "python", "ray", "torch", "gpu"} <= set(fp)
    assert fp["gpu_count"] == len(store.gpus())


@pytest.mark.notebook
def test_a_tiny_sweep_runs_collects_reports_and_a_planted_regression_is_flagged(tmp_path, capsys):
    spec_path = _write(
        tmp_path,
        f"size: smoke\nnotebooks:\n  - notebook: {TINY}\n    grid: {{N: [1, 2]}}\n"
        f"    repeats: 2\n  - notebook: {TINY}\n    params: {{FAIL: true}}\n",
    )
    a = tmp_path / "a"
    assert cli.main(["bench", str(spec_path), "--out", str(a)]) == 1  # the failing point
    runs = list(csv.DictReader(open(a / "points.csv")))
    assert len(runs) == 5 and sum(r["status"] != "ok" for r in runs) == 1
    failed = next(r for r in runs if r["status"] != "ok")
    assert "FAIL was set" in failed["error"]
    results = pd.read_csv(a / "results.csv")
    assert len(results) == 4 * 3 + 1  # 4 good runs x 3 records, and the failed run's first one
    assert list(results[results.status == "FAILED"]["point"]) == ["FAIL=true"]
    assert set(results[results.status == "ok"]["param.N"]) == {1, 2}
    assert (results["machine.cpus"] > 0).all() and results["machine.ray"].notna().all()
    rate = results[(results.metric == "tiny.rate") & (results.status == "ok")]
    assert sorted(rate["value"]) == [100, 100, 200, 200]
    assert set(rate["better"]) == {"higher"} and set(rate["series"]) == {"kind=tiny"}
    text = (a / "report.md").read_text()
    assert "5 runs, 1 failed" in text and "FAIL=true |" not in text.split("## lab_tiny")[1]
    assert "| tiny.rate (items/s) | kind=tiny | N=2 | higher | 2 | 200 | 200 | 200 | 0% |" in text
    assert (a / "plots" / "lab_tiny--tiny.rate.png").is_file()
    assert "![tiny.rate" in text
    assert json.loads((a / "sweep.json").read_text())["machine"]["cpus"] > 0

    # Against itself: nothing flagged. Then B with the rate halved: flagged, exit status 1.
    assert cli.main(["bench", "compare", str(a), str(a)]) == 0
    b = tmp_path / "b"
    b.mkdir()
    planted = results.copy()
    planted.loc[planted.metric == "tiny.rate", "value"] /= 2
    planted.to_csv(b / "results.csv", index=False)
    capsys.readouterr()
    assert cli.main(["bench", "compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    flagged = [line for line in out.splitlines() if "**worse**" in line]
    assert len(flagged) == 2 and all("tiny.rate" in line for line in flagged)
    assert "6 figures in both runs, 0 in one only; 2 flagged worse" in out
    with pytest.raises(SystemExit, match="holds a sweep's runs already"):
        cli.main(["bench", str(spec_path), "--out", str(a)])
    shutil.rmtree(a / "points")


@pytest.mark.notebook
def test_without_papermill_a_point_runs_through_nbclient_with_its_parameters(tmp_path):
    """A GPU box reached without a package index carries nbclient but not papermill."""
    out = tmp_path / "runs" / "tiny.ipynb"
    out.parent.mkdir()
    params = {"SIZE": "smoke", "RESULTS_DIR": str(tmp_path / "rec"), "N": 3, "FACTOR": 0.5}
    nbexec.execute(TINY, out, parameters=params, timeout=120, using="nbclient")
    rates = [r for r in read_records(tmp_path / "rec") if r["metric"] == "tiny.rate"]
    assert [r["value"] for r in rates] == [150.0]
    executed = nbformat.read(out, as_version=4)
    assert "injected-parameters" in executed.cells[2].metadata["tags"]
    # an executed copy: one injection
    nbexec.execute(out, out, parameters=params | {"N": 1}, timeout=120, using="nbclient")
    tags = [c.metadata.get("tags", []) for c in nbformat.read(out, as_version=4).cells]
    assert sum("injected-parameters" in t for t in tags) == 1
    with pytest.raises(Exception) as err:
        nbexec.execute(TINY, out, parameters=params | {"FAIL": True}, timeout=120, using="nbclient")
    assert error_line(err.value, 300).startswith("AssertionError: FAIL was set")
    assert nbformat.read(out, as_version=4).cells[3].outputs  # written, with the error in it


@pytest.mark.notebook
def test_a_point_runs_without_papermill(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "papermill", None)  # `import papermill` now fails
    out = tmp_path / "tiny.ipynb"
    params = {"SIZE": "smoke", "RESULTS_DIR": str(tmp_path / "rec"), "N": 2}
    assert nbexec.engine() == "nbclient"
    sweep._execute(TINY, out, params, timeout=120)
    assert [r["value"] for r in read_records(tmp_path / "rec")][0] == 200.0


@pytest.mark.notebook
@pytest.mark.parametrize("using", nbexec.ENGINES)
def test_a_hung_cell_is_interrupted_and_fails_in_either_engine(tmp_path, using):
    """The one execute: papermill or nbclient, a cell past the timeout fails the run (it does
    not go on as if it had passed), and the executed copy is written with the error in it."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Py"}
    nb.cells = [
        nbformat.v4.new_code_cell("N = 1", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("import time\ntime.sleep(60)"),
        nbformat.v4.new_code_cell("after = True"),
    ]
    path, out = tmp_path / "hang.ipynb", tmp_path / "out" / "hang.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(Exception) as err:
        nbexec.execute(path, out, parameters={"N": 2}, timeout=3, using=using)
    said = error_line(err.value, 300)
    assert said.startswith("CellTimeoutError") and "ran past 3 s" in said, said
    cells = nbformat.read(out, as_version=4).cells
    (injected,) = [c for c in cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert "N = 2" in injected.source
    assert not cells[-1].get("outputs") and cells[-1].get("execution_count") is None
