"""The design analysis of the critical-lr claims (``training_frontier.py``): what each part's
rule can decide with the lrs and seeds ``frontier-bracket`` plans at a scale (``Claim.design``,
run when a claim is registered: a part that cannot decide whatever the data is refused).

The boundaries come from seen seeds, never from the data a stage confirms: campaign 1's first
frontier stage (seeds 7000-7005, its stored runs read after the fact with corrected code and
published as exploration in docs/evidence/exploratory/frontier-stage/), at the horizon where each
line settled: Post-LN at 6 blocks 2.6e-3 without warm-up and 5.8e-3 with it (slope -14.6 logit
per decade, the profile fit's); Pre-LN at 6 blocks 0.18 without warm-up and 0.22 with it; Pre-LN
at 18 blocks 0.18 with warm-up. Pre-LN at 18 blocks without warm-up was not read there (1 of 4
seeds had left the plateau at 0.148 by step 200, none at 0.222): its stated prior is 0.12, and its
line has six lrs from 0.065. Post-LN at 12 blocks with warm-up: the pilot pilot-frontier-L12-post
(seen seeds 0-1, lrs 2x apart, 1000 steps; docs/evidence/exploratory/pilots/).
"""

from __future__ import annotations

from typing import Any, Callable

from normlab.claims.catalogue.map_cells import LR, L, P, W
from normlab.claims.design_frontier import Arm, frontier_design

POST12 = 8e-4  # pilot-frontier-L12-post: seed 0 trains at 8e-4 and stalls at 1.6e-3; seed 1 trains at 4e-4, stalls at 8e-4

STUDIES = ("frontier-bracket", "frontier-bracket-post6")
REACH = 4.0  # decades the power scan goes
PILOT = {  # (placement, "shallow" | "deep", warm-up 0 | 50) -> critical lr in the exploration (see above)
    ("post", "shallow", 0): 2.6e-3, ("post", "shallow", 50): 5.8e-3, ("pre", "shallow", 0): 0.18,
    ("pre", "shallow", 50): 0.22, ("pre", "deep", 0): 0.12, ("pre", "deep", 50): 0.18, ("post", "deep", 50): POST12,
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
    """The planned line of ``key``: its placement's shallowest or deepest depth (cpu: Pre-LN 6 and
    18 blocks, Post-LN 6 and 12), the largest warm-up for "warm"."""
    depths = sorted({b for p, b, _ in lines if p == key[0]})
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
                                PILOT.get((line[0], key[1], 0 if line[2] == 0 else 50))))
            out[pid] = frontier_design(f"{claim.id}/{pid}", rule, arms[0], arms[1], reach=REACH)
        return out

    return design


__all__ = ["PILOT", "designs", "planned"]
