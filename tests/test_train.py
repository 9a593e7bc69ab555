from dataclasses import asdict

import pytest
import torch

from labkit import train as lt

CFG = lt.TrainConfig(
    n_features=8,
    hidden=16,
    n_classes=3,
    depth=1,
    epochs=2,
    batch_size=32,
    lr=1e-2,
    seed=0,
    threads=1,
    bucket_cap_mb=25,
)


def test_a_missing_or_misspelt_config_key_fails():
    fields = asdict(CFG)
    del fields["bucket_cap_mb"]
    with pytest.raises(TypeError, match="bucket_cap_mb"):
        lt.TrainConfig(**fields)
    with pytest.raises(TypeError, match="fail_at_epok"):
        CFG.with_(fail_at_epok=1)
    assert CFG.with_(fail_at_epoch=1).fail_at_epoch == 1 and CFG.fail_at_epoch is None


def test_state_round_trips_through_a_directory_and_unwraps_ddp(tmp_path):
    model = lt.build_model(CFG)
    opt = torch.optim.Adam(model.parameters(), lr=CFG.lr)
    x, y = _data()
    lt.run_epoch(model, opt, lt.tensor_batches(x, y, 32), device=torch.device("cpu"))

    class Wrapped(torch.nn.Module):  # what DDP looks like to save_state: the model is .module
        def __init__(self, module):
            super().__init__()
            self.module = module

    lt.save_state(str(tmp_path), Wrapped(model), opt, epoch=3)
    fresh = lt.build_model(CFG.with_(seed=1))
    fresh_opt = torch.optim.Adam(fresh.parameters(), lr=CFG.lr)
    assert lt.load_state(str(tmp_path), fresh, fresh_opt) == 3
    assert all(
        torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values())
    )
    assert fresh_opt.state_dict()["state"]


def test_crash_after_kills_the_process_mid_epoch():
    import multiprocessing as mp

    def consume():
        for _ in lt.crash_after(iter(range(10)), 3, grace_s=0):
            pass

    proc = mp.get_context("fork").Process(target=consume)
    proc.start()
    proc.join(timeout=30)
    assert proc.exitcode == 1


def test_crash_after_yields_every_batch_before_the_crash(monkeypatch):
    """The crash comes after the n-th batch and the grace wait (five report polls by default)."""
    waited = []
    monkeypatch.setenv("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")
    monkeypatch.setattr(lt.time, "sleep", waited.append)
    monkeypatch.setattr(lt.os, "_exit", lambda code: (_ for _ in ()).throw(SystemExit(code)))
    seen = []
    with pytest.raises(SystemExit) as stop:
        for batch in lt.crash_after(iter(range(10)), 3):
            seen.append(batch)
    assert seen == [0, 1, 2] and stop.value.code == 1 and waited == [pytest.approx(1.0)]


def _data(n=256):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long()


def test_tensor_batches_shard_by_rank():
    x, y = _data(100)
    r0 = list(lt.tensor_batches(x, y, 16, rank=0, world=2))
    r1 = list(lt.tensor_batches(x, y, 16, rank=1, world=2))
    assert sum(len(b[1]) for b in r0) == sum(len(b[1]) for b in r1) == 50
    assert torch.equal(r1[0][0][0], x[50])


def test_run_epoch_trains_and_times_itself():
    x, y = _data()
    model = lt.build_model(CFG)
    opt = torch.optim.Adam(model.parameters(), lr=CFG.lr)
    stats = [
        lt.run_epoch(model, opt, lt.tensor_batches(x, y, 32), device=torch.device("cpu"))
        for _ in range(5)
    ]
    assert all(s["rows"] == 256 for s in stats)
    assert stats[-1]["loss"] < stats[0]["loss"]
    assert 0 <= stats[0]["first_batch_wait_s"] <= stats[0]["data_wait_s"] <= stats[0]["seconds"]
    for s in stats:  # the machine's idle CPU time over the epoch, in tick-sized steps
        assert 0 <= s["machine_idle_s"] <= s["seconds"] * s["machine_cpus"] + 0.05
    dict_batches = [{"x": bx, "y": by} for bx, by in lt.tensor_batches(x, y, 64)]
    assert lt.run_epoch(model, opt, dict_batches, device=torch.device("cpu"))["rows"] == 256


def test_steady_rows_per_s_skips_warmup():
    epochs = [{"rows_per_s": 1.0}, {"rows_per_s": 10.0}, {"rows_per_s": 12.0}, {"rows_per_s": 11.0}]
    assert lt.steady_rows_per_s(epochs) == 11.0
    assert lt.steady_rows_per_s(epochs[:1]) == 1.0
    with pytest.raises(ValueError):
        lt.steady_rows_per_s([])


