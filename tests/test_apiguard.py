"""The guard against removed or deprecated APIs: clean on the kit, firing on a plant, silent
on the same code in a blog-error cell, in a string or in a comment."""

import json

import pytest

from labkit.params import repo_root
from labkit.tools import apiguard, cli

PLANTS = {  # one use per rule, as the blogs wrote them
    "ray.air": "from ray.air import session",
    "ray.train.Trainer": "from ray.train import Trainer",
    "tune.run": "tune.run(trainable, num_samples=10)",
    "serve.start()": "serve.start()",
    "deploy": 'Predictor.deploy("model.h5")',
    "to_torch": "loader = ds.to_torch(batch_size=512)",
    "torch.cuda.amp": "with torch.cuda.amp.autocast():\n    pass",
    "ray.delete": "ray.delete(ref)",
    "concurrency": "ds.map_batches(Model, concurrency=4, batch_size=64)",
}


def test_the_kit_uses_none_of_them():
    found = apiguard.scan_tree(repo_root())
    assert found == [], "\n".join(map(str, found))


@pytest.mark.parametrize("key", sorted(PLANTS))
def test_every_rule_fires_on_its_plant(key):
    (finding,) = apiguard.scan_source(PLANTS[key], "plant.py")
    assert finding.rule is apiguard.RULES[key]
    assert finding.where == "plant.py:1"


def test_current_forms_strings_and_comments_pass():
    ok = """
serve.start(http_options={"host": "127.0.0.1", "port": 8123})  # not the bare form
print("the blog's tune.run( and ray.air")  # ray.delete(ref) in a comment
ds.map_batches(f, compute=ray.data.ActorPoolStrategy(size=2))
loadgen.start(url, concurrency=4)
%time x = 1
"""
    assert apiguard.scan_source(ok, "ok.py") == []


def _notebook(cells: list[tuple[str, list[str]]]) -> dict:
    return {
        "cells": [
            {"cell_type": "code", "metadata": {"tags": tags}, "source": src, "outputs": []}
            for src, tags in cells
        ]
        + [{"cell_type": "markdown", "metadata": {}, "source": "tune.run(f)"}],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_a_plant_fails_the_guard_and_a_marked_one_does_not(tmp_path, capsys):
    (tmp_path / "labkit").mkdir()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "labkit" / "helpers.py").write_text("import ray\n\nray.delete(ref)\n")
    nb = _notebook(
        [
            ("x = 1\nds.map_batches(f, concurrency=2)", []),  # planted: fails the guard
            ("tune.run(f)", ["blog-error"]),  # marked: the lesson shows it failing
        ]
    )
    (tmp_path / "notebooks" / "99_plant.ipynb").write_text(json.dumps(nb))
    found = [str(f) for f in apiguard.scan_tree(tmp_path)]
    assert found == [
        "labkit/helpers.py:3: ray.delete( -> " + apiguard.RULES["ray.delete"].fix,
        "notebooks/99_plant.ipynb cell 0:2: map_batches(..., concurrency=) -> "
        + apiguard.RULES["concurrency"].fix,
    ]
    assert cli.main(["guard", "--root", str(tmp_path)]) == 1
    assert "2 use(s)" in capsys.readouterr().out
    assert cli.main(["guard"]) == 0
