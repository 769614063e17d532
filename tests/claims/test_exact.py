"""Exact rate intervals (normlab.stats.exact): hand-computed bounds and p-values, the property that an
interval excludes a reference exactly when its test's p-value is below 0.05 (every rate up to
n = 12, every 2x2 table up to 6 runs a side), and the difference's test against an independent
computation (scipy's Barnard test; a numeric restricted MLE and nuisance search)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as ss

from normlab.stats import exact
from normlab.stats.effects import rate, rate_diff, rate_p, rate_tails

P0 = [i / 100 for i in range(1, 100)]


def test_clopper_pearson_by_hand() -> None:
    # k = 0: hi solves (1 - hi)^n = 0.025; k = n: lo solves lo^n = 0.025
    assert exact.clopper_pearson(0, 4) == (0.0, pytest.approx(1 - 0.025 ** 0.25))
    assert exact.clopper_pearson(0, 4)[1] == pytest.approx(0.6024, abs=1e-4)
    assert exact.clopper_pearson(4, 4) == (pytest.approx(0.025 ** 0.25), 1.0)
    lo, hi = exact.clopper_pearson(2, 4)   # symmetric; lo solves P(X >= 2 | lo) = 0.025
    assert lo == pytest.approx(1 - hi) and ss.binom.sf(1, 4, lo) == pytest.approx(0.025)
    e = rate(0, 4)
    assert e.method == "clopper-pearson" and e.counts == (0, 4) and e.hi == pytest.approx(0.6024, abs=1e-4)
    assert rate_p(e, 0.5) == pytest.approx(0.125)                       # 2 x P(X <= 0 | 1/2) = 2 / 16
    assert rate_tails(e, 0.5) == (1.0, pytest.approx(1 / 16))
    assert rate_p(rate(4, 4), 0.2) == pytest.approx(2 * 0.2**4)        # 2 x P(X >= 4 | 0.2)
    assert rate_p(rate(3, 4), 0.75) == 1.0


@pytest.mark.parametrize("n", range(1, 13))
def test_rate_interval_excludes_exactly_when_p_below_005(n: int) -> None:
    for k in range(n + 1):
        e = rate(k, n)
        assert e.lo is not None and e.hi is not None
        # a grid of references, and each bound itself and just beyond it
        refs = P0 + [e.lo, e.hi, e.lo - 1e-9, e.hi + 1e-9]
        for p0 in refs:
            if not 0 <= p0 <= 1:
                continue
            outside = p0 < e.lo or p0 > e.hi
            assert outside == (rate_p(e, p0) < 0.05), (k, n, p0)


def test_difference_by_hand() -> None:
    # 4/4 vs 0/4: the observed table is the only one as extreme; at difference d the nuisance
    # maximum of (p + d)^4 (1 - p)^4 is ((1 + d) / 2)^8, so lo = 2 * 0.025^(1/8) - 1, p(0) = 2 / 256
    e = rate_diff(4, 4, 0, 4)
    assert e.method == "exact-unconditional" and e.estimate == 1.0 and e.counts == (4, 4, 0, 4)
    assert e.lo == pytest.approx(2 * 0.025 ** 0.125 - 1, abs=1e-8) and e.hi == 1.0
    assert rate_p(e, 0.0) == pytest.approx(2 / 256)
    assert rate_p(rate_diff(5, 5, 0, 5), 0.0) == pytest.approx(2 / 1024)
    flip = rate_diff(0, 4, 4, 4)                                  # the mirror image
    assert (flip.lo, flip.hi) == (-1.0, pytest.approx(-e.lo))
    same = rate_diff(2, 4, 2, 4)
    assert same.lo == pytest.approx(-same.hi) and rate_p(same, 0.0) == 1.0
    assert rate_diff(1, 0, 2, 3).estimate is None


@pytest.mark.parametrize("n_a", range(1, 7))
def test_difference_interval_excludes_exactly_when_p_below_005(n_a: int) -> None:
    refs = [0.0, 0.5, -0.3, 0.137, -0.62, 0.91]
    for n_b in range(1, 7):
        for k_a in range(n_a + 1):
            for k_b in range(n_b + 1):
                e = rate_diff(k_a, n_a, k_b, n_b)
                assert e.lo is not None and e.hi is not None and e.lo <= e.estimate <= e.hi  # type: ignore[operator]
                for r in refs + [e.lo, e.hi, e.lo - 1e-7, e.hi + 1e-7]:
                    if -1 <= r <= 1:
                        outside = r < e.lo or r > e.hi
                        assert outside == (rate_p(e, r) < 0.05), (k_a, n_a, k_b, n_b, r)


@pytest.mark.parametrize("table", [(2, 5, 2, 7), (5, 6, 1, 6), (1, 6, 4, 9), (0, 4, 4, 4), (7, 12, 2, 11)])
def test_difference_p_at_zero_is_barnards_score_test(table: tuple[int, int, int, int]) -> None:
    # at difference 0 the score statistic is the pooled z, Barnard's (scipy maximises the nuisance
    # its own way). Tables without exact ties only: scipy compares floats, and misses a tie that
    # is 1 ulp off (3/12 vs 7/12 and 5/12 vs 9/12 have equal z; normlab counts both).
    k_a, n_a, k_b, n_b = table
    tab = [[k_a, k_b], [n_a - k_a, n_b - k_b]]
    up, down = exact.diff_tails(*table, 0.0)
    assert up == pytest.approx(ss.barnard_exact(tab, "greater", pooled=True).pvalue, abs=1e-6)
    assert down == pytest.approx(ss.barnard_exact(tab, "less", pooled=True).pvalue, abs=1e-6)


def _naive_p_above(k_a: int, n_a: int, k_b: int, n_b: int, d: float) -> float:
    """The one-sided p by another route: restricted MLE by numeric search, nuisance on 2001 points."""
    def z(xa: int, xb: int) -> float:
        lo, hi = max(0.0, d), min(1.0, 1.0 + d)
        nll = lambda pa: -(ss.binom.logpmf(xa, n_a, pa) + ss.binom.logpmf(xb, n_b, pa - d))  # noqa: E731
        pa = optimize.minimize_scalar(nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}).x
        pa = min((pa, lo, hi), key=nll)
        var = pa * (1 - pa) / n_a + (pa - d) * (1 - pa + d) / n_b
        num = xa / n_a - xb / n_b - d
        return 0.0 if num == 0 else num / math.sqrt(var) if var > 0 else math.copysign(math.inf, num)

    zo = z(k_a, k_b)
    region = [(xa, xb) for xa in range(n_a + 1) for xb in range(n_b + 1) if z(xa, xb) >= zo - 1e-9 * (1 + abs(zo))]
    pb = np.linspace(max(0.0, -d), min(1.0, 1.0 - d), 2001)
    return float(max(sum(ss.binom.pmf(xa, n_a, np.clip(pb + d, 0, 1)) * ss.binom.pmf(xb, n_b, pb)
                         for xa, xb in region)))


@pytest.mark.parametrize("table", [(3, 12, 7, 12), (2, 5, 2, 7), (6, 8, 1, 7)])
def test_lower_bound_is_where_the_one_sided_p_reaches_0025(table: tuple[int, int, int, int]) -> None:
    e = rate_diff(*table)
    assert e.lo is not None
    assert _naive_p_above(*table, e.lo - 1e-4) < 0.025 <= _naive_p_above(*table, e.lo + 1e-4) + 1e-6


def test_restricted_mle_is_the_constrained_maximum() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        n_a, n_b = (int(x) for x in rng.integers(1, 13, 2))
        xa, xb, d = int(rng.integers(0, n_a + 1)), int(rng.integers(0, n_b + 1)), float(rng.uniform(-0.95, 0.95))
        got = float(exact._restricted_pa(np.array(float(xa)), n_a, np.array(float(xb)), n_b, np.array(d)))
        grid = np.linspace(max(0, d), min(1, 1 + d), 20001)
        ll = ss.binom.logpmf(xa, n_a, grid) + ss.binom.logpmf(xb, n_b, grid - d)
        assert ss.binom.logpmf(xa, n_a, got) + ss.binom.logpmf(xb, n_b, got - d) >= ll.max() - 1e-9


def test_an_island_beyond_the_scan_step_is_inside_the_interval() -> None:
    # 11/12 vs 6/6: the one-sided p_below dips under 0.025 near +0.36 and is above it again at
    # 0.365-0.37 (not monotone); the interval is the hull, so it reaches past the island
    e = rate_diff(11, 12, 6, 6)
    assert exact.diff_tails(11, 12, 6, 6, 0.37)[1] >= 0.025
    assert e.hi is not None and e.hi > 0.37 and rate_p(e, 0.37) >= 0.05
    assert rate_p(e, e.hi + 1e-7) < 0.05
