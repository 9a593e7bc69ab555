"""The training loops of lesson 07: one epoch function shared by plain PyTorch, plain DDP and Ray Train.

The same :func:`run_epoch` runs everywhere, so differences in speed come from how the loop is
hosted (one process, ``torch.distributed`` processes, Ray Train workers), not from the loop.
Timing is taken inside the loop, apart from start-up, and split into time spent waiting for
data and time spent computing.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from labkit.models import MLP


def build_model(cfg: dict[str, Any]) -> nn.Module:
    """The lesson's model: an MLP sized by ``cfg`` (features, hidden, classes, depth)."""
    torch.manual_seed(cfg.get("seed", 0))
    return MLP(cfg["features"], cfg["hidden"], cfg["classes"], depth=cfg.get("depth", 2))


def run_epoch(
    model: nn.Module, optimizer: torch.optim.Optimizer, batches: Iterable, device: torch.device
) -> dict[str, float]:
    """One pass of training: rows, seconds, seconds waiting for data (and for the first batch), loss."""
    model.train()
    rows, loss_sum, wait_s, first_wait_s = 0, 0.0, 0.0, None
    start = time.perf_counter()
    it = iter(batches)
    while True:
        t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            break
        waited = time.perf_counter() - t0
        wait_s += waited
        if first_wait_s is None:
            first_wait_s = waited  # includes starting the epoch's data pipeline
        if isinstance(batch, dict):
            x, y = batch["x"], batch["y"]
        else:
            x, y = batch
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        rows += len(y)
        loss_sum += loss.item() * len(y)
    seconds = time.perf_counter() - start
    return {
        "rows": rows,
        "seconds": seconds,
        "data_wait_s": wait_s,
        "first_batch_wait_s": first_wait_s or 0.0,
        "loss": loss_sum / max(rows, 1),
        "rows_per_s": rows / seconds if seconds > 0 else 0.0,
    }


def tensor_batches(
    x: torch.Tensor, y: torch.Tensor, batch_size: int, rank: int = 0, world: int = 1
):
    """This rank's share of in-memory tensors, in batches (contiguous shards, like DDP's sampler)."""
    n = len(x) // world
    xs, ys = x[rank * n : (rank + 1) * n], y[rank * n : (rank + 1) * n]
    for i in range(0, n, batch_size):
        yield xs[i : i + batch_size], ys[i : i + batch_size]


# ---------------------------------------------------------------- Ray Train


