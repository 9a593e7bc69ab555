"""Executing a notebook headless, one way for the whole kit: :func:`execute` runs a notebook
from its first cell to its last (``labkit run``, ``labkit bench``'s sweeps, ``gpu-check``), and
:func:`client` is the kernel that ``make test``'s lesson runner drives cell by cell
(:mod:`labkit.tools.nbrun`). Both interrupt a hung cell and fail it as ``CellTimeoutError``
(papermill's own report of the interrupted cell is raised as :class:`CellTimeoutError` too).

:func:`execute` uses papermill where it is installed (the papermill metadata in the output, its
``-p`` semantics), else nbclient with the same parameter cell papermill would inject: a GPU box
reached without a package index carries only nbclient.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The engines :func:`execute` may use, in the order it prefers them.
ENGINES = ("papermill", "nbclient")


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


def cell_timeout() -> int:
    """Seconds a cell may run (``LABKIT_CELL_TIMEOUT``, 600): a guard against hangs, a few times
    a lesson's budget, not a speed test."""
    return int(os.environ.get("LABKIT_CELL_TIMEOUT") or 600)


#: The error name a cell interrupted past its time limit gets (nbclient's reply, as set here).
TIMEOUT_ENAME = "CellTimeoutError"


def _on_timeout(timeout: int | None) -> dict[str, Any]:
    """nbclient's settings that make a hung cell an error: interrupted (so the teardown can still
    run) and failed as ``CellTimeoutError``; without ``error_on_timeout`` nbclient would go on
    to the next cell as if it had passed. None or 0: no limit, nothing to set."""
    if not timeout:
        return {}
    return {
        "interrupt_on_timeout": True,
        "error_on_timeout": {
            "ename": TIMEOUT_ENAME,
            "evalue": f"the cell ran past {timeout} s and was interrupted",
            "traceback": [],
        },
    }


def client(
    nb,
    path: str | Path,
    timeout: int | None,
    *,
    kernel: str = "python3",
    max_output: int | None = None,
    **options: Any,
):
    """An ``nbclient.NotebookClient`` for ``nb``, run in the folder of ``path``. With
    ``max_output``, each cell keeps at most that many bytes of output (errors always), then one
    line saying the rest was cut (``labkit grade``: a learner's answer that prints forever).
    ``options`` go to the client (``allow_errors=True``, ``shutdown_kernel="immediate"``)."""
    import nbclient

    kind = nbclient.NotebookClient if max_output is None else _capped(max_output)
    return kind(
        nb,
        timeout=timeout,
        kernel_name=kernel,
        resources={"metadata": {"path": str(Path(path).parent)}},
        **_on_timeout(timeout),
        **options,
    )


def cut_note(max_output: int) -> str:
    """The line a capped client (:func:`client`) leaves where it cut a cell's output."""
    return f"[labkit: output cut past {max_output:,} bytes]\n"


def _capped(max_output: int):
    """A ``NotebookClient`` class that keeps at most ``max_output`` bytes of a cell's output."""
    import json

    import nbclient
    import nbformat

    note = cut_note(max_output)

    class Capped(nbclient.NotebookClient):
        def output(self, outs, msg, display_id, cell_index):  # nbclient's own signature
            if msg["msg_type"] == "error":
                return super().output(outs, msg, display_id, cell_index)
            if any(o.get("output_type") == "stream" and o.get("text") == note for o in outs):
                return None
            used = sum(len(json.dumps(o)) for o in outs)
            content = msg.get("content", {})
            if used + len(json.dumps(content)) <= max_output:
                return super().output(outs, msg, display_id, cell_index)
            if msg["msg_type"] == "stream":  # keep the first part of what it printed
                text = content.get("text", "")[: max(0, max_output - used)]
                cut = {**msg, "content": {**content, "text": text}}
                super().output(outs, cut, None, cell_index)
            outs.append(nbformat.v4.new_output("stream", name="stderr", text=note))
            return None

    return Capped


class CellTimeoutError(RuntimeError):
    """A cell ran past :func:`execute`'s ``timeout`` and was interrupted (as nbclient says it)."""


def engine() -> str:
    """The engine :func:`execute` uses here: papermill where it imports, else nbclient."""
    try:
        import papermill  # noqa: F401
    except ImportError:
        return "nbclient"
    return "papermill"


def inject(nb, parameters: Mapping[str, Any]) -> None:
    """What papermill does to ``nb``: a cell tagged ``injected-parameters`` after the cell
    tagged ``parameters`` sets each value (one injection: an earlier one is replaced)."""
    import nbformat

    nb.cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    injected = nbformat.v4.new_code_cell(
        "\n".join(f"{k} = {v!r}" for k, v in parameters.items()),
        metadata={"tags": ["injected-parameters"]},
    )
    nb.cells.insert(at + 1, injected)


def execute(
    notebook: str | Path,
    output: str | Path,
    *,
    parameters: Mapping[str, Any] | None = None,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: int | None = None,
    kernel: str = "python3",
    log_output: bool = False,
    using: str | None = None,
) -> None:
    """Run ``notebook`` top to bottom in a fresh kernel and write the executed copy to
    ``output``, whether or not a cell failed; raise the first cell's error after writing.

    ``parameters`` are injected after the ``parameters`` cell (papermill's ``-p``); the kernel
    starts in ``cwd`` (the notebook's folder by default) with ``env`` added to its environment;
    a cell past ``timeout`` seconds (:func:`cell_timeout` when None; 0 for no limit) is
    interrupted and fails. ``using`` names the engine (:data:`ENGINES`; :func:`engine` picks by
    default). ``log_output`` streams the cells' output to the log (papermill only)."""
    notebook, output = Path(notebook), Path(output)
    cwd = Path(cwd) if cwd else notebook.parent
    timeout = cell_timeout() if timeout is None else timeout
    using = using or engine()
    if using not in ENGINES:
        raise ValueError(f"using={using!r}: the engines are {', '.join(ENGINES)}")
    output.parent.mkdir(parents=True, exist_ok=True)
    with environ(env):
        if using == "papermill":
            import papermill as pm

            try:
                pm.execute_notebook(
                    str(notebook),
                    str(output),
                    parameters=dict(parameters or {}),
                    cwd=str(cwd),
                    kernel_name=kernel,
                    progress_bar=False,
                    log_output=log_output,
                    execution_timeout=timeout or None,
                    **_on_timeout(timeout),
                )
            except pm.PapermillExecutionError as exc:
                if timeout and exc.ename == "KeyboardInterrupt":  # papermill interrupted it
                    said = f"cell {exc.exec_count} ran past {timeout} s and was interrupted"
                    raise CellTimeoutError(said) from exc
                raise
            return
        import nbformat

        nb = nbformat.read(notebook, as_version=4)
        if parameters:
            inject(nb, parameters)
        try:
            client(nb, cwd / notebook.name, timeout or None, kernel=kernel).execute()
        finally:
            nbformat.write(nb, str(output))
