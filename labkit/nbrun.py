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
