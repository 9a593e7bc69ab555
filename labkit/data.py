"""Seeded, deterministic data for the lessons, cached as parquet under ``data/cache/``.

Nothing is downloaded: every data set is generated from a seed, or comes from a package that
ships it (scikit-learn's digits). Same name, size and seed give the same bytes on disk.
With ``RAY_ADDRESS`` set the cache must be somewhere every node can read: set ``LABKIT_DATA_DIR``
to a shared path.

Used in: 06-09, 11, 12, lab_data, lab_train.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from labkit.params import resolve_path

# Rows per SIZE for each generator; the notebooks may still pass explicit sizes.


def data_dir() -> Path:
    """The data cache folder (``LABKIT_DATA_DIR`` or ``data/cache`` in the repository)."""
    return resolve_path(os.environ.get("LABKIT_DATA_DIR", "data/cache"))


def _check(n: int, name: str = "n") -> None:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"{name} must be a positive integer, got {n!r}")


def classification(
    n: int, n_features: int = 32, n_classes: int = 4, *, seed: int = 0, separation: float = 0.35
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian clusters, one per class: features float32 (n, n_features), labels int64 (n,).

    ``separation`` scales the class centres against unit noise: the default makes a task a small
    model learns well but not perfectly (so accuracy means something).
    """
    _check(n)
    _check(n_features, "n_features")
    if n_classes < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes}")
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, separation, size=(n_classes, n_features))
    y = rng.integers(0, n_classes, size=n)
    x = centers[y] + rng.normal(0.0, 1.0, size=(n, n_features))
    return x.astype(np.float32), y.astype(np.int64)


