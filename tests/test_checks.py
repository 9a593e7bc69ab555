import warnings

import pytest

from labkit import checks, expect_error


def test_expected_error_is_printed_and_swallowed(capsys):
    with expect_error("int('x')", ValueError):
        int("x")
    assert capsys.readouterr().out.startswith("int('x') -> ValueError: invalid literal")


def test_nothing_raised_fails_the_cell():
    with pytest.raises(AssertionError, match="nothing was raised: the blog's code works now"):
        with expect_error("int('1')", ValueError):
            int("1")


def test_another_error_propagates():
    with pytest.raises(KeyError):
        with expect_error("lookup", (ValueError, TypeError)):
            {}["missing"]


def test_warnings(capsys):
    with expect_error("old api", FutureWarning):
        warnings.warn("`old()` is deprecated", FutureWarning, stacklevel=1)
    assert "old api -> FutureWarning: `old()` is deprecated" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="none was issued"):
        with expect_error("new api", FutureWarning):
            pass


def test_first_line_never_cuts_a_word():
    text = "alpha beta gamma delta\nsecond line"
    assert checks.first_line(text, 100) == "alpha beta gamma delta"
    assert checks.first_line(text, 13) == "alpha beta …"
    assert checks.first_line("", 10) == ""


def test_wait_until_returns_the_first_truthy_value_or_the_last_falsy_one():
    calls = []

    def third_time():
        calls.append(1)
        return len(calls) if len(calls) >= 3 else None

    assert checks.wait_until(third_time, timeout=5, interval=0.01) == 3
    assert checks.wait_until(lambda: [], timeout=0.05, interval=0.01) == []


def test_expect_error_shows_the_cause_of_a_wrapped_error(capsys):
    class Wrapped(RuntimeError):
        def __init__(self, cause):
            super().__init__("ray::Actor.method() (pid=1, ip=10.0.0.1, actor_id=abc)\n...")
            self.cause = cause

    with expect_error("remote", RuntimeError):
        raise Wrapped(KeyError("no __call__"))
    assert capsys.readouterr().out.strip() == "remote -> Wrapped: 'no __call__'"
