"""The learner id and the names made from it (labkit/learner.py), and how make test-cluster reads
whose apps and actors two learners made (labkit/tools/clustercheck.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from labkit import learner
from labkit.tools import clustercheck


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """A fresh state folder and no LABKIT_LEARNER: the id a learner gets by default."""
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    monkeypatch.delenv(learner.ENV, raising=False)
    return tmp_path / "learner"


def test_the_default_id_is_the_user_plus_a_suffix_kept_for_the_next_kernel(kept, monkeypatch):
    monkeypatch.setattr(learner.getpass, "getuser", lambda: "Ana María")
    first = learner.learner_id()
    assert first.startswith("ana-mar") and learner.VALID.fullmatch(first)
    assert kept.read_text().strip() == first
    assert learner.learner_id() == first  # a restarted kernel finds its own apps again
    kept.write_text("Not An Id\n")  # a kept file spoilt by hand: a valid id replaces it
    again = learner.learner_id()
    assert learner.VALID.fullmatch(again) and kept.read_text().strip() == again


def test_labkit_learner_wins_and_a_bad_one_names_the_rule(kept, monkeypatch):
    monkeypatch.setenv(learner.ENV, "team-3")
    assert learner.learner_id() == "team-3"
    assert not kept.exists()  # nothing written when the instructor gave the id
    for bad in ("Ana", "a.b", "-x", "x" * 33, "a/b"):
        monkeypatch.setenv(learner.ENV, bad)
        with pytest.raises(ValueError, match="lower-case letters, digits and '-'"):
            learner.learner_id()


def test_own_names_and_mine_picks_only_this_learners(kept, monkeypatch):
    monkeypatch.setenv(learner.ENV, "ana")
    assert learner.own("digits") == "digits.ana"
    assert "/" + learner.own("digits") == "/digits.ana"  # a route Serve accepts
    apps = ["digits.ana", "digits.b-ana", "digits.ana-2", "digits", "far.ana", "ana"]
    assert learner.mine(apps) == ["digits.ana", "far.ana"]  # not b-ana's, nor an unowned one
    with pytest.raises(ValueError, match="plain name"):
        learner.own("/digits")


def test_the_runtime_env_carries_the_id_beside_what_the_lesson_set(kept, monkeypatch):
    monkeypatch.setenv(learner.ENV, "ana")
    given = {"env_vars": {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2"}, "py_modules": ["x"]}
    env = learner.runtime_env(given)
    assert env["env_vars"] == {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2", "LABKIT_LEARNER": "ana"}
    assert env["py_modules"] == ["x"] and "LABKIT_LEARNER" not in given["env_vars"]
    assert learner.runtime_env() == {"env_vars": {"LABKIT_LEARNER": "ana"}}


def test_a_local_session_has_no_one_else_and_its_line_says_the_id(kept, monkeypatch):
    monkeypatch.setenv(learner.ENV, "ana")
    local = SimpleNamespace(mode="local", dashboard_url="http://127.0.0.1:1")
    assert learner.others(local) == []
    assert learner.line(local).startswith("learner: ana (") and "other sessions" not in (
        learner.line(local)
    )


def test_whose_sorts_the_pairs_apps_and_actors_by_learner():
    seen = {
        "1": ["ServeReplica:digits.ana:DigitsAPI", "SERVE_REPLICA::digits.ana#x", "serve", "DEAD"],
        "2": ["ServeReplica:digits.ben:DigitsAPI", "SERVE_REPLICA::digits.ben#y", "serve", "DEAD"],
        "3": ["Counter", "request-counter.ana", "labkit-02", "DEAD"],
        "4": ["Counter", "request-counter.ben", "labkit-02", "DEAD"],
        "5": ["ServeController", "SERVE_CONTROLLER_ACTOR", "serve", "ALIVE"],
        "6": ["Counter", "", "", "DEAD"],
    }
    got = clustercheck.whose(seen)
    both = {"apps": ["digits"], "named": ["labkit-02/request-counter"]}
    assert got["made"] == {"ana": both, "ben": both}
    assert got["stray"] == [] and got["alive"] == []
    seen["7"] = ["ServeReplica:digits:DigitsAPI", "SERVE_REPLICA::digits#z", "serve", "ALIVE"]
    seen["8"] = ["ServeReplica:far.ben:DigitsAPI", "SERVE_REPLICA::far.ben#w", "serve", "ALIVE"]
    got = clustercheck.whose(seen)
    assert got["stray"] == ["digits"]  # an app named without an id: a collision waiting
    assert got["made"]["ben"]["apps"] == ["digits", "far"] and got["alive"] == ["far.ben"]
