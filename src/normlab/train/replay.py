"""Where a diverged run's first non-finite value appeared: replay up to the bad step, then
run that one step under capture hooks (only on the diverged path, with diagnostics on).

Normal steps pay nothing for this: the weights of step ``bad_step - 1`` are rebuilt by
replaying from the latest checkpoint (always older than the bad step, since a checkpoint
is written only after a divergence check) or from the seeded init, and only the bad step
is run with capture hooks. Batches and dropout are keyed by step and restored RNG, so the
replay sees what the run saw.
"""

from __future__ import annotations

from typing import Any

from normlab.diagnostics.training import first_nonfinite
from normlab.train.step import optimizer_step


def localise(tr: Any, bad_step: int) -> dict[str, Any] | None:
    """``first_nonfinite`` of step ``bad_step`` (1-based) of ``tr``'s run (a ``train.loop.Trainer``,
    not imported here: the loop imports this module); moves its weights."""

    at = tr.ckpt.latest_step()
    if at is not None and at < bad_step:
        start = tr.ckpt.load_latest(tr.model, tr.opt).step
    else:  # the run's seeded init (the composition root's ``reinit``), then a fresh optimizer
        start = 0
        tr.parts.reinit()
        tr.opt.state.clear()
    tr.model.train()
    for s in range(start, bad_step - 1):
        tr.set_lr(s)
        tr.forward_backward(s)
        optimizer_step(tr.model, tr.opt, tr.params, tr.clip)
    tr.set_lr(bad_step - 1)
    return first_nonfinite(tr.model, lambda: tr.forward_backward(bad_step - 1), step=bad_step)
