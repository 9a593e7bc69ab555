"""The repository's own rules: stripped notebooks that follow the contract, ruff, matching deps."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CONTRACT = ("SIZE", "DEVICE", "SEED", "RESULTS_DIR")


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ is empty"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stripped_and_follows_the_contract(path):
    assert re.match(r"^\d\d_[a-z0-9_]+\.ipynb$", path.name), "name notebooks NN_topic.ipynb"
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for cell in code:
        assert not cell.outputs, f"{path.name}: a cell has outputs; run `make strip`"
        assert cell.execution_count is None, f"{path.name}: execution counts left; `make strip`"
    first = code[0]
    assert "parameters" in first.metadata.get("tags", []), "tag the first code cell 'parameters'"
    for name in CONTRACT:
        assert re.search(rf"^{name} = None\b", first.source, re.M), f"{name} = None missing"
    setup_cell = code[1].source
    assert f'"{path.stem}"' in setup_cell and "labkit.setup(" in setup_cell, (
        "the cell after the parameters must call labkit.setup with the notebook's own name"
    )
    for name in CONTRACT:  # so DEVICE=cuda without CUDA stops every notebook in its setup
        assert f"{name}={name}" in setup_cell, f"pass {name}={name} to labkit.setup"
    text = "\n".join(c.source for c in nb.cells)
    assert "## Summary" in text and "Exercise" in text and "# CHECK" in text
    tagged = [(i, c.metadata.get("tags", [])) for i, c in enumerate(nb.cells)]
    answers = [i for i, t in tagged if "answer" in t]
    assert answers, f"{path.name}: tag each exercise's answer cell 'answer'"
    for i in answers:
        nxt = nb.cells[i + 1] if i + 1 < len(nb.cells) else None
        assert nxt is not None and "check" in nxt.metadata.get("tags", []), (
            f"{path.name}: answer cell {i} must be followed by a cell tagged 'check'"
        )
        assert re.search(r"^\s*assert\b", nxt.source, re.M), f"{path.name}: check {i + 1} asserts"
        hidden = nb.cells[i].metadata.get("jupyter", {}).get("source_hidden")
        assert hidden, f"{path.name}: answer cell {i} opens collapsed (jupyter.source_hidden)"
    for i, t in tagged:
        if "check" in t:
            assert i - 1 in answers, f"{path.name}: check cell {i} follows no answer cell"
        uses = "labkit.expect_error(" in nb.cells[i].source
        assert uses == ("blog-error" in t), (
            f"{path.name}: cell {i}: a cell showing a blog error uses labkit.expect_error "
            "(which fails when the error stops happening) and is tagged 'blog-error'"
        )
    source = "\n".join(c.source for c in code)
    assert "0.0.0.0" not in source, "never bind to 0.0.0.0"
    assert not re.search(r"ray\.init\(\s*\)", source), "a bare ray.init() may join another's Ray"
    assert "ray stop" not in source and "AutoscalingCluster(" not in source


def test_ruff_is_clean():
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "labkit", "tests", "notebooks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def _names(reqs):
    return {
        re.split(r"[\s\[<>=!~;]", r.strip(), maxsplit=1)[0].lower(): r.replace(" ", "")
        for r in reqs
    }


def test_environment_yml_names_the_same_dependencies_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = _names(project["dependencies"] + project["optional-dependencies"]["dev"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = _names([r for r in pip_section if not r.startswith("-")])
    assert listed == wanted
    assert any(d.startswith("python=3.11") for d in env["dependencies"] if isinstance(d, str))
    assert "-c constraints.txt" in pip_section


def test_constraints_pin_torch_and_ray():
    pins = (ROOT / "constraints.txt").read_text().splitlines()
    assert "torch==2.13.0" in pins and "ray==2.60.0" in pins


def test_readme_lists_every_notebook_and_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    for path in NOTEBOOKS:
        assert path.name in readme, f"add {path.name} to the README's curriculum table"


def test_gitignore_keeps_outputs_and_cache_out():
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    for entry in ("runs/", "data/cache/", ".venv/", ".labkit/"):
        assert entry in ignored
