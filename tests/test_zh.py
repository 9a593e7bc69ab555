"""中文版: the Chinese kept in step with the English (the drift test), and read as a reader of the
posts would: the glossary's spellings, Chinese punctuation, the posts' quotes verbatim."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from labkit import lang
from labkit.params import repo_root
from labkit.tools import exercises, zh

ROOT = repo_root()
COMPLETE = zh.notebooks()  # every lesson and lab report in notebooks/ and bench/
CJK = r"\u3400-\u9fff"


def glossary() -> tuple[list[dict], list[dict]]:
    """TERMINOLOGY.md's two tables: (terms given with their English on first use, the rest)."""
    tables: list[list[dict]] = []
    for line in (ROOT / "TERMINOLOGY.md").read_text().splitlines():
        if line.startswith("| English"):
            tables.append([])
        elif line.startswith("|") and not line.startswith("|---") and tables:
            en, cn, rejected, _note = (c.strip() for c in line.strip("|").split("|"))
            bad = [r.strip() for r in rejected.split(",") if r.strip()]
            tables[-1].append({"en": en, "zh": cn, "rejected": bad})
    return tables[0], tables[1]


def chinese_cells(path: Path) -> list[tuple[str, str, str]]:
    """(cell id, English, Chinese) of each markdown cell, in order."""
    blocks = zh.read(zh.path_for(path))
    cells = json.loads(path.read_text())["cells"]
    return [
        (c["id"], "".join(c["source"]), blocks[c["id"]].text)
        for c in cells
        if c["cell_type"] == "markdown" and c["id"] in blocks
    ]


