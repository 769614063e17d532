"""Design analysis of a difference of critical lrs (``claims/catalogue/training_frontier.py``):
can the planned lrs and seeds decide "a's critical lr lies above (below) b's", given where a pilot
on seen seeds (or a stated prior) puts each boundary?

Each arm is a planned lr grid with seeds per lr and a boundary: its pilot's critical lr, and the
pilot's slope (logit per decade; steep, -20, where the pilot separated). A seed trains at lr x
with probability expit(slope (log10 x - log10 boundary)). The analysis applies the claim's own
chain to simulated sweeps: ``stats.frontier.critical_lr`` per arm, ``log_ratio``, the
catalogue's ``ratio_effect`` and the part's rule.

* **Best case.** With b at its boundary and its outcome separated there (every seed trains below
  it, none above: the most a sweep can say), and a as far on the predicted side as it can be (a's
  whole grid training, censored: for ``Direction(+1)``), the 95% bound of the difference is the
  best the design can reach *whatever the data*. If it does not pass the rule's reference the
  part cannot decide (issue 40's ``frontier-placement``: a grid ending at 1.2e-2 with 4 seeds an
  lr reaches at best -0.301 decades against 0).
* **Brackets.** Each arm's lrs must span its boundary on both sides, the two lrs around it at
  most a factor 1.5 apart, with enough seeds on each side for the exact tests of a separated
  sweep to bound it (0.5^seeds < 0.025: two lrs of 4 seeds). A boundary the pilot left
  censored has nothing to bracket: locate it first.
* **Power.** With a's boundary shifted so that the true difference is ``ref + sign d``, the
  share of sweeps whose rule says "supported" *with an estimate*: a censored difference is a
  bound with no p-value (today's rule gives it p = 0.05, which never survives a Holm family of
  two or more), so by default it does not count as decided (``censored_decides``). The
  detectable effect is the smallest d on a 0.05-decade scan (up to ``reach``) with 80% power.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from normlab.claims.design import POWER, Design, decides_at, level
from normlab.claims.rules import CONTRADICTED, SUPPORTED, Direction
from normlab.stats.effects import Effect
from normlab.stats.frontier import Frontier, critical_lr, log_ratio, ratio_effect

SPACING = 1.5   # the widest factor between the two lrs around a boundary (issue 40)
SIDE = 0.025    # one-sided level of the exact tests that bound a separated sweep
STEP = 0.05     # decades between the effects the power scan tries


@dataclass(frozen=True)
class Arm:
    """One frontier of the difference: its planned lrs, seeds at each, and its boundary (the
    pilot's critical lr, lr units; None: censored in the pilot) with the pilot's slope."""

    name: str
    lrs: tuple[float, ...]
    seeds: int
    boundary: float | None
    slope: float = -20.0

    def text(self) -> str:
        return f"{self.name}: {len(self.lrs)} lrs {min(self.lrs):.2g}..{max(self.lrs):.2g} x {self.seeds} seeds"


def bracket_problem(arm: Arm, factor: float = SPACING) -> str:
    """'' when the arm's lrs bracket its boundary as a design must, else what is wrong and the fix."""
    if arm.boundary is None:
        return f"{arm.name}'s boundary is censored in the pilot: locate it with a pilot on seen seeds first"
    lrs = sorted(arm.lrs)
    below, above = [x for x in lrs if x < arm.boundary], [x for x in lrs if x > arm.boundary]
    if not above:
        return f"{arm.name}'s lrs end at {lrs[-1]:.2g}, below its boundary {arm.boundary:.2g}: add lrs above it"
    if not below:
        return f"{arm.name}'s lrs start at {lrs[0]:.2g}, above its boundary {arm.boundary:.2g}: add lrs below it"
    if above[0] / below[-1] > factor * (1 + 1e-3):  # lrs are written to 4 digits: 1.5 up to that rounding
        return (f"{arm.name}'s lrs around its boundary {arm.boundary:.2g} are {below[-1]:.2g} and {above[0]:.2g}, a "
                f"factor {above[0] / below[-1]:.2g} apart: place lrs at most {factor:g}x apart around it")
    for side, xs in (("below", below), ("above", above)):
        if 0.5 ** (arm.seeds * len(xs)) >= SIDE:
            return (f"{arm.name} has {len(xs)} lr{'s' if len(xs) > 1 else ''} of {arm.seeds} seeds {side} its boundary: too few for an exact "
                    f"bound (0.5^seeds < {SIDE:g}); add lrs or seeds {side} it")
    return ""


@functools.lru_cache(maxsize=65536)
def _frontier(lrs: tuple[float, ...], trains: tuple[int, ...], seeds: int) -> Frontier:
    return critical_lr(lrs, trains, [seeds] * len(lrs))


def _outcome(arm: Arm, boundary: float, u: Any) -> tuple[int, ...]:
    """Seeds that train at each lr for one sweep (``u``: its uniforms, lrs x seeds)."""
    import numpy as np
    from scipy.special import expit

    p = expit(arm.slope * (np.log10(np.asarray(arm.lrs)) - math.log10(boundary)))
    return tuple(int(v) for v in (np.asarray(u) < p[:, None]).sum(1))


def _bound(rule: Direction, a: Frontier, b: Frontier) -> float | None:
    r = log_ratio(a, b)
    return r.lo if rule.sign > 0 else r.hi


def best_bound(rule: Direction, a: Arm, b: Arm) -> float | None:
    """The best 95% bound of a - b (decades) the design reaches whatever the data, b at its boundary."""
    assert b.boundary is not None
    n = len(a.lrs)
    fa = _frontier(tuple(a.lrs), tuple([a.seeds] * n if rule.sign > 0 else [0] * n), a.seeds)
    fb = _frontier(tuple(b.lrs), tuple(b.seeds if x < b.boundary else 0 for x in b.lrs), b.seeds)
    return _bound(rule, fa, fb)


def _shares(rule: Direction, a: Arm, b: Arm, theta: float, ua: Any, ub: Any,
            censored_decides: bool) -> tuple[float, float]:
    """Of the simulated sweeps at a true difference ``theta``: the share supported and the share
    decisive either way (supported or contradicted), each also passing the asked level."""
    assert b.boundary is not None
    supported = decisive = 0
    alpha = level()
    for i in range(len(ua)):
        fa = _frontier(tuple(a.lrs), _outcome(a, b.boundary * 10 ** theta, ua[i]), a.seeds)
        fb = _frontier(tuple(b.lrs), _outcome(b, b.boundary, ub[i]), b.seeds)
        r = log_ratio(fa, fb)
        e = ratio_effect(r, a.seeds, b.seeds)
        verdict = rule.verdict(e)
        counts = (censored_decides or r.estimate is not None) and decides_at(rule, e, alpha)
        supported += counts and verdict == SUPPORTED
        decisive += counts and verdict in (SUPPORTED, CONTRADICTED)
    return supported / len(ua), decisive / len(ua)


def _power(rule: Direction, a: Arm, b: Arm, theta: float, ua: Any, ub: Any, censored_decides: bool) -> float:
    return _shares(rule, a, b, theta, ua, ub, censored_decides)[0]


def frontier_design(part: str, rule: Direction, a: Arm, b: Arm, sims: int = 200, seed: int = 0, reach: float = 2.0,
                    censored_decides: bool = False) -> Design:
    """Design analysis of ``rule`` on log10(critical lr of a) - log10(critical lr of b)."""
    import numpy as np

    plan = f"{a.text()}; {b.text()}"
    problems = [p for p in (bracket_problem(a), bracket_problem(b)) if p]
    if b.boundary is None:
        return Design(part, rule, plan, None, limit="; ".join(problems), unit="decades", level=level())
    best = best_bound(rule, a, b)
    passes = best is not None and (best > rule.ref if rule.sign > 0 else best < rule.ref)
    if not passes:
        reach_text = "none (the interval stays open)" if best is None else f"{best:+.3g} decades"
        side = "above" if rule.sign > 0 else "below"
        fix = problems or [f"add lrs {side} {a.name}'s boundary, at most {SPACING:g}x apart"]
        why = (f"its 95% bound reaches at best {reach_text} against the reference {rule.ref:g} whatever the data, so "
               f"no effect is detected with 80% power")
        return Design(part, rule, plan, None, best_bound=best, limit="; ".join([why, *fix]), unit="decades",
                      level=level())
    rng = np.random.default_rng(seed)
    ua, ub = rng.random((sims, len(a.lrs), a.seeds)), rng.random((sims, len(b.lrs), b.seeds))
    expected = None if a.boundary is None else math.log10(a.boundary / b.boundary)
    power, decides = (None, None) if expected is None else _shares(rule, a, b, expected, ua, ub, censored_decides)
    detectable = None
    for k in range(1, int(round(reach / STEP)) + 1):  # the smallest effect with 80% power
        theta = rule.ref + rule.sign * k * STEP
        if _power(rule, a, b, theta, ua, ub, censored_decides) >= POWER:
            detectable = theta
            break
    if detectable is None:
        problems.insert(0, f"no effect up to {reach:g} decades beyond {rule.ref:g} is detected with 80% power")
    return Design(part, rule, plan, detectable, power, expected, best_bound=best, limit="; ".join(problems),
                  unit="decades", level=level(), decides=decides)


def censored_text(e: Effect, unit: str = "decades") -> str:
    """A censored difference as what it is, a bound with no p-value: "> -0.301 decades
    (censored: a bound, no p-value)". Today's rule gives it p = 0.05 by construction
    (``Direction.p``), which cannot survive a Holm family of two or more."""
    if e.estimate is not None or (e.lo is None) == (e.hi is None):
        return e.text()
    side = f"> {e.lo:+.3g}" if e.lo is not None else f"< {e.hi:+.3g}"
    return f"{side} {unit} (censored: a bound, no p-value)"


__all__ = ["censored_text", "SPACING", "Arm", "best_bound", "bracket_problem", "frontier_design"]
