"""Measuring mixed precision honestly: step time, memory (activations vs autocast's weight
copies, peak), FLOPs and MFU.

The AMP training step itself (``torch.amp.autocast``, and ``torch.amp.GradScaler`` for fp16) is
what lesson 07 teaches, so it is written in the lesson's cells and handed to
:func:`measure_config`; :func:`make_step` is the step 07 taught, for the lab report that comes
after it (``bench/lab_amp``). Whether AMP is *faster* depends on the hardware: measure it.

Used in: 07, 12, 13, lab_amp.
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


def cpu_has_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """True if this CPU has native bf16 instructions (AVX512-BF16 or AMX), on Linux."""
    try:
        flags = Path(cpuinfo).read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def amp_dtype(device: torch.device) -> torch.dtype:
    """bf16 on CPUs and on GPUs that support it (Ampere, Hopper and later), else fp16."""
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16
    return torch.bfloat16


def _autocast(device: torch.device, dtype: torch.dtype | None):
    """``torch.amp.autocast`` for ``dtype``, or a no-op context for full precision (None)."""
    if dtype is None:
        return nullcontext()
    return torch.amp.autocast(device_type=device.type, dtype=dtype)


#: What lesson 07 writes in a cell and hands to :func:`measure_config`:
#: ``make_step(model, optimizer, loss_fn, *, device, dtype)`` returns ``step(x, y) -> loss``.
MakeStep = Callable[..., Callable[[torch.Tensor, torch.Tensor], float]]


def make_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable,
    *,
    device: torch.device,
    dtype: torch.dtype | None,
) -> Callable[[torch.Tensor, torch.Tensor], float]:
    """Lesson 07's training step in precision ``dtype`` (None: full fp32): autocast around the
    forward pass and the loss, a ``GradScaler`` for fp16 only. Lesson 07 writes it in a cell;
    a test holds this copy to the lesson's. Used in: bench/lab_amp."""
    scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None

    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        optimizer.zero_grad(set_to_none=True)
        with torch.amp.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = loss_fn(model(x), y)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        return loss.item()

    return step


def lm_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy over every position of a batch of sequences."""
    return nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())


def workload(
    name: str, gpt: dict[str, int], seed: int
) -> tuple[nn.Module, Callable, torch.Tensor, torch.Tensor]:
    """A freshly built, seeded AMP workload on the CPU, as :func:`measure_config` wants it:
    ``(model, loss_fn, inputs, targets)``. ``name`` is ``"gpt"`` (a decoder of shape ``gpt``:
    vocab, d_model, heads, layers, seq_len, batch_size), ``"cnn"`` or ``"resnet"`` (32x32
    images, 10 classes). Used in: 07, bench/lab_amp."""
    from labkit import data, models

    torch.manual_seed(seed)
    if name in ("cnn", "resnet"):
        n_images = 64 if name == "cnn" else 256
        xs, ys = data.images(n_images, size=32, channels=3, n_classes=10, seed=seed)
        net = models.SmallCNN(3, 10, width=32) if name == "cnn" else models.ResNetSmall(3, 10)
        return net, nn.functional.cross_entropy, torch.from_numpy(xs), torch.from_numpy(ys)
    if name != "gpt":
        raise ValueError(f"workload {name!r} is not one of 'gpt', 'cnn', 'resnet'")
    toks = torch.from_numpy(
        data.tokens(gpt["batch_size"], seq_len=gpt["seq_len"] + 1, vocab=gpt["vocab"], seed=seed)
    )
    net = models.GPT(
        gpt["vocab"], gpt["d_model"], gpt["heads"], layers=gpt["layers"], seq_len=gpt["seq_len"]
    )
    return net, lm_loss, toks[:, :-1], toks[:, 1:]


_VIEW_NODES = {
    "TBackward0",
    "TransposeBackward0",
    "ViewBackward0",
    "ExpandBackward0",
    "PermuteBackward0",
    "UnsafeViewBackward0",
    "ReshapeAliasBackward0",
}


def _is_weight_copy(t: torch.Tensor, param_ids: set[int]) -> bool:
    """True if ``t`` is autocast's low-precision copy of a parameter (or a view of one)."""
    fn, hops = t.grad_fn, 0
    while fn is not None and type(fn).__name__ in _VIEW_NODES and hops < 4:
        fn, hops = fn.next_functions[0][0], hops + 1
    if fn is None or type(fn).__name__ != "ToCopyBackward0":
        return False
    return any(
        type(nf).__name__ == "AccumulateGrad" and id(nf.variable) in param_ids
        for nf, _ in fn.next_functions
        if nf is not None
    )