def prose(text: str) -> str:
    """What a reader reads as sentences: headings (a title carries no gloss), code, quotes,
    links' targets and HTML taken out."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"<!-- ledger: begin -->.*?<!-- ledger: end -->", " ", text, flags=re.S)
    text = re.sub(r"(?m)^#+ .*$", " ", text)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\$[^$\n]+\$", " ", text)  # formulas
    text = re.sub(r"「[^」]*」", " ", text)
    text = re.sub(r"《[^》]*》", " ", text)  # a book's or a post's title, verbatim
    text = re.sub(r"\[[^\]]*\]\((?:\.\./\w+/)?(?:\d\d_|lab_)[^)]*\)", " ", text)  # a title
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.sub(r"<[^>]+>", " ", text)


def repo_copy(tmp_path: Path, monkeypatch, src: Path) -> Path:
    """A repository of one lesson and its Chinese, for planting edits in: the copied lesson."""
    root = tmp_path / "repo"
    for sub in ("notebooks", "zh/notebooks"):
        (root / sub).mkdir(parents=True)
    shutil.copy(src, root / "notebooks" / src.name)
    shutil.copy(zh.path_for(src), root / "zh" / "notebooks" / f"{src.stem}.md")
    monkeypatch.setattr(zh, "repo_root", lambda: root)
    return root / "notebooks" / src.name


# ---- kept in step -------------------------------------------------------------------------


@pytest.mark.parametrize("path", COMPLETE, ids=lambda p: p.stem)
def test_every_markdown_cell_has_current_chinese(path):
    """The drift test: a cell with no Chinese, or whose English changed after its Chinese was
    written, fails here naming the notebook, the cell and the first changed line. A cell
    marked stale on purpose (``labkit zh mark``) passes, and ``labkit zh stale`` lists it."""
    silent = [s for s in zh.stale(path) if s.why != "marked stale"]
    assert not silent, "\n".join(map(str, silent)) + "\n(update zh/, then `labkit zh sign`)"


def test_a_planted_english_edit_is_caught_and_a_signed_update_clears_it(tmp_path, monkeypatch):
    src = ROOT / "notebooks" / "00_welcome_and_setup.ipynb"
    path = repo_copy(tmp_path, monkeypatch, src)
    assert zh.stale(path) == []
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    lines = "".join(cell["source"]).split("\n")
    lines[2] = lines[2].replace("say what the parts of Ray are", "name Ray's parts")
    cell["source"] = "\n".join(lines)
    path.write_text(json.dumps(nb))
    (found,) = zh.stale(path)
    assert (found.notebook, found.cell) == (src.name, cell["id"])
    assert (
        found.why.startswith("the English changed at line 3:") and "name Ray's parts" in found.why
    )
    zh.mark(path, [cell["id"]])
    assert [s.why for s in zh.stale(path)] == ["marked stale"]
    assert zh.sign(path, [cell["id"]]) == [cell["id"]]  # the translator updated the Chinese
    assert zh.stale(path) == []


def test_the_language_comes_from_labkit_lang_never_lang(monkeypatch):
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.delenv("LABKIT_LANG", raising=False)
    assert zh.language() == "en"
    monkeypatch.setenv("LABKIT_LANG", "zh")
    assert zh.language() == "zh"
    with pytest.raises(ValueError, match="choose one of: en, zh"):
        zh.language("fr")


# ---- read as a reader would ---------------------------------------------------------------


@pytest.mark.parametrize("path", COMPLETE, ids=lambda p: p.stem)
def test_glossary_spellings_and_the_english_on_first_use(path):
    terms, words = glossary()
    text = "\n".join(cn for _, _, cn in chinese_cells(path))
    code = zh.read_code(zh.path_for(path))  # comments and printed lines: no rejected spelling
    said = "\n".join(cn for pairs in code.values() for _, cn in pairs)
    quoted = re.sub(r"「[^」]*」", " ", text)  # the posts' own words may spell a term their way
    problems = []
    every = terms + words
    for term in every:
        for bad in term["rejected"]:
            longer = [t["zh"] for t in every if bad in t["zh"] and t["zh"] != bad]
            masked = f"{quoted}\n{said}"
            for t in longer:
                masked = masked.replace(t, "□" * len(t))
            if bad in masked:
                problems.append(f"{bad!r}: the glossary spells {term['en']!r} as {term['zh']!r}")
    masked = prose(text)
    for term in sorted(terms, key=lambda t: -len(t["zh"])):
        if term["zh"].lower() == term["en"].lower() or term["zh"] not in masked:
            continue
        at = masked.index(term["zh"]) + len(term["zh"])
        after = masked[at : at + len(term["en"]) + 8].lower()
        if not re.match(rf"[*_\s]*[（(]\s*{re.escape(term['en'].lower())}", after):
            problems.append(f"{term['zh']!r}: first use without '（{term['en']}）' after it")
        masked = masked.replace(term["zh"], "□" * len(term["zh"]))
    assert not problems, f"{path.stem}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", COMPLETE, ids=lambda p: p.stem)
def test_chinese_cells_read_as_chinese(path):
    problems = []
    for cell, _en, cn in chinese_cells(path):
        text = prose(cn)
        glossless = re.sub(r"（[A-Za-z][A-Za-z ,-]*）", " ", text)  # the required English glosses
        cjk = len(re.findall(f"[{CJK}]", glossless))
        latin = len(re.findall(r"[A-Za-z]", glossless))
        if latin > cjk and latin + cjk > 20:  # a cell that is all quote has no prose to judge
            problems.append(f"cell {cell}: mostly Latin letters ({latin} against {cjk} CJK)")
        for m in re.finditer(rf"[{CJK}]([,;:?!]|\.(?=\s|$))", text):
            problems.append(f"cell {cell}: half-width {m.group(1)!r} in {m.group(0)!r}")
        for m in re.finditer(r"[）)]\s*[（(]", text):  # a gloss then a bracket: reword
            problems.append(
                f"cell {cell}: brackets back to back: {text[m.start() - 8 : m.end() + 8]!r}"
            )
        for m in re.finditer(rf'"[^"\n]*[{CJK}][^"\n]*"', text):
            problems.append(f"cell {cell}: straight quotes around Chinese: {m.group(0)[:40]!r}")
    assert not problems, f"{path.stem}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", COMPLETE, ids=lambda p: p.stem)
def test_the_posts_quotes_are_identical_to_the_english_copys(path):
    for cell, en, cn in chinese_cells(path):
        for quote in re.findall(r"「[^」]*」", en):
            assert quote in cn, f"{path.stem}, cell {cell}: the quote {quote} is not verbatim"


RATIO_WORDING = re.compile(
    r"(?:快|慢|提高|加快|降低|减少)了?\s*(?:\{[^}]*\}|[\d.]+(?:-[\d.]+)?)\s*倍"
)


def number_wording_problems(text: str) -> list[str]:
    """「快了 N 倍」-style ratios outside the posts' quotes (TERMINOLOGY.md's Numbers rule)."""
    text = re.sub(r"「[^」]*」", " ", text)
    return [m.group(0) for m in RATIO_WORDING.finditer(text)]


def test_one_verdict_key_carries_one_sentence(tmp_path, monkeypatch):
    """Issue 41: a key two notebooks give different English (07 and a lab report did) leaves
    one of them without Chinese; the staleness check names the key."""
    cells = []
    for english in ("sped up {x}", "ran {x} faster"):
        src = f"labkit.verdict('tasks.verdict_same', True, yes='{english}', no='no {{x}}', x=1)"
        cells.append({"cell_type": "code", "source": src, "metadata": {}, "outputs": []})
    paths = []
    for i, cell in enumerate(cells):
        path = tmp_path / f"0{i}_planted.ipynb"
        path.write_text(json.dumps({"cells": [cell]}))
        paths.append(path)
    monkeypatch.setattr(zh, "notebooks", lambda *a: paths)
    found = [s for s in zh.stale_verdicts() if "different English" in s.why]
    assert [s.cell for s in found] == ["tasks.verdict_same:yes"]


def test_a_checks_success_line_speaks_chinese():
    """Issue 41: the line a passing check prints is the learner's too ("✓ correct")."""
    source = 'assert x == 1, f"expected 1, got {x}"\nprint("✓ correct:", x)'
    assert zh.check_messages(source) == ['f"expected 1, got {x}"', '"✓ correct:"']
    pairs = [('"✓ correct:"', '"✓ 正确："')]
    assert 'print("✓ 正确：", x)' in zh.translate_code(source, pairs)
    said = [
        m
        for p in zh.notebooks()
        for c in json.loads(p.read_text())["cells"]
        if "check" in c["metadata"].get("tags", [])
        for m in zh.check_messages("".join(c["source"]))
        if "✓" in m
    ]
    assert len(said) >= 20  # every lesson's checks print one


