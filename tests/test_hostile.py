"""labkit.hostile: the bad bodies reach the server as sent, and the check reads the answers."""

import warnings
from typing import Annotated

import pytest
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from labkit import hostile

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

Id = Annotated[int, Field(strict=True, ge=0, lt=100)]


class Ids(BaseModel):
    ids: list[Id] = Field(min_length=1, max_length=64)


def client(with_handler: bool) -> TestClient:
    api = FastAPI()
    if with_handler:

        @api.exception_handler(RequestValidationError)
        async def reject(request: Request, exc: RequestValidationError) -> JSONResponse:
            detail = [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()]
            return JSONResponse(status_code=422, content={"detail": detail})

    @api.post("/ids")
    def ids(request: Ids) -> dict:
        return {"n": len(request.ids)}

    return TestClient(api, raise_server_exceptions=False)


def test_the_requests_cover_the_body_and_each_field():
    made = hostile.requests({"ids": [0, 1, 2], "k": 5}, large_bytes=1000)
    labels = [h.label for h in made]
    for label in (
        "an empty body",
        "null",
        "truncated JSON",
        "invalid UTF-8",
        "deep nesting",
        "ids: [NaN, ...]",
        "ids: [9223372036854775808, ...]",
        "k: True",
        "k: '7'",
        "k: -Infinity",
        "k missing",
        "ids: a list 100x too long",
    ):
        assert label in labels, label
    nan = next(h for h in made if h.label == "k: NaN")
    assert nan.body == b'{"ids": [0, 1, 2], "k": NaN}' and nan.field == "k"
    assert next(h for h in made if h.label == "invalid UTF-8").body.endswith(
        b', "note": "\xff\xfe"}'
    )


def test_the_default_validation_error_answers_500_to_nan_and_a_handler_fixes_it():
    made = hostile.requests({"ids": [0, 1, 2]})
    plain, fixed = client(False), client(True)
    broken = [
        h.label
        for h in made
        if hostile.answer_problems(
            h, (a := plain.post("/ids", content=h.body, headers=h.headers)).status_code, a.text
        )
    ]
    assert broken == ["ids: [NaN, ...]", "ids: [Infinity, ...]", "ids: [-Infinity, ...]"]
    for h in made:
        answer = fixed.post("/ids", content=h.body, headers=h.headers)
        assert not hostile.answer_problems(h, answer.status_code, answer.text)
    assert fixed.post("/ids", json={"ids": [0, 1, 2]}).status_code == 200


@pytest.mark.parametrize(
    "status, text, problem",
    [(200, "ok", "not a 4xx"), (500, "boom", "not a 4xx"), (422, "nothing", "without naming")],
)
def test_an_answer_that_is_not_a_named_4xx_is_a_problem(status, text, problem):
    h = hostile.Hostile("k: NaN", b"{}", hostile.JSON, "k")
    (found,) = hostile.answer_problems(h, status, text)
    assert problem in found
    assert not hostile.answer_problems(h, 422, '{"detail": [{"loc": ["body", "k"]}]}')
    assert hostile.answer_problems(h, 422, '{"detail": [{"loc": ["body", "ok"]}]}')  # not 'k'
    assert not hostile.answer_problems(h, 404, '{"detail": "unknown k 7"}')
    assert hostile.answer_problems(h, 404, '{"detail": "Unknown key"}')
