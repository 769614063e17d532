"""What a training loop accumulates between two metrics lines, kept on the device (the solo
loop's scalars, or the batched loop's one entry per trial).

The per-step loss is summed on the device and divergence is tracked there too (the first
bad step is remembered in a tensor), so a GPU never waits for the host between ordinary
steps; the host reads the window back only at the cadence's sync steps, where DDP ranks
first average their losses and agree on the earliest bad step (:meth:`Window.sync`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from normlab.train.step import diverged

if TYPE_CHECKING:
    from normlab.train.env import Dist


@dataclass
class Window:
    """Accumulators since the last metrics line (``loss``, ``first_bad`` on the device)."""

    loss: torch.Tensor             # sum of step losses
    first_bad: torch.Tensor        # first diverged step (1-based), -1 while none
    steps: int = 0                 # steps since the last metrics line
    train_s: float = 0.0           # seconds inside those steps
    t_wall: float = 0.0            # perf_counter() when wall_time was last brought up to date

    def add(self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor, limit: float | torch.Tensor) -> None:
        self.loss += loss
        bad = diverged(loss, grad_norm, limit)  # on the device, no host sync
        self.first_bad = torch.where(bad & (self.first_bad < 0), torch.full_like(self.first_bad, step),
                                     self.first_bad)

    def sync(self, dist: Dist) -> None:
        """Under DDP: the mean loss over ranks and the earliest bad step of any rank (every
        rank calls this at the same steps: the cadence does not depend on the rank)."""
        if not dist.enabled:
            return
        self.loss = _reduce(self.loss, dist)
        fb = _reduce(torch.where(self.first_bad < 0, torch.full_like(self.first_bad, 2**62), self.first_bad),
                     dist, "min")
        self.first_bad = torch.where(fb >= 2**62, torch.full_like(fb, -1), fb)


def _reduce(t: torch.Tensor, dist: Dist, op: str = "mean") -> torch.Tensor:
    import torch.distributed as td

    t = t.clone()
    td.all_reduce(t, op=td.ReduceOp.MIN if op == "min" else td.ReduceOp.SUM)
    return t / dist.world if op == "mean" else t
