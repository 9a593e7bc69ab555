"""STYLE.md's verdict rule: markdown says what to look for, code prints what this run showed."""

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "bench").glob("*.ipynb"))
MARKER = "<!-- claim-ok:"
#: STYLE.md's rules: each needs every one of its patterns to match a sentence.
RULES = {
    "a comparative about this run": ("deixis", "comparative"),
    "a timing about this run": ("deixis", "timing"),
    "a fixed result": ("result",),
    "a fixed ratio": ("ratio",),
    "a figure from one run": ("approximate",),
}


def _patterns() -> dict[str, re.Pattern]:
    style = (ROOT / "STYLE.md").read_text(encoding="utf-8")
    block = style.split("```claims\n", 1)[1].split("```", 1)[0]
    out = {}
    for line in block.strip().splitlines():
        name, _, pattern = line.partition(": ")
        out[name] = re.compile(pattern, re.I)
    return out


PATTERNS = _patterns()


def _clean(markdown: str) -> str:
    markdown = re.sub(r"<!-- ledger: begin -->.*?<!-- ledger: end -->", " ", markdown, flags=re.S)
    markdown = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    keep, in_time = [], False
    for line in markdown.splitlines():
        stripped = line.lstrip()
        if not stripped or stripped.startswith("**"):
            in_time = stripped.startswith("**Time:**")
        if in_time or stripped.startswith(">"):
            continue  # the header's machine times; the posts' blockquotes
        keep.append(line)
    markdown = re.sub(r"`[^`]*`", "CODE", "\n".join(keep))
    markdown = re.sub(r"「[^」]*」", " ", markdown)
    return re.sub(r"\*\"[^\"]*\"\*", "QUOTE", markdown)


def sentences(markdown: str) -> list[str]:
    out = []
    blocks = re.split(r"\n\s*\n|\n(?=\s*(?:[*-]|\d+\.|#+)\s)", _clean(markdown))
    for block in blocks:
        for s in re.split(r"(?<=[.!?])\)?\s+(?=[A-Z*(\[])", " ".join(block.split())):
            if s.strip():
                out.append(s.strip())
    return out


def claims(markdown: str) -> list[tuple[str, str]]:
    """(rule, sentence) for each sentence that states a result of this run as fixed text."""
    out = []
    for s in sentences(markdown):
        if MARKER in s:
            continue
        for rule, names in RULES.items():
            if all(PATTERNS[n].search(s) for n in names):
                out.append((rule, s))
                break
    return out


def test_style_lists_every_pattern_the_rules_use():
    assert set(PATTERNS) == {n for names in RULES.values() for n in names}


@pytest.mark.parametrize(
    "planted",
    [
        "Measured here, Ray Data is 1.7x faster than the DataLoader.",
        "In the plot, the 100 ms tasks use the cores better.",
        "On this machine the first fit takes 12 s.",
        "Autocast halves the activations.",
        "The replicas follow the load, and requests keep flowing.",
        "On one machine it is not 10-100x below a pool's.",
        "The first result arrived after ~0.1 s.",
    ],
)
def test_a_planted_contradicting_sentence_fails(planted):
    text = f"## A section\n\nSome explanation first. {planted} Then what to look for."
    assert claims(text), planted
    assert not claims(text.replace(planted, planted[:-1] + " <!-- claim-ok: quoted -->."))


@pytest.mark.parametrize(
    "allowed",
    [
        "Watch whether the replica count follows the load.",
        '> **S2 §2.2:** 「平均调度延迟1ms，比传统框架快10-100倍」 — *"10-100x faster"*',
        "`TorchConfig` keeps its default of 1800 s, and DDP's bucket is 25 MB by default.",
        "Look for the ratio above 1: the candidate is faster than its baseline.",
    ],
)
def test_what_to_look_for_and_the_posts_figures_pass(allowed):
    assert not claims(allowed), claims(allowed)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_markdown_states_no_result_of_this_run(path):
    found = [
        f"cell {i}: {rule}: {s}"
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells)
        if cell.cell_type == "markdown"
        for rule, s in claims(cell.source)
    ]
    assert not found, (
        f"{path.name}: say what to look for, or print it from the run (labkit.verdict):\n"
        + "\n".join(found)
    )
