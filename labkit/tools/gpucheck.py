"""``labkit gpu-check``: run the notebooks that use a GPU, headless, inside a time budget.

A GPU machine is often lent for minutes, not hours. This runs the checks in order of what they
prove, starts a notebook only when its expected time still fits the budget, and writes what it
ran, what it skipped and why, every metric recorded and every plot into one folder, ready to be
committed under ``results/<gpu-name>/``.

Notebooks run through :func:`labkit.runtime.nbexec.execute` (papermill, or nbclient where only
nbclient is installed); parameters travel as ``LABKIT_*`` variables, which every notebook reads.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from labkit import params


@dataclass(frozen=True)
class Check:
    """One notebook run: which notebook, at what size, and how long it takes on a GPU box."""

    notebook: str  # the number, e.g. "07"
    size: str
    expect_s: float  # measured on a 16-core GPU box (an estimate where not yet measured)
    why: str


# In the order issue 27 asks for, with the seconds each took on one H200 with 16 cores
# (results/nvidia-h200/2026-12-01-efae0ac) where it ran there: 07 at full holds the AMP / MFU
# measurement and the 1-GPU Ray Train path; then 12, 08, 09, 11 and 13 at small, which have never
# run on a GPU (their seconds are estimates from the 2-core CPU box's smoke runs, times two: replace
# them with the first GPU run's); then the small ones that put real GPUs into sessions, actors and
# a local cluster; 06 at full (Ray Data feeding a GPU) last.
CHECKS: tuple[Check, ...] = (
    Check("07", "full", 230, "Ray Train on the GPUs present, GPT AMP with MFU and memory"),
    Check("12", "small", 140, "the blog ledger's Train fit, AMP and Serve on a GPU (estimate)"),
    Check("08", "small", 90, "Tune trials with GPU shares (estimate)"),
    Check("09", "small", 180, "Serve replicas with GPU shares (estimate)"),
    Check("11", "small", 120, "the capstone: bf16 Train fit and Serve on a GPU (estimate)"),
    Check(
        "13",
        "small",
        200,
        "the language model: bf16 pretraining, generation on GPU actors, "
        "token streaming from Serve (estimate)",
    ),
    Check("00", "small", 40, "real GPUs in a session"),
    Check("02", "small", 55, "GPU actors, pending when GPUs run out"),
    Check("04", "small", 75, "GPU scheduling on a local cluster next to real GPUs"),
    Check("03", "small", 45, "objects and memory with DEVICE=cuda"),
    Check("06", "full", 180, "Ray Data feeding a GPU at full size"),
)


def plan(checks: tuple[Check, ...], budget_s: float, elapsed_s: float = 0.0) -> list[Check]:
    """The checks to run, in order, whose expected times fit ``budget_s`` after ``elapsed_s``."""
    out, t = [], elapsed_s
    for check in checks:
        if t + check.expect_s <= budget_s:
            out.append(check)
            t += check.expect_s
    return out


def gpu_slug() -> str:
    """A folder name for this machine's accelerator, e.g. ``nvidia-h200`` (``cpu`` without one)."""
    from labkit.device import real_gpu_count

    if not real_gpu_count():
        return "cpu"
    import torch

    from labkit.bench.store import machine_name

    gpu = {"gpu": torch.cuda.get_device_name(0), "gpu_count": torch.cuda.device_count()}
    return machine_name(gpu)


def run_notebook(path: Path, out_dir: Path, env: dict[str, str], *, cell_timeout: int) -> dict:
    """Execute one notebook with ``env`` set; save it executed; return status and seconds."""
    from labkit.checks import error_line
    from labkit.runtime.nbexec import execute

    start = time.monotonic()
    outcome: dict[str, Any] = {"notebook": path.stem, "status": "ok", "error": ""}
    try:
        execute(path, out_dir / path.name, env=env, timeout=cell_timeout)
    except Exception as exc:  # noqa: BLE001 - report it and go on to the next check
        outcome["status"] = "FAILED"
        outcome["error"] = error_line(exc)
    outcome["seconds"] = time.monotonic() - start
    return outcome


def main(
    out: Path | None = None,
    *,
    budget_s: float = 420,
    device: str = "cuda",
    size: str | None = None,
    only: list[str] | None = None,
    cell_timeout: int = 600,
) -> int:
    """Run the checks that fit; write ``summary.md``/``summary.json``; 0 if all that ran passed.

    ``size`` replaces every check's size (``smoke`` exercises the script on a CPU box); ``only``
    keeps the checks whose notebook number is listed.
    """
    from datetime import datetime

    from labkit.bench import store
    from labkit.tools.nbrun import write_summary

    started = datetime.now().isoformat(timespec="seconds")

    checks = tuple(c for c in CHECKS if not only or c.notebook in only)
    if size:
        checks = tuple(Check(c.notebook, size, c.expect_s, c.why) for c in checks)
    out = Path(out) if out else params.repo_root() / "runs" / f"gpu-check-{gpu_slug()}"
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    nb_dir = params.repo_root() / "notebooks"
    start = time.monotonic()
    outcomes, skipped = [], []
    for check in checks:
        elapsed = time.monotonic() - start
        if not plan((check,), budget_s, elapsed):
            skipped.append({**asdict(check), "reason": f"{elapsed:.0f} s used of {budget_s:.0f}"})
            print(f"gpu-check: skip {check.notebook} at {check.size}: over the budget", flush=True)
            continue
        (path,) = sorted(nb_dir.glob(f"{check.notebook}_*.ipynb"))
        env = {
            "LABKIT_SIZE": check.size,
            "LABKIT_DEVICE": device,
            "LABKIT_RESULTS_DIR": str(out),
            "RAY_ADDRESS": "",
        }
        print(f"gpu-check: {path.stem} at {check.size}, DEVICE={device} ...", flush=True)
        outcome = run_notebook(path, out / "executed", env, cell_timeout=cell_timeout)
        outcome.update(size=check.size, device=device)
        outcomes.append(outcome)
        print(
            f"gpu-check: {path.stem} {outcome['status']} in {outcome['seconds']:.0f} s "
            f"{outcome['error']}",
            flush=True,
        )
    write_summary(out, outcomes)
    summary = {"gpu": gpu_slug(), "budget_s": budget_s, "ran": outcomes, "skipped": skipped}
    # what `labkit bench keep` needs to file the run under results/<gpu>/<date>-<commit>/
    summary |= {"name": gpu_slug(), "started": started, "commit": store.commit()}
    summary["machine"] = store.fingerprint()
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"gpu-check: {len(outcomes)} ran, {len(skipped)} skipped; results in {out}", flush=True)
    return 1 if any(o["status"] != "ok" for o in outcomes) else 0
