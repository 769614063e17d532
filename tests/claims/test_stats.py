"""The statistics of the claims against scipy and hand-computed values."""

from __future__ import annotations

import math

import pytest
from scipy import stats as ss

from normlab import stats


def test_welch_matches_scipy() -> None:
    a, b = [2.31, 2.35, 2.30, 2.41], [2.62, 2.55, 3.31]
    e = stats.welch(a, b)
    ref = ss.ttest_ind(a, b, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert e.estimate == pytest.approx(sum(a) / 4 - sum(b) / 3)
    assert (e.lo, e.hi) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert e.df == pytest.approx(ref.df) and (e.n_a, e.n_b) == (4, 3)
    assert e.values_a == tuple(a) and e.values_b == tuple(b)


def test_one_sample_and_paired_match_scipy() -> None:
    x = [0.52, 0.61, 0.45, 0.48, 0.50]
    e = stats.one_sample(x)
    ci = ss.ttest_1samp(x, 0.0).confidence_interval(0.95)
    assert (e.lo, e.hi) == (pytest.approx(ci.low), pytest.approx(ci.high)) and e.df == 4
    p = stats.paired([1.0, 2.0, 3.5], [0.5, 1.0, 2.0])   # differences 0.5, 1.0, 1.5
    ci = ss.ttest_1samp([0.5, 1.0, 1.5], 0.0).confidence_interval(0.95)
    assert p.estimate == pytest.approx(1.0) and (p.lo, p.hi) == (pytest.approx(ci.low), pytest.approx(ci.high))


def test_degenerate_samples() -> None:
    assert stats.one_sample([]).estimate is None
    one = stats.one_sample([3.0])
    assert one.estimate == 3.0 and one.lo is None                      # one value: no interval
    flat = stats.one_sample([2.0, 2.0, 2.0])
    assert (flat.lo, flat.hi) == (2.0, 2.0) and flat.se == 0           # exact quantity: zero width
    assert stats.one_sample([1.0, float("nan"), None, 3.0]).n_a == 2     # non-finite values dropped
    assert stats.welch([1.0], [2.0, 3.0]).lo is None


def test_wilson_by_hand() -> None:
    # 3 of 4: p = .75, z = 1.95996; centre (p + z^2/2n)/(1 + z^2/n), half-width z sqrt(p(1-p)/n + z^2/4n^2)/(1 + z^2/n)
    z, n, p = 1.959963984540054, 4, 0.75
    den = 1 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    assert stats.wilson(3, 4) == (pytest.approx(c - h), pytest.approx(c + h))
    assert stats.wilson(0, 5)[0] == 0.0 and stats.wilson(0, 5)[1] == pytest.approx(0.4345, abs=1e-4)
    r = stats.rate(4, 4)
    assert r.estimate == 1.0 and r.lo == pytest.approx(0.5101, abs=1e-4) and r.counts == (4, 4)


def test_newcombe_reference_example_and_fisher() -> None:
    # Newcombe (1998), Table II example (h): 56/70 vs 48/80, method 10 gives 0.0524 .. 0.3339
    e = stats.rate_diff(56, 70, 48, 80)
    assert e.estimate == pytest.approx(0.2)
    assert (e.lo, e.hi) == (pytest.approx(0.0524, abs=1e-4), pytest.approx(0.3339, abs=1e-4))
    assert stats.fisher_p(0, 5, 5, 5) == pytest.approx(ss.fisher_exact([[0, 5], [5, 0]]).pvalue)
    assert stats.fisher_p(0, 5, 5, 5) == pytest.approx(2 / 252)


def test_holm_by_hand() -> None:
    # sorted p .01, .02, .04 (m = 3): 3 x .01 = .03, max(.03, 2 x .02) = .04, max(.04, .04) = .04
    assert stats.holm([0.04, 0.01, None, 0.02]) == [pytest.approx(0.04), pytest.approx(0.03), None,
                                                    pytest.approx(0.04)]
    assert stats.holm([0.5, 0.9]) == [pytest.approx(1.0), pytest.approx(1.0)]


def test_per_seed_trends() -> None:
    rows = [[1.0, 0.5, 0.25], [2.0, 1.0, 0.5]]                 # y = c / x: log-log slope -1
    assert stats.slope_per_seed([1, 2, 4], rows) == [pytest.approx(-1.0), pytest.approx(-1.0)]
    assert stats.spearman_per_seed([1, 2, 3], [[3, 2, 1], [1, 3, 2]]) == [pytest.approx(-1.0), pytest.approx(0.5)]
