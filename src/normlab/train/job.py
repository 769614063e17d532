"""The records the training loops run on: ``LoopConfig`` (the loop's own settings, taken from
the train and optim sections by the composition root, ``train/run.py``) and ``LoopState``
(what a checkpoint keeps of the loop besides tensors)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from normlab.run.train_config import OptimConfig, TrainConfig
from normlab.train.cadence import Cadence
from normlab.train.step import clip_limit, lr_now, muon_lr_now


@dataclass(frozen=True)
class LoopConfig:
    """What the loop itself reads: its length and cadence, the step's arithmetic (micro-batches,
    precision, z-loss, clipping, the lr schedule) and its divergence rule. The model, data,
    checkpoint and logger settings reach their own components instead."""

    train: TrainConfig       # steps, grad_accum, compile, dtype, diverge_loss, the intervals
    optim: OptimConfig       # lr schedule, z-loss, clipping
    stochastic: bool = False  # dropout draws from the global RNG: an abandoned step restores it

    @property
    def steps(self) -> int:
        return self.train.steps

    @property
    def cadence(self) -> Cadence:
        return Cadence.of(self.train)

    @property
    def clip(self) -> float:
        return clip_limit(self.optim)

    def lr(self, step: int) -> float:
        """Learning rate of 0-based ``step`` (the schedule spans train.steps)."""
        return lr_now(self.optim, step, self.train.steps)

    def muon_lr(self, step: int) -> float:
        """The Muon group's learning rate at that step (``optim.name=muon``): the same schedule."""
        return muon_lr_now(self.optim, step, self.train.steps)


@dataclass
class LoopState:
    """Everything besides tensors needed to continue a run exactly (saved in state.json)."""

    step: int = 0                 # optimizer steps completed
    best_val: float | None = None
    last_val: float | None = None
    wall_time: float = 0.0        # seconds of training across sessions
    train_time: float = 0.0       # seconds inside optimizer steps (for tokens/s)
    loss_sum: float = 0.0         # sum of step losses since the last metrics line
    loss_n: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
