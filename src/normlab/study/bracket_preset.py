"""The study preset ``frontier-bracket``: each critical lr the frontier claims compare, bracketed.

A critical-lr design must span each boundary on both sides at a spacing of at most a factor 1.5
(issue 40; ``claims/design_frontier.py``), which one lr grid shared by every line cannot do when
the boundaries lie two decades apart. So each line (placement x depth x warm-up) gets its own five
lrs, a factor 1.5 apart (1e-4 x 1.5^k), placed around where a pilot on seen seeds found it (400
steps, ``claims/catalogue/frontier_design.py`` states the boundaries): Post-LN at 6 blocks near
2.2e-3 without warm-up and 5.1e-3 with it; Pre-LN at 6 blocks near 0.19 without warm-up and 0.24
with it; at 18 blocks Pre-LN trained at every lr the pilot tried, up to 0.13, with and without
warm-up (a stated prior 2.5x beyond: 0.33); Post-LN at 18 blocks trained
at no lr from 1e-4 to 5.8e-3, so its line has six lrs, down to 2e-5, to see whether a smaller lr trains it
(two lrs below the stated prior's boundary, 4e-5, so that a separated sweep bounds it).
The base is the stability map's (d=64, xavier, constant lr after linear warm-up, no clipping), its
first horizon 200 steps; the claims read it in stages (``StudySpec.stages``, registered). One zip
group lists the lines' points, each with every seed.
"""

from __future__ import annotations

from typing import Any

from normlab.study.presets import STABILITY_GRID, _map_base, _pick
from normlab.study.spec import StudySpec

NAME, POST6 = "frontier-bracket", "frontier-bracket-post6"


def _lrs(first: int, n: int = 5) -> list[float]:
    """n lrs a factor 1.5 apart from 1e-4 x 1.5^first, to 4 significant digits."""
    return [float(f"{1e-4 * 1.5 ** k:.4g}") for k in range(first, first + n)]


# (placement, blocks, warm-up) -> its lrs, per scale. Post-LN's two lines at the shallow depth are
# a study of their own with 6 seeds: the warm-up's shift of its critical lr (about 0.37 decades in
# the pilot) gets 46% power with 4 seeds an lr and 96% with 6 (claims/design_frontier.py).
BRACKET_GRID: dict[str, dict[str, Any]] = {
    "smoke": {"lines": {(p, blocks, w): [1e-2, 3e-1] for p in ("post", "pre") for blocks in (2, 4) for w in (0, 5)
                        if (p, blocks) != ("post", 2)}, "seeds": [0, 1]},
    "cpu": {"lines": {("pre", 6, 0): _lrs(17), ("pre", 6, 50): _lrs(17), ("pre", 18, 0): _lrs(18),
                      ("pre", 18, 50): _lrs(18), ("post", 18, 0): _lrs(-4, 6), ("post", 18, 50): _lrs(-4, 6)},
            "seeds": [0, 1, 2, 3]},
}
# gpu: the cpu pilot's lines (no pilot located them at the gpu base: run one before registering)
BRACKET_GRID["gpu"] = {"lines": dict(BRACKET_GRID["cpu"]["lines"]), "seeds": [0, 1, 2]}
POST6_GRID: dict[str, dict[str, Any]] = {
    "smoke": {"lines": {("post", 2, 0): [1e-2, 3e-1], ("post", 2, 5): [1e-2, 3e-1]}, "seeds": [0, 1, 2]},
    "cpu": {"lines": {("post", 6, 0): _lrs(6), ("post", 6, 50): _lrs(8)}, "seeds": [0, 1, 2, 3, 4, 5]},
}
POST6_GRID["gpu"] = {"lines": dict(POST6_GRID["cpu"]["lines"]), "seeds": [0, 1, 2]}


def frontier_bracket(scale: str = "cpu") -> StudySpec:
    """Pre-LN at 6 and 18 blocks and Post-LN at 18, warm-up 0 and 50, each line at five lrs a
    factor 1.5 apart around its boundary (six for Post-LN; ``BRACKET_GRID``), on the stability
    map's base: cpu (4 lines x 5 + 2 x 6 lrs) x 4 seeds = 128 runs."""
    return _spec(NAME, _pick(scale, BRACKET_GRID, NAME), scale,
                 "Each critical lr the frontier claims compare, bracketed by lrs 1.5x apart")


def frontier_bracket_post6(scale: str = "cpu") -> StudySpec:
    """Post-LN at 6 blocks, warm-up 0 and 50, five lrs a factor 1.5 apart around each boundary, 6
    seeds (``POST6_GRID``): cpu 2 x 5 x 6 = 60 runs."""
    return _spec(POST6, _pick(scale, POST6_GRID, POST6), scale,
                 "Post-LN's critical lr at 6 blocks with and without warm-up, bracketed, 6 seeds")


def _spec(name: str, g: dict[str, Any], scale: str, description: str) -> StudySpec:
    steps = _pick(scale, STABILITY_GRID, name)["steps"]
    base = _map_base(scale)
    base["train"]["steps"] = steps
    points = [(p, blocks, w, lr) for (p, blocks, w), lrs in g["lines"].items() for lr in lrs]
    keys = ("model.placement", "model.n_layer", "optim.warmup_steps", "optim.lr")
    return StudySpec(name=name, base=base, seeds=list(g["seeds"]),
                     zip=[{k: [pt[i] for pt in points] for i, k in enumerate(keys)}], description=description)


__all__ = ["BRACKET_GRID", "NAME", "POST6", "POST6_GRID", "frontier_bracket", "frontier_bracket_post6"]
