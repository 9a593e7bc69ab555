"""What ``labkit site`` writes: each executed notebook prepared for its page (a banner with the
run's facts, answers folded, the language switch), the index in English and Chinese, the
ledger's page and the kept results' pages. :mod:`labkit.tools.site` builds them;
:mod:`labkit.tools.site_check` checks the HTML.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from labkit.params import repo_root

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


#: Pages copied as they are, beside the README (its links reach them).
EXTRA_PAGES = ("README.zh", "TERMINOLOGY")


@dataclass
class Page:
    """One executed notebook on the site."""

    name: str  # 03_objects_and_memory, lab_tasks
    folder: str  # notebooks, bench
    source: Path  # the executed copy in the run
    run: dict = field(default_factory=dict)  # SIZE, device, machine, versions, when, seconds

    @property
    def doc(self) -> str:
        return f"{self.folder}/{self.name}"


def lessons_and_reports(run: Path) -> tuple[list[Page], list[str]]:
    """Every lesson and lab report: the run's executed copy, or (listed as missing) the
    repository's unexecuted one, so that every lesson has a page and every link resolves."""
    root = repo_root()
    pages, missing = [], []
    for folder, pattern in (("notebooks", "[0-9][0-9]_*.ipynb"), ("bench", "lab_*.ipynb")):
        for nb in sorted((root / folder).glob(pattern)):
            where = (run / nb.name, run / folder / nb.name, run / "executed" / nb.name)
            found = [f for f in where if f.exists()]
            pages.append(Page(nb.stem, folder, found[0] if found else nb))
            if not found:
                missing.append(nb.stem)
    return pages, missing


def run_facts(page: Page, nb: dict) -> dict:
    """What ran: SIZE, device, machine and versions from the run's records, and how long."""
    facts: dict = {}
    here = page.source.parent  # lab reports' records sit beside them or one folder up
    own = [d / f"{page.name}.jsonl" for d in (here, here.parent)]
    for records in [f for f in own if f.exists()] or sorted(here.parent.glob("*.jsonl")):
        lines = [ln for ln in records.read_text(encoding="utf-8").splitlines() if ln.strip()]
        if lines:  # records are appended run after run: the newest is this run's
            rec = json.loads(lines[-1])
            facts = {k: rec.get(k) for k in ("size", "device", "machine", "time")}
            break
    starts, ends = [], []
    for cell in nb.get("cells", []):
        ex = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in ex and "shell.execute_reply" in ex:
            starts.append(ex["iopub.execute_input"])
            ends.append(ex["shell.execute_reply"])
    if starts:
        t0, t1 = (
            datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (min(starts), max(ends))
        )
        facts["seconds"] = (t1 - t0).total_seconds()
        facts.setdefault("time", min(starts))
    if not facts.get("size"):  # papermill's injected parameters, when nothing was recorded
        facts["size"] = (
            nb.get("metadata", {}).get("papermill", {}).get("parameters", {}).get("SIZE")
        )
    return facts


def banner(facts: dict, title: str = "", lang: str = "en") -> str:
    """The note at the top of each page: the run it shows."""
    if not facts:
        if lang == "zh":
            return (
                "```{admonition} 不在本次运行中\n:class: warning\n"
                "这一页是课的原文，没有输出：构建网站的那次运行没有执行它。"
                "自己运行它，就能看到它的图表。\n```"
            )
        return (
            "```{admonition} Not in this run\n:class: warning\n"
            "This page is the lesson as written, without outputs: the run the site was built "
            "from did not execute it. Run it yourself to see its figures.\n```"
        )
    m = facts.get("machine") or {}
    when = str(facts.get("time") or "?")[:16].replace("T", " ")
    size, device = f"`SIZE={facts.get('size') or '?'}`", f"`DEVICE={facts.get('device') or '?'}`"
    versions = (
        f"Python {m.get('python', '?')}, Ray {m.get('ray', '?')}, torch {m.get('torch', '?')}"
    )
    if lang == "zh":
        gpu = f"{m.get('gpu_count', 1)} 块 {m['gpu']}" if m.get("gpu") else "无 GPU"
        machine = f"{m.get('cpus', '?')} 个 CPU、{m.get('memory_gb', '?')} GiB、{gpu}"
        took = f"，用时 {facts['seconds']:.0f} 秒" if facts.get("seconds") else ""
        return (
            f"```{{admonition}} {title or '本页展示的运行'}\n:class: note\n"
            f"{size}、{device}，运行在 {machine} 上；{versions.replace(', ', '、')}。"
            f"执行于 {when} UTC{took}。下面的数字和结论来自那次运行；你的会有所不同。\n```"
        )
    gpu = f", {m.get('gpu_count', 1)}x {m['gpu']}" if m.get("gpu") else ", no GPU"
    machine = f"{m.get('cpus', '?')} CPUs, {m.get('memory_gb', '?')} GiB{gpu}" if m else "?"
    took = f" in {facts['seconds']:.0f} s" if facts.get("seconds") else ""
    return (
        f"```{{admonition}} {title or 'The run on this page'}\n:class: note\n"
        f"{size}, {device} on {machine}; {versions}. Executed {when} UTC{took}. The figures "
        "and verdicts below are that run's; yours will differ.\n```"
    )


