"""Checks in lesson cells: a blog snippet that must still fail, and a bounded wait.

**expect_error**: cells that show a blog snippet failing, and fail themselves when it stops failing.

A lesson that corrects a blog runs the blog's code and shows the real error. If a future Ray
makes that code work, the lesson must break rather than go on telling learners it fails::

    with labkit.expect_error("ray.train.Trainer", ImportError):
        from ray.train import Trainer

prints ``ray.train.Trainer -> ImportError: cannot import name 'Trainer' ...`` and raises
``AssertionError`` if nothing was raised. A ``Warning`` subclass expects that warning instead.
Notebook cells that use it carry the tag ``blog-error``.

**wait_until**: poll for something Ray does in the background, with a timeout.

Used in: 01-13, lab_objects.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: Every blog error caught so far in this process (labels, in order): lesson 12's ledger reads it.
CAUGHT: list[str] = []


def first_line(text: str, limit: int = 160) -> str:
    """The first line of ``text``, shortened at a word boundary (never mid-word) to ``limit``."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + " …"


def error_line(exc: BaseException, limit: int = 500) -> str:
    """One line for an error: its name and the first line of its message. A failed notebook
    cell's error (nbclient's, papermill's) carries the cell's exception apart, as ``ename`` and
    ``evalue``; any other exception gives its own first non-empty line."""
    ename = getattr(exc, "ename", None)
    text = str(getattr(exc, "evalue", "") or "") if ename else str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return f"{ename or type(exc).__name__}: {lines[0] if lines else ''}"[:limit]


def _names(expected: type | tuple[type, ...]) -> str:
    kinds = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(k.__name__ for k in kinds)


@contextmanager
def expect_error(
    label: str, expected: type | tuple[type, ...], *, limit: int = 160
) -> Iterator[None]:
    """Expect the block to raise ``expected`` (or issue it, for a ``Warning``); print it.

    Prints ``label -> Type: first line of the message``. Nothing raised is an ``AssertionError``
    that says the blog's code now works; any other exception propagates unchanged.
    """
    kinds = expected if isinstance(expected, tuple) else (expected,)
    if all(issubclass(k, Warning) for k in kinds):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        hits = [w for w in caught if issubclass(w.category, kinds)]
        if not hits:
            raise AssertionError(
                f"{label}: expected {_names(expected)}, but none was issued: the blog's code "
                "no longer warns; update the lesson"
            )
        print(f"{label} -> {hits[0].category.__name__}: {first_line(str(hits[0].message), limit)}")
        CAUGHT.append(label)
        return
    try:
        yield
    except kinds as err:
        # A Ray task or actor error (RayTaskError) wraps the remote exception in ``cause``;
        # its own text starts with a header of PIDs and IDs: show the cause's message.
        cause = getattr(err, "cause", None)
        message = str(cause) if isinstance(cause, BaseException) else str(err)
        print(f"{label} -> {type(err).__name__}: {first_line(message, limit)}")
        CAUGHT.append(label)
        return
    raise AssertionError(
        f"{label}: expected {_names(expected)}, but nothing was raised: the blog's code works "
        "now; update the lesson"
    )


def wait_until(predicate: Callable[[], Any], timeout: float, *, interval: float = 0.1) -> Any:
    """Call ``predicate()`` every ``interval`` seconds until it returns something truthy or
    ``timeout`` seconds pass; return its last value (falsy on a timeout: assert on it).

    The one poll loop of the kit, for what Ray does in the background (freeing an object,
    declaring a node dead, placing a task)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)
