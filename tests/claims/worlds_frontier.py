"""Synthetic worlds of the critical-lr claims (``claims/catalogue/training_frontier.py``): per
line (placement x depth x warm-up) the seeds that train at each lr, read at the map's long
horizon (step 400). At 6 blocks Post-LN and Pre-LN have the map's lrs and frontier-ends'; at
18 blocks only the map's three, where a line that trains everywhere (or nowhere) is censored
and only 6 or more seeds per lr give its 95% limit at the last lr: hence ``SEEDS`` (the
claims run has 4, so its deep parts can at best bound the shift; docs/studies.md)."""

from __future__ import annotations

from typing import Any, Callable

import synthetic as S

P, W, LR, L = "model.placement", "optim.warmup_steps", "optim.lr", "model.n_layer"
MAP, ENDS = "stability-map", "frontier-ends"
MAP_LRS, END_LRS = (5e-4, 1e-3, 3e-3), (2e-3, 6e-3, 1.2e-2)
N = 8
SEEDS = {MAP: N, ENDS: N}
STALL = S.CE.unigram + 0.01  # on the plateau at step 400


def _run(trains: bool) -> Callable[[int], dict[str, Any]]:
    return lambda s: {"best": S.TRAINS if trains else STALL, "curve": [(400, S.TRAINS if trains else STALL)]}


def line(p: str, depth: int, w: int, up_to: float | None) -> list:
    """Cells of one line where every seed trains at lrs <= ``up_to`` and none above (None: none train)."""
    lrs = [(MAP, lr) for lr in MAP_LRS] + ([(ENDS, lr) for lr in END_LRS] if depth == 6 and p in ("post", "pre") else [])
    return [(study, {P: p, LR: lr, L: depth, W: w}, _run(up_to is not None and lr <= up_to)) for study, lr in lrs]


HIGH, LOW = 6e-3, 5e-4  # a line that trains up to 6e-3, and one that trains at 5e-4 only
TOP = 1.2e-2            # trains at every lr of its line (censored above)


def frontier_warmup(o: str) -> list:
    """S: warm-up raises Post-LN's critical lr at both depths; C: lowers it; I: no change."""
    hi6, lo6, hi18, lo18 = {"S": (HIGH, LOW, TOP, None), "C": (LOW, HIGH, None, TOP), "I": (LOW, LOW, LOW, LOW)}[o]
    return line("post", 6, 50, hi6) + line("post", 6, 0, lo6) + line("post", 18, 50, hi18) + line("post", 18, 0, lo18)


def frontier_placement(o: str) -> list:
    """S: Pre-LN's critical lr above Post-LN's in every line; C: below; I: the same."""
    pre, post, pre18, post18 = {"S": (HIGH, LOW, TOP, None), "C": (LOW, HIGH, None, TOP), "I": (LOW,) * 4}[o]
    return (line("pre", 6, 0, pre) + line("post", 6, 0, post) + line("pre", 6, 50, pre) + line("post", 6, 50, post)
            + line("pre", 18, 50, pre18) + line("post", 18, 50, post18))


def frontier_depth(o: str) -> list:
    """S: Post-LN's critical lr lower at 18 blocks than at 6 (warm-up 50); C: higher; I: the same."""
    deep, shallow = {"S": (None, HIGH), "C": (TOP, LOW), "I": (LOW, LOW)}[o]
    return line("post", 18, 50, deep) + line("post", 6, 50, shallow)


WORLDS = {"frontier-warmup": frontier_warmup, "frontier-placement": frontier_placement, "frontier-depth": frontier_depth}
WORLD_SEEDS = {cid: SEEDS for cid in WORLDS}
