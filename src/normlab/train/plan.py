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
from normlab.core.schema import to_dict
from normlab.data.config import DataConfig
from normlab.data.record import absolute, locate
from normlab.data.tokenizers import make_tokenizer
from normlab.model import cost
from normlab.model.build import ResolvedModel, lab_internals, resolve_model
from normlab.model.config import ModelConfig
from normlab.model.param import Parametrisation
from normlab.model.placement import Placement, Stream
from normlab.run import checkpoint
from normlab.run.config import RunConfig
from normlab.run.dir import RunDir, writer
from normlab.run.train_config import TrainConfig
from normlab.train.budget import EXTRAPOLATE_ABOVE, check_step_fits
from normlab.train.env import check_cpp_compiler, pick_device, world_size
from normlab.train.loggers import require_loggers
from normlab.train.optim import check_optimizer


@dataclass(frozen=True)
class RunPlan:
    """A checked run: its config, its directory, and whether it continues one. Made and read by
    the composition root only (this module and ``train/run.py``): the components below it get
    their own sections."""

    cfg: RunConfig
    run_dir: Path
    resume: bool
    done: dict[str, Any] | None = None  # the summary of a finished run that has nothing left to do
    unique: bool = False  # run_dir is a proposed name: the run takes it or the next free one (-1, -2, ...)
    model: ResolvedModel | None = None      # cfg.model resolved (names, options), once per run
    corpus_sha256: str | None = None  # a resumed run's recorded corpus (RUN/data.json): no other is read
    meta: Any = None  # the run's one model, built on the meta device (shapes only): costed here, materialised later


def prepare(cfg: RunConfig | None, run_dir: str | Path, *, resume: bool = False,
            steps: int | None = None, unique: bool = False, data_dir: str | None = None) -> RunPlan:
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
            return RunPlan(cfg, run_dir, True, done)  # a finished run is never retrained
        run.env()  # appended to once the run is claimed: a damaged one is refused before anything is written
        if steps is not None:
            cfg = dataclasses.replace(cfg, train=_extended(cfg.train, run_dir, steps, done))
        found, sha = locate(cfg.data, run.data_record(), data_dir)
        cfg = dataclasses.replace(cfg, data=found)
    elif cfg is None:
        raise UserError("run_training: a RunConfig is required unless resume=True")
    elif not unique and run_dir.exists() and run.holds_run():  # (a taken default name gets a suffix)
        raise UserError(f"--out {run_dir}: already holds a run; use --resume {run_dir} or another --out")
    else:
        cfg = dataclasses.replace(cfg, data=absolute(cfg.data))
    model = resolve_model(cfg.model)  # placement, norm, init, FFN and impl names and the placements' options
    check_train(cfg.train, lab_internals(cfg.model), cfg.model.impl)
    if cfg.optim.name == "muon" and not lab_internals(cfg.model):
        # torch.optim.Muon scales a matrix's lr by its (out, in) shape; transformers' Conv1D
        # stores GPT-2's matrices as (in, out), so the two arms would not get the same updates.
        raise ConfigError("optim.name", "muon", f"Muon's per-matrix lr reads weights as nn.Linear's (out, in) "
                          f"and model.impl={cfg.model.impl!r} stores them transposed; use model.impl=normlab")
    check_optimizer(cfg.optim, model.param)  # Muon and a parametrisation's own lr rules
    planned = planned_model(cfg.model, cfg.data, cfg.train.init_from)
    # The run's one model, on the meta device: costed now, materialised once the corpus is read. A
    # deep stack (a mistyped n_layer) is costed from shallow ones first, and built only if it fits.
    meta = None if planned.n_layer > EXTRAPOLATE_ABOVE else cost.meta_model(planned, model)
    if world_size() == 1:  # every rank would have to agree on a refusal; DDP users size their own runs
        check_step_fits(planned, cfg.train, pick_device(cfg.train.device), plan=model, model=meta)
    if resume:
        fscheck.writable_dir(run_dir, "--resume", "copy the run to a writable disk and resume the copy")
    else:
        fscheck.writable_dir(run_dir, "--out")
    return RunPlan(cfg, run_dir, resume, unique=unique and not resume, model=model, corpus_sha256=sha,
                   meta=meta if meta is not None else cost.meta_model(planned, model))


def check_train(t: TrainConfig, lab: bool, impl: str) -> None:
    """The checks of the train section that need no corpus: what only the lab model supports
    (``lab``: model.impl builds a TransformerLM), the loggers, the batch split over the
    processes, the device and the compiler."""

    if not lab:  # these read TransformerLM's blocks and weight names
        why = f"model.impl={impl!r} is not the lab's TransformerLM"
        if t.diag_every > 0:
            raise ConfigError("train.diag_every", t.diag_every, f"in-training diagnostics read the "
                              f"lab model's blocks and {why}; set train.diag_every=0")
        if t.init_from:
            raise ConfigError("train.init_from", t.init_from, f"a lab model directory loads into "
                              f"TransformerLM and {why}; leave train.init_from empty")
    require_loggers(list(t.loggers))  # a missing package fails here, not after config.json
    world = world_size()
    if t.batch_size % (t.grad_accum * world):
        raise UserError(f"train.batch_size={t.batch_size}: must be divisible by grad_accum x "
                        f"processes = {t.grad_accum * world}")
    device = pick_device(t.device)  # under DDP the rank's own CUDA device comes later
    if t.compile and device.type == "cpu":
        check_cpp_compiler()


