"""What one process trains, as records: ``Data`` (the corpus of a plan, its validation batches,
the config with the tokenizer's vocabulary), ``Job`` (the plan, its data, the model and
optimizer, its place in DDP) and ``LoopState`` (what a checkpoint keeps of the loop besides
tensors). ``train/run.py`` makes them; the ``Trainer`` takes the Job."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from normlab.run.config import RunConfig
from normlab.train.plan import Plan

if TYPE_CHECKING:
    from normlab.data.corpus import Corpus
    from normlab.model.transformer import TransformerLM
    from normlab.train.env import Dist


@dataclass(frozen=True)
class Data:
    """The corpus of a plan, its fixed validation batches, and the config with the tokenizer's
    vocabulary (the config RUN/config.json records)."""

    cfg: RunConfig
    corpus: Corpus
    val: list[tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class Job:
    """What this process trains: the plan, its data, the model and optimizer, and its place in DDP."""

    plan: Plan
    data: Data
    model: TransformerLM  # or another model.impl with its forward contract (normlab.model.impls)
    optimizer: torch.optim.Optimizer
    dist: Dist
    device: torch.device

    @property
    def cfg(self) -> RunConfig:
        return self.data.cfg


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
