"""The repository's own rules: stripped notebooks that follow the contract, ruff, matching deps."""

import ast
import json
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
#: Lab reports: the contract, stripping, cell lengths, the private-API ban and the verdict rule
#: hold for them too; they have no exercises or learner time, and end with what they found.
LAB_REPORTS = sorted((ROOT / "bench").glob("*.ipynb"))
EVERY = NOTEBOOKS + LAB_REPORTS
CONTRACT = ("SIZE", "DEVICE", "SEED", "RESULTS_DIR")


def _only_imports(source: str) -> bool:
    body = ast.parse(source).body
    return bool(body) and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in body)


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ is empty"


@pytest.mark.parametrize("path", EVERY, ids=lambda p: p.name)
def test_notebook_is_stripped_and_follows_the_contract(path):
    lab = path in LAB_REPORTS
    if lab:
        assert re.match(r"^lab_[a-z0-9_]+\.ipynb$", path.name), "name lab reports lab_topic.ipynb"
    else:
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
    # The cell after the parameters calls labkit.setup, or holds only imports and the next does.
    setup_at = 2 if _only_imports(code[1].source) else 1
    setup_cell = code[setup_at].source
    assert f'"{path.stem}"' in setup_cell and "labkit.setup(" in setup_cell, (
        "the cell after the parameters must call labkit.setup with the notebook's own name"
    )
    for name in CONTRACT:  # so DEVICE=cuda without CUDA stops every notebook in its setup
        assert f"{name}={name}" in setup_cell, f"pass {name}={name} to labkit.setup"
    text = "\n".join(c.source for c in nb.cells)
    tagged = [(i, c.metadata.get("tags", [])) for i, c in enumerate(nb.cells)]
    answers = [i for i, t in tagged if "answer" in t]
    if lab:
        found = next((c for c in nb.cells if c.source.startswith("## What it found")), None)
        assert found is not None, f"{path.name}: a lab report ends with '## What it found'"
        assert re.search(r"\]\(\.\./notebooks/\d\d_\w+\.ipynb\)", found.source), (
            f"{path.name}: 'What it found' links back to its lesson"
        )
        assert not answers and "**Time:** about" not in text, "no exercises or learner time"
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                for target in LINK.findall(cell.source):
                    assert (path.parent / target).is_file(), f"{path.name}: no file {target}"
    else:
        assert "## Summary" in text and "Exercise" in text and "# CHECK" in text
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
        [sys.executable, "-m", "ruff", "check", "labkit", "tests", "notebooks", "bench"],
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


# ---------------------------------------------------------------- a lesson's surface

