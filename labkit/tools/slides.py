"""``labkit slides NN``: a lesson as a slide deck, offline; and the slide marks every lesson keeps.

The marks are nbformat's ``metadata.slideshow.slide_type``, what RISE (``jupyterlab-rise``: a
lesson shown live as slides in JupyterLab) and nbconvert read. :func:`slide_type` sets them by
one rule: the header and each cell with a ``## `` section heading start a slide, one with a
``### `` part starts one below it (a sub-slide), every other cell follows on the slide it is
in, and the wrong answers kept from learners (raw cells) are skipped. ``labkit slides --mark``
writes them into the lessons; a test holds every lesson to them, so a new cell cannot go
without one.

The deck: nbconvert's slides exporter with the kit's template (``reveal/templates``), which loads
reveal.js from the copy written beside the deck and nothing from another host: reveal.js 5.2.1
(MIT), its ``dist`` files and the white theme's fonts, as ``npm pack reveal.js@5.2.1`` holds them,
in ``labkit/tools/reveal/reveal.js``. From a run (``--run runs/test``) the deck shows the run's
outputs; from the lesson itself, only its cells.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from labkit import params

HERE = Path(__file__).resolve().parent / "reveal"
REVEAL = HERE / "reveal.js"  # reveal.js 5.2.1 as its npm package holds it (MIT: LICENSE there)
TEMPLATE = "labkit-slides"


def slide_type(cell: dict[str, Any], index: int) -> str:
    """The slide mark :mod:`labkit.tools.slides`'s rule gives the cell at ``index``."""
    source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
    if index == 0:
        return "slide"
    if cell["cell_type"] == "raw":
        return "skip"
    if cell["cell_type"] == "markdown":
        lines = source.splitlines()  # a heading may follow a cell's first lines
        if any(line.startswith("## ") for line in lines):
            return "slide"
        if any(line.startswith("### ") for line in lines):
            return "subslide"
    return "-"


def unmarked(nb: dict[str, Any]) -> list[str]:
    """The ids of ``nb``'s cells whose slide mark is missing or is not :func:`slide_type`'s."""
    return [
        cell.get("id", str(i))
        for i, cell in enumerate(nb["cells"])
        if cell.get("metadata", {}).get("slideshow", {}).get("slide_type") != slide_type(cell, i)
    ]


def mark(nb: dict[str, Any]) -> int:
    """Give every cell of ``nb`` its slide mark (in place); how many changed."""
    changed = 0
    for i, cell in enumerate(nb["cells"]):
        want = slide_type(cell, i)
        show = cell.setdefault("metadata", {}).setdefault("slideshow", {})
        if show.get("slide_type") != want:
            show["slide_type"] = want
            changed += 1
    return changed


def mark_lessons(lessons: list[Path]) -> dict[str, list[str]]:
    """:func:`mark` each lesson's file, written back only where a mark changed; the ids of the
    cells whose mark it wrote, by lesson."""
    import nbformat

    done = {}
    for path in lessons:
        nb = nbformat.read(path, as_version=4)
        done[path.name] = unmarked(nb)
        if mark(nb):
            nbformat.write(nb, path)  # as JupyterLab and `make strip` write it
    return done


def build(lesson: Path, out: Path, *, run: Path | None = None, lang: str = "en") -> Path:
    """Write ``out/<lesson>.slides.html`` and the reveal.js copy it loads (``out/reveal.js``);
    from the executed copy in ``run`` when given (its outputs on the slides), in ``lang``.
    Returns the deck's path."""
    import nbformat
    from nbconvert import SlidesExporter

    source = run / lesson.name if run else lesson
    if not source.exists():
        raise FileNotFoundError(f"{source}: no executed copy of {lesson.name} in {run}")
    nb = nbformat.read(source, as_version=4)
    mark(nb)  # a run made before a cell's mark changed still follows the rule
    if lang == "zh":
        from labkit.tools import zh

        zh.translate(nb, lesson)
    exporter = SlidesExporter(
        template_name=TEMPLATE,
        extra_template_basedirs=[str(HERE / "templates")],
        reveal_url_prefix="reveal.js",
        reveal_theme="white",  # its fonts are in the copy; the others load Google's
        reveal_transition="none",
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    html, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": lesson.stem}})
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REVEAL, out / "reveal.js", dirs_exist_ok=True)
    suffix = "" if lang == "en" else f".{lang}"
    deck = out / f"{lesson.stem}{suffix}.slides.html"
    deck.write_text(html, encoding="utf-8")
    return deck


def cmd_slides(args: argparse.Namespace) -> int:
    from labkit.tools import exercises

    if args.mark:
        for name, cells in mark_lessons(exercises.lessons()).items():
            ids = " ".join(cells[:6]) + " ..." * (len(cells) > 6)
            said = f"marks written for {len(cells)} cells ({ids})"
            print(f"labkit slides: {name}: {said if cells else 'every cell marked'}")
        return 0
    if not args.lessons:
        raise SystemExit("labkit slides: name the lessons (labkit slides 09), or all")
    try:
        lessons = (
            exercises.lessons()
            if args.lessons == ["all"]
            else [exercises.lesson(n) for n in args.lessons]
        )
    except ValueError as exc:
        raise SystemExit(f"labkit slides: {exc}") from None
    out = params.resolve_path(args.out)
    run = params.resolve_path(args.run) if args.run else None
    for lesson in lessons:
        try:
            deck = build(lesson, out, run=run, lang=args.lang)
        except FileNotFoundError as exc:  # --run names a run without this lesson
            raise SystemExit(f"labkit slides: {exc}") from None
        print(f"labkit slides: {params.shown(deck)}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("slides", help="a lesson as a slide deck (reveal.js, offline)")
    p.add_argument("lessons", nargs="*", help="lessons like 09, or all")
    p.add_argument("--out", default="runs/slides", help="the decks' folder (runs/slides)")
    p.add_argument("--run", help="a run's folder (runs/test): the deck shows its outputs")
    p.add_argument("--lang", choices=("en", "zh"), default="en")
    p.add_argument("--mark", action="store_true", help="write the slide marks into the lessons")
    p.set_defaults(func=cmd_slides)
