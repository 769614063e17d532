"""``run_training``: prepare, read the data, build, open RUN, train; each a step below.

Order matters for the promise "bad input never damages RUN": ``prepare``
(``normlab.train.plan``) checks names, options, the budget and the paths before the corpus
is read (or downloaded); the corpus is then loaded and the splits checked, and the model
built, *before* anything under RUN is created or rewritten. Only rank 0 writes files
under DDP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from normlab.core.dirlock import create_unique
from normlab.core.errors import UserError
from normlab.data import load_corpus
from normlab.data.batches import check_fits, val_batches
from normlab.data.record import make_record
from normlab.model import cost
from normlab.model.build import build_model
from normlab.run import checkpoint
from normlab.run.dir import RunDir
from normlab.run.init_from import fit_vocab, load_init
from normlab.run.resolve import RunConfig
from normlab.train.env import close_dist, environment, init_dist
from normlab.train.job import Data, Job
from normlab.train.lifecycle import open_files, start_loggers
from normlab.train.loop import LoopState, Trainer
from normlab.train.optim import make_optimizer
from normlab.train.plan import Plan, prepare

STATUSES = ("completed", "diverged", "failed", "interrupted")
__all__ = ["STATUSES", "claimed", "default_run_dir", "execute", "make_summary", "prepare", "run_training"]


def default_run_dir(root: str | Path = "runs") -> Path:
    """The proposed name of a new run, ``root/<YYYYmmdd-HHMMSS>``; ``prepare(..., unique=True)``
    makes the run take it or, when it exists by then, the next free ``-1``, ``-2``, ..."""
    return Path(root) / time.strftime("%Y%m%d-%H%M%S")


def run_training(cfg: RunConfig | None, run_dir: str | Path, *, resume: bool = False, quiet: bool = False,
                 steps: int | None = None, data_dir: str | None = None) -> dict:
    """Train one model into ``run_dir`` and return its summary (also RUN/summary.json).

    ``resume=True`` (``cfg`` may then be None) continues from RUN/checkpoints/latest (the stored config.json is the
    authority; a run killed before its first checkpoint starts over). A finished run is
    returned as is, unless ``steps`` raises its train.steps: then it continues from its
    final checkpoint to ``steps`` (the lr schedule is recomputed for the new total).
    Divergence returns normally with status "diverged"; Ctrl-C or SIGTERM returns status
    "interrupted" after a checkpoint. Bad input is refused before the corpus is read and
    before RUN is touched (``normlab.train.plan.prepare``). ``data_dir`` (resume only): where
    a moved corpus is now (``normlab.data.record.locate``).
    """
    plan = prepare(cfg, run_dir, resume=resume, steps=steps, data_dir=data_dir)
    if plan.done is not None:
        return plan.done  # nothing left to do
    return execute(plan, quiet=quiet)


def execute(plan: Plan, *, quiet: bool = False, on_run_dir: Callable[[Path], None] | None = None) -> dict:
    """Run a prepared plan (``prepare``): claim RUN (``claimed``), then the steps that read the
    corpus, join DDP and write it. ``on_run_dir`` hears the directory once RUN holds the run
    (the CLI prints it: a default name may have taken a suffix)."""
    with claimed(plan) as plan:
        if plan.done is not None:  # finished by another process before we held it
            if on_run_dir is not None:
                on_run_dir(plan.run_dir)
            return plan.done
        data = load_data(plan)
        job = build(plan, data)
        loggers, start = open_run(job)
        # Only now: a corpus or model refused above removes the folder the claim made, and a
        # script's RUN=$(normlab train ...) must never hold a path that is gone.
        if on_run_dir is not None:
            on_run_dir(plan.run_dir)
        return train(job, loggers, start, quiet)


@contextlib.contextmanager
def claimed(plan: Plan) -> Iterator[Plan]:
    """``with claimed(plan) as plan:`` RUN is this process's for the block (``RunDir.writing``).

    A default name (``plan.unique``) is created atomically, with a suffix when it exists
    already. What ``prepare`` decided from RUN's files is decided again under the lock,
    since another process may have written RUN in between: a fresh run finds RUN empty of
    runs, and a resume that has become finished has nothing left to do. Under DDP only rank
    0 writes files, so only rank 0 holds RUN.
    """

    if os.environ.get("RANK", "0") != "0":
        yield plan
        return
    path, created = plan.run_dir, list[Path]()
    if plan.unique:
        path, created = create_unique(path.parent, path.name)
    flag = "--resume" if plan.resume else "--out"
    run = RunDir(path)
    with run.writing(flag, fresh=not plan.resume, created=created):
        plan = dataclasses.replace(plan, run_dir=path, unique=False)
        done = run.finished() if plan.resume else None
        if done and plan.cfg.train.steps <= run.config(flag).train.steps:
            plan = dataclasses.replace(plan, done=done)
        yield plan


def load_data(plan: Plan) -> Data:
    """Read (or download) the corpus, check that both splits hold a window, fix the vocabulary
    from the tokenizer and cut the fixed validation batches."""

    cfg = plan.cfg
    corpus = load_corpus(cfg.data, expect_sha256=plan.corpus_sha256)  # a resume reads its own corpus only
    check_fits(len(corpus.train), cfg.model.context, "training")
    check_fits(len(corpus.val), cfg.model.context, "validation")
    val = val_batches(corpus.val, cfg.model.context, cfg.train.batch_size, cfg.train.eval_batches)
    if cfg.train.init_from:  # the checkpoint's vocabulary stays (see normlab.run.init_from)
        cfg = fit_vocab(cfg, corpus.vocab_size)
    else:
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, vocab_size=corpus.vocab_size))
    return Data(cfg, corpus, val)


def build(plan: Plan, data: Data) -> Job:
    """Join the process group, then build the seeded model (or DIR's weights) and its optimizer."""

    cfg = data.cfg
    dist, device = init_dist(cfg.train.device)
    if cfg.train.threads > 0:
        torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.seed)
    # model.impl picks the code (TransformerLM by default), from the resolution the checks made
    model = build_model(cfg.model, plan.model.for_config(cfg.model) if plan.model is not None else None).to(device)
    if cfg.train.init_from:
        load_init(model, cfg)  # a resumed run then loads its own checkpoint over it
    if dist.rank:
        torch.manual_seed(cfg.seed + 7919 * dist.rank)  # own dropout masks per rank
    return Job(plan, data, model, make_optimizer(model, cfg.optim), dist, device)


