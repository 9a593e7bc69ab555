"""``labkit tracks``: the workshop tracks, a table per language for the READMEs' workshop section.

A track is a list of lessons (:data:`TRACKS`). For each lesson the table gives its exercises (from
the notebook), a learner's time to work through it (its header's "about N min") and its Run All at
a learner's default ``SIZE`` (``small``), measured: the seconds of that lesson's run in a tracks
sweep (``labkit bench bench/sweeps/tracks.yaml``), read from the sweep's ``points.csv``; by
default the newest kept one under ``results/``. A test holds the READMEs' tables to what this
prints from the kept run, so the times in them are the measured ones.

Used in: no lesson or lab report.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
from pathlib import Path

from labkit import params
from labkit.tools import exercises as ex

#: The tracks, each a title and its lessons in order (two days: a line per day); every lesson's
#: prerequisites (its header's) come before it in its track (a test holds that).
TRACKS = {
    "3 hours": [["00", "01", "02"]],
    "one day": [["00", "01", "02", "03", "06", "07"]],
    "two days": [["00", "01", "02", "03", "04", "05"], ["06", "07", "09", "13"]],
}
SWEEP = "bench/sweeps/tracks.yaml"
WORDS = {
    "en": {
        "head": "| track | lessons (exercises; learner time; Run All at `small`) | learner time "
        "| Run All at `small` |",
        "day": "day {n}: ",
        "lesson": "{nn} ({ex} ex.; {learn} min; {ran})",
        "sep": ", ",
        "min": "{:.1f} min",
        "hours": "{:.1f} h",
        "from": "Run All times from `labkit bench {sweep}` on {machine} ({run}).",
        "machine": "{cpus} cores ({cpu}){gpu}",
    },
    "zh": {
        "head": "| 路线 | 课程（练习；学习时间；`small` 下 Run All） | 学习时间 "
        "| `small` 下 Run All |",
        "day": "第 {n} 天：",
        "lesson": "{nn}（{ex} 道练习；{learn} 分钟；{ran}）",
        "sep": "、",
        "min": "{:.1f} 分钟",
        "hours": "{:.1f} 小时",
        "from": "Run All 的时间来自在 {machine} 上运行的 `labkit bench {sweep}`（{run}）。",
        "machine": "{cpus} 核（{cpu}）{gpu}",
    },
}
TITLES_ZH = {"3 hours": "3 小时", "one day": "一天", "two days": "两天"}


def prerequisites(nn: str) -> list[str]:
    """The lessons a lesson's header names as its prerequisites, by number."""
    header = "".join(json.loads(ex.lesson(nn).read_text())["cells"][0]["source"])
    found = re.search(r"\*\*Prerequisites:\*\*(.*?)(?:\n\n|$)", header, re.S)
    return re.findall(r"\((\d\d)_", found.group(1)) if found else []


def learner_minutes(nn: str) -> int:
    """A lesson's time to work through, from its header's "about N min"."""
    header = "".join(json.loads(ex.lesson(nn).read_text())["cells"][0]["source"])
    found = re.search(r"\*\*Time:\*\*\s*about (\d+) min", header)
    if found is None:
        raise ValueError(f"{ex.lesson(nn).name}: its header gives no 'about N min'")
    return int(found.group(1))


def exercise_count(nn: str) -> int:
    import nbformat

    return len(ex.exercise_pairs(nbformat.read(ex.lesson(nn), as_version=4)))


def kept_run(root: Path | None = None) -> Path:
    """The newest kept run of the tracks sweep (``results/<machine>/<date>-<commit>/``)."""
    root = root or params.repo_root() / "results"
    runs = [
        p.parent
        for p in root.glob("*/*/sweep.json")
        if Path(json.loads(p.read_text()).get("sweep", "")).name == Path(SWEEP).name
    ]
    if not runs:
        raise SystemExit(f"labkit tracks: no kept run of {SWEEP} under {params.shown(root)}")
    return max(runs, key=lambda p: json.loads((p / "sweep.json").read_text())["started"])


def run_seconds(run: Path) -> dict[str, float]:
    """Each lesson's seconds in a sweep run, by its number (the runs that finished)."""
    with (run / "points.csv").open(encoding="utf-8") as f:
        return {
            r["notebook"][:2]: float(r["seconds"]) for r in csv.DictReader(f) if r["status"] == "ok"
        }


def table(run: Path, lang: str = "en") -> str:
    """The tracks as a markdown table, in ``lang``, with the run's times: each lesson's, and
    each day's sum (a line per day)."""
    words = WORDS[lang]
    for title, days in TRACKS.items():  # a track that teaches a lesson before its prerequisites
        order = [nn for day in days for nn in day]
        for i, nn in enumerate(order):
            if late := [pre for pre in prerequisites(nn) if pre not in order[:i]]:
                raise ValueError(f"track {title!r}: lesson {nn} needs {late} before it")
    seconds = run_seconds(run)
    rows = [words["head"], "|---|---|---|---|"]
    for title, days in TRACKS.items():
        lessons, learn, ran = [], [], []
        for n, day in enumerate(days, 1):
            missing = [nn for nn in day if nn not in seconds]
            if missing:
                said = f"labkit tracks: {params.shown(run)} has no finished run of {missing}"
                raise SystemExit(said)
            each = [
                words["lesson"].format(
                    nn=nn,
                    ex=exercise_count(nn),
                    learn=learner_minutes(nn),
                    ran=words["min"].format(seconds[nn] / 60),
                )
                for nn in day
            ]
            prefix = words["day"].format(n=n) if len(days) > 1 else ""
            lessons.append(prefix + words["sep"].join(each))
            learn.append(prefix + words["hours"].format(sum(map(learner_minutes, day)) / 60))
            ran.append(prefix + words["min"].format(sum(seconds[nn] for nn in day) / 60))
        name = title if lang == "en" else TITLES_ZH[title]
        rows.append(
            f"| {name} | {'<br>'.join(lessons)} | {'<br>'.join(learn)} | {'<br>'.join(ran)} |"
        )
    m = json.loads((run / "sweep.json").read_text())["machine"]
    gpu = (", " if lang == "en" else "，") + m["gpu"] if m.get("gpu") else ""
    machine = words["machine"].format(cpus=m["cpus"], cpu=m["cpu_model"], gpu=gpu)
    root = params.repo_root()
    where = run.relative_to(root).as_posix() if run.is_relative_to(root) else run.name
    note = words["from"].format(sweep=SWEEP, machine=machine, run=f"`{where}`")
    return "\n".join(rows) + "\n\n" + note + "\n"


def cmd_tracks(args: argparse.Namespace) -> int:
    run = Path(args.run) if args.run else kept_run()
    print(table(run, args.lang), end="")
    return 0


def register(sub) -> None:
    p = sub.add_parser("tracks", help="the workshop tracks, with the times of a tracks sweep")
    p.add_argument("run", nargs="?", help="a sweep run's folder (the newest kept one)")
    p.add_argument("--lang", choices=sorted(WORDS), default="en")
    p.set_defaults(func=cmd_tracks)
