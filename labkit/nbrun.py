"""Executing a notebook headless with nbclient: what ``gpu-check`` and ``exercises`` share."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def environ(env: Mapping[str, str] | None) -> Iterator[None]:
    """Set ``env`` in ``os.environ`` (a kernel started inside inherits it), then restore it."""
    env = dict(env or {})
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def error_line(exc: BaseException) -> str:
    """One line for a failed notebook run: the cell's exception name and message."""
    ename = getattr(exc, "ename", type(exc).__name__)
    evalue = getattr(exc, "evalue", str(exc))
    return f"{ename}: {evalue}".strip().splitlines()[0][:500]


def client(nb, path: str | Path, timeout: int):
    """An ``nbclient.NotebookClient`` for ``nb``, run in the notebook's own folder."""
    import nbclient

    return nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(Path(path).parent)}},
    )


def run_all_twice(path: str | Path, timeout: int = 600) -> None:
    """Run All without the teardown cell, then Run All again in the same kernel.

    What a learner does who re-runs a lesson without restarting: the second pass must start its
    session or cluster over the first one's. Raises ``nbclient`` errors as a failed cell does.
    """
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    runner = client(nb, path, timeout)
    with runner.setup_kernel():
        for i in code[:-1]:
            runner.execute_cell(nb.cells[i], i)
        for i in code:
            runner.execute_cell(nb.cells[i], i)
