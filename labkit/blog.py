"""The ledger of lesson 12: each snippet and claim of the two blog posts, checked by running it.

A cell opens an entry with its declared status::

    e = ledger.entry("S0 §2.2", "task.remote(options=...)", "raises",
                     fix="task.options(**opts).remote()", taught="01")

and the cells after it prove that status before the next entry opens (or ``ledger.finish``):

* a snippet (an entry whose ``what`` holds code in backticks) that ``raises``, ``does not
  exist`` or is ``deprecated`` has had its blog form fail in a ``blog-error`` cell
  (``labkit.expect_error``, whose catches this module reads from ``checks.CAUGHT``);
* an entry that ``works`` has seen no blog error;
* every entry has passed at least one ``e.check(condition, evidence)`` (behaviour that must
  hold: what runs instead, or what the installed source says), or had its verdict chosen by the
  run with ``e.decide(...)`` (a quantitative claim: the run's numbers against the post's
  figure; it never raises), or, for a claim that cannot be checked, an ``e.note(...)`` that shows
  the arithmetic. A claim in plain words that ``does not exist`` is proved by its checks alone.

The verdict words are defined in ``STYLE.md``. An entry's ``verdict=`` literal starts with one of
:data:`VERDICTS`; ``"by the run: ..."`` says which numbers decide, and ``e.decide`` prints and
records the word the run chose (``blog.verdict_<name>``); :meth:`Ledger.run_verdicts` gathers
them for the table at the end of the lesson.

The summary table at the top of the notebook is rendered by :func:`table` from the entries. The
same rows come from the notebook's source (:func:`entries_in`, no run needed) and from the run
(``ledger.finish``); both must equal the table between the markers, so the table and the cells
cannot drift apart. ``labkit blog-table --write`` rewrites it after an entry changes.

Used in: 12.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from labkit import checks, lang
from labkit.params import repo_root

if TYPE_CHECKING:
    from labkit.measure import Versus

#: What happens to a snippet or claim on Ray 2.60 (the issue's five, and one for anecdotes).
STATUSES = ("works", "deprecated", "raises", "does not exist", "misleading", "not checkable")
#: Statuses whose blog form must fail in a ``blog-error`` cell (a warning counts for deprecated).
FAILING = ("deprecated", "raises", "does not exist")
#: How a quantitative claim ends: the words before the colon of ``verdict=`` (STYLE.md defines
#: each). ``by the run`` leaves the choice to :meth:`Entry.decide`: the first two, or "within
#: noise" where the run's repeats straddle the post's figure.
VERDICTS = (
    "reproduced",
    "contradicted",
    "measured at another scale",
    "mechanism shown",
    "not checkable",
    "by the run",
)
RUN = "by the run"
#: What a check may not be: conditions that cannot fail (see :func:`weak_checks`).
WEAK = ("> 0", "isinstance(...)", "len(...) == N", "arithmetic on constants")
BEGIN, END = "<!-- ledger: begin -->", "<!-- ledger: end -->"
SECTION = re.compile(r"^S([02]) §(\d+(?:\.\d+)*)$")
NOTEBOOK = "12_from_the_blog_to_ray_2_60.ipynb"


def order_key(section: str) -> tuple[int, tuple[int, ...]]:
    """``"S0 §3.2"`` -> ``(0, (3, 2))``: entries must come in the posts' order."""
    m = SECTION.match(section)
    if not m:
        raise ValueError(f"section {section!r} must look like 'S0 §2.2' or 'S2 §3.1.1'")
    return int(m.group(1)), tuple(int(x) for x in m.group(2).split("."))


def said_word(word: str) -> str:
    """A verdict's word as the learner reads it: the English, or its Chinese
    (:data:`labkit.lang.LEDGER_WORDS`) when the language is Chinese."""
    return lang.LEDGER_WORDS.get(word, word) if lang.is_zh() else word


def _colon() -> str:
    return "：" if lang.is_zh() else ": "


class Word(str):
    """The word :meth:`Entry.decide` chose: a string, and silent as a cell's last value (the
    line decide printed already says it)."""

    def _ipython_display_(self) -> None:
        pass


