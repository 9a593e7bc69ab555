"""Every command block in the READMEs is run by a test, or says why not (issue 39).

The blocks come from the READMEs themselves (:mod:`labkit.tools.readme`), so the README and the
commands the tests run cannot drift apart. The long ones run in ``make test-journeys``
(``tests/test_journeys.py``); the quick ones here.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from labkit.tools import readme

ROOT = Path(__file__).resolve().parents[1]


def _named_by_tests() -> set[str]:
    """Block names that tests ask for: the strings in the first argument of each
    ``readme.script(...)`` or ``readme.block(...)`` call, a ``readme.zh:`` prefix dropped."""
    names = set()
    for path in (ROOT / "tests").glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("script", "block")
                and getattr(node.func.value, "id", "") == "readme"
                and node.args
            ):
                for const in ast.walk(node.args[0]):
                    if isinstance(const, ast.Constant) and isinstance(const.value, str):
                        names.add(const.value.split(":", 1)[-1])
    return names


def test_every_command_block_is_run_or_says_why_not():
    blocks = readme.command_blocks()
    assert len(blocks) >= 10, "the READMEs' command blocks were not found"
    unmarked = [b.where for b in blocks if not (b.name or b.not_run)]
    assert not unmarked, (
        "a README command block with no '<!-- readme: NAME -->' (a test runs it) nor "
        f"'<!-- readme: not run: why -->' marker on the line above its fence: {unmarked}"
    )
    named = _named_by_tests()
    unrun = [f"{b.where} ({b.name})" for b in blocks if b.name and b.name not in named]
    assert not unrun, f"README blocks that no test runs (readme.script(NAME)): {unrun}"
    executed = [b for b in blocks if b.name]
    print(f"\nREADME command blocks: {len(executed)} run by tests, "
          f"{len(blocks) - len(executed)} marked not run")  # fmt: skip


def test_every_skip_names_one_command_of_its_block_and_names_are_unique():
    blocks = readme.command_blocks()
    for b in blocks:
        for skip in b.skips:
            assert len(readme.skip_matches(b, skip)) == 1, f"{b.where}: skip {skip!r}"
    for name in {b.name for b in blocks if b.name}:
        readmes = [b.readme for b in blocks if b.name == name]
        assert len(readmes) == len(set(readmes)), f"two blocks in one README are named {name!r}"


def test_blocks_commands_and_markers_are_read_as_a_person_reads_them(tmp_path):
    (tmp_path / "README.md").write_text(
        "intro\n\n"
        "<!-- readme: demo; skip make big: too long -->\n"
        "```bash\n"
        "make small   # a comment\n"
        "echo 'a # not a comment' \\\n"
        "    <name>\n"
        "# a whole-line comment\n"
        "make big\n"
        "```\n\n"
        "1. A step:\n\n"
        "   <!-- readme: not run: needs a GPU -->\n"
        "   ```bash\n"
        "   nvidia-smi\n"
        "   ```\n"
        "```yaml\n"
        "size: smoke\n"
        "```\n"
    )
    demo, gpu, yaml = readme.blocks("README.md", root=tmp_path)
    assert demo.commands() == ["make small", "echo 'a # not a comment' <name>", "make big"]
    assert (gpu.not_run, gpu.commands(), yaml.lang) == ("needs a GPU", ["nvidia-smi"], "yaml")
    assert demo.where == "README.md:4"
    # README.md alone is read here: the root has no README.zh.md
    with pytest.raises(ValueError, match=r"still has \['<name>'\]"):
        readme.script("demo", root=_only_readme(tmp_path))
    script = readme.script("demo", {"<name>": "ok"}, root=_only_readme(tmp_path))
    assert script.splitlines()[1:] == ["make small", "echo 'a # not a comment' ok"]


def _only_readme(root: Path) -> Path:
    (root / "README.zh.md").write_text("")
    return root


@pytest.mark.parametrize(
    "marker, error",
    [
        ("not run:", "needs a reason"),
        ("Set Up", "lowercase words"),
        ("demo; skipping x", "expected 'skip COMMAND: why'"),
    ],
)
def test_a_bad_marker_names_its_line(tmp_path, marker, error):
    (tmp_path / "README.md").write_text(f"<!-- readme: {marker} -->\n```bash\nls\n```\n")
    with pytest.raises(ValueError, match=f"README.md:2: .*{error}"):
        readme.blocks("README.md", root=tmp_path)


def test_the_bench_block_as_written():
    """The sweep validated and listed, and two runs compared (a committed run against itself:
    every figure in both, nothing flagged)."""
    kept = sorted(p.parent for p in (ROOT / "results").glob("*/*/results.csv"))
    assert kept, "no committed sweep with a results.csv under results/"
    run = str(kept[-1].relative_to(ROOT))
    script = readme.script("bench", {"<run A>": run, "<run B>": run})
    out = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert re.search(r"labkit bench: \d+ runs at SIZE=smoke", out.stdout), out.stdout[-2000:]
