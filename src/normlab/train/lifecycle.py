"""What the solo and the batched loop do around their steps, written once: opening the run
directory, the rows of a metrics line, the validation bookkeeping and the summary. The loops
differ only in what a step is (one model, or K trials stacked)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from normlab.model import cost
from normlab.run.config import RunConfig
from normlab.run.dir import RunDir
from normlab.train.job import LoopState
from normlab.train.loggers import Logger, make_loggers


def finite(v: float) -> float | None:
    """``v``, or None when it is not finite (JSON has no NaN/inf; null means "not finite")."""
    return v if math.isfinite(v) else None


def open_files(run: RunDir, cfg: RunConfig, env: dict[str, Any], resume: bool = False,
               data: dict[str, Any] | None = None) -> None:
    """The opening: write RUN's config.json (the whole config: the record of the run), env.json
    (a resume appends its record) and data.json (``data``: ``normlab.data.record.make_record``;
    a resume that found a moved corpus records where it is now). Every check passed before this."""
    run.write_config(cfg)
    run.write_env(env, resume=resume)
    if data is not None:
        run.write_data_record(data)


def start_loggers(run: RunDir, names: list[str], config: str) -> list[Logger]:
    """The loggers ``names`` (``train.loggers``), jsonl (RUN/metrics.jsonl, through ``run``)
    first; ``config``: config.json's text, which W&B and TensorBoard record beside the metrics.
    Started last, after a resume loaded its checkpoint, so a failed load leaves no logger open."""
    return make_loggers(names, run.path, json.loads(config), run.append_metrics)


def window_row(loss_sum: float, loss_n: int, lr: float, grad_norm: float, steps: int, train_s: float,
               tokens_per_step: int) -> dict[str, Any]:
    """The training part of a metrics line for the steps since the last one: mean train loss,
    lr, pre-clip gradient norm, seconds per step and tokens/s (both loops, one definition)."""
    return {"train/loss": finite(loss_sum / loss_n), "lr": lr, "grad_norm": finite(grad_norm),
            "time/step_s": train_s / steps, "tokens_per_s": tokens_per_step * steps / max(train_s, 1e-9)}


def diverged_row(loss_sum: float, loss_n: int, lr: float, grad_norm: float) -> dict[str, Any]:
    """The last metrics line of a run that diverged."""
    return {"train/loss": finite(loss_sum / loss_n), "lr": lr, "grad_norm": finite(grad_norm), "diverged": True}


def validated(st: LoopState, val: float) -> bool:
    """Record validation loss ``val`` in loop state ``st``; True when it is a new best (the
    caller then saves the ``best`` checkpoint, weights only)."""
    st.last_val = val
    if st.best_val is None or val < st.best_val:
        st.best_val = val
        return True
    return False


@dataclass(frozen=True)
class Facts:
    """What summary.json says of a run besides its outcome, fixed when the run is composed."""

    tokens_per_step: int
    placement: Any  # model.placement: a name, or a list per block
    seed: int

    def summary(self, status: str, st: LoopState, diverged_at: int | None, model: Any,
                error: str | None = None) -> dict[str, Any]:
        """summary.json of a run (the contract in docs/training.md); both loops write it."""
        tokens = st.step * self.tokens_per_step
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
            "placement": self.placement,
            "seed": self.seed,
            "error": error,
        }
