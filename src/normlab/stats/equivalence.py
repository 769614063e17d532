"""Equivalence by two one-sided tests (TOST; Schuirmann 1987) for statements of "no effect",
"negligible" or "comparable": the effect is shown inside a registered margin [lo, hi] only when
both one-sided tests reject, H0: effect <= lo and H0: effect >= hi.

Three verdicts, so that "inconclusive" means what it says:

* ``equivalent``: both one-sided p-values are below ``alpha`` (the effect lies inside the margin);
* ``not equivalent``: a one-sided test shows the effect beyond a bound (below lo, or above hi);
* ``inconclusive``: neither. The reason says whether the data *cannot tell* at these seeds (the
  interval is wider than the margin, so no estimate could have shown equivalence: the seeds a
  side that would fit it are estimated), or the interval straddles a bound.

Each one-sided test is at ``alpha`` = 0.025 by default, the lab's 95% intervals: ``equivalent``
is then exactly the :class:`~normlab.claims.rules.Within` rule's "supported" and ``not
equivalent`` its "contradicted" (tests/stats/test_equivalence.py checks this), and the TOST
p-value max(p_lower, p_upper) is the p of "inside". Effects with a t interval (Welch's, one
sample, paired, a contrast: ``se`` and ``df``) use Student's t (``scipy.stats.t``, as
``scipy.stats.ttest_ind(equal_var=False)`` does); rates use the exact one-sided tests their
intervals invert (``stats.exact``). statsmodels' ``ttost_ind`` is the same Welch test; scipy
is already a dependency of the lab, so it is used directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from normlab.stats.effects import MIN_SEEDS, Effect, rate_tails, t_sf

EQUIVALENT, NOT_EQUIVALENT, INCONCLUSIVE = "equivalent", "not equivalent", "inconclusive"
ALPHA = 0.025  # each one-sided test: the lab's two-sided 95% intervals


@dataclass(frozen=True)
class Tost:
    """The verdict, the two one-sided p-values (``p_lower``: of H0 effect <= lo; ``p_upper``: of
    H0 effect >= hi), the TOST p-value ``p`` = max of the two, and why."""

    verdict: str
    p_lower: float | None
    p_upper: float | None
    reason: str

    @property
    def p(self) -> float | None:
        return None if self.p_lower is None or self.p_upper is None else max(self.p_lower, self.p_upper)

    def text(self) -> str:
        p = "" if self.p is None else f" (TOST p {self.p:.3g})"
        return f"{self.verdict}{p}: {self.reason}"


def _seeds_needed(e: Effect, width: float, alpha: float) -> int | None:
    """Seeds a side at which an interval centred in the margin would fit in it, the spread and
    degrees of freedom held at today's (an estimate for planning, not a promise)."""
    from scipy import stats

    if e.se is None or e.df is None or e.se == 0:
        return None
    need = stats.t.isf(alpha, e.df) * e.se / (width / 2)
    return math.ceil(e.n_min * need * need)


def tost(e: Effect, lo: float, hi: float, alpha: float = ALPHA) -> Tost:
    """Two one-sided tests of ``e`` against the margin [lo, hi] at ``alpha`` each."""
    if not lo < hi:
        raise ValueError(f"tost: the margin [{lo:g}, {hi:g}] must have lo < hi")
    if e.estimate is None or e.n_min < MIN_SEEDS:
        return Tost(INCONCLUSIVE, None, None, f"no estimate with {MIN_SEEDS} or more seeds a side")
    if e.counts is not None:  # a rate: the exact one-sided tests of its interval
        p_lower, shown_below = rate_tails(e, lo)
        shown_above, p_upper = rate_tails(e, hi)
    elif e.se is None or e.df is None:
        return Tost(INCONCLUSIVE, None, None, f"no test: the effect ({e.method}) has no standard error")
    elif e.se == 0:  # a deterministic quantity: the estimate is the value
        inside = lo < e.estimate < hi
        p_lower = p_upper = 0.0 if inside else 1.0
        shown_below = 0.0 if e.estimate < lo else 1.0
        shown_above = 0.0 if e.estimate > hi else 1.0
    else:
        p_lower, p_upper = t_sf((e.estimate - lo) / e.se, e.df), t_sf((hi - e.estimate) / e.se, e.df)
        shown_below, shown_above = t_sf((lo - e.estimate) / e.se, e.df), t_sf((e.estimate - hi) / e.se, e.df)
    if p_lower < alpha and p_upper < alpha:
        return Tost(EQUIVALENT, p_lower, p_upper, f"both one-sided tests reject at {alpha:g}: inside [{lo:g}, {hi:g}]")
    if shown_below < alpha or shown_above < alpha:
        side = f"below {lo:g}" if shown_below < alpha else f"above {hi:g}"
        return Tost(NOT_EQUIVALENT, p_lower, p_upper, f"shown {side} (one-sided p "
                    f"{min(shown_below, shown_above):.3g}): the effect is not negligible")
    if e.lo is not None and e.hi is not None and e.hi - e.lo >= hi - lo:
        n = _seeds_needed(e, hi - lo, alpha)
        more = f"; about {n} seeds a side would fit it" if n is not None else ""
        return Tost(INCONCLUSIVE, p_lower, p_upper, f"the data cannot tell: the interval (width {e.hi - e.lo:.3g}) "
                    f"is wider than the margin (width {hi - lo:.3g}), so no estimate could show equivalence{more}")
    bound = lo if p_lower >= alpha else hi
    return Tost(INCONCLUSIVE, p_lower, p_upper, f"the interval straddles the bound {bound:g}")


__all__ = ["ALPHA", "EQUIVALENT", "INCONCLUSIVE", "NOT_EQUIVALENT", "Tost", "tost"]