def test_plain_ddp_trains_in_two_processes():
    x, y = _data()
    per_rank = lt.plain_ddp(CFG, x, y, world=2)
    assert len(per_rank) == 2 and all(len(r) == CFG.epochs for r in per_rank)
    assert all(e["rows"] == 128 for r in per_rank for e in r)
    # DDP keeps replicas in sync: both ranks see the same loss trend
    assert all(r[-1]["loss"] < r[0]["loss"] for r in per_rank)


@pytest.mark.parametrize(
    ("resources", "use_gpu", "workers", "cpus_each"),
    [
        ({"CPU": 2.0}, False, 2, 0.5),  # the CI box: half a CPU each, a core left for Ray Data
        ({"CPU": 16.0}, False, 2, 1.0),
        ({"CPU": 1.0}, False, 1, 0.5),
        ({"CPU": 16.0, "GPU": 1.0}, True, 1, 1.0),  # one H200: one NCCL rank, not two
        ({"CPU": 32.0, "GPU": 8.0}, True, 8, 1.0),
        ({"CPU": 4.0, "GPU": 4.0}, True, 4, 0.75),
        ({"CPU": 8.0, "GPU": 1.5}, True, 1, 1.0),  # half a GPU cannot host a rank
    ],
)
def test_plan_workers_follows_the_cluster(resources, use_gpu, workers, cpus_each):
    plan = lt.plan_workers(resources, use_gpu=use_gpu, cpu_workers=2)
    assert (plan.workers, plan.use_gpu, plan.cpus_per_worker) == (workers, use_gpu, cpus_each)
    kwargs = plan.scaling_kwargs()
    assert kwargs["num_workers"] == workers and kwargs["resources_per_worker"] == {"CPU": cpus_each}
    assert plan.workers * plan.cpus_per_worker <= resources["CPU"]
    if use_gpu and workers == 1:
        assert "second GPU" in plan.reason


def test_plan_workers_without_a_whole_gpu_says_so():
    with pytest.raises(RuntimeError, match="no whole GPU"):
        lt.plan_workers({"CPU": 4.0, "GPU": 0.5}, use_gpu=True)
    with pytest.raises(RuntimeError, match="no whole GPU"):
        lt.plan_workers({"CPU": 4.0}, use_gpu=True)


@pytest.mark.ray
def test_plan_workers_with_logical_gpus_from_ray():
    """The GPU path as CI can run it: Ray's logical GPUs stand in for 1 and for 3 real ones."""
    import ray
    from ray.train import ScalingConfig

    ray.init(address="local", num_cpus=2, num_gpus=3, include_dashboard=False, log_to_driver=False)
    try:
        plan = lt.plan_workers(ray.cluster_resources(), use_gpu=True)
        assert plan.workers == 3 and "3 GPUs" in plan.reason
        scaling = ScalingConfig(**plan.scaling_kwargs())
        assert scaling.num_workers == 3 and scaling.use_gpu
        # Every worker's bundle fits at once: the worker group would start, not wait.
        assert scaling.total_resources["GPU"] <= ray.cluster_resources()["GPU"]
        assert scaling.total_resources["CPU"] <= ray.cluster_resources()["CPU"]
        one = lt.plan_workers({**ray.cluster_resources(), "GPU": 1.0}, use_gpu=True)
        assert one.workers == 1
        # No CUDA, one logical GPU: a 1-GPU box's shape (one worker), computed on the CPU.
        res = {**ray.cluster_resources(), "GPU": 1.0}
        logical = lt.plan_workers(res, use_gpu=False, gpus_are_logical=True)
        assert logical.workers == 1 and not logical.use_gpu and "logical" in logical.reason
        # Real GPUs and DEVICE=cpu: the CPU plan, as before.
        assert lt.plan_workers(res, use_gpu=False).workers == 2
        assert lt.plan_workers({"CPU": 2.0}, use_gpu=False, cpu_workers=2).workers == 2
    finally:
        ray.shutdown()


def test_wait_fractions_and_epoch_parts():
    epochs = [
        {"seconds": 4.0, "data_wait_s": 2.0, "first_batch_wait_s": 1.5},
        {"seconds": 6.0, "data_wait_s": 1.0, "first_batch_wait_s": 0.5},
    ]
    assert lt.wait_fractions(epochs) == pytest.approx(
        {"all": 0.3, "first_batch": 0.2, "steady": 1.0 / 8.0}
    )
    parts = lt.epoch_time_parts(epochs)
    assert parts[0] == {"first-batch wait": 1.5, "later waits": 0.5, "compute": 2.0}
    assert [sum(p.values()) for p in parts] == [4.0, 6.0]
    with pytest.raises(ValueError):
        lt.wait_fractions([{"seconds": 0.0, "data_wait_s": 0.0, "first_batch_wait_s": 0.0}])


