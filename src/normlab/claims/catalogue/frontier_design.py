"""The design analysis of the critical-lr claims (``training_frontier.py``): what each part's
rule can decide with the lrs and seeds ``frontier-bracket`` plans at a scale (``Claim.design``,
run when a claim is registered: a part that cannot decide whatever the data is refused).

The boundaries come from a pilot on seen seeds 0-1 (studies/pilot-frontier-*.toml, outside the
package: 6 and 18 blocks, warm-up 0 and 50, lrs 1.5x apart, read at step 400; exploration, not
evidence). A line censored there gets a stated prior, a factor 2.5 beyond the last lr it was
tested at, on the side it was censored: Pre-LN at 18 blocks trained at every lr up to 0.13, with
and without warm-up (its 0.13 run without warm-up ended at 3.155, below the stall line 3.197); Post-LN at 18 blocks trained at no lr from 1e-4 up, so its prior is 4e-5 and its line
goes down to 3e-5. If no lr trains it there either, its frontier is censored below, and each
difference with it is a bound (no p-value), which the design states before the data.
"""

from __future__ import annotations

from typing import Any, Callable

from normlab.claims.catalogue.map_cells import LR, L, P, W
from normlab.claims.design_frontier import Arm, frontier_design

STUDIES = ("frontier-bracket", "frontier-bracket-post6")
REACH = 4.0  # decades the power scan goes: Pre-LN's and Post-LN's boundaries at 18 blocks lie ~4 apart
BEYOND = 2.5  # a censored pilot line's prior boundary: this factor past the last lr it was tested at
PILOT = {  # (placement, blocks, warm-up) -> critical lr at step 400 in the pilot, or the stated prior
    ("post", 6, 0): 2.2e-3, ("post", 6, 50): 5.1e-3, ("pre", 6, 0): 0.19, ("pre", 6, 50): 0.24,
    ("pre", 18, 0): 0.13 * BEYOND, ("pre", 18, 50): 0.13 * BEYOND, ("post", 18, 0): 1e-4 / BEYOND,
    ("post", 18, 50): 1e-4 / BEYOND,
}
Key = tuple[str, str, Any]  # (placement, "shallow" | "deep", warm-up 0 | "warm")


def planned(scale: str) -> dict[tuple[str, int, int], tuple[tuple[float, ...], int]]:
    """Per line (placement, blocks, warm-up): the lrs the bracket studies plan at ``scale`` and
    the fewest seeds at any of them."""
    from normlab.claims.registration import study_spec

    seeds: dict[tuple[str, int, int, float], int] = {}
    for t in (t for n in STUDIES for t in study_spec(n, scale).trials()):
        key = (t.params[P], t.params[L], t.params[W], t.params[LR])
        seeds[key] = seeds.get(key, 0) + 1
    lines: dict[tuple[str, int, int], tuple[tuple[float, ...], int]] = {}
    for (p, blocks, w, lr), n in sorted(seeds.items()):
        lrs, fewest = lines.get((p, blocks, w), ((), n))
        lines[(p, blocks, w)] = ((*lrs, lr), min(fewest, n))
    return lines


def _line(lines: dict[tuple[str, int, int], Any], key: Key) -> tuple[str, int, int]:
    depths = sorted({b for _, b, _ in lines})
    warms = sorted({w for _, _, w in lines})
    blocks = depths[0] if key[1] == "shallow" else depths[-1]
    return key[0], blocks, warms[-1] if key[2] == "warm" else key[2]


def designs(parts: dict[str, tuple[Key, Key]]) -> Callable[[Any, str], dict[str, Any]]:
    """``Claim.design`` of a critical-lr claim: for each part (line a minus line b), the design
    analysis of its own rule on the difference, with the planned lrs and seeds and the pilot's
    boundaries."""

    def design(claim: Any, scale: str) -> dict[str, Any]:
        lines = planned(scale)
        rules = {p.id: p.rule for p in claim.parts}
        out = {}
        for pid, (a, b) in parts.items():
            rule = rules[pid]
            arms = []
            for key in (a, b):
                line = _line(lines, key)
                lrs, seeds = lines.get(line, ((), 0))
                arms.append(Arm(f"{line[0]} {line[1]} blocks warm-up {line[2]}", lrs, seeds,
                                PILOT.get((line[0], 6 if key[1] == "shallow" else 18, 0 if line[2] == 0 else 50))))
            out[pid] = frontier_design(f"{claim.id}/{pid}", rule, arms[0], arms[1], reach=REACH)
        return out

    return design


__all__ = ["BEYOND", "PILOT", "designs", "planned"]