def planned_model(m: ModelConfig, data: DataConfig, init_from: str | None) -> ModelConfig:
    """``m`` with the vocabulary the run will have, as far as it is known without the corpus.

    byte and bpe fix it, a tokenizer.json holds it, a checkpoint keeps its own; a char
    vocabulary is the corpus's set of characters, so model.vocab_size (65, Tiny
    Shakespeare's) stands in for it (the run builds its model again on the meta device if
    the corpus has another: the embedding is a small part of a step's cost).
    """
    vocab = m.vocab_size
    if not init_from:  # (with init_from the checkpoint's vocabulary stays)
        if data.tokenizer == "byte":
            vocab = 256
        elif data.tokenizer == "bpe":
            vocab = data.bpe_vocab
        elif data.tokenizer.endswith(".json"):
            vocab = make_tokenizer(data.tokenizer).vocab_size  # a bad path fails here, before the corpus
    return dataclasses.replace(m, vocab_size=vocab)


def _extended(t: TrainConfig, run_dir: Path, steps: int, done: dict | None) -> TrainConfig:
    """``t`` with train.steps raised to ``steps`` for ``--resume RUN --steps N``.

    The stored eval_every is kept (config.json records the interval the run used).
    """

    if done and done.get("status") == "diverged":
        raise UserError(f"--steps {steps}: {run_dir} diverged at step {done.get('diverged_at_step')}; "
                        "its weights are not finite, so train a new run instead")
    ckpt = RunDir(run_dir).find_checkpoint("latest")
    at = checkpoint.read_state(ckpt)["loop"]["step"] if ckpt is not None else 0
    if steps < max(at, t.steps if done else 0):
        raise UserError(f"--steps {steps}: {run_dir} has trained {at} of train.steps={t.steps}; "
                        "give a larger total")
    return dataclasses.replace(t, steps=steps)


def incompatibility(cfgs: list[RunConfig]) -> str | None:
    """Why ``cfgs`` cannot be trained as one batch, or None when they can."""

    if not cfgs:
        return "no trials given"
    first = cfgs[0]
    model, data = to_dict(first.model), to_dict(first.data)
    train = {k: v for k, v in to_dict(first.train).items() if k != "diverge_loss"}
    for i, c in enumerate(cfgs[1:], 1):
        if to_dict(c.model) != model:
            return f"trial {i}: model section differs from trial 0 (batched trials share an architecture)"
        if to_dict(c.data) != data:
            return f"trial {i}: data section differs from trial 0"
        if {k: v for k, v in to_dict(c.train).items() if k != "diverge_loss"} != train:
            return f"trial {i}: train section differs from trial 0 (only train.diverge_loss may differ)"
    muon = next((i for i, c in enumerate(cfgs) if c.optim.name != "adamw"), None)
    if muon is not None:
        return (f"trial {muon}: optim.name={cfgs[muon].optim.name!r}: the batched step runs AdamW's kernel on each "
                "trial's slices; train it solo (study run --batch 1) or use optim.name=adamw")
    plan = resolve_model(first.model) if lab_internals(first.model) else None
    if plan is not None and type(plan.param).rule is not Parametrisation.rule:
        return (f"model.param={first.model.param!r}: the batched step runs one lr and one epsilon per trial over "
                "two groups; train it solo (study run --batch 1) or use model.param=sp")
    if first.model.dropout > 0:
        return f"model.dropout={first.model.dropout}: dropout masks inside vmap cannot match solo runs; use 0"
    if first.train.diag_every > 0:
        return "train.diag_every > 0: in-training diagnostics need solo runs; set it to 0"
    if not lab_internals(first.model):
        return f"model.impl={first.model.impl!r}: batching stacks the lab model's parameters; run it solo"
    plan = plan or resolve_model(first.model)
    stream_hook = type(plan.stream()).after_step is not Stream.after_step  # one stream per model
    for sub in {s.name: s for pair in plan.layout for s in pair}.values():
        if sub.cls.after_step is not Placement.after_step or stream_hook:
            return f"model.placement={sub.name!r} changes weights after each step (e.g. nGPT); run it solo"
    return None


def compatible(cfgs: list[RunConfig]) -> bool:
    """True when ``run_batched(cfgs, ...)`` accepts these configs (the study runner's test)."""
    return incompatibility(cfgs) is None