def test_the_number_wording_rule_catches_its_planted_forms():
    planted = ["快了 1.30 倍", "慢 {slower:.0f} 倍", "比 fp32 快 {speedup:.2f} 倍", "提高了 2 倍"]
    assert all(number_wording_problems(s) for s in planted)
    kept = ["速度是 fp32 的 {speedup:.2f} 倍", "加速比 1.30", "「比传统框架快10-100倍」"]
    assert not any(number_wording_problems(s) for s in kept)


def test_ratios_and_bounds_are_worded_the_chinese_way():
    """Issue 41: ratios as 「是……的 N 倍」 or 「加速比 N」; "at least" and "up to" never flipped."""
    texts = sorted((ROOT / "zh").rglob("*.md")) + [ROOT / "README.zh.md"]
    problems = [
        f"{path.relative_to(ROOT)}: {bad}"
        for path in texts
        for bad in number_wording_problems(path.read_text(encoding="utf-8"))
    ]
    for key, (en, cn) in lang.read_verdicts().items():
        if re.search(r"\bat least\b", en) and "以内" in cn:
            problems.append(f"verdict {key}: 'at least' worded as 以内")
        if re.search(r"\b(up to|at most|within \d)", en) and re.search("以上|至少", cn):
            problems.append(f"verdict {key}: 'up to' worded as 以上")
    assert not problems, "\n  ".join(["see TERMINOLOGY.md, Numbers:", *problems])


def test_glossary_terms_are_listed_once():
    terms, words = glossary()
    names = [t["en"] for t in terms + words]
    spellings = [t["zh"] for t in terms + words]
    assert len(set(names)) == len(names) and len(set(spellings)) == len(spellings)


# ---- the Chinese learner copies -----------------------------------------------------------


def test_a_chinese_learner_copy_has_chinese_prose_and_the_chinese_check_message(tmp_path):
    written = [o.path for o in exercises.write_learner_copies(tmp_path, lang="zh")]
    copy = nbformat.read(next(p for p in written if p.name.startswith("01_")), as_version=4)
    lesson = nbformat.read(ROOT / "notebooks" / "01_remote_tasks.ipynb", as_version=4)
    assert copy.cells[0].source.startswith("# 01 · ")
    assert copy.cells[0].source != lesson.cells[0].source
    code = [c.source for c in copy.cells if c.cell_type == "code"]
    assert any("还没有设置" in s for s in code) and not any("is not set yet" in s for s in code)
    zh_lesson = zh.translate(nbformat.read(ROOT / "notebooks" / "01_remote_tasks.ipynb", 4),
                             ROOT / "notebooks" / "01_remote_tasks.ipynb")  # fmt: skip
    assert exercises.copy_problems(zh_lesson, copy, "zh", lesson="01_remote_tasks.ipynb") == []


