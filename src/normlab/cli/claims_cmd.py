"""``normlab claims``: decide every claim of the catalogue and print the verdicts with numbers;
``normlab claims register``: write the rules down, to commit before the data (docs/theory.md)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("claims", help="decide the claims of the literature and the seed documents, with numbers",
                       description="Decide each claim by its rule (pre-registered: `normlab claims register`, commit, "
                                   "then --registration): every part's effect with a 95% "
                                   "interval over seeds. --quick: the claims decidable at initialisation (measured "
                                   "30-50 s on 2 idle CPU cores); --only ID measures only what ID needs. Finished "
                                   "claims are kept in OUT/cache, so an interrupted run resumes. Without --quick the training studies run at --scale "
                                   "into OUT/stores (521 runs in 142 minutes at cpu scale on 2 idle cores, measured; resumable).")
    p.add_argument("action", nargs="?", choices=["register"], metavar="register",
                   help="write the chosen claims' rules, reasons and studies to --out FILE.json instead of "
                        "deciding them; commit that file before training, then pass it as --registration")
    p.add_argument("--quick", action="store_true", help="only the claims decidable at initialisation")
    p.add_argument("--out", metavar="DIR", default="claims",
                   help="where claims.json, index.html, history.jsonl, figures/ and stores/ go (default: ./claims); "
                        "with register: the registration FILE.json")
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
    p.add_argument("--registration", metavar="FILE", default=None,
                   help="a committed `claims register` file: checked against the rules before any training; each "
                        "part is then marked before-data, post-hoc or not-registered (without it: not-registered)")
    p.add_argument("--allow-post-hoc", action="store_true",
                   help="with --registration: decide claims whose rules or measuring code changed since, marked "
                        "post-hoc with the registered rule's verdict beside (default: refuse)")
    p.add_argument("--exploratory", action="store_true",
                   help="with --registration: run even on seeds earlier runs have seen; published as exploratory "
                        "(default: a registered run is confirmatory and refuses seen seeds)")
    p.add_argument("--seen", metavar="PATH", action="append", default=[],
                   help="with --registration: also consult this study store, claims --out folder, claims.json or "
                        "history.jsonl for seen seeds (always consulted: --out and the registration repository's "
                        "docs/evidence)")
    p.add_argument("--first-seed", type=int, default=None, metavar="N",
                   help="register: every study's seeds, and the quick measurements' --seeds seeds, start at N "
                        "(seeds no earlier run used; default: the presets' seeds and 0, 1, ...)")
    p.add_argument("--force", action="store_true", help="register: replace an --out file holding another registration")
    p.add_argument("--require-designs", action="store_true",
                   help="register: refuse a claim that declares no design analysis (a part that cannot decide "
                        "whatever the data is refused always)")
    p.add_argument("--descriptive", metavar="CLAIM/PART", action="append", default=[],
                   help="register: register this part with no verdict (measured and shown, never decided or adjusted): "
                        "a part whose design cannot decide at the level asked; repeat for more")
    p.add_argument("--link-figures", action="store_true",
                   help="the page links OUT/figures/ instead of embedding each image (for a page published in a "
                        "repository: half the size)")
    p.set_defaults(func=_claims)


def _claims(args: argparse.Namespace) -> int:
    from pathlib import Path

    from normlab.claims import ClaimsRun, run_claims
    from normlab.claims.output import print_table
    from normlab.core.errors import UserError
    from normlab.core.fscheck import writable_dir

    if args.action == "register":
        return _register(args)
    writable_dir(args.out, "--out")  # before any measurement
    for seen in args.seen:  # what the ledger of seen seeds reads (normlab.claims.ledger)
        p = Path(seen)
        if not p.is_dir() and not (p.is_file() and p.suffix in (".json", ".jsonl")):
            raise UserError(f"--seen {seen}: {'no such file or directory' if not p.exists() else 'not a folder, a claims.json or a history.jsonl'}; "
                            "give a study store, a claims --out folder, a claims.json or a history.jsonl")

    results = run_claims(ClaimsRun(quick=args.quick, out=Path(args.out), only=args.only, seeds=args.seeds,
                                   scale=args.scale, workers=args.workers, train=not args.no_train,
                                   progress=not args.quiet, cache=not args.no_cache, registration=args.registration,
                                   allow_post_hoc=args.allow_post_hoc, embed=not args.link_figures,
                                   exploratory=args.exploratory, seen=args.seen))
    from normlab.claims.folder import CLAIMS_JSON
    from normlab.core.fsutil import read_json

    print_table(results, meta=(read_json(Path(args.out) / CLAIMS_JSON, {}) or {}).get("meta"))
    print(f"\nwrote {Path(args.out) / CLAIMS_JSON} and {Path(args.out) / 'index.html'}")
    return 0


def _register(args: argparse.Namespace) -> int:
    from pathlib import Path

    from normlab.claims.registration import build, write
    from normlab.core.errors import UserError

    out = Path(args.out)
    if out.suffix != ".json" or out.is_dir():
        raise UserError(f"--out {out}: register writes one file; name it, e.g. --out registration-{args.scale}.json")
    if args.first_seed is not None and args.first_seed < 0:
        raise UserError(f"--first-seed={args.first_seed}: seeds are integers >= 0")
    doc = build(args.scale, args.only, quick=args.quick, first_seed=args.first_seed, quick_seeds=args.seeds,
                every_design=args.require_designs, descriptive=args.descriptive)
    wrote = write(out, doc, force=args.force)
    n_parts = sum(len(e["parts"]) for e in doc["claims"].values())
    said = "wrote" if wrote else "unchanged:"
    print(f"{said} {out}: {len(doc['claims'])} claims, {n_parts} parts, {len(doc['studies'])} studies at scale "
          f"{args.scale}; document hash {doc['document_hash']}")
    seeds = {n: e["seeds"] for n, e in doc["studies"].items()} | ({"probe": doc["quick_seeds"]} if "quick_seeds" in doc else {})
    print("seeds: " + "; ".join(f"{n} {', '.join(map(str, s))}" for n, s in seeds.items()))
    print(f"measuring code: {len(doc['measuring_code']['modules'])} modules (a run where any differs is refused)")
    if wrote:
        print(f"commit it before any training: git add {out} && git commit -m 'Register the claims' ; then run "
              f"normlab claims --scale {args.scale} --registration {out}")
    return 0