LINK = re.compile(r"\]\(([^)#\s]+\.ipynb)\)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_header_summary_and_links_a_learner_can_follow(path):
    nb = nbformat.read(path, as_version=4)
    header = nb.cells[0].source
    assert "**Time:** about" in header and "min to work through" in header, (
        f"{path.name}: the header gives the learner's time as well as the machine's"
    )
    assert "**Prerequisites:**" in header
    if not path.name.startswith("00"):
        assert LINK.search(header.split("**Prerequisites:**")[1]), "prerequisites are links"
    summary = next(c.source for c in nb.cells if c.source.startswith("## Summary"))
    assert "**Key API:**" in summary and "**Next:**" in summary, (
        f"{path.name}: the summary ends with a Key API list and a Next line"
    )
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for target in LINK.findall(cell.source):
                assert (path.parent / target).is_file(), f"{path.name}: link to missing {target}"


@pytest.mark.parametrize("path", EVERY, ids=lambda p: p.name)
def test_no_private_ray_api_in_lesson_code(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not re.search(r"ray\._private|__ray_\w+__", cell.source), (
                f"{path.name}: cell {i} uses a private Ray API; use the public one (or labkit)"
            )


STATE_CALL = re.compile(
    r"^(list|summarize)_[a-z_]+$|^get_(actor|task|node|objects|log|job|placement_group|worker)$"
)


def _state_api_calls(source: str) -> list[tuple[str, ast.Call]]:
    """Calls of ``ray.util.state``'s functions (imported by name, through the module under any
    name, or spelled out), with the function's name."""
    tree = ast.parse(source)
    names, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "ray.util.state":
            names |= {a.asname or a.name for a in node.names if STATE_CALL.match(a.name)}
        elif isinstance(node, ast.ImportFrom) and node.module == "ray.util":
            modules |= {a.asname or a.name for a in node.names if a.name == "state"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == "ray.util.state" and a.asname}

    def state_function(func: ast.expr) -> str | None:
        if isinstance(func, ast.Name) and func.id in names:
            return func.id
        if isinstance(func, ast.Attribute) and STATE_CALL.match(func.attr):
            base = ast.unparse(func.value)
            if base in modules or base == "ray.util.state":
                return func.attr
        return None

    return [
        (name, node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and (name := state_function(node.func)) is not None
    ]


def _state_api_calls_without_address(source: str) -> list[str]:
    """Calls of ``ray.util.state``'s functions (imported by name, through the module under any
    name, or spelled out) that pass no address: neither ``address=``, nor ``**kwargs``, nor, for
    ``list_*``/``summarize_*``, a first positional argument."""
    missing = []
    for name, node in _state_api_calls(source):
        keywords = {k.arg for k in node.keywords}
        positional = bool(node.args) and not name.startswith("get_")
        if "address" not in keywords and None not in keywords and not positional:
            missing.append(name)
    return missing


def _one_by_id(call: ast.Call) -> bool:
    """Whether a listing's filters pin one thing by its id (``("object_id", "=", ...)``)."""
    for kw in call.keywords:
        if kw.arg == "filters" and isinstance(kw.value, (ast.List, ast.Tuple)):
            for f in kw.value.elts:
                if (
                    isinstance(f, ast.Tuple)
                    and len(f.elts) == 3
                    and all(isinstance(e, ast.Constant) for e in f.elts[:2])
                    and str(f.elts[0].value).endswith("_id")
                    and f.elts[1].value == "="
                ):
                    return True
    return False


def _listings_without_limit(source: str) -> list[str]:
    """``list_*`` calls that take the State API's default ``limit`` (100 rows, cut silently),
    unless their filters pin one thing by its id."""
    return [
        name
        for name, node in _state_api_calls(source)
        if name.startswith("list_")
        and not {"limit", None} & {k.arg for k in node.keywords}
        and not _one_by_id(node)
    ]


@pytest.mark.parametrize(
    "source, missing",
    [
        ("from ray.util.state import list_actors\nlist_actors(filters=[])", ["list_actors"]),
        ("from ray.util.state import list_actors\nlist_actors(address=a, filters=[])", []),
        ("from ray.util.state import list_actors\nlist_actors(a)", []),
        ("from ray.util.state import get_actor\nget_actor(i)", ["get_actor"]),
        ("from ray.util import state\nstate.summarize_tasks()", ["summarize_tasks"]),
        ("import ray.util.state as st\nst.list_nodes(**kw)", []),
        ("import ray\nray.util.state.list_jobs()", ["list_jobs"]),
        ("import ray\nray.get_actor('x')", []),  # not the State API
    ],
)
def test_the_state_api_check_finds_a_call_without_address(source, missing):
    assert _state_api_calls_without_address(source) == missing


@pytest.mark.parametrize(
    "source, missing",
    [
        ("from ray.util.state import list_tasks\nlist_tasks(address=a)", ["list_tasks"]),
        ("from ray.util.state import list_tasks\nlist_tasks(address=a, limit=10_000)", []),
        ("from ray.util.state import list_tasks\nlist_tasks(address=a, **kw)", []),
        (
            "from ray.util.state import list_objects\n"
            'list_objects(filters=[("object_id", "=", i)])',
            [],
        ),
        (
            'from ray.util.state import list_tasks\nlist_tasks(filters=[("state", "=", "FAILED")])',
            ["list_tasks"],
        ),
        ("from ray.util.state import summarize_tasks\nsummarize_tasks(address=a)", []),
    ],
)
def test_the_limit_check_finds_a_listing_a_bigger_size_can_overrun(source, missing):
    assert _listings_without_limit(source) == missing


def _python_of(path: Path) -> str:
    """A notebook's code cells as one Python source (IPython's ``%`` and ``!`` lines left out)."""
    nb = nbformat.read(path, as_version=4)
    lines = [line for c in nb.cells if c.cell_type == "code" for line in c.source.splitlines()]
    return "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))


@pytest.mark.parametrize("path", EVERY, ids=lambda p: p.name)
def test_every_state_api_listing_sets_its_limit(path):
    """A listing cut at the default 100 rows passes at smoke and fails at small (issue 39: 10's
    200 queued tasks hid the stuck one)."""
    source = _python_of(path)
    assert not _listings_without_limit(source), (
        f"{path.name}: pass limit= (10_000, the API server's most) to these State API listings, "
        "or filter them to one id: the default cuts at 100 rows, silently"
    )


@pytest.mark.parametrize("path", EVERY, ids=lambda p: p.name)
def test_every_state_api_call_names_its_cluster(path):
    """Without ``address=``, the State API asks RAY_ADDRESS or the last cluster on the machine."""
    source = _python_of(path)
    assert not _state_api_calls_without_address(source), (
        f"{path.name}: pass address= (session.address or the dashboard's URL) to these State API "
        "calls, or they may reach RAY_ADDRESS's cluster or a dead one"
    )


# ---------------------------------------------------------------- one vocabulary (STYLE.md)

SCALE_KEY = re.compile(
    r"^(n_[a-z_]+"  # counts: n_rows, n_tasks, n_files
    r"|[a-z_]+_(s|ms|mb|gb|bytes)"  # sizes and durations carry their unit
    r"|([a-z_]+_)?(repeats|steps|epochs)"  # repetitions
    r"|batch_size|hidden|depth|gpt|amp_models|prime_limit|max_workers|prefetch_batches|tests"
    r"|pool_sizes|batch_sizes)$"  # a lab report's swept lists
)


@pytest.mark.parametrize("path", EVERY, ids=lambda p: p.name)
def test_size_settings_are_one_table_whose_names_follow_the_vocabulary(path):
    """Issue 42: ``labkit.setup(by_size={name: (smoke, small, full)})``, one literal row per
    setting, so a reader compares the sizes along a line and no notebook splices dicts by hand."""
    nb = nbformat.read(path, as_version=4)
    setup = next(c.source for c in nb.cells if "labkit.setup(" in c.source)
    call = next(
        n
        for n in ast.walk(ast.parse(setup))
        if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "setup"
    )
    table = next((kw.value for kw in call.keywords if kw.arg == "by_size"), None)
    assert isinstance(table, ast.Dict), f"{path.name}: labkit.setup needs by_size={{...}}"
    rows = {}
    for key, row in zip(table.keys, table.values):
        assert isinstance(key, ast.Constant), f"{path.name}: a by_size key must be a literal name"
        assert isinstance(row, ast.Tuple) and len(row.elts) == 3, (
            f"{path.name}: by_size[{key.value!r}] must be a (smoke, small, full) tuple"
        )
        rows[key.value] = row
    bad = sorted(k for k in rows if not SCALE_KEY.match(k))
    assert not bad, f"{path.name}: size settings outside STYLE.md's vocabulary: {bad}"


# ---------------------------------------------------------------- labkit's own surface

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MODULES = sorted(
    p for p in (ROOT / "labkit").rglob("*.py") if p.stem not in ("__init__", "__main__")
)


def _top_level_definitions() -> dict[tuple[str, str], set[str]]:
    """(module, name) -> the words its definition uses, for every top-level def/class/constant."""
    defs = {}
    for path in MODULES:
        src = path.read_text()
        for node in ast.parse(src).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            else:
                continue
            for name in names:
                defs[(path.stem, name)] = set(WORD.findall(ast.get_source_segment(src, node)))
    return defs


def test_every_public_labkit_name_is_reached_from_a_notebook_or_the_cli():
    defs = _top_level_definitions()
    by_name: dict[str, list] = {}
    for key in defs:
        by_name.setdefault(key[1], []).append(key)
    roots = set()
    for path in EVERY:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                roots |= set(WORD.findall(cell.source))
    cli = sorted((ROOT / "labkit/tools").glob("cli*.py"))
    faces = sorted((ROOT / "labkit").glob("*/__init__.py"))  # the rooms' faces
    for path in (*cli, *faces, ROOT / "labkit/__init__.py", ROOT / "Makefile"):
        roots |= set(WORD.findall(path.read_text()))
    reached, todo, seen = set(), list(roots), set()
    while todo:
        word = todo.pop()
        if word in seen:
            continue
        seen.add(word)
        for key in by_name.get(word, []):
            if key not in reached:
                reached.add(key)
                todo.extend(defs[key])
    dead = sorted(
        f"labkit.{m}.{n}" for m, n in defs if (m, n) not in reached and not n.startswith("_")
    )
    assert not dead, f"public names no notebook or CLI reaches (remove, or make private): {dead}"


def test_lazy_modules_and_the_readme_list_every_module():
    import labkit

    eager = {"params", "measure", "checks"}
    top = {p.stem for p in MODULES if p.parent.name == "labkit" and not p.stem.startswith("_")}
    rooms = {p.parent.name for p in MODULES if p.parent.name != "labkit"}
    assert set(labkit._LAZY_MODULES) | eager == top | rooms
    layout = (ROOT / "README.md").read_text().split("## Layout", 1)[1]
    missing = [p.stem for p in MODULES if not re.search(rf"^\s+{p.stem}\s", layout, re.M)]
    assert not missing, f"README's layout does not list: {missing}"


BLOG_QUOTE = re.compile(r"\*\*S[02] §[\d.]+:\*\* 「[^」]+」 — \*\"[^\"]+\"\*")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_blog_error_quotes_the_post_it_corrects(path):
    """Learners' clones have no ../shared: the snippet is quoted (Chinese + gloss + section)."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if "blog-error" in cell.metadata.get("tags", []):
            before = next(c for c in reversed(nb.cells[:i]) if c.cell_type == "markdown")
            assert BLOG_QUOTE.search(before.source), (
                f"{path.name}: the markdown before blog-error cell {i} quotes the post: "
                '> **S0 §2.2:** 「原文」 — *"gloss"*'
            )


MAX_CELL_LINES = 40  # STYLE.md: "about 30"; this is the hard stop


@pytest.mark.parametrize("path", EVERY, ids=lambda p: p.name)
def test_code_cells_stay_short(path):
    nb = nbformat.read(path, as_version=4)
    long = [
        (i, len(c.source.splitlines()))
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and len(c.source.splitlines()) > MAX_CELL_LINES
    ]
    assert not long, f"{path.name}: split these cells (index, lines): {long}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_next_links_the_following_lesson(path):
    """A learner who finishes a lesson is sent on: to the next notebook, or from the last to the
    README's curriculum."""
    nb = nbformat.read(path, as_version=4)
    summary = next(c.source for c in nb.cells if c.source.startswith("## Summary"))
    next_line = summary.split("**Next:**", 1)[1].split("\n\n", 1)[0]
    later = [p for p in NOTEBOOKS if p.name > path.name]
    first_link = re.search(r"\]\(([^)]+)\)", next_line)
    want = later[0].name if later else "../README.md"
    assert first_link and first_link.group(1) == want, (
        f"{path.name}: **Next:** should link {want} first, not {first_link and first_link[1]}"
    )


@pytest.mark.parametrize("path", EVERY, ids=lambda p: p.name)
def test_papermill_reads_every_contract_parameter(path, caplog):
    """`papermill --help-notebook` and sweeps read the parameters cell: every one must parse."""
    import papermill

    found = papermill.inspect_notebook(str(path))
    assert set(CONTRACT) <= set(found), f"{path.name}: papermill reads only {sorted(found)}"
    assert "Unable to parse" not in caplog.text, caplog.text


def learner_minutes(nb) -> float:
    """STYLE.md's rule for the header's learner time: reading, code, the run, the exercises."""
    header = nb.cells[0].source
    words = sum(
        len(re.sub(r"`[^`]*`", " x ", c.source).split())
        for c in nb.cells
        if c.cell_type == "markdown"
    )
    code = sum(
        1
        for c in nb.cells
        if c.cell_type == "code"
        for line in c.source.splitlines()
        if line.strip() and not line.strip().startswith("#")
    )
    exercises = sum("answer" in c.metadata.get("tags", []) for c in nb.cells)
    small = re.search(r"`small` ≈ ([\d.]+) (min|s)\b", header)
    smoke = re.search(r"`smoke` ≈ ([\d.]+) (min|s)\b", header)
    value, unit = (small or smoke).groups()
    run = float(value) / (60 if unit == "s" else 1)
    return words / 150 + code / 15 + run + 10 * exercises


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_learner_time_follows_the_rule(path):
    nb = nbformat.read(path, as_version=4)
    stated = int(re.search(r"\*\*Time:\*\* about (\d+) min", nb.cells[0].source).group(1))
    want = learner_minutes(nb)
    assert 0.8 * want <= stated <= 2 * want, (
        f"{path.name}: the header says about {stated} min; STYLE.md's floor is {want:.0f} "
        "(a careful read's estimate may be longer, not shorter, and not past twice it)"
    )


def test_the_makefile_parses_without_warnings():
    """A target defined twice (make keeps the last recipe, and only warns) is a defect."""
    import subprocess

    done = subprocess.run(
        ["make", "-n", "lint"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert "warning" not in done.stderr.lower(), done.stderr


@pytest.mark.parametrize("path", EVERY, ids=lambda p: p.name)
def test_cell_ids_are_unique_and_not_positions(path):
    """Translations are keyed by cell id (issue 26): an id must survive cells moving around,
    so none may be a position ("c07", "12", "cell-3"); `make strip` keeps them (--keep-id)."""
    ids = [c.get("id") for c in json.loads(path.read_text())["cells"]]
    assert all(ids), f"{path.name}: a cell without an id"
    dups = sorted({i for i in ids if ids.count(i) > 1})
    assert not dups, f"{path.name}: duplicate cell ids {dups}"
    positional = [i for i in ids if re.fullmatch(r"(cell-?|[a-z]{0,3})\d{1,3}", i)]
    assert not positional, f"{path.name}: positional cell ids {positional}"


def test_make_strip_keeps_cell_ids():
    strip = next(ln for ln in (ROOT / "Makefile").read_text().splitlines() if "nbstripout" in ln)
    assert "--keep-id" in strip and "bench/" in strip
