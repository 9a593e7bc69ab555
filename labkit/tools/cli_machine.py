"""``labkit doctor|clean|lab|cluster``: this machine, its leftovers, JupyterLab and a local
cluster for workshops.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime

from labkit import params
from labkit.runtime import procs


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


def register(sub) -> None:
    """Add this module's verbs to the ``labkit`` parser's subcommands."""
    p = sub.add_parser("doctor", help="what this machine has (paste it when you are stuck)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_doctor)

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

    p = sub.add_parser("lab", help="open JupyterLab (127.0.0.1, token auth) on the learner copies")
    p.add_argument("--port", type=int, default=8888)
    p.add_argument("--no-browser", action="store_true")
    p.set_defaults(func=cmd_lab)