@pytest.mark.notebook
@pytest.mark.ray
def test_the_chinese_lesson_01_runs_end_to_end(tmp_path, monkeypatch):
    """The Chinese copy is the English lesson with its markdown swapped: it runs as the lesson
    does, exercises and their Chinese learner cells included (``make test``'s runner)."""
    from labkit.tools import nbrun

    monkeypatch.setenv("LABKIT_RESULTS_DIR", str(tmp_path / "results"))
    lesson = ROOT / "notebooks" / "01_remote_tasks.ipynb"
    copy = tmp_path / "notebooks" / lesson.name  # same name: the Chinese probes run too
    copy.parent.mkdir()
    nbformat.write(zh.translate(nbformat.read(lesson, as_version=4), lesson), copy)
    run = nbrun.run_lesson(copy, out=tmp_path / "out" / lesson.name)
    said = [what for _, ok, what in run["exercises"] if ok]
    assert len(said) == len(run["exercises"]) >= 4  # two exercises, in English and in Chinese
    executed = nbformat.read(tmp_path / "out" / lesson.name, as_version=4)
    assert executed.cells[0].source.startswith("# 01 · 远程任务")


def test_every_row_of_lesson_12s_table_has_current_chinese(tmp_path, monkeypatch):
    """Issue 41: the table's entry, verdict and fix columns read in Chinese, each row from
    zh/ledger.md beside the English it translates; a changed English row shows as stale."""
    assert zh.stale_ledger() == [], "\n".join(map(str, zh.stale_ledger()))
    from labkit import blog

    rows = lang.read_ledger()
    assert len(rows) >= 77 and all(zh_ for f in rows.values() for _en, zh_ in f.values())
    path = ROOT / "notebooks" / blog.NOTEBOOK
    table = zh.ledger_table(blog.table_in(path))
    assert f"| 1 | S0 §1 | {rows[1]['entry'][1]} |" in table  # the real row, in Chinese
    planted = tmp_path / "ledger.md"
    text = lang.ledger_path().read_text(encoding="utf-8")
    planted.write_text(text.replace("entry-en: ", "entry-en: (changed) ", 1), encoding="utf-8")
    monkeypatch.setattr(lang, "ledger_path", lambda: planted)
    (found,) = [s for s in zh.stale_ledger() if s.cell.endswith("entry")]
    assert found.why == "the English changed"
    assert "| 误导 |" in zh.ledger_table("| 1 | S0 §1 | x | misleading |  |  | here |")


def test_lesson_12s_table_is_the_english_one_through_the_fixed_map():
    from labkit import blog

    path = ROOT / "notebooks" / "12_from_the_blog_to_ray_2_60.ipynb"
    block = next(cn for _, en, cn in chinese_cells(path) if blog.BEGIN in en)
    table = block.split(blog.BEGIN, 1)[1].split(blog.END, 1)[0].strip()
    assert table == zh.ledger_table(blog.table_in(path))
    assert "| 误导 |" in table and "| misleading |" not in table


def test_every_verdict_sentence_has_current_chinese_with_the_same_fields():
    import string

    from labkit import lang

    assert zh.stale_verdicts() == [], "\n".join(map(str, zh.stale_verdicts()))
    fields = string.Formatter()
    for key, (en, cn) in lang.read_verdicts().items():
        names = [{p[1] for p in fields.parse(t) if p[1]} for t in (en, cn)]
        assert names[0] == names[1], f"{key}: the Chinese names other fields: {names}"


