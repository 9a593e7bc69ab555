"""``make test-cluster``: the lessons on a multi-node cluster, as an instructor would run them.

Brings up a workshop cluster (:mod:`labkit.tools.workshop`: a 0-CPU head, two worker nodes of
one CPU and two logical GPUs each, token auth; worker nodes in network namespaces of their own
where the machine allows it), runs the notebooks through ``labkit run`` with ``RAY_ADDRESS``
pointing at it, checks that a lesson which keeps a local Ray of its own sent the cluster
nothing, runs the network-cut drill (:mod:`labkit.runtime.netcut`) where the nodes have links,
brings the cluster down and checks that no process, namespace, link or bridge is left. Prints
each notebook's name and each node's address. Exit status 0 only when every step held. Which
lessons it runs, and how, each lesson's header says (:func:`on_a_cluster`); of the joining ones,
those the submission touches and the day's share of the rest (:func:`chosen`).

Used in: no lesson or lab report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from labkit.params import repo_root
from labkit.runtime import netns
from labkit.tools import workshop


def on_a_cluster() -> dict[str, list[str]]:
    """What ``make test-cluster`` does with each lesson, as its header's **On a cluster** line
    says: ``join`` (the lesson joins the cluster: "`make test-cluster` runs it") and ``local``
    (it keeps a local Ray of its own: "`make test-cluster` checks" the cluster saw nothing).
    A lesson that builds clusters of its own, or is not checked here, is in neither."""
    said: dict[str, list[str]] = {"join": [], "local": []}
    for path in sorted((repo_root() / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        header = "".join(json.loads(path.read_text())["cells"][0]["source"])
        line = next((x for x in header.splitlines() if x.startswith("**On a cluster:**")), "")
        if "joins that cluster" in line and "`make test-cluster` runs it" in line:
            said["join"].append(path.name[:2])
        elif "local Ray of its own" in line and "`make test-cluster` checks" in line:
            said["local"].append(path.name[:2])
    return said


#: Seconds of joining lessons (by their headers' `smoke` times) a run of ``make test-cluster``
#: spends beyond the ones the submission touches: all eleven took about 760 s of CI's 60
#: minutes, and lesson 13 needed the room.
BUDGET_S = 240.0


def chosen(named: list[str], join: list[str], *, budget_s: float) -> list[str]:
    """The joining lessons to run: those ``named`` (``all``: every one), else the ones the
    submission touches and the day's in turn (:func:`labkit.tools.touched.cluster_plan`)."""
    from labkit.tools import touched

    if named and named != ["all"]:
        return named
    if named == ["all"]:
        return join
    paths = [next((repo_root() / "notebooks").glob(f"{n}_*.ipynb")) for n in join]
    base = os.environ.get("RERUN_BASE")
    run, why = touched.cluster_plan(paths, time.localtime().tm_yday, budget_s=budget_s, base=base)
    print(f"test-cluster: {why}", flush=True)
    return [p.name[:2] for p in run]


DRILL_RESULTS = repo_root() / "results" / "test-cluster" / "netcut.json"


def save_drill(drill: dict[str, Any]) -> Path:
    """Keep a drill's figures where lesson 05 reads them, with when and where they were made."""
    import platform

    record = {
        "recorded": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores",
        **drill,
    }
    DRILL_RESULTS.parent.mkdir(parents=True, exist_ok=True)
    DRILL_RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    return DRILL_RESULTS


def cluster_counts(address: str) -> dict[str, int]:
    """Jobs (drivers and submitted jobs) and actors the cluster at ``address`` has seen, read in a
    subprocess. A lesson that ran work on the cluster shows up as a new job: every task and actor
    belongs to one (the task list itself is cut at 10,000 rows, so it is not counted). Reads
    (State API, ``ray status``, the dashboard) leave no trace there and are not seen."""
    return _read_state(
        address,
        "print(json.dumps({'jobs': len(state.list_jobs(address=a)),\n"
        "  'actors': len(state.list_actors(address=a, limit=10000))}))\n",
    )


