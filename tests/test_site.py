"""`labkit site`: built from a run's executed notebooks, and failing on what a reader must not
meet: an error outside a blog-error cell, a broken link, anything from another host, an image
without alt text, a path outside the repository."""

from __future__ import annotations

import base64
import json
import re
import tarfile
from pathlib import Path

import pytest

from labkit.params import repo_root
from labkit.tools import site, site_check, site_pages

pytest.importorskip("myst_nb", reason="the site's tools come with `make install` (.[dev])")

ROOT = repo_root()
LESSON = "00_welcome_and_setup"
# A 1x1 PNG: the plot a run would have left in the output.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d4944415478da63f8cfc0f01f0005000201e2214bc50000000049454e44ae426082"
    )
).decode()


def executed(**plant) -> dict:
    """Lesson 00 as a run would leave it: outputs on its code cells, an alt-texted plot."""
    nb = json.loads((ROOT / "notebooks" / f"{LESSON}.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for c in code:
        c["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ok\n"}]
        c["execution_count"] = 1
    code[2]["outputs"].append(
        {
            "output_type": "display_data",
            "data": {"image/png": PNG, "text/plain": "<Figure>"},
            "metadata": {"image/png": {"alt": "Chart: what one task costs"}},
        }
    )
    if "error" in plant:
        code[3]["outputs"].append(
            {"output_type": "error", "ename": "ValueError", "evalue": "planted", "traceback": []}
        )
    if "traceback" in plant:
        code[3]["outputs"].append(
            {"output_type": "stream", "name": "stderr", "text": site.TRACEBACK + ":\n  x\n"}
        )
    if "markdown" in plant:
        nb["cells"].insert(
            2, {"cell_type": "markdown", "metadata": {}, "source": plant["markdown"]}
        )
    return nb


def make_run(tmp_path: Path, **plant) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / f"{LESSON}.ipynb").write_text(json.dumps(executed(**plant)))
    record = {"metric": "x", "size": "smoke", "device": "cpu", "time": "2026-12-05T10:00:00",
              "machine": {"cpus": 2, "memory_gb": 23.5, "python": "3.11.7", "ray": "2.60.0",
                          "torch": "2.13.0+cpu"}}  # fmt: skip
    (run / f"{LESSON}.jsonl").write_text(json.dumps(record) + "\n")
    return run


def build(tmp_path: Path, chinese: bool = False, **plant) -> Path:
    run = make_run(tmp_path, **plant)
    out, src, pack = tmp_path / "site", tmp_path / "src", tmp_path / "site.tar.gz"
    return site.build(run, out, src=src, pack=pack, chinese=chinese)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("site"), chinese=True)


def test_a_run_becomes_a_site_with_every_lesson_in_its_index(built):
    index = (built / "index.html").read_text()
    for nb in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"):
        assert f'href="notebooks/{nb.stem}.html"' in index, nb.stem
        assert (built / "notebooks" / f"{nb.stem}.html").exists()
    for nb in (ROOT / "bench").glob("lab_*.ipynb"):
        assert f'href="bench/{nb.stem}.html"' in index, nb.stem
    assert (built / "ledger.html").exists() and (built / "README.html").exists()
    page = (built / "notebooks" / f"{LESSON}.html").read_text()
    assert "SIZE=smoke" in page and "Ray 2.60.0" in page and "2 CPUs" in page
    assert 'alt="Chart: what one task costs"' in page
    # Lessons this run did not execute still have a page, marked as such.
    assert "Not in this run" in (built / "notebooks" / "01_remote_tasks.html").read_text()
    with tarfile.open(built.parent / "site.tar.gz") as tar:
        assert "site/index.html" in tar.getnames()


def test_the_chinese_edition_swaps_the_markdown_and_links_back(built):
    page = (built / "zh" / "notebooks" / f"{LESSON}.html").read_text()
    assert "欢迎与准备" in page and "学完本课你将能够" in page
    assert "SIZE=smoke" in page and "ok" in page  # the same outputs, nothing re-executed
    assert f'href="../../notebooks/{LESSON}.html"' in page  # to the English page
    english = (built / "notebooks" / f"{LESSON}.html").read_text()
    assert f'href="../zh/notebooks/{LESSON}.html"' in english
    assert "远程任务" in (built / "zh" / "index.html").read_text()  # the lessons, by Chinese title


