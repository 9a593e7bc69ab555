"""Lesson 07's plumbing: one epoch function shared by plain PyTorch, plain DDP and Ray Train.

The same :func:`run_epoch` runs everywhere, so differences in speed come from how the loop is
hosted (one process, ``torch.distributed`` processes, Ray Train workers), not from the loop.
Timing is taken inside the loop, apart from start-up, and split into time spent waiting for
data and time spent computing.

Used in: 06-08, 11, 13, lab_data, lab_train.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from labkit import cpuuse, lang
from labkit.models import MLP
from labkit.params import seed_everything

STATE_FILE = "state.pt"


@dataclass(frozen=True)
class TrainConfig:
    """The lesson's training job. Every field but the fault drill's must be given, and an unknown
    key fails: ``TrainConfig(**config)`` is how a worker reads ``train_loop_config``, so a typo
    cannot silently change a drill. ``asdict(cfg)`` is what ``TorchTrainer`` is handed.
    """

    n_features: int
    hidden: int
    n_classes: int
    depth: int
    epochs: int
    batch_size: int
    lr: float
    seed: int
    threads: int
    bucket_cap_mb: int
    # The fault drill: rank ``fail_rank`` kills its process after ``fail_after_batches`` batches
    # of epoch ``fail_at_epoch``, on the first attempt only.
    fail_at_epoch: int | None = None
    fail_rank: int = 0
    fail_after_batches: int = 1
    # Keep this worker's shard as tensors once the first epoch has read it (a shard that fits in
    # the worker's memory): later epochs replay those batches and Ray Data does no more work.
    keep_shard: bool = False

    def with_(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes`` (checked like the constructor)."""
        return TrainConfig(**{**asdict(self), **changes})


def build_model(cfg: TrainConfig) -> nn.Module:
    """The lesson's model: an MLP sized by ``cfg``, initialised from ``cfg.seed``."""
    seed_everything(cfg.seed)
    return MLP(cfg.n_features, cfg.hidden, cfg.n_classes, depth=cfg.depth)


def _unwrapped(model: nn.Module) -> nn.Module:
    """The model inside a DDP wrapper (``prepare_model`` wraps it when there are 2+ workers)."""
    return model.module if hasattr(model, "module") else model


def save_state(directory: str, model: nn.Module, optimizer: torch.optim.Optimizer, *, epoch: int):
    """Write model, optimizer and epoch to ``directory/state.pt`` (a checkpoint's contents)."""
    torch.save(
        {
            "model": _unwrapped(model).state_dict(),
            "optimizer": optimizer.state_dict(),
            "epoch": epoch,
        },
        os.path.join(directory, STATE_FILE),
    )


def load_state(
    directory: str,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    device: torch.device | str = "cpu",
) -> int:
    """Load what :func:`save_state` wrote into ``model`` (and ``optimizer``); return its epoch."""
    state = torch.load(os.path.join(directory, STATE_FILE), map_location=device, weights_only=True)
    _unwrapped(model).load_state_dict(state["model"])
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    return int(state["epoch"])


