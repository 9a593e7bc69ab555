"""``labkit run|rerun|small``: notebooks run headless, twice in one kernel, or at a learner's
``SIZE=small``.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

from labkit import params
from labkit.checks import error_line
from labkit.tools.nbrun import write_summary


def _parse_value(text: str) -> Any:
    """``-p`` values: true/false become booleans, numbers stay numbers, ``[1, 10]`` a list (a
    lab report's knob may take several), the rest are strings."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text.startswith("[") and text.endswith("]"):
        try:
            return json.loads(text)
        except ValueError:
            pass
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_parameters(items: list[str]) -> dict[str, Any]:
    """Turn ``["SIZE=smoke", "SEED=1"]`` into ``{"SIZE": "smoke", "SEED": 1}``."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"labkit run: -p takes KEY=VALUE, got {item!r}")
        out[key.strip()] = _parse_value(value.strip())
    return out


def notebooks_to_run(names: list[str]) -> list[Path]:
    """The notebooks named (paths, numbers like ``01``, or lab reports like ``lab_tasks`` in
    ``bench/``), or all the lessons in order."""
    nb_dir = params.repo_root() / "notebooks"
    if not names:
        return sorted(nb_dir.glob("[0-9][0-9]_*.ipynb"))
    out = []
    for name in names:
        path = Path(name)
        if path.is_file():
            out.append(path.resolve())
            continue
        where = nb_dir.parent / "bench" if name.startswith("lab_") else nb_dir
        matches = sorted(where.glob(f"{name}*.ipynb"))
        if not matches:
            raise SystemExit(f"labkit run: no notebook matches {name!r} in {where}")
        out.extend(matches)
    return out


def cmd_run(args: argparse.Namespace) -> int:
    from labkit.runtime import nbexec
    from labkit.tools import zh

    lang = zh.language(args.lang)
    os.environ["LABKIT_LANG"] = lang  # the kernels inherit it: verdicts print in this language
    parameters = parse_parameters(args.param or [])
    notebooks = notebooks_to_run(args.notebooks)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = Path(args.out).resolve() if args.out else params.repo_root() / "runs" / stamp
    run_dir.mkdir(parents=True, exist_ok=True)
    parameters.setdefault("RESULTS_DIR", str(run_dir))
    outcomes = []
    for nb in notebooks:
        print(f"labkit run: {nb.name} -> {run_dir}", flush=True)
        start = time.monotonic()
        outcome = {"notebook": nb.stem, "status": "ok", "error": ""}
        try:
            source = nb
            if lang == "zh":  # the Chinese markdown swapped in (zh/), the code the same
                import nbformat

                source = run_dir / ".zh-source" / nb.name
                source.parent.mkdir(exist_ok=True)
                nbformat.write(zh.translate(nbformat.read(nb, as_version=4), nb), source)
            nbexec.execute(
                source,
                run_dir / nb.name,
                parameters=parameters,
                cwd=nb.parent,
                timeout=args.cell_timeout,
                kernel=args.kernel,
                log_output=args.verbose,
            )
        except Exception as exc:  # noqa: BLE001 - report and go on to the next notebook
            outcome["status"] = "FAILED"
            outcome["error"] = error_line(exc)
            print(f"labkit run: {nb.name} FAILED: {outcome['error']}", file=sys.stderr)
            if args.verbose:
                traceback.print_exc()
        outcome["seconds"] = time.monotonic() - start
        outcomes.append(outcome)
        print(
            f"labkit run: {nb.name} {outcome['status']} in {outcome['seconds']:.1f} s", flush=True
        )
    summary = write_summary(run_dir, outcomes)
    latest = run_dir.parent / "latest-run"
    if run_dir.parent == params.repo_root() / "runs":
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(run_dir.name)
    print(f"labkit run: summary in {summary}")
    return 1 if any(o["status"] != "ok" for o in outcomes) else 0


#: Lessons the rotation skips: 04 runs twice in one kernel in ``make test`` already.
ROTATION_SKIPS = ("04",)


def rotation_pick(day_of_year: int, lessons: list[Path], chosen: list[Path]) -> Path | None:
    """The lesson a day's rerun pass adds: each lesson not already ``chosen`` (nor in
    :data:`ROTATION_SKIPS`) in turn, one a day, so that every lesson (10 to 13 too) runs
    twice in CI within as many days as there are candidates. None when there is none."""
    candidates = [
        path for path in lessons if path not in chosen and path.name[:2] not in ROTATION_SKIPS
    ]
    return candidates[day_of_year % len(candidates)] if candidates else None


def cmd_rerun(args: argparse.Namespace) -> int:
    """Run All without the teardown cell, then Run All again in the same kernel."""
    import os

    from labkit.tools import nbrun, touched

    names = [] if args.notebooks == ["all"] else args.notebooks
    everything = args.notebooks == ["all"] or not (names or args.rotation or args.touched)
    chosen = notebooks_to_run([]) if everything else notebooks_to_run(names) if names else []
    day = time.localtime().tm_yday
    if args.rotation and not everything:
        pick = rotation_pick(day, notebooks_to_run([]), chosen)
        if pick is not None:
            print(f"labkit rerun: day {day} of the year's rotation adds {pick.name}")
            chosen.append(pick)
    if args.touched and not everything:
        base = os.environ.get("RERUN_BASE")
        chosen, lines = touched.rerun_plan(
            chosen, notebooks_to_run([]), day, budget_s=args.budget, skips=ROTATION_SKIPS, base=base
        )
        for line in lines:
            print(f"labkit rerun: {line}")
    if args.plan:
        return 0
    failed = 0
    for path in chosen:
        start = time.monotonic()
        try:
            nbrun.run_lesson(path, twice=True, timeout=args.cell_timeout)
            status = "ok"
        except Exception as exc:  # noqa: BLE001 - report each notebook, then fail at the end
            failed += 1
            status = f"FAILED: {error_line(exc)}"
        print(f"labkit rerun: {path.name} {status} ({time.monotonic() - start:.0f} s)", flush=True)
    return 1 if failed else 0


def small_rotation() -> list[Path]:
    """What the ``small`` rotation runs, one a day: every lesson, then every lab report (22
    today, so each comes round within four weeks)."""
    return notebooks_to_run([]) + sorted((params.repo_root() / "bench").glob("lab_*.ipynb"))


def small_pick(day_of_year: int, touched: list[Path]) -> tuple[Path, str]:
    """The day's notebook at ``small``, and why: a lesson the submission touches first (each in
    turn, by the day), else the rotation's notebook of the day."""
    if touched:
        pick = touched[day_of_year % len(touched)]
        names = ", ".join(p.name[:2] for p in touched)
        return pick, f"the submission touches {names}: {pick.name} goes first"
    items = small_rotation()
    pick = items[day_of_year % len(items)]
    return pick, f"day {day_of_year} of the rotation ({len(items)} notebooks): {pick.name}"