def images(
    n: int, size: int = 32, channels: int = 3, *, n_classes: int = 10, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic images (n, channels, size, size) float32 whose class sets a stripe pattern."""
    _check(n)
    _check(size, "size")
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n)
    grid = np.arange(size, dtype=np.float32)
    yy, xx = np.meshgrid(grid, grid, indexing="ij")
    angle = np.pi * np.arange(n_classes) / n_classes
    freq = 2 * np.pi * (1 + np.arange(n_classes) % 4) / size
    patterns = np.sin(
        freq[:, None, None]
        * (np.cos(angle)[:, None, None] * xx + np.sin(angle)[:, None, None] * yy)
    ).astype(np.float32)
    x = patterns[y][:, None, :, :].repeat(channels, axis=1)
    x += rng.normal(0.0, 0.5, size=x.shape).astype(np.float32)
    return x.astype(np.float32), y.astype(np.int64)


def tokens(n_seqs: int, seq_len: int = 64, vocab: int = 256, *, seed: int = 0) -> np.ndarray:
    """Token sequences (n_seqs, seq_len) int64 from a seeded sparse Markov chain (learnable)."""
    _check(n_seqs, "n_seqs")
    _check(seq_len, "seq_len")
    _check(vocab, "vocab")
    rng = np.random.default_rng(seed)
    successors = rng.integers(0, vocab, size=(vocab, 4))  # each token has 4 likely successors
    out = np.empty((n_seqs, seq_len), dtype=np.int64)
    out[:, 0] = rng.integers(0, vocab, size=n_seqs)
    choice = rng.integers(0, 4, size=(n_seqs, seq_len))
    noise = rng.random(size=(n_seqs, seq_len)) < 0.1
    random_tok = rng.integers(0, vocab, size=(n_seqs, seq_len))
    for t in range(1, seq_len):
        nxt = successors[out[:, t - 1], choice[:, t]]
        out[:, t] = np.where(noise[:, t], random_tok[:, t], nxt)
    return out


def digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled handwritten digits (1,797 8x8 images), scaled to [0, 1] float32."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return (bunch.data / 16.0).astype(np.float32), bunch.target.astype(np.int64)


def to_table(columns: dict[str, np.ndarray]) -> pa.Table:
    """Arrow table from numpy columns; a 2-D column becomes a fixed-size list column."""
    arrays = {}
    for name, col in columns.items():
        col = np.ascontiguousarray(col)
        if col.ndim == 1:
            arrays[name] = pa.array(col)
        else:
            flat = pa.array(col.reshape(len(col), -1).ravel())
            arrays[name] = pa.FixedSizeListArray.from_arrays(flat, int(np.prod(col.shape[1:])))
    return pa.table(arrays)


def write_parquet(table: pa.Table, path: str | os.PathLike[str]) -> Path:
    """Write a table with fixed settings (so the same data gives the same bytes), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(
        table, tmp, compression="snappy", row_group_size=64 * 1024, write_statistics=False
    )
    tmp.replace(path)
    return path


def cached(name: str, build: Callable[[], dict[str, np.ndarray]], refresh: bool = False) -> Path:
    """Return ``data_dir()/<name>.parquet``, building it with ``build()`` the first time."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"cache name {name!r} must be a plain file name")
    path = data_dir() / f"{name}.parquet"
    if refresh or not path.is_file():
        write_parquet(to_table(build()), path)
    return path


def column_to_numpy(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A numpy view of an Arrow column; a fixed-size list column becomes a 2-D array."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_fixed_size_list(column.type):
        width = column.type.list_size
        return column.flatten().to_numpy(zero_copy_only=False).reshape(-1, width)
    return column.to_numpy(zero_copy_only=False)


def tensor_column_copy(folder: str | os.PathLike[str]) -> Path:
    """Lesson 06's tensor-column copy of the parquet shards in ``folder``: the same rows written
    by Ray Data through :func:`numpy_columns`, so that ``x`` is stored as Ray's tensor column, in
    ``<folder>-tensor`` beside them. Written once, into a temporary folder renamed when complete
    (a reader never sees half of it), then reused."""
    import ray

    folder = Path(folder)
    tensor = folder.with_name(folder.name + "-tensor")
    if not tensor.is_dir():
        tmp = folder.with_name(f"{tensor.name}.tmp-{os.getpid()}")
        ray.data.read_parquet(str(folder)).map_batches(
            numpy_columns, batch_format="pyarrow"
        ).write_parquet(str(tmp))
        tmp.rename(tensor)
    return tensor


def numpy_columns(table: pa.Table) -> dict[str, np.ndarray]:
    """Every column as numpy (a fixed-size list as 2-D): returned from ``map_batches``, a 2-D
    array becomes Ray Data's tensor column, which reads back as one array per batch."""
    return {name: column_to_numpy(table.column(name)) for name in table.column_names}


def read_xy(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """Read a cached ``x``/``y`` parquet file (or folder of shards) back into numpy arrays."""
    table = pq.read_table(path)
    return column_to_numpy(table.column("x")), column_to_numpy(table.column("y"))


def write_shards(
    columns: dict[str, np.ndarray], folder: str | os.PathLike[str], n_files: int
) -> Path:
    """Write columns as ``n_files`` parquet shards (part-00000.parquet, ...) in ``folder``."""
    _check(n_files, "n_files")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    n = len(next(iter(columns.values())))
    edges = [n * k // n_files for k in range(n_files + 1)]
    for k, (a, b) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
        part = {name: col[a:b] for name, col in columns.items()}
        write_parquet(to_table(part), folder / f"part-{k:05d}.parquet")
    return folder


def classification_shards(
    n: int, n_files: int = 8, n_features: int = 32, *, n_classes: int = 4, seed: int = 0
) -> Path:
    """A folder of ``n_files`` parquet shards of the classification set, cached under data/."""
    _check(n)
    folder = data_dir() / f"classification-n{n}-f{n_features}-c{n_classes}-s{seed}-{n_files}files"
    if not (folder / f"part-{n_files - 1:05d}.parquet").is_file():
        x, y = classification(n, n_features, n_classes, seed=seed)
        write_shards({"x": x, "y": y}, folder, n_files)
    return folder
