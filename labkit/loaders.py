"""PyTorch ``DataLoader`` baselines for the data lessons, built the fast way.

A fair baseline is a fast one: batches are formed from whole Arrow record batches or tensor
slices (``batch_size=None``), never by collating one sample at a time.

Used in: 06, lab_data.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch
from torch.utils.data import (
    DataLoader,
    IterableDataset,
)

from labkit.data import column_to_numpy


class ParquetBatches(IterableDataset):
    """``(x, y)`` tensor batches read from parquet shards; DataLoader workers split the files."""

    def __init__(
        self, folder: str | os.PathLike[str], batch_size: int, *, x: str = "x", y: str = "y"
    ):
        self.files = sorted(str(f) for f in Path(folder).glob("*.parquet"))
        if not self.files:
            raise FileNotFoundError(f"no parquet files in {folder}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size, self.x, self.y = batch_size, x, y

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        files = self.files[info.id :: info.num_workers] if info else self.files
        for path in files:
            reader = pq.ParquetFile(path)
            for batch in reader.iter_batches(batch_size=self.batch_size, columns=[self.x, self.y]):
                xs = column_to_numpy(batch.column(self.x))
                ys = column_to_numpy(batch.column(self.y))
                with warnings.catch_warnings():
                    # Arrow's buffers are read-only and the loop only reads them: no copy
                    # (the DataLoader's workers copy into shared memory anyway)
                    warnings.filterwarnings("ignore", "The given NumPy array is not writable")
                    pair = torch.from_numpy(np.ascontiguousarray(xs)), torch.from_numpy(ys)
                yield pair


def rows_in(batch) -> int:
    """Rows in a batch from either reader of lesson 06's race: Ray Data yields a dict of
    tensors, a ``DataLoader`` an ``(x, y)`` pair."""
    return len(batch["y"]) if isinstance(batch, dict) else len(batch[1])


def ray_torch_pass(path: str | os.PathLike[str], batch_size: int):
    """A reader for :func:`labkit.measure.ingest`: each call starts a fresh pass of
    ``ray.data.read_parquet(path).iter_torch_batches(batch_size=...)``, as lesson 06 reads."""
    import ray

    return lambda: ray.data.read_parquet(str(path)).iter_torch_batches(batch_size=batch_size)


def parquet_loader(folder: str | os.PathLike[str], batch_size: int, num_workers: int) -> DataLoader:
    """A DataLoader reading parquet shards with ``num_workers`` worker processes."""
    return DataLoader(
        ParquetBatches(folder, batch_size),
        batch_size=None,
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
    )


class SliceBatches(IterableDataset):
    """In-memory ``(x, y)`` batches as tensor slices (or slices of one random permutation)."""

    def __init__(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        batch_size: int,
        *,
        shuffle: bool = False,
        seed: int = 0,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.x, self.y, self.batch_size, self.shuffle, self.seed = x, y, batch_size, shuffle, seed
        self.epoch = 0

    def __iter__(self):
        n = len(self.x)
        order = None
        if self.shuffle:
            gen = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(n, generator=gen)
            self.epoch += 1
        for i in range(0, n, self.batch_size):
            if order is None:
                yield self.x[i : i + self.batch_size], self.y[i : i + self.batch_size]
            else:
                idx = order[i : i + self.batch_size]
                yield self.x[idx], self.y[idx]


def tensor_loader(
    x: np.ndarray, y: np.ndarray, batch_size: int, *, shuffle: bool = False, seed: int = 0
) -> DataLoader:
    """In-memory batches by whole slices: the fast way to feed a model from tensors in RAM."""
    xt, yt = torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(np.ascontiguousarray(y))
    return DataLoader(SliceBatches(xt, yt, batch_size, shuffle=shuffle, seed=seed), batch_size=None)
