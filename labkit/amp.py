"""Mixed precision with the current PyTorch API, and honest measurements of what it saves.

``torch.amp.autocast(device_type, dtype=...)`` and ``torch.amp.GradScaler`` (fp16 only) replace
the deprecated ``torch.cuda.amp``. bf16 needs no scaler; fp16 does. Whether AMP is *faster* depends
on the hardware: measure it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch
from torch import nn

# Dense (non-sparse) bf16/fp16 tensor-core peaks in FLOP/s, from the vendors' data sheets.
PEAK_BF16_FLOPS = {
    "H200": 989e12,
    "H100": 989e12,
    "A100": 312e12,
    "L40S": 362e12,
    "L4": 121e12,
    "A10G": 70e12,
    "A10": 125e12,
    "RTX 4090": 165e12,
}


def cpu_has_bf16() -> bool:
    """True if this CPU has native bf16 instructions (AVX512-BF16 or AMX), on Linux."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def amp_dtype(device: torch.device) -> torch.dtype:
    """bf16 on CPUs and on GPUs that support it (Ampere, Hopper and later), else fp16."""
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16
    return torch.bfloat16


def autocast(device: torch.device, dtype: torch.dtype | None):
    """``torch.amp.autocast`` for ``dtype``, or a no-op context for full precision (None)."""
    if dtype is None:
        return nullcontext()
    return torch.amp.autocast(device_type=device.type, dtype=dtype)


def make_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable,
    device: torch.device,
    dtype: torch.dtype | None,
) -> Callable:
    """A training step for ``(x, y)``; fp16 gets a ``GradScaler``, bf16 and fp32 do not."""
    scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None

    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, dtype):
            loss = loss_fn(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss.item()

    return step


def saved_activation_bytes(
    model: nn.Module,
    loss_fn: Callable,
    x: torch.Tensor,
    y: torch.Tensor,
    device: torch.device,
    dtype: torch.dtype | None,
) -> int:
    """Bytes of tensors autograd saves for backward in one forward pass (each storage once)."""
    seen: dict[int, int] = {}
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in params:  # weights are kept anyway; count activations only
            seen[ptr] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast(device, dtype):
        loss = loss_fn(model(x), y)
    del loss
    return sum(seen.values())


def state_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Bytes of parameters, gradients and optimizer state (the part AMP does not shrink)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    total += sum(
        p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None
    )
    for state in optimizer.state.values():
        total += sum(v.numel() * v.element_size() for v in state.values() if torch.is_tensor(v))
    return total


def measure_steps(
    step: Callable,
    batches: list[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device,
    warmup: int = 2,
) -> float:
    """Seconds per step (median over the batches after ``warmup`` steps), synchronising CUDA."""
    times = []
    for i, (x, y) in enumerate(batches):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        step(x, y)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    if not times:
        raise ValueError(f"need more than {warmup} batches to time")
    times.sort()
    return times[len(times) // 2]


def flops_per_step(model: nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor) -> float:
    """FLOPs of one forward + backward, counted by ``torch.utils.flop_counter``."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        loss_fn(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


def peak_flops(device: torch.device) -> float | None:
    """The GPU's dense bf16 peak from :data:`PEAK_BF16_FLOPS`, or None if unknown / not a GPU."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, value in PEAK_BF16_FLOPS.items():
        if key in name:
            return value
    return None