def test_a_changed_english_verdict_falls_back_to_english_and_is_stale(monkeypatch, fresh_params):
    from labkit import lang

    key, (en, cn) = next(iter(lang.read_verdicts().items()))
    templates = dict(zh.verdict_templates())
    templates[key] = (en + " (edited)", templates[key][1])
    monkeypatch.setattr(zh, "verdict_templates", lambda: templates)
    (found,) = zh.stale_verdicts()
    assert found.cell == key and found.why.startswith("the English verdict changed")
    monkeypatch.setenv("LABKIT_LANG", "zh")
    assert lang.verdict_template(key, en) == cn
    assert lang.verdict_template(key, en + " (edited)") == en + " (edited)"
    monkeypatch.setenv("LABKIT_LANG", "en")
    assert lang.verdict_template(key, en) == en


def test_verdict_prints_the_chinese_sentence(monkeypatch, fresh_params, results_dir, capsys):
    from labkit import measure
    from labkit.params import setup

    monkeypatch.setenv("LABKIT_LANG", "zh")
    setup("01_remote_tasks")
    measure.verdict(
        "tasks.verdict_pays_off", True, yes="the shortest task length that beat the loop: "
        "{shortest} ms", no="no task length in this sweep beat the loop", shortest=10
    )  # fmt: skip
    assert capsys.readouterr().out.strip() == "打败循环的最短任务长度：10 ms"


def test_a_spliced_phrase_prints_in_chinese_and_an_untranslated_one_is_stale(
    monkeypatch, fresh_params, results_dir, capsys, tmp_path
):
    """Issue 41: words a lesson splices into a verdict ({why}, {hint}) follow the language;
    the record keeps the English, and a phrase with no Chinese shows as stale."""
    from labkit import lang, measure
    from labkit.measure import read_records
    from labkit.params import setup

    monkeypatch.setenv("LABKIT_LANG", "zh")
    setup("07_train_ddp_amp")
    why = "this CPU has no bf16 instructions, and casting costs time"
    measure.verdict(
        "amp.verdict_faster", False, speedup=0.8, why=why,
        yes="AMP was {speedup:.2f}x faster than fp32",
        no="AMP was not faster ({speedup:.2f}x): {why}",
    )  # fmt: skip
    out = capsys.readouterr().out.strip()
    assert (
        out == "AMP 没有更快（速度是 fp32 的 0.80 倍）：这个 CPU 没有 bf16 指令，而类型转换要花时间"
    )
    assert read_records(results_dir)[-1]["context"]["why"] == why
    assert lang.phrase(42) == 42 and lang.phrase("loopback") == "loopback"
    planted = tmp_path / "09_planted.ipynb"
    src = "labkit.verdict('serve.verdict_x', True, yes='{w}', no='{w}', w='a phrase nobody wrote')"
    planted.write_text(json.dumps({"cells": [{"cell_type": "code", "source": src}]}))
    monkeypatch.setattr(zh, "notebooks", lambda *a: [planted])
    assert [s.why for s in zh.stale_verdicts() if "phrase" in s.cell] == ["no Chinese phrase"]


def test_code_comments_are_translated_and_nothing_else():
    src = 'x = "# not a comment"  # a comment\n# another\n%time y = 1  # magic line'
    pairs = [("# a comment", "# 一条注释"), ("# another", "# 另一条"), ("# not a comment", "X")]
    out = zh.translate_code(src, pairs)
    assert out.split("\n")[:2] == ['x = "# not a comment"  # 一条注释', "# 另一条"]
    assert out.split("\n")[2] == "%time y = 1  # magic line"  # IPython lines are not parsed


def test_a_changed_code_comment_is_stale(tmp_path, monkeypatch):
    path = repo_copy(tmp_path, monkeypatch, ROOT / "notebooks" / "01_remote_tasks.ipynb")
    assert zh.stale(path) == []
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if "# captures the global array" in "".join(c["source"]))
    cell["source"] = "".join(cell["source"]).replace("captures the global", "closes over the")
    path.write_text(json.dumps(nb))
    whys = sorted(s.why for s in zh.stale(path))
    assert whys == [
        "no Chinese for '# closes over the array'",
        "the English comment changed or went: '# captures the global array'",
    ]


