"""Decision rules: an :class:`~normlab.stats.effects.Effect` in, a verdict out.

A rule is data (kind + parameters), declared with its claim before any measurement, hashed
into claims.json, and applied the same way to every effect:

- ``Direction(sign, ref)``: the statement predicts the quantity above ``ref`` (sign +1) or
  below it (sign -1). supported: the 95% interval lies entirely on the predicted side;
  contradicted: entirely on the other side; inconclusive: it contains ``ref``.
  A non-inferiority statement ("at or below, within a margin m") is Direction(-1, ref=m).
  An interval open on one side (a difference of critical lrs, where a frontier's interval is
  unbounded) is decided by the side it has. A censored effect (no estimate, one side known:
  a frontier beyond the lrs tested) likewise; its p is 0.05, the level of the one limit
  known, so it never survives a Holm family of two or more.
- ``Within(lo, hi)``: the statement predicts a value inside [lo, hi] (an equivalence margin,
  or a theory's bounds). supported: the interval lies inside; contradicted: it lies
  entirely outside; inconclusive: it straddles a bound. "Not shown different" is never
  support: only an interval inside the margin is.

Fewer than ``MIN_SEEDS`` finished seeds on a side, or no interval, is always inconclusive.
Every rule also gives a p-value: the smallest alpha at which the (1 - alpha) interval would
reach the decisive verdict nearest to the data, so that the family of parts can be
Holm-adjusted. For rates it comes from the very exact tests the interval inverts
(:func:`normlab.stats.effects.rate_tails`), so p < 0.05 exactly when the verdict is decisive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from normlab.stats.effects import MIN_SEEDS, Effect, rate_p, rate_tails, t_sf

SUPPORTED, CONTRADICTED, INCONCLUSIVE, PARTLY = "supported", "contradicted", "inconclusive", "partly supported"
# A part registered as descriptive (its design cannot decide at the level asked): measured and
# shown with its interval, no verdict and no p-value (``claim.describe``).
DESCRIPTIVE = "descriptive"


@dataclass(frozen=True)
class Direction:
    sign: int            # +1: predicted above ref; -1: predicted below ref
    ref: float = 0.0

    def spec(self) -> dict[str, Any]:
        return {"kind": "direction", "sign": self.sign, "ref": self.ref}

    def text(self) -> str:
        side, other = ("above", "below") if self.sign > 0 else ("below", "above")
        return (f"supported if the 95% interval lies {side} {self.ref:g}; contradicted if it lies {other}; "
                f"inconclusive if it contains {self.ref:g}")

    def verdict(self, e: Effect) -> str:
        # an interval open on one side (a critical lr's) is decided by the side it has
        if e.n_min < MIN_SEEDS or (e.estimate is None and not _censored(e)):
            return INCONCLUSIVE
        return self._side(e.lo, e.hi)

    def _side(self, lo: float | None, hi: float | None) -> str:
        if lo is not None and lo > self.ref:
            return SUPPORTED if self.sign > 0 else CONTRADICTED
        if hi is not None and hi < self.ref:
            return SUPPORTED if self.sign < 0 else CONTRADICTED
        return INCONCLUSIVE

    def p(self, e: Effect) -> float | None:
        if _censored(e):  # a bound from one side, never a p-value (issue 40): decided by the bound alone,
            return None   # outside the Holm family (its 95% limit is what a reader is told)
        if e.estimate is None or e.n_min < MIN_SEEDS or (e.lo is None and e.hi is None):
            return None
        if e.counts is not None:  # a rate: the exact test its interval inverts
            return rate_p(e, self.ref)
        return _two_sided(e.estimate - self.ref, e)


@dataclass(frozen=True)
class Within:
    lo: float
    hi: float

    def spec(self) -> dict[str, Any]:
        return {"kind": "within", "lo": self.lo, "hi": self.hi}

    def text(self) -> str:
        return (f"supported if the 95% interval lies inside [{self.lo:g}, {self.hi:g}]; contradicted if it "
                f"lies entirely outside; inconclusive if it straddles a bound")

    def verdict(self, e: Effect) -> str:
        if not _decidable(e) or e.lo is None or e.hi is None:  # (decidable implies both are set)
            return INCONCLUSIVE
        if self.lo < e.lo and e.hi < self.hi:
            return SUPPORTED
        if e.lo > self.hi or e.hi < self.lo:
            return CONTRADICTED
        return INCONCLUSIVE

    def p(self, e: Effect) -> float | None:
        if not _decidable(e) or e.estimate is None:
            return None
        if e.counts is not None:  # a rate: inside needs both one-sided tests, outside one of them
            up_lo, down_lo = rate_tails(e, self.lo)
            up_hi, down_hi = rate_tails(e, self.hi)
            return min(1.0, 2 * max(up_lo, down_hi), 2 * min(up_hi, down_lo))
        if e.se is None or e.df is None:  # no t-based interval: no evidence either way, as _two_sided
            return 1.0
        if e.se == 0:
            return 0.0 if self.verdict(e) != INCONCLUSIVE else 1.0
        est = e.estimate
        p_in = 2 * max(t_sf((est - self.lo) / e.se, e.df), t_sf((self.hi - est) / e.se, e.df))
        p_out = 2 * min(t_sf((est - self.hi) / e.se, e.df), t_sf((self.lo - est) / e.se, e.df))
        return min(1.0, p_in, p_out)


@dataclass(frozen=True)
class Outside:
    """The statement predicts a value outside [lo, hi] ("depends on", "sensitive to"): supported
    if the interval lies entirely outside, contradicted if it lies inside, inconclusive if it
    straddles a bound. The mirror of :class:`Within`, with the same p-value."""

    lo: float
    hi: float

    def spec(self) -> dict[str, Any]:
        return {"kind": "outside", "lo": self.lo, "hi": self.hi}

    def text(self) -> str:
        return (f"supported if the 95% interval lies entirely outside [{self.lo:g}, {self.hi:g}]; contradicted if "
                f"it lies inside; inconclusive if it straddles a bound")

    def verdict(self, e: Effect) -> str:
        v = Within(self.lo, self.hi).verdict(e)
        return {SUPPORTED: CONTRADICTED, CONTRADICTED: SUPPORTED}.get(v, v)

    def p(self, e: Effect) -> float | None:
        return Within(self.lo, self.hi).p(e)


Rule = Direction | Within | Outside


def _censored(e: Effect) -> bool:
    """No estimate, exactly one side of the interval, enough seeds: a censored difference."""
    return e.estimate is None and (e.lo is None) != (e.hi is None) and e.n_min >= MIN_SEEDS


def _decidable(e: Effect) -> bool:
    return e.estimate is not None and e.lo is not None and e.hi is not None and e.n_min >= MIN_SEEDS


def _two_sided(diff: float, e: Effect) -> float:
    if e.se is None:
        return 1.0
    if e.df is None:  # a normal approximation (an se without degrees of freedom)
        from scipy.stats import norm

        return 0.0 if e.se == 0 and diff != 0 else 1.0 if e.se == 0 else min(1.0, 2 * float(norm.sf(abs(diff) / e.se)))
    if e.se == 0:
        return 0.0 if diff != 0 else 1.0
    return min(1.0, 2 * t_sf(abs(diff) / e.se, e.df))


def combine(verdicts: list[str]) -> str:
    """A claim's verdict from its parts: all supported -> supported; any contradicted ->
    contradicted, or partly supported where some part is supported; else inconclusive."""
    if verdicts and all(v == SUPPORTED for v in verdicts):
        return SUPPORTED
    if CONTRADICTED in verdicts:
        return PARTLY if SUPPORTED in verdicts else CONTRADICTED
    return INCONCLUSIVE
