"""Design analyses the transfer claims need beyond ``claims/design_frontier.py`` (one direction
between two critical lrs) and ``claims/design.py`` (means and rates):

* :func:`equivalence_design`: ``Within(lo, hi)`` on log10 c_a - log10 c_b, "the critical lr
  moves less than the margin" (muP across width, CompleteP across depth);
* :func:`gap_design`: ``Direction`` on (log10 c_a1 - log10 c_b1) - (log10 c_a2 - log10 c_b2), a
  factor's effect on the gap between two frontiers (Muon against AdamW);
* :func:`split_design`: ``Direction`` on a Welch difference between the seeds of one cell that
  end one way and those that end the other, where how many go each way is itself random.

The critical-lr designs simulate sweeps as ``design_frontier`` does (a seed trains at lr x with
probability expit(slope (log10 x - log10 boundary)), each arm at its planned lrs and seeds) and
apply the claim's own chain (``critical_lr``, ``log_ratio``, ``gap_difference``, ``ratio_effect``,
the part's rule). One thing more: a pilot of one or two seeds an lr locates a boundary only to
within its lr spacing, and where the boundary falls between two planned lrs decides whether a
sweep separates cleanly, which matters when the margin (0.15 decades) is about one spacing
(0.176). So each simulated sweep places the control's boundary at a uniformly drawn offset of
up to half a spacing either side of the pilot's (``phase``), and the others at the tested
difference from it. A censored difference (a bound, no p-value) never counts as decided.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from normlab.claims.design import POWER, Design, decides_at, level, level_interval
from normlab.claims.design_frontier import Arm, _frontier, _outcome, bracket_problem
from normlab.claims.rules import SUPPORTED, Direction, Within
from normlab.stats.effects import MIN_SEEDS, welch
from normlab.stats.frontier import log_ratio, ratio_effect
from normlab.stats.frontier_gap import gap_difference

SIMS = 300
STEP = 0.025  # decades between the truths an equivalence scan tries (a sixth of the 0.15 margin)


def _spacing(arm: Arm) -> float:
    """The arm's lr spacing in decades (the median step between its planned lrs)."""
    lrs = sorted(arm.lrs)
    steps = sorted(math.log10(b / a) for a, b in zip(lrs, lrs[1:]))
    return steps[len(steps) // 2] if steps else 0.0


def _sweep(arm: Arm, boundary: float, u: Any) -> Any:
    return _frontier(tuple(arm.lrs), _outcome(arm, boundary, u), arm.seeds)


def _draws(arms: Sequence[Arm], sims: int, seed: int) -> tuple[Any, list[Any]]:
    """Per sweep: each arm's phase offset (in spacings, -0.5..0.5; sims x arms) and its uniforms."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return rng.uniform(-0.5, 0.5, (sims, len(arms))), [rng.random((sims, len(a.lrs), a.seeds)) for a in arms]


def _plan(arms: Sequence[Arm]) -> str:
    return "; ".join(a.text() for a in arms)


def equivalence_design(part: str, rule: Within, a: Arm, b: Arm, sims: int = SIMS, seed: int = 0) -> Design:
    """``rule`` on log10 c_a - log10 c_b: the truths around the margin's centre shown inside with
    80% power; ``detectable`` is how far from the centre the truth may lie (None: not even at it)."""
    plan = _plan((a, b))
    problems = [p for p in (bracket_problem(a), bracket_problem(b)) if p]
    if a.boundary is None or b.boundary is None:
        return Design(part, rule, plan, None, limit="; ".join(problems), unit="decades", level=level())
    phase, (ua, ub) = _draws((a, b), sims, seed)
    s, alpha = _spacing(b), level()

    def power(theta: float) -> float:
        hits = 0
        for i in range(sims):
            cb = b.boundary * 10 ** (phase[i, 1] * s)
            r = log_ratio(_sweep(a, cb * 10 ** theta, ua[i]), _sweep(b, cb, ub[i]))
            e = ratio_effect(r, a.seeds, b.seeds)
            hits += rule.verdict(e) == SUPPORTED and decides_at(rule, e, alpha)
        return hits / sims

    centre = (rule.lo + rule.hi) / 2
    half = int(round((rule.hi - rule.lo) / 2 / STEP))
    expected = math.log10(a.boundary / b.boundary)
    at = power(expected)
    at_centre = power(centre)
    if at_centre < POWER:
        problems.insert(0, f"a true difference of {centre:g} is shown inside [{rule.lo:g}, {rule.hi:g}] with "
                           f"{at_centre:.0%} power, below 80%: add seeds or lrs nearer each boundary")
        return Design(part, rule, plan, None, at, expected, limit="; ".join(problems), unit="decades", level=level())
    k = 0  # widen the band while the truths on both sides keep 80% power
    while k < half and power(centre + (k + 1) * STEP) >= POWER and power(centre - (k + 1) * STEP) >= POWER:
        k += 1
    return Design(part, rule, plan, k * STEP, at, expected, limit="; ".join(problems), unit="decades", level=level())


def gap_design(part: str, rule: Direction, a1: Arm, b1: Arm, a2: Arm, b2: Arm, sims: int = SIMS, seed: int = 0,
               reach: float = 2.0, step: float = 0.05) -> Design:
    """``rule`` on (log10 c_a1 - log10 c_b1) - (log10 c_a2 - log10 c_b2): the smallest shift of a1
    (the others at their pilot boundaries, phased) detected with 80% power, and the power at the
    pilot's own difference."""
    arms = (a1, b1, a2, b2)
    plan = _plan(arms)
    problems = [p for p in (bracket_problem(x) for x in arms) if p]
    if any(x.boundary is None for x in arms):
        return Design(part, rule, plan, None, limit="; ".join(problems) or "a boundary is unknown", unit="decades",
                      level=level())
    c1, c2, c3, c4 = (math.log10(x.boundary) for x in arms)  # type: ignore[arg-type]
    phase, us = _draws(arms, sims, seed)
    spacing, alpha = [_spacing(x) for x in arms], level()

    def power(theta: float) -> float:
        hits = 0
        for i in range(sims):
            # b1, a2, b2 each phased on its own; a1 where the difference is theta
            x2, x3, x4 = (c + phase[i, j + 1] * s for j, (c, s) in enumerate(zip((c2, c3, c4), spacing[1:])))
            logs = (x2 + x3 - x4 + theta, x2, x3, x4)
            f = [_sweep(x, 10 ** c, u[i]) for x, c, u in zip(arms, logs, us)]
            r = gap_difference(log_ratio(f[0], f[1]), log_ratio(f[2], f[3]))
            e = ratio_effect(r, min(a1.seeds, b1.seeds), min(a2.seeds, b2.seeds))
            hits += rule.verdict(e) == SUPPORTED and r.estimate is not None and decides_at(rule, e, alpha)
        return hits / sims

    expected = c1 - c2 - c3 + c4
    at = power(expected)
    detectable = None
    for k in range(1, int(round(reach / step)) + 1):
        theta = rule.ref + rule.sign * k * step
        if power(theta) >= POWER:
            detectable = theta
            break
    if detectable is None:
        problems.insert(0, f"no effect up to {reach:g} decades beyond {rule.ref:g} is detected with 80% power")
    return Design(part, rule, plan, detectable, at, expected, limit="; ".join(problems), unit="decades", level=level())


def split_design(part: str, rule: Direction, seeds: int, p_first: float, sd: float, effect: float | None = None,
                 sims: int = 2000, seed: int = 0, unit: str = "") -> Design:
    """``rule`` on mean(first) - mean(second) (Welch) over the ``seeds`` runs of one cell, each
    ending in the first group with probability ``p_first``, per-seed values normal with SD ``sd``.
    A split with fewer than MIN_SEEDS on a side is inconclusive, which the power counts."""
    import numpy as np
    from scipy import stats

    plan = f"{seeds} seeds at one cell, each ending in the first group with probability {p_first:g}"
    rng, alpha = np.random.default_rng(seed), level()
    weights, bounds = [], []
    for k in range(MIN_SEEDS, seeds - MIN_SEEDS + 1):  # splits with both sides decidable
        w = float(stats.binom.pmf(k, seeds, p_first))
        if w < 1e-6:
            continue
        lo, hi = np.empty(sims), np.empty(sims)
        for i in range(sims):  # the lab's Welch intervals at truth 0 (a shift of the truth shifts them)
            e = welch(rng.normal(0, sd, k).tolist(), rng.normal(0, sd, seeds - k).tolist())
            lo[i], hi[i] = level_interval(e, alpha)
        weights.append(w)
        bounds.append((lo, hi))

    def power(theta: float) -> float:
        return float(sum(w * np.mean(lo + theta > rule.ref if rule.sign > 0 else hi + theta < rule.ref)
                         for w, (lo, hi) in zip(weights, bounds)))

    reach = max(power(rule.ref + rule.sign * 20 * sd), 0.0)
    if reach < POWER:
        return Design(part, rule, plan, None, None if effect is None else power(effect), effect,
                      limit=f"splits with at least {MIN_SEEDS} seeds a side come {sum(weights):.0%} of the time, so "
                            f"no effect reaches 80% power (at best {reach:.0%}): add seeds", unit=unit, level=alpha)
    lo_t, hi_t = 0.0, 20 * sd  # bisect the smallest |shift| with 80% power
    for _ in range(40):
        mid = (lo_t + hi_t) / 2
        lo_t, hi_t = (lo_t, mid) if power(rule.ref + rule.sign * mid) >= POWER else (mid, hi_t)
    return Design(part, rule, plan, rule.ref + rule.sign * hi_t, None if effect is None else power(effect), effect,
                  unit=unit, level=alpha)


__all__ = ["SIMS", "equivalence_design", "gap_design", "split_design"]
