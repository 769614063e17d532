"""The design analysis of the critical-lr claims (``training_frontier.py``): what each part's
rule can decide with the lrs and seeds its studies plan at a scale (``Claim.design``, run when
a claim is registered: a part that cannot decide whatever the data is refused).

The boundaries come from a pilot: confirmatory run 1's critical lrs at step 400 (docs/evidence,
seeds 100-103, seen since; the issue-40 audit's reading). A line that was censored there gets a
stated prior, a factor 2.5 beyond the last lr it was tested at, on the side it was censored:
Pre-LN trained at every lr up to 1.2e-2 at 6 blocks and up to 3e-3 at 18; Post-LN at 18 blocks
trained at none down to 5e-4. A design whose lrs do not reach past such a prior cannot bound
the difference, which is what refuses ``frontier-placement`` on today's grid.
"""

from __future__ import annotations

from typing import Any, Callable

from normlab.claims.catalogue.map_cells import LR, MAP, L, P, W
from normlab.claims.design_frontier import Arm, frontier_design

ENDS = "frontier-ends"
BEYOND = 2.5  # a censored pilot line's prior boundary: this factor past the last lr it was tested at
PILOT = {  # (placement, blocks, warm-up) -> critical lr at step 400 (run 1), or the stated prior
    ("post", 6, 0): 3.0e-3, ("post", 6, 50): 4.2e-3, ("pre", 6, 0): 1.2e-2 * BEYOND, ("pre", 6, 50): 1.2e-2 * BEYOND,
    ("post", 18, 0): 5e-4 / BEYOND, ("post", 18, 50): 5e-4 / BEYOND, ("pre", 18, 0): 3e-3 * BEYOND,
    ("pre", 18, 50): 3e-3 * BEYOND,
}
Key = tuple[str, str, Any]  # (placement, "shallow" | "deep", warm-up 0 | "warm")


def planned(scale: str) -> dict[tuple[str, int, int], tuple[tuple[float, ...], int]]:
    """Per line (placement, blocks, warm-up): the lrs the map and frontier-ends plan at ``scale``
    and the fewest seeds at any of them."""
    from normlab.claims.registration import study_spec

    seeds: dict[tuple[str, int, int, float], int] = {}
    for name in (MAP, ENDS):
        for t in study_spec(name, scale).trials():
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
            out[pid] = frontier_design(f"{claim.id}/{pid}", rule, arms[0], arms[1])
        return out

    return design


__all__ = ["BEYOND", "PILOT", "designs", "planned"]
