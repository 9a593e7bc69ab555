import numpy as np
import pytest
import torch

from labkit import data, loaders


@pytest.fixture
def shards(tmp_path):
    x, y = data.classification(1000, n_features=5, seed=0)
    return data.write_shards({"x": x, "y": y}, tmp_path / "shards", 4), x, y


@pytest.mark.parametrize("workers", [0, 2])
def test_parquet_loader_yields_every_row_once(shards, workers):
    folder, x, y = shards
    batches = list(loaders.parquet_loader(folder, batch_size=64, num_workers=workers))
    xs = torch.cat([b[0] for b in batches]).numpy()
    ys = torch.cat([b[1] for b in batches]).numpy()
    assert xs.dtype == np.float32 and xs.shape == (1000, 5)
    order = np.lexsort(xs.T)
    assert np.array_equal(xs[order], x[np.lexsort(x.T)])
    assert sorted(ys.tolist()) == sorted(y.tolist())
    assert max(len(b[0]) for b in batches) <= 64


def test_tensor_loader_batches_by_slices():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10)
    batches = list(loaders.tensor_loader(x, y, batch_size=4))
    assert [len(b[1]) for b in batches] == [4, 4, 2]
    assert torch.equal(batches[0][1], torch.tensor([0, 1, 2, 3]))
    shuffled = torch.cat([b[1] for b in loaders.tensor_loader(x, y, 4, shuffle=True, seed=1)])
    assert sorted(shuffled.tolist()) == list(range(10)) and shuffled.tolist() != list(range(10))


def test_bad_input(tmp_path):
    with pytest.raises(FileNotFoundError):
        loaders.ParquetBatches(tmp_path, 8)
    (tmp_path / "a.parquet").write_bytes(b"")
    with pytest.raises(ValueError):
        loaders.ParquetBatches(tmp_path, 0)
