"""The lab's statistics: effects with 95% intervals over seeds, used by every claim
(``normlab.claims``) and by the study pages' answers (``normlab.report``).

One place for every number a verdict rests on (docs/theory.md, "How a verdict is reached"):

- :func:`welch`: difference of two means, a - b, Welch's t interval (unequal variances).
- :func:`one_sample`: the mean of per-seed values (a slope, a Spearman rho, a paired
  difference, a log ratio) with its t interval; :func:`paired` is one_sample(a - b).
- :func:`rate`: one rate (k of n), the Clopper-Pearson interval; :func:`rate_diff`: the
  difference of two rates, the exact unconditional interval (Chan & Zhang 1999). Each is the
  inversion of the exact test whose p-value the rules report (:func:`rate_p`,
  :func:`rate_tails`; :mod:`normlab.stats.exact`), so the interval excludes a reference exactly
  when that p-value is below 0.05.
- :func:`holm`: Holm's step-down adjustment of the parts' p-values (family-wise error).

An :class:`Effect` carries its estimate, interval, n per side and what the p-value of a
rule needs (standard error and degrees of freedom, or the counts: a rate's p-value at any
reference comes from its counts). Rules
(:mod:`normlab.claims.rules`) turn an effect into a verdict.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Sequence

from normlab.stats.exact import clopper_pearson, diff_interval, tails
from normlab.stats.tensors import spearman

if TYPE_CHECKING:  # numpy is imported where it is used; arrays are welcome wherever sequences are
    import numpy as np

LEVEL = 0.95
MIN_SEEDS = 3  # fewer finished seeds on a side: always inconclusive


@dataclass(frozen=True)
class Effect:
    """An estimate with its 95% interval. ``n_b`` is None for one-sample effects."""

    estimate: float | None
    lo: float | None
    hi: float | None
    n_a: int
    n_b: int | None = None
    method: str = ""
    se: float | None = None       # t-based methods: standard error ...
    df: float | None = None       # ... and degrees of freedom
    counts: tuple[int, ...] | None = None  # rate methods: (k_a, n_a[, k_b, n_b])
    values_a: tuple[float, ...] = ()       # the per-seed inputs (for figures and re-checks)
    values_b: tuple[float, ...] = ()

    @property
    def n_min(self) -> int:
        return min(self.n_a, self.n_b) if self.n_b is not None else self.n_a

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self, fmt: str = "+.3g") -> str:
        """'+0.12 [+0.05, +0.19], n 3/3' (or 'n 5' one-sample; 'n/a' without data)."""
        n = f"n {self.n_a}" + (f"/{self.n_b}" if self.n_b is not None else "")
        if self.estimate is None:  # censored: only one side of the interval is known
            if self.lo is not None and self.hi is None:
                return f"> {self.lo:{fmt}} (censored), {n}"
            if self.hi is not None and self.lo is None:
                return f"< {self.hi:{fmt}} (censored), {n}"
            return f"n/a, {n}"
        if self.lo is None and self.hi is None:
            return f"{self.estimate:{fmt}} (no interval), {n}"
        if self.lo is None or self.hi is None:  # one side unbounded (a critical lr's profile)
            lo = "-inf" if self.lo is None else f"{self.lo:{fmt}}"
            hi = "+inf" if self.hi is None else f"{self.hi:{fmt}}"
            return f"{self.estimate:{fmt}} [{lo}, {hi}], {n}"
        return f"{self.estimate:{fmt}} [{self.lo:{fmt}}, {self.hi:{fmt}}], {n}"


def _finite(xs: Sequence[float | None]) -> list[float]:
    return [float(x) for x in xs if x is not None and math.isfinite(float(x))]


def _tq(df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + LEVEL / 2, df))


def one_sample(xs: Sequence[float | None], method: str = "one-sample t") -> Effect:
    """Mean of ``xs`` with its t interval (n - 1 degrees of freedom). Zero spread gives a
    zero-width interval (a deterministic quantity); one value gives no interval."""
    v = _finite(xs)
    n, va = len(v), tuple(v)
    if n == 0:
        return Effect(None, None, None, 0, method=method)
    m = math.fsum(v) / n
    if n == 1:
        return Effect(m, None, None, 1, method=method, values_a=va)
    sd = math.sqrt(math.fsum((x - m) ** 2 for x in v) / (n - 1))
    se = sd / math.sqrt(n)
    h = _tq(n - 1) * se
    return Effect(m, m - h, m + h, n, method=method, se=se, df=n - 1, values_a=va)


def paired(a: Sequence[float | None] | np.ndarray, b: Sequence[float | None] | np.ndarray) -> Effect:
    """Mean of the per-seed differences a_i - b_i (pairs with a missing side dropped)."""
    d = [x - y for x, y in zip(_nan(a), _nan(b)) if math.isfinite(x) and math.isfinite(y)]
    return one_sample(d, "paired t")


def _nan(xs: Sequence[float | None] | np.ndarray) -> list[float]:
    return [float(x) if x is not None else math.nan for x in xs]


def welch(a: Sequence[float | None], b: Sequence[float | None]) -> Effect:
    """mean(a) - mean(b) with Welch's interval (Welch-Satterthwaite degrees of freedom)."""
    va, vb = _finite(a), _finite(b)
    na, nb = len(va), len(vb)
    kw: dict[str, Any] = {"values_a": tuple(va), "values_b": tuple(vb)}
    if na == 0 or nb == 0:
        return Effect(None, None, None, na, nb, "welch", **kw)
    ma, mb = math.fsum(va) / na, math.fsum(vb) / nb
    if na < 2 or nb < 2:
        return Effect(ma - mb, None, None, na, nb, "welch", **kw)
    sa = math.fsum((x - ma) ** 2 for x in va) / (na - 1) / na
    sb = math.fsum((x - mb) ** 2 for x in vb) / (nb - 1) / nb
    se = math.sqrt(sa + sb)
    if se == 0:
        return Effect(ma - mb, ma - mb, ma - mb, na, nb, "welch", 0.0, float(na + nb - 2), **kw)
    df = (sa + sb) ** 2 / ((sa**2 / (na - 1) if sa else 0.0) + (sb**2 / (nb - 1) if sb else 0.0))
    h = _tq(df) * se
    return Effect(ma - mb, ma - mb - h, ma - mb + h, na, nb, "welch", se, df, **kw)


