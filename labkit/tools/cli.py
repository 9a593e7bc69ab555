"""``labkit doctor|run|bench|rerun|clean|lab|cluster|gpu-check|exercises``: a thin command line.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

from labkit import params
from labkit.checks import error_line
from labkit.runtime import procs
from labkit.tools.nbrun import write_summary

# ---------------------------------------------------------------- doctor


def cmd_doctor(args: argparse.Namespace) -> int:
    from labkit import lang
    from labkit.tools import doctor

    try:
        report = doctor.report()
        problems = doctor.problems(report)
    except Exception as exc:  # one line a helper can read, never a traceback
        print(f"labkit doctor: could not finish its checks: {type(exc).__name__}: {exc}")
        return 2
    if args.json:
        print(json.dumps(report | {"problems": problems}, indent=2, default=str))
        return 1 if problems else 0
    zh = lang.is_zh()
    print(doctor.table(report))
    for problem in problems:
        print(f"labkit doctor: {'问题' if zh else 'PROBLEM'}: {problem}")
    if not problems:
        said = f"以上 {len(report)} 项都检查过，没有发现问题" if zh else "nothing missing"
        print(f"labkit doctor: {said if zh else f'{len(report)} checks above, {said}'}")
    return 1 if problems else 0


# ---------------------------------------------------------------- run


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


# ---------------------------------------------------------------- clean


def cmd_clean(args: argparse.Namespace) -> int:
    from labkit.data import data_dir

    root = params.repo_root()
    stopped = procs.stop()
    for e in stopped:
        print(f"stopped {e['name']} pid {e['pid']} (left behind by {e['owner']})")
    from labkit.runtime import netns
    from labkit.tools import workshop

    cluster = workshop.status()  # "alive" counts a cluster still starting up, too
    if workshop.state_path().is_file() and not cluster["alive"]:
        print(f"a dead workshop cluster's leftovers: {workshop.down_line(workshop.down())}")
    for name in netns.remove_stale():
        print(f"removed stale network namespace or link {name}")
    cache = data_dir()
    if cache.is_dir() and not args.keep_data:
        shutil.rmtree(cache)
        print(f"removed data cache {cache}")
    runs = root / "runs"
    if runs.is_dir():
        old = sorted(
            (p for p in runs.iterdir() if p.is_dir() and not p.is_symlink()),
            key=lambda p: p.stat().st_mtime,
        )
        remove = old[: max(0, len(old) - args.keep_runs)]
        for path in remove:
            shutil.rmtree(path)
            print(f"removed run {path}")
        for link in runs.iterdir():
            if link.is_symlink() and not link.exists():
                link.unlink()
    if not stopped:
        print("no kit processes left running")
    return 0


# ---------------------------------------------------------------- lab


def lab_command(port: int, token: str, open_browser: bool) -> list[str]:
    """The JupyterLab command: bound to 127.0.0.1, token auth on, rooted at the repository.

    The root holds ``notebooks/`` (the lessons, answers collapsed) and ``exercises/`` (the
    learner copies); JupyterLab opens on ``exercises/``.
    """
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={params.repo_root()}",
        "--LabApp.default_url=/lab/tree/exercises",
        "--ServerApp.allow_remote_access=False",
        # exercises/.old/ keeps a learner's earlier copies: openable by path (File > Open from Path)
        "--ContentsManager.allow_hidden=True",
        # Nothing fetched from jupyter.org: no news feed (nor its consent prompt), no update check.
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if not open_browser:
        cmd.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers and CI run as root
    return cmd


def cmd_lab(args: argparse.Namespace) -> int:
    import secrets

    from labkit.tools import zh
    from labkit.tools.exercises import write_learner_copies

    lang = zh.language()  # LABKIT_LANG=zh: Chinese copies (make lab LABKIT_LANG=zh)
    outcomes = write_learner_copies(lang=lang)
    for outcome in outcomes:
        print(f"  {outcome.line()}")
    print(
        f"learner copies: {len(outcomes)} notebooks in {outcomes[0].path.parent}/ (answers in "
        "notebooks/; what you wrote is never overwritten: `labkit exercises --reset NN` for a "
        "fresh copy)"
    )
    token = os.environ.get("LABKIT_LAB_TOKEN") or secrets.token_hex(24)
    cmd = lab_command(args.port, token, not args.no_browser)
    print(f"JupyterLab on http://127.0.0.1:{args.port}/lab?token={token}", flush=True)
    return subprocess.call(cmd)


# ---------------------------------------------------------------- cluster


def cmd_cluster(args: argparse.Namespace) -> int:
    from labkit.tools import workshop as cluster

    if args.action == "up":
        state = cluster.up(
            workers=args.workers,
            cpus_per_worker=args.cpus_per_worker,
            head_cpus=args.head_cpus,
            gpus_per_worker=args.gpus_per_worker,
            object_store_mb=args.object_store_mb,
            memory_mb=args.memory_mb,
            namespaced=False if args.one_address else None,
        )
        print(
            f"cluster up: {state['nodes']} nodes, {len(state['pids'])} processes, dashboard "
            f"{state['dashboard']} (temp dir {state['temp_dir']})"
        )
        print(cluster.nodes_line(state))
        if cluster.fallback_line(state):
            print(cluster.fallback_line(state))
        print("point notebooks and `labkit run` at it with:\n" + cluster.exports(state))
        return 0
    if args.action == "down":
        print(cluster.down_line(cluster.down()))
        return 0
    state = cluster.status()
    if not state["up"]:
        print(
            "no kit cluster is up"
            + (f" ({state['alive']} stray processes)" if state["alive"] else "")
        )
        return 1 if state["alive"] else 0
    print(
        f"cluster up since {datetime.fromtimestamp(state['started']):%H:%M:%S}: "
        f"{state['nodes']} nodes, "
        f"{state['alive']} processes alive, dashboard {state['dashboard']}"
    )
    print(cluster.nodes_line(state))
    print(cluster.exports(state))
    return 0


# ---------------------------------------------------------------- gpu-check


def cmd_gpu_check(args: argparse.Namespace) -> int:
    from labkit.tools import gpucheck

    return gpucheck.main(
        Path(args.out) if args.out else None,
        budget_s=args.budget,
        device=args.device,
        size=args.size,
        only=args.only,
        cell_timeout=args.cell_timeout,
    )


# ---------------------------------------------------------------- bench

BENCH_USAGE = """
  labkit bench SWEEP.yaml [--out DIR] [--dry-run]  run a sweep: runs/bench-<machine>-<time>/
  labkit bench compare A B                         B against A: exit 1 on a flagged regression
  labkit bench keep RUN                            keep it: results/<machine>/<date>-<commit>/
                                                   (a run of labkit bench or labkit gpu-check)"""


def cmd_bench(args: argparse.Namespace) -> int:
    from labkit.bench import report, store, sweep

    what = args.what
    if what == "compare":
        if len(args.more) != 2:
            raise SystemExit(f"labkit bench compare needs two runs (A B)\n{BENCH_USAGE}")
        a, b = (report.load(x) for x in args.more)
        changes = report.compare(a, b)
        if not changes:
            raise SystemExit("labkit bench compare: the two runs share no figure")
        print("\n".join(report.compare_table(changes)))
        worse = [c for c in changes if c.worse]
        both = sum(c.a is not None and c.b is not None for c in changes)
        print(
            f"\n{both} figures in both runs, {len(changes) - both} in one only; "
            f"{len(worse)} flagged worse (B against A)"
        )
        return 1 if worse else 0
    if what == "keep":
        if len(args.more) != 1:
            raise SystemExit(f"labkit bench keep needs one run folder\n{BENCH_USAGE}")
        run = Path(args.more[0])
        found = [run / f for f in ("sweep.json", "summary.json") if (run / f).is_file()]
        if not found:
            raise SystemExit(f"labkit bench keep: {run} is not a bench or gpu-check run")
        meta = json.loads(found[0].read_text())
        if "started" not in meta or not (meta.get("name") or meta.get("machine")):
            raise SystemExit(
                f"labkit bench keep: {found[0]} does not say when and where it ran (a run "
                "from before labkit bench): copy it by hand, with a README"
            )
        try:
            target = store.keep(
                run,
                machine=meta.get("name") or store.machine_name(meta["machine"]),
                day=datetime.fromisoformat(meta["started"]).date(),
                sha=meta.get("commit") or store.commit(),
            )
        except FileExistsError as exc:
            raise SystemExit(f"labkit bench keep: {exc}") from None
        print(f"labkit bench: kept {run} as {target}")
        return 0
    if args.more:
        raise SystemExit(f"labkit bench: one sweep file at a time\n{BENCH_USAGE}")
    try:
        spec = sweep.load(what)
    except sweep.SweepError as exc:
        raise SystemExit(f"labkit bench: {exc}") from None
    todo = sweep.points(spec)
    for entry in spec.entries:
        print(f"labkit bench: {entry.name}: grid {entry.grid or '{}'} x {entry.repeats} repeat(s)")
    print(f"labkit bench: {len(todo)} runs at SIZE={spec.run_size}")
    if args.dry_run:
        return 0
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"bench-{store.machine_name()}-{stamp}"
    out = Path(args.out).resolve() if args.out else params.repo_root() / "runs" / name
    try:
        outcome = sweep.run(spec, out, cell_timeout=args.cell_timeout)
    except sweep.SweepError as exc:
        raise SystemExit(f"labkit bench: {exc}") from None
    path = report.write_report(out)
    print(f"labkit bench: {outcome['records']} records, {len(outcome['failed'])} failed runs")
    print(f"labkit bench: {path}")
    return 1 if outcome["failed"] else 0


# ---------------------------------------------------------------- exercises


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
            problems = exercises.copy_problems(lesson, copy, own, path.name)
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


#: Lessons the rotation skips: 04 runs twice in one kernel in ``make test`` already.
ROTATION_SKIPS = ("04",)


def rotation_pick(day_of_year: int, lessons: list[Path], chosen: list[Path]) -> Path | None:
    """The lesson a day's rerun pass adds: each lesson not already ``chosen`` (nor in
    :data:`ROTATION_SKIPS`) in turn, one a day, so that every lesson (10, 11 and 12 too) runs
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
            chosen, notebooks_to_run([]), day, args.budget, skips=ROTATION_SKIPS, base=base
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
    """What the ``small`` rotation runs, one a day: every lesson, then every lab report (20
    today, so each comes round within three weeks)."""
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


