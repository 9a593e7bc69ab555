"""中文版: the workbook in Chinese, kept apart from the notebooks and in step with them.

Each notebook's Chinese lives in ``zh/<folder>/<stem>.md``, one block per markdown cell::

    <!-- cell 5170cc7a en 9f0c1a.77d2e4.000000 -->
    # 00 · 欢迎与准备
    ...

The block is keyed by the cell's id (``make strip`` keeps ids) and carries the fingerprint of the
English it translates: a short hash of each English line. When the English changes, the
fingerprint no longer matches, and the cell is *stale*, named with its first changed line. A
change that cannot update the Chinese in the same commit marks the block ``stale`` explicitly
(``labkit zh mark NN CELL``): the drift test lets it pass and ``labkit zh stale`` lists it.
After updating the Chinese, ``labkit zh sign NN CELL`` records the English it now translates.

Only markdown is swapped; code, outputs, API names and numbers stay as they are, and so do the
posts' quotes (「...」), which the Chinese copy must carry verbatim.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from labkit.lang import LANGS, language  # noqa: F401 (the CLI's and tests' names for them)
from labkit.params import repo_root

MARKER = re.compile(r"^<!-- cell (\S+) en (\S*)( stale)? -->$")
CODE_MARKER = re.compile(r"^<!-- code (\S+) -->$")

#: What a learner copy says in each language (the stub's prompt, the check's guard).
MESSAGES = {
    "en": {
        "stub_header": "# YOUR CODE HERE",
        "stub": "# YOUR CODE HERE: set {names} (see the exercise above)",
        "not_set": "{name} is not set yet: write your answer in the cell above",
        "worked": "# the worked answer, to compare once yours runs: notebooks/{lesson} (collapsed)",
        "learner_note": "*Write your answer in the code cell below, then run the check after "
        "it; the worked answer is in `notebooks/{lesson}`, collapsed.*",
    },
    "zh": {
        "stub_header": "# 在这里写你的代码",
        "stub": "# 在这里写你的代码：设置 {names}（见上面的练习）",
        "not_set": "{name} 还没有设置：请在上面的单元格里写出你的答案",
        "worked": "# 参考答案（等你的答案能运行之后再对照）：notebooks/{lesson}（折叠着）",
        "learner_note": "*在下面的代码单元格里写出你的答案，再运行其后的检查单元格；参考答案在 "
        "`notebooks/{lesson}` 里，折叠着。*",
    },
}


#: What a lesson's exercise text says of its answer cell (it holds the worked answer there),
#: which a learner copy replaces with ``learner_note`` (its answer cell is a stub).
PREFILLED = {
    "en": r"\*(?:Pre-filled answer; try your own first\.|The cell below holds a working answer "
    r"so the notebook runs in CI; try your own first\.)\*".replace(" ", r"\s+"),
    "zh": r"\*(?:答案已预先填好；请先自己试一试。"
    r"|下面的单元格里有一个可用的答案，好让笔记本能在 CI 里运行；请先自己试一试。)\*",
}


def message(key: str, lang: str = "en", **fields: str) -> str:
    return MESSAGES[lang][key].format(**fields)


# ---- fingerprints ---------------------------------------------------------------------------


def line_hashes(text: str) -> list[str]:
    """A 6-hex hash of each line (trailing spaces ignored)."""
    return [hashlib.sha1(ln.rstrip().encode()).hexdigest()[:6] for ln in text.split("\n")]


def fingerprint(text: str) -> str:
    return ".".join(line_hashes(text))


def first_change(recorded: str, text: str) -> tuple[int, str] | None:
    """``(line number, the English line now)`` of the first line that differs from what the
    fingerprint recorded, or None when nothing changed."""
    old, lines = recorded.split("."), text.split("\n")
    for i, (a, b) in enumerate(zip(old, line_hashes(text))):
        if a != b:
            return i + 1, lines[i]
    if len(old) != len(lines):
        n = min(len(old), len(lines))
        return n + 1, lines[n] if n < len(lines) else "(lines removed at the end)"
    return None


# ---- the translation files ------------------------------------------------------------------


@dataclass
class Block:
    """One markdown cell in Chinese."""

    cell: str
    english: str  # the fingerprint of the English it translates
    text: str
    stale: bool = False


def path_for(notebook: Path) -> Path:
    """``notebooks/03_x.ipynb`` -> ``zh/notebooks/03_x.md``."""
    return repo_root() / "zh" / notebook.parent.name / f"{notebook.stem}.md"


def read(path: Path) -> dict[str, Block]:
    """The markdown blocks of one translation file, by cell id."""
    blocks: dict[str, Block] = {}
    if not path.exists():
        return blocks
    current: Block | None = None
    body: list[str] = []
    for line in path.read_text(encoding="utf-8").split("\n") + ["<!-- cell END en  -->"]:
        m = MARKER.match(line)
        if m or CODE_MARKER.match(line):
            if current is not None:
                current.text = "\n".join(body).strip("\n")
                if current.cell in blocks:
                    raise ValueError(f"{path.name}: cell {current.cell} translated twice")
                blocks[current.cell] = current
            current, body = (Block(m.group(1), m.group(2), "", bool(m.group(3))) if m else None), []
        elif current is not None:
            body.append(line)
    return blocks


def read_code(path: Path) -> dict[str, list[tuple[str, str]]]:
    """The code cells' comments in Chinese: ``{cell id: [(English comment, Chinese), ...]}``."""
    code: dict[str, list[tuple[str, str]]] = {}
    if not path.exists():
        return code
    cell, english = None, None
    for line in path.read_text(encoding="utf-8").split("\n"):
        if m := CODE_MARKER.match(line):
            cell = m.group(1)
            code.setdefault(cell, [])
        elif MARKER.match(line):
            cell = None
        elif cell and line.startswith("en: "):
            english = line[4:]
        elif cell and line.startswith("zh: ") and english is not None:
            code[cell].append((english, line[4:]))
            english = None
    return code


