"""The learner id and the names made from it (labkit/learner.py), and how make test-cluster reads
whose apps and actors two learners made (labkit/tools/clustercheck.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from labkit import learner
from labkit.tools import clustercheck


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """A fresh state folder, the user Ana María and no LABKIT_LEARNER: the default id's file."""
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    monkeypatch.delenv(learner.ENV, raising=False)
    monkeypatch.setattr(learner.getpass, "getuser", lambda: "Ana María")
    return tmp_path / "learner-ana-mar-a"


def test_the_default_id_is_the_user_plus_a_suffix_kept_for_the_next_kernel(kept, monkeypatch):
    first = learner.learner_id()
    assert first.startswith("ana-mar") and learner.VALID.fullmatch(first)
    assert kept.read_text().strip() == first
    assert learner.learner_id() == first  # a restarted kernel finds its own apps again
    kept.write_text("Not An Id\n")  # a kept file spoilt by hand: a valid id replaces it
    again = learner.learner_id()
    assert learner.VALID.fullmatch(again) and kept.read_text().strip() == again
    monkeypatch.setattr(learner.getpass, "getuser", lambda: "ben")  # another user, same clone
    theirs = learner.learner_id()
    assert theirs.startswith("ben-") and theirs != again
    assert (kept.parent / "learner-ben").read_text().strip() == theirs
    assert sorted(p.name for p in kept.parent.iterdir()) == ["learner-ana-mar-a", "learner-ben"]


def test_two_kernels_making_the_id_at_once_agree(kept, monkeypatch):
    made = []
    real_link = learner.os.link

    def late(src, dst):  # another kernel keeps its id between this one's read and its link
        if not made:
            kept.write_text("ana-mar-a-beef\n")
            made.append(1)
        return real_link(src, dst)

    monkeypatch.setattr(learner.os, "link", late)
    assert learner.learner_id() == "ana-mar-a-beef"  # the one kept first, read back
    assert [p.name for p in kept.parent.iterdir()] == ["learner-ana-mar-a"]  # no temp left


def test_labkit_learner_wins_and_a_bad_one_names_the_rule(kept, monkeypatch):
    monkeypatch.setenv(learner.ENV, "team-3")
    assert learner.learner_id() == "team-3"
    assert not kept.exists()  # nothing written when the instructor gave the id
    for bad in ("Ana", "a.b", "-x", "x" * 33, "a/b"):
        monkeypatch.setenv(learner.ENV, bad)
        with pytest.raises(ValueError, match="lower-case letters, digits and '-'"):
            learner.learner_id()


def test_own_puts_the_id_after_a_dot_no_id_can_hold(kept, monkeypatch):
    monkeypatch.setenv(learner.ENV, "ana")
    assert learner.own("digits") == "digits.ana"
    assert "/" + learner.own("digits") == "/digits.ana"  # a route Serve accepts
    monkeypatch.setenv(learner.ENV, "b-ana")
    assert not learner.own("digits").endswith(".ana")  # b-ana's never reads as ana's
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
