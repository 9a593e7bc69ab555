"""``labkit``: the command line. Each verb lives with its family, whose ``register`` adds it:
:mod:`~labkit.tools.cli_machine` (doctor, clean, lab, cluster), :mod:`~labkit.tools.cli_runs`
(run, rerun, small), :mod:`~labkit.tools.cli_bench` (bench, gpu-check),
:mod:`~labkit.tools.cli_edition` (exercises, zh, site, blog-table, guard),
:mod:`~labkit.tools.grade` (grade), :mod:`~labkit.tools.tracks` (tracks) and
:mod:`~labkit.tools.slides` (slides).

Used in: no lesson or lab report.
"""

from __future__ import annotations

import argparse
import sys

from labkit.tools import cli_bench, cli_edition, cli_machine, cli_runs, grade, slides, tracks

#: The verb families, in the order ``labkit --help`` lists their verbs.
FAMILIES = (cli_machine, cli_runs, cli_bench, cli_edition, grade, tracks, slides)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="labkit", description="Ray LabKit command line")
    sub = parser.add_subparsers(dest="command", required=True)
    for family in FAMILIES:
        family.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
