"""Hostile request bodies for a JSON API, built from one good body, and a check of the answers.

Lessons 09 and 11 post these to their running Serve apps: a bad request must get a 4xx that
names what was wrong, never a 500, and the app must keep serving. The bodies are raw bytes, so
JSON that Python's ``json`` module would refuse to write (``NaN``, ``Infinity``, truncated text,
invalid UTF-8) reaches the server as a client could send it. Everything goes to loopback, a
bounded number of requests, one at a time.

Used in: 09, 11, 13.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

JSON = {"content-type": "application/json"}
#: JSON text a strict encoder never writes, but a client can send.
NON_FINITE = ("NaN", "Infinity", "-Infinity")
#: Where an int is expected: out of range, too big for 64 bits, and other types.
NOT_AN_ID = (-1, 10**9, 2**63, 2**64, 1.5, True, "7", None)


@dataclass(frozen=True)
class Hostile:
    """One bad request: what it is, the raw body, its headers, and the field it breaks."""

    label: str
    body: bytes
    headers: dict[str, str]
    field: str | None = None  # None: the body as a whole is wrong


def _raw(obj: Any, holes: dict[str, str] | None = None) -> bytes:
    """JSON for ``obj``, with each placeholder string in ``holes`` swapped for raw JSON text."""
    text = json.dumps(obj)
    for mark, raw in (holes or {}).items():
        text = text.replace(json.dumps(mark), raw)
    return text.encode()


def _values(good: Any) -> list[tuple[str, Any, dict[str, str]]]:
    """(label, bad value, raw holes) for one field, from the type of its good value."""
    if isinstance(good, list) and good:
        out = [("an empty list", [], {})]
        for label, bad, holes in _values(good[0]):
            out.append((f"[{label}, ...]", [bad] + good[1:], holes))
        out.append(("a list 100x too long", good * 100, {}))
        return out
    wrong = [("an object", {"a": 1})] + ([] if isinstance(good, str) else [("a string", "x")])
    out = [(f"{t} instead", v, {}) for t, v in wrong]
    out += [(raw, f"@{raw}@", {f"@{raw}@": raw}) for raw in NON_FINITE]
    if isinstance(good, bool) or not isinstance(good, int | float):
        return out
    if isinstance(good, int):
        out += [(repr(v), v, {}) for v in NOT_AN_ID]
    else:
        out += [("1e400 (inf as a float)", "@1e400@", {"@1e400@": "1e400"}), ("true", True, {})]
    return out


def requests(
    good: dict[str, Any],
    *,
    optional: set[str] | frozenset[str] = frozenset(),
    large_bytes: int = 2**20,
) -> list[Hostile]:
    """Hostile requests for an endpoint whose good body is ``good`` (a JSON object).

    The body as a whole: empty, ``null``, a list or a string instead of an object, truncated
    JSON, a wrong content type, invalid UTF-8, deep nesting, a body of ``large_bytes``. Each
    field: the values :func:`_values` derives from its good value (NaN and +-Infinity, ints of
    2^63 and more, negative and out-of-range ids, floats, bools and strings where ints are
    expected, empty and over-long lists), and the field missing (unless it is ``optional``).
    """
    text = json.dumps(good).encode()
    out = [
        Hostile("an empty body", b"", JSON),
        Hostile("null", b"null", JSON),
        Hostile("a list instead of an object", json.dumps([good]).encode(), JSON),
        Hostile("a string instead of an object", b'"hello"', JSON),
        Hostile("truncated JSON", text[: len(text) // 2], JSON),
        Hostile("a wrong content type", text, {"content-type": "text/plain"}),
        Hostile("invalid UTF-8", text[:-1] + b', "note": "\xff\xfe"}', JSON),  # JSON but the bytes
        Hostile("deep nesting", b"[" * 100_000 + b"]" * 100_000, JSON),
        Hostile("a large body", b'{"pad": "' + b"x" * large_bytes + b'"}', JSON),
    ]
    for field, value in good.items():
        rest = {k: v for k, v in good.items() if k != field}
        if field not in optional:
            out.append(Hostile(f"{field} missing", json.dumps(rest).encode(), JSON, field))
        for label, bad, holes in _values(value):
            body = _raw({**good, field: bad}, holes)
            out.append(Hostile(f"{field}: {label}", body, JSON, field))
    return out


def names_field(text: str, field: str) -> bool:
    """Whether an error answer names ``field``: in a validation error's ``loc`` (FastAPI's
    ``{"detail": [{"loc": ["body", field, ...]}]}``), or as a word of a plain ``detail``."""
    try:
        detail = json.loads(text).get("detail")
    except (ValueError, AttributeError):
        return False
    if isinstance(detail, list):
        return any(field in (d.get("loc") or []) for d in detail if isinstance(d, dict))
    return isinstance(detail, str) and field in re.findall(r"\w+", detail)


def answer_problems(hostile: Hostile, status: int, text: str) -> list[str]:
    """What is wrong with the server's answer to ``hostile`` ([] when it is a 4xx that names the
    field it broke)."""
    if not 400 <= status < 500:
        return [f"{hostile.label}: {status}, not a 4xx"]
    if hostile.field and not names_field(text, hostile.field):
        return [f"{hostile.label}: {status} without naming {hostile.field!r}: {text[:120]}"]
    return []


def post_all(url: str, hostile: list[Hostile], *, timeout: float = 30.0) -> list[dict]:
    """Post each request once, in order, to ``url`` (loopback); one row per answer."""
    import httpx

    rows = []
    with httpx.Client(timeout=timeout) as client:
        for h in hostile:
            answer = client.post(url, content=h.body, headers=h.headers)
            rows.append(
                {
                    "request": h.label,
                    "status": answer.status_code,
                    "problems": answer_problems(h, answer.status_code, answer.text),
                    "answer": answer.text[:100],
                }
            )
    return rows


async def reject_invalid(request: Any, exc: Any) -> Any:
    """Lesson 09's validation-error handler, for the capstone: a 422 that names each field and
    rule but leaves the input out (FastAPI's default handler echoes it, and a NaN in it cannot be
    written as JSON: the client gets a 500). Register it with
    ``app.add_exception_handler(RequestValidationError, reject_invalid)``."""
    from fastapi.responses import JSONResponse

    detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    return JSONResponse(status_code=422, content={"detail": detail})
