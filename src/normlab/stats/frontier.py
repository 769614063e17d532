"""Critical learning rates: where half the seeds train, with a 95% interval, from outcomes over a
log-spaced lr sweep (docs/theory.md, "Critical learning rates").

At each tested lr x_i (log10 of the lr) k_i of n_i seeds train. The dose-response model is a
logistic in log lr, seeds pooled: logit P(trains) = b (x - c), so c is the log10 critical lr,
where P = 1/2, and b < 0 when runs train below c and fail above it (the stability frontier;
``direction`` "falls"). The fit is scipy's (``scipy.optimize``), the interval the profile
likelihood's: every c whose profile deviance 2 (l_max - l(c)) stays within the chi-square(1)
95% point 3.84; a side the deviance never reaches within two decades of the tested range is
unbounded (None).

The frontier measured is the upper one, the lr above which runs stop training: the lrs below
the lowest lr with the largest share of seeds training are left out of the fit (at a short
horizon a small lr can stall because it is slow; ``left_out`` counts them).

Three outcomes need more than the fit:

* **Censored.** Every lr (from that peak up) trains: c lies above the largest lr tested
  (``censored = "above"``, ``bound`` that lr). No lr trains: below the smallest (``"below"``).
  That ``bound`` is where the data stop, not a 95% limit: 4 seeds that all train at an lr
  where P(trains) is 1/2 happen one time in 16. The 95% limit on the known side (``lo`` when
  censored above, ``hi`` below) comes from the exact tests of the separated case: the lrs
  nearest the censored end, taken until 0.5^(their seeds) < 0.025 (None when all of them are
  not enough). Differences of censored frontiers use that limit.
* **Perfect (or quasi-complete) separation.** All seeds train up to x_k and none from x_{k+1}
  on (at most one lr with mixed outcomes between them): the likelihood grows without bound as
  the slope steepens, so there is no MLE slope and the profile interval is only the gap. The
  estimate is then the mixed lr, or the middle of the gap (in log lr), and the interval is
  widened by exact tests: under a monotone P(trains), c <= x_j would make every lr from x_j up
  to the gap train with probability at most 1/2, so a block of lrs x_j..x_k that all trained
  rejects it when 0.5^(seeds in the block) < 0.025. The lower bound is the largest such x_j
  (None when no block is large enough), and the upper bound the same on the failing side. With
  5 seeds per lr one lr is not enough (1/32 = 0.031), so the interval reaches one lr beyond the
  gap on each side; with 6 it is the gap itself.
* **Two critical lrs compared** (:func:`log_ratio`): the difference of their log10 critical lrs,
  with the interval recovered from each one's own (Zou & Donner's MOVER, which keeps each
  interval's asymmetry); a censored side makes the difference censored (a bound on one side).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from normlab.stats.effects import Effect

CRIT = 3.841458820694124  # chi-square(1) 95% point: the profile-likelihood cut
MAX_SLOPE = 400.0          # |d logit / d log10 lr| beyond this the fit counts as separated
SPAN = 2.0                 # decades beyond the tested range the profile is followed
ALPHA_SIDE = 0.025         # one-sided level of each exact test that bounds a separated interval


@dataclass(frozen=True)
class Frontier:
    """A critical lr (lr units) with its 95% interval; ``censored`` "above" / "below" when every
    lr / no lr trains (then ``lr`` is None and ``bound`` the lr it lies beyond)."""

    lr: float | None
    lo: float | None            # None: unbounded below; censored "above": its 95% limit (or None)
    hi: float | None            # None: unbounded above; censored "below": its 95% limit (or None)
    censored: str | None = None  # None, "above" or "below"
    bound: float | None = None
    method: str = ""
    slope: float | None = None   # d logit / d log10 lr at the MLE; None when separated or censored
    direction: str = "falls"     # "falls": trains below the critical lr; "rises": above it
    lrs: tuple[float, ...] = ()
    trains: tuple[int, ...] = ()
    seeds: tuple[int, ...] = ()
    left_out: int = 0            # lrs below the lowest with the largest share training, not fitted

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """'2.1e-03 [1.4e-03, 3e-03]', '> 1e-02 (every lr trains)', '< 1e-04 (no lr trains)'."""
        if self.censored == "above":
            limit = "no 95% limit" if self.lo is None else f"95%: > {self.lo:.2g}"
            return f"> {self.bound:.2g} (every lr trains; {limit})"
        if self.censored == "below":
            limit = "no 95% limit" if self.hi is None else f"95%: < {self.hi:.2g}"
            return f"< {self.bound:.2g} (no lr trains; {limit})"
        if self.lr is None:
            return "n/a"
        lo = "unbounded" if self.lo is None else f"{self.lo:.2g}"
        hi = "unbounded" if self.hi is None else f"{self.hi:.2g}"
        return f"{self.lr:.2g} [{lo}, {hi}]"


def _nll(a: float, b: float, x: Any, k: Any, n: Any) -> float:
    from scipy.special import log_expit

    eta = a + b * x
    return float(-(k * log_expit(eta) + (n - k) * log_expit(-eta)).sum())


def _profile(c: float, x: Any, k: Any, n: Any) -> float:
    """min over the slope of the negative log-likelihood with the crossing fixed at ``c``."""
    from scipy.optimize import minimize_scalar

    r = minimize_scalar(lambda b: _nll(-b * c, b, x, k, n), bounds=(-MAX_SLOPE, MAX_SLOPE), method="bounded",
                        options={"xatol": 1e-6})
    return float(r.fun)


def _exact_bound(blocks: Sequence[int]) -> int | None:
    """How many lrs of ``blocks`` (seed counts, nearest the gap first, all on one side) it takes
    for 0.5^seeds < ALPHA_SIDE; None when all of them are not enough."""
    total = 0
    for i, n in enumerate(blocks):
        total += n
        if 0.5 ** total < ALPHA_SIDE:
            return i
    return None


def _separated(x: Any, k: Any, n: Any, falls: bool) -> tuple[float, float | None, float | None] | None:
    """(estimate, lo, hi) in log10 lr when the data are separated in the direction ``falls``
    (all train, then at most one mixed lr, then none train; ``falls=False``: the mirror image);
    None when they are not."""
    order = list(range(len(x))) if falls else list(range(len(x)))[::-1]
    full = [k[i] == n[i] for i in order]
    none = [k[i] == 0 for i in order]
    t = 0
    while t < len(order) and full[t]:
        t += 1
    f = t + 1 if t < len(order) and not none[t] else t  # one mixed lr allowed between the blocks
    if f > len(order) or not all(none[f:]) or t == 0 or f == len(order):
        return None
    mixed = f == t + 1
    below, above = order[:t][::-1], order[f:]  # nearest the gap first
    est = x[order[t]] if mixed else (x[order[t - 1]] + x[order[f]]) / 2
    j = _exact_bound([int(n[i]) for i in below])
    m = _exact_bound([int(n[i]) for i in above])
    lo = None if j is None else float(x[below[j]])
    hi = None if m is None else float(x[above[m]])
    return (float(est), lo, hi) if falls else (float(est), hi, lo)


def _profile_interval(c_hat: float, l_max: float, x: Any, k: Any, n: Any) -> tuple[float | None, float | None]:
    """The c on each side of ``c_hat`` where the profile deviance reaches CRIT (None: not within SPAN)."""
    import numpy as np
    from scipy.optimize import brentq

    def dev(c: float) -> float:
        return 2 * (_profile(c, x, k, n) - l_max) - CRIT

    ends = []
    for far in (float(x.min()) - SPAN, float(x.max()) + SPAN):
        far = min(far, c_hat - 1e-9) if far < c_hat else max(far, c_hat + 1e-9)
        grid = np.linspace(c_hat, far, 41)
        vals = [dev(c) for c in grid]
        hit = next((i for i, v in enumerate(vals) if v > 0), None)
        ends.append(None if hit is None or hit == 0 else float(brentq(dev, grid[hit - 1], grid[hit], xtol=1e-6)))
    return ends[0], ends[1]


def critical_lr(lrs: Sequence[float], trains: Sequence[int], seeds: Sequence[int]) -> Frontier:
    """The upper critical lr of one (placement, depth, warm-up): ``trains[i]`` of ``seeds[i]``
    seeds train at ``lrs[i]``. lrs with no seed are left out, and so are the lrs below the
    lowest lr with the largest share of seeds training: at a short horizon a small lr can stall
    because it is slow, and the transition measured is the one above (``left_out`` counts them)."""
    import numpy as np

    keep = [i for i in range(len(lrs)) if seeds[i] > 0]
    if any(not (lrs[i] > 0) for i in keep) or any(not 0 <= trains[i] <= seeds[i] for i in keep):
        raise ValueError("critical_lr: lrs must be > 0 and 0 <= trains <= seeds at each")
    keep.sort(key=lambda i: lrs[i])
    lr = tuple(float(lrs[i]) for i in keep)
    k_t, n_t = tuple(int(trains[i]) for i in keep), tuple(int(seeds[i]) for i in keep)
    common: dict[str, Any] = {"lrs": lr, "trains": k_t, "seeds": n_t}
    if not keep:
        return Frontier(None, None, None, method="no seed has an outcome", **common)
    if not any(k_t):  # the 95% limit: c >= x_j would make x_1..x_j train with P >= 1/2 each
        j = _exact_bound(list(n_t))
        return Frontier(None, None, None if j is None else lr[j], "below", min(lr), "censored: no lr trains",
                        **common)
    rates = [a / b for a, b in zip(k_t, n_t)]
    peak = rates.index(max(rates))
    common["left_out"] = peak
    x, k, n = (np.array(v[peak:], float) for v in (np.log10(lr), k_t, n_t))
    if all(k == n):  # the 95% limit: c <= x_j would make x_j..x_top train with P <= 1/2 each
        j = _exact_bound([int(v) for v in n[::-1]])
        return Frontier(None, None if j is None else lr[len(lr) - 1 - j], None, "above", max(lr),
                        "censored: every lr trains" + (f" from the {peak + 1}th up" if peak else ""), **common)
    if len(x) < 2:
        return Frontier(None, None, None, method="too few lrs above the one where most seeds train", **common)
    sep = _separated(x, k, n, True)
    if sep is not None:
        est, lo, hi = sep
        return Frontier(10 ** est, None if lo is None else 10 ** lo, None if hi is None else 10 ** hi,
                        method="separated: the gap, widened by exact one-sided tests", **common)
    return _fit(x, k, n, common)


REACH_DECADES = 3.0  # a fitted crossing further than this outside the lrs tried is no estimate


def _fit(x: Any, k: Any, n: Any, common: dict[str, Any]) -> Frontier:
    """The logistic fit and its profile-likelihood interval (data not separated)."""
    import numpy as np
    from scipy.optimize import minimize

    p = (k.sum() + 0.5) / (n.sum() + 1)
    start = np.array([math.log(p / (1 - p)), 0.0])
    r = minimize(lambda ab: _nll(ab[0], ab[1], x, k, n), start, method="L-BFGS-B",
                 bounds=[(None, None), (-MAX_SLOPE, MAX_SLOPE)])
    a, b = (float(v) for v in r.x)
    c_hat = -a / b if abs(b) >= 1e-9 else math.inf
    # No trend, or one so flat that its crossing lies decades beyond every lr tried (a constant
    # share of seeds training at each lr: 1 of 4 at three lrs): the data place no crossing, and
    # 10 ** c_hat would be 0 or overflow.
    if not float(np.min(x)) - REACH_DECADES <= c_hat <= float(np.max(x)) + REACH_DECADES:
        return Frontier(None, None, None, method="profile likelihood: no trend with lr", slope=b, **common)
    lo, hi = _profile_interval(c_hat, float(r.fun), x, k, n)
    return Frontier(10 ** c_hat, None if lo is None else 10 ** lo, None if hi is None else 10 ** hi,
                    method="profile likelihood", slope=b, direction="falls" if b < 0 else "rises", **common)


@dataclass(frozen=True)
class LogRatio:
    """log10(critical lr of a / critical lr of b) with its 95% interval; ``censored`` "above"
    (only ``lo`` known) or "below" (only ``hi``), or "unknown" (nothing known)."""

    estimate: float | None
    lo: float | None
    hi: float | None
    censored: str | None = None
    method: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        if self.estimate is not None:
            lo = "-inf" if self.lo is None else f"{self.lo:+.2f}"
            hi = "+inf" if self.hi is None else f"{self.hi:+.2f}"
            return f"{self.estimate:+.2f} [{lo}, {hi}] decades"
        if self.censored == "above" and self.lo is not None:
            return f"> {self.lo:+.2f} decades (censored)"
        if self.censored == "below" and self.hi is not None:
            return f"< {self.hi:+.2f} decades (censored)"
        return "n/a (both censored on the same side)"


def _lg(v: float | None) -> float | None:
    return None if v is None else math.log10(v)


def _side(f: Frontier) -> tuple[float | None, float | None, float | None]:
    """(estimate, lo, hi) in log10 lr; a censored frontier is (None, lo, None) above or
    (None, None, hi) below: its 95% limit, not the last lr tested (which is no 95% statement)."""
    return _lg(f.lr), _lg(f.lo), _lg(f.hi)


def log_ratio(a: Frontier, b: Frontier) -> LogRatio:
    """log10 c_a - log10 c_b: MOVER when both are estimated; with a censored side, the bound the
    two frontiers' known sides still give (a lies above its bound, so a - b > bound - hi_b)."""
    ea, la, ua = _side(a)
    eb, lb, ub = _side(b)
    if ea is not None and eb is not None:
        d = ea - eb
        lo = None if la is None or ub is None else d - math.hypot(ea - la, ub - eb)
        hi = None if ua is None or lb is None else d + math.hypot(ua - ea, eb - lb)
        return LogRatio(d, lo, hi, method="MOVER (Zou & Donner 2008) from the two intervals")
    lo = None if la is None or ub is None else la - ub  # a >= la and b <= ub
    hi = None if ua is None or lb is None else ua - lb
    if lo is None and hi is None:
        return LogRatio(None, None, None, "unknown", "censored on the same side: nothing known")
    side = "above" if hi is None else "below" if lo is None else None
    return LogRatio(None, lo, hi, side, "censored: a bound from the known sides")


Z95 = 1.959963984540054


def ratio_effect(r: LogRatio, n_a: int, n_b: int) -> Effect:
    """The rules' Effect of a difference of log10 critical lrs (``n_*``: the fewest seeds at
    any lr of each line). Censored: no estimate, one side known. ``se`` is a normal
    approximation for the Holm p only: the half-width of the interval's side facing 0 over
    1.96 (None when that side is unbounded), so that p < 0.05 exactly when it excludes 0."""
    from normlab.stats.effects import Effect  # effects imports torch (spearman); pages read frontiers without it

    side = None
    if r.estimate is not None:
        facing = r.lo if r.estimate > 0 else r.hi
        side = None if facing is None else abs(r.estimate - facing) / Z95
    return Effect(r.estimate, r.lo, r.hi, n_a, n_b, method=r.method, se=side)


__all__ = ["CRIT", "Frontier", "LogRatio", "critical_lr", "log_ratio", "ratio_effect"]