def write(
    path: Path, blocks: list[Block], title: str, *, code: dict[str, list] | None = None
) -> None:
    out = [f"<!-- {title}: the Chinese of each markdown cell and code comment, by cell id -->"]
    for b in blocks:
        out += ["", f"<!-- cell {b.cell} en {b.english}{' stale' * b.stale} -->", b.text]
    for cell, pairs in (code or {}).items():
        out += ["", f"<!-- code {cell} -->"]
        for en, cn in pairs:
            out += [f"en: {en}", f"zh: {cn}"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def comments(source: str) -> list[tuple[int, int, str]]:
    """``(line, column, text)`` of each comment a learner reads in a code cell (``# noqa``,
    ``# fmt:`` and ``# type:`` left out); IPython's ``%`` and ``!`` lines skipped."""
    import io
    import tokenize

    lines = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.split("\n")]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("\n".join(lines)).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    return [
        (t.start[0], t.start[1], t.string)
        for t in tokens
        if t.type == tokenize.COMMENT and not t.string.startswith(("# noqa", "# fmt:", "# type:"))
    ]


def check_messages(source: str) -> list[str]:
    """The literal messages of a check cell's ``assert``s and ``raise AssertionError(...)``s (a
    string or an f-string), as written: what a learner reads when the check fails; and its
    ``print("✓ ...")`` line, what a learner reads when it passes."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    said = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and isinstance(node.msg, ast.Constant | ast.JoinedStr):
            said.append(ast.get_source_segment(source, node.msg))
        elif (  # raise AssertionError("..."): a check's message too
            isinstance(node, ast.Raise)
            and isinstance(node.exc, ast.Call)
            and getattr(node.exc.func, "id", "") == "AssertionError"
            and node.exc.args
            and isinstance(node.exc.args[0], ast.Constant | ast.JoinedStr)
        ):
            said.append(ast.get_source_segment(source, node.exc.args[0]))
        elif (  # print("✓ correct ..."): the line a learner reads when the check passes
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") == "print"
            and node.args
            and isinstance(node.args[0], ast.Constant | ast.JoinedStr)
            and "✓" in ast.get_source_segment(source, node.args[0])
        ):
            said.append(ast.get_source_segment(source, node.args[0]))
    return said


#: A run of two English words outside a literal's ``{fields}``: words a learner reads.
_WORDS = re.compile(r"[A-Za-z]+[ _,;:.()'-]+[A-Za-z]{2,}")
#: One word a line says: ``print("ready:", ready)``, ``"| precisions:"``, ``"pending"`` (a unit
#: is not a word: :data:`_UNITS`).
_LABEL = re.compile(r"""[rfRF]?(["'])[\s|(]*([A-Za-z]{2,}):?[\s)]*\1""")
_UNITS = {"ms", "us", "ns", "MiB", "GiB", "KiB", "MB", "GB", "KB", "x"}
#: ``e.decide``'s sentence templates (its other keywords are values or names).
_DECIDE_SIDES = ("reproduced", "contradicted", "within_noise")


def said_key(segment: str) -> str:
    """A literal's source as the Chinese file keys it: one line, each line break of an
    implicit concatenation written `` ⏎ ``."""
    return re.sub(r"\n\s*", " ⏎ ", segment)


def said_literals(
    source: str, elsewhere: frozenset[str] = frozenset()
) -> list[tuple[int, int, str]]:
    """The string literals of a code cell that the kit prints for a learner to read: the
    arguments of ``print(...)``, an ``e.check(condition, evidence)``'s evidence and an
    ``e.note(text)``'s text, ``e.decide``'s sentence templates, and the ``what`` of
    ``expected_errors(what)``; only those with words (two English words outside their
    ``{fields}``); and the words a cell assigns to a name that a printed f-string splices in
    (``bound = "so ..." if fast else "which ..."``), unless another cell reads that name
    (``elsewhere``: it may label a plot or a record there). Each as ``(start, end, source)``:
    character offsets into ``source``."""
    import ast

    lines = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.split("\n")]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return []
    offset = _offsets(lines)
    found = []
    named: list[ast.Name] = []  # names said whole, or spliced into a said f-string

    def add(node: ast.AST) -> None:
        if isinstance(node, ast.Name):  # expected_errors(crash): crash's words are said
            named.append(node)
        elif isinstance(node, ast.IfExp):  # print("GPUs are", "logical" if ... else "real")
            add(node.body)
            add(node.orelse)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # "words " + more
            add(node.left)
            add(node.right)
        elif isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Constant) and isinstance(node.value, str)
        ):
            start = offset(node.lineno, node.col_offset)
            end = offset(node.end_lineno, node.end_col_offset)
            if _worded(source[start:end]):
                found.append((start, end, source[start:end]))
            if isinstance(node, ast.JoinedStr):
                named.extend(
                    v.value
                    for v in node.values
                    if isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name)
                )

    for node in ast.walk(tree):
        for arg in _said_args(node) if isinstance(node, ast.Call) else ():
            add(arg)
    # words a cell names first and then says, or splices into a line it says
    names = _said_alone(tree, named, elsewhere)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and getattr(node.targets[0], "id", None) in names
        ):
            add(node.value)
    return sorted(set(found))


