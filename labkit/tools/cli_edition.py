"""``labkit exercises|zh|site|blog-table|guard``: the workbook's editions (learner copies, the
Chinese, the static site, lesson 12's table) and the scan for retired APIs.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from labkit import params


def cmd_exercises(args: argparse.Namespace) -> int:
    from labkit.tools import exercises, nbrun, zh

    lang = zh.language(args.lang)
    out = Path(args.out) if args.out else None
    reset = tuple(r if r == "all" else r.zfill(2) for r in args.reset or ())
    known = {p.name[:2] for p in exercises.lessons()} | {"all"}
    if unknown := [r for r in reset if r not in known]:
        raise SystemExit(f"labkit exercises: --reset {' '.join(unknown)}: no such lesson "
                         f"(one of {', '.join(sorted(known))})")  # fmt: skip
    outcomes = exercises.write_learner_copies(out, lang, reset)
    for outcome in outcomes:
        print(f"labkit exercises: {outcome.line()}")
    print(f"labkit exercises: {len(outcomes)} learner copies in {outcomes[0].path.parent}")
    # A copy the learner changed is theirs: checked against its lesson only as the kit wrote it.
    copies = [o.path for o in outcomes if not o.yours]
    if args.check:
        import nbformat

        bad = 0
        for path in copies:
            copy = nbformat.read(path, as_version=4)
            own = exercises.copy_language(copy, lang)
            lesson = exercises.lesson_in(params.repo_root() / "notebooks" / path.name, own)
            problems = exercises.copy_problems(lesson, copy, own, lesson=path.name)
            bad += bool(problems)
            said = "WRONG: " + "; ".join(problems) if problems else "ok"
            print(f"labkit exercises: {path.name} {said}")
        if bad:
            return 1
    if args.run is None:
        return 0
    chosen = [c for c in copies if not args.run or c.name[:2] in args.run]
    failed = 0
    for path in chosen:
        start = time.monotonic()
        ok, why = nbrun.stops_at_first_check(path, timeout=args.cell_timeout)
        failed += not ok
        status = "ok" if ok else "WRONG"
        print(f"labkit exercises: {path.name} {status} in {time.monotonic() - start:.0f} s: {why}")
    return 1 if failed else 0


def cmd_guard(args: argparse.Namespace) -> int:
    """Removed or deprecated Ray/PyTorch APIs in labkit/ and the notebooks (blog-error cells
    excepted)."""
    from labkit.tools import apiguard

    root = Path(args.root) if args.root else params.repo_root()
    found = apiguard.scan_tree(root)
    for finding in found:
        print(finding)
    print(f"labkit guard: {len(found)} use(s) of removed or deprecated APIs in {root}")
    return 1 if found else 0


def cmd_site(args: argparse.Namespace) -> int:
    from labkit.tools import site

    run = Path(args.run)
    pack = Path(args.pack) if args.pack else None
    t0 = time.perf_counter()
    try:
        out = site.build(run, Path(args.out) if args.out else None, answers=args.answers, pack=pack)
    except site.SiteError as e:
        print(f"labkit site: not built. {e}", file=sys.stderr)
        return 1
    took = time.perf_counter() - t0
    print(
        f"labkit site: {out}/index.html from {run} in {took:.0f} s"
        + (f"; packed {pack}" * bool(pack))
    )
    print(
        f"  open it: python3 -m http.server -b 127.0.0.1 -d {out} 8000  ->  http://127.0.0.1:8000/"
    )
    return 0


def cmd_zh(args: argparse.Namespace) -> int:
    """The Chinese edition's upkeep: what is stale, and recording a translation as current."""
    from labkit.tools import zh

    if args.action == "english":  # a Chinese run's output: what it still prints in English
        if not args.notebooks:
            raise SystemExit("labkit zh english: name executed notebooks (runs/<time>/07_*.ipynb)")
        found = 0
        for name in args.notebooks:
            lines = zh.english_lines(Path(name))
            found += len(lines)
            for cell, line in lines:
                print(f"{Path(name).name}, cell {cell}: {line[:150]}")
        print(f"labkit zh: {found} English-only lines of the kit's own words")
        return 1 if found else 0
    paths = zh.notebooks(args.notebooks if args.action == "stale" else args.notebooks[:1])
    if args.action == "stale":
        found = [s for path in paths for s in zh.stale(path)]
        if not args.notebooks:
            found += zh.stale_verdicts() + zh.stale_ledger() + zh.stale_messages()
        elif any(p.name.startswith("12_") for p in paths):  # its table's rows live in zh/ledger.md
            found += zh.stale_ledger()
        for item in found:
            print(item)
        done = sum(not any(s.notebook == p.name for s in found) for p in paths)
        print(
            f"labkit zh: {len(found)} cells stale or missing; {done}/{len(paths)} notebooks current"
        )
        print(f"labkit zh: the drift test holds every one of the {len(zh.notebooks())} complete")
        return 0
    if len(paths) != 1:
        raise SystemExit("labkit zh: name one notebook (03, lab_tasks)")
    path, cells = paths[0], args.notebooks[1:] or None
    if args.action == "sign":
        print(f"labkit zh: {path.name}: signed {', '.join(zh.sign(path, cells)) or 'nothing'}")
    elif args.action == "mark":
        if not cells:
            raise SystemExit("labkit zh mark: name the cells to mark stale")
        zh.mark(path, cells)
        print(f"labkit zh: {path.name}: marked stale {', '.join(cells)}")
    else:  # add
        added = zh.scaffold(path)
        print(f"labkit zh: {path.name}: {len(added)} blocks added (English, marked stale)")
    return 0


