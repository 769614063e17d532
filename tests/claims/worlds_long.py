"""Synthetic worlds of the claims read where training ends (``claims/catalogue/training_long.py``,
study shallow-long): best val loss, the first evaluation, and OLMo-core's spike score."""

from __future__ import annotations

from typing import Any

import synthetic as S

P, LONG = "model.placement", "shallow-long"
T, TINY, WIDE = S.TRAINS, 0.01, 0.5


def _run(best: float, first: float, score: float, sig: float) -> Any:
    return lambda s: {"best": best + S.jit(s, sig), "first": first + S.jit(s, sig),
                      "diag": [{"step": 1000, "spike_score": max(0.0, score + S.jit(s, sig / 10))}]}


def post_shallow_long(o: str) -> list:
    post = {"S": T, "C": T + 0.3, "I": T}[o]
    sig = WIDE if o == "I" else TINY
    return [(LONG, {P: "post"}, _run(post, 3.0, 0.0, sig)), (LONG, {P: "pre"}, _run(T, 3.0, 0.0, sig))]


def pre_faster(o: str) -> list:
    (fpre, fpost), (spre, spost) = {"S": ((2.5, 3.3), (0.0, 0.05)), "C": ((3.3, 2.5), (0.05, 0.0)),
                                    "I": ((3.0, 3.0), (0.02, 0.02))}[o]
    sig = WIDE if o == "I" else TINY
    return [(LONG, {P: "pre"}, _run(T, fpre, spre, sig)), (LONG, {P: "post"}, _run(T, fpost, spost, sig))]


def post_ceiling(o: str) -> list:
    post = {"S": T - 0.2, "C": T + 0.2, "I": T}[o]
    sig = WIDE if o == "I" else TINY
    return [(LONG, {P: "post"}, _run(post, 3.0, 0.0, sig)), (LONG, {P: "pre"}, _run(T, 3.0, 0.0, sig))]


WORLDS = {"seed002-post-shallow-long": post_shallow_long, "seed004-pre-faster": pre_faster,
          "seed004-post-ceiling": post_ceiling}
