"""The results store: a machine's fingerprint, its folder name, and keeping a run worth keeping
under ``results/<machine>/<date>-<commit>/`` (asv's layout), never over an earlier one.

Used by: ``labkit bench`` and ``labkit bench keep`` (labkit/tools/cli_bench.py).

Used in: no lesson or lab report.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from datetime import date
from pathlib import Path
from typing import Any

from labkit import params


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (``platform.processor()`` elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fingerprint() -> dict[str, Any]:
    """What a record needs to be compared across machines: what every record already carries
    (:func:`labkit.measure.machine_info`: host, CPUs, memory, Python, Ray and torch), plus the
    CPU's model and the GPUs as ``nvidia-smi`` sees them (no CUDA initialised here)."""
    from labkit.measure import machine_info

    names = gpus()
    info = {k: v for k, v in machine_info().items() if k not in ("gpu", "gpu_count")}
    return info | {
        "cpu_model": cpu_model(),
        "gpu": names[0] if names else "",
        "gpu_count": len(names),
    }


def gpus() -> list[str]:
    """The GPUs' names as ``nvidia-smi`` gives them (no CUDA initialised here)."""
    from labkit.device import nvidia_smi_gpus

    return nvidia_smi_gpus()


def slug(text: str) -> str:
    """``NVIDIA H200`` -> ``nvidia-h200``: lower case, runs of other characters as one dash."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def machine_name(info: dict[str, Any] | None = None) -> str:
    """The results folder of a machine, as ``labkit gpu-check`` names a GPU box: its GPU
    (``nvidia-h200``, the form factor left out; ``8x-nvidia-h100`` for several), else its CPUs
    (``cpu2-amd-epyc``)."""
    info = info or fingerprint()
    if info.get("gpu"):
        name = re.sub(r"-(sxm|pcie|nvl)[0-9a-z-]*$", "", slug(info["gpu"]))
        count = int(info.get("gpu_count") or 1)
        return name if count == 1 else f"{count}x-{name}"
    return f"cpu{info.get('cpus')}-{slug(info.get('cpu_model') or 'unknown')}"


def commit(root: Path | None = None) -> str:
    """The short commit of the working tree (``+dirty`` when it has changes), or ``nocommit``."""
    root = root or params.repo_root()

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=20
        ).stdout.strip()

    try:
        sha = git("rev-parse", "--short=8", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "nocommit"
    return f"{sha}+dirty" if dirty else sha


def keep_path(machine: str, day: date, sha: str, *, root: Path | None = None) -> Path:
    """``results/<machine>/<YYYY-MM-DD>-<commit>/``."""
    root = root or params.repo_root()
    return root / "results" / machine / f"{day.isoformat()}-{sha}"


def keep(run: Path, *, machine: str, day: date, sha: str, root: Path | None = None) -> Path:
    """Copy a run folder into the results store; an existing folder is never overwritten
    (FileExistsError names it). The executed notebooks and plots go with it."""
    target = keep_path(machine, day, sha, root=root)
    if target.exists():
        raise FileExistsError(f"{target} exists already: a kept run is never overwritten")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(run, target, ignore=shutil.ignore_patterns("points"))
    return target
