"""Loss and gradient-norm spikes, as OLMo-core's stability monitor defines them.

OLMo-core (``src/olmo_core/train/callbacks/stability_monitor.py``, ``StabilityMonitorCallback``)
keeps the last ``window_size`` = 128 values of the training cross-entropy and of the total
gradient norm. A value is a spike when it exceeds the mean of the 128 values before it by
more than ``threshold_std`` = 6 of their standard deviations (population variance, divided
by n); no value is tested until 128 came before it, nor when that deviation is below 1e-10.
A step is a spike step when either signal spikes there, and the cumulative SpikeScore is
spike steps / steps seen, reported once 128 steps have been seen.

Here the window lives in the in-training diagnostics: the training loop hands every step's
loss and pre-clip gradient norm to :meth:`SpikeWindow.record` (device tensors, kept as they
are: no kernel and no host sync per step), and each diagnostics call scans the steps since
the last one at once, on the device (:meth:`SpikeWindow.scan`), so its numbers join the
call's single host transfer. The window, the unscanned steps and the counts travel in the
checkpoint (:meth:`state`, :meth:`load`), so a resumed run scores every step as the
uninterrupted run does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

WINDOW = 128      # OLMo-core's window_size
THRESHOLD = 6.0   # OLMo-core's threshold_std
MIN_STD = 1e-10   # below this OLMo-core tests nothing (a constant window)
SIGNALS = ("loss", "grad_norm")


@dataclass
class Scan:
    """What one scan found: ``z`` (k, 2) z-scores of the k new steps (loss, gradient norm;
    NaN where the window was not full or constant), ``count`` spike steps so far (0-d
    tensor), ``steps`` steps seen so far."""

    z: torch.Tensor | None
    count: torch.Tensor
    steps: int
    window: int

    def score(self) -> torch.Tensor | None:
        """OLMo-core's cumulative SpikeScore: spike steps / steps, once a window has passed."""
        return self.count / self.steps if self.steps >= self.window else None

    def largest_z(self, signal: int) -> torch.Tensor | None:
        """The largest z-score of ``signal`` among the new steps (-inf when none was tested)."""
        if self.z is None:
            return None
        z = self.z[:, signal]
        return torch.where(z.isnan(), torch.full_like(z, -math.inf), z).amax()


class SpikeWindow:
    """The trailing windows of both signals (see the module docstring)."""

    def __init__(self, device: torch.device, window: int = WINDOW, threshold: float = THRESHOLD) -> None:
        self.device, self.size, self.threshold = device, window, threshold
        self.window = torch.full((window, 2), math.nan, dtype=torch.float64, device=device)  # oldest first
        self.carried = torch.zeros((0, 2), dtype=torch.float64, device=device)  # unscanned, from a checkpoint
        self.pending: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.count = torch.zeros((), dtype=torch.float64, device=device)
        self.steps = 0

    def record(self, loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        """One step's mean cross-entropy and pre-clip gradient norm (kept, not read)."""
        self.pending.append((loss.detach(), grad_norm.detach()))

    def _unscanned(self) -> torch.Tensor:
        if not self.pending:
            return self.carried
        new = torch.stack([torch.stack(p).double() for p in zip(*self.pending)], dim=1)  # (k, 2)
        return torch.cat([self.carried, new])

    @torch.no_grad()
    def scan(self) -> Scan:
        """Test every step recorded since the last scan against the window before it."""
        vals = self._unscanned()
        k = vals.size(0)
        self.pending, self.carried = [], vals[:0]
        if k == 0:
            return Scan(None, self.count, self.steps, self.size)
        hist = torch.cat([self.window, vals])                   # (W + k, 2)
        win = hist.unfold(0, self.size, 1)[:k]                  # (k, 2, W): the W values before each step
        var, mean = torch.var_mean(win, dim=-1, correction=0)   # NaN while the window is not full
        std = var.sqrt()
        tested = std >= MIN_STD
        spike = tested & (vals > mean + self.threshold * std)
        z = torch.where(tested, (vals - mean) / std, torch.full_like(vals, math.nan))
        self.count = self.count + spike.any(dim=1).sum()
        self.steps += k
        self.window = hist[-self.size:]
        return Scan(z, self.count, self.steps, self.size)

    def state(self) -> dict[str, Any]:
        """Everything a resumed run needs to score as this one would (one host read)."""
        vals = torch.cat([self.window, self._unscanned()]).tolist()
        return {"window": self.size, "values": [[None if math.isnan(v) else v for v in row] for row in vals],
                "count": int(self.count.item()), "steps": self.steps}

    def load(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state` of the same window size."""
        vals = torch.tensor([[math.nan if v is None else v for v in row] for row in state["values"]],
                            dtype=torch.float64, device=self.device).reshape(-1, 2)
        self.window, self.carried, self.pending = vals[: self.size], vals[self.size:], []
        self.count = torch.tensor(float(state["count"]), dtype=torch.float64, device=self.device)
        self.steps = int(state["steps"])
