"""``normlab claims``: decide every claim of the catalogue and print the verdicts with numbers."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("claims", help="decide the claims of the literature and the seed documents, with numbers",
                       description="Decide each claim from a rule fixed in advance: every part's effect with a 95% "
                                   "interval over seeds. --quick: the claims decidable at initialisation (measured "
                                   "30-50 s on 2 idle CPU cores); --only ID measures only what ID needs. Finished "
                                   "claims are kept in OUT/cache, so an interrupted run resumes. Without --quick the training studies run at --scale "
                                   "into OUT/stores (64 minutes at cpu scale on 2 cores, measured; resumable).")
    p.add_argument("--quick", action="store_true", help="only the claims decidable at initialisation")
    p.add_argument("--out", metavar="DIR", default="claims",
                   help="where claims.json, index.html, history.jsonl, figures/ and stores/ go (default: ./claims)")
    p.add_argument("--only", metavar="ID", action="append", default=[],
                   help="decide just this claim (repeatable; ids in the table)")
    p.add_argument("--seeds", type=int, default=5, help="seeds of the quick measurements (default 5, at least 3)")
    p.add_argument("--scale", default="cpu", choices=["smoke", "cpu", "gpu", "seed"],
                   help="size of the training studies (default cpu; smoke = seconds, inconclusive by design; "
                        "seed = seed 002's own settings, for the claims that have them)")
    p.add_argument("--workers", type=int, default=None, help="parallel training processes (default: one per core)")
    p.add_argument("--no-train", action="store_true",
                   help="decide from the stores under OUT/stores as they are; train nothing")
    p.add_argument("--no-cache", action="store_true",
                   help="measure every chosen claim again; neither read nor write OUT/cache (what an "
                        "interrupted run resumes from)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=_claims)


def _claims(args: argparse.Namespace) -> int:
    from pathlib import Path

    from normlab.claims import run_claims
    from normlab.claims.output import print_table
    from normlab.fscheck import writable_dir

    writable_dir(args.out, "--out")  # before any measurement

    results = run_claims(quick=args.quick, out=Path(args.out), only=args.only, seeds=args.seeds, scale=args.scale,
                         workers=args.workers, train=not args.no_train, progress=not args.quiet,
                         cache=not args.no_cache)
    print_table(results)
    print(f"\nwrote {Path(args.out) / 'claims.json'} and {Path(args.out) / 'index.html'}")
    return 0
