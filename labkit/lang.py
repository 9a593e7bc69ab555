"""The workbook's language: ``LABKIT_LANG`` (``en`` or ``zh``), never the system's ``LANG``.

What code prints in a learner's language lives in the repository's ``zh/`` beside the lessons'
Chinese (``labkit/tools/zh.py`` keeps it in step): here, the catalog of verdict sentences
(``zh/verdicts.md``) that :func:`labkit.measure.verdict` prints in Chinese when it translates
the English template the lesson passed. Nothing here imports Ray.

Used in: no lesson or lab report.
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


#: The session's description (``Session.describe``): its labels in Chinese.
SESSION_LABELS = {
    "mode": "模式",
    "CPUs": "CPU",
    "GPUs": "GPU",
    "object store": "对象存储",
    "custom": "自定义资源",
    "dashboard": "仪表盘",
    "token": "令牌",
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
    return _pairs(_PHRASE, path or verdicts_path())


def _pairs(entry: re.Pattern, path: Path) -> dict[str, str]:
    """``{English: Chinese}`` from the entries ``entry`` matches in ``path`` (none: no file)."""
    if not path.exists():
        return {}
    return {m.group(1): m.group(2) for m in entry.finditer(path.read_text("utf-8"))}


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


_SAY = re.compile(r"^<!-- say -->\nen: (.*)\nzh: (.*)$", re.M)


def messages_path() -> Path:
    """``zh/messages.md``: the Chinese of what the kit's own code prints (beside the verdicts)."""
    return verdicts_path().with_name("messages.md")


def read_messages(path: Path | None = None) -> dict[str, str]:
    """``{English template: Chinese}`` from ``zh/messages.md``'s ``<!-- say -->`` entries."""
    return _pairs(_SAY, path or messages_path())


@functools.cache
def _messages() -> dict[str, str]:
    return read_messages()


def say(english: str, **fields: object) -> str:
    """A line (or part of one) the kit prints, in the learner's language: ``english``, a
    template over ``fields``, or its Chinese from ``zh/messages.md`` when the language is
    Chinese (a template with no Chinese, or a stale one, prints in English). Never raises
    over the language: an error message must not fail."""
    template = _messages().get(english, english) if is_zh() else english
    return template.format(**fields)


#: The fixed map for lesson 12's summary table: its headers, status words and verdict words.
#: Each row's entry, verdict and fix come from ``zh/ledger.md`` (:func:`read_ledger`).
LEDGER_WORDS = {
    "| # | post | entry | status | verdict | fix on Ray 2.60 | taught in |": (
        "| # | 博文 | 条目 | 状态 | 结论 | 在 Ray 2.60 上的改法 | 在哪一课讲 |"
    ),
    "works": "能用",
    "deprecated": "已弃用",
    "raises": "报错",
    "does not exist": "不存在",
    "misleading": "误导",
    "not checkable": "无法检验",
    "reproduced": "已复现",
    "contradicted": "被推翻",
    "measured at another scale": "在另一规模下测得",
    "mechanism shown": "展示了机制",
    "by the run": "由本次运行决定",
    "within noise": "在噪声之内",
    "here": "本课",
}


_LEDGER_ENTRY = re.compile(r"<!-- entry (\d+) -->\n((?:(?:entry|verdict|fix)-(?:en|zh):.*\n?)*)")


def ledger_path() -> Path:
    """``zh/ledger.md``: the Chinese of each row of lesson 12's table."""
    return verdicts_path().with_name("ledger.md")


def read_ledger(path: Path | None = None) -> dict[int, dict[str, tuple[str, str]]]:
    """``{entry number: {field: (English, Chinese)}}`` from ``zh/ledger.md``: the Chinese of
    each row of lesson 12's table (its entry, the verdict's text after its word, and the fix),
    beside the English it translates, so a changed English row shows as stale."""
    path = path or ledger_path()
    if not path.exists():
        return {}
    out: dict[int, dict[str, tuple[str, str]]] = {}
    for m in _LEDGER_ENTRY.finditer(path.read_text(encoding="utf-8")):
        said: dict[str, dict[str, str]] = {}
        for line in m.group(2).splitlines():
            key, _, text = line.partition(":")
            text = text.strip()
            field, _, which = key.partition("-")
            said.setdefault(field, {})[which] = text
        out[int(m.group(1))] = {f: (v.get("en", ""), v.get("zh", "")) for f, v in said.items()}
    return out
