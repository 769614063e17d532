"""``prepare``: every decision and check of a run that needs no corpus, no process group and
no write.

A run starts in this order: the config is resolved (``normlab.run.resolve.resolve``), then
``prepare`` decides what the run is (new, resumed, extended by ``--steps``, or finished
with nothing left to do) and checks the model's names and options, the loggers, the
compiler, the batch split over the processes, the step budget and the run directory's
path. Only a plan that passed all of that reaches the corpus (which may be downloaded),
DDP and RUN (``normlab.train.run``). A typo therefore costs nothing: no download, no
process group, no file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normlab.core import fscheck
from normlab.core.dirlock import refusal
from normlab.core.errors import ConfigError, UserError
from normlab.data.record import absolute, locate
from normlab.data.tokenizers import make_tokenizer
from normlab.model.build import Plan as ModelPlan
from normlab.model.build import lab_internals, resolve_model
from normlab.run import checkpoint
from normlab.run.config import RunConfig
from normlab.run.dir import RunDir, writer
from normlab.train.budget import check_step_fits
from normlab.train.env import check_cpp_compiler, pick_device, world_size
from normlab.train.loggers import require_loggers


@dataclass(frozen=True)
class Plan:
    """A checked run: its config, its directory, and whether it continues one."""

    cfg: RunConfig
    run_dir: Path
    resume: bool
    done: dict[str, Any] | None = None  # the summary of a finished run that has nothing left to do
    unique: bool = False  # run_dir is a proposed name: the run takes it or the next free one (-1, -2, ...)
    model: ModelPlan | None = None      # cfg.model resolved (names, options), once per run
    corpus_sha256: str | None = None  # a resumed run's recorded corpus (RUN/data.json): no other is read


def prepare(cfg: RunConfig | None, run_dir: str | Path, *, resume: bool = False,
            steps: int | None = None, unique: bool = False, data_dir: str | None = None) -> Plan:
    """Decide what the run is and check everything that can be checked before any I/O.

    Fresh (``resume=False``): ``cfg`` is required and RUN must not hold a run yet. Resume:
    RUN/config.json is the authority (``cfg`` is ignored); a finished run comes back with
    ``done`` set, unless ``steps`` raises its train.steps, which extends it, and its corpus
    is found where RUN/data.json recorded it (or in ``data_dir``, where it was moved). A
    fresh run's data paths become absolute, so config.json reads the same from anywhere.
    ``unique``: RUN is a default name, taken or suffixed when the run claims it
    (``normlab.train.run.claimed``). Reads nothing but RUN's own small files; raises
    UserError (or ConfigError) naming what to fix.
    """

    run_dir = Path(run_dir)
    run, sha = RunDir(run_dir), None
    holding = writer(run_dir)  # another process writes RUN: its files say nothing final yet
    if holding is not None and (resume or (not unique and run.holds_run())):
        raise refusal("--resume" if resume else "--out", run_dir, holding, None if resume else "choose another --out")
    if resume:
        fscheck.existing_dir(run_dir, "--resume", "a run directory (`normlab train --out RUN` makes one)")
        cfg = run.config("--resume")
        done = run.finished()
        if done and steps in (None, cfg.train.steps):
            return Plan(cfg, run_dir, True, done)  # a finished run is never retrained
        run.env()  # appended to once the run is claimed: a damaged one is refused before anything is written
        if steps is not None:
            cfg = _extended(cfg, run_dir, steps, done)
        found, sha = locate(cfg.data, run.data_record(), data_dir)
        cfg = dataclasses.replace(cfg, data=found)
    elif cfg is None:
        raise UserError("run_training: a RunConfig is required unless resume=True")
    elif not unique and run_dir.exists() and run.holds_run():  # (a taken default name gets a suffix)
        raise UserError(f"--out {run_dir}: already holds a run; use --resume {run_dir} or another --out")
    else:
        cfg = dataclasses.replace(cfg, data=absolute(cfg.data))
    model = check_config(cfg)
    if resume:
        fscheck.writable_dir(run_dir, "--resume", "copy the run to a writable disk and resume the copy")
    else:
        fscheck.writable_dir(run_dir, "--out")
    return Plan(cfg, run_dir, resume, unique=unique and not resume, model=model, corpus_sha256=sha)


def check_config(cfg: RunConfig) -> ModelPlan:
    """The checks of a resolved config that need no corpus: names first, then the machine.
    Returns the model's resolution, which the run builds from (it is resolved once)."""

    model = resolve_model(cfg.model)  # placement, norm, init, FFN and impl names and the placements' options
    if not lab_internals(cfg.model):  # these read TransformerLM's blocks and weight names
        impl = f"model.impl={cfg.model.impl!r} is not the lab's TransformerLM"
        if cfg.train.diag_every > 0:
            raise ConfigError("train.diag_every", cfg.train.diag_every, f"in-training diagnostics read the "
                              f"lab model's blocks and {impl}; set train.diag_every=0")
        if cfg.train.init_from:
            raise ConfigError("train.init_from", cfg.train.init_from, f"a lab model directory loads into "
                              f"TransformerLM and {impl}; leave train.init_from empty")
    require_loggers(list(cfg.train.loggers))  # a missing package fails here, not after config.json
    world = world_size()
    if cfg.train.batch_size % (cfg.train.grad_accum * world):
        raise UserError(f"train.batch_size={cfg.train.batch_size}: must be divisible by grad_accum x "
                        f"processes = {cfg.train.grad_accum * world}")
    device = pick_device(cfg.train.device)  # under DDP the rank's own CUDA device comes later
    if cfg.train.compile and device.type == "cpu":
        check_cpp_compiler()
    if world == 1:  # every rank would have to agree on a refusal; DDP users size their own runs

        check_step_fits(_with_planned_vocab(cfg), device, plan=model)
    return model


def _with_planned_vocab(cfg: RunConfig) -> RunConfig:
    """``cfg`` with the vocabulary the run will have, as far as it is known without the corpus.

    byte and bpe fix it, a tokenizer.json holds it, a checkpoint keeps its own; a char
    vocabulary is the corpus's set of characters, so model.vocab_size (65, Tiny
    Shakespeare's) stands in for it: the embedding is a small part of a step's cost.
    """
    data, vocab = cfg.data, cfg.model.vocab_size
    if not cfg.train.init_from:  # (with init_from the checkpoint's vocabulary stays)
        if data.tokenizer == "byte":
            vocab = 256
        elif data.tokenizer == "bpe":
            vocab = data.bpe_vocab
        elif data.tokenizer.endswith(".json"):
            vocab = make_tokenizer(data.tokenizer).vocab_size  # a bad path fails here, before the corpus
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, vocab_size=vocab))


def _extended(cfg: RunConfig, run_dir: Path, steps: int, done: dict | None) -> RunConfig:
    """``cfg`` with train.steps raised to ``steps`` for ``--resume RUN --steps N``.

    The stored eval_every is kept (config.json records the interval the run used).
    """

    if done and done.get("status") == "diverged":
        raise UserError(f"--steps {steps}: {run_dir} diverged at step {done.get('diverged_at_step')}; "
                        "its weights are not finite, so train a new run instead")
    ckpt = RunDir(run_dir).find_checkpoint("latest")
    at = checkpoint.read_state(ckpt)["loop"]["step"] if ckpt is not None else 0
    if steps < max(at, cfg.train.steps if done else 0):
        raise UserError(f"--steps {steps}: {run_dir} has trained {at} of train.steps={cfg.train.steps}; "
                        "give a larger total")
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=steps))
