"""Which steps do more than train: one rule for the solo loop and the batched loop.

Steps are counted 1-based (optimizer steps completed). The last step always evaluates,
logs and checkpoints, so every finished run ends with a validation loss, a metrics line
and a ``latest`` checkpoint whatever the intervals are:

| step kind | when |
|-----------|------|
| eval      | ``eval_every > 0`` and step % eval_every == 0, or the last step |

``train.eval_every = none`` (the default) follows the run's length: ``TrainConfig``
resolves it to ``steps // 8`` (at least 1), about eight validations per run whatever
``train.steps`` is; 2000 steps give the old fixed 250. Presets and study presets pin
their own interval.
| log       | step % log_every == 0, or an eval step (a validation loss is always written) |
| ckpt      | ``checkpoint_every > 0`` and step % checkpoint_every == 0, or the last step |
| diag      | ``diag_every > 0`` and step % diag_every == 0 |

A step of any kind is a *sync* step: the host reads the device-side accumulators there
(loss, divergence). The plan depends on the step and the config only, never on the
rank, so every DDP rank reaches the same collectives at the same steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from normlab.run.train_config import TrainConfig


@dataclass(frozen=True)
class StepPlan:
    """What a step does besides the update."""

    eval: bool
    log: bool
    ckpt: bool
    diag: bool

    @property
    def sync(self) -> bool:
        """The host reads the device-side accumulators at this step."""
        return self.log or self.ckpt or self.diag


@dataclass(frozen=True)
class Cadence:
    """The intervals of ``TrainConfig`` as step predicates (see the module docstring)."""

    steps: int
    eval_every: int
    log_every: int
    checkpoint_every: int
    diag_every: int = 0

    def __post_init__(self) -> None:
        # TrainConfig validates user input; this guards direct construction in code.
        if self.steps < 1 or self.log_every < 1:
            raise ValueError(f"Cadence: steps={self.steps} and log_every={self.log_every} must be >= 1")
        if min(self.eval_every, self.checkpoint_every, self.diag_every) < 0:
            raise ValueError("Cadence: eval_every, checkpoint_every and diag_every must be >= 0")

    @classmethod
    def of(cls, t: TrainConfig) -> Cadence:
        assert t.eval_every is not None  # TrainConfig resolves none to a number
        return cls(t.steps, t.eval_every, t.log_every, t.checkpoint_every, t.diag_every)

    def is_eval(self, step: int) -> bool:
        return (self.eval_every > 0 and step % self.eval_every == 0) or step == self.steps

    def is_log(self, step: int) -> bool:
        return step % self.log_every == 0 or self.is_eval(step)

    def is_ckpt(self, step: int) -> bool:
        return (self.checkpoint_every > 0 and step % self.checkpoint_every == 0) or step == self.steps

    def is_diag(self, step: int) -> bool:
        return self.diag_every > 0 and step % self.diag_every == 0

    def what(self, step: int) -> StepPlan:
        return StepPlan(self.is_eval(step), self.is_log(step), self.is_ckpt(step), self.is_diag(step))
