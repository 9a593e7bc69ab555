"""make test-cluster's checks (the run itself is `make test-cluster`, not pytest)."""

from __future__ import annotations

from labkit.tools import clustercheck, workshop


def test_storage_under_a_nodes_temp_dir_is_found(tmp_path):
    (tmp_path / "w0" / "session_1" / "artifacts" / "TorchTrainer_2026").mkdir(parents=True)
    (tmp_path / "head" / "logs").mkdir(parents=True)
    (tmp_path / "w1" / "x" / "checkpoint_000001").mkdir(parents=True)
    found = clustercheck.storage_under_temp_dirs(str(tmp_path))
    assert sorted(p.rsplit("/", 1)[1] for p in found) == ["TorchTrainer_2026", "checkpoint_000001"]
    assert clustercheck.storage_under_temp_dirs(str(tmp_path / "head")) == []


def test_leftovers_name_the_state_file_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    state = {"temp_dir": str(tmp_path / "lkc-none"), "net": None, "pids": []}
    assert clustercheck.leftovers(state) == []
    workshop.state_path().write_text("{}")
    assert clustercheck.leftovers(state) == [str(workshop.state_path())]


def test_the_lessons_it_runs_come_from_their_headers():
    """Issue 42: the lessons' own **On a cluster** lines say which join and which keep a local
    Ray; the plan has no list of its own."""
    plan = clustercheck.on_a_cluster()
    assert {"00", "01", "09", "11"} <= set(plan["join"]) and plan["local"] == ["10"]
    assert not set(plan["join"]) & {"04", "05", "12"}  # clusters of their own; 12 stays local
