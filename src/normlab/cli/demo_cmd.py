"""``normlab demo``: the README's main job. Pre-LN vs Post-LN on Tiny Shakespeare (the seed 002
experiment, study preset ``pre-vs-post``), then its evidence report and the headline numbers."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from normlab.study.spec import StudySpec


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="main job: Pre-LN vs Post-LN study on Tiny Shakespeare, then its report",
                       description="Run the study preset pre-vs-post (Post-LN and Pre-LN, with and without "
                                   "warm-up, several seeds) into --store, build its report and print the "
                                   "headline numbers. Rerunning resumes: finished trials are not repeated.")
    p.add_argument("--store", default="studies/pre-vs-post", metavar="DIR",
                   help="study store (rerunning resumes it; completed trials are not repeated)")
    p.add_argument("--scale", default="cpu", help="study size: smoke (seconds), cpu (default; 36 runs, about 25 min on 2 idle "
                   "cores), seed (seed 002's settings, 36 runs; 157 min measured at the older 16), gpu")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="parallel trials (default: one per core)")
    p.add_argument("--data-dir", metavar="DIR", help="directory holding tinyshakespeare.txt (else download)")
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from normlab.core.fscheck import existing_dir, writable_dir
    from normlab.data import load_corpus
    from normlab.data.config import DataConfig
    from normlab.report import build_report
    from normlab.study.runner import run_study, status_text

    writable_dir(args.store, "--store")  # before the corpus download and the study
    if (Path(args.store) / "study.sqlite").exists():
        from normlab.study.store import Store

        Store(args.store).close()  # a damaged store is refused now, not after the download
    if args.data_dir:
        existing_dir(args.data_dir, "--data-dir", "a directory holding tinyshakespeare.txt")
        # The environment, not the config: it reaches the worker processes and keeps the
        # trials' config hashes (their ids) independent of where this machine keeps the file.
        os.environ["NORMLAB_DATA_DIR"] = str(Path(args.data_dir).resolve())
    load_corpus(DataConfig())  # download and verify once, before workers start
    spec = demo_spec(args.scale)
    logging.getLogger(__name__).info(f"study 'pre-vs-post' ({args.scale}) into {args.store}; "
                                     f"{len(spec.trials())} trials, rerun to resume if interrupted")
    store = run_study(spec, args.store, workers=args.workers)  # progress lines on stderr, bar on a terminal
    if store.counts().get("interrupted"):  # Ctrl-C reached the trials first (one worker: in this process)
        from normlab.cli import interrupted

        return interrupted("demo", "finished trials are kept; rerun the same command to resume")
    print(status_text(store))
    page = build_report(args.store, progress=True)
    print()
    for line in headline(store):
        print(line)
    print(f"\nreport: {page.resolve()}")
    return 1 if store.counts().get("failed") or store.unfinished() else 0


def demo_spec(scale: str) -> StudySpec:
    """The pre-vs-post preset; without transformers (``pip install normlab``: the base
    dependencies) its GPT-2 baseline arm, a check of the implementation, is left out, saying so."""
    import importlib.util

    from normlab.study.presets import study_preset

    spec = study_preset("pre-vs-post", scale)
    if importlib.util.find_spec("transformers") is None:
        logging.getLogger(__name__).info("transformers is not installed: the GPT-2 baseline arm (a check of the "
                                         "implementation) is left out; pip install 'normlab[hf]' to run it")
        spec = spec.without("model.impl", "hf-gpt2")
    return spec


def headline(store) -> list[str]:  # store: normlab.study.store.Store
    """One line per warm-up setting: Pre-LN's best val loss minus Post-LN's (mean over seeds), and
    the lab Pre-LN's minus its transformers GPT-2 baseline's (a check of the implementation)."""
    from normlab.study.results import results

    rows = results(store.trials(), ["model.placement", "model.impl", "optim.warmup_steps"], [])
    by = {(r.scientific["model.placement"], r.scientific["model.impl"] or "normlab",
           r.scientific["optim.warmup_steps"]): r for r in rows}
    lines = []
    for warm in sorted({w for _, _, w in by}):
        post, pre, hf = by.get(("post", "normlab", warm)), by.get(("pre", "normlab", warm)), by.get(("pre", "hf-gpt2", warm))
        if not post or not pre:
            continue
        def show(r) -> str:
            if r.mean is None:
                return f"no completed run ({r.diverged} diverged)"
            return f"{r.mean:.4f}" + (f" +/- {r.std:.4f}" if r.std is not None else "") + f" over {r.seeds} seeds"
        gap = "" if post.mean is None or pre.mean is None else f"; Pre - Post = {pre.mean - post.mean:+.4f}"
        lines.append(f"warm-up {warm:>4} steps: best val loss Post-LN {show(post)}, Pre-LN {show(pre)}{gap}")
        if hf is not None:  # the baseline: the same Pre-LN computed by transformers, same initial weights
            check = "" if pre.mean is None or hf.mean is None else f"; lab - baseline = {pre.mean - hf.mean:+.4f}"
            lines.append(f"{'':>19}check of the implementation: transformers GPT-2 {show(hf)}{check}")
    return lines
