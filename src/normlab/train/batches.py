"""``Batches``: the training micro-batches of one process, built from the corpus's training
split and the batch shape (its own part of the config) by the composition root."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from normlab.data.batches import train_batch


@dataclass(frozen=True)
class Batches:
    """Micro-batch ``micro`` of step ``step``: ``batch_size / grad_accum`` windows of ``context``
    tokens drawn from ``tokens`` keyed by (seed, step, micro), then this rank's rows. Keyed by
    step, not drawn in sequence, so a resumed or replayed step sees the data it saw before."""

    tokens: np.ndarray
    context: int
    batch_size: int
    grad_accum: int
    seed: int
    rank: int = 0
    world: int = 1

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.context

    def get(self, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y), each (rows of this rank, context) int64, on the CPU."""
        rows = self.batch_size // self.grad_accum  # the global micro-batch
        per = rows // self.world                  # this rank's rows
        mine = slice(self.rank * per, (self.rank + 1) * per) if self.world > 1 else slice(None)
        return train_batch(self.tokens, self.context, rows, self.seed, step, micro, mine)
