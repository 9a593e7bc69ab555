"""``labkit bench|gpu-check``: sweeps of the lab reports (run, compare, keep) and the GPU
notebooks inside a time budget.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path

from labkit import params


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


BENCH_USAGE = """
  labkit bench SWEEP.yaml [--out DIR] [--dry-run]  run a sweep: runs/bench-<machine>-<time>/
  labkit bench compare A B                         B against A: exit 1 on a flagged regression
  labkit bench keep RUN                            keep it: results/<machine>/<date>-<commit>/
                                                   (a run of labkit bench or labkit gpu-check)"""


def cmd_bench(args: argparse.Namespace) -> int:
    """``labkit bench``: a sweep file, or ``compare A B``, or ``keep RUN``."""
    if args.what == "compare":
        return _compare(args.more)
    if args.what == "keep":
        return _keep(args.more)
    if args.more:
        raise SystemExit(f"labkit bench: one sweep file at a time\n{BENCH_USAGE}")
    return _sweep(args.what, out=args.out, dry_run=args.dry_run, cell_timeout=args.cell_timeout)


def _compare(runs: list[str]) -> int:
    """B against A, figure by figure: 1 when one is flagged worse."""
    from labkit.bench import report

    if len(runs) != 2:
        raise SystemExit(f"labkit bench compare needs two runs (A B)\n{BENCH_USAGE}")
    a, b = (report.load(x) for x in runs)
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


def _keep(runs: list[str]) -> int:
    """A bench or gpu-check run kept under ``results/<machine>/<date>-<commit>/``."""
    from labkit.bench import store

    if len(runs) != 1:
        raise SystemExit(f"labkit bench keep needs one run folder\n{BENCH_USAGE}")
    run = Path(runs[0])
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


def _sweep(path: str, *, out: str | None, dry_run: bool, cell_timeout: int) -> int:
    """Run a sweep file's points, then write its report: 1 when a run failed."""
    from labkit.bench import report, store, sweep

    try:
        spec = sweep.load(path)
    except sweep.SweepError as exc:
        raise SystemExit(f"labkit bench: {exc}") from None
    todo = sweep.points(spec)
    for entry in spec.entries:
        print(f"labkit bench: {entry.name}: grid {entry.grid or '{}'} x {entry.repeats} repeat(s)")
    print(f"labkit bench: {len(todo)} runs at SIZE={spec.run_size}")
    if dry_run:
        return 0
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"bench-{store.machine_name()}-{stamp}"
    folder = Path(out).resolve() if out else params.repo_root() / "runs" / name
    try:
        outcome = sweep.run(spec, folder, cell_timeout=cell_timeout)
    except sweep.SweepError as exc:
        raise SystemExit(f"labkit bench: {exc}") from None
    written = report.write_report(folder)
    print(f"labkit bench: {outcome['records']} records, {len(outcome['failed'])} failed runs")
    print(f"labkit bench: {written}")
    return 1 if outcome["failed"] else 0


def register(sub) -> None:
    """Add this module's verbs to the ``labkit`` parser's subcommands."""
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
        "gpu-check", help="run the GPU-using notebooks headless inside a time budget"
    )
    p.add_argument("--out", help="output folder (default runs/gpu-check-<gpu>)")
    p.add_argument("--budget", type=float, default=420, help="seconds (default 420)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu", "auto"])
    p.add_argument("--size", choices=params.SIZES, help="run every check at this size instead")
    p.add_argument("--only", nargs="*", help="notebook numbers to run, e.g. 07 06")
    p.add_argument("--cell-timeout", type=int, default=600, help="seconds per cell")
    p.set_defaults(func=cmd_gpu_check)