def test_plain_ddp_fails_fast_when_a_rank_dies():
    x, y = _data()
    with pytest.raises(RuntimeError, match="exited with code"):
        lt.plain_ddp(CFG.with_(n_features=9), x, y, world=2)  # 9 features vs data's 8: a crash


def test_steady_loop_rows_per_s_takes_out_the_first_batch_wait():
    epochs = [
        {"rows": 100, "seconds": 10.0, "first_batch_wait_s": 9.0},  # warm-up epoch: skipped
        {"rows": 100, "seconds": 2.0, "first_batch_wait_s": 1.0},
        {"rows": 100, "seconds": 1.5, "first_batch_wait_s": 0.5},
        {"rows": 100, "seconds": 3.0, "first_batch_wait_s": 0.5},
    ]
    assert lt.steady_loop_rows_per_s(epochs) == 100.0  # median of 100, 100 and 40 rows/s
    assert lt.steady_loop_rows_per_s(epochs[:1]) == 100.0
    with pytest.raises(ValueError):
        lt.steady_loop_rows_per_s([])
    assert lt.TrainConfig(**{**asdict(CFG), "keep_shard": True}).keep_shard


def test_keep_yields_every_batch_and_keeps_it():
    kept = []
    batches = lt.keep(iter(range(5)), kept)
    assert next(batches) == 0 and kept == [0]  # kept as it is read, not after
    assert list(batches) == [1, 2, 3, 4]
    assert kept == [0, 1, 2, 3, 4]


def test_steady_loop_spread_is_range_over_median():
    epochs = [
        {"rows": 100, "seconds": 9.0, "first_batch_wait_s": 0.0},  # warm-up: skipped
        {"rows": 100, "seconds": 1.0, "first_batch_wait_s": 0.0},  # 100 rows/s
        {"rows": 100, "seconds": 1.0, "first_batch_wait_s": 0.5},  # 200 rows/s
        {"rows": 100, "seconds": 1.0, "first_batch_wait_s": 0.75},  # 400 rows/s
    ]
    assert lt.steady_loop_spread(epochs) == (400 - 100) / 200
    assert lt.steady_loop_spread(epochs[:2]) == 0.0
    assert lt.steady_loop_rates(epochs) == [100, 200, 400]  # the repeats behind the spread


def test_compute_rows_per_s_takes_out_every_wait():
    epochs = [
        {"rows": 100, "seconds": 9.0, "data_wait_s": 8.0},
        {"rows": 100, "seconds": 3.0, "data_wait_s": 2.0},
    ]
    assert lt.compute_rows_per_s(epochs) == 100.0
    assert lt.compute_rows_per_s(epochs, skip_first=False) == 100.0


def test_thread_cpu_s_splits_this_thread_from_the_others_ended_ones_included():
    import threading
    import time

    def burn():
        end = time.thread_time() + 0.2
        while time.thread_time() < end:
            pass

    before = lt.thread_cpu_s()
    t = threading.Thread(target=burn)
    t.start()
    t.join()  # the thread has ended before the second reading: its CPU still counts
    burn()
    after = lt.thread_cpu_s()
    assert after["loop"] - before["loop"] >= 0.19
    assert after["other"] - before["other"] >= 0.19


def test_cpu_shares_per_second_of_compute():
    epochs = [
        {"seconds": 9.0, "data_wait_s": 8.0, "loop_thread_cpu_s": 0.1, "other_threads_cpu_s": 0.0},
        {"seconds": 3.0, "data_wait_s": 1.0, "loop_thread_cpu_s": 1.0, "other_threads_cpu_s": 0.2},
        {"seconds": 2.0, "data_wait_s": 0.0, "loop_thread_cpu_s": 2.0, "other_threads_cpu_s": 0.2},
    ]
    assert lt.cpu_shares(epochs) == {"loop": 0.75, "other": 0.1, "machine_idle": 0.0}
    for e in epochs:
        e.update(machine_idle_s=e["seconds"], machine_cpus=2)  # half the machine idle
    assert lt.cpu_shares(epochs)["machine_idle"] == 0.5
    with pytest.raises(ValueError):
        lt.cpu_shares([])
