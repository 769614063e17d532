"""Learning-rate schedules by name: ``lr(step)`` as a multiple of ``optim.lr``.

All schedules share linear warm-up from ~0 to the peak over ``warmup`` steps
(warm-up 0 starts at the peak). Formulas, with s = step (0-based), W = warm-up,
S = total steps, m = min_lr / lr; for wsd also D = max(1, f * S rounded half up) decay steps
(f = ``optim.decay_frac``), of which those after warm-up decay, from s0 = max(W, S - D):

| name          | after warm-up                                              | source |
|---------------|------------------------------------------------------------|--------|
| constant      | 1                                                          |        |
| cosine        | m + (1 - m) * (1 + cos(pi * p)) / 2, p = (s - W) / (S - W) | Loshchilov & Hutter 2017; nanoGPT |
| linear        | 1 - (1 - m) * p                                            | BERT |
| inverse_sqrt  | sqrt(W) / sqrt(s + 1)  (peak at the end of warm-up)        | Vaswani 2017; Xiong 2020 |
| wsd           | 1 for s < s0, then m + (1 - m) * g(q), q = (s + 1 - s0) / (S - s0); g = 1 - sqrt(q) (``optim.decay_shape`` 1-sqrt) or 1 - q (linear) | Hägele et al. 2024 (arXiv 2405.18392): 20% 1-sqrt cooldown |
| none          | 1, and warm-up is ignored                                  | |

wsd (warm-up, stable, decay) holds the peak, then cools down over the last fraction of the
run; q counts the decay steps as warm-up counts its own ((step + 1) / W), so the first decay
step is already below the peak and the last step of the run, s = S - 1, trains at exactly
min_lr. Hägele et al. decay to 0 (``optim.min_lr=0``); the other schedules here reach m at s = S.
A schedule takes the options ``decay_frac`` and ``decay_shape`` as keywords; only wsd reads them.

The schedules are pure arithmetic, so they live below the training loop, with their registry:
``OptimConfig`` checks ``optim.schedule`` against ``SCHEDULES`` by an ordinary import, and
reading a run's config.json never imports ``normlab.train``. The registry and its built-ins are
one module (each built-in one ``add`` line at the end), so no lookup can find it unfilled and
it needs no catalogue to import at its first lookup.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from normlab.core.registry import Registry

# (step, warmup, total, min_ratio, **options) -> factor; options: decay_frac, decay_shape (wsd's)
ScheduleFn = Callable[..., float]
DECAY_SHAPES = ("1-sqrt", "linear")  # wsd's cooldown g(q); 1-sqrt first: Hägele et al.'s better one


def _warm(step: int, warmup: int) -> float | None:
    # (step + 1) / W so that the very first update already moves (nanoGPT does the same).
    return (step + 1) / warmup if step < warmup else None


def _progress(step: int, warmup: int, total: int) -> float:
    return min(1.0, max(0.0, (step - warmup) / max(1, total - warmup)))


def constant(step: int, warmup: int, total: int, m: float, **_: Any) -> float:
    w = _warm(step, warmup)
    return 1.0 if w is None else w


def cosine(step: int, warmup: int, total: int, m: float, **_: Any) -> float:
    w = _warm(step, warmup)
    if w is not None:
        return w
    return m + (1 - m) * 0.5 * (1 + math.cos(math.pi * _progress(step, warmup, total)))


def linear(step: int, warmup: int, total: int, m: float, **_: Any) -> float:
    w = _warm(step, warmup)
    return w if w is not None else 1 - (1 - m) * _progress(step, warmup, total)


def inverse_sqrt(step: int, warmup: int, total: int, m: float, **_: Any) -> float:
    w = _warm(step, warmup)
    if w is not None:
        return w
    return math.sqrt(max(1, warmup)) / math.sqrt(step + 1) if warmup else 1 / math.sqrt(step + 1)


def none(step: int, warmup: int, total: int, m: float, **_: Any) -> float:
    return 1.0


def wsd(step: int, warmup: int, total: int, m: float, decay_frac: float = 0.2, decay_shape: str = "1-sqrt",
        **_: Any) -> float:
    w = _warm(step, warmup)
    if w is not None:
        return w
    start = max(warmup, total - max(1, math.floor(decay_frac * total + 0.5)))  # the decay never eats warm-up
    if step < start:
        return 1.0
    q = min(1.0, (step + 1 - start) / max(1, total - start))
    return m + (1 - m) * (1 - (math.sqrt(q) if decay_shape == "1-sqrt" else q))


SCHEDULES: Registry[ScheduleFn] = Registry("schedule", "optim.schedule")
SCHEDULES.add("constant", constant)
SCHEDULES.add("cosine", cosine)
SCHEDULES.add("linear", linear)
SCHEDULES.add("inverse_sqrt", inverse_sqrt)
SCHEDULES.add("none", none)
SCHEDULES.add("wsd", wsd)


def lr_at(name: str, step: int, lr: float, warmup: int, total: int, min_lr: float, **options: Any) -> float:
    """Absolute learning rate at ``step`` for the named schedule (``options``: wsd's decay_frac, decay_shape)."""
    return lr * factor_at(name, step, warmup, total, min_lr / lr if lr else 0.0, **options)


def factor_at(name: str, step: int, warmup: int, total: int, min_ratio: float, **options: Any) -> float:
    """The schedule's multiple of the peak at ``step``: what every parameter group's own peak lr
    is multiplied by (Muon's group and AdamW's share it, ``normlab.train.step``)."""
    return SCHEDULES.get(name)(step, warmup, total, min_ratio, **options)
