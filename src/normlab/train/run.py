"""``run_training``: validate everything, then own a run directory from start to summary.

Order matters for the promise "bad input never damages RUN": the corpus is loaded, the
splits checked, the model built and the loggers resolved *before* anything under RUN is
created or rewritten. Only rank 0 writes files under DDP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

import torch

from normlab.config import RunConfig
from normlab.errors import UserError
from normlab.fsutil import atomic_write_json, read_jsonl, write_jsonl

STATUSES = ("completed", "diverged", "failed", "interrupted")


def default_run_dir(root: str | Path = "runs") -> Path:
    """A fresh timestamped directory name under ``root`` (created later, by the run)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(root) / stamp
    i = 1
    while path.exists():
        path, i = Path(root) / f"{stamp}-{i}", i + 1
    return path


def load_run_config(run_dir: str | Path, label: str = "--resume") -> RunConfig:
    """RUN/config.json; ``label`` names the argument that gave RUN in the error."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise UserError(f"{label} {run_dir}: no config.json there; is it a normlab run directory "
                        "(`normlab train --out DIR` makes one)?")
    return RunConfig.from_json(path.read_text(encoding="utf-8"))


def is_run_dir(run_dir: Path) -> bool:
    """Whether ``run_dir`` already holds (part of) a run; shared with batched training."""
    return any((run_dir / n).exists() for n in ("config.json", "metrics.jsonl", "checkpoints"))


def finished(run_dir: str | Path) -> dict | None:
    """The summary of a run that has nothing left to do (completed or diverged), else None."""
    done = _read_summary(Path(run_dir))
    return done if done and done.get("status") in ("completed", "diverged") else None


def run_training(cfg: RunConfig | None, run_dir: str | Path, *, resume: bool = False, quiet: bool = False,
                 steps: int | None = None) -> dict:
    """Train one model into ``run_dir`` and return its summary (also RUN/summary.json).

    ``resume=True`` (``cfg`` may then be None) continues from RUN/checkpoints/latest (the stored config.json is the
    authority; a run killed before its first checkpoint starts over). A finished run is
    returned as is, unless ``steps`` raises its train.steps: then it continues from its
    final checkpoint to ``steps`` (the lr schedule is recomputed for the new total).
    Divergence returns normally with status "diverged"; Ctrl-C or SIGTERM returns status
    "interrupted" after a checkpoint.
    """
    from normlab.data import load_corpus
    from normlab.data.batches import check_fits, val_batches
    from normlab.model.transformer import TransformerLM
    from normlab.train import checkpoint
    from normlab.train.env import close_dist, environment, init_dist
    from normlab.train.loggers import make_loggers, require_loggers
    from normlab.train.loop import LoopState, Trainer
    from normlab.train.optim import make_optimizer

    run_dir = Path(run_dir)
    if resume:
        cfg = load_run_config(run_dir)
        done = finished(run_dir)
        if done and steps in (None, cfg.train.steps):
            return done  # nothing left to do; a finished run is never retrained
        if steps is not None:
            cfg = _extended(cfg, run_dir, steps, done)
    elif cfg is None:
        raise UserError("run_training: a RunConfig is required unless resume=True")
    elif run_dir.exists() and is_run_dir(run_dir):
        raise UserError(f"--out {run_dir}: already holds a run; use --resume {run_dir} or another --out")

    # ---- validate everything before touching RUN ----
    require_loggers(list(cfg.train.loggers))  # a missing package fails here, not after config.json
    corpus = load_corpus(cfg.data)
    check_fits(len(corpus.train), cfg.model.context, "training")
    check_fits(len(corpus.val), cfg.model.context, "validation")
    if cfg.train.init_from:  # the checkpoint's vocabulary stays (see normlab.train.init_from)
        from normlab.train.init_from import fit_vocab, load_init

        cfg = fit_vocab(cfg, corpus.vocab_size)
    else:
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, vocab_size=corpus.vocab_size))
    dist, device = init_dist(cfg.train.device)
    if not dist.enabled:  # every rank would have to agree on a refusal; DDP users size their own runs
        from normlab.train.budget import check_step_fits

        check_step_fits(cfg, device)
    if cfg.train.batch_size % (cfg.train.grad_accum * dist.world):
        raise UserError(f"train.batch_size={cfg.train.batch_size}: must be divisible by grad_accum x "
                        f"processes = {cfg.train.grad_accum * dist.world}")
    if cfg.train.compile and device.type == "cpu":
        from normlab.train.env import check_cpp_compiler

        check_cpp_compiler()  # before RUN is touched: a failed start leaves no half-made run
    if cfg.train.threads > 0:
        torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.seed)
    model = TransformerLM(cfg.model).to(device)
    if cfg.train.init_from:
        load_init(model, cfg)  # a resumed run then loads its own checkpoint over it
    if dist.rank:
        torch.manual_seed(cfg.seed + 7919 * dist.rank)  # own dropout masks per rank
    optimizer = make_optimizer(model, cfg.optim)
    val = val_batches(corpus.val, cfg.model.context, cfg.train.batch_size, cfg.train.eval_batches)

    # ---- from here on RUN is ours ----
    st = LoopState()
    ckpt = checkpoint.find(run_dir / "checkpoints" / "latest") if resume else None
    if resume and ckpt is None and (run_dir / "checkpoints" / "latest").exists() and dist.main:
        # A damaged checkpoint is never loaded; starting over reproduces the same metrics.
        logging.getLogger(__name__).warning(f"{checkpoint.problem(run_dir / 'checkpoints' / 'latest')}; "
                                            "restarting the run from step 0")
    env = environment(device, cfg.seed, dist)
    if dist.main:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(run_dir / "config.json", json.loads(cfg.to_json()))
        if resume and (run_dir / "env.json").is_file():
            first = json.loads((run_dir / "env.json").read_text(encoding="utf-8"))
            first.setdefault("resumes", []).append(env)
            env = first
        atomic_write_json(run_dir / "env.json", env)
    if ckpt is not None:
        state = checkpoint.load(ckpt, model, optimizer)
        st = LoopState(**state["loop"])
    if dist.main:
        _truncate(run_dir / "metrics.jsonl", st.step)
        _truncate(run_dir / "diagnostics.jsonl", st.step)
    loggers = make_loggers(list(cfg.train.loggers), run_dir, json.loads(cfg.to_json())) if dist.main else []
    trainer = Trainer(cfg, model, optimizer, corpus, val, run_dir, device, dist, loggers, quiet)
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
                atomic_write_json(run_dir / "summary.json", summary)
        if isinstance(e, OSError):  # a log write hit a full or read-only disk: one clear line
            raise UserError(f"cannot write under {run_dir}: {e.strerror or e} ({e.filename}); the last "
                            "checkpoint is intact (free space or fix permissions, then --resume)") from e
        raise
    finally:
        for lg in loggers:
            lg.close()
        close_dist(dist, finished=summary.get("status") == "completed")
    if dist.main:
        atomic_write_json(run_dir / "summary.json", summary)
    return summary


def _extended(cfg: RunConfig, run_dir: Path, steps: int, done: dict | None) -> RunConfig:
    """``cfg`` with train.steps raised to ``steps`` for ``--resume RUN --steps N``."""
    from normlab.train import checkpoint

    if done and done.get("status") == "diverged":
        raise UserError(f"--steps {steps}: {run_dir} diverged at step {done.get('diverged_at_step')}; "
                        "its weights are not finite, so train a new run instead")
    ckpt = checkpoint.find(run_dir / "checkpoints" / "latest")
    at = checkpoint.read_state(ckpt)["loop"]["step"] if ckpt is not None else 0
    if steps < max(at, cfg.train.steps if done else 0):
        raise UserError(f"--steps {steps}: {run_dir} has trained {at} of train.steps={cfg.train.steps}; "
                        "give a larger total")
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=steps))


def _truncate(path: Path, upto: int) -> None:
    """Drop log lines after the checkpoint step (resume rewrites them) and any torn last line."""
    if path.exists():
        write_jsonl(path, [r for r in read_jsonl(path) if r.get("step", 0) <= upto])


def _read_summary(run_dir: Path) -> dict | None:
    p = run_dir / "summary.json"
    return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None


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
        "params": sum(p.numel() for p in model.parameters()),
        "placement": cfg.model.placement,
        "seed": cfg.seed,
        "error": error,
    }
