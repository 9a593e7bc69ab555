"""``labkit site``'s checks of the built HTML: a link or image on another host (only
:data:`READING_HOSTS` may be linked), a broken internal link or anchor, an image without alt
text, a lesson the index does not link, and a path of this machine a page prints.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import html.parser
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from labkit.params import repo_root

#: The only hosts a page may link to (``<a href>``, followed by a reader, never loaded): the
#: documentation the lessons cite. Nothing from any host is loaded (``src``, stylesheets).
READING_HOSTS = ("docs.ray.io", "pytorch.org", "docs.pytorch.org")


class _Refs(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.refs: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.ids: set[str] = set()
        self.images: list[dict] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        for key in ("src", "href", "srcset", "poster", "data", "action"):
            if a.get(key):
                self.refs.append((tag, key, a[key]))
        if tag == "img":
            self.images.append(a)


def check_html(out: Path, lessons: list[str]) -> list[str]:
    """Every problem on the built pages: another host, a broken link or anchor, an image
    without alt text, a lesson the index does not link."""
    problems: list[str] = []
    parsed: dict[Path, _Refs] = {}
    for page in sorted(out.rglob("*.html")):
        if "_static" in page.relative_to(out).parts:  # the theme's template fragments
            continue
        p = _Refs()
        p.feed(page.read_text(encoding="utf-8", errors="replace"))
        parsed[page.resolve()] = p
    for page, p in parsed.items():
        rel = page.relative_to(out.resolve())
        for tag, key, value in p.refs:
            url = urlsplit(value.strip())
            if url.scheme in ("mailto", "data", "javascript", "about"):
                continue
            if url.scheme or url.netloc:
                reading = url.scheme == "https" and url.hostname in READING_HOSTS
                if not (tag == "a" and key == "href" and reading):
                    problems.append(f"{rel}: <{tag} {key}> on another host: {value}")
                continue
            if not url.path:
                target = page
            else:
                target = (page.parent / unquote(url.path)).resolve()
                if target.is_dir():
                    target = target / "index.html"
            if not target.exists() or not target.is_relative_to(out.resolve()):
                problems.append(f"{rel}: broken link: {value}")
            elif url.fragment and target.suffix == ".html":
                ids = parsed.get(target)
                if ids is not None and unquote(url.fragment) not in ids.ids:
                    problems.append(f"{rel}: no anchor #{url.fragment} in {value}")
        for img in p.images:
            alt = (img.get("alt") or "").strip()
            if not alt or alt == img.get("src") or re.search(r"\.(png|jpe?g|svg|gif)$", alt):
                problems.append(f"{rel}: an image without alt text: {img.get('src', '')[:80]}")
    for css in out.rglob("*.css"):
        for m in re.finditer(r"url\(\s*['\"]?((?:https?:)?//[^)'\"]+)", css.read_text("utf-8")):
            problems.append(f"{css.relative_to(out)}: loads from another host: {m.group(1)}")
    problems += index_problems(out / "index.html", lessons)
    return problems


def index_problems(index: Path, lessons: list) -> list[str]:
    """Each lesson the index's own text (not the theme's menus) does not link."""
    linked = set()
    if index.exists():
        text = index.read_text(encoding="utf-8")
        body = _Refs()
        body.feed(text[text.find("<article") : text.rfind("</article>")])
        linked = {urlsplit(v).path for t, k, v in body.refs if t == "a"}
    docs = [getattr(d, "doc", d) for d in lessons]
    return [f"index.html: no link to {d}" for d in docs if f"{d}.html" not in linked]


def outside_paths(path: Path, root: Path | None = None) -> list[str]:
    """Each ``../`` path in a file that leads out of the repository (a reader's clone has
    nothing there): ``file:line: path``."""
    root = (root or repo_root()).resolve()
    found = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for m in re.finditer(r"(?:\.\./)+[\w.+\-/]*", line):
            target = (path.parent / m.group(0)).resolve()
            if not target.is_relative_to(root):
                found.append(f"{path.relative_to(root)}:{n}: {m.group(0)}")
    return found
