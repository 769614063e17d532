"""Learning-rate schedules by name: ``lr(step)`` as a multiple of ``optim.lr``.

All schedules share linear warm-up from ~0 to the peak over ``warmup`` steps
(warm-up 0 starts at the peak). Formulas, with s = step (0-based), W = warm-up,
S = total steps, m = min_lr / lr:

| name          | after warm-up                                              | source |
|---------------|------------------------------------------------------------|--------|
| constant      | 1                                                          |        |
| cosine        | m + (1 - m) * (1 + cos(pi * p)) / 2, p = (s - W) / (S - W) | Loshchilov & Hutter 2017; nanoGPT |
| linear        | 1 - (1 - m) * p                                            | BERT |
| inverse_sqrt  | sqrt(W) / sqrt(s + 1)  (peak at the end of warm-up)        | Vaswani 2017; Xiong 2020 |
| none          | 1, and warm-up is ignored                                  | |

The schedules are pure arithmetic, so they live below the training loop, with their registry:
``OptimConfig`` checks ``optim.schedule`` against ``SCHEDULES`` by an ordinary import, and
reading a run's config.json never imports ``normlab.train``. The registry and its built-ins are
one module (each built-in one ``add`` line at the end), so no lookup can find it unfilled and
it needs no catalogue to import at its first lookup.
"""

from __future__ import annotations

import math
from typing import Callable

from normlab.core.registry import Registry

ScheduleFn = Callable[[int, int, int, float], float]  # (step, warmup, total, min_ratio) -> factor


def _warm(step: int, warmup: int) -> float | None:
    # (step + 1) / W so that the very first update already moves (nanoGPT does the same).
    return (step + 1) / warmup if step < warmup else None


def _progress(step: int, warmup: int, total: int) -> float:
    return min(1.0, max(0.0, (step - warmup) / max(1, total - warmup)))


def constant(step: int, warmup: int, total: int, m: float) -> float:
    w = _warm(step, warmup)
    return 1.0 if w is None else w


def cosine(step: int, warmup: int, total: int, m: float) -> float:
    w = _warm(step, warmup)
    if w is not None:
        return w
    return m + (1 - m) * 0.5 * (1 + math.cos(math.pi * _progress(step, warmup, total)))


def linear(step: int, warmup: int, total: int, m: float) -> float:
    w = _warm(step, warmup)
    return w if w is not None else 1 - (1 - m) * _progress(step, warmup, total)


def inverse_sqrt(step: int, warmup: int, total: int, m: float) -> float:
    w = _warm(step, warmup)
    if w is not None:
        return w
    return math.sqrt(max(1, warmup)) / math.sqrt(step + 1) if warmup else 1 / math.sqrt(step + 1)


def none(step: int, warmup: int, total: int, m: float) -> float:
    return 1.0


SCHEDULES: Registry[ScheduleFn] = Registry("schedule", "optim.schedule")
SCHEDULES.add("constant", constant)
SCHEDULES.add("cosine", cosine)
SCHEDULES.add("linear", linear)
SCHEDULES.add("inverse_sqrt", inverse_sqrt)
SCHEDULES.add("none", none)


def lr_at(name: str, step: int, lr: float, warmup: int, total: int, min_lr: float) -> float:
    """Absolute learning rate at ``step`` for the named schedule."""
    return lr * SCHEDULES.get(name)(step, warmup, total, min_lr / lr if lr else 0.0)
