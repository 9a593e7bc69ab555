"""The parameter contract's vocabulary: the valid sizes and devices, its error, its validator.

A leaf module (it imports nothing from the kit), so that :mod:`labkit.params` and
:mod:`labkit.device` both use it without importing each other in a loop.

Used in: no lesson or lab report.
"""

from __future__ import annotations

from typing import Any

SIZES = ("smoke", "small", "full")
DEVICES = ("auto", "cpu", "cuda")
ENV_PREFIX = "LABKIT_"


class ParameterError(ValueError):
    """A notebook parameter has a value the kit cannot use; the message names the valid ones."""


def choice(name: str, value: Any, valid: tuple[str, ...], *, source: str = "the call") -> str:
    """``value`` as one of ``valid`` (case-insensitive), or a ParameterError naming the valid ones.

    The one validator of SIZE and DEVICE, for :func:`labkit.setup` and
    :func:`labkit.device.choose`.
    """
    from labkit import lang

    text = str(value).strip().lower()
    if text not in valid and lang.is_zh():
        raise ParameterError(
            f"{name}={value!r}（来自 {source}）无效；可选值：{'、'.join(valid)}。"
            f"用 papermill 的 `-p {name} {valid[0]}` 或 `{ENV_PREFIX}{name}={valid[0]}` 来设置。"
        )
    if text not in valid:
        raise ParameterError(
            f"{name}={value!r} (from {source}) is not valid; choose one of: {', '.join(valid)}. "
            f"Set it with papermill `-p {name} {valid[0]}` or `{ENV_PREFIX}{name}={valid[0]}`."
        )
    return text