def test_the_kits_own_errors_and_doctor_speak_chinese_when_asked(monkeypatch, fresh_params):
    from labkit import lang
    from labkit.contract import ParameterError
    from labkit.params import setup

    monkeypatch.setenv("LABKIT_LANG", "zh")
    with pytest.raises(ParameterError, match="无效；可选值：smoke、small、full"):
        setup("00_welcome_and_setup", SIZE="huge")
    with pytest.raises(ParameterError, match="请用 0 到 2\\*\\*32 - 1 之间的整数"):
        setup("00_welcome_and_setup", SEED=-1)
    monkeypatch.setenv("LABKIT_LANG", "fr")  # a bad LABKIT_LANG never hides the real error
    with pytest.raises(ParameterError, match="choose one of: smoke, small, full"):
        setup("00_welcome_and_setup", SIZE="huge")
    assert lang.display_width("内存") == 4 and lang.display_width("ray") == 3
    from labkit.tools.doctor import report

    assert set(report()) <= set(lang.DOCTOR_LABELS), "a doctor line without a Chinese label"


def test_device_error_in_chinese(monkeypatch):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA is here: DEVICE=cuda does not fail")
    from labkit.device import DeviceError, choose

    monkeypatch.setenv("LABKIT_LANG", "zh")
    with pytest.raises(DeviceError, match="要求了 DEVICE='cuda'，但 torch .*在这里用不了 CUDA"):
        choose("cuda")


# ---- what the kit prints, in the learner's language (issue 41) ---------------------------------


def test_the_words_a_cell_prints_are_found_and_translated_whole():
    src = (
        "x = 2\n"
        'bound = "so it was fast" if x else "so it was slow"\n'
        'label = "one label"  # read again below: a plot label stays English\n'
        'print("the value is", f"{x:.2f} per second, {bound}")\n'
        'e.check(x > 1, (f"two gets "\n    "share one buffer"))\n'
        'e.decide("n", x > 1, reproduced="held at {v}", contradicted="missed at {v}", v=x)\n'
        'with labkit.expected_errors("the worker dies on purpose"):\n'
        "    pass\n"
        'print(f"{label}: {x}", "x")\n'
        "plot(label)\n"
    )
    said = [zh.said_key(t) for _, _, t in zh.said_literals(src)]
    assert said == [
        '"so it was fast"',
        '"so it was slow"',
        '"the value is"',
        'f"{x:.2f} per second, {bound}"',
        'f"two gets " ⏎ "share one buffer"',
        '"held at {v}"',
        '"missed at {v}"',
        '"the worker dies on purpose"',
    ]
    pairs = [('f"{x:.2f} per second, {bound}"', 'f"每秒 {x:.2f}，{bound}"')]
    pairs += [('f"two gets " ⏎ "share one buffer"', 'f"两次 get 共用一个缓冲区"')]
    out = zh.translate_code(src, pairs)
    assert 'print("the value is", f"每秒 {x:.2f}，{bound}")' in out
    assert 'e.check(x > 1, (f"两次 get 共用一个缓冲区"))' in out
    assert '"so it was fast"' in zh.translate_code(src, [], frozenset({"bound"}))
    assert [t for *_, t in zh.said_literals(src, frozenset({"bound"}))][0] == '"the value is"'


@pytest.mark.parametrize("path", COMPLETE, ids=lambda p: p.stem)
def test_every_printed_line_has_chinese_with_the_same_fields(path):
    """A printed literal's Chinese is one literal of the same kind (f-string or not) with the
    same fields: the Chinese copy runs the same code and prints the same numbers."""
    import ast

    def kind(source: str) -> str:
        return type(ast.parse(source, mode="eval").body).__name__

    code = zh.read_code(zh.path_for(path))
    problems = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        printed = {zh.said_key(t) for _, _, t in zh.said_literals("".join(cell["source"]))}
        for en, cn in code.get(cell.get("id"), []):
            if en not in printed:
                continue
            if "\n" in cn or kind(en.replace(" ⏎ ", " ")) != kind(cn):
                problems.append(f"{cell['id']}: {cn[:60]!r} is not one literal like {en[:40]!r}")
            elif sorted(zh.fields(en)) != sorted(zh.fields(cn)) or not re.search(f"[{CJK}]", cn):
                problems.append(f"{cell['id']}: {cn[:60]!r} has other fields than {en[:40]!r}")
    assert not problems, "\n".join(problems)