def open_run(job: Job) -> tuple[list[Any], Any]:
    """From here on RUN is ours: write config.json and env.json, load the latest checkpoint
    when resuming, drop log lines after it, start the loggers. Returns (loggers, loop state)."""

    cfg, run_dir, dist, resume = job.cfg, job.plan.run_dir, job.dist, job.plan.resume
    run = RunDir(run_dir)
    st = LoopState()
    ckpt = run.find_checkpoint("latest") if resume else None
    if resume and ckpt is None and run.checkpoint_dir("latest").exists() and dist.main:
        # A damaged checkpoint is never loaded; starting over reproduces the same metrics.
        logging.getLogger(__name__).warning(f"{run.checkpoint_problem('latest')}; restarting the run from step 0")
    env = environment(job.device, cfg.seed, dist)
    if dist.main:
        record = make_record(cfg.data, job.data.corpus)  # what data.json says, gathered before RUN is written
        open_files(run, cfg, env, resume, data=record)
    if ckpt is not None:
        state = checkpoint.load(ckpt, job.model, job.optimizer)
        st = LoopState(**state["loop"])
    if dist.main:
        run.truncate_logs(st.step)
    loggers = start_loggers(run, cfg) if dist.main else []
    return loggers, st


def train(job: Job, loggers: list[Any], st: Any, quiet: bool) -> dict:
    """The loop from ``st`` to the end, then summary.json; a failure still leaves a summary
    (status failed), and the process group is left in every case."""

    cfg, run_dir, dist, model = job.cfg, job.plan.run_dir, job.dist, job.model
    trainer = Trainer(job, loggers, quiet)
    summary: dict[str, Any] = {}
    try:
        status, st, diverged_at = trainer.run(st)
        summary = make_summary(status, st, diverged_at, cfg, model)
        if trainer.first_nonfinite is not None:  # diagnostics on: where the NaN/inf began
            summary["first_nonfinite"] = trainer.first_nonfinite
        for lg in loggers:
            lg.finish(summary)
    except BaseException as e:
        summary = make_summary("failed", st, None, cfg, model, error=f"{type(e).__name__}: {e}")
        if dist.main:
            with contextlib.suppress(OSError):  # the disk may be what failed; keep the first error
                RunDir(run_dir).write_summary(summary)
        if isinstance(e, OSError):  # a log write hit a full or read-only disk: one clear line
            raise UserError(f"cannot write under {run_dir}: {e.strerror or e} ({e.filename}); the last "
                            "checkpoint is intact (free space or fix permissions, then --resume)") from e
        raise
    finally:
        for lg in loggers:
            lg.close()
        close_dist(dist, finished=summary.get("status") == "completed")
    if dist.main:
        RunDir(run_dir).write_summary(summary)
    return summary


def make_summary(status: str, st: Any, diverged_at: int | None, cfg: RunConfig, model: torch.nn.Module,
                 error: str | None = None) -> dict[str, Any]:
    """summary.json of a run (the contract in docs/training.md); shared with batched training."""
    tokens = st.step * cfg.train.batch_size * cfg.model.context
    return {
        "status": status,
        "steps": st.step,
        "best_val_loss": st.best_val,
        "final_val_loss": st.last_val if status != "diverged" else None,
        "diverged_at_step": diverged_at,
        "wall_time_s": round(st.wall_time, 3),
        "tokens": tokens,
        "tokens_per_s": tokens / st.train_time if st.train_time > 0 else None,
        "params": cost.count(model),
        "placement": cfg.model.placement,
        "seed": cfg.seed,
        "error": error,
    }