def _took(page: Page | None, unit: str = "s", absent: str = "-") -> str:
    """How long ``page`` took in the run (``absent`` when it did not run)."""
    if page and page.run.get("seconds"):
        return f"{page.run['seconds']:.0f} {unit}"
    return absent


def _toctrees(groups: list[tuple[str, list[str]]]) -> list[str]:
    """Hidden toctrees, one per caption: the theme's menus (the index's text links the pages)."""
    lines: list[str] = []
    for caption, docs in groups:
        lines += ["", "```{toctree}", ":hidden:", f":caption: {caption}", "", *docs, "```"]
    return lines


def has_zh() -> bool:
    """Whether the repository has a Chinese edition to build (``zh/``)."""
    return (repo_root() / "zh").is_dir()


def switch(doc: str, lang: str) -> str:
    """A link to the same page in the other edition (the Chinese one lives in ``zh/``)."""
    up = "../" * doc.count("/")
    if lang == "zh":
        return f'<p class="labkit-lang"><a href="{up}../{doc}.html">English</a></p>'
    return f'<p class="labkit-lang"><a href="{up}zh/{doc}.html">中文版</a></p>'


def prepare_notebook(
    nb: dict,
    facts: dict,
    *,
    answers: bool,
    lang: str = "en",
    doc: str = "",
    source: Path | None = None,
) -> dict:
    """The page's copy: the run's banner under the title, widget state out, answers collapsed;
    in the Chinese edition, the markdown from ``zh/`` (by cell id; nothing re-executed)."""
    from labkit.tools import zh

    nb = copy.deepcopy(nb)
    untranslated = False
    if lang == "zh" and source is not None:
        untranslated = not zh.path_for(source).exists()
        zh.translate(nb, source)
    nb.get("metadata", {}).pop("widgets", None)
    for cell in nb["cells"]:
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if "answer" in tags and not answers:
            tags.append("hide-cell")  # MyST-NB: code and outputs behind a toggle
        if "wrong" in tags:
            tags.append("remove-cell")  # a test's wrong answer: not for the page
        if cell["cell_type"] == "code":
            _outputs_for_the_page(cell)
    at = next((i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"), None)
    text = banner(facts, lang=lang)
    if untranslated:
        text += "\n\n这一课还没有翻译成中文（`labkit zh stale` 列出待翻译的单元格）。"
    if doc and has_zh():
        text = switch(doc, lang) + "\n\n" + text
    note = {"cell_type": "markdown", "metadata": {}, "source": text}
    if at is None:
        nb["cells"].insert(0, note)
    else:  # right under the title: the title cell split after its heading
        title, _, rest = "".join(nb["cells"][at]["source"]).partition("\n")
        nb["cells"][at]["source"] = title
        extra = [{"cell_type": "markdown", "metadata": {}, "source": rest}] if rest.strip() else []
        nb["cells"][at + 1 : at + 1] = [note, *extra]
    for i, cell in enumerate(nb["cells"]):
        cell["id"] = cell.get("id") or f"site-{i}"
    return nb


def _outputs_for_the_page(cell: dict) -> None:
    """A code cell's outputs without widget state, and its images' alt text where MyST-NB reads
    it: the cell's metadata, set only when every image in the cell has its own (so that an image
    without one still fails the check)."""
    kept = []
    for out in cell.get("outputs", []):
        data = out.get("data")
        if data and WIDGET_MIME in data:
            data.pop(WIDGET_MIME)
            if not data:
                continue
        kept.append(out)
    cell["outputs"] = kept
    images = [
        ((out.get("metadata") or {}).get(mime) or {}).get("alt")
        for out in kept
        for mime in out.get("data", {})
        if mime.startswith("image/")
    ]
    alts = [a for a in images if a]
    if alts and len(alts) == len(images):
        image = cell["metadata"].setdefault("mystnb", {}).setdefault("image", {})
        image["alt"] = "; ".join(dict.fromkeys(alts))


_ROW = re.compile(r"^\| (\d\d) \| \[`([^`]+)`\]\(([^)]+)\) \| (.*) \| ([^|]*) \|$")


_LAB_ROW = re.compile(r"^\| \[`(lab_\w+)\.ipynb`\]\(([^)]+)\) \| (.*) \|$")


_TIME = re.compile(r"\*\*Time:\*\*\s*([^.]*)")


def _title(nb_path: Path) -> str:
    """The notebook's first heading ("03 · Objects and memory")."""
    for cell in json.loads(nb_path.read_text(encoding="utf-8"))["cells"][:2]:
        if m := re.match(r"#\s+(.+)", "".join(cell["source"])):
            return m.group(1).strip()
    return nb_path.stem


def _learner_time(nb_path: Path) -> str:
    """The lesson header's time to work through ("about 45 min")."""
    for cell in json.loads(nb_path.read_text(encoding="utf-8"))["cells"][:3]:
        if m := _TIME.search("".join(cell["source"])):
            return m.group(1).replace(" to work through", "").strip()
    return ""


def index_page_zh(pages: list[Page], results: list[str]) -> str:
    """The Chinese edition's index: each lesson's Chinese title, its learner time, this run's
    time; the committed results (in English)."""
    from labkit.tools import zh

    root = repo_root()
    first = next((p for p in pages if p.run and p.folder == "notebooks"), None)
    lines = [
        "# Ray LabKit 中文版",
        "",
        switch("index", "zh"),
        "",
        "一套通过运行真实负载来教 **Ray 2.60** 的 Jupyter 笔记本。"
        "下面每一页都是某次运行执行过的一课：每个数字和结论都是在那次运行中、在横幅所写的机器上测得的。想自己运行，请看"
        "[准备工作](README.zh.md)；术语见[术语表](TERMINOLOGY.md)。",
        "",
    ]
    if first:
        facts = {k: v for k, v in first.run.items() if k != "seconds"}
        lines += [banner(facts, "这些页面展示的运行", lang="zh"), ""]
    lines += ["## 课程", "", "| # | 课 | 学习时间 | 本次运行 |", "|---|---|---|---|"]
    for page in (p for p in pages if p.folder == "notebooks"):
        source = root / "notebooks" / f"{page.name}.ipynb"
        blocks = zh.read(zh.path_for(source))
        first_cell = json.loads(source.read_text(encoding="utf-8"))["cells"][0]
        title = _title(source)
        if first_cell.get("id") in blocks:
            title = blocks[first_cell["id"]].text.split("\n", 1)[0].lstrip("# ").strip()
        else:
            title += "（尚未翻译）"
        learner = _learner_time(source).replace("about ", "约 ").replace(" min", " 分钟")
        took = _took(page, "秒", "不在本次运行中")
        lines.append(f"| {page.name[:2]} | [{title}]({page.doc}.ipynb) | {learner} | {took} |")
    lines += ["", "## 实验报告", "", "| 报告 | 本次运行 |", "|---|---|"]
    for page in (p for p in pages if p.folder == "bench"):
        took = _took(page, "秒", "不在本次运行中")
        lines.append(f"| [{page.name}]({page.doc}.ipynb) | {took} |")
    lines += [
        "",
        "## 博文核对",
        "",
        "[账本](ledger.md)：两篇博文的每段代码和每个论断，在 Ray 2.60 上逐一核对。",
    ]
    if results:
        lines += ["", "## 已提交的结果（英文）", ""]
        lines += [f"* [{Path(r).parent.as_posix()}]({r})" for r in results]
    lines += _toctrees(
        [
            ("课程", [p.doc for p in pages if p.folder == "notebooks"]),
            ("实验报告", [p.doc for p in pages if p.folder == "bench"]),
            ("更多", ["ledger", "README.zh", "TERMINOLOGY", "README", *(r[:-3] for r in results)]),
        ]
    )
    return "\n".join(lines) + "\n"


def _lesson_rows(readme: list[str], ran: dict[str, Page], missing: list[str]) -> list[str]:
    """The index's lesson rows: the README's curriculum table, with the learner's time and this
    run's."""
    root, rows = repo_root(), []
    for line in readme:
        if m := _ROW.match(line):
            num, file, link, learn, _smoke = m.groups()
            stem = Path(file).stem
            title = f"[{_title(root / link)}]({link})" + " (not in this run)" * (stem in missing)
            learner = _learner_time(root / "notebooks" / file)
            rows.append(f"| {num} | {title} | {learn} | {learner} | {_took(ran.get(stem))} |")
    return rows


def _lab_rows(readme: list[str], ran: dict[str, Page], missing: list[str]) -> list[str]:
    """The index's lab report rows: the README's table, with this run's time."""
    rows = []
    for line in readme:
        if m := _LAB_ROW.match(line):
            stem, link, rest = m.groups()
            cols = rest.split(" | ")[:3]
            title = f"[{stem}]({link})" + " (not in this run)" * (stem in missing)
            rows.append(f"| {title} | {' | '.join(cols)} | {_took(ran.get(stem))} |")
    return rows


def index_page(pages: list[Page], missing: list[str], results: list[str]) -> str:
    """The index: the README's curriculum and lab report tables, each with this run's time."""
    root = repo_root()
    ran = {p.name: p for p in pages}
    readme = (root / "README.md").read_text(encoding="utf-8").splitlines()
    first = next((p for p in pages if p.run and p.folder == "notebooks"), None)
    lines = [
        "# Ray LabKit",
        "",
        *([switch("index", "en"), ""] if has_zh() else []),
        "A workbook of Jupyter notebooks that teaches **Ray 2.60** by running real workloads. "
        "Each page below is a lesson as one run executed it: every figure and verdict was "
        "measured in that run, on the machine its banner names. To run them yourself, see "
        "[Set-up](README.md).",
        "",
    ]
    if first:
        facts = {k: v for k, v in first.run.items() if k != "seconds"}
        lines += [banner(facts, "The run these pages show"), ""]
    lines += [
        "## Lessons",
        "",
        "| # | lesson | what you learn | time to work through | this run |",
        "|---|---|---|---|---|",
    ]
    lines += _lesson_rows(readme, ran, missing)
    lines += [
        "",
        "## Lab reports",
        "",
        "The deeper measurements behind a lesson, each swept over sizes and machines.",
        "",
        "| report | from lesson | what it measures | knobs | this run |",
        "|---|---|---|---|---|",
    ]
    lines += _lab_rows(readme, ran, missing)
    lines += ["", "## The blogs, checked", ""]
    lines.append(
        "[The ledger](ledger.md): every snippet and claim of the two posts the kit grew from, "
        "run on Ray 2.60, with this run's verdicts."
    )
    if results:
        lines += ["", "## Committed results", ""]
        lines += [f"* [{Path(r).parent.as_posix()}]({r})" for r in results]
    more = ["ledger", "README", *EXTRA_PAGES, *(r.removesuffix(".md") for r in results)]
    lines += _toctrees(
        [
            ("Lessons", [p.doc for p in pages if p.folder == "notebooks"]),
            ("Lab reports", [p.doc for p in pages if p.folder == "bench"]),
            ("More", more),
        ]
    )
    return "\n".join(lines)


def ledger_page(pages: list[Page], missing: list[str]) -> str:
    """Lesson 12's summary table, and the verdicts this run chose."""
    from labkit import blog

    page = next((p for p in pages if p.name.startswith("12_")), None)
    lines = ["# The blogs, checked on Ray 2.60", ""]
    if page is None or page.name in missing:
        return "\n".join([*lines, "Lesson 12 is not in this run: its page shows the ledger.", ""])
    lines += [
        banner(page.run),
        "",
        f"Every snippet and claim of the two posts, as [lesson 12]({page.doc}.ipynb) checks "
        "them. The table is built from the lesson's entries; the verdicts after it are the ones "
        "this run's numbers chose.",
        "",
        re.sub(r"\]\((\d\d_\w+\.ipynb)", r"](notebooks/\1", blog.table_in(page.source)),
    ]
    nb = json.loads(page.source.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            md = "".join(out.get("data", {}).get("text/markdown", ""))
            if "the run's verdict" in md:
                lines += ["", "## This run's verdicts", "", md]
    return "\n".join(lines) + "\n"


def results_pages(src: Path) -> list[str]:
    """Copy ``results/`` (its READMEs and reports as pages, plots and data as files)."""
    root = repo_root()
    pages = []
    for f in sorted((root / "results").rglob("*")):
        if not f.is_file() or f.suffix == ".ipynb":
            continue
        rel = f.relative_to(root)
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, src / rel)
        if f.suffix == ".md":
            pages.append(rel.as_posix())
    return pages