def saved_tensor_bytes(
    model: nn.Module,
    loss_fn: Callable,
    *,
    x: torch.Tensor,
    y: torch.Tensor,
    device: torch.device,
    dtype: torch.dtype | None,
) -> dict[str, int]:
    """What autograd keeps for backward after one forward pass, each storage counted once.

    ``activations``: tensors computed from the data. ``weight_copies``: the bf16/fp16 copies of
    the weights that autocast makes (its cast cache) and that backward needs too; they exist on
    top of the fp32 weights, so they *add* memory. The fp32 weights themselves are not counted.
    """
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    param_ids = {id(p) for p in model.parameters()}
    acts: dict[int, int] = {}
    copies: dict[int, int] = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in params:  # weights are kept anyway
            (copies if _is_weight_copy(t, param_ids) else acts)[ptr] = storage.nbytes()
        # Keep the storage (so no later tensor reuses its address while we count) but not the
        # autograd node: a saved *output* returned as is would point back at its own node, a
        # cycle that can keep the whole graph alive after this function returns.
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), _autocast(device, dtype):
        loss = loss_fn(model(x), y)
    del loss
    return {"activations": sum(acts.values()), "weight_copies": sum(copies.values())}


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
    *,
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


def flops_per_step(
    model: nn.Module, loss_fn: Callable, *, x: torch.Tensor, y: torch.Tensor
) -> float:
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


def set_tf32(enabled: bool) -> None:
    """fp32 matmuls on tensor cores as TF32 (``"high"``) or in full fp32 (``"highest"``)."""
    torch.set_float32_matmul_precision("high" if enabled else "highest")


def warm_cublas(device) -> None:
    """Allocate cuBLAS's per-process workspaces before a baseline is read, as PyTorch's own leak
    check does: one small matmul in fp32 and one under bf16 autocast. Without it the first
    configuration measured counts them as its own and ``leaked_bytes`` is never 0 (issue 27;
    not yet run on a GPU). Nothing happens on a CPU."""
    if device.type != "cuda":
        return
    a = torch.ones(64, 64, device=device)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        (a @ a).sum().item()
    (a @ a).sum().item()
    torch.cuda.synchronize(device)


def measure_config(
    build: Callable[[], tuple[nn.Module, Callable, torch.Tensor, torch.Tensor]],
    device: torch.device,
    dtype: torch.dtype | None,
    *,
    make_step: MakeStep,
    steps: int,
    warmup: int = 2,
    tf32: bool = False,
    count_flops: bool = True,
) -> dict[str, float | int | None]:
    """Train one freshly built workload for ``warmup + steps`` steps and measure it.

    ``build()`` returns ``(model, loss_fn, x, y)`` on the CPU; ``make_step`` builds the training
    step under test (the lesson writes it: autocast, and a GradScaler for fp16). Returns seconds
    per step (median),
    samples and tokens per second, the peak memory this configuration allocated on CUDA (above
    what was allocated before it; it covers weights, gradients, Adam state and activations),
    what autograd saved
    (:func:`saved_tensor_bytes`), the training state's bytes, the FLOPs of one step
    (``torch.utils.flop_counter``) and, on a GPU whose peak is known, the MFU against its dense
    bf16 peak, and ``leaked_bytes``: CUDA memory still allocated after everything was freed.
    """
    import gc

    cuda = device.type == "cuda"
    set_tf32(tf32)
    try:
        gc.collect()
        before = 0
        if cuda:
            warm_cublas(device)  # cuBLAS's workspaces stay for the process: allocate them first
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
        net, loss_fn, xb, yb = build()
        net, xb, yb = net.to(device), xb.to(device), yb.to(device)
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-4, fused=cuda or None)
        step = make_step(net, optimizer, loss_fn, device=device, dtype=dtype)
        sec = measure_steps(step, [(xb, yb)] * (steps + warmup), device, warmup=warmup)
        # This configuration's own peak: anything still allocated before it does not count.
        peak = torch.cuda.max_memory_allocated(device) - before if cuda else None
        saved = saved_tensor_bytes(net, loss_fn, x=xb, y=yb, device=device, dtype=dtype)
        state = state_bytes(net, optimizer)
        flops = None
        if count_flops:
            with _autocast(device, dtype):
                flops = flops_per_step(net, loss_fn, x=xb, y=yb)
        peak_flops_ = peak_flops(device)
        tokens = xb.numel() if not xb.is_floating_point() else None
        out = {
            "s_per_step": sec,
            "samples_per_s": xb.shape[0] / sec,
            "tokens_per_s": tokens / sec if tokens else None,
            "peak_bytes": peak,
            "activations": saved["activations"],
            "weight_copies": saved["weight_copies"],
            "state_bytes": state,
            "footprint": state + saved["activations"] + saved["weight_copies"],
            "flops_per_step": flops,
            "mfu": flops / sec / peak_flops_ if flops and peak_flops_ else None,
        }
        del net, optimizer, step, xb, yb
        gc.collect()
        # Memory this measurement left allocated (0 unless something still holds its tensors).
        out["leaked_bytes"] = torch.cuda.memory_allocated(device) - before if cuda else 0
        return out
    finally:
        set_tf32(False)
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()


def attention_flops(batch: int, seq_len: int, d_model: int, *, layers: int) -> float:
    """FLOPs of attention's two matmuls (QK^T and AV), forward and backward, without a mask.

    ``torch.utils.flop_counter`` counts CUDA's fused ``scaled_dot_product_attention`` kernels
    this way even when they are causal (a causal mask does half of it); it does not count the
    CPU's fused kernel at all.
    """
    return 3 * layers * 2 * (2 * batch * seq_len * seq_len * d_model)
