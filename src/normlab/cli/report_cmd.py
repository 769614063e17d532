"""``normlab report PATH`` and ``normlab claims``: pages of figures and the claims check."""

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
    p.set_defaults(func=_report)
    p = sub.add_parser("claims", help="test the claims of REFERENCE.md section 4-5 and print verdicts")
    p.add_argument("--quick", action="store_true",
                   help="only the claims decidable at initialisation (minutes on a laptop CPU)")
    p.add_argument("--out", metavar="DIR", default="claims",
                   help="where claims.json, index.html and the figures go (default: ./claims)")
    p.add_argument("--only", metavar="ID", action="append", default=[],
                   help="run just this claim id (repeatable; see the table for ids)")
    p.add_argument("--seeds", type=int, default=5, help="seeds averaged per measurement (default 5)")
    p.add_argument("--scale", default="cpu", choices=["smoke", "cpu", "gpu"],
                   help="size of the training studies without --quick (default cpu; smoke = seconds, for tests)")
    p.add_argument("--workers", type=int, default=None, help="parallel training processes (default 1)")
    p.set_defaults(func=_claims)


def _report(args: argparse.Namespace) -> int:
    from normlab.report.compare import compare_page
    from normlab.report.pages import build_report

    progress = not args.quiet
    if len(args.paths) == 1:
        path = build_report(args.paths[0], progress=progress, out=args.out)
    else:
        path = compare_page(args.paths, args.out or "compare", progress=progress)
    print(path)
    return 0


def _claims(args: argparse.Namespace) -> int:
    from pathlib import Path

    from normlab.claims import run_claims
    from normlab.claims.output import print_table

    results = run_claims(quick=args.quick, out=Path(args.out), only=args.only, seeds=args.seeds,
                          scale=args.scale, workers=args.workers)
    print_table(results)
    print(f"\nwrote {Path(args.out) / 'claims.json'} and {Path(args.out) / 'index.html'}")
    return 0
