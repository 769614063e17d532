"""Where a part's outcomes have settled: the registered rule that stops extending its runs.

A training part is read at a horizon, and a run on the unigram plateau at step 200 may train by
step 560 (issue 40: HybridNorm at 18 blocks). So every run a part reads is extended in nested
stages (200 -> 400 -> 1000 -> 2000 steps, by resuming: ``study.extend``), and after each stage
:func:`settle` asks whether the part's reading still moves:

* **classification**: every run's outcome (``study.outcome.OUTCOMES``, judged at the stage's
  horizon by ``study.horizons.outcome_at``) is the same at the last two stages; a run with no
  outcome at either (it stopped before the stage) is a change; and no run is still on the
  plateau ("stalls"): a slow start is not a stall, so a stall is read only at the longest stage
  (a stalled run's loss barely moves, so the effect's tolerance alone would call it settled:
  campaign 1's first stage settled HybridNorm's stalls at step 400 that way);
* **effect**: the part's estimate moved by less than the registered ``effect_tol`` (in the
  quantity's own units) between the last two stages;
* **critical lrs**: each critical lr the part reads moved by less than ``lr_tol`` decades (0.1
  by default). A critical-lr part is settled by its frontiers, not by single cells: near the
  boundary some seed flips at every stage, and where the boundary lies is the quantity read.
  A censored frontier counts as unmoved only when it stays censored on the same side and its
  95% limit moves less than ``lr_tol``; one that becomes estimated (or censored) has moved.

The part then reads its last stage and records the horizon it settled at and the drift of that
stage. A part still moving at the longest registered stage is "unsettled at the longest stage":
its verdict is scoped to that horizon and says so. Everything here is pure: the caller reads the
outcomes and effects at each horizon (``study.horizons``, ``study.frontier``) and extends the
runs; this module only decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from normlab.core.errors import ConfigError
from normlab.stats.frontier import Frontier

SETTLED, EXTEND, UNSETTLED = "settled", "extend", "unsettled"
STALLS = "stalls"  # study.outcome's name for a run still on the unigram plateau
LR_TOL = 0.1  # decades: a critical lr that moves less between two stages has settled (issue 40)


@dataclass(frozen=True)
class Stage:
    """A part's reading at one horizon: each run's outcome (run id -> "trains" / "stalls" /
    "diverged", or None: no outcome there), the part's effect estimate (None: none), and the
    critical lrs it reads (name -> frontier), each at that horizon."""

    horizon: int
    outcomes: Mapping[str, str | None] = field(default_factory=dict)
    effect: float | None = None
    critical: Mapping[str, Frontier] = field(default_factory=dict)


@dataclass(frozen=True)
class Settling:
    """The registered settling rule of a part: the stages (horizons, increasing), the tolerance
    on its effect (its quantity's units; None: the part has no effect to settle, e.g. a rate read
    only through its outcomes) and on critical lrs (decades)."""

    stages: tuple[int, ...]
    effect_tol: float | None = None
    lr_tol: float = LR_TOL

    def __post_init__(self) -> None:
        if not self.stages or any(b <= a for a, b in zip(self.stages, self.stages[1:])) or self.stages[0] <= 0:
            raise ConfigError("settling.stages", list(self.stages), "must be positive horizons in increasing order, "
                              "e.g. [200, 400, 1000, 2000]")
        if self.effect_tol is not None and not self.effect_tol > 0:
            raise ConfigError("settling.effect_tol", self.effect_tol, "must be > 0 (the quantity's own units)")
        if not self.lr_tol > 0:
            raise ConfigError("settling.lr_tol", self.lr_tol, "must be > 0 decades (the issue's rule: 0.1)")

    def spec(self) -> dict[str, Any]:
        return {"stages": list(self.stages), "effect_tol": self.effect_tol, "lr_tol": self.lr_tol}

    def text(self) -> str:
        eff = "" if self.effect_tol is None else f", the effect moves less than {self.effect_tol:g}"
        return (f"read at steps {', '.join(map(str, self.stages))} (resumed); settled when, between the last two "
                f"stages, no run changes outcome{eff} (a critical-lr part: every critical lr moves less than "
                f"{self.lr_tol:g} decades, whatever single runs do)")


@dataclass(frozen=True)
class Settled:
    """What :func:`settle` found. ``status``: SETTLED (read the part at ``horizon``), EXTEND (run
    the stage ``next_horizon``) or UNSETTLED (still moving at the longest stage: scoped to it).
    ``drift``: the effect's change over the last stage; ``lr_drift``: the largest critical-lr
    change, decades (None: not comparable, e.g. censored on one stage only); ``moved``: what
    still moved (empty when settled)."""

    status: str
    horizon: int
    next_horizon: int | None = None
    drift: float | None = None
    lr_drift: float | None = None
    moved: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        return {"status": self.status, "horizon": self.horizon, "next_horizon": self.next_horizon,
                "drift": self.drift, "lr_drift": self.lr_drift, "moved": list(self.moved), "text": self.text()}

    def text(self) -> str:
        drift = [f"effect drift {self.drift:+.3g}" if self.drift is not None else "",
                 f"critical lrs moved at most {self.lr_drift:.2f} decades" if self.lr_drift is not None else ""]
        last = "; ".join(d for d in drift if d) or "no effect read"
        if self.status == SETTLED:
            return f"settled at step {self.horizon} ({last} over the last stage)"
        moved = "; ".join(self.moved)
        if self.status == EXTEND:
            return f"not settled at step {self.horizon} ({moved}): extend to step {self.next_horizon}"
        return f"unsettled at the longest stage, step {self.horizon} ({moved}): the verdict is scoped to step {self.horizon}"


def lr_position(f: Frontier) -> tuple[str, float | None]:
    """("estimated", log10 lr), or ("censored above" / "censored below", log10 of its 95% limit,
    None without one), or ("none", None): where a frontier stands, for comparing stages."""
    if f.censored is not None:
        limit = f.lo if f.censored == "above" else f.hi
        return f"censored {f.censored}", None if limit is None else math.log10(limit)
    return ("estimated", math.log10(f.lr)) if f.lr is not None else ("none", None)


def lr_move(a: Frontier, b: Frontier) -> float | None:
    """|log10 b - log10 a| in decades when both stand alike (both estimated, or censored on the
    same side with a 95% limit each); None when not comparable (then it has moved)."""
    (ka, xa), (kb, xb) = lr_position(a), lr_position(b)
    if ka != kb or xa is None or xb is None:
        return None
    return abs(xb - xa)


def _moves(rule: Settling, prev: Stage, last: Stage) -> tuple[list[str], float | None, float | None]:
    moved: list[str] = []
    runs = sorted(set(prev.outcomes) | set(last.outcomes))
    frontier = bool(prev.critical or last.critical)  # settled by its critical lrs, not by single cells
    flipped = [] if frontier else [r for r in runs if prev.outcomes.get(r) is None
                                   or prev.outcomes.get(r) != last.outcomes.get(r)]
    if flipped:
        what = ", ".join(f"{r}: {prev.outcomes.get(r)} -> {last.outcomes.get(r)}" for r in flipped[:3])
        moved.append(f"{len(flipped)} of {len(runs)} runs changed outcome ({what}{', ...' if len(flipped) > 3 else ''})")
    stalled = [r for r in runs if last.outcomes.get(r) == STALLS]
    if stalled and not frontier:
        moved.append(f"{len(stalled)} of {len(runs)} runs still on the plateau (a stall is read at the longest stage)")
    drift = None
    if rule.effect_tol is not None:
        if prev.effect is None or last.effect is None:
            moved.append("no effect at one of the last two stages")
        else:
            drift = last.effect - prev.effect
            if not abs(drift) < rule.effect_tol:
                moved.append(f"effect moved {drift:+.3g}, not within the tolerance {rule.effect_tol:g}")
    moves: list[float | None] = []
    for name in sorted(set(prev.critical) | set(last.critical)):
        a, b = prev.critical.get(name), last.critical.get(name)
        d = None if a is None or b is None else lr_move(a, b)
        moves.append(d)
        if d is None:
            moved.append(f"critical lr {name}: {a.text() if a else 'none'} -> {b.text() if b else 'none'}")
        elif not d < rule.lr_tol:
            moved.append(f"critical lr {name} moved {d:.2f} decades, not within {rule.lr_tol:g}")
    # the largest move, when every critical lr is comparable across the two stages
    known = [d for d in moves if d is not None]
    lr_drift = max(known) if moves and len(known) == len(moves) else None
    return moved, drift, lr_drift


def settle(rule: Settling, readings: Sequence[Stage]) -> Settled:
    """Decide from the stages read so far (in order, each at the rule's next stage) whether the
    part has settled, needs the next stage, or is unsettled at the longest one."""
    got = [s.horizon for s in readings]
    if not readings or got != list(rule.stages[:len(got)]):
        raise ConfigError("settle.readings", got, f"must be the registered stages in order, a prefix of "
                          f"{list(rule.stages)}")
    last = readings[-1]
    longest = len(readings) == len(rule.stages)
    nxt = None if longest else rule.stages[len(readings)]
    if len(readings) == 1:  # one stage: nothing to compare it with yet
        moved = ["one stage read: nothing to compare with"]
        if longest:
            return Settled(UNSETTLED, last.horizon, None, None, None, tuple(moved))
        return Settled(EXTEND, last.horizon, nxt, None, None, tuple(moved))
    moved, drift, lr_drift = _moves(rule, readings[-2], last)
    if not moved:
        return Settled(SETTLED, last.horizon, None, drift, lr_drift)
    return Settled(UNSETTLED if longest else EXTEND, last.horizon, nxt, drift, lr_drift, tuple(moved))


__all__ = ["EXTEND", "LR_TOL", "SETTLED", "UNSETTLED", "Settled", "Settling", "Stage", "lr_move", "lr_position",
           "settle"]
