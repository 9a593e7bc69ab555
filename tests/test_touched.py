"""Which lessons a change touches (labkit.tools.touched), and the rerun pass's budget."""

import json
import os
import subprocess
from pathlib import Path

from labkit.tools import touched
from labkit.tools.cli_runs import notebooks_to_run


def _git(repo: Path, *args: str, when: int | None = None) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t")
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    if when is not None:
        env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"] = f"{when} +0000"
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _commit(repo: Path, name: str, when: int) -> str:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(f"{name} {when}\n")
    _git(repo, "add", name)
    _git(repo, "commit", "-qm", name, when=when)
    return _git(repo, "rev-parse", "HEAD")


def test_the_base_is_the_newest_commit_older_than_a_session(tmp_path):
    _git(tmp_path, "init", "-q")
    day = 1_700_000_000
    old = _commit(tmp_path, "a.txt", day)
    assert touched.session_base(tmp_path) is None  # the whole history is new
    _commit(tmp_path, "labkit/x.py", day + 20 * 3600)  # the next session
    _commit(tmp_path, "notebooks/01_a.ipynb", day + 22 * 3600)
    assert touched.session_base(tmp_path) == old
    changed = touched.changed_files(old, tmp_path)
    assert sorted(changed) == ["labkit/x.py", "notebooks/01_a.ipynb"]
    (tmp_path / "a.txt").write_text("edited\n")  # uncommitted edits count too
    assert "a.txt" in touched.changed_files(old, tmp_path)


def _lesson(path: Path, code: str, smoke: str = "`smoke` ≈ 1 min") -> Path:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": [f"# L\n**Time:** {smoke}, x.\n"]},
        {"cell_type": "code", "metadata": {}, "source": [code], "outputs": []},
    ]
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4}))
    return path


def test_a_lesson_reaches_the_modules_it_names_and_what_they_import(tmp_path):
    pkg = tmp_path / "labkit"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from labkit.params import setup\n")
    (pkg / "params.py").write_text("import json\n")
    (pkg / "plots.py").write_text("from labkit import measure\n")
    (pkg / "measure.py").write_text("")
    (pkg / "serve.py").write_text("")
    nb = _lesson(tmp_path / "01_a.ipynb", "import labkit\nfrom labkit import plots\nlabkit.x()\n")
    found = touched.lesson_modules(nb, pkg)
    assert found == {"labkit", "labkit.params", "labkit.plots", "labkit.measure"}
    other = _lesson(tmp_path / "02_b.ipynb", "print(1)\n")
    assert touched.lesson_modules(other, pkg) == set()


def test_the_real_lessons_reach_the_session_module():
    for path in notebooks_to_run([]):
        reached = touched.lesson_modules(path)
        assert {"labkit", "labkit.runtime.session", "labkit.params"} <= reached, path.name


def test_touched_lessons_and_the_budget(tmp_path):
    a = _lesson(tmp_path / "01_a.ipynb", "labkit.plots.save()\n", "`smoke` ≈ 60 s")
    b = _lesson(tmp_path / "02_b.ipynb", "print(1)\n", "`SIZE=smoke` ≈ 2 min")
    c = _lesson(tmp_path / "03_c.ipynb", "labkit.plots.bar()\n", "`smoke` ≈ 30 s")
    assert touched.smoke_seconds(b) == 120
    # the real package: plots.py is a module the first lesson names
    direct, through = touched.touched_lessons(["notebooks/02_b.ipynb", "labkit/plots.py"], [a, b])
    assert direct == [b] and through == [a]
    run, left, cost = touched.plan([a], [b, c], budget_s=150)
    assert run == [a, c] and left == [b] and cost == touched.RERUN_COST * (60 + 30)


def test_rerun_plan_names_what_it_runs_skips_and_leaves_out(tmp_path, monkeypatch):
    a = _lesson(tmp_path / "01_a.ipynb", "print(1)\n", "`smoke` ≈ 60 s")
    b = _lesson(tmp_path / "02_b.ipynb", "print(1)\n", "`smoke` ≈ 2 min")
    c = _lesson(tmp_path / "04_c.ipynb", "print(1)\n", "`smoke` ≈ 30 s")
    changed = ["notebooks/02_b.ipynb", "notebooks/04_c.ipynb"]
    monkeypatch.setattr(touched, "changed_files", lambda base: changed)
    run, lines = touched.rerun_plan([a], [a, b, c], day=0, budget_s=150, skips=("04",), base="b")
    assert run == [a]  # 02 would take the estimate past the budget; 04 is skipped
    assert "since b; lessons touched: notebook 02," in lines[0] and "(and 04:" in lines[0]
    assert lines[1].startswith("running 01 (about 90 s") and "over the budget: 02" in lines[2]


def test_lab_plan_runs_the_touched_lab_reports_and_the_days(tmp_path, monkeypatch):
    reports = [_lesson(tmp_path / f"lab_{n}.ipynb", "print(1)\n", "`smoke` ≈ 30 s") for n in "abc"]
    monkeypatch.setattr(touched, "changed_files", lambda base: ["bench/lab_c.ipynb"])
    run, why = touched._lab_plan(reports, day=0, base="b")
    assert run == [reports[0], reports[2]]  # day 0's (lab_a) and the touched one (lab_c)
    assert "touched: lab_c" in why and "day 0's: lab_a" in why and "their days: lab_b" in why
    run, _ = touched._lab_plan(reports, day=2, base="b")
    assert run == [reports[2]]  # the day's and the touched one are the same