def rate(k: int, n: int) -> Effect:
    """The rate k / n with its Clopper-Pearson interval ("clopper-pearson"): the rates that
    neither one-sided exact binomial test rejects at 0.025 (p-value: :func:`rate_p`)."""
    if n == 0:
        return Effect(None, None, None, 0, method="clopper-pearson", counts=(k, n))

    lo, hi = clopper_pearson(k, n)
    return Effect(k / n, lo, hi, n, method="clopper-pearson", counts=(k, n))


def rate_diff(k_a: int, n_a: int, k_b: int, n_b: int) -> Effect:
    """k_a/n_a - k_b/n_b with the exact unconditional interval ("exact-unconditional"): the
    differences that neither one-sided exact score test rejects at 0.025, the nuisance rate
    maximised over its range (:func:`normlab.stats.exact.diff_interval`; p-value: :func:`rate_p`)."""
    counts = (k_a, n_a, k_b, n_b)
    if n_a == 0 or n_b == 0:
        return Effect(None, None, None, n_a, n_b, "exact-unconditional", counts=counts)

    lo, hi = diff_interval(*counts)
    return Effect(k_a / n_a - k_b / n_b, lo, hi, n_a, n_b, "exact-unconditional", counts=counts)


def rate_tails(e: Effect, ref: float) -> tuple[float, float]:
    """(p_above, p_below): the one-sided exact p-values at ``ref`` of a rate effect's tests,
    the ones its interval inverts (alternatives: the rate, or difference, is above / below ref)."""

    if e.counts is None:
        raise ValueError(f"rate_tails: effect '{e.method}' has no counts (only rate and rate_diff effects do)")
    return tails(e.counts, ref)


def rate_p(e: Effect, ref: float) -> float:
    """The central two-sided exact p-value at ``ref``: min(1, 2 min(p_above, p_below)); below
    0.05 exactly when the 95% interval excludes ``ref``."""
    return min(1.0, 2 * min(rate_tails(e, ref)))


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    from scipy import stats

    return float(stats.t.sf(t, df))


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None entries are left out of the family)."""
    present = {i: p for i, p in enumerate(pvalues) if p is not None}
    idx = sorted(present, key=present.__getitem__)
    m = len(idx)
    out: list[float | None] = [None] * len(pvalues)
    run = 0.0
    for rank, i in enumerate(idx):
        run = max(run, min(1.0, (m - rank) * float(present[i])))
        out[i] = run
    return out


def spearman_per_seed(x: Sequence[float] | np.ndarray, rows: Sequence[Sequence[float]] | np.ndarray) -> list[float]:
    """Spearman's rho of each row against ``x`` (rows: one per seed; NaN rows skipped)."""

    return [spearman(list(x), list(r)) for r in rows if all(math.isfinite(v) for v in r)]


def slope_per_seed(x: Sequence[float] | np.ndarray, rows: Sequence[Sequence[float]] | np.ndarray, log_x: bool = True,
                   log_y: bool = True) -> list[float]:
    """Least-squares slope of each row against ``x`` (log-log by default), one per seed."""
    import numpy as np

    xs = np.log(np.asarray(x, float)) if log_x else np.asarray(x, float)
    out = []
    for r in rows:
        y = np.asarray(r, float)
        if not np.all(np.isfinite(y)) or (log_y and np.any(y <= 0)):
            continue
        out.append(float(np.polyfit(xs, np.log(y) if log_y else y, 1)[0]))
    return out


def contrast(groups: Sequence[tuple[Sequence[float | None], float]], method: str = "contrast") -> Effect:
    """sum_i w_i * mean(group_i) over independent groups, with its t interval (standard error
    sqrt(sum w_i^2 s_i^2 / n_i), Welch-Satterthwaite degrees of freedom). A placement x depth
    interaction is ``contrast([(a_deep, 1), (a_shallow, -1), (b_deep, -1), (b_shallow, 1)])``:
    how much more a's loss changes with depth than b's, each against its own shallow control.
    ``n_a`` / ``n_b`` are the smallest group on the positive / negative side."""
    vals = [(_finite(v), float(w)) for v, w in groups]
    pos = [len(v) for v, w in vals if w > 0]
    neg = [len(v) for v, w in vals if w < 0]
    n_a, n_b = (min(pos) if pos else 0), (min(neg) if neg else None)
    if any(len(v) == 0 for v, _ in vals):
        return Effect(None, None, None, n_a, n_b, method)
    est = math.fsum(w * math.fsum(v) / len(v) for v, w in vals)
    if any(len(v) < 2 for v, _ in vals):
        return Effect(est, None, None, n_a, n_b, method)
    terms = []
    for v, w in vals:
        m = math.fsum(v) / len(v)
        terms.append((w * w * math.fsum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v), len(v) - 1))
    var = math.fsum(t for t, _ in terms)
    if var == 0:
        return Effect(est, est, est, n_a, n_b, method, 0.0, float(sum(d for _, d in terms)))
    df = var**2 / math.fsum(t * t / d for t, d in terms if t)
    se = math.sqrt(var)
    h = _tq(df) * se
    return Effect(est, est - h, est + h, n_a, n_b, method, se, df)
