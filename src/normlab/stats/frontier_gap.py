"""A difference of two differences of critical lrs: how much a factor moves a gap between two
frontiers (the Pre-LN minus Post-LN gap under Muon against the same gap under AdamW).

Each gap is a :class:`~normlab.stats.frontier.LogRatio` (``log_ratio``: MOVER from the two
frontiers' own intervals); their difference D = g1 - g2 takes MOVER once more (Zou & Donner
2008: with independent lines the limits combine as for a sum of two differences), which is
MOVER over the four frontiers. A censored gap makes D a bound from the known sides, as
``log_ratio`` bounds a censored difference: g1 > lo1 and g2 < hi2 give D > lo1 - hi2.

The rules' Effect is ``stats.frontier.ratio_effect`` of the result (a normal approximation for
the Holm p, from the interval's side facing 0).
"""

from __future__ import annotations

import math

from normlab.stats.frontier import LogRatio


def gap_difference(g1: LogRatio, g2: LogRatio) -> LogRatio:
    """g1 - g2 in decades, with its 95% interval (MOVER; a bound where a gap is censored)."""
    if g1.estimate is not None and g2.estimate is not None:
        d = g1.estimate - g2.estimate
        lo = None if g1.lo is None or g2.hi is None else d - math.hypot(g1.estimate - g1.lo, g2.hi - g2.estimate)
        hi = None if g1.hi is None or g2.lo is None else d + math.hypot(g1.hi - g1.estimate, g2.estimate - g2.lo)
        return LogRatio(d, lo, hi, method="MOVER (Zou & Donner 2008) over the two gaps' intervals")
    lo = None if g1.lo is None or g2.hi is None else g1.lo - g2.hi
    hi = None if g1.hi is None or g2.lo is None else g1.hi - g2.lo
    if lo is None and hi is None:
        return LogRatio(None, None, None, "unknown", "a gap censored: nothing known of the difference")
    side = "above" if hi is None else "below" if lo is None else None
    return LogRatio(None, lo, hi, side, "censored: a bound from the gaps' known sides")


__all__ = ["gap_difference"]
