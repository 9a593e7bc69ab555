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
    "a change, as a figure": ("change",),
    "an approximate figure": ("about",),
    "a multiplier": ("multiplier",),
    "a duration": ("duration",),
    "a comparison": ("comparison",),
    "a figure, stated": ("figure",),
}
#: The Chinese edition's rules: one pattern each, read from STYLE.md's ``claims-zh`` block.
RULES_ZH = {
    "a change, as a figure": ("zh_change",),
    "an approximate figure": ("zh_about",),
    "a multiplier": ("zh_multiplier",),
    "a duration": ("zh_duration",),
    "a comparison": ("zh_comparison",),
    "a figure, stated": ("zh_figure",),
}


def _patterns(fence: str = "claims") -> dict[str, re.Pattern]:
    style = (ROOT / "STYLE.md").read_text(encoding="utf-8")
    block = style.split(f"```{fence}\n", 1)[1].split("```", 1)[0]
    out = {}
    for line in block.strip().splitlines():
        name, _, pattern = line.partition(": ")
        out[name] = re.compile(pattern, re.I)
    return out


PATTERNS = _patterns()
PATTERNS_ZH = _patterns("claims-zh")


def _clean(markdown: str) -> str:
    markdown = re.sub(r"<!-- ledger: begin -->.*?<!-- ledger: end -->", " ", markdown, flags=re.S)
    markdown = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    keep, in_time = [], False
    for line in markdown.splitlines():
        stripped = line.lstrip()
        if not stripped or stripped.startswith("**"):
            in_time = stripped.startswith(("**Time:**", "**时间：**"))
        if in_time or stripped.startswith(">"):
            continue  # the header's machine times; the posts' blockquotes
        keep.append(line)
    markdown = re.sub(r"`[^`]*`", "CODE", "\n".join(keep))
    markdown = re.sub(r"「[^」]*」", " ", markdown)
    markdown = re.sub(r"“[^”]*”", "QUOTE", markdown)  # the Chinese edition's glosses
    return re.sub(r"\*\"[^\"]*\"\*", "QUOTE", markdown)


def sentences(markdown: str) -> list[str]:
    out = []
    blocks = re.split(r"\n\s*\n|\n(?=\s*(?:[*-]|\d+\.|#+)\s)", _clean(markdown))
    for block in blocks:
        for s in re.split(r"(?<=[.!?])\)?\s+(?=[A-Z*(\[])", " ".join(block.split())):
            if s.strip():
                out.append(s.strip())
    return out


def sentences_zh(markdown: str) -> list[str]:
    """The Chinese edition's sentences: split after 。！？； and at line and list breaks."""
    out = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[*-]|\d+\.|#+)\s)", _clean(markdown)):
        for s in re.split(r"(?<=[。！？；])", " ".join(block.split())):
            if s.strip():
                out.append(s.strip())
    return out


def claims(markdown: str, lang: str = "en") -> list[tuple[str, str]]:
    """(rule, sentence) for each sentence that states a result of this run as fixed text."""
    rules, patterns = (RULES_ZH, PATTERNS_ZH) if lang == "zh" else (RULES, PATTERNS)
    out = []
    for s in sentences_zh(markdown) if lang == "zh" else sentences(markdown):
        if MARKER in s:
            continue
        for rule, names in rules.items():
            if all(patterns[n].search(s) for n in names):
                out.append((rule, s))
                break
    return out


def test_style_lists_every_pattern_the_rules_use():
    assert set(PATTERNS) == {n for names in RULES.values() for n in names}
    assert set(PATTERNS_ZH) == {n for names in RULES_ZH.values() for n in names}


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
        # the forms a writer uses without "here" (issue 40): each rule, more than once
        "Batching raised throughput by 24%.",
        "The cache cuts each request's latency by 40 ms.",
        "Serve adds roughly 15 ms to each request.",
        "A pull from another node costs about 3 s per gigabyte.",
        "Ray Data streams twice as fast as the loop.",
        "The pool is three times faster than a loop.",
        "On 16 machines it ran 28x faster.",
        "The first batch arrives in under a second.",
        "At smoke an epoch is a fraction of a second.",
        "Ray Data is faster than the DataLoader.",
        "The batched app was much slower than the plain one.",
        "The p99 was 2626 ms.",
        "The update finished in 3 s.",
        "The pull ran at 0.47 GB/s.",
        "Throughput was 1.33x the baseline's.",
        "It is 3 times the throughput.",
        "Ray Data is faster than the DataLoader when batches are big.",
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
        "Whether Ray Data is faster than a DataLoader is measured in lesson 06.",
        "Split the CPUs: half the CPUs for the data stages, half for training.",
        "Halving the range takes about 30 requests.",
        "If the pool is faster than the loop, the tasks were big enough.",
        "Ray's default timeout is 1800 s, and the blog's change lowers it by 1500 s.",
    ],
)
def test_what_to_look_for_and_the_posts_figures_pass(allowed):
    assert not claims(allowed), claims(allowed)


@pytest.mark.parametrize(
    "planted",
    [
        "攒批把吞吐量提高了 24%。",
        "Serve 给每个请求增加大约 15 毫秒。",
        "Ray Data 比循环快了两倍。",
        "它快了 28 倍。",
        "第一批数据不到一秒就到了。",
        "Ray Data 比 DataLoader 快得多。",
        "每个请求的延迟是 15 毫秒左右。",
        "吞吐量是基线的 1.33 倍。",
        "p99 是 2626 毫秒。",
        "更新在 3 秒内完成。",
        "第一个结果在 ~0.1 秒后到达。",
    ],
)
def test_a_planted_chinese_sentence_fails(planted):
    text = f"## 一节\n\n先解释一下。{planted}然后说要看什么。"
    assert claims(text, "zh"), planted
    marked = text.replace(planted, planted[:-1] + " <!-- claim-ok: quoted -->。")
    assert not claims(marked, "zh")


@pytest.mark.parametrize(
    "allowed",
    [
        "Ray Data 是否比 DataLoader 快，在第 06 课测量（CODE）。",
        "默认超时是 1800 秒，所以博文的“增加到 300 秒”其实是把它调低了。",
        "博文的“节省 30-50% 显存”是关于某一个负载的说法。",
        "比较两次运行中最慢的那个请求。",
    ],
)
def test_chinese_what_to_look_for_and_the_posts_figures_pass(allowed):
    assert not claims(allowed, "zh"), claims(allowed, "zh")


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


ZH_FILES = sorted((ROOT / "zh").glob("*/*.md"))


@pytest.mark.parametrize("path", ZH_FILES, ids=lambda p: p.stem[:8])
def test_chinese_markdown_states_no_result_of_this_run(path):
    from labkit.tools import zh

    found = [
        f"cell {cell}: {rule}: {s}"
        for cell, block in zh.read(path).items()
        for rule, s in claims(block.text, "zh")
    ]
    assert not found, (
        f"zh/{path.parent.name}/{path.name}: say what to look for, or print it from the run:\n"
        + "\n".join(found)
    )
