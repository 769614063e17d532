"""``normlab demo``: the README's main job. Pre-LN vs Post-LN on Tiny Shakespeare with identical
hyper-parameters, with and without warm-up, at a setting the lab's stability map puts away
from the knife edge (study preset ``pre-vs-post-demo``), then its page and the verdict.

The 36-run study of seed 002's experiment at lr 1e-3 stays ``normlab study run pre-vs-post``."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="main job: Pre-LN vs Post-LN with and without warm-up on Tiny Shakespeare, "
                                    "then its page and verdict",
                       description="Run the study preset pre-vs-post-demo (Post-LN and Pre-LN with identical "
                                   "hyper-parameters, with and without warm-up, 6 seeds, the training loss logged at "
                                   "every step) into --store, build its page (per-step training curves, validation "
                                   "curves, a verdict that holds whichever seeds stall) and print the verdict. "
                                   "Rerunning resumes: finished trials are not repeated. The 36-run study at lr 1e-3 "
                                   "is `normlab study run pre-vs-post`.")
    p.add_argument("--store", default="studies/pre-vs-post-demo", metavar="DIR",
                   help="study store (rerunning resumes it; completed trials are not repeated)")
    p.add_argument("--scale", default="cpu", help="study size: smoke (seconds), cpu (default; 24 runs of 300 steps, "
                   "about 3 min on 2 idle cores, measured from a fresh clone)")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="parallel trials (default: one per core)")
    p.add_argument("--data-dir", metavar="DIR", help="directory holding tinyshakespeare.txt (else download)")
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from normlab.core.fscheck import existing_dir, writable_dir
    from normlab.data import load_corpus
    from normlab.data.config import DataConfig
    from normlab.report import build_report
    from normlab.study.demo_preset import NAME
    from normlab.study.presets import study_preset
    from normlab.study.runner import run_study, status_text

    spec = study_preset(NAME, args.scale)  # a bad --scale fails before anything is written
    writable_dir(args.store, "--store")  # before the corpus download and the study
    from normlab.study.store import Store

    if Store.has_db(args.store):
        Store(args.store).close()  # a damaged store is refused now, not after the download
    if args.data_dir:
        existing_dir(args.data_dir, "--data-dir", "a directory holding tinyshakespeare.txt")
        # The environment, not the config: it reaches the worker processes and keeps the
        # trials' config hashes (their ids) independent of where this machine keeps the file.
        os.environ["NORMLAB_DATA_DIR"] = str(Path(args.data_dir).resolve())
    load_corpus(DataConfig())  # download and verify once, before workers start
    logging.getLogger(__name__).info(f"study '{NAME}' ({args.scale}) into {args.store}; "
                                     f"{len(spec.trials())} trials, rerun to resume if interrupted")
    from normlab.cli.common import interrupted

    resume = "finished trials are kept; rerun the same command to resume"
    try:
        store = run_study(spec, args.store, workers=args.workers)  # progress lines on stderr, bar on a terminal
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the trials stopped at their checkpoints
        return interrupted("demo", resume)
    if store.counts().get("interrupted"):  # a worker alone was signalled; its trial checkpointed
        return interrupted("demo", resume)
    print(status_text(store))
    page = build_report(args.store, progress=True)
    print()
    for line in headline(args.store):
        print(line)
    print(f"\nreport: {page.resolve()}")
    return 1 if store.counts().get("failed") or store.unfinished() else 0


def headline(store_dir: str | Path) -> list[str]:
    """The page's verdict and its plateau counts, as printed after the study."""
    from normlab.report.demo_answer import answer, collect
    from normlab.report.load import load_study
    from normlab.study.outcome import study_data_ce

    study = load_study(store_dir)
    finished = [t for t in study.trials if t.status in ("completed", "diverged")]
    if not finished:
        return ["no trial has finished"]
    text, notes = answer(collect(study), study_data_ce(finished))
    return [text, notes[0]]
