"""TOST (stats/equivalence.py): every verdict, scipy's Welch test as the reference, and agreement
with the Within rule at the lab's level."""

from __future__ import annotations

import random

import pytest

from normlab.claims.rules import CONTRADICTED, SUPPORTED, Within
from normlab.stats.effects import Effect, one_sample, rate, welch
from normlab.stats.equivalence import EQUIVALENT, INCONCLUSIVE, NOT_EQUIVALENT, tost

M = 0.05  # the lab's equivalence margin, nats


def test_equivalent_when_both_one_sided_tests_reject() -> None:
    a = [3.010, 3.012, 3.008, 3.011, 3.009]
    b = [3.000, 3.003, 2.999, 3.002, 3.001]
    got = tost(welch(a, b), -M, M)
    assert got.verdict == EQUIVALENT and got.p is not None and got.p < 0.025


def test_not_equivalent_when_the_effect_is_shown_beyond_a_bound() -> None:
    got = tost(welch([3.20, 3.22, 3.21, 3.19], [3.00, 3.01, 2.99, 3.02]), -M, M)
    assert got.verdict == NOT_EQUIVALENT and "shown above 0.05" in got.reason


def test_inconclusive_says_the_data_cannot_tell_when_the_interval_is_wider_than_the_margin() -> None:
    got = tost(welch([3.0, 3.2, 2.9, 3.1], [3.05, 2.85, 3.15, 3.0]), -M, M)
    assert got.verdict == INCONCLUSIVE
    assert got.reason.startswith("the data cannot tell: the interval (width")
    assert "seeds a side would fit it" in got.reason


def test_inconclusive_on_a_bound_says_which() -> None:
    # a narrow interval around +0.05: it fits the margin's width but straddles hi
    got = tost(one_sample([0.048, 0.052, 0.050, 0.049, 0.051]), -M, M)
    assert got.verdict == INCONCLUSIVE and got.reason == "the interval straddles the bound 0.05"


def test_too_few_seeds_or_no_error_is_inconclusive() -> None:
    assert tost(welch([1.0, 1.0], [1.0, 1.0]), -M, M).reason.startswith("no estimate with 3")
    no_se = Effect(0.0, -0.01, 0.01, 4, 4, method="MOVER")
    assert tost(no_se, -M, M).reason.startswith("no test")


def test_p_values_are_scipy_welch_one_sided_tests() -> None:
    from scipy import stats

    a = [2.51, 2.55, 2.49, 2.53, 2.56]
    b = [2.50, 2.47, 2.52, 2.48]
    got = tost(welch(a, b), -M, M)
    lower = stats.ttest_ind([x - (-M) for x in a], b, equal_var=False, alternative="greater").pvalue
    upper = stats.ttest_ind([x - M for x in a], b, equal_var=False, alternative="less").pvalue
    assert got.p_lower == pytest.approx(lower, rel=1e-9) and got.p_upper == pytest.approx(upper, rel=1e-9)


def test_at_the_labs_level_tost_is_the_within_rule() -> None:
    rng = random.Random(7)
    rule = Within(-M, M)
    seen = set()
    for _ in range(300):
        n = rng.choice([3, 4, 6])
        shift, sd = rng.uniform(-0.1, 0.1), rng.choice([0.005, 0.02, 0.06])
        e = welch([rng.gauss(shift, sd) for _ in range(n)], [rng.gauss(0, sd) for _ in range(n)])
        v, t = rule.verdict(e), tost(e, -M, M).verdict
        seen.add(t)
        assert (v == SUPPORTED) == (t == EQUIVALENT) and (v == CONTRADICTED) == (t == NOT_EQUIVALENT)
    assert seen == {EQUIVALENT, NOT_EQUIVALENT, INCONCLUSIVE}


def test_a_rate_uses_its_exact_tests() -> None:
    # "as often as not": a rate within [0.3, 0.7] (Clopper-Pearson 50 of 100: [0.398, 0.602])
    assert tost(rate(50, 100), 0.3, 0.7).verdict == EQUIVALENT
    assert tost(rate(0, 12), 0.3, 0.7).verdict == NOT_EQUIVALENT  # upper limit 0.265
    wide = tost(rate(6, 12), 0.3, 0.7)  # [0.211, 0.789]
    assert wide.verdict == INCONCLUSIVE and wide.reason.startswith("the data cannot tell")


def test_a_bad_margin_is_refused() -> None:
    with pytest.raises(ValueError, match=r"\[0.05, -0.05\]"):
        tost(one_sample([0.0, 0.1, 0.2]), M, -M)
