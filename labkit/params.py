"""The parameter contract every notebook follows.

The first code cell of a notebook is tagged ``parameters`` and sets ``SIZE``, ``DEVICE``, ``SEED``
and ``RESULTS_DIR`` (``None`` by default). :func:`setup` resolves them, in this order:

1. a value set in the cell (papermill's ``-p`` injects a cell that overrides it);
2. the environment: ``LABKIT_SIZE``, ``LABKIT_DEVICE``, ``LABKIT_SEED``, ``LABKIT_RESULTS_DIR``;
3. the default a learner wants: ``small``, ``auto``, ``0``, ``runs/latest``.

A bad value raises :class:`ParameterError` at once, before Ray starts, naming the valid values.
``DEVICE=cuda`` on a machine where torch cannot use CUDA raises :class:`labkit.device.DeviceError`
at the same point, in every notebook. This module imports no Ray, and torch only for that check.

Used in: 00-13, lab_amp, lab_data, lab_lm, lab_objects, lab_serve, lab_tasks, lab_train,
lab_yardsticks.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.contract import DEVICES, ENV_PREFIX, SIZES, ParameterError, choice
from labkit.device import choose as choose_device

DEFAULTS: dict[str, Any] = {
    "SIZE": "small",
    "DEVICE": "auto",
    "SEED": 0,
    "RESULTS_DIR": "runs/latest",
}
#: A lesson (``notebooks/01_remote_tasks.ipynb``) or a lab report (``bench/lab_tasks.ipynb``).
NOTEBOOK_NAME = re.compile(r"^(\d\d|lab)_[a-z0-9_]+$")

_current: Params | None = None


@dataclass(frozen=True)
class Params:
    """Validated parameters of one notebook run, plus the settings that depend on SIZE."""

    notebook: str
    size: str
    device: str
    seed: int
    results_dir: Path
    settings: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        """Look up a size-dependent setting, e.g. ``p["n_tasks"]``."""
        try:
            return self.settings[key]
        except KeyError:
            known = ", ".join(sorted(self.settings)) or "none"
            raise KeyError(f"no size setting {key!r}; this notebook defines: {known}") from None

    @property
    def is_smoke(self) -> bool:
        """True for the CI-sized run (tiny data, few repeats)."""
        return self.size == "smoke"

    def describe(self) -> str:
        """One line per parameter with where its value came from."""
        zh = _zh()  # where a value came from, in the learner's language
        said = {"default": "默认值", "notebook/papermill": "笔记本/papermill"} if zh else {}
        lines = [f"{'笔记本     ' if zh else 'notebook   '} {self.notebook}"]
        for name, value in (
            ("SIZE", self.size),
            ("DEVICE", self.device),
            ("SEED", self.seed),
            ("RESULTS_DIR", self.results_dir),
        ):
            source = self.sources.get(name, "default")
            lines.append(f"{name:<11} {value}  ({said.get(source, source)})")
        for key, value in self.settings.items():
            lines.append(f"  {key} = {value}")
        return "\n".join(lines)


def repo_root() -> Path:
    """The repository root, so paths do not depend on the kernel's working directory."""
    env = os.environ.get("LABKIT_ROOT")
    if env:
        return Path(env).expanduser().resolve()
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        for candidate in (start, *start.parents):
            if (candidate / "pyproject.toml").is_file() and (candidate / "labkit").is_dir():
                return candidate
    return Path.cwd().resolve()


def shown(path: str | os.PathLike[str]) -> str:
    """A path as the kit prints it: relative to the repository when inside it, ``~/...`` when
    under the home folder, else as it is (an executed notebook, and the site built from it,
    then never show the machine's own folders)."""
    path = Path(path).expanduser()
    for base, prefix in ((repo_root(), ""), (Path.home(), "~/")):
        try:
            rel = path.resolve().relative_to(base.resolve())
        except (ValueError, OSError):
            continue
        if str(rel) == ".":
            return prefix.rstrip("/") or "."
        return prefix + rel.as_posix()
    return str(path)


