"""Learning-rate sensitivity (Wortsman et al. 2023, "Small-scale proxies for large-scale
Transformer training instabilities", §3.1); claim lr-sensitivity in docs/theory.md.

Over a grid of learning rates G, with loss_at_init the loss before training:

    LR sensitivity = mean_{lr in G} min(loss(lr), loss_at_init) - min_{lr in G} loss(lr)

A diverged run (non-finite loss, or status "diverged") counts as loss_at_init, and so does
any run that ends worse than it started. Several runs at one lr (seeds) are averaged first.
0 means every lr of the grid reaches the best loss; larger means more sensitive.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from normlab.core.errors import UserError
from normlab.run.dir import RunDir


def sensitivity(losses: Sequence[float], init_loss: float | None = None) -> float:
    """The formula on one sweep's losses, one per lr: mean over the sweep of min(loss,
    loss_at_init) minus its best. A non-finite loss (a diverged run) counts as ``init_loss``
    (without it the losses must already be capped). 0: every lr reaches the best loss. The one
    place the formula is written: ``normlab lr-sensitivity``, the study page and the claims use it."""
    v = np.asarray(losses, dtype=float)
    if init_loss is not None:
        v = np.where(np.isfinite(v), np.minimum(v, init_loss), init_loss)
    return float(np.mean(v) - np.min(v))


def per_lr_losses(points: Iterable[tuple[float, float | None, float]]) -> dict[float, float]:
    """lr -> mean over its runs of min(final_loss, init_loss) (diverged/None -> init_loss)."""
    by_lr: dict[float, list[float]] = defaultdict(list)
    for lr, final, init in points:
        by_lr[float(lr)].append(min(final, init) if final is not None and math.isfinite(final) else init)
    if not by_lr:
        raise UserError("lr sensitivity needs at least one (lr, final_loss, init_loss) point")
    return {lr: sum(v) / len(v) for lr, v in sorted(by_lr.items())}


def lr_sensitivity(points: Iterable[tuple[float, float | None, float]]) -> float:
    """Wortsman et al.'s LR sensitivity of a sweep given (lr, final_loss, init_loss) triples."""
    losses = per_lr_losses(points)
    if len(losses) < 2:  # one lr: the formula gives 0 by construction, which reads as "insensitive"
        lr = next(iter(losses))
        raise UserError(f"lr sensitivity needs runs at >= 2 learning rates, got only lr={lr:g}; train the "
                        "same config at several, e.g. --set optim.lr=1e-3 and --set optim.lr=3e-3")
    return sensitivity(list(losses.values()))


def run_point(run_dir: str | Path) -> dict[str, Any]:
    """(lr, final loss, loss at init, status) of one training run directory.

    final loss = summary ``final_val_loss`` (None when diverged or missing); loss at init =
    the ``val/loss`` logged at step 0 when the run evaluated there, else ln(vocab), the loss
    of a uniform prediction, which a small-init model starts at. (The first logged training
    loss is not a loss at init: it averages the first log window, after training started, so
    it would depend on the very lr and warm-up being compared.)
    """

    rd = RunDir(run_dir)
    run = rd.path
    cfg = rd.config()
    summary: dict[str, Any] = rd.summary() or {}
    status = summary.get("status", "missing")
    final = summary.get("final_val_loss") if status != "diverged" else None
    init = next((r["val/loss"] for r in rd.metrics() if r.get("step") == 0 and "val/loss" in r), None)
    if init is None or not math.isfinite(init):
        init = math.log(cfg.model.vocab_size)
    return {"run": str(run), "lr": cfg.optim.lr, "final_loss": final, "init_loss": init, "status": status}