def _offsets(lines: list[str]):
    """``offset(row, col)``: ast's position (1-based row, column in UTF-8 bytes) as a character
    offset into the lines joined by newlines."""
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def offset(row: int, col: int) -> int:
        return starts[row - 1] + len(lines[row - 1].encode()[:col].decode())

    return offset


def _worded(literal: str) -> bool:
    """A literal a learner reads: two English words outside its ``{fields}``, or a one-word
    label that is not a unit (``"device:"``, not ``"ms"``)."""
    body = re.sub(r"\{[^{}]*\}", " ", literal)
    label = _LABEL.fullmatch(body)
    return bool(_WORDS.search(body) or (label and label.group(2) not in _UNITS))


def _said_args(call) -> list:
    """The arguments of ``call`` the kit prints: all of ``print``'s, ``e.check``'s evidence,
    ``e.note``'s text, ``decide``'s sentence templates, ``expected_errors``'s ``what``."""
    import ast

    func, args = call.func, call.args
    name = getattr(func, "id", None) or getattr(func, "attr", "")
    method = isinstance(func, ast.Attribute)
    if name == "print":
        return list(args)
    if method and name == "check" and len(args) == 2:
        return [args[1]]
    if method and name == "note" and len(args) == 1:
        return [args[0]]
    if name == "decide":
        return [kw.value for kw in call.keywords if kw.arg in _DECIDE_SIDES]
    if name == "expected_errors" and args:
        return [args[0]]
    return []


