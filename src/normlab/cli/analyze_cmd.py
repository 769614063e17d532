"""``normlab analyze RUN`` and ``normlab lr-sensitivity RUN...``: after-training diagnostics."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="layer deletion, angular distance, block influence, CKA of a trained run",
                       description="Load RUN's model (checkpoints/best, else latest) and write "
                       "RUN/analysis/{analysis.csv,layer_pairs.csv,analysis.json}.")
    p.add_argument("run", metavar="RUN", help="a training run directory")
    p.add_argument("--checkpoint", default="best", choices=("best", "latest"),
                   help="which checkpoint of RUN to load: best (lowest val loss, default) or latest")
    p.add_argument("--batches", type=int, default=4, help="validation batches (default 4)")
    p.add_argument("--batch-size", type=int, default=8, help="sequences per validation batch (default 8)")
    p.add_argument("--out", metavar="DIR", help="output directory (default RUN/analysis)")
    p.add_argument("--data-dir", metavar="DIR", help="the folder the run's corpus was moved to (by default it is "
                   "read where the run recorded it)")
    p.set_defaults(func=_analyze)
    p = sub.add_parser("lr-sensitivity", help="Wortsman et al.'s LR sensitivity of a learning-rate sweep",
                       description="mean over the lr grid of min(loss(lr), loss_at_init) - best loss; "
                       "diverged runs count as loss_at_init; runs sharing an lr are averaged.")
    p.add_argument("runs", metavar="RUN", nargs="+", help="run directories of the sweep")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_lr_sensitivity)


def _analyze(args: argparse.Namespace) -> int:
    from pathlib import Path

    from normlab.core.errors import UserError
    from normlab.core.fscheck import existing_dir, writable_dir
    from normlab.diagnostics.analyze import analyze_run
    from normlab.run.dir import RunDir

    if args.batches < 1 or args.batch_size < 1:
        raise UserError("--batches and --batch-size must be >= 1")
    existing_dir(args.run, "RUN", "a training run directory")
    if args.data_dir:
        existing_dir(args.data_dir, "--data-dir", "the folder holding the run's corpus")
    if args.out:
        writable_dir(args.out, "--out")
    else:
        writable_dir(RunDir(args.run).analysis_dir, "analysis", "give --out DIR elsewhere")
    res = analyze_run(args.run, args.checkpoint, args.batches, args.batch_size, args.out, data_dir=args.data_dir)
    print(f"val loss {res['val_loss']:.4f}")
    print(f"{'layer':>5} {'deletion_loss':>14} {'delta':>8} {'influence':>10} {'angle':>7}")
    for li, (dl, bi) in enumerate(zip(res["deletion_loss"], res["block_influence"]), start=1):
        print(f"{li:>5} {dl:>14.4f} {dl - res['val_loss']:>+8.4f} {bi:>10.4f} {res['angular_distance'][li - 1][li]:>7.4f}")
    print(f"wrote {Path(args.out) if args.out else Path(args.run) / 'analysis'}/"
          "{analysis.csv,layer_pairs.csv,analysis.json}")
    return 0


def _lr_sensitivity(args: argparse.Namespace) -> int:
    import json

    from normlab.core.fscheck import existing_dir
    from normlab.diagnostics.sensitivity import lr_sensitivity, per_lr_losses, run_point

    points = [run_point(existing_dir(r, "RUN", "a training run directory")) for r in args.runs]
    triples = [(p["lr"], p["final_loss"], p["init_loss"]) for p in points]
    result = {"lr_sensitivity": lr_sensitivity(triples), "per_lr": per_lr_losses(triples), "runs": points}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for p in points:
        final = "diverged" if p["final_loss"] is None else f"{p['final_loss']:.4f}"
        print(f"lr={p['lr']:<10.3g} final={final:<9} init={p['init_loss']:.4f} {p['status']:<10} {p['run']}")
    print(f"LR sensitivity (Wortsman et al. 2023): {result['lr_sensitivity']:.4f}")
    return 0