@dataclass(frozen=True)
class WorkerPlan:
    """How many Ray Train workers to ask for, with what, and why (for the lesson to print)."""

    workers: int
    use_gpu: bool
    cpus_per_worker: float
    reason: str

    def scaling_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``ray.train.ScalingConfig``."""
        return {
            "num_workers": self.workers,
            "use_gpu": self.use_gpu,
            "resources_per_worker": {"CPU": self.cpus_per_worker},
        }


def plan_workers(
    resources: Mapping[str, float], *, use_gpu: bool, cpu_workers: int = 2
) -> WorkerPlan:
    """Size a DDP job from the resources the Ray cluster really has (``ray.cluster_resources()``).

    On GPUs, DDP over NCCL needs one GPU per rank: one worker per whole GPU, never more, so a
    1-GPU machine gets 1 worker instead of a worker group that waits for a GPU that is not there.
    On CPUs, ``cpu_workers`` workers share the cores and leave one core for Ray Data, which feeds
    them (on 2 cores: half a CPU each).
    """
    cpus = float(resources.get("CPU", 0))
    if use_gpu:
        gpus = math.floor(float(resources.get("GPU", 0)) + 1e-9)
        if gpus < 1:
            raise RuntimeError(
                "DEVICE=cuda, but this Ray cluster has no whole GPU "
                f"(ray.cluster_resources() shows GPU={resources.get('GPU', 0)}); "
                "run with DEVICE=auto or on a cluster with GPUs"
            )
        cpus_per_worker = max(0.5, min(1.0, (cpus - 1) / gpus)) if cpus > 1 else cpus / gpus
        reason = (
            f"{gpus} GPU{'s' if gpus > 1 else ''}: DDP over NCCL needs one GPU per rank, "
            f"so {gpus} worker{'s' if gpus > 1 else ''}"
        )
        if gpus == 1:
            reason += (
                "; a 2-worker run would need a second GPU (ScalingConfig(num_workers=2, "
                "use_gpu=True) on this machine waits for it, then fails as infeasible)"
            )
        return WorkerPlan(gpus, True, cpus_per_worker, reason)
    if cpu_workers < 1:
        raise ValueError(f"cpu_workers must be >= 1, got {cpu_workers}")
    if cpus <= 0:
        raise RuntimeError("this Ray cluster has no CPUs to train on")
    workers = min(cpu_workers, max(1, math.floor(cpus)))
    cpus_per_worker = min(1.0, (cpus - 1) / workers) if cpus > 1 else cpus / (workers + 1)
    reason = (
        f"{cpus:g} CPUs: {workers} worker{'s' if workers > 1 else ''} with "
        f"{cpus_per_worker:g} CPU each, leaving {cpus - workers * cpus_per_worker:g} for Ray Data"
    )
    return WorkerPlan(workers, False, cpus_per_worker, reason)


def ray_train_loop(config: dict[str, Any]) -> dict[str, Any]:
    """Ray Train's ``train_loop_per_worker``: DDP via prepare_model, data via get_dataset_shard.

    Reports every epoch with a checkpoint; resumes from the latest checkpoint after a failure.
    ``fail_at_epoch`` makes rank ``fail_rank`` die (the process exits) the first time it reaches
    that epoch, to drill fault tolerance.
    """
    import ray.train
    import ray.train.torch

    torch.set_num_threads(config.get("threads", 1))
    ctx = ray.train.get_context()
    rank = ctx.get_world_rank()
    device = ray.train.torch.get_device()
    model = ray.train.torch.prepare_model(
        build_model(config),
        parallel_strategy_kwargs={"bucket_cap_mb": config.get("bucket_cap_mb", 25)},
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=config.get("lr", 1e-3))
    start_epoch, resumed_from = 0, None
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d:
            state = torch.load(os.path.join(d, "state.pt"), map_location=device, weights_only=True)
        model.module.load_state_dict(state["model"]) if hasattr(
            model, "module"
        ) else model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = resumed_from = state["epoch"] + 1
    shard = ray.train.get_dataset_shard("train")
    epochs = []
    for epoch in range(start_epoch, config["epochs"]):
        batches = shard.iter_torch_batches(batch_size=config["batch_size"], device=device)
        if (
            config.get("fail_at_epoch") == epoch
            and resumed_from is None
            and rank == config.get("fail_rank", 0)
        ):
            batches = _crash_halfway(batches, config)
        stats = run_epoch(model, optimizer, batches, device)
        stats.update(epoch=epoch, rank=rank, world=ctx.get_world_size(), resumed_from=resumed_from)
        epochs.append(stats)
        with tempfile.TemporaryDirectory() as d:
            ckpt = None
            if rank == 0:
                raw = model.module if hasattr(model, "module") else model
                torch.save(
                    {
                        "model": raw.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "epoch": epoch,
                    },
                    os.path.join(d, "state.pt"),
                )
                ckpt = ray.train.Checkpoint.from_directory(d)
            ray.train.report(
                {"epoch": epoch, "loss": stats["loss"], "rows_per_s": stats["rows_per_s"]},
                checkpoint=ckpt,
            )
    return {"rank": rank, "epochs": epochs, "resumed_from": resumed_from}


def _crash_halfway(batches: Iterable, config: dict[str, Any]):
    """Yield about half an epoch of batches, then kill this process (a crash, not an exception).

    Halfway, not at the epoch's start: Train V2's controller collects reports asynchronously,
    so a crash right after ``ray.train.report`` can beat the checkpoint's registration.
    """
    half = max(1, config.get("rows_per_worker", 0) // config["batch_size"] // 2)
    for i, batch in enumerate(batches):
        if i == half:
            os._exit(1)
        yield batch


# ---------------------------------------------------------------- plain torch.distributed


def _ddp_worker(rank: int, world: int, port: int, config: dict[str, Any], x, y, out) -> None:
    import torch.distributed as dist

    torch.set_num_threads(config.get("threads", 1))
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        model = nn.parallel.DistributedDataParallel(
            build_model(config), bucket_cap_mb=config.get("bucket_cap_mb", 25)
        )
        optimizer = torch.optim.Adam(model.parameters(), lr=config.get("lr", 1e-3))
        device = torch.device("cpu")
        stats = [
            run_epoch(
                model, optimizer, tensor_batches(x, y, config["batch_size"], rank, world), device
            )
            for _ in range(config["epochs"])
        ]
        out.put((rank, stats))
    finally:
        dist.destroy_process_group()


def plain_ddp(
    config: dict[str, Any], x: torch.Tensor, y: torch.Tensor, world: int
) -> list[list[dict]]:
    """Train with plain ``torch.distributed`` DDP (gloo, CPU) in ``world`` processes, no Ray.

    Returns each rank's per-epoch stats. Processes are spawned and joined here.
    """
    import torch.multiprocessing as mp

    from labkit.session import free_port

    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    port = free_port()
    procs = [
        ctx.Process(target=_ddp_worker, args=(r, world, port, config, x, y, out))
        for r in range(world)
    ]
    for proc in procs:
        proc.start()
    results = dict(out.get() for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
        if proc.exitcode != 0:
            raise RuntimeError(f"a DDP process exited with code {proc.exitcode}")
    return [results[r] for r in range(world)]


def steady_rows_per_s(epoch_stats: list[dict[str, float]], skip_first: bool = True) -> float:
    """Median training throughput over epochs, skipping the first (warm-up) when there are more."""
    use = epoch_stats[1:] if skip_first and len(epoch_stats) > 1 else epoch_stats
    if not use:
        raise ValueError("no epochs to measure")
    rates = sorted(e["rows_per_s"] for e in use)
    return rates[len(rates) // 2]


def wait_fractions(epoch_stats: list[dict[str, float]]) -> dict[str, float]:
    """Shares of the loop's time spent waiting for data, from :func:`run_epoch`'s stats.

    ``all``: every wait over the loop's time (on a GPU, the time it sat idle); ``first_batch``:
    the waits for each epoch's first batch (the pipeline starting), over the same time;
    ``steady``: the other waits over the time after each first batch.
    """
    total = sum(e["seconds"] for e in epoch_stats)
    waits = sum(e["data_wait_s"] for e in epoch_stats)
    first = sum(e["first_batch_wait_s"] for e in epoch_stats)
    if total <= 0:
        raise ValueError("no epoch time to divide")
    return {
        "all": waits / total,
        "first_batch": first / total,
        "steady": (waits - first) / (total - first),
    }


def epoch_time_parts(epoch_stats: list[dict[str, float]]) -> list[dict[str, float]]:
    """Each epoch's seconds split into first-batch wait, later waits and compute (for a chart)."""
    return [
        {
            "first-batch wait": e["first_batch_wait_s"],
            "later waits": e["data_wait_s"] - e["first_batch_wait_s"],
            "compute": e["seconds"] - e["data_wait_s"],
        }
        for e in epoch_stats
    ]
