"""A guard against removed or deprecated Ray and PyTorch APIs in the kit's own code.

:data:`RULES` is the one list: each entry names an API the blogs use that Ray 2.60 (or PyTorch)
removed or deprecated, and what to write instead. :func:`scan_tree` reads ``labkit/`` and every
notebook's code cells as Python (an AST, so strings and comments never match) and reports each
use, except in notebook cells tagged ``blog-error``, where a lesson runs the blog's form on
purpose to show it fail. ``labkit guard`` prints the findings; a test keeps the kit clean.

``serve.start`` itself is current (``PublicAPI(stability="stable")`` in 2.60) and is how the kit
pins Serve's proxy to 127.0.0.1; the rule is the blog's bare ``serve.start()`` before
``.deploy()``.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

MAP_FAMILY = ("map", "map_batches", "flat_map", "filter")


@dataclass(frozen=True)
class Rule:
    name: str
    fix: str


RULES = {
    "ray.air": Rule("ray.air", "Ray AIR is gone: ray.train, ray.tune and ray.data"),
    "ray.train.Trainer": Rule("ray.train.Trainer", "Train V1: use ray.train.torch.TorchTrainer"),
    "tune.run": Rule("tune.run(", "use tune.Tuner(...).fit()"),
    "serve.start()": Rule("serve.start()", "serve.run(App.bind(...)) starts Serve"),
    "deploy": Rule(".deploy(", "serve.run(App.bind(...), name=..., route_prefix=...)"),
    "to_torch": Rule("Dataset.to_torch", "use Dataset.iter_torch_batches(...)"),
    "torch.cuda.amp": Rule("torch.cuda.amp", "use torch.amp.autocast / torch.amp.GradScaler"),
    "ray.delete": Rule("ray.delete(", "there is no ray.delete: drop the last reference (del ref)"),
    "concurrency": Rule(
        "map_batches(..., concurrency=)", "use compute=ray.data.ActorPoolStrategy(...)"
    ),
}


@dataclass(frozen=True)
class Finding:
    where: str  # "labkit/x.py:12" or "notebooks/06_x.ipynb cell 7:3"
    rule: Rule

    def __str__(self) -> str:
        return f"{self.where}: {self.rule.name} -> {self.rule.fix}"


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _hits(tree: ast.AST) -> list[tuple[int, str]]:
    hits: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute):
            name = _dotted(node) or ""
            for key in ("ray.air", "ray.train.Trainer", "torch.cuda.amp"):
                if name == key or name.startswith(key + "."):
                    hits.append((line, key))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
            names = [a.name for a in node.names]
            full = [f"{module}.{n}" if module else n for n in names]
            for key in ("ray.air", "ray.train.Trainer", "torch.cuda.amp"):
                if any(f == key or f.startswith(key + ".") for f in full + [module]):
                    hits.append((line, key))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name, attr = _dotted(node.func) or "", node.func.attr
            if name == "tune.run":
                hits.append((line, "tune.run"))
            elif name == "serve.start" and not node.args and not node.keywords:
                hits.append((line, "serve.start()"))
            elif name == "ray.delete":
                hits.append((line, "ray.delete"))
            elif attr == "deploy":
                hits.append((line, "deploy"))
            elif attr == "to_torch":
                hits.append((line, "to_torch"))
            elif attr in MAP_FAMILY and any(k.arg == "concurrency" for k in node.keywords):
                hits.append((line, "concurrency"))
    return sorted(set(hits))


def scan_source(source: str, where: str) -> list[Finding]:
    """The rules ``source`` (Python) breaks; lines that are not Python (IPython magics) are
    blanked first."""
    lines = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines()]
    tree = ast.parse("\n".join(lines))
    return [Finding(f"{where}:{line}", RULES[key]) for line, key in _hits(tree)]


def scan_notebook(path: Path, label: str | None = None) -> list[Finding]:
    """Every code cell of a notebook except those tagged ``blog-error``."""
    nb = json.loads(Path(path).read_text())
    found = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code" or "blog-error" in cell.get("metadata", {}).get("tags", []):
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        found += scan_source(source, f"{label or Path(path).name} cell {index}")
    return found


def scan_tree(root: Path) -> list[Finding]:
    """``labkit/**/*.py`` (this module excepted: it names the rules) and ``notebooks/*.ipynb``."""
    found = []
    for path in sorted((root / "labkit").rglob("*.py")):
        if path.name != "apiguard.py":
            found += scan_source(path.read_text(), path.relative_to(root).as_posix())
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        found += scan_notebook(path, f"notebooks/{path.name}")
    return found