def _said_alone(tree, named: list, elsewhere: frozenset[str]) -> set[str]:
    """The names in ``named`` (said whole, or spliced into a said f-string) that the cell reads
    nowhere else and no other cell reads (``elsewhere``): their assigned words are said. A name
    also read elsewhere may label a plot or a record, so its words stay English."""
    import ast

    loads: dict[str, int] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            loads[n.id] = loads.get(n.id, 0) + 1
    return {
        name
        for name in {v.id for v in named}
        if loads[name] == sum(v.id == name for v in named) and name not in elsewhere
    }


def fields(text: str) -> list[str]:
    """The ``{fields}`` of a template or an f-string, in order (``{{`` and ``}}`` are not)."""
    return re.findall(r"\{[^{}]*\}", text.replace("{{", "").replace("}}", ""))


def read_names(source: str) -> set[str]:
    """The names a code cell reads (IPython's ``%`` and ``!`` lines left out)."""
    import ast

    lines = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.split("\n")]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _elsewhere(cells: list[dict], cell: dict) -> frozenset[str]:
    """The names the notebook's other code cells read."""
    return frozenset().union(
        *(read_names(_source(c)) for c in cells if c["cell_type"] == "code" and c is not cell)
    )


def _said(cell: dict, elsewhere: frozenset[str] = frozenset()) -> list[str]:
    """What a learner reads in a code cell: its comments, a check cell's messages, and the
    words it prints (:func:`said_literals`), each once."""
    source = _source(cell)
    said = [text for _, _, text in comments(source)]
    if "check" in cell.get("metadata", {}).get("tags", []):
        said += [said_key(message) for message in check_messages(source)]
    said += [said_key(text) for _, _, text in said_literals(source, elsewhere)]
    return list(dict.fromkeys(said))


def translate_code(
    source: str, pairs: list[tuple[str, str]], elsewhere: frozenset[str] = frozenset()
) -> str:
    """``source`` with each comment, check message and printed literal that has a pair
    replaced by its Chinese (a string that only reads like a comment is left alone)."""
    chinese = dict(pairs)
    lines = source.split("\n")
    for row, col, text in reversed(comments(source)):
        if text in chinese:
            line = lines[row - 1]
            lines[row - 1] = line[:col] + chinese[text] + line[col + len(text) :]
    out = "\n".join(lines)
    for start, end, text in reversed(said_literals(out, elsewhere)):  # the words it prints, whole
        if said_key(text) in chinese:
            out = out[:start] + chinese[said_key(text)] + out[end:]
    for message in check_messages(out):  # a check's messages: string literals, whole
        if said_key(message) in chinese:
            out = out.replace(message, chinese[said_key(message)])
    return out