@dataclass
class Entry:
    """One snippet or claim of a post, with what Ray 2.60 does about it."""

    section: str
    what: str
    status: str
    fix: str = ""
    taught: str = ""
    verdict: str = ""
    parts: str = ""  # a claim of several parts, each judged apart: "about 1 ms | 10-100x faster"
    number: int = 0
    evidence: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    outcome: str = ""  # e.decide's word: reproduced, contradicted or within noise (per part)
    decided: dict[str, str] = field(default_factory=dict)  # part -> the word its decide chose
    _caught_at: int = 0

    def __post_init__(self) -> None:
        order_key(self.section)
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r}: use one of {', '.join(STATUSES)}")
        if self.verdict and self.verdict.split(":")[0] not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} must start with one of {VERDICTS}")
        if self.taught and not re.fullmatch(r"\d\d(, \d\d)*", self.taught):
            raise ValueError(f"taught={self.taught!r}: lesson numbers like '04' or '06, 07'")

    def check(self, condition: object, evidence: str) -> None:
        """Assert ``condition`` and print the evidence line under the entry's number."""
        if not condition:
            raise AssertionError(f"#{self.number} {self.section} {self.what}: {evidence}")
        self.evidence.append(evidence)
        print(f"#{self.number} {self.section}{_colon()}{evidence}")

    def note(self, text: str) -> None:
        """Show arithmetic on the post's own figures for a claim that is ``not checkable``."""
        if not self.verdict.startswith("not checkable"):
            raise ValueError(f"#{self.number}: note() is for 'not checkable' verdicts; check it")
        self.notes.append(text)
        print(f"#{self.number} {self.section}{_colon()}{text}")

    def part_names(self) -> list[str]:
        """The parts the claim was split into (``parts="a | b"``), or none."""
        return [x.strip() for x in self.parts.split("|") if x.strip()]

    def decide(
        self,
        name: str,
        holds: object,
        *,
        reproduced: str,
        contradicted: str,
        part: str = "",
        samples: Versus | None = None,
        within_noise: str | None = None,
        **values: object,
    ) -> str:
        """Let the run's numbers choose the verdict of a quantitative claim; print and record it.

        ``holds``: whether the run agrees with the post's figure. The sentence for each side is a
        template over ``values`` (:func:`labkit.measure.verdict`); the record is
        ``blog.verdict_<name>``, 1.0 for reproduced. Never raises on the outcome.

        A claim of several parts (the entry's ``parts="about 1 ms | 10-100x faster"``) is judged
        one part at a time: each call names its ``part``, the line says which part it judges, and
        the entry's outcome lists every part's word (an entry with parts needs a decide for each).

        A figure measured with repeats passes them as ``samples=`` (:func:`labkit.versus`, against
        the post's figure or bound) with a ``within_noise`` template: when the repeats fall on both
        sides of it, the outcome is "within noise", printed with the spread and recorded as 0.5.
        """
        from labkit.measure import verdict

        if not self.verdict.startswith(RUN):
            raise ValueError(f"#{self.number}: decide() needs verdict='{RUN}: ...' in the entry")
        if bool(part) != bool(self.parts) or (part and part not in self.part_names()):
            raise ValueError(
                f"#{self.number}: part={part!r}, but the entry's parts are {self.part_names()}: "
                "a claim of several parts is judged one named part at a time"
            )
        zh = lang.is_zh()  # the part's name and the verdict's word in the learner's language
        where = (f"（{lang.phrase(part)}）" if zh else f" ({part})") if part else ""
        colon = _colon()
        head = f"#{self.number} {self.section}{where}{colon}{{outcome}}{colon}"
        held = verdict(
            f"blog.verdict_{name}",
            holds,
            yes=head.format(outcome=said_word("reproduced")) + reproduced,
            no=head.format(outcome=said_word("contradicted")) + contradicted,
            within_noise=None
            if within_noise is None
            else head.format(outcome=said_word("within noise")) + within_noise,
            samples=samples,
            entry=self.number,
            **values,
        )
        within = samples is not None and samples.overlap
        word = Word("within noise" if within else "reproduced" if held else "contradicted")
        self.decided[part] = word
        if part:
            self.outcome = "; ".join(
                f"{k}: {self.decided[k]}" for k in self.part_names() if k in self.decided
            )
        else:
            self.outcome = word
        self.evidence.append(f"{word} ({name})")
        return word

    def problems(self) -> list[str]:
        """What this entry still lacks before its status is proved by what ran."""
        caught = checks.CAUGHT[self._caught_at :]
        self.failures = list(caught)
        out = []
        if self.verdict.startswith(RUN) and not self.outcome:
            out.append(f"verdict '{RUN}' but no e.decide(...) chose it")
        if undecided := [x for x in self.part_names() if x not in self.decided]:
            out.append(f"the claim's parts {undecided} were not judged (e.decide(..., part=...))")
        if not self.evidence and not self.notes:
            out.append("no check passed (call entry.check)")
        if self.status in FAILING and "`" in self.what and not caught:
            out.append(f"status {self.status!r} but no blog-error cell caught the blog's form")
        if self.status == "works" and caught:
            out.append(f"status 'works' but the blog's form failed: {caught}")
        return out


