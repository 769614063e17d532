"""Synthetic worlds of the critical-lr claims (``claims/catalogue/training_frontier.py``): per
line (placement x depth x warm-up) the seeds that train at each lr, read at the bracket's first
horizon (step 200). Every line has the same six lrs here (the worlds need lines that can cross
each other; the registered studies place each line's own lrs around its boundary), in the study
the claims read it from: Post-LN at 6 blocks in ``frontier-bracket-post6``, the rest in
``frontier-bracket``. A line that trains everywhere (or nowhere) is censored, and only 6 or more
seeds per lr give its 95% limit at the last lr: hence ``SEEDS``."""

from __future__ import annotations

from typing import Any, Callable

import synthetic as S

P, W, LR, L = "model.placement", "optim.warmup_steps", "optim.lr", "model.n_layer"
BRACKET, POST6 = "frontier-bracket", "frontier-bracket-post6"
LRS = (5e-4, 1e-3, 2e-3, 3e-3, 6e-3, 1.2e-2)
N = 8
SEEDS = {BRACKET: N, POST6: N}
STALL = S.CE.unigram + 0.01  # on the plateau


def _run(trains: bool) -> Callable[[int], dict[str, Any]]:
    x = S.TRAINS if trains else STALL
    return lambda s: {"best": x, "curve": [(200, x), (400, x)]}


def line(p: str, depth: int, w: int, up_to: float | None) -> list:
    """Cells of one line where every seed trains at lrs <= ``up_to`` and none above (None: none train)."""
    study = POST6 if (p, depth) == ("post", 6) else BRACKET
    return [(study, {P: p, LR: lr, L: depth, W: w}, _run(up_to is not None and lr <= up_to)) for lr in LRS]


HIGH, LOW = 6e-3, 5e-4  # a line that trains up to 6e-3, and one that trains at 5e-4 only
TOP = 1.2e-2            # trains at every lr of its line (censored above)


def frontier_warmup(o: str) -> list:
    """S: warm-up raises Post-LN's critical lr at 6 blocks; C: lowers it; I: no change."""
    hi6, lo6 = {"S": (HIGH, LOW), "C": (LOW, HIGH), "I": (LOW, LOW)}[o]
    # a Pre-LN line the part does not read: the claim reads both bracket studies, as a run has them
    return line("post", 6, 50, hi6) + line("post", 6, 0, lo6) + line("pre", 6, 0, HIGH)


def frontier_placement(o: str) -> list:
    """S: Pre-LN's critical lr above Post-LN's in every line; C: below; I: the same."""
    pre, post = {"S": (HIGH, LOW), "C": (LOW, HIGH), "I": (LOW, LOW)}[o]
    return line("pre", 6, 0, pre) + line("post", 6, 0, post) + line("pre", 6, 50, pre) + line("post", 6, 50, post)


def frontier_depth(o: str) -> list:
    """S: Post-LN's critical lr lower at 12 blocks than at 6 (warm-up 50); C: higher; I: the same.
    A deeper Pre-LN line is there too: the deep line is Post-LN's own deepest."""
    deep, shallow = {"S": (None, HIGH), "C": (TOP, LOW), "I": (LOW, LOW)}[o]
    return line("post", 12, 50, deep) + line("post", 6, 50, shallow) + line("pre", 18, 50, HIGH)


def frontier_warmup_tolerance(o: str) -> list:
    """S: warm-up raises Pre-LN's critical lr at 6 and 18 blocks; C: lowers it at both; I: no change."""
    w50, w0 = {"S": (HIGH, LOW), "C": (LOW, HIGH), "I": (LOW, LOW)}[o]
    return (line("pre", 6, 50, w50) + line("pre", 6, 0, w0) + line("pre", 18, 50, w50) + line("pre", 18, 0, w0)
            + line("post", 6, 0, LOW))  # a line it does not read: the claim reads both bracket studies


WORLDS = {"frontier-warmup": frontier_warmup, "frontier-placement": frontier_placement, "frontier-depth": frontier_depth,
          "frontier-warmup-tolerance": frontier_warmup_tolerance}
WORLD_SEEDS = {cid: SEEDS for cid in WORLDS}
