"""What the solo and the batched loop do around their steps, written once: opening the run
directory, the metrics line, the validation bookkeeping with its ``best`` checkpoint, and
the checkpoint's state. The loops differ only in what a step is (one model, or K trials
stacked); each calls these with its own model, loop state and loggers.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from torch import nn

from normlab.data.tokenizers import Tokenizer
from normlab.run.config import RunConfig
from normlab.run.dir import RunDir
from normlab.train.job import LoopState
from normlab.train.loggers import Logger, make_loggers

if TYPE_CHECKING:
    import torch


def finite(v: float) -> float | None:
    """``v``, or None when it is not finite (JSON has no NaN/inf; null means "not finite")."""
    return v if math.isfinite(v) else None


def open_files(run: RunDir, cfg: RunConfig, env: dict[str, Any], resume: bool = False,
               data: dict[str, Any] | None = None) -> None:
    """The opening: write RUN's config.json, env.json (a resume appends its record to
    env.json) and data.json (``data``: ``normlab.data.record.make_record``; a resume that found
    a moved corpus records where it is now). every check passed before this."""
    run.write_config(cfg)
    run.write_env(env, resume=resume)
    if data is not None:
        run.write_data_record(data)


def start_loggers(run: RunDir, cfg: RunConfig) -> list[Logger]:
    """The run's loggers, jsonl (RUN/metrics.jsonl, through ``run``) first. Started last, after
    a resume loaded its checkpoint, so a failed load leaves no logger (a W&B run) open."""

    return make_loggers(list(cfg.train.loggers), run.path, json.loads(cfg.to_json()), run.append_metrics)


def metrics_line(loggers: list[Logger], step: int, tokens_per_step: int, metrics: dict[str, Any]) -> None:
    """One metrics line (``tokens`` first, then ``metrics``) to every logger."""
    row = {"tokens": step * tokens_per_step, **metrics}
    for lg in loggers:
        lg.log(row, step)


def window_row(loss_sum: float, loss_n: int, lr: float, grad_norm: float, steps: int, train_s: float,
               tokens_per_step: int) -> dict[str, Any]:
    """The training part of a metrics line for the steps since the last one: mean train loss,
    lr, pre-clip gradient norm, seconds per step and tokens/s (both loops, one definition)."""
    return {"train/loss": finite(loss_sum / loss_n), "lr": lr, "grad_norm": finite(grad_norm),
            "time/step_s": train_s / steps, "tokens_per_s": tokens_per_step * steps / max(train_s, 1e-9)}


def diverged_row(loss_sum: float, loss_n: int, lr: float, grad_norm: float) -> dict[str, Any]:
    """The last metrics line of a run that diverged."""
    return {"train/loss": finite(loss_sum / loss_n), "lr": lr, "grad_norm": finite(grad_norm), "diverged": True}


def finish(run: RunDir, loggers: list[Logger], summary: dict[str, Any]) -> None:
    """The closing of a trial of the batched loop: every logger gets the summary and is closed,
    then RUN/summary.json is written (the solo loop does the same around its error handling)."""
    for lg in loggers:
        lg.finish(summary)
        lg.close()
    run.write_summary(summary)


def validated(st: LoopState, val: float) -> bool:
    """Record validation loss ``val`` in loop state ``st``; True when it is a new best (the
    caller then saves the ``best`` checkpoint, weights only)."""
    st.last_val = val
    if st.best_val is None or val < st.best_val:
        st.best_val = val
        return True
    return False


def save(run: RunDir, name: str, model: nn.Module, st: LoopState, tokenizer: Tokenizer,
         optimizer: torch.optim.Optimizer | None = None, **extra: Any) -> None:
    """Checkpoint ``name`` of the run: the weights (and optimizer), the loop state and the
    tokenizer, so resume and ``normlab sample`` need nothing else."""
    run.save_checkpoint(name, model, {"loop": vars(st), "tokenizer": tokenizer.state(), **extra}, optimizer)