def ray_source(relative: str) -> str:
    """The text of a file of the installed Ray package (``relative`` to ``ray/``): a claim about
    Ray's internals is settled by the source that runs, not by a post."""
    import ray

    return (Path(ray.__file__).parent / relative).read_text(encoding="utf-8")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _lesson_links(taught: str, names: dict[str, str]) -> str:
    if not taught:
        return "here"
    return ", ".join(f"[{n}]({names.get(n, n)})" for n in taught.split(", "))


def table(entries: list[Entry]) -> str:
    """The summary table (markdown) a learner scans: one row per entry, in the posts' order."""
    names = {p.name[:2]: p.name for p in (repo_root() / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    rows = [
        "| # | post | entry | status | verdict | fix on Ray 2.60 | taught in |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        cells = (e.section, e.what, e.status, e.verdict, e.fix)
        row = " | ".join(_cell(c) for c in cells)
        rows.append(f"| {e.number} | {row} | {_lesson_links(e.taught, names)} |")
    counts = ", ".join(f"{n} {s}" for s, n in count(entries).items() if n)
    return "\n".join([*rows, "", f"{len(entries)} entries: {counts}."])


def count(entries: list[Entry]) -> dict[str, int]:
    """Entries per status, in :data:`STATUSES` order."""
    return {s: sum(e.status == s for e in entries) for s in STATUSES}


class Ledger:
    """The entries of one run, opened in order and each proved before the next opens."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def entry(self, section: str, what: str, status: str, **kwargs: str) -> Entry:
        """Close the previous entry (it must be proved) and open the next one."""
        self._close_last()
        e = Entry(section, what, status, number=len(self.entries) + 1, **kwargs)
        if self.entries and order_key(section) < order_key(self.entries[-1].section):
            raise ValueError(
                f"{section} comes before {self.entries[-1].section}: keep posts' order"
            )
        e._caught_at = len(checks.CAUGHT)
        self.entries.append(e)
        return e

    def _close_last(self) -> None:
        if self.entries and (missing := self.entries[-1].problems()):
            last = self.entries[-1]
            raise AssertionError(f"#{last.number} {last.section} {last.what}: {'; '.join(missing)}")

    def run_verdicts(self) -> str:
        """The verdicts this run chose (``e.decide``), as a markdown table, in entry order; in
        Chinese, each entry from ``zh/ledger.md`` (where its English is current) and each word
        through :data:`labkit.lang.LEDGER_WORDS`."""
        zh = lang.is_zh()
        head = (
            "| # | 博文 | 条目 | 本次运行的结论 |"
            if zh
            else "| # | post | entry | the run's verdict |"
        )
        rows = [head, "|---|---|---|---|"]
        chinese = lang.read_ledger() if zh else {}
        for e in self.entries:
            if e.outcome:
                en, cn = chinese.get(e.number, {}).get("entry", ("", ""))
                what = _cell(cn if cn and en == _cell(e.what) else e.what)
                outcome = (
                    "；".join(
                        f"{lang.phrase(k)}：{said_word(e.decided[k])}"
                        for k in e.part_names()
                        if k in e.decided
                    )
                    if zh and e.parts
                    else said_word(e.outcome)
                )
                rows.append(f"| {e.number} | {e.section} | {what} | {outcome} |")
        return "\n".join(rows)

    def finish(self, notebook: str | Path | None = None) -> dict[str, int]:
        """Prove the last entry, compare the run's table with the notebook's; counts by status."""
        self._close_last()
        path = Path(notebook) if notebook else repo_root() / "notebooks" / NOTEBOOK
        written = table_in(path)
        built = table(self.entries)
        if written != built:
            raise AssertionError(
                f"the table at the top of {path.name} differs from the entries that ran: "
                "run `labkit blog-table --write`"
            )
        return count(self.entries)


def _cells(path: Path) -> list[dict]:
    import nbformat

    return nbformat.read(path, as_version=4).cells


def _code_trees(path: Path) -> list[tuple[int, ast.Module]]:
    """(cell index, AST) of each code cell, IPython's ``%`` and ``!`` lines blanked."""
    return [
        (
            i,
            ast.parse(
                "\n".join(
                    "" if ln.lstrip().startswith(("%", "!")) else ln
                    for ln in cell.source.split("\n")
                )
            ),
        )
        for i, cell in enumerate(_cells(path))
        if cell.cell_type == "code"
    ]


def entries_in(path: str | Path) -> list[Entry]:
    """The entries a notebook opens, read from its code cells (``ledger.entry(...)`` calls)."""
    out: list[Entry] = []
    for _, tree in _code_trees(Path(path)):
        for node in ast.walk(tree):
            func = getattr(node, "func", None)
            if isinstance(func, ast.Attribute) and func.attr == "entry":
                if getattr(func.value, "id", None) != "ledger":
                    continue
                args = [ast.literal_eval(a) for a in node.args]
                kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
                out.append(Entry(*args, number=len(out) + 1, **kwargs))
    return out


def table_in(path: str | Path) -> str:
    """The table between the ledger markers in the notebook's markdown ('' if none)."""
    for cell in _cells(Path(path)):
        if cell.cell_type == "markdown" and BEGIN in cell.source:
            return cell.source.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    return ""


def sync_table(path: str | Path | None = None, write: bool = False) -> bool:
    """Whether the notebook's table matches its entries; ``write=True`` rewrites it to match."""
    import nbformat

    path = Path(path) if path else repo_root() / "notebooks" / NOTEBOOK
    built = table(entries_in(path))
    if table_in(path) == built:
        return True
    if not write:
        return False
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown" and BEGIN in cell.source:
            head, rest = cell.source.split(BEGIN, 1)
            cell.source = f"{head}{BEGIN}\n{built}\n{END}{rest.split(END, 1)[1]}"
            nbformat.write(nb, path)
            return True
    raise ValueError(f"{path.name} has no {BEGIN} ... {END} markdown cell")


def _is_constant(node: ast.AST, assigned: dict[str, ast.AST], depth: int = 0) -> bool:
    """Whether ``node`` is built from literals alone (names assigned literals included)."""
    if depth > 20:
        return False
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in assigned and _is_constant(assigned[node.id], assigned, depth + 1)
    if isinstance(node, ast.Call):  # round(3.2 / 1.8, 2), abs(...), min(...)
        pure = isinstance(node.func, ast.Name) and node.func.id in ("round", "abs", "min", "max")
        return pure and all(_is_constant(a, assigned, depth + 1) for a in node.args)
    children = list(ast.iter_child_nodes(node))
    simple = (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Tuple)
    return isinstance(node, simple) and all(
        _is_constant(c, assigned, depth + 1)
        for c in children
        if not isinstance(c, ast.operator | ast.unaryop | ast.cmpop | ast.boolop | ast.expr_context)
    )


def _weak(condition: ast.AST, assigned: dict[str, ast.AST]) -> str:
    """The :data:`WEAK` rule a check's condition breaks ('' if none)."""
    if _is_constant(condition, assigned):
        return WEAK[3]
    for node in ast.walk(condition):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
            return WEAK[1]
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, sides, sides[1:]):
            zero = (isinstance(op, ast.Gt | ast.GtE) and _zero(right)) or (
                isinstance(op, ast.Lt | ast.LtE) and _zero(left)
            )
            if zero:
                return WEAK[0]
            lengths = isinstance(op, ast.Eq) and any(
                _built_here(a, assigned) and isinstance(b, ast.Constant)
                for a, b in ((left, right), (right, left))
            )
            if lengths:
                return WEAK[2]
    return ""


_DISPLAYS = (ast.List, ast.Dict, ast.Set, ast.Tuple, ast.ListComp, ast.DictComp, ast.SetComp)


def _built_here(node: ast.AST, assigned: dict[str, ast.AST]) -> bool:
    """``len(name)`` of a container the cell built itself (a display, a comprehension, or
    ``ray.get`` of one): its length is the cell's own choice, not Ray's behaviour."""
    if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "len" and node.args):
        return False
    arg = node.args[0]
    value = assigned.get(arg.id) if isinstance(arg, ast.Name) else None
    if isinstance(value, ast.Call) and getattr(value.func, "attr", "") == "get" and value.args:
        value = value.args[0]  # ray.get([...]) returns as many results as refs
    return isinstance(value, _DISPLAYS)


def _zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0


def weak_checks(path: str | Path | None = None) -> list[str]:
    """Each ``e.check(condition, ...)`` in the notebook whose condition cannot fail: ``> 0``,
    ``isinstance``, ``len(...) == N`` or arithmetic on constants (:data:`WEAK`), as
    ``"cell N: rule: condition"``. Names are read across the notebook's code cells (a dict made
    in one cell and checked in the next is still the cell's own); a name assigned more than once
    is not a literal. Lesson 12's test requires none."""
    trees = _code_trees(Path(path) if path else repo_root() / "notebooks" / NOTEBOOK)
    targets = [
        (t.id, node.value)
        for _, tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    ]
    names = [name for name, _ in targets]  # a name set twice (try/except, a loop) is no literal
    assigned = {name: value for name, value in targets if names.count(name) == 1}
    out = []
    for i, tree in trees:
        for node in ast.walk(tree):
            func = getattr(node, "func", None)
            if isinstance(func, ast.Attribute) and func.attr == "check" and node.args:
                if rule := _weak(node.args[0], assigned):
                    out.append(f"cell {i}: {rule}: {ast.unparse(node.args[0])}")
    return out