def _cells(notebook: Path) -> list[dict]:
    return json.loads(notebook.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


# ---- what is missing or stale -----------------------------------------------------------------


@dataclass
class Stale:
    notebook: str
    cell: str
    why: str  # "no Chinese", "marked stale", "the English changed at line N: ..."

    def __str__(self) -> str:
        return f"{self.notebook}, cell {self.cell}: {self.why}"


def stale(notebook: Path) -> list[Stale]:
    """Each markdown cell of ``notebook`` whose Chinese is missing, out of date or marked
    stale, and each block whose cell is gone."""
    blocks = read(path_for(notebook))
    found = []
    ids = set()
    for cell in _cells(notebook):
        if cell["cell_type"] != "markdown":
            continue
        ids.add(cell["id"])
        block = blocks.get(cell["id"])
        if block is None:
            found.append(Stale(notebook.name, cell["id"], "no Chinese"))
        elif block.stale:
            found.append(Stale(notebook.name, cell["id"], "marked stale"))
        elif change := first_change(block.english, _source(cell)):
            line, text = change
            why = f"the English changed at line {line}: {text[:80]!r}"
            found.append(Stale(notebook.name, cell["id"], why))
    for cell in sorted(set(blocks) - ids):
        found.append(Stale(notebook.name, cell, "no such markdown cell (remove the block)"))
    code = read_code(path_for(notebook))
    cells = _cells(notebook)
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        have = dict(code.get(cell["id"], []))
        now = _said(cell, _elsewhere(cells, cell))
        for text in now:
            if text not in have:
                found.append(Stale(notebook.name, cell["id"], f"no Chinese for {text[:70]!r}"))
        for text in set(have) - set(now):
            why = f"the English comment changed or went: {text[:70]!r}"
            found.append(Stale(notebook.name, cell["id"], why))
    return found


def notebooks(numbers: list[str] | None = None) -> list[Path]:
    """The lessons (``NN``) and lab reports (``lab_x``) named, or all of them."""
    root = repo_root()
    every = sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    every += sorted((root / "bench").glob("lab_*.ipynb"))
    if not numbers:
        return every
    picked = [p for p in every if any(p.stem.startswith(n) for n in numbers)]
    if not picked:
        raise SystemExit(f"labkit zh: no notebook matches {' '.join(numbers)}")
    return picked


def sign(notebook: Path, cells: list[str] | None = None) -> list[str]:
    """Record that the Chinese of ``cells`` (default: every block) translates today's English;
    returns the cells signed."""
    path = path_for(notebook)
    blocks = read(path)
    english = {c["id"]: _source(c) for c in _cells(notebook) if c["cell_type"] == "markdown"}
    signed = []
    for cell, block in blocks.items():
        if (cells is None or cell in cells) and cell in english:
            block.english, block.stale = fingerprint(english[cell]), False
            signed.append(cell)
    _rewrite(notebook, blocks)
    return signed


def mark(notebook: Path, cells: list[str]) -> None:
    """Mark blocks stale on purpose: the English changed and the Chinese follows later."""
    blocks = read(path_for(notebook))
    for cell in cells:
        if cell not in blocks:
            raise SystemExit(f"labkit zh: {notebook.name} has no Chinese for cell {cell}")
        blocks[cell].stale = True
    _rewrite(notebook, blocks)


def _rewrite(notebook: Path, blocks: dict[str, Block]) -> None:
    """Write the blocks back in the notebook's cell order, the code comments kept."""
    order = [c["id"] for c in _cells(notebook)]
    ranked = sorted(blocks.values(), key=lambda b: order.index(b.cell) if b.cell in order else 1e9)
    write(path_for(notebook), ranked, notebook.stem, code=read_code(path_for(notebook)))


# ---- the Chinese copy -----------------------------------------------------------------------


def translate(nb, notebook: Path):
    """``nb`` (a notebook read from ``notebook``, or its executed copy: an nbformat node or
    plain JSON) with its markdown in Chinese where a translation exists; code and outputs
    untouched. Returns the same object."""
    blocks = read(path_for(notebook))
    code = read_code(path_for(notebook))
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown" and cell.get("id") in blocks:
            cell["source"] = blocks[cell["id"]].text
        elif cell["cell_type"] == "code" and cell.get("id") in code:
            src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            others = _elsewhere(nb["cells"], cell)
            cell["source"] = translate_code(src, code[cell["id"]], others)
    nb.setdefault("metadata", {}).setdefault("labkit", {})["lang"] = "zh"
    return nb


def scaffold(notebook: Path) -> list[str]:
    """Add a block for each markdown cell without one, holding the English and marked stale
    (a translator's starting point; the drift test and ``labkit zh stale`` still list it)."""
    blocks = read(path_for(notebook))
    added = []
    for cell in _cells(notebook):
        if cell["cell_type"] == "markdown" and cell["id"] not in blocks:
            text = _source(cell)
            blocks[cell["id"]] = Block(cell["id"], fingerprint(text), text, stale=True)
            added.append(cell["id"])
    _rewrite(notebook, blocks)
    return added


# ---- lesson 12's ledger table ----------------------------------------------------------------


def _ledger_rows(english: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split(" | ")]
        for line in english.split("\n")
        if line.startswith("| ") and not line.startswith(("|---", "| # "))
    ]


