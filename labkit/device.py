"""Choose the torch device honestly, and tell real GPUs from Ray's logical ones.

Used in: 04, 06-09, 11-13, lab_amp, lab_data, lab_lm, lab_train.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from labkit.contract import DEVICES, choice


class DeviceError(RuntimeError):
    """The requested device is not usable on this machine."""


def real_gpu_count() -> int:
    """Number of CUDA GPUs this process can use (0 on a CPU-only machine or a CPU torch build)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def nvidia_smi_gpus() -> list[str]:
    """GPU names from ``nvidia-smi`` (independent of the torch build); empty if none."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def choose(device: str = "auto"):
    """Return the ``torch.device`` for DEVICE=auto|cpu|cuda; cuda without CUDA fails clearly."""
    import torch

    name = choice("DEVICE", device, DEVICES)
    if name == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if name == "auto":
        return torch.device("cpu")
    build = (
        "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
    )
    hint = (
        f"nvidia-smi sees {', '.join(nvidia_smi_gpus())}, so the torch wheel is the problem"
        if nvidia_smi_gpus()
        else "no NVIDIA GPU is visible (nvidia-smi is missing or lists none)"
    )
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        hint += "; CUDA_VISIBLE_DEVICES is empty, which hides every GPU"
    from labkit import lang

    if lang.is_zh():
        raise DeviceError(
            f"要求了 DEVICE='cuda'，但 torch {torch.__version__}（{build}）在这里用不了 CUDA："
            f"{hint}。请用 DEVICE=auto（退回到 CPU）或 DEVICE=cpu，或者在装有 CUDA 版 torch 的 "
            "GPU 机器上运行。"
        )
    raise DeviceError(
        f"DEVICE='cuda' was asked for, but torch {torch.__version__} ({build}) "
        "cannot use CUDA here: "
        f"{hint}. Use DEVICE=auto (falls back to CPU) or DEVICE=cpu, or run on a GPU machine "
        "with a CUDA build of torch."
    )


def describe(device) -> str:
    """A short human description of a torch device (GPU name and memory, or CPU threads)."""
    import torch

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return f"cuda: {props.name}, {props.total_memory / 2**30:.0f} GiB"
    from labkit import lang

    return lang.say(
        "cpu: {threads} torch threads on {cores} cores",
        threads=torch.get_num_threads(),
        cores=os.cpu_count(),
    )


def in_worker():
    """The ``torch.device`` for code inside a Ray task, actor, replica or trial: CUDA when Ray
    assigned this worker a GPU and torch can use CUDA, else the CPU. A logical GPU (a machine
    without one, ``LABKIT_LOGICAL_GPUS``) is a scheduling share, not a device."""
    import ray
    import torch

    gpu_ids = ray.get_gpu_ids() if ray.is_initialized() else []
    return torch.device("cuda" if gpu_ids and torch.cuda.is_available() else "cpu")
