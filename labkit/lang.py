"""The workbook's language: ``LABKIT_LANG`` (``en`` or ``zh``), never the system's ``LANG``.

What code prints in a learner's language lives in the repository's ``zh/`` beside the lessons'
Chinese (``labkit/tools/zh.py`` keeps it in step): here, the catalog of verdict sentences
(``zh/verdicts.md``) that :func:`labkit.measure.verdict` prints in Chinese when it translates
the English template the lesson passed. Nothing here imports Ray.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

LANGS = ("en", "zh")
_ENTRY = re.compile(r"^<!-- verdict (\S+) -->\nen: (.*)\nzh: (.*)$", re.M)
_PHRASE = re.compile(r"^<!-- phrase -->\nen: (.*)\nzh: (.*)$", re.M)


def language(value: str | None = None) -> str:
    """The language asked for: ``value``, else ``LABKIT_LANG``, else English."""
    lang = (value or os.environ.get("LABKIT_LANG") or "en").strip().lower()
    if lang not in LANGS:
        raise ValueError(f"LABKIT_LANG={lang!r} is not valid; choose one of: {', '.join(LANGS)}.")
    return lang


def is_zh() -> bool:
    """Whether messages should be Chinese; never raises (an error message must not fail)."""
    return (os.environ.get("LABKIT_LANG") or "").strip().lower() == "zh"


#: ``labkit doctor``'s labels in Chinese (the ``--json`` keys stay English).
DOCTOR_LABELS = {
    "python": "Python",
    "platform": "平台",
    "labkit root": "labkit 根目录",
    "ray": "Ray",
    "torch": "torch",
    "torch cuda build": "torch 的 CUDA 版本",
    "cuda available": "CUDA 可用",
    "torch gpus": "torch 看到的 GPU",
    "nvidia-smi gpus": "nvidia-smi 看到的 GPU",
    "cpu cores": "CPU 核数",
    "memory": "内存",
    "/dev/shm": "/dev/shm",
    "ray auth token": "Ray 认证令牌",
    "RAY_ADDRESS": "RAY_ADDRESS",
    "RAY_AUTH_MODE": "RAY_AUTH_MODE",
    "ports busy on 127.0.0.1": "127.0.0.1 上被占用的端口",
    "kit processes alive": "套件启动且仍在运行的进程",
    "slow imports": "拖慢导入的包",
    "browser": "浏览器",
    "browser driver": "浏览器驱动",
}


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: a CJK character takes two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def verdicts_path() -> Path:
    """``zh/verdicts.md`` beside the package (``LABKIT_ROOT`` as :func:`labkit.params.repo_root`
    reads it; this module imports no other, so that the parameters can speak Chinese)."""
    root = os.environ.get("LABKIT_ROOT")
    base = Path(root).expanduser().resolve() if root else Path(__file__).resolve().parents[1]
    return base / "zh" / "verdicts.md"


def read_verdicts(path: Path | None = None) -> dict[str, tuple[str, str]]:
    """``{"<metric>:yes": (English template, Chinese template)}`` from ``zh/verdicts.md``."""
    path = path or verdicts_path()
    if not path.exists():
        return {}
    return {m.group(1): (m.group(2), m.group(3)) for m in _ENTRY.finditer(path.read_text("utf-8"))}


@functools.cache
def _verdicts() -> dict[str, tuple[str, str]]:
    return read_verdicts()


def read_phrases(path: Path | None = None) -> dict[str, str]:
    """``{English phrase: Chinese}`` from ``zh/verdicts.md``'s ``<!-- phrase -->`` entries: the
    words a lesson splices into a verdict's sentence (``hint=``, ``why=``, ``where=``)."""
    path = path or verdicts_path()
    if not path.exists():
        return {}
    return {m.group(1): m.group(2) for m in _PHRASE.finditer(path.read_text("utf-8"))}


@functools.cache
def _phrases() -> dict[str, str]:
    return read_phrases()


def phrase(value: object) -> object:
    """A value spliced into a verdict: its Chinese when the language is Chinese and the catalog
    has this exact English phrase; anything else as it is."""
    if not isinstance(value, str) or not value.strip() or language() != "zh":
        return value
    return _phrases().get(value, value)


def verdict_template(key: str, english: str) -> str:
    """The template to print for a verdict: the Chinese one when the language is Chinese and
    the catalog translates exactly this English (a stale entry falls back to English)."""
    if language() != "zh":
        return english
    en, zh = _verdicts().get(key, ("", ""))
    return zh if en == english else english