def _row_fields(cells: list[str]) -> dict[str, str]:
    _number, _post, entry, _status, verdict, fix, _taught = cells
    word, colon, rest = verdict.partition(":")
    return {"entry": entry, "verdict": rest.strip() if colon else "", "fix": fix}


def stale_ledger(notebook: Path | None = None) -> list[Stale]:
    """Each row of lesson 12's table whose Chinese in ``zh/ledger.md`` is missing or was made
    from other English."""
    from labkit import blog, lang

    path = notebook or repo_root() / "notebooks" / blog.NOTEBOOK
    have = lang.read_ledger()
    out = []
    for cells in _ledger_rows(blog.table_in(path)):
        said = have.get(int(cells[0]), {})
        for field, english in _row_fields(cells).items():
            have_en, have_zh = said.get(field, ("", ""))
            if english and (have_en != english or not have_zh):
                why = "the English changed" if have_en and have_en != english else "no Chinese"
                out.append(Stale(path.name, f"ledger #{cells[0]} {field}", why))
    return out


def ledger_table(english: str) -> str:
    """Lesson 12's summary table (``blog.table``'s markdown) with its headers, status words
    and verdict words through :data:`lang.LEDGER_WORDS`, and each row's entry, verdict and fix
    from ``zh/ledger.md`` where its English is current (else the English, and
    :func:`stale_ledger` says so)."""
    from labkit import blog, lang

    w = lang.LEDGER_WORDS
    chinese = lang.read_ledger()
    out = []
    for line in english.split("\n"):
        if line in w:
            out.append(w[line])
        elif line.startswith("| ") and not line.startswith("|---"):
            cells = line.strip("|").split(" | ")
            cells = [c.strip() for c in cells]
            number, post, entry, status, verdict, fix, taught = cells
            said = chinese.get(int(number), {})
            zh_of = {
                field: blog._cell(said[field][1])
                for field, english in _row_fields(cells).items()
                if field in said and said[field][0] == english and said[field][1]
            }
            entry, fix = zh_of.get("entry", entry), zh_of.get("fix", fix)
            status = w.get(status, status)
            word, colon, rest = verdict.partition(":")
            if colon and word in w:
                verdict = f"{w[word]}：{zh_of.get('verdict', rest.strip())}"
            taught = w.get(taught, taught)
            out.append(
                "| " + " | ".join([number, post, entry, status, verdict, fix, taught]) + " |"
            )
        elif m := re.match(r"(\d+) entries: (.*)\.$", line):
            parts = []
            for c in m.group(2).split(", "):
                n, word = c.split(" ", 1)
                parts.append(f"{w.get(word, word)} {n}")
            out.append(f"{m.group(1)} 个条目：{'，'.join(parts)}。")
        else:
            out.append(line)
    return "\n".join(out)


# ---- the verdicts' sentences -------------------------------------------------------------------


def verdict_templates(paths: list[Path] | None = None) -> dict[str, tuple[str, str]]:
    """``{"<metric>:yes": (English template, notebook)}`` for every ``labkit.verdict(...)`` call
    in the notebooks' code, read from the source (its ``yes=``, ``no=`` and ``within_noise=``
    string literals); where two notebooks give a key different English, the last one."""
    return {key: said[-1] for key, said in _verdict_sentences(paths).items()}


