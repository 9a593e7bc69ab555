import pytest
import torch

from labkit import train as lt

CFG = {
    "features": 8,
    "hidden": 16,
    "classes": 3,
    "depth": 1,
    "epochs": 2,
    "batch_size": 32,
    "lr": 1e-2,
    "seed": 0,
    "threads": 1,
}


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
    opt = torch.optim.Adam(model.parameters(), lr=CFG["lr"])
    stats = [
        lt.run_epoch(model, opt, lt.tensor_batches(x, y, 32), torch.device("cpu")) for _ in range(5)
    ]
    assert all(s["rows"] == 256 for s in stats)
    assert stats[-1]["loss"] < stats[0]["loss"]
    assert 0 <= stats[0]["first_batch_wait_s"] <= stats[0]["data_wait_s"] <= stats[0]["seconds"]
    dict_batches = [{"x": bx, "y": by} for bx, by in lt.tensor_batches(x, y, 64)]
    assert lt.run_epoch(model, opt, dict_batches, torch.device("cpu"))["rows"] == 256


def test_steady_rows_per_s_skips_warmup():
    epochs = [{"rows_per_s": 1.0}, {"rows_per_s": 10.0}, {"rows_per_s": 12.0}, {"rows_per_s": 11.0}]
    assert lt.steady_rows_per_s(epochs) == 11.0
    assert lt.steady_rows_per_s(epochs[:1]) == 1.0
    with pytest.raises(ValueError):
        lt.steady_rows_per_s([])


def test_plain_ddp_trains_in_two_processes():
    x, y = _data()
    per_rank = lt.plain_ddp(CFG, x, y, world=2)
    assert len(per_rank) == 2 and all(len(r) == CFG["epochs"] for r in per_rank)
    assert all(e["rows"] == 128 for r in per_rank for e in r)
    # DDP keeps replicas in sync: both ranks see the same loss trend
    assert all(r[-1]["loss"] < r[0]["loss"] for r in per_rank)
