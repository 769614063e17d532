"""``normlab report PATH``: pages of figures for a run, a probe or a study."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write PATH/report/index.html for a run dir, probe output or study store; "
                       "with several PATHs, one page comparing them",
                       description="Write a self-contained HTML page (figures as PNG + SVG beside it) for a run "
                       "directory, a probe output or a study store. Several PATHs of one kind are compared on one "
                       "page (same axes, one legend) written to --out. Progress goes to stderr; the page's path "
                       "to stdout.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="a training run directory, a probe --out directory or a study store (repeat to compare)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where the page goes (default: PATH/report for one PATH, ./compare for several)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--data-dir", metavar="DIR", help="one run: the folder its corpus was moved to (its layer "
                   "analysis reads the corpus where the run recorded it otherwise)")
    p.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from normlab.core.fscheck import existing_dir, writable_dir
    from normlab.report import build_report
    from normlab.report.compare import compare_page
    from normlab.run.outdir import default_page

    for path in args.paths:
        existing_dir(path, "PATH", "a run directory, a probe --out directory or a study store")
    if args.data_dir:
        existing_dir(args.data_dir, "--data-dir", "the folder holding the run's corpus")
    if args.out:
        writable_dir(args.out, "--out")
    else:  # the default place: beside the one PATH, or ./compare
        one = default_page(args.paths[0]) if len(args.paths) == 1 else Path("compare")
        writable_dir(one, "report", "give --out DIR elsewhere")
    progress = not args.quiet
    if len(args.paths) == 1:
        path = build_report(args.paths[0], progress=progress, out=args.out, data_dir=args.data_dir)
    else:
        path = compare_page(args.paths, args.out or "compare", progress=progress)
    print(path)
    return 0