def _verdict_sentences(paths: list[Path] | None = None) -> dict[str, list[tuple[str, str]]]:
    """Every (English template, notebook) each verdict key is given, in notebook order."""
    import ast

    found: dict[str, list[tuple[str, str]]] = {}
    for path, node in _method_calls(("verdict",), paths):
        if not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        metric = node.args[0].value
        for kw in node.keywords:
            if kw.arg in ("yes", "no", "within_noise") and isinstance(kw.value, ast.Constant):
                found.setdefault(f"{metric}:{kw.arg}", []).append((kw.value.value, path.name))
    return found


def _method_calls(names: tuple[str, ...], paths: list[Path] | None = None):
    """``(notebook, call)`` for each call ``<anything>.<name>(...)`` in the notebooks' code
    cells (IPython's ``%`` and ``!`` lines left out), in notebook order."""
    import ast

    for path in paths or notebooks():
        for cell in _cells(path):
            if cell["cell_type"] != "code":
                continue
            src = "\n".join(
                "" if ln.lstrip().startswith(("%", "!")) else ln for ln in _source(cell).split("\n")
            )
            for node in ast.walk(ast.parse(src)):
                func = getattr(node, "func", None)
                if isinstance(func, ast.Attribute) and func.attr in names:
                    yield path, node


#: A verdict's own keywords: its templates, and what is not words a learner reads.
_NOT_SPLICED = {"yes", "no", "within_noise", "reproduced", "contradicted", "unit"}


def spliced_phrases(paths: list[Path] | None = None) -> dict[str, str]:
    """``{English phrase: notebook}``: every string literal a lesson passes to a verdict (or an
    ``e.decide``) as a value to splice into its sentence, directly or as either side of an
    ``... if ... else ...``; words only (a phrase has a space and a letter)."""
    import ast

    found: dict[str, str] = {}
    for path, node in _method_calls(("verdict", "decide"), paths):
        for kw in node.keywords:
            if kw.arg in _NOT_SPLICED:
                continue
            value = kw.value
            for side in [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]:
                text = side.value if isinstance(side, ast.Constant) else None
                if isinstance(text, str) and " " in text.strip() and re.search("[a-z]", text):
                    found[text] = path.name
    return found


def stale_verdicts() -> list[Stale]:
    """Each verdict sentence without a current Chinese one in ``zh/verdicts.md``, and each key
    that two notebooks give different English (one of them could have no Chinese)."""
    from labkit import lang

    catalog = lang.read_verdicts()
    phrases = lang.read_phrases()
    out = [
        Stale(notebook, f"phrase {english.strip()[:40]!r}", "no Chinese phrase")
        for english, notebook in spliced_phrases().items()
        if english not in phrases
    ]
    for key, said in _verdict_sentences().items():
        if len({english for english, _ in said}) > 1:  # one key, one sentence: else one has none
            names = ", ".join(sorted({notebook for _, notebook in said}))
            out.append(Stale(said[0][1], key, f"the key has different English in {names}"))
    for key, (english, notebook) in verdict_templates().items():
        if key not in catalog:
            out.append(Stale(notebook, key, "no Chinese verdict sentence"))
        elif catalog[key][0] != english:
            out.append(Stale(notebook, key, f"the English verdict changed: {english[:80]!r}"))
    return out


def sync_ledger(notebook: Path | None = None) -> bool:
    """Rewrite the Chinese copy of lesson 12's summary table from the English one (through the
    fixed map), and record it as current; True when it changed."""
    from labkit import blog

    path = notebook or repo_root() / "notebooks" / blog.NOTEBOOK
    blocks = read(path_for(path))
    english = {c["id"]: _source(c) for c in _cells(path) if c["cell_type"] == "markdown"}
    for cell, text in english.items():
        if blog.BEGIN in text and cell in blocks:
            head, rest = blocks[cell].text.split(blog.BEGIN, 1)
            tail = rest.split(blog.END, 1)[1]
            new = f"{head}{blog.BEGIN}\n{ledger_table(blog.table_in(path))}\n{blog.END}{tail}"
            changed = new != blocks[cell].text or blocks[cell].english != fingerprint(text)
            blocks[cell].text, blocks[cell].english = new, fingerprint(text)
            _rewrite(path, blocks)
            return changed
    return False