def cmd_blog_table(args: argparse.Namespace) -> int:
    """Check (or rewrite) lesson 12's summary table against the entries its cells open."""
    from labkit import blog

    weak = blog.weak_checks(args.notebook)
    for finding in weak:  # STYLE.md: a check must be able to fail
        print(f"labkit blog-table: a check that cannot fail: {finding}")
    if blog.sync_table(args.notebook, write=args.write):
        print("labkit blog-table: the table matches the entries" + (" (written)" * args.write))
        if args.write:  # the Chinese edition's copy of the table follows (labkit/tools/zh.py)
            from labkit.tools import zh

            if zh.sync_ledger(Path(args.notebook) if args.notebook else None):
                print("labkit blog-table: the Chinese table rewritten to match")
        return 1 if weak else 0
    print("labkit blog-table: the table differs from the entries; run with --write")
    return 1


def register(sub) -> None:
    """Add this module's verbs to the ``labkit`` parser's subcommands."""
    p = sub.add_parser(
        "exercises", help="write learner copies to exercises/ (answers stubbed, checks kept)"
    )
    p.add_argument("--out", help="output folder (default exercises/)")
    p.add_argument("--lang", choices=["en", "zh"], help="language (default LABKIT_LANG, else en)")
    p.add_argument(
        "--run",
        nargs="*",
        metavar="NN",
        help="also execute the copies (all, or these numbers): each must stop at its first check",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="check each copy against its lesson: answers stubbed, checks guarded, all else kept",
    )
    p.add_argument(
        "--reset",
        nargs="+",
        metavar="NN",
        help="replace these copies (numbers, or all) with fresh ones; the old ones go to .old/",
    )
    p.add_argument("--cell-timeout", type=int, default=600, help="seconds per cell")
    p.set_defaults(func=cmd_exercises)

    p = sub.add_parser(
        "guard", help="find removed or deprecated Ray/PyTorch APIs outside blog-error cells"
    )
    p.add_argument("--root", help="repository to scan (default: this one)")
    p.set_defaults(func=cmd_guard)

    p = sub.add_parser("blog-table", help="lesson 12's summary table, built from its entries")
    p.add_argument("--notebook", help="the notebook (default: notebooks/12_...ipynb)")
    p.add_argument("--write", action="store_true", help="rewrite the table to match")
    p.set_defaults(func=cmd_blog_table)

    p = sub.add_parser(
        "site", help="the workbook as a static site, from a run's executed notebooks"
    )
    p.add_argument("--run", default="runs/test", help="the run's folder (default runs/test)")
    p.add_argument("--out", help="where the HTML goes (default runs/site)")
    p.add_argument("--pack", help="also pack the site as this .tar.gz")
    p.add_argument("--answers", action="store_true", help="show answers open (for instructors)")
    p.set_defaults(func=cmd_site)

    p = sub.add_parser("zh", help="the Chinese edition: stale cells, sign, mark, add")
    p.add_argument(
        "action",
        choices=["stale", "sign", "mark", "add", "english"],
        help="stale: list cells without current Chinese; sign NN [CELL...]: the Chinese now "
        "translates today's English; mark NN CELL...: stale on purpose; add NN: blocks for "
        "new cells (English, marked stale); english RUN.ipynb...: the lines a Chinese run "
        "(labkit run --lang zh) still prints in English",
    )
    p.add_argument("notebooks", nargs="*", help="NN or lab_x, then cell ids (sign, mark)")
    p.set_defaults(func=cmd_zh)