def cmd_small(args: argparse.Namespace) -> int:
    """Notebooks at ``SIZE=small``, a learner's default: those named, or the day's pick."""
    import os

    from labkit.runtime import nbexec
    from labkit.tools import nbrun, touched

    chosen = notebooks_to_run(args.notebooks) if args.notebooks else []
    if args.rotation:
        base = os.environ.get("RERUN_BASE") or touched.session_base()
        direct, _ = touched.touched_lessons(touched.changed_files(base), notebooks_to_run([]))
        pick, why = small_pick(time.localtime().tm_yday, direct)
        print(f"labkit small: {why}")
        chosen = chosen + [pick] * (pick not in chosen)
    if not chosen:
        raise SystemExit("labkit small: name notebooks (10 12, lab_tasks) or pass --rotation")
    out = params.resolve_path(os.environ.get("LABKIT_RESULTS_DIR") or "runs/test-small")
    failed = 0
    for path in chosen:
        start = time.monotonic()
        try:
            with nbexec.environ({"LABKIT_SIZE": "small"}):
                nbrun.run_lesson(path, out=out / path.name, timeout=args.cell_timeout,
                                 exercises=not path.name.startswith("lab_"))  # fmt: skip
            status = "ok"
        except Exception as exc:  # noqa: BLE001 - report each notebook, then fail at the end
            failed += 1
            status = f"FAILED: {error_line(exc)}"
        took = time.monotonic() - start
        print(f"labkit small: {path.name} at small {status} ({took:.0f} s)", flush=True)
    return 1 if failed else 0


def register(sub) -> None:
    """Add this module's verbs to the ``labkit`` parser's subcommands."""
    p = sub.add_parser(
        "run", help="execute notebooks headless (papermill, else nbclient) into runs/<time>/"
    )
    p.add_argument("notebooks", nargs="*", help="paths or prefixes like 00 (default: all)")
    p.add_argument(
        "-p",
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="notebook parameter, e.g. -p SIZE=smoke (repeatable)",
    )
    p.add_argument("--out", help="output folder (default runs/<timestamp>)")
    p.add_argument("--kernel", default="python3", help="Jupyter kernel name")
    p.add_argument("--lang", choices=["en", "zh"], help="language (default LABKIT_LANG, else en)")
    p.add_argument("--cell-timeout", type=int, default=1800, help="seconds per cell")
    p.add_argument("-v", "--verbose", action="store_true", help="stream cell output")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "rerun",
        help="run each notebook twice in one kernel, the first time without its teardown cell",
    )
    p.add_argument("notebooks", nargs="*", help="numbers like 04, or all (default: all)")
    p.add_argument("--cell-timeout", type=int, default=600, help="seconds per cell")
    p.add_argument(
        "--rotation",
        action="store_true",
        help="add the lesson of the day: each lesson in turn, one per day of the year",
    )
    p.add_argument(
        "--touched",
        action="store_true",
        help="add the lessons the submission's commits touch (RERUN_BASE: changes after it)",
    )
    p.add_argument(
        "--budget", type=float, default=300, help="seconds the touched lessons may add up to"
    )
    p.add_argument("--plan", action="store_true", help="say what would run, and run nothing")
    p.set_defaults(func=cmd_rerun)

    p = sub.add_parser("small", help="run notebooks at SIZE=small, a learner's default")
    p.add_argument("notebooks", nargs="*", help="numbers like 10, or lab_tasks")
    p.add_argument(
        "--rotation",
        action="store_true",
        help="add the day's pick: a lesson the submission touches, else each notebook in turn",
    )
    p.add_argument("--cell-timeout", type=int, default=600, help="seconds per cell")
    p.set_defaults(func=cmd_small)