# ---------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="labkit", description="Ray LabKit command line")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("doctor", help="what this machine has (paste it when you are stuck)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("run", help="execute notebooks headless with papermill into runs/<time>/")
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
        "bench",
        help="run a sweep (bench/sweeps/*.yaml), compare two runs, keep one under results/",
        usage=BENCH_USAGE,
    )
    p.add_argument("what", help="a sweep file, or compare, or keep")
    p.add_argument("more", nargs="*", help="compare: A B; keep: RUN")
    p.add_argument("--out", help="output folder (default runs/bench-<machine>-<time>)")
    p.add_argument("--dry-run", action="store_true", help="validate and list the runs only")
    p.add_argument("--cell-timeout", type=int, default=1800, help="seconds per cell")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser(
        "clean", help="remove the data cache and old runs; stop leftover kit processes"
    )
    p.add_argument("--keep-runs", type=int, default=1, help="newest runs to keep (default 1)")
    p.add_argument("--keep-data", action="store_true", help="keep the data cache")
    p.set_defaults(func=cmd_clean)

    p = sub.add_parser(
        "cluster", help="a local multi-node Ray cluster for workshops (up|down|status)"
    )
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--workers", type=int, default=2, help="worker nodes (default 2)")
    p.add_argument("--cpus-per-worker", type=int, default=1)
    p.add_argument("--head-cpus", type=int, default=1)
    p.add_argument("--gpus-per-worker", type=float, default=0, help="logical GPUs per worker node")
    p.add_argument("--object-store-mb", type=int, default=200, help="per node (default 200)")
    p.add_argument("--memory-mb", type=int, default=1024, help="per node (default 1024)")
    p.add_argument(
        "--one-address",
        action="store_true",
        help="every node on the machine's address, even where namespaces are possible",
    )
    p.set_defaults(func=cmd_cluster)

    p = sub.add_parser(
        "gpu-check", help="run the GPU-using notebooks headless inside a time budget"
    )
    p.add_argument("--out", help="output folder (default runs/gpu-check-<gpu>)")
    p.add_argument("--budget", type=float, default=420, help="seconds (default 420)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu", "auto"])
    p.add_argument("--size", choices=params.SIZES, help="run every check at this size instead")
    p.add_argument("--only", nargs="*", help="notebook numbers to run, e.g. 07 06")
    p.add_argument("--cell-timeout", type=int, default=600, help="seconds per cell")
    p.set_defaults(func=cmd_gpu_check)

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

    p = sub.add_parser("lab", help="open JupyterLab (127.0.0.1, token auth) on the learner copies")
    p.add_argument("--port", type=int, default=8888)
    p.add_argument("--no-browser", action="store_true")
    p.set_defaults(func=cmd_lab)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
