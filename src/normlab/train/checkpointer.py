"""``Checkpointer``: the one writer and reader of a run's checkpoints during training, holding
its ``RunDir``. The solo and the batched loop save through it; what a checkpoint holds is
``normlab.run.checkpoint``'s business, where it lives RunDir's."""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from normlab.data.tokenizers import Tokenizer
from normlab.run import checkpoint
from normlab.run.dir import RunDir
from normlab.train.job import LoopState


class Checkpointer:
    """``latest`` (weights, optimizer, loop state) at the checkpoint steps, ``best`` (weights) at
    a new best validation loss, and with ``keep_series`` the weights of every checkpoint step
    (``step_000100``, ...; step 0 too) for ``normlab inspect`` to follow through training.
    ``main``: only rank 0 writes under DDP; ``extra``: recorded in every state (batched: True)."""

    def __init__(self, run: RunDir, tokenizer: Tokenizer, *, keep_series: bool = False, main: bool = True,
                 **extra: Any) -> None:
        self.run, self.tokenizer, self.keep_series, self.main, self.extra = run, tokenizer, keep_series, main, extra

    def save(self, name: str, model: nn.Module, st: LoopState, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Checkpoint ``name``: the weights (and optimizer), the loop state and the tokenizer, so
        resume and ``normlab sample`` need nothing else."""
        if self.main:
            self.run.save_checkpoint(name, model, {"loop": vars(st), "tokenizer": self.tokenizer.state(), **self.extra},
                                     optimizer)

    def series_name(self, step: int) -> str | None:
        """The name of checkpoint step ``step`` in the kept series, None when none is kept."""
        return RunDir.step_name(step) if self.keep_series else None

    def load_latest(self, model: nn.Module, optimizer: torch.optim.Optimizer | None) -> LoopState:
        """Load ``latest`` into ``model`` and ``optimizer``; the state to continue from, or a fresh
        one when the run has no intact checkpoint (a damaged one is never loaded: starting over
        reproduces the same metrics, and the warning says so)."""
        found = self.run.find_checkpoint("latest")
        if found is None:
            if self.run.checkpoint_dir("latest").exists() and self.main:
                logging.getLogger(__name__).warning(f"{self.run.checkpoint_problem('latest')}; restarting the run "
                                                    "from step 0")
            return LoopState()
        return LoopState(**checkpoint.load(found, model, optimizer)["loop"])

    def latest_step(self) -> int | None:
        """The step of the intact ``latest`` checkpoint, None without one (the divergence replay
        starts there)."""
        found = self.run.find_checkpoint("latest")
        return None if found is None else int(checkpoint.read_state(found)["loop"]["step"])
