"""The statistics of the claims against scipy and hand-computed values."""

from __future__ import annotations

import pytest
from scipy import stats as ss

from normlab.stats import effects as stats


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


def test_rate_effects_carry_their_counts() -> None:
    # the intervals themselves: tests/claims/test_exact.py
    r = stats.rate(4, 4)
    assert r.estimate == 1.0 and r.lo == pytest.approx(0.025 ** 0.25) and r.hi == 1.0 and r.counts == (4, 4)
    assert stats.rate(0, 0).estimate is None and stats.rate(0, 0).method == "clopper-pearson"
    d = stats.rate_diff(3, 4, 1, 4)
    assert d.estimate == pytest.approx(0.5) and (d.n_a, d.n_b, d.counts) == (4, 4, (3, 4, 1, 4))
    with pytest.raises(ValueError, match="no counts"):
        stats.rate_p(stats.one_sample([1.0, 2.0, 3.0]), 0.0)


def test_holm_by_hand() -> None:
    # sorted p .01, .02, .04 (m = 3): 3 x .01 = .03, max(.03, 2 x .02) = .04, max(.04, .04) = .04
    assert stats.holm([0.04, 0.01, None, 0.02]) == [pytest.approx(0.04), pytest.approx(0.03), None,
                                                    pytest.approx(0.04)]
    assert stats.holm([0.5, 0.9]) == [pytest.approx(1.0), pytest.approx(1.0)]


def test_per_seed_trends() -> None:
    rows = [[1.0, 0.5, 0.25], [2.0, 1.0, 0.5]]                 # y = c / x: log-log slope -1
    assert stats.slope_per_seed([1, 2, 4], rows) == [pytest.approx(-1.0), pytest.approx(-1.0)]
    assert stats.spearman_per_seed([1, 2, 3], [[3, 2, 1], [1, 3, 2]]) == [pytest.approx(-1.0), pytest.approx(0.5)]
