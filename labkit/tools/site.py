"""`labkit site`: the workbook as a static site, built from notebooks a run already executed.

Sphinx with MyST-NB (execution off: nothing is run again) and the PyData theme, the stack Ray's
own docs use, all from the package index: no theme, script or font is fetched at build time and
no page loads anything from another host. The source tree mirrors the repository, so the
lessons' own links (``02_actors.ipynb``, ``../bench/lab_tasks.ipynb``) resolve as they do on
GitHub::

    runs/site-src/ index.md  ledger.md  notebooks/NN_*.ipynb  bench/lab_*.ipynb  results/...
    runs/site/     the HTML            runs/site.tar.gz   the same, packed

Before the build, each executed notebook is checked for an error (an ``error`` output, or a
stream with a traceback) outside a ``blog-error`` cell; after it, every page for a link or image
on another host, a broken internal link or anchor, an image without alt text, and a lesson the
index does not link. Any of them fails the build, naming the page.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from labkit.params import repo_root
from labkit.tools.site_check import check_html, index_problems, outside_paths
from labkit.tools.site_pages import (
    EXTRA_PAGES,
    Page,
    has_zh,
    index_page,
    index_page_zh,
    ledger_page,
    lessons_and_reports,
    prepare_notebook,
    results_pages,
    run_facts,
)

TRACEBACK = "Traceback (most recent call last)"
BUILD_DIR = "runs/site-src"
OUT_DIR = "runs/site"


class SiteError(Exception):
    """The site was not built: each line names a page and what is wrong there."""


# ---- reading a run ------------------------------------------------------------------------


def errors_in(nb: dict, name: str) -> list[str]:
    """Each error a reader would see, outside a ``blog-error`` cell: ``name, cell N: ...``."""
    found = []
    for i, cell in enumerate(nb.get("cells", [])):
        if "blog-error" in cell.get("metadata", {}).get("tags", []):
            continue
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "error":
                found.append(f"{name}, cell {i}: {out.get('ename')}: {out.get('evalue', '')[:120]}")
            elif kind == "stream" and TRACEBACK in "".join(out.get("text", "")):
                found.append(f"{name}, cell {i}: a traceback in its {out.get('name')} output")
    return found


# ---- the source tree ------------------------------------------------------------------------


CONF = """\
# Written by `labkit site`: the site's Sphinx configuration (offline: nothing fetched or loaded
# from another host; MyST-NB renders the notebooks as the run left them).
project = "Ray LabKit"
language = "{language}"
author = "Ray LabKit"
copyright = "Ray LabKit contributors"
extensions = ["myst_nb"]
nb_execution_mode = "off"
nb_ipywidgets_js = {{}}
nb_output_stderr = "show"
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "results/**/*.ipynb"]
html_theme = "pydata_sphinx_theme"
html_title = "Ray LabKit"
html_show_sourcelink = False
html_copy_source = False
html_show_sphinx = False
html_sidebars = {{"**": []}}  # lessons are the top bar's; the page's sections are on the right
html_theme_options = {{
    "footer_start": ["copyright"],
    "footer_end": [],
    "navbar_end": ["theme-switcher"],
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
}}
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type"]
"""


def prepare(
    run: Path, src: Path, *, answers: bool = False, lang: str = "en"
) -> tuple[list[Page], list[str]]:
    """Write the source tree of one edition; raise :class:`SiteError` on an error output."""
    root = repo_root()
    pages, missing = lessons_and_reports(run)
    if len(missing) == len(pages):
        raise SiteError(f"{run}: no executed lesson or lab report here (run `make test` first)")
    if src.exists():
        shutil.rmtree(src)
    problems = []
    for page in pages:
        nb = json.loads(page.source.read_text(encoding="utf-8"))
        problems += errors_in(nb, f"{page.folder}/{page.source.name}")
        page.run = {} if page.name in missing else run_facts(page, nb)
        out = src / page.folder / f"{page.name}.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)
        source = root / page.folder / f"{page.name}.ipynb"
        shown = prepare_notebook(
            nb, page.run, answers=answers, lang=lang, doc=page.doc, source=source
        )
        out.write_text(json.dumps(shown), "utf-8")
    if problems:
        raise SiteError("an error shows outside a blog-error cell:\n  " + "\n  ".join(problems))
    for name in ("README", *EXTRA_PAGES):
        if (root / f"{name}.md").exists():
            shutil.copy2(root / f"{name}.md", src / f"{name}.md")
    (src / "ledger.md").write_text(ledger_page(pages, missing), encoding="utf-8")
    results = results_pages(src)
    if lang == "zh":
        index = index_page_zh(pages, results)
    else:
        index = index_page(pages, missing, results)
    (src / "index.md").write_text(index, encoding="utf-8")
    (src / "conf.py").write_text(CONF.format(language={"zh": "zh_CN"}.get(lang, lang)), "utf-8")
    return pages, missing


# ---- the checks on the built HTML ----------------------------------------------------------


# ---- the build ------------------------------------------------------------------------------


def build(
    run: Path,
    out: Path | None = None,
    *,
    answers: bool = False,
    pack: Path | None = None,
    src: Path | None = None,
    chinese: bool | None = None,
) -> Path:
    """Build the site from ``run``'s executed notebooks into ``out``; raise :class:`SiteError`
    naming every problem. ``pack`` also writes the site as a ``.tar.gz``. With a ``zh/`` in
    the repository (or ``chinese=True``) the Chinese edition goes to ``out/zh/``, from the
    same executed notebooks with the Chinese markdown swapped in."""
    root = repo_root()
    out = out or root / OUT_DIR
    src = src or root / BUILD_DIR
    problems = []
    for readme in [root / "README.md", *sorted((root / "results").rglob("README.md"))]:
        problems += outside_paths(readme, root)
    if problems:
        raise SiteError("a path outside the repository:\n  " + "\n  ".join(problems))
    if out.exists() and any(out.iterdir()) and not (out / ".buildinfo").exists():
        raise SiteError(f"{out} holds something other than a built site: not overwriting it")
    editions = [("en", src, out)]
    chinese = has_zh() if chinese is None else chinese
    if chinese:
        editions.append(("zh", src.with_name(src.name + "-zh"), out / "zh"))
    if out.exists():
        shutil.rmtree(out)
    for lang, tree, html_out in editions:
        pages, missing = prepare(run, tree, answers=answers, lang=lang)
        cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going"]
        done = subprocess.run(
            [*cmd, "-d", str(tree / "_doctrees"), str(tree), str(html_out)],
            text=True,
            capture_output=True,
        )
        if done.returncode != 0:
            raise SiteError(f"Sphinx reported ({lang}):\n" + (done.stderr or done.stdout).strip())
        shutil.rmtree(out.parent / "jupyter_execute", ignore_errors=True)  # MyST-NB's leftovers
    problems = check_html(out, [p.doc for p in pages])
    if chinese:
        problems += [f"zh/{p}" for p in index_problems(out / "zh" / "index.html", pages)]
    if problems:
        raise SiteError("the built pages:\n  " + "\n  ".join(problems))
    about = {"run": str(run), "answers": answers, "executed": [p.doc for p in pages if p.run],
             "not in the run": missing}  # fmt: skip
    (out / "_labkit.json").write_text(json.dumps(about, indent=1), encoding="utf-8")
    if pack:
        with tarfile.open(pack, "w:gz") as tar:
            tar.add(out, arcname="site")
    if missing:
        print(f"labkit site: not in {run}, shown as written, without outputs: {', '.join(missing)}")
    return out
