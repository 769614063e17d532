"""The design analyses of the transfer claims (``training_transfer.py``, ``training_monitors.py``):
each part's own rule at the lrs and seeds ``study/transfer_preset.py`` plans, from pilots on seen
seeds (docs/evidence/exploratory/pilots/pilot-transfer-*.toml, seed 0, one run an lr, 400 steps;
exploration, not evidence). A part that cannot decide whatever the data is refused when the claim
is registered (``Claim.design``). Designs exist at the cpu scale only, the scale the pilots ran.

Each boundary is the geometric middle of the last lr that trained and the first that did not, by
step 400 (a run that trained there often sat on the plateau at step 200):

* Pre-LN, 6 blocks, no warm-up. SP d=64: 0.19 (pilot-frontier-L6, 2 seeds: 0.13 trains, one of two
  stalls at 0.19, 0.29 diverges). SP d=256: 7.07e-2 (5.8e-2 trains, 8.7e-2 and 0.13 stall): a fall
  of 0.43 decades. muP d=64: 0.215 (0.195 trains, 0.238 diverges). muP d=256: 0.176 (0.159
  trains, 0.195 stalls): -0.087 decades, inside the 0.15 margin.
* Post-LN under CompleteP, warm-up 50. 6 blocks: 4.13e-3 (3.4e-3 trains, 5.1e-3 stalls). 18
  blocks: 3.14e-3 (1e-4 to 2.6e-3 train, 3.8e-3 stalls): -0.12 decades, inside the margin, near it.
* 6 blocks, no warm-up. AdamW: Post-LN 2.2e-3, Pre-LN 0.19 (pilot-frontier-L6). Muon: Post-LN
  2.09e-2 (1.7e-2 trains, 2.6e-2 stalls), Pre-LN 0.238 (0.195 trains, 0.29 diverges). The gap
  Pre minus Post is 1.94 decades under AdamW and 1.06 under Muon: -0.88.

The monitors' priors are below (``SHARP_PRIOR``, the ``ENTROPY_*`` constants). Several pilots point
against their statements (warm-up raised Post-LN's early sharpness; the stalled seed's early
entropy was the higher): the designs record the power at the pilot's effect beside the
detectable one, and the claims are registered as stated.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from normlab.claims.design import Design, level, mean_design, planned_seeds
from normlab.claims.design_frontier import Arm, frontier_design
from normlab.claims.design_transfer import equivalence_design, gap_design, split_design
from normlab.claims.rules import Direction, Within
from normlab.study.transfer_preset import DEPTH, MUON, OPT, PARAM, SHARPNESS, WIDTH_MUP, WIDTH_SP, D, L, P

PLANNED = "cpu"
PILOT: dict[str, dict[Any, float]] = {  # study -> line key -> critical lr by step 400
    WIDTH_SP: {("sp", 64): 0.19, ("sp", 256): 0.0707},
    WIDTH_MUP: {("mup", 64): 0.215, ("mup", 256): 0.176},
    DEPTH: {6: 4.13e-3, 18: 3.14e-3},
    MUON: {("adamw", "post"): 2.2e-3, ("adamw", "pre"): 0.19, ("muon", "post"): 2.09e-2, ("muon", "pre"): 0.238},
}
KEYS: dict[str, Callable[[dict[str, Any]], Any]] = {
    WIDTH_SP: lambda p: (p[PARAM], p[D]), WIDTH_MUP: lambda p: (p[PARAM], p[D]), DEPTH: lambda p: p[L],
    MUON: lambda p: (p[OPT], p[P])}
# warmup-sharpness: the window (steps: the warm-up's own), and per part the per-seed SD (decades) and
# the pilot's effect (warm-up 50 minus 0). The SD is pooled over the pilot's four arms of the same
# quantity (2 seeds each: 4 degrees of freedom) and inflated 1.5x for so few: 0.072 -> 0.11 for the
# sharpness, 0.107 -> 0.16 for the preconditioned one.
WINDOW = (10, 50)
SHARP_PRIOR: dict[str, tuple[float, float]] = {"post-sharp": (0.11, 0.188), "pre-sharp": (0.11, 0.03),
                                              "post-precond": (0.16, -0.018), "pre-precond": (0.16, -0.155)}
# entropy-collapse-stall: the last step read (the trained pilot seeds left the plateau at steps 100-160,
# validated every 20), the chance a seed stalls at the cell (1 of 2 in both pilots at 2.25e-3), the
# per-seed SD of the early minimum head entropy (nats; pooled within the pilot's three lrs, 3 df:
# 0.28) and the pilot's stalled-minus-trained difference at 2.25e-3 (+0.34: the stalled seed's entropy
# was the higher, against the statement)
ENTROPY_STEP, P_STALL, ENTROPY_SD, ENTROPY_EFFECT = 50, 0.5, 0.28, 0.34
_MEMO: dict[tuple[str, str, float, int | None], dict[str, Design]] = {}


def planned(study: str, scale: str) -> dict[Any, tuple[tuple[float, ...], int]]:
    """Per line of ``study``: the lrs it plans at ``scale`` and the fewest seeds at any of them."""
    from normlab.claims.registration import study_spec

    seeds: dict[tuple[Any, float], int] = {}
    for t in study_spec(study, scale).trials():
        k = (KEYS[study](t.params), t.params["optim.lr"])
        seeds[k] = seeds.get(k, 0) + 1
    out: dict[Any, tuple[tuple[float, ...], int]] = {}
    for (line, lr), n in sorted(seeds.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        lrs, fewest = out.get(line, ((), n))
        out[line] = ((*lrs, lr), min(fewest, n))
    return out


def arm(study: str, key: Any, scale: str) -> Arm:
    lrs, seeds = planned(study, scale).get(key, ((), 0))
    return Arm(f"{study} {key}", lrs, seeds, PILOT[study].get(key))


def _memo(claim: Any, scale: str, build: Callable[[], dict[str, Design]]) -> dict[str, Design]:
    if scale != PLANNED:
        return {}
    key = (claim.id, scale, level(), planned_seeds())  # another level or seed count: another analysis
    if key not in _MEMO:
        _MEMO[key] = build()
    return _MEMO[key]


def _rule(claim: Any, part: str) -> Any:
    return next(p.rule for p in claim.parts if p.id == part)


def width_design(claim: Any, scale: str) -> dict[str, Design]:
    def build() -> dict[str, Design]:
        mup = _rule(claim, "mup")
        assert isinstance(mup, Within)
        return {"mup": equivalence_design(f"{claim.id}/mup", mup, arm(WIDTH_MUP, ("mup", 256), scale),
                                          arm(WIDTH_MUP, ("mup", 64), scale)),
                "sp": frontier_design(f"{claim.id}/sp", _rule(claim, "sp"), arm(WIDTH_SP, ("sp", 256), scale),
                                      arm(WIDTH_SP, ("sp", 64), scale))}
    return _memo(claim, scale, build)


def depth_design(claim: Any, scale: str) -> dict[str, Design]:
    def build() -> dict[str, Design]:
        rule = _rule(claim, "post")
        assert isinstance(rule, Within)
        return {"post": equivalence_design(f"{claim.id}/post", rule, arm(DEPTH, 18, scale), arm(DEPTH, 6, scale))}
    return _memo(claim, scale, build)


def muon_design(claim: Any, scale: str) -> dict[str, Design]:
    def build() -> dict[str, Design]:
        a = {k: arm(MUON, k, scale) for k in PILOT[MUON]}
        gap = _rule(claim, "gap")
        assert isinstance(gap, Direction)
        return {"pre-above": frontier_design(f"{claim.id}/pre-above", _rule(claim, "pre-above"), a[("muon", "pre")],
                                             a[("muon", "post")], reach=3.0),
                "gap": gap_design(f"{claim.id}/gap", gap, a[("muon", "pre")], a[("muon", "post")], a[("adamw", "pre")],
                                  a[("adamw", "post")])}
    return _memo(claim, scale, build)


def sharpness_design(claim: Any, scale: str) -> dict[str, Design]:
    def build() -> dict[str, Design]:
        from normlab.claims.registration import study_spec

        n = len(study_spec(SHARPNESS, scale).seeds)
        return {pid: mean_design(f"{claim.id}/{pid}", _rule(claim, pid), n, sd, n, sd, effect=eff, unit="decades")
                for pid, (sd, eff) in SHARP_PRIOR.items()}
    return _memo(claim, scale, build)


def entropy_design(claim: Any, scale: str) -> dict[str, Design]:
    def build() -> dict[str, Design]:
        from normlab.claims.registration import study_spec
        from normlab.study.transfer_preset import ENTROPY

        n = len(study_spec(ENTROPY, scale).seeds)
        return {"precedes": split_design(f"{claim.id}/precedes", _rule(claim, "precedes"), n, P_STALL, ENTROPY_SD,
                                         ENTROPY_EFFECT, unit="nats")}
    return _memo(claim, scale, build)


def expected(study: str, a: Any, b: Any) -> float:
    """The pilot's log10 difference of two lines' critical lrs."""
    return math.log10(PILOT[study][a] / PILOT[study][b])


__all__ = ["ENTROPY_STEP", "PILOT", "WINDOW", "arm", "depth_design", "entropy_design", "muon_design", "planned",
           "sharpness_design", "width_design"]