def test_a_module_whose_docstrings_alone_changed_touches_no_lesson(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    mod = tmp_path / "labkit" / "m.py"
    mod.parent.mkdir()
    mod.write_text('"""Used in: 01."""\n\n\ndef f():\n    """One."""\n    return 1  # one\n')
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a", "--allow-empty")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b")
    base = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.strip()
    mod.write_text('"""Used in: 01, 13."""\n\n\ndef f():\n    """Said again."""\n    return 1\n')
    assert touched.changed_files(base, root=tmp_path) == []  # a caption and a comment
    mod.write_text('"""Used in: 01."""\n\n\ndef f():\n    return 2\n')
    assert touched.changed_files(base, root=tmp_path) == ["labkit/m.py"]


def _committed(root: Path) -> str:
    """``root`` as a git repository with everything in it committed; the commit."""
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t",
                                                "commit", "-qm", "a"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_module_added_to_the_faces_lazy_set_alone_touches_no_lesson(tmp_path):
    def face(names: str, tail: str = "") -> str:
        return f'"""Face."""\n\n_LAZY_MODULES = {{{names}}}\n\n\ndef f():\n    return 1\n{tail}'

    init = tmp_path / "labkit" / "__init__.py"
    init.parent.mkdir()
    init.write_text(face('"amp", "data"'))
    base = _committed(tmp_path)
    init.write_text(face('"amp", "data", "learner"'))  # a new module made lazy: nothing runs anew
    assert touched.changed_files(base, root=tmp_path) == []
    init.write_text(face('"amp"'))  # a name taken away: a lesson naming it breaks
    assert touched.changed_files(base, root=tmp_path) == ["labkit/__init__.py"]
    init.write_text(face('"amp", "data", "learner"', "X = 2\n"))  # and other code beside it
    assert touched.changed_files(base, root=tmp_path) == ["labkit/__init__.py"]


def test_a_notebook_whose_prose_alone_changed_touches_nothing(tmp_path):
    def notebook(header: str, code: str, tags: list[str]) -> str:
        cells = [
            {"cell_type": "markdown", "metadata": {}, "source": [header]},
            {"cell_type": "code", "metadata": {"tags": tags}, "source": [code]},
            {"cell_type": "raw", "metadata": {"tags": ["wrong"]}, "source": ["x = 2"]},
        ]
        return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})

    nb = tmp_path / "notebooks" / "01_a.ipynb"
    nb.parent.mkdir()
    nb.write_text(notebook("`small` ≈ 3 min", "x = 1", ["answer"]))
    base = _committed(tmp_path)
    nb.write_text(notebook("`small` ≈ 1 min", "x = 1", ["answer"]))  # the header's time
    assert touched.changed_files(base, root=tmp_path) == []
    nb.write_text(notebook("`small` ≈ 1 min", "x = 1", ["check"]))  # a tag changes the probes
    assert touched.changed_files(base, root=tmp_path) == ["notebooks/01_a.ipynb"]
    nb.write_text(notebook("`small` ≈ 3 min", "x = 3", ["answer"]))
    assert touched.changed_files(base, root=tmp_path) == ["notebooks/01_a.ipynb"]


def test_cluster_plan_runs_the_touched_lessons_then_the_days_within_the_budget(
    tmp_path, monkeypatch
):
    a = _lesson(tmp_path / "01_a.ipynb", "print(1)\n", "`smoke` ≈ 60 s")
    b = _lesson(tmp_path / "02_b.ipynb", "print(1)\n", "`smoke` ≈ 2 min")
    c = _lesson(tmp_path / "03_c.ipynb", "print(1)\n", "`smoke` ≈ 30 s")
    monkeypatch.setattr(touched, "changed_files", lambda base: ["notebooks/02_b.ipynb"])
    run, why = touched.cluster_plan([a, b, c], day=0, budget_s=200, base="b")
    assert run == [a, b]  # 02 touched (120 s), then 01 fits (180 s), 03 would not
    assert "touched: 02" in why and "left to their days: 03" in why
    run, _ = touched.cluster_plan([a, b, c], day=1, budget_s=200, base="b")
    assert run == [b, c]  # the day's rotation starts at 03 now
    run, _ = touched.cluster_plan([a, b, c], day=0, budget_s=0, base="b")
    assert run == [b]  # a touched lesson runs whatever the budget


def test_test_cluster_runs_the_named_lessons_all_or_the_plan(monkeypatch):
    from labkit.tools import clustercheck

    assert clustercheck.chosen(["09"], ["00", "09"], budget_s=0) == ["09"]
    assert clustercheck.chosen(["all"], ["00", "09"], budget_s=0) == ["00", "09"]
    monkeypatch.setattr(touched, "cluster_plan", lambda paths, day, **kw: (paths[1:], "why"))
    assert clustercheck.chosen([], ["00", "09"], budget_s=0) == ["09"]
