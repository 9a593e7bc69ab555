"""labkit gpu-check: the budget planner, and one real run of the script on the CPU."""

import json

import pytest

from labkit.tools import cli, gpucheck
from labkit.tools.gpucheck import Check


def test_plan_keeps_the_order_and_skips_what_does_not_fit():
    checks = (
        Check("07", "full", 200, ""),
        Check("06", "full", 300, ""),
        Check("00", "small", 50, ""),
    )
    assert [c.notebook for c in gpucheck.plan(checks, 420)] == ["07", "00"]
    assert [c.notebook for c in gpucheck.plan(checks, 600)] == ["07", "06", "00"]
    assert gpucheck.plan(checks, 420, elapsed_s=400) == []


def test_default_checks_go_in_issue_27s_order_with_07_first_and_06_last():
    names = [(c.notebook, c.size) for c in gpucheck.CHECKS]
    assert names[0] == ("07", "full") and names[-1] == ("06", "full")
    assert [n for n, _ in names[1:5]] == ["12", "08", "09", "11"]  # never run on a GPU yet
    assert {s for n, s in names[1:-1]} == {"small"}
    assert [c.notebook for c in gpucheck.plan(gpucheck.CHECKS, 420)] == ["07", "12", "00"]
    assert len(gpucheck.plan(gpucheck.CHECKS, 1400)) == len(gpucheck.CHECKS)
    assert "13" in [c.notebook for c in gpucheck.CHECKS]  # the language model, at small


def test_gpu_slug_names_the_machine():
    assert gpucheck.gpu_slug() == "cpu" or gpucheck.gpu_slug().startswith(("nvidia", "1x", "2x"))


@pytest.mark.ray
def test_gpu_check_runs_headless_on_the_cpu(tmp_path):
    """The same script a GPU box runs, exercised with DEVICE=cpu on notebook 00 at smoke."""
    out = tmp_path / "check"
    code = cli.main(
        ["gpu-check", "--out", str(out), "--device", "cpu", "--size", "smoke", "--only", "00"]
    )
    summary = json.loads((out / "summary.json").read_text())
    assert code == 0, summary
    assert [r["notebook"] for r in summary["ran"]] == ["00_welcome_and_setup"]
    assert summary["ran"][0]["status"] == "ok" and summary["skipped"] == []
    assert (out / "executed" / "00_welcome_and_setup.ipynb").is_file()
    assert (out / "00_welcome_and_setup.jsonl").is_file()
    assert "| 00_welcome_and_setup | ok |" in (out / "summary.md").read_text()


def test_gpu_check_skips_over_budget(tmp_path):
    out = tmp_path / "check"
    assert cli.main(["gpu-check", "--out", str(out), "--budget", "1", "--device", "cpu"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ran"] == [] and len(summary["skipped"]) == len(gpucheck.CHECKS)


def test_a_gpu_check_run_is_kept_in_the_results_layout(tmp_path, monkeypatch):
    """`labkit bench keep` files a gpu-check run as it files a sweep, under
    results/<gpu>/<date>-<commit>/, never over an earlier one."""
    out = tmp_path / "check"
    assert cli.main(["gpu-check", "--out", str(out), "--budget", "1", "--device", "cpu"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["name"] == gpucheck.gpu_slug() and summary["machine"]["cpus"] > 0
    monkeypatch.setenv("LABKIT_ROOT", str(tmp_path))
    assert cli.main(["bench", "keep", str(out)]) == 0
    (kept,) = (tmp_path / "results" / summary["name"]).iterdir()
    assert kept.name == f"{summary['started'][:10]}-{summary['commit']}"
    assert (kept / "summary.json").is_file()
    with pytest.raises(SystemExit, match="never overwritten"):
        cli.main(["bench", "keep", str(out)])
