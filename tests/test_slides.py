"""Every lesson presents as slides (labkit/tools/slides.py): each cell keeps its slide mark, and
`labkit slides NN` writes a deck that loads reveal.js from the copy beside it, nothing from
another host. (tests/test_browser.py opens a deck in Chromium and advances it.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from labkit.params import repo_root
from labkit.tools import exercises, slides

ROOT = repo_root()
#: A style sheet, font or module loaded from a URL: nbconvert's own reveal template has one
#: (its mermaid import), besides its <script src> and <link href> on CDNs.
FETCHED = r"(?:url\(|@import\s|\bimport\s[^;]*?from\s)\s*['\"]?(https?://[^'\")\s]+)"


@pytest.mark.parametrize("lesson", exercises.lessons(), ids=lambda p: p.name[:2])
def test_every_cell_of_every_lesson_keeps_its_slide_mark(lesson):
    nb = json.loads(lesson.read_text(encoding="utf-8"))
    missing = slides.unmarked(nb)
    assert missing == [], (
        f"{lesson.name}: cells {missing[:8]} lack the slide mark RISE and the decks read; "
        "run `.venv/bin/labkit slides --mark`"
    )
    kinds = [c["metadata"]["slideshow"]["slide_type"] for c in nb["cells"]]
    assert kinds[0] == "slide" and kinds.count("slide") >= 4  # the header and the sections


def test_the_rule_marks_sections_parts_and_hides_the_wrong_answers():
    def cell(kind, text):
        return {"cell_type": kind, "source": text, "metadata": {}}

    nb = {
        "cells": [
            cell("markdown", "# 99 · Title"),
            cell("code", "x = 1"),
            cell("markdown", "## 1. A section"),
            cell("markdown", "### A part"),
            cell("markdown", "Some prose with ## inside"),
            cell("markdown", "A lead-in, then\n\n## 2. A section mid-cell"),
            cell("raw", "x = 2  # a wrong answer the check must reject"),
        ]
    }
    assert slides.unmarked(nb) == ["0", "1", "2", "3", "4", "5", "6"]
    assert slides.mark(nb) == 7 and slides.mark(nb) == 0  # once, then nothing to do
    kinds = [c["metadata"]["slideshow"]["slide_type"] for c in nb["cells"]]
    assert kinds == ["slide", "-", "slide", "subslide", "-", "slide", "skip"]
    nb["cells"][4]["metadata"]["slideshow"]["slide_type"] = "slide"  # edited by hand
    assert slides.unmarked(nb) == ["4"]


def test_labkit_slides_writes_every_lessons_deck_with_its_own_reveal_js(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "labkit", "slides", "all", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    for lesson in exercises.lessons():
        deck = tmp_path / f"{lesson.stem}.slides.html"
        assert deck.name in out.stdout and deck.exists(), deck.name
        html = deck.read_text(encoding="utf-8")
        loaded = re.findall(r"<(?:script|link)[^>]*(?:src|href)=\"([^\"]+)\"", html)
        assert sorted(loaded) == [
            "reveal.js/dist/reveal.css",
            "reveal.js/dist/reveal.js",
            "reveal.js/dist/theme/white.css",
        ], (deck.name, loaded)
        fetched = re.findall(FETCHED, html)
        assert fetched == [], (deck.name, fetched)  # nor a style sheet, font or module by URL
        marks = [
            c["metadata"]["slideshow"]["slide_type"]
            for c in json.loads(lesson.read_text())["cells"]
        ]
        shown = sum(m in ("slide", "subslide") for m in marks)
        assert html.count("<section") >= shown, (deck.name, html.count("<section"), shown)
        title = json.loads(lesson.read_text())["cells"][0]["source"][0].strip("# \n")
        assert title in html, (deck.name, title)
    for path in ("dist/reveal.css", "dist/reveal.js", "dist/theme/white.css", "LICENSE"):
        assert (tmp_path / "reveal.js" / path).is_file(), path
    assert (tmp_path / "reveal.js" / "LICENSE").read_text().startswith("Copyright")
    fonts = tmp_path / "reveal.js" / "dist" / "theme" / "fonts" / "source-sans-pro"
    assert len(list(fonts.glob("*.woff"))) == 4  # the white theme's fonts, local
    theme = (tmp_path / "reveal.js" / "dist" / "theme" / "white.css").read_text()
    assert re.findall(r"(?:@import|url)\(\s*['\"]?https?:", theme) == []  # no web fonts


def test_a_deck_in_chinese_and_a_name_that_is_no_lesson(tmp_path):
    deck = slides.build(exercises.lessons()[1], tmp_path, lang="zh")
    assert deck.name == "01_remote_tasks.zh.slides.html"
    assert "远程任务" in deck.read_text(encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "labkit", "slides", "77"], capture_output=True, text=True
    )
    assert out.returncode != 0 and "names no one lesson" in out.stderr
    assert "00 01 02" in out.stderr  # and says which there are
    out = subprocess.run(
        [sys.executable, "-m", "labkit", "slides", "01", "--run", str(tmp_path), "--out",
         str(tmp_path / "decks")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode != 0 and "no executed copy of 01_remote_tasks.ipynb" in out.stderr
    assert "Traceback" not in out.stderr  # one line, not a stack


def test_the_readmes_slides_block_runs_as_written(tmp_path):
    from labkit.tools import readme

    if not (ROOT / "runs" / "test" / "09_serve.ipynb").exists():
        pytest.skip("its second command shows make test's run: run make test (NB=09) first")
    done = subprocess.run(
        ["bash", "-c", readme.script("slides")],
        cwd=ROOT,
        env={**os.environ, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    deck = ROOT / "runs" / "slides" / "09_serve.slides.html"
    assert done.stdout.count("09_serve.slides.html") == 2 and deck.exists()
    html = deck.read_text(encoding="utf-8")
    assert "data:image/png;base64" in html  # the second command's deck shows the run's plots
    assert (ROOT / "runs" / "slides" / "reveal.js" / "dist" / "reveal.js").exists()