def said_by_the_kit(root: Path | None = None) -> dict[str, str]:
    """``{English template: "labkit/<file>.py"}``: every ``lang.say("...")`` (or ``say("...")``)
    in the package's code, read from its source."""
    import ast

    root = root or Path(__file__).resolve().parents[1]
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            func = getattr(node, "func", None)
            name = getattr(func, "attr", None) or getattr(func, "id", None)
            if name == "say" and node.args and isinstance(node.args[0], ast.Constant):
                found[node.args[0].value] = f"labkit/{path.relative_to(root).as_posix()}"
    return found


def stale_messages() -> list[Stale]:
    """Each line the kit's code says with no Chinese in ``zh/messages.md``, each Chinese whose
    ``{fields}`` are not the English's (a plural's field may be left out), and each entry no
    code says any more."""
    from labkit import lang

    catalog = lang.read_messages()
    said = said_by_the_kit()
    out = []
    for english, where in said.items():
        chinese = catalog.get(english)
        if chinese is None:
            out.append(Stale(where, f"say {english[:50]!r}", "no Chinese message"))
        elif not set(fields(chinese)) <= set(fields(english)):
            out.append(Stale(where, f"say {english[:50]!r}", "the Chinese names other fields"))
    for english in set(catalog) - set(said):
        out.append(Stale("zh/messages.md", f"say {english[:50]!r}", "no code says it (remove)"))
    return out


# ---- what a Chinese run still prints in English -------------------------------------------------

_CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
#: Prose: four English words in a row, one space apart (a label, an API name, a number with its
#: unit, a dict or a path is not; a word is one capital or small letter, then small ones).
_PROSE = re.compile(r"\b[A-Za-z][a-z']*(?: [A-Za-z][a-z']*){3,}\b")
#: Lines that are Ray's or Python's own words, which stay as they are: a snippet and the error
#: it raised (``labkit.expect_error``'s ``code -> SomeError: message``), a traceback's lines,
#: and Ray's log lines (``(raylet)``, ``(pid=...)``, ``(autoscaler +17s)``, a timestamp, a level).
_THEIRS = re.compile(
    r" -> [A-Za-z_.]*(?:Error|Exception|Warning|Exit)\b"
    r"|^\s*(?:\(\w[\w ,=:+.-]*\) |\[?\d{4}-\d\d-\d\d[ T]\d\d:|(?:INFO|WARNING|ERROR)\b|Traceback"
    r"|File \")"
)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours its log prefixes


def english_lines(executed: Path | dict) -> list[tuple[str, str]]:
    """``(cell id, line)`` for each line of an executed notebook's output that speaks English
    prose and no Chinese: in a Chinese run, the kit's own words that have no Chinese yet.
    Read: what a cell prints (stdout; stderr is Ray's logs), its results and its displays
    (markdown before plain text; images and HTML-only displays left out). Ray's and Python's own
    words are not counted (:data:`_THEIRS`)."""
    nb = (
        json.loads(Path(executed).read_text(encoding="utf-8"))
        if isinstance(executed, Path)
        else executed
    )
    found = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream" and out.get("name") == "stdout":
                text = out["text"]
            elif out["output_type"] in ("execute_result", "display_data"):
                data = out.get("data", {})
                text = data.get("text/markdown") or ("" if "text/html" in data else None)
                text = text if text is not None else data.get("text/plain", "")
            else:
                continue
            text = "".join(text) if isinstance(text, list) else text
            for line in _ANSI.sub("", text).split("\n"):
                if _PROSE.search(line) and not _CJK.search(line) and not _THEIRS.search(line):
                    found.append((cell.get("id", "?"), line.strip()))
    return found
