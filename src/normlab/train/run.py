"""The composition root of a training run: ``prepare`` then ``execute`` (``run_training`` is
the two in one call; the CLI and the library both go this way).

This module and ``train/plan.py`` (the pre-flight) are the only code that sees the whole
RunConfig, besides config.json's writer: each component below gets its own section.
``execute`` reads the corpus (``data``), materialises the one model that ``prepare`` built
on the meta device (``model``, seeded), makes the optimizer (``optim``), the batches (the
corpus and the batch shape), a Checkpointer and a Metrics object (each holding the RunDir)
and the training diagnostics (their cadence), and hands them to the Trainer with its loop
config (``train`` and ``optim``).

Order matters for the promise "bad input never damages RUN": ``prepare`` checks names,
options, the budget and the paths before the corpus is read (or downloaded); the corpus is
then loaded and the splits checked, and the model built, *before* anything under RUN is
created or rewritten. Only rank 0 writes files under DDP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from normlab.core.dirlock import create_unique
from normlab.core.errors import UserError
from normlab.data import load_corpus
from normlab.data.batches import check_fits, val_batches
from normlab.data.corpus import Corpus
from normlab.data.record import make_record
from normlab.diagnostics.training import TrainingDiagnostics
from normlab.model import cost
from normlab.model.build import build_model, lab_internals, materialise
from normlab.run.config import RunConfig
from normlab.run.dir import RunDir
from normlab.run.init_from import fit_vocab, load_init
from normlab.train.batched import Trial, train_trials
from normlab.train.batches import Batches
from normlab.train.checkpointer import Checkpointer
from normlab.train.env import Dist, close_dist, environment, init_dist, pick_device
from normlab.train.job import LoopConfig, LoopState
from normlab.train.lifecycle import Facts, open_files, start_loggers
from normlab.train.loop import Parts, Trainer
from normlab.train.metrics import Metrics
from normlab.train.optim import make_optimizer
from normlab.train.plan import RunPlan, compatible, incompatibility, prepare

STATUSES = ("completed", "diverged", "failed", "interrupted")
__all__ = ["STATUSES", "RunPlan", "claimed", "compatible", "default_run_dir", "execute", "prepare", "run_batched",
           "run_training"]


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


def execute(plan: RunPlan, *, quiet: bool = False, on_run_dir: Callable[[Path], None] | None = None) -> dict:
    """Run a prepared plan (``prepare``): claim RUN (``claimed``), read the corpus, build the
    components from their sections, open RUN and train. ``on_run_dir`` hears the directory once
    RUN holds the run (the CLI prints it: a default name may have taken a suffix)."""
    with claimed(plan) as plan:
        if plan.done is not None:  # finished by another process before we held it
            if on_run_dir is not None:
                on_run_dir(plan.run_dir)
            return plan.done
        cfg = plan.cfg
        corpus = read_corpus(plan)
        cfg = _with_vocab(cfg, corpus.vocab_size)
        dist, device = init_dist(cfg.train.device)
        if cfg.train.threads > 0:
            torch.set_num_threads(cfg.train.threads)
        model, reinit = build(plan, cfg, device)
        if dist.rank:
            torch.manual_seed(cfg.seed + 7919 * dist.rank)  # own dropout masks per rank
        optimizer = make_optimizer(model, cfg.optim)
        val = val_batches(corpus.val, cfg.model.context, cfg.train.batch_size, cfg.train.eval_batches)
        run = RunDir(plan.run_dir)
        ckpt = Checkpointer(run, corpus.tokenizer, keep_series=cfg.train.keep_checkpoints, main=dist.main)
        st = open_run(plan, cfg, run, ckpt, corpus, model, optimizer, dist, device)
        loggers = start_loggers(run, list(cfg.train.loggers), cfg.to_json()) if dist.main else []
        # Only now: a corpus or model refused above removes the folder the claim made, and a
        # script's RUN=$(normlab train ...) must never hold a path that is gone.
        if on_run_dir is not None:
            on_run_dir(plan.run_dir)
        batches = Batches(corpus.train, cfg.model.context, cfg.train.batch_size, cfg.train.grad_accum, cfg.seed,
                          dist.rank, dist.world)
        diag = None
        if cfg.train.diag_every > 0 and dist.main:
            diag = TrainingDiagnostics(model, plan.run_dir, (val[0][0].to(device), val[0][1].to(device)),
                                       every=cfg.train.diag_every, optimizer=optimizer,
                                       sharpness_every=cfg.train.sharpness_every, sharpness_iters=cfg.train.sharpness_iters)
        parts = Parts(model, optimizer, batches, val, ckpt, Metrics(loggers, batches.tokens_per_step), diag, dist,
                      device, reinit, label=str(plan.run_dir))
        facts = Facts(batches.tokens_per_step, cfg.model.placement, cfg.seed)
        trainer = Trainer(LoopConfig(cfg.train, cfg.optim, stochastic=cfg.model.dropout > 0), parts, quiet)
        return train(trainer, st, facts, run)


@contextlib.contextmanager
def claimed(plan: RunPlan) -> Iterator[RunPlan]:
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


def read_corpus(plan: RunPlan) -> Corpus:
    """Read (or download) the corpus and check that both splits hold a window; a resume reads
    only the corpus it recorded."""
    cfg = plan.cfg
    corpus = load_corpus(cfg.data, expect_sha256=plan.corpus_sha256)
    check_fits(len(corpus.train), cfg.model.context, "training")
    check_fits(len(corpus.val), cfg.model.context, "validation")
    return corpus


def build(plan: RunPlan, cfg: RunConfig, device: torch.device) -> tuple[Any, Callable[[], None]]:
    """The run's model, seeded with ``cfg.seed``: the meta model of ``prepare`` materialised on
    ``device`` (built again on the meta device only if the corpus's vocabulary differs from the
    planned one), or another model.impl built directly. Returns it and ``reinit``, which puts the
    same initial weights back (the divergence replay's start)."""

    resolved = plan.model.for_config(cfg.model) if plan.model is not None else None
    if not lab_internals(cfg.model):
        torch.manual_seed(cfg.seed)
        return build_model(cfg.model, resolved).to(device), lambda: None  # (no replay: diagnostics need the lab model)
    meta = plan.meta if plan.meta is not None and plan.meta.cfg == cfg.model else cost.meta_model(cfg.model, resolved)

    def reinit() -> None:
        torch.manual_seed(cfg.seed)
        materialise(meta, device)
        if cfg.train.init_from:
            load_init(meta, cfg.train.init_from)  # a resumed run then loads its own checkpoint over it

    reinit()
    return meta, reinit


def open_run(plan: RunPlan, cfg: RunConfig, run: RunDir, ckpt: Checkpointer, corpus: Corpus, model: Any,
             optimizer: torch.optim.Optimizer, dist: Dist, device: torch.device) -> Any:
    """From here on RUN is ours: write config.json and env.json, load the latest checkpoint when
    resuming, drop log lines after it. Returns the loop state to start from."""

    if dist.main:
        record = make_record(cfg.data, corpus)  # what data.json says, gathered before RUN is written
        open_files(run, cfg, environment(device, cfg.seed, dist), plan.resume, data=record)
    st = ckpt.load_latest(model, optimizer) if plan.resume else LoopState()
    if dist.main:
        run.truncate_logs(st.step)
    return st


def train(trainer: Trainer, st: Any, facts: Facts, run: RunDir) -> dict:
    """The loop from ``st`` to the end, then summary.json; a failure still leaves a summary
    (status failed), and the process group is left in every case."""

    dist, model, metrics = trainer.dist, trainer.model, trainer.metrics
    summary: dict[str, Any] = {}
    try:
        status, st, diverged_at = trainer.run(st)
        summary = facts.summary(status, st, diverged_at, model)
        if trainer.first_nonfinite is not None:  # diagnostics on: where the NaN/inf began
            summary["first_nonfinite"] = trainer.first_nonfinite
        metrics.finish(summary)
    except BaseException as e:
        summary = facts.summary("failed", st, None, model, error=f"{type(e).__name__}: {e}")
        if dist.main:
            with contextlib.suppress(OSError):  # the disk may be what failed; keep the first error
                run.write_summary(summary)
        if isinstance(e, OSError):  # a log write hit a full or read-only disk: one clear line
            raise UserError(f"cannot write under {run.path}: {e.strerror or e} ({e.filename}); the last "
                            "checkpoint is intact (free space or fix permissions, then --resume)") from e
        raise
    finally:
        metrics.close()
        close_dist(dist, finished=summary.get("status") == "completed")
    if dist.main:
        run.write_summary(summary)
    return summary


def run_batched(cfgs: list[RunConfig], run_dirs: list[Path], quiet: bool = False) -> list[dict]:
    """Train ``cfgs[i]`` into ``run_dirs[i]`` as one batched computation (``train/batched.py``);
    returns the summaries. Each run directory follows the solo contract (config.json, env.json,
    metrics.jsonl, summary.json, checkpoints written by ``normlab.run.checkpoint``). Raises
    ``UserError`` naming the reason when ``compatible(cfgs)`` is False, or when a run directory
    holds a run or is being written by another process. (``quiet``: the loop prints no progress.)"""

    run_dirs = [Path(d) for d in run_dirs]
    if len(cfgs) != len(run_dirs):
        raise UserError(f"run_batched: {len(cfgs)} configs but {len(run_dirs)} run directories")
    why = incompatibility(cfgs)
    if why:
        raise UserError(f"cannot batch these trials: {why}")
    if len(set(run_dirs)) != len(run_dirs):
        raise UserError("run_batched: two trials share one run directory")
    for d in run_dirs:
        if d.exists() and RunDir(d).holds_run():
            raise UserError(f"{d}: already holds a run; batched trials start fresh")
    # the solo run's pre-flight (names resolved once, loggers, batch split, compiler, budget,
    # path), then its corpus and vocabulary (init_from's kept) and its build, per trial
    plans = [prepare(c, d) for c, d in zip(cfgs, run_dirs)]
    corpus = read_corpus(plans[0])  # the model, data and train sections are the same for every trial
    first = plans[0].cfg
    device = pick_device(first.train.device)
    if first.train.threads > 0:
        torch.set_num_threads(first.train.threads)
    cfgs = [_with_vocab(p.cfg, corpus.vocab_size) for p in plans]
    models = [build(p, c, device)[0] for p, c in zip(plans, cfgs)]  # each seeded as its solo run
    val = val_batches(corpus.val, first.model.context, first.train.batch_size, first.train.eval_batches)
    with contextlib.ExitStack() as held:  # every trial's RUN is ours until its summary is written
        for d in run_dirs:
            held.enter_context(RunDir(d).writing("run_batched", fresh=True))
        trials = [_trial(c, RunDir(d), m, corpus, device, run_dirs) for c, d, m in zip(cfgs, run_dirs, models)]
        return train_trials(trials, LoopConfig(first.train, first.optim), val, device)


def _with_vocab(cfg: RunConfig, corpus_vocab: int) -> RunConfig:
    """``cfg`` with the tokenizer's vocabulary, or (init_from) the checkpoint's, which must cover it."""
    if cfg.train.init_from:  # the checkpoint's vocabulary stays (see normlab.run.init_from)
        fit_vocab(cfg.model.vocab_size, cfg.train.init_from, corpus_vocab)
        return cfg
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, vocab_size=corpus_vocab))


def _trial(cfg: RunConfig, run: RunDir, model: Any, corpus: Corpus, device: torch.device, run_dirs: list[Path]) -> Trial:
    """Open one batched trial's RUN (config.json, env.json naming the batch, data.json) and build
    its components from its sections."""
    env = environment(device, cfg.seed, Dist())
    env["batched"] = {"trials": len(run_dirs), "run_dirs": [str(d) for d in run_dirs]}
    open_files(run, cfg, env, data=make_record(cfg.data, corpus))
    batches = Batches(corpus.train, cfg.model.context, cfg.train.batch_size, cfg.train.grad_accum, cfg.seed)
    return Trial(model, cfg.optim, cfg.train.diverge_loss, batches, run,
                 Checkpointer(run, corpus.tokenizer, keep_series=cfg.train.keep_checkpoints, batched=True),
                 Metrics(start_loggers(run, list(cfg.train.loggers), cfg.to_json()), batches.tokens_per_step),
                 Facts(batches.tokens_per_step, cfg.model.placement, cfg.seed))