def test_answers_are_collapsed_unless_asked_for(built):
    page = (built / "notebooks" / f"{LESSON}.html").read_text()
    answers = sum("answer" in c["metadata"].get("tags", []) for c in executed()["cells"])
    assert answers >= 1
    assert page.count('<details class="admonition hide') >= answers
    shown = site_pages.prepare_notebook(executed(), {}, answers=True)
    assert not any("hide-cell" in c["metadata"].get("tags", []) for c in shown["cells"])


def test_the_built_pages_load_nothing_from_another_host(built):
    loaded = []
    for page in built.rglob("*.html"):
        text = page.read_text()
        loaded += re.findall(r"<script[^>]*\bsrc=\"([^\"]+)\"", text)
        loaded += re.findall(r"<link[^>]*\bhref=\"([^\"]+)\"", text)
    assert loaded and not [u for u in loaded if "//" in u], loaded
    assert not [u for u in loaded if "mathjax" in u.lower() or "widget" in u.lower()]


@pytest.mark.parametrize("plant", ["error", "traceback"])
def test_a_planted_traceback_fails_the_build(tmp_path, plant):
    with pytest.raises(site.SiteError, match=rf"notebooks/{LESSON}.ipynb, cell \d+"):
        build(tmp_path, **{plant: True})


def test_an_error_in_a_blog_error_cell_is_the_lesson_working():
    nb = executed(error=True)
    bad = next(
        c for c in nb["cells"] if any(o["output_type"] == "error" for o in c.get("outputs", []))
    )
    assert site.errors_in(nb, LESSON)
    bad["metadata"]["tags"] = ["blog-error"]
    assert site.errors_in(nb, LESSON) == []


@pytest.mark.parametrize(
    "markdown, named",
    [
        ("See [the next one](99_nowhere.ipynb).", "99_nowhere"),
        ("See [above](#no-such-heading).", "no-such-heading"),
    ],
)
def test_a_planted_broken_link_or_anchor_fails_the_build(tmp_path, markdown, named):
    with pytest.raises(site.SiteError, match=named):
        build(tmp_path, markdown=markdown)


@pytest.mark.parametrize(
    "markdown",
    [
        '<img src="https://cdn.example.com/plot.png" alt="a plot">',
        "Read [this](https://example.com/page).",
    ],
)
def test_a_planted_outside_host_fails_the_build(tmp_path, markdown):
    with pytest.raises(site.SiteError, match="on another host"):
        build(tmp_path, markdown=markdown)


def test_an_image_without_alt_text_fails_the_check(built, tmp_path):
    page = tmp_path / "index.html"
    page.write_text(
        '<a href="notebooks/x.html">x</a><img src="p.png"><img src="q.png" alt="q.png">'
    )
    (tmp_path / "p.png").write_bytes(b"")
    (tmp_path / "q.png").write_bytes(b"")
    problems = site_check.check_html(tmp_path, ["notebooks/x"])
    assert sum("without alt text" in p for p in problems) == 2
    assert any("broken link: notebooks/x.html" in p for p in problems)


def test_a_path_outside_the_repository_is_named(tmp_path):
    (tmp_path / "results" / "a").mkdir(parents=True)
    readme = tmp_path / "README.md"
    readme.write_text("Pack it with `../shared/gpu/pack.sh`.\nSee [b](results/a/README.md).\n")
    inside = tmp_path / "results" / "a" / "README.md"
    inside.write_text("The run beside it: [b](../b/README.md).\n")
    assert site_check.outside_paths(readme, tmp_path) == ["README.md:1: ../shared/gpu/pack.sh"]
    assert site_check.outside_paths(inside, tmp_path) == []


def test_the_repositorys_readmes_point_at_nothing_outside_it():
    readmes = [ROOT / "README.md", *sorted((ROOT / "results").rglob("README.md"))]
    assert [p for r in readmes for p in site_check.outside_paths(r)] == []


def test_plots_save_shows_the_chart_with_its_alt_text(fresh_params, results_dir, monkeypatch):
    """In a kernel (the inline backend) save() displays the PNG once, alt in its metadata."""
    import IPython.display
    import matplotlib

    from labkit import plots
    from labkit.params import setup

    shown = []
    monkeypatch.setattr(matplotlib, "get_backend", lambda: "module://matplotlib_inline.x")
    monkeypatch.setattr(IPython.display, "display", lambda *a, **kw: shown.append((a, kw)))
    setup("00_welcome_and_setup")
    plots.save(plots.bar({"a": 1.0}, title="Cost", ylabel="ms"), "demo", alt="What a task costs")
    (data,), kw = shown[0]
    assert base64.b64decode(data["image/png"])[:4] == b"\x89PNG"
    assert kw["metadata"] == {"image/png": {"alt": "What a task costs"}}
