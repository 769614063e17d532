"""``normlab campaign``: a confirmatory campaign in registered stages (``claims/campaign.py``):
``register`` writes a stage's registration to commit before its data, ``run`` runs (or resumes)
every stage not yet ended, ``status`` prints campaign.md's table, ``cost`` prices what the
undecided parts would take to decide from their runs' measured step times (``claims/decide_cost.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("campaign", help="a confirmatory campaign in registered, resumable stages",
                       description="The catalogue's training claims confirmed in stages (a TOML plan: "
                                   "docs/evidence/campaign/plan.toml): each stage one registered claims run whose "
                                   "studies settle over nested horizons, its CPU time recorded against the budget.")
    p.add_argument("action", choices=["register", "run", "status", "cost"],
                   help="register: write the registration file of --stage (commit it before running); run: run or "
                        "resume every stage not yet ended (or --stage); status: the plan's table; cost: price each "
                        "undecided part from the runs under --out (writes decide-cost.json beside the plan)")
    p.add_argument("plan", metavar="PLAN", help="the campaign's plan.toml")
    p.add_argument("--stage", action="append", default=[], metavar="NAME",
                   help="register: the stage whose registration file to write; run: only this stage (repeatable)")
    p.add_argument("--out", metavar="DIR", default="campaign",
                   help="run: where each stage's stores, cache and outputs go (OUT/STAGE; default ./campaign); the "
                        "finished outputs are copied beside the plan; cost: where the campaign ran")
    p.add_argument("--force", action="store_true", help="register: replace a file holding another registration")
    p.add_argument("--over-budget", action="store_true", help="run: start a stage whose estimate exceeds the budget left")
    p.add_argument("--quiet", action="store_true", help="run: no progress lines on stderr")
    p.set_defaults(func=_campaign)


def _campaign(args: argparse.Namespace) -> int:
    from normlab.claims.campaign import registration_doc, run_campaign
    from normlab.claims.campaign_page import page, write_page
    from normlab.claims.campaign_plan import load_plan
    from normlab.claims.registration import write
    from normlab.core.errors import UserError
    from normlab.core.fscheck import writable_dir

    plan = load_plan(args.plan)
    if args.action == "status":
        print(page(plan), end="")
        return 0
    if args.action == "register":
        if not args.stage:
            raise UserError("register: name the stage whose registration to write, --stage NAME")
        for file in dict.fromkeys(plan.stage(n).registration for n in args.stage):
            doc = registration_doc(plan, file)
            path = plan.folder / file
            path.parent.mkdir(parents=True, exist_ok=True)
            wrote = write(path, doc, force=args.force)
            n_parts = sum(len(e["parts"]) for e in doc["claims"].values())
            measured = ([f"studies {', '.join(doc['studies'])}"] if doc["studies"] else []) + \
                ([f"{len(doc['quick_seeds'])} probe seeds"] if doc.get("quick_seeds") else [])
            print(f"{'wrote' if wrote else 'unchanged:'} {path}: {len(doc['claims'])} claims, {n_parts} parts, "
                  f"{'; '.join(measured)}; document hash {doc['document_hash']}")
        print(f"commit it before running: git add {plan.folder} && git commit; then normlab campaign run {args.plan}")
        return 0
    if args.action == "cost":
        from normlab.claims.decide_cost import measure, write_cost

        doc = measure(plan, Path(args.out))
        path = write_cost(plan.folder, doc)
        write_page(plan)
        floor = doc["to_target_core_hours"]
        print(f"wrote {path}: {doc['decided']} of {doc['parts_total']} parts decided; "
              + (f"the {doc['short']} cheapest undecided parts would take at least {floor:.2f} core-hours"
                 if floor is not None else f"{doc['short']} more parts needed, not all priced")
              + f"; {plan.folder / 'campaign.md'} updated")
        return 0
    out = writable_dir(args.out, "--out")  # before any stage: a file or a read-only folder there is one line
    ran = run_campaign(plan, out, only=args.stage, quiet=args.quiet, over_budget=args.over_budget,
                       after=write_page)
    print(f"campaign {plan.name}: {len(ran)} stage(s) ran ({', '.join(ran) or 'none left'}); "
          f"{plan.folder / 'campaign.md'} updated")
    return 0
