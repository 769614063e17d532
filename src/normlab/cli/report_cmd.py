"""``normlab report PATH``: pages of figures for a run, a probe or a study."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write PATH/report/index.html for a run dir, probe output or study store")
    p.add_argument("path", metavar="PATH", help="a training run directory, a probe --out directory or a study store")
    p.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    from normlab.report import build_report

    path = build_report(args.path)
    print(path)
    return 0