def _read_state(address: str, code: str) -> Any:
    """What ``code`` prints as JSON, run in a subprocess with the State API as ``state`` and the
    address as ``a`` (this process stays out of Ray)."""
    head = "import json, sys\nfrom ray.util import state\na = sys.argv[1]\n"
    out = subprocess.run(
        [sys.executable, "-c", head + code, address],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(address),
    )
    if out.returncode != 0:
        raise RuntimeError(f"cannot read the cluster's state: {out.stderr[-1500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _env(address: str, **extra: str) -> dict[str, str]:
    return dict(os.environ, RAY_ADDRESS=address, RAY_AUTH_MODE="token", **extra)


def _labkit_run(lessons: list[str], out: Path, cell_timeout: int) -> list[str]:
    """The ``labkit run`` command for ``lessons`` into ``out``."""
    return [sys.executable, "-m", "labkit", "run", *lessons, "--out", str(out),
            "--cell-timeout", str(cell_timeout)]  # fmt: skip


def run_lessons(
    lessons: list[str], address: str, out: Path, *, data_dir: Path, cell_timeout: int
) -> list[dict[str, Any]]:
    """``labkit run`` each lesson with ``RAY_ADDRESS`` set; one outcome per lesson."""
    results = []
    for nb in lessons:
        start = time.monotonic()
        proc = subprocess.run(
            _labkit_run([nb], out, cell_timeout),
            env=_env(address, LABKIT_SIZE="smoke", LABKIT_DATA_DIR=str(data_dir)),
            capture_output=True,
            text=True,
        )
        seconds = time.monotonic() - start
        ok = proc.returncode == 0
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        print(
            f"test-cluster: {nb} {'ok' if ok else 'FAILED'} in {seconds:.0f} s"
            + ("" if ok else "\n  " + "\n  ".join(tail)),
            flush=True,
        )
        results.append({"notebook": nb, "ok": ok, "seconds": round(seconds, 1)})
    return results


#: Two learners at once (issue 44): each runs these lessons (one with a named, detached actor,
#: then Serve's) with its own ``LABKIT_LEARNER`` and ``RESULTS_DIR``, started together.
PAIR = ("02", "09")
LEARNERS = ("ana", "ben")


def cluster_actors(address: str) -> dict[str, list[str]]:
    """Every actor the cluster at ``address`` has seen, alive or dead: ``{actor id: [class name,
    name, namespace, state]}``, read in a subprocess (as :func:`cluster_counts`)."""
    return _read_state(
        address,
        "rows = state.list_actors(address=a, limit=10000)\n"
        "print(json.dumps({r.actor_id: [r.class_name, r.name or '', r.ray_namespace or '',\n"
        "  r.state] for r in rows}))\n",
    )


def whose(new: dict[str, list[str]], learners: tuple[str, ...] = LEARNERS) -> dict[str, Any]:
    """What the pair made, by learner: the Serve apps (read from their replicas' class names,
    ``ServeReplica:<app>:<deployment>``) and the named actors outside Serve, each name with the
    learner's ``.<id>`` taken off; ``stray``: names that carry no learner's id; ``alive``: the
    pair's actors still alive (a lesson's clean-up must leave none)."""
    made: dict[str, dict[str, set[str]]] = {w: {"apps": set(), "named": set()} for w in learners}
    stray: set[str] = set()
    alive = []
    for cls, name, namespace, state in new.values():
        if cls.startswith("ServeReplica:"):
            kind, label = "apps", cls.split(":")[1]
        elif name and namespace != "serve":
            kind, label = "named", f"{namespace}/{name}"
        else:
            continue  # Serve's controller and proxies, and actors without a name
        owner = next((w for w in learners if label.endswith("." + w)), None)
        if owner is None:
            stray.add(label)
            continue
        made[owner][kind].add(label[: -len(owner) - 1])
        if state == "ALIVE":
            alive.append(label)
    return {
        "made": {w: {k: sorted(v) for k, v in kinds.items()} for w, kinds in made.items()},
        "stray": sorted(stray),
        "alive": sorted(alive),
    }


def run_pair(address: str, out: Path, *, data_dir: Path, cell_timeout: int) -> dict[str, Any]:
    """Two learners run :data:`PAIR` at once, each with its own id and results folder (``labkit
    run --out``) and the one shared ``LABKIT_DATA_DIR``; then whose apps and actors the cluster
    saw. ``failures`` names what broke: a run that failed, a name with no learner's id, a
    learner whose apps or named actors differ from the other's, or one left alive."""
    before = set(cluster_actors(address))
    started = time.monotonic()
    running = {}
    for who in LEARNERS:
        folder = out / "pair" / who
        folder.mkdir(parents=True, exist_ok=True)
        env = _env(address, LABKIT_SIZE="smoke", LABKIT_DATA_DIR=str(data_dir), LABKIT_LEARNER=who)
        log = (folder / "run.log").open("w")
        cmd = _labkit_run(list(PAIR), folder, cell_timeout)
        running[who] = (subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log)
    codes = {}
    for who, (proc, log) in running.items():
        codes[who] = proc.wait()
        log.close()
    seconds = time.monotonic() - started
    new = {k: v for k, v in cluster_actors(address).items() if k not in before}
    seen = whose(new)
    failures = [f"learner {w}: {' '.join(PAIR)} failed (exit {c})" for w, c in codes.items() if c]
    if seen["stray"]:
        failures.append(f"names with no learner's id: {seen['stray']}")
    first, *rest = LEARNERS
    mine = seen["made"][first]
    if not mine["apps"] or not mine["named"]:
        failures.append(f"learner {first} made no Serve app or no named actor: {mine}")
    failures += [
        f"learner {w} made {seen['made'][w]}, learner {first} {mine}"
        for w in rest
        if seen["made"][w] != mine
    ]
    if seen["alive"]:
        failures.append(f"left alive after the lessons' clean-up: {seen['alive']}")
    return {"seconds": round(seconds, 1), "exit": codes, **seen, "failures": failures}


def pair_on_a_cluster(out: Path, *, cell_timeout: int) -> dict[str, Any]:
    """:func:`run_pair` on a cluster and a data cache of its own, as :func:`main`'s but with two
    CPUs a worker node: on the lessons' cluster (two CPUs in all) two 09s' replicas waited for
    each other's CPUs until a cell timed out (a room's cluster has room for the room). Then
    down, and what it left."""
    data_dir = Path(tempfile.mkdtemp(prefix="labkit-shared-"))  # the pair's, outside the repo
    try:
        state = workshop.up(workers=2, cpus_per_worker=2, head_cpus=0, gpus_per_worker=2)
        pair = run_pair(state["address"], out, data_dir=data_dir, cell_timeout=cell_timeout)
    finally:
        workshop.down()  # also what a start that failed half-way left
        shutil.rmtree(data_dir, ignore_errors=True)
    left = leftovers(state)
    if left:
        pair["failures"].append(f"left behind after the pair's cluster went down: {left}")
    made = pair["made"][LEARNERS[0]]
    print(
        f"test-cluster: two learners ({', '.join(LEARNERS)}) ran {' '.join(PAIR)} at once on "
        f"their own 4-CPU cluster: {'ok' if not pair['failures'] else 'FAILED'} in "
        f"{pair['seconds']:.0f} s; each made the apps {', '.join(made['apps']) or '-'} and the "
        f"named actors {', '.join(made['named']) or '-'}, its own"
        + "".join(f"\n  {f}" for f in pair["failures"]),
        flush=True,
    )
    return pair


def storage_under_temp_dirs(temp_dir: str) -> list[str]:
    """Train or Tune storage a lesson wrote under a node's temp dir (it belongs on shared disk)."""
    found = []
    for path in Path(temp_dir).rglob("*"):
        name = path.name
        if path.is_dir() and (
            name.startswith(("checkpoint_", "TorchTrainer_", "TuneTrainable_"))
            or name in {"ray_results", "tuner.pkl"}
        ):
            found.append(str(path))
    return found


def leftovers(state: dict[str, Any]) -> list[str]:
    """What the cluster left after ``down``: processes, namespaces, links, its state file."""
    left = [f"pid {p.pid}" for p in workshop._processes(state)]
    tag = (state.get("net") or {}).get("tag")
    if tag:
        names = set(netns.namespaces()) | set(netns.links())
        left += [n for n in names if tag in n and n.startswith(netns.PREFIX)]
    if workshop.state_path().exists():
        left.append(str(workshop.state_path()))
    return left


def main(argv: list[str] | None = None) -> int:
    # Long: make test-cluster read top to bottom: its arguments, the cluster up, each lesson,
    # the drill, and the cluster down (in finally) with what it left.
    ap = argparse.ArgumentParser(prog="python -m labkit.tools.clustercheck", description=__doc__)
    plan = on_a_cluster()
    ap.add_argument(
        "lessons",
        nargs="*",
        help=f"lessons that join (default: of {' '.join(plan['join'])}, those the submission "
        "touches and the day's in turn, within --budget; 'all' runs every one)",
    )
    ap.add_argument("--budget", type=float, default=BUDGET_S, help="seconds of lessons by headers")
    ap.add_argument(
        "--local", nargs="*", default=plan["local"], help="lessons with a local Ray of their own"
    )
    ap.add_argument("--out", default=str(repo_root() / "runs" / "test-cluster"))
    ap.add_argument("--cell-timeout", type=int, default=600)
    ap.add_argument("--no-drill", action="store_true", help="skip the network-cut drill")
    ap.add_argument(
        "--no-pair",
        action="store_true",
        help=f"skip the two learners running {' '.join(PAIR)} at once",
    )
    ap.add_argument(
        "--save",
        action="store_true",
        help=f"write the drill's figures to {DRILL_RESULTS.relative_to(repo_root())} (lesson 05)",
    )
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="labkit-shared-"))  # outside the repository
    started = time.monotonic()
    state = workshop.up(workers=2, cpus_per_worker=1, head_cpus=0, gpus_per_worker=2)
    failures: list[str] = []
    report: dict[str, Any] = {"nodes": state["node_ips"], "namespaced": bool(state["net"])}
    try:
        print(f"test-cluster: up in {time.monotonic() - started:.0f} s", flush=True)
        print("test-cluster: " + workshop.nodes_line(state), flush=True)
        if workshop.fallback_line(state):
            print(workshop.fallback_line(state), flush=True)
        address = state["address"]
        singles = chosen(args.lessons, plan["join"], budget_s=args.budget)
        if not args.no_pair and not args.lessons:  # the pair runs them, twice at once
            singles = [nb for nb in singles if nb not in PAIR]
        report["lessons"] = run_lessons(
            singles,
            address,
            out,
            data_dir=data_dir,
            cell_timeout=args.cell_timeout,
        )
        try:
            before = cluster_counts(address)
            report["local"] = run_lessons(
                args.local, address, out, data_dir=data_dir, cell_timeout=args.cell_timeout
            )
            after = cluster_counts(address)
            saw = {k: after[k] - before[k] for k in after}
            report["local_lessons_sent_the_cluster"] = saw
            print(f"test-cluster: the local lessons sent the cluster {saw}", flush=True)
            if any(saw.values()):
                failures.append(f"a local lesson reached the cluster: {saw}")
        except Exception as exc:  # noqa: BLE001 - report it and go on to the drill
            report.setdefault("local", [])
            failures.append(f"the local-lesson check failed: {exc}")
        failures += [
            f"{r['notebook']} failed" for r in report["lessons"] + report["local"] if not r["ok"]
        ]
        stray = storage_under_temp_dirs(state["temp_dir"])
        if stray:
            failures.append(f"Train/Tune storage under a node's temp dir: {stray[:5]}")
        if not state["net"] or args.no_drill:
            report["drill"] = {"skipped": "no namespaced nodes" if not state["net"] else "asked"}
            print(f"test-cluster: network-cut drill skipped ({report['drill']['skipped']})")
        else:
            from labkit.runtime import netcut

            report["drill"] = netcut.drill(state)
            failures += report["drill"].get("failures", [])
            if args.save and not report["drill"].get("failures"):
                save_drill(report["drill"])
    finally:
        workshop.down()
        shutil.rmtree(data_dir, ignore_errors=True)
    left = leftovers(state)
    if left:
        failures.append(f"left behind after down: {left}")
    if not args.no_pair:
        report["pair"] = pair_on_a_cluster(out, cell_timeout=args.cell_timeout)
        failures += report["pair"]["failures"]
    report["seconds"] = round(time.monotonic() - started, 1)
    report["failures"] = failures
    (out / "test-cluster.json").write_text(json.dumps(report, indent=1))
    print(
        f"test-cluster: {'ok' if not failures else 'FAILED'} in {report['seconds']:.0f} s"
        + "".join(f"\n  {f}" for f in failures),
        flush=True,
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