def test_the_kits_own_lines_speak_chinese_when_asked(monkeypatch, tmp_path):
    from labkit import train

    assert zh.stale_messages() == [], "\n".join(map(str, zh.stale_messages()))
    resources = {"CPU": 2, "GPU": 1}
    english = train.plan_workers(resources, gpus_are_logical=True, use_gpu=False).reason
    monkeypatch.setenv("LABKIT_LANG", "zh")
    chinese = train.plan_workers(resources, gpus_are_logical=True, use_gpu=False).reason
    assert "leaving 1 for Ray Data" in english and "留 1 个给 Ray Data" in chinese
    assert lang.say("{n} real", n=2) == "2 个真实 GPU"
    from labkit.params import setup
    from labkit.tools import doctor

    table = doctor.table({"memory": "共 1.0 GiB", "cpu cores": "2 个逻辑核"}).split("\n")
    assert table == ["内存      共 1.0 GiB", "CPU 核数  2 个逻辑核"]  # padded by width on screen
    monkeypatch.delenv("LABKIT_SIZE", raising=False)
    assert "SIZE        small  (默认值)" in setup("00_welcome_and_setup", SIZE=None).describe()
    assert lang.say("no such line {n}", n=2) == "no such line 2"  # no Chinese: the English
    planted = tmp_path / "labkit"
    planted.mkdir()
    (planted / "m.py").write_text('from labkit import lang\nlang.say("a line nobody translated")\n')
    assert zh.said_by_the_kit(planted) == {"a line nobody translated": "labkit/m.py"}
    monkeypatch.setattr(zh, "said_by_the_kit", lambda: {"a line nobody translated": "labkit/m.py"})
    whys = {s.why for s in zh.stale_messages()}
    assert {"no Chinese message", "no code says it (remove)"} <= whys


def test_english_lines_finds_the_kits_english_and_leaves_rays_words():
    def out(text: str, name: str = "stdout") -> dict:
        return {"output_type": "stream", "name": name, "text": text}

    nb = {
        "cells": [
            {
                "cell_type": "code",
                "id": "a",
                "outputs": [out("the run took 2 s, all of it waiting")],
            },
            {"cell_type": "code", "id": "a2", "outputs": [out("用时 2 s，all of it waiting")]},
            {
                "cell_type": "code",
                "id": "b",
                "outputs": [out("Ray logs this line to stderr", "stderr")],
            },
            {
                "cell_type": "code",
                "id": "c",
                "outputs": [
                    out(
                        "ray.delete(ref) -> AttributeError: module 'ray' has no attribute 'delete'"
                    ),
                    out("(raylet) A worker died or was killed while executing a task"),
                    out("GPUs         1 logical\n{'loss': 0.1, 'backend': 'gloo'}"),
                ],
            },
            {
                "cell_type": "code",
                "id": "d",
                "outputs": [
                    {
                        "output_type": "display_data",
                        "data": {"text/markdown": "| a table with English words |"},
                    }
                ],
            },
        ]
    }
    assert zh.english_lines(nb) == [
        ("a", "the run took 2 s, all of it waiting"),
        ("d", "| a table with English words |"),
    ]


def test_labkit_zh_english_lists_a_chinese_runs_english_lines(tmp_path, capsys):
    from labkit.tools.cli import main

    def run_of(text: str) -> str:
        path = tmp_path / f"run{len(list(tmp_path.iterdir()))}.ipynb"
        stream = {"output_type": "stream", "name": "stdout", "text": text}
        path.write_text(
            json.dumps({"cells": [{"cell_type": "code", "id": "c1", "outputs": [stream]}]})
        )
        return str(path)

    assert main(["zh", "english", run_of("the loop waited for data most of the time\n")]) == 1
    assert "cell c1: the loop waited for data most of the time" in capsys.readouterr().out
    assert main(["zh", "english", run_of("循环大部分时间在等数据\n")]) == 0
    assert "0 English-only lines" in capsys.readouterr().out


def test_a_check_message_over_two_lines_is_keyed_on_one_and_translated_whole():
    source = (
        'assert ok, (\n    f"expected {a} tokens, "\n    f"got {b}"\n)\nprint("✓ correct")\n'
    )
    cell = {"cell_type": "code", "source": source, "metadata": {"tags": ["check"]}}
    key = 'f"expected {a} tokens, " ⏎ f"got {b}"'
    assert key in zh._said(cell)
    out = zh.translate_code(source, [(key, 'f"应为 {a} 个 token，实际 {b}"')])
    assert 'f"应为 {a} 个 token，实际 {b}"' in out
    compile(out, "check", "exec")