def crash_after(batches: Iterable, n_batches: int, grace_s: float | None = None):
    """Fault injection: yield ``n_batches`` batches, then kill this process (a crash, not an
    exception, so Ray Train sees a dead worker).

    Train V2's controller collects each ``ray.train.report`` when it next polls the workers (every
    ``RAY_TRAIN_HEALTH_CHECK_INTERVAL_S``, 2 s by default), so a crash soon after a report can
    beat the checkpoint's registration, and the new group would start from scratch and crash
    again: at 2 cores, half an epoch of a small job sometimes did. Before it crashes, the worker
    therefore waits ``grace_s`` (default: five poll intervals), so that the last report is in.
    """
    if grace_s is None:
        grace_s = 5 * float(os.environ.get("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "2"))
    for i, batch in enumerate(batches):
        if i == n_batches:
            time.sleep(grace_s)
            os._exit(1)
        yield batch


def run_epoch(
    model: nn.Module, optimizer: torch.optim.Optimizer, batches: Iterable, *, device: torch.device
) -> dict[str, float]:
    """One pass of training: rows, seconds, seconds waiting for data (and the first batch), loss."""
    model.train()
    rows, loss_sum, wait_s, first_wait_s = 0, 0.0, 0.0, None
    cpu_before, idle_before = thread_cpu_s(), cpuuse.machine_idle_s()
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
    cpu_after, idle_after = thread_cpu_s(), cpuuse.machine_idle_s()
    return {
        "rows": rows,
        "seconds": seconds,
        "data_wait_s": wait_s,
        "first_batch_wait_s": first_wait_s or 0.0,
        "loss": loss_sum / max(rows, 1),
        "rows_per_s": rows / seconds if seconds > 0 else 0.0,
        # CPU seconds this process used during the epoch: the loop's own thread, and its others
        # (a data pipeline's prefetch threads, gloo's, ...)
        "loop_thread_cpu_s": cpu_after["loop"] - cpu_before["loop"],
        "other_threads_cpu_s": cpu_after["other"] - cpu_before["other"],
        # CPU seconds that no process on the machine used (all CPUs together)
        "machine_idle_s": idle_after - idle_before,
        "machine_cpus": os.cpu_count() or 1,
    }


def thread_cpu_s() -> dict[str, float]:
    """CPU seconds (user + system) of this thread and of the process's other threads, so far.

    From the kernel's per-thread and per-process clocks (``time.thread_time``,
    ``time.process_time``): nanosecond resolution, and threads that have ended still count in
    ``other`` (a data iterator's prefetch threads end with its epoch)."""
    loop = time.thread_time()
    return {"loop": loop, "other": time.process_time() - loop}


def keep(batches: Iterable, kept: list) -> Iterator:
    """Yield ``batches``, appending each to ``kept``: read a shard once, replay it later."""
    for batch in batches:
        kept.append(batch)
        yield batch


def tensor_batches(
    x: torch.Tensor, y: torch.Tensor, batch_size: int, *, rank: int = 0, world: int = 1
):
    """This rank's share of in-memory tensors, in batches (contiguous shards, as DDP's sampler)."""
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
    resources: Mapping[str, float],
    *,
    use_gpu: bool,
    cpu_workers: int = 2,
    gpus_are_logical: bool = False,
) -> WorkerPlan:
    """Size a DDP job from the resources the Ray cluster really has (``ray.cluster_resources()``).

    On GPUs, DDP over NCCL needs one GPU per rank: one worker per whole GPU, never more, so a
    1-GPU machine gets 1 worker instead of a worker group that waits for a GPU that is not there.
    On CPUs, ``cpu_workers`` workers share the cores and leave one core for Ray Data, which feeds
    them (on 2 cores: half a CPU each). With ``gpus_are_logical`` (a local session's logical GPUs,
    ``Session.gpus_are_logical``; ``LABKIT_LOGICAL_GPUS``) and ``use_gpu`` False: one CPU worker
    per GPU, the shape of a GPU box, computed on the CPU.
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
        reason = lang.say(
            "{n} GPU{s}: DDP over NCCL needs one GPU per rank, so {n} worker{s}",
            n=gpus,
            s="s" * (gpus > 1),
        )
        if gpus == 1:
            reason += lang.say(
                "; a 2-worker run would need a second GPU (ScalingConfig(num_workers=2, "
                "use_gpu=True) on this machine waits for it, then fails as infeasible)"
            )
        return WorkerPlan(gpus, True, cpus_per_worker, reason)
    if cpu_workers < 1:
        raise ValueError(f"cpu_workers must be >= 1, got {cpu_workers}")
    if cpus <= 0:
        raise RuntimeError("this Ray cluster has no CPUs to train on")
    gpus = math.floor(float(resources.get("GPU", 0)) + 1e-9) if gpus_are_logical else 0
    if gpus >= 1:  # a GPU box's shape, computed on the CPU
        cpu_workers = gpus
    workers = min(cpu_workers, max(1, math.floor(cpus)))
    cpus_per_worker = min(1.0, (cpus - 1) / workers) if cpus > 1 else cpus / (workers + 1)
    reason = lang.say(
        "{cpus} CPUs: {n} worker{s} with {each} CPU each, leaving {left} for Ray Data",
        cpus=f"{cpus:g}",
        n=workers,
        s="s" * (workers > 1),
        each=f"{cpus_per_worker:g}",
        left=f"{cpus - workers * cpus_per_worker:g}",
    )
    if gpus >= 1:
        reason += lang.say(
            "; the session's {n} GPU{are} logical: one worker per GPU{allow}, as on a machine "
            "with real ones, computing on the CPU over gloo (use_gpu=True would make Ray Train "
            "pick a CUDA device)",
            n=gpus,
            are="s are" if gpus > 1 else " is",
            allow=lang.say(" the CPUs allow") if workers < gpus else "",
        )
    return WorkerPlan(workers, False, cpus_per_worker, reason)


# ---------------------------------------------------------------- plain torch.distributed


def _ddp_worker(rank: int, world: int, port: int, cfg: TrainConfig, x, y, out) -> None:
    import sys
    import traceback

    import torch.distributed as dist

    code = 1
    try:
        torch.set_num_threads(cfg.threads)
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
        model = nn.parallel.DistributedDataParallel(
            build_model(cfg), bucket_cap_mb=cfg.bucket_cap_mb
        )
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        device = torch.device("cpu")
        stats = [
            run_epoch(
                model,
                optimizer,
                tensor_batches(x, y, cfg.batch_size, rank=rank, world=world),
                device=device,
            )
            for _ in range(cfg.epochs)
        ]
        out.put((rank, stats))
        dist.barrier()  # every rank is done before any tears gloo down
        dist.destroy_process_group()
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # Skip the interpreter's teardown: gloo's threads can abort the process there
        # ("terminate called without an active exception", exit code -6) after the work is done.
        os._exit(code)


def plain_ddp(
    cfg: TrainConfig, x: torch.Tensor, y: torch.Tensor, *, world: int
) -> list[list[dict]]:
    """Train with plain ``torch.distributed`` DDP (gloo, CPU) in ``world`` processes, no Ray.

    Returns each rank's per-epoch stats. Processes are spawned and joined here.
    """
    import torch.multiprocessing as mp

    from labkit.runtime.net import free_port

    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    port = free_port()
    procs = [
        ctx.Process(target=_ddp_worker, args=(r, world, port, cfg, x, y, out)) for r in range(world)
    ]
    for proc in procs:
        proc.start()
    results: dict[int, list[dict]] = {}
    try:
        while len(results) < world:
            if not out.empty():
                rank, stats = out.get()
                results[rank] = stats
                continue
            failed = [proc.exitcode for proc in procs if proc.exitcode not in (None, 0)]
            if failed:  # a rank died before reporting: do not wait for it forever
                raise RuntimeError(f"a DDP process exited with code {failed[0]}")
            time.sleep(0.05)
        for proc in procs:
            proc.join(timeout=60)
            if proc.exitcode != 0:
                raise RuntimeError(f"a DDP process exited with code {proc.exitcode}")
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    return [results[r] for r in range(world)]


def _steady_epochs(epoch_stats: list[dict[str, float]], skip_first: bool) -> list[dict[str, float]]:
    """The epochs to measure: all but the first (warm-up) when there are more."""
    use = epoch_stats[1:] if skip_first and len(epoch_stats) > 1 else epoch_stats
    if not use:
        raise ValueError("no epochs to measure")
    return use


def _median_rate(epoch_stats, skip_first: bool, rate: Callable[[dict[str, float]], float]) -> float:
    rates = sorted(rate(e) for e in _steady_epochs(epoch_stats, skip_first))
    return rates[len(rates) // 2]


def _steady_loop_rate(e: dict[str, float]) -> float:
    """One epoch's rows per second with its first-batch wait taken out."""
    return e["rows"] / (e["seconds"] - e["first_batch_wait_s"])


def steady_rows_per_s(epoch_stats: list[dict[str, float]], skip_first: bool = True) -> float:
    """Median training throughput over epochs, skipping the first (warm-up) when there are more."""
    return _median_rate(epoch_stats, skip_first, lambda e: e["rows_per_s"])


def steady_loop_rows_per_s(epoch_stats: list[dict[str, float]], skip_first: bool = True) -> float:
    """Median throughput of the loop with each epoch's first-batch wait taken out: the training
    itself, what plain DDP over tensors in memory and Ray Train over a shard can be compared on."""
    return _median_rate(epoch_stats, skip_first, _steady_loop_rate)


def steady_loop_rates(epoch_stats: list[dict[str, float]], skip_first: bool = True) -> list[float]:
    """Each measured epoch's rows per second with its first-batch wait taken out: the repeats a
    comparison of two setups reads (:func:`labkit.versus`)."""
    return [_steady_loop_rate(e) for e in _steady_epochs(epoch_stats, skip_first)]


def steady_loop_spread(epoch_stats: list[dict[str, float]], skip_first: bool = True) -> float:
    """How much the epochs' steady-loop rates varied: (fastest - slowest) / median. Two setups
    whose medians differ by less than this are within the run's own noise."""
    rates = sorted(_steady_loop_rate(e) for e in _steady_epochs(epoch_stats, skip_first))
    return (rates[-1] - rates[0]) / rates[len(rates) // 2]


def compute_rows_per_s(epoch_stats: list[dict[str, float]], skip_first: bool = True) -> float:
    """Median throughput of the loop's compute alone (every wait for data taken out): where two
    setups differ here, the difference is in the training steps, not in the data feed."""
    return _median_rate(
        epoch_stats, skip_first, lambda e: e["rows"] / (e["seconds"] - e["data_wait_s"])
    )


def cpu_shares(epoch_stats: list[dict[str, float]], skip_first: bool = True) -> dict[str, float]:
    """CPU use over the steady epochs, from :func:`run_epoch`'s stats: ``loop`` (the loop's
    thread) and ``other`` (the process's other threads) in CPU seconds per second of compute
    (``loop`` below 1: the thread waited, for a core or for something else), and
    ``machine_idle``: the share of the machine's CPU time that nobody used during the epochs."""
    use = _steady_epochs(epoch_stats, skip_first)
    compute_s = sum(e["seconds"] - e["data_wait_s"] for e in use)
    capacity = sum(e["seconds"] * e.get("machine_cpus", 1) for e in use)
    return {
        "loop": sum(e["loop_thread_cpu_s"] for e in use) / compute_s,
        "other": sum(e["other_threads_cpu_s"] for e in use) / compute_s,
        "machine_idle": sum(e.get("machine_idle_s", 0.0) for e in use) / capacity,
    }


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
