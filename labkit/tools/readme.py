"""The READMEs' command blocks, read from the READMEs themselves so tests run what a person reads.

Every fenced ``bash`` block in ``README.md`` and ``README.zh.md`` carries, on the line just above
its fence, a marker that says what becomes of it::

    <!-- readme: set-up -->                                a test runs every command in it
    <!-- readme: set-up; skip make test: the suite itself, .ci/run's test stage -->
    <!-- readme: not run: needs a GPU -->                  no test runs it, and why

A named block is run by a test that asks for it by name (:func:`script`); ``tests/test_readme.py``
fails on a block without a marker, on a named block that no test names, and on a ``skip`` that
matches no command. A command is one line of the block (a trailing ``\\`` joins the next), its
comment dropped; ``<placeholders>`` are filled in by the test that runs it.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from labkit.params import repo_root

READMES = ("README.md", "README.zh.md")
COMMAND_LANGS = ("bash", "sh", "shell", "console")
MARKER = re.compile(r"^<!-- readme: (.+?) -->$")
FENCE = re.compile(r"^```(\S*)\s*$")
PLACEHOLDER = re.compile(r"<[A-Za-z][A-Za-z' -]*>")


@dataclass
class Block:
    """One fenced block: where it is, its marker's name (or why it is not run), its commands."""

    readme: str
    line: int  # the fence's line, 1-based
    lang: str
    text: str
    name: str | None = None
    not_run: str | None = None
    skips: dict[str, str] = field(default_factory=dict)  # a command's start -> why it is skipped

    @property
    def where(self) -> str:
        return f"{self.readme}:{self.line}"

    def commands(self) -> list[str]:
        """The block's commands: continuation lines joined, comments and blank lines dropped."""
        out, pending = [], ""
        for raw in self.text.splitlines():
            line = pending + raw.strip()
            if line.endswith("\\"):
                pending = line[:-1].rstrip() + " "
                continue
            pending = ""
            line = strip_comment(line)
            if line:
                out.append(line)
        return out


def strip_comment(line: str) -> str:
    """``line`` without its shell comment (a ``#`` that starts a word outside quotes)."""
    quote, escaped = None, False
    for i, ch in enumerate(line):
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def parse_marker(text: str) -> tuple[str | None, str | None, dict[str, str]]:
    """``(name, not_run, skips)`` from a marker's text."""
    if text.startswith("not run:"):
        reason = text.removeprefix("not run:").strip()
        if not reason:
            raise ValueError("a 'not run:' marker needs a reason")
        return None, reason, {}
    name, *rest = [part.strip() for part in text.split(";")]
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise ValueError(f"a block's name is lowercase words joined by '-', not {name!r}")
    skips = {}
    for part in rest:
        m = re.fullmatch(r"skip (.+?): (.+)", part)
        if not m:
            raise ValueError(f"expected 'skip COMMAND: why', got {part!r}")
        skips[m.group(1).strip()] = m.group(2).strip()
    return name, None, skips


def blocks(readme: str = "README.md", root: Path | None = None) -> list[Block]:
    """Every fenced block of ``readme``, with its marker read."""
    lines = ((root or repo_root()) / readme).read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i].strip())
        if not m:
            i += 1
            continue
        indent = len(lines[i]) - len(lines[i].lstrip())  # a fence inside a list item
        end = next(
            (j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```")), None
        )
        if end is None:
            raise ValueError(f"{readme}:{i + 1}: a fence that never closes")
        text = "\n".join(line[indent:] for line in lines[i + 1 : end])
        block = Block(readme, i + 1, m.group(1), text)
        previous = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        if marker := MARKER.match(previous):
            try:
                block.name, block.not_run, block.skips = parse_marker(marker.group(1))
            except ValueError as exc:
                raise ValueError(f"{block.where}: {exc}") from None
        found.append(block)
        i = end + 1
    return found


def command_blocks(root: Path | None = None) -> list[Block]:
    """The command blocks of both READMEs."""
    return [b for readme in READMES for b in blocks(readme, root) if b.lang in COMMAND_LANGS]


def block(name: str, root: Path | None = None) -> Block:
    """The command block called ``name`` (one README may name a block the other names too: the
    first, in :data:`READMES` order; ``readme.zh:NAME`` asks for the Chinese one)."""
    readme = None
    if ":" in name:
        readme, name = name.split(":", 1)
        readme = {"readme": "README.md", "readme.zh": "README.zh.md"}[readme]
    for b in command_blocks(root):
        if b.name == name and (readme is None or b.readme == readme):
            return b
    raise KeyError(f"no README command block is marked 'readme: {name}'")


def skip_matches(b: Block, skip: str) -> list[str]:
    """The commands of ``b`` that ``skip`` names: the one it spells out whole, else those it
    begins, up to a space (``make test`` never names ``make test-unit``)."""
    whole = [c for c in b.commands() if " ".join(c.split()) == skip]
    return whole or [c for c in b.commands() if c.startswith(skip + " ")]


def script(name: str, fill: dict[str, str] | None = None, root: Path | None = None) -> str:
    """Block ``name`` as a bash script a test runs: its commands as written, each ``skip``ped
    one left out, every ``<placeholder>`` replaced from ``fill`` (a placeholder left over, or a
    ``fill`` or ``skip`` that matches nothing, raises: the README changed under the test)."""
    b = block(name, root)
    fill = fill or {}
    skipped = {skip: skip_matches(b, skip) for skip in b.skips}
    if wrong := {s: len(m) for s, m in skipped.items() if len(m) != 1}:
        raise ValueError(f"{b.where}: a skip must match one command: {wrong}")
    gone = {m[0] for m in skipped.values()}
    text = "\n".join(c for c in b.commands() if c not in gone)
    for key, value in fill.items():
        if key not in text:
            raise ValueError(f"{b.where}: no {key} in block {name!r}")
        text = text.replace(key, value)
    if left := PLACEHOLDER.findall(text):
        raise ValueError(f"{b.where}: block {name!r} still has {sorted(set(left))}")
    return "set -euo pipefail\n" + text + "\n"