def resolve_path(path: str | os.PathLike[str]) -> Path:
    """Resolve a relative path against the repository root (absolute paths stay as they are)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else (repo_root() / p).resolve()


def _pick(name: str, value: Any) -> tuple[Any, str]:
    if value is not None:
        return value, "notebook/papermill"
    env = os.environ.get(ENV_PREFIX + name)
    if env not in (None, ""):
        return env, f"${ENV_PREFIX}{name}"
    return DEFAULTS[name], "default"


def _zh() -> bool:
    from labkit import lang

    return lang.is_zh()


def _seed(value: Any, source: str) -> int:
    try:
        seed = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        seed = -1
    if (isinstance(value, bool) or seed < 0 or seed >= 2**32) and _zh():
        raise ParameterError(
            f"SEED={value!r}（来自 {source}）无效；请用 0 到 2**32 - 1 之间的整数，"
            f"例如 `-p SEED 0` 或 `{ENV_PREFIX}SEED=0`。"
        )
    if isinstance(value, bool) or seed < 0 or seed >= 2**32:
        raise ParameterError(
            f"SEED={value!r} (from {source}) is not valid; use an integer from 0 to 2**32 - 1, "
            f"e.g. `-p SEED 0` or `{ENV_PREFIX}SEED=0`."
        )
    return seed


def _by_size(by_size: Mapping[str, Sequence[Any]] | None, size: str) -> dict[str, Any]:
    """The settings at ``size`` from a table of rows ``name: (smoke, small, full)``."""
    if by_size is None:
        return {}
    if not isinstance(by_size, Mapping):
        raise ParameterError(
            f"by_size must map each setting to its value at ({', '.join(SIZES)}), "
            f"got {type(by_size).__name__}"
        )
    column = SIZES.index(size)
    settings = {}
    for name, row in by_size.items():
        if not isinstance(row, (tuple, list)) or len(row) != len(SIZES):
            raise ParameterError(
                f"by_size[{name!r}] must give one value per SIZE ({', '.join(SIZES)}), got {row!r}"
            )
        settings[name] = row[column]
    return settings


def setup(
    notebook: str,
    *,
    SIZE: str | None = None,
    DEVICE: str | None = None,
    SEED: int | str | None = None,
    RESULTS_DIR: str | os.PathLike[str] | None = None,
    by_size: Mapping[str, Sequence[Any]] | None = None,
    scale: Any = None,
) -> Params:
    """Validate a notebook's parameters, seed Python and NumPy, and return its size settings.

    ``notebook`` names the notebook (a kernel does not know its file name); its records go to
    ``RESULTS_DIR/<notebook>.jsonl``. ``by_size`` is the notebook's table of settings, one row
    per setting with its value at each SIZE, ``{"n_rows": (50_000, 1_000_000, 4_000_000)}``;
    ``p["n_rows"]`` reads the chosen one. ``scale`` (a dict per SIZE, before issue 42) is
    refused with what to write instead: a learner's copy whose set-up cell they edited keeps it.
    """
    global _current
    if not isinstance(notebook, str) or not NOTEBOOK_NAME.match(notebook):
        raise ParameterError(
            f"notebook name {notebook!r} must look like '00_topic' (two digits, underscore, "
            "lower-case words), matching its file notebooks/<name>.ipynb, or 'lab_topic' for "
            "a lab report bench/<name>.ipynb"
        )
    if scale is not None:
        raise ParameterError(
            "labkit.setup no longer takes scale={size: {...}}; write the same settings as "
            "by_size={name: (smoke, small, full)}, one row per setting, as the lesson's set-up "
            "cell does (`make lab` writes the lesson's copy beside yours)"
        )
    sources: dict[str, str] = {}
    raw_size, sources["SIZE"] = _pick("SIZE", SIZE)
    raw_device, sources["DEVICE"] = _pick("DEVICE", DEVICE)
    raw_seed, sources["SEED"] = _pick("SEED", SEED)
    raw_dir, sources["RESULTS_DIR"] = _pick("RESULTS_DIR", RESULTS_DIR)

    size = choice("SIZE", raw_size, SIZES, source=sources["SIZE"])
    device = choice("DEVICE", raw_device, DEVICES, source=sources["DEVICE"])
    seed = _seed(raw_seed, sources["SEED"])
    if not str(raw_dir).strip():
        raise ParameterError("RESULTS_DIR is empty; give a folder such as runs/latest")
    results_dir = resolve_path(str(raw_dir))
    settings = _by_size(by_size, size)
    if device == "cuda":
        # Every notebook stops here, before Ray starts, when CUDA was asked for and is absent.
        # (torch is imported only for this request, so a plain run stays fast.)
        choose_device("cuda")

    seed_everything(seed)
    _current = Params(notebook, size, device, seed, results_dir, settings, sources)
    return _current


def knob(
    name: str,
    value: Any,
    default: Any,
    *,
    kind: type = float,
    minimum: float = 0,
    many: bool = False,
) -> Any:
    """A lab report's swept knob (``TASK_MS``, ``N_TASKS``, ...): a notebook parameter that is
    ``None`` for the SIZE's ``default``, else a number (``many``: a number or a list of them) of
    ``kind`` above ``minimum``. A bad value raises :class:`ParameterError` naming what is valid.
    A sweep (``labkit bench``) sets one point per run with papermill's ``-p``."""
    if value is None:
        return default
    if many and isinstance(value, str) and value.strip().startswith("["):
        try:  # papermill's -p passes a list as its text
            value = json.loads(value)
        except ValueError:
            pass
    values = value if many and isinstance(value, (list, tuple)) else [value]
    what = f"{kind.__name__}{'s' if many else ''} above {minimum:g}"
    out = []
    for v in values or [None]:  # an empty list is as bad as a bad value
        try:
            ok = not isinstance(v, bool) and float(v) == kind(v) and kind(v) > minimum
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ParameterError(
                f"{name}={value!r} is not valid; give {'one or a list of ' if many else 'a '}"
                f"{what} (e.g. `-p {name} {default if not many else default[0]}`), or None for "
                f"this SIZE's {default!r}"
            )
        out.append(kind(v))
    return out if many else out[0]


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and, if it is imported, torch (CPU and CUDA): the one seeding function.

    ``setup`` calls it; call it again before a step that must repeat exactly (a model's
    initialisation, a shuffle). torch is not imported here, so a bad parameter still fails fast.
    """
    random.seed(seed)
    import numpy as np

    np.random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)  # seeds every CUDA device too


def current() -> Params:
    """The parameters of the last :func:`setup` in this process."""
    if _current is None:
        raise RuntimeError("call labkit.setup(...) first (the cell after the parameters cell)")
    return _current
