"""make test-cluster's checks (the run itself is `make test-cluster`, not pytest)."""

from __future__ import annotations

from labkit import clustercheck, workshop


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


def test_the_lessons_it_runs_are_lessons(tmp_path):
    names = {p.name[:2] for p in (clustercheck.repo_root() / "notebooks").glob("*.ipynb")}
    assert set(clustercheck.JOIN) <= names and set(clustercheck.LOCAL) <= names
    assert not set(clustercheck.JOIN) & {"04", "05"}  # they build clusters of their own


def test_each_lessons_header_says_what_make_test_cluster_does_with_it():
    import json

    for path in sorted((clustercheck.repo_root() / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        header = "".join(json.loads(path.read_text())["cells"][0]["source"])
        line = next(x for x in header.splitlines() if x.startswith("**On a cluster:**"))
        joins = "joins that cluster" in line
        assert joins == (path.name[:2] in clustercheck.JOIN), f"{path.name}: {line}"
        if path.name[:2] in clustercheck.LOCAL:
            assert "local Ray of its own" in line, f"{path.name}: {line}"
