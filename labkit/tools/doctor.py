"""``labkit doctor``: what a workshop helper asks for first, as a dict (the CLI prints it), and
the missing pieces that would stop the kit here, one line each (:func:`problems`).

Used in: 00.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
from pathlib import Path
from typing import Any

from labkit import lang, params
from labkit.runtime import procs
from labkit.runtime.net import listening


def report() -> dict[str, Any]:
    """Facts about this machine a workshop helper needs: versions, GPUs, cores, memory, ports."""
    import psutil

    from labkit.device import nvidia_smi_gpus
    from labkit.measure import package_version
    from labkit.runtime.net import auth_token, token_path

    report: dict[str, Any] = {
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "labkit root": str(params.repo_root()),
        "ray": package_version("ray") or "NOT INSTALLED",
        "torch": package_version("torch") or "NOT INSTALLED",
    }
    try:
        import torch

        report["torch cuda build"] = torch.version.cuda or lang.say("none (CPU build)")
        report["cuda available"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            report["torch gpus"] = [
                torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
            ]
    except ImportError:
        pass
    report["nvidia-smi gpus"] = nvidia_smi_gpus() or lang.say("none")
    report["cpu cores"] = lang.say(
        "{n} logical, {m} physical", n=os.cpu_count(), m=psutil.cpu_count(logical=False)
    )
    vm = psutil.virtual_memory()
    report["memory"] = lang.say(
        "{total:.1f} GiB total, {free:.1f} GiB available",
        total=vm.total / 2**30,
        free=vm.available / 2**30,
    )
    if Path("/dev/shm").exists():
        shm = shutil.disk_usage("/dev/shm")
        report["/dev/shm"] = lang.say(
            "{size:.1f} GiB (Ray's object store lives here)", size=shm.total / 2**30
        )
    else:
        report["/dev/shm"] = lang.say("missing (Ray falls back to /tmp, slower)")
    report["ray auth token"] = (
        lang.say("present ({path})", path=params.shown(token_path()))
        if auth_token()
        else lang.say("none yet ({path})", path=params.shown(token_path()))
    )
    report["RAY_ADDRESS"] = os.environ.get("RAY_ADDRESS") or lang.say("unset (local Ray)")
    report["RAY_AUTH_MODE"] = os.environ.get("RAY_AUTH_MODE") or lang.say("unset")
    busy = [p for p in (6379, 8265, 8000, 8888, 10001) if listening(p)]
    report["ports busy on 127.0.0.1"] = busy or lang.say(
        "none of {ports}", ports="6379, 8265, 8000, 8888, 10001"
    )
    report["kit processes alive"] = len(procs.alive())
    report["slow imports"] = slow_imports() or lang.say("none")
    report["browser"] = tool_version("chromium", "chromium-browser", "google-chrome")
    report["browser driver"] = tool_version("chromedriver")
    return report


def table(report: dict[str, Any]) -> str:
    """``report`` as aligned lines, one per check, its labels in the learner's language
    (:data:`labkit.lang.DOCTOR_LABELS`; a CJK label is padded by its width on screen)."""
    zh = lang.is_zh()
    labels = {k: lang.DOCTOR_LABELS.get(k, k) if zh else k for k in report}
    width = max(lang.display_width(v) for v in labels.values())
    pad = {k: " " * (width - lang.display_width(v)) for k, v in labels.items()}
    return "\n".join(f"{labels[k]}{pad[k]}  {v}" for k, v in report.items())


#: JupyterLab's port under ``make lab`` (``labkit lab --port`` picks another).
LAB_PORT = 8888
#: Room ``/dev/shm`` needs: the object store of a ``small`` lesson's session lives there.
SHM_MIN_GIB = 1.0


def problems(report: dict[str, Any]) -> list[str]:
    """What in ``report`` would stop a lesson, ``make lab`` or ``make test-browser`` here, one
    line each, naming the piece and what to do (empty when nothing does)."""
    import psutil

    found = []
    for package in ("ray", "torch"):
        if report.get(package) == "NOT INSTALLED":
            found.append(f"{package} is not installed: run `make install`")
    if sys.platform.startswith("linux"):
        if not Path("/dev/shm").exists():
            found.append("/dev/shm is missing: Ray's object store needs it (Docker: --shm-size)")
        elif (free := psutil.disk_usage("/dev/shm").free / 2**30) < SHM_MIN_GIB:
            found.append(
                f"/dev/shm has {free:.2f} GiB free (needs {SHM_MIN_GIB:g}): Ray's object store "
                "lives there (Docker: --shm-size=8g)"
            )
    if listening(LAB_PORT):
        found.append(
            f"port {LAB_PORT} on 127.0.0.1 is taken: `make lab` starts JupyterLab there "
            f"(use `.venv/bin/labkit lab --port 8899`, or stop what holds it)"
        )
    if any(str(report.get(k, "")).startswith("none") for k in ("browser", "browser driver")):
        found.append(
            "no Chromium or no chromedriver: `make browser` installs both (only "
            "`make test-browser` needs them)"
        )
    return found


def tool_version(*names: str) -> str:
    """The first of ``names`` on PATH and the version it prints (`make browser` installs
    Chromium and its driver for `make test-browser`)."""
    import subprocess

    for name in names:
        if path := shutil.which(name):
            try:
                out = subprocess.run(
                    [path, "--version"], capture_output=True, text=True, timeout=20
                ).stdout.strip()
            except (OSError, subprocess.TimeoutExpired) as e:
                return f"{path}: no version ({e})"
            return out.splitlines()[0] if out else f"{path}: printed no version"
    return "none (make browser installs Chromium and chromedriver)"


# Modules that, when installed, every Ray process imports (through jsonschema) at a cost: the
# Makefile uninstalls them after each install.
SLOW_IMPORTS = {
    "rfc3987_syntax": "rfc3987-syntax: +1.2 s per Ray process (`pip uninstall rfc3987-syntax`)",
}


def slow_imports() -> list[str]:
    """Installed modules that slow every Ray worker's start, with how to remove each."""
    from importlib.util import find_spec

    return [why for module, why in SLOW_IMPORTS.items() if find_spec(module) is not None]
