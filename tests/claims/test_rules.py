"""Every rule kind in each outcome, the seed minimum, p-values consistent with the interval, and
how a claim's verdict follows from its parts."""

from __future__ import annotations

import pytest

from normlab.claims.rules import CONTRADICTED, INCONCLUSIVE, PARTLY, SUPPORTED, Direction, Within, combine
from normlab.stats import one_sample, rate, rate_diff, welch

UP = [1.0, 1.1, 0.9, 1.05]          # clearly above 0
DOWN = [-1.0, -1.1, -0.9, -1.05]    # clearly below 0
NOISE = [-1.0, 1.2, 0.3, -0.6]      # straddles 0


@pytest.mark.parametrize("xs,sign,want", [(UP, +1, SUPPORTED), (DOWN, +1, CONTRADICTED), (NOISE, +1, INCONCLUSIVE),
                                          (DOWN, -1, SUPPORTED), (UP, -1, CONTRADICTED), (NOISE, -1, INCONCLUSIVE)])
def test_direction(xs: list[float], sign: int, want: str) -> None:
    e = one_sample(xs)
    r = Direction(sign)
    assert r.verdict(e) == want
    assert (r.p(e) < 0.05) == (want != INCONCLUSIVE)   # the p-value agrees with the 95% interval


def test_direction_against_a_reference() -> None:
    e = one_sample([0.5, 0.51, 0.49])  # 95% interval [0.475, 0.525] (t with 2 df: 4.30)
    assert Direction(+1, 0.4).verdict(e) == SUPPORTED and Direction(+1, 0.6).verdict(e) == CONTRADICTED
    assert Direction(-1, 0.5).verdict(e) == INCONCLUSIVE


@pytest.mark.parametrize("xs,want", [([1.49, 1.5, 1.51, 1.5], SUPPORTED), ([2.5, 2.6, 2.4], CONTRADICTED),
                                     ([1.2, 1.9, 1.5, 2.1], INCONCLUSIVE)])
def test_within(xs: list[float], want: str) -> None:
    e = one_sample(xs)
    r = Within(1.2, 1.8)
    assert r.verdict(e) == want
    assert (r.p(e) < 0.05) == (want != INCONCLUSIVE)


def test_equivalence_is_never_absence_of_evidence() -> None:
    # a mean difference of 0 with a wide interval is not "comparable": only an interval inside counts
    e = welch([2.0, 2.6, 1.4], [2.0, 2.5, 1.5])
    assert abs(e.estimate) < 0.05 and Within(-0.05, 0.05).verdict(e) == INCONCLUSIVE


def test_fewer_than_three_seeds_is_always_inconclusive() -> None:
    two = one_sample([5.0, 5.1])
    assert two.lo is not None and Direction(+1).verdict(two) == INCONCLUSIVE and Direction(+1).p(two) is None
    assert Direction(+1).verdict(welch(UP, [0.0, 0.1])) == INCONCLUSIVE
    assert Within(4, 6).verdict(two) == INCONCLUSIVE


def test_rates_use_wilson_and_exact_tests() -> None:
    assert Direction(+1, 0.5).verdict(rate(4, 4)) == SUPPORTED          # Wilson lower bound 0.51
    assert Direction(+1, 0.5).verdict(rate(0, 4)) == CONTRADICTED
    assert Direction(+1, 0.5).verdict(rate(2, 3)) == INCONCLUSIVE
    assert Direction(+1, 0.5).p(rate(4, 4)) == pytest.approx(0.125)    # exact binomial, two-sided
    d = rate_diff(5, 5, 0, 5)
    assert Direction(+1).verdict(d) == SUPPORTED and Direction(+1).p(d) == pytest.approx(2 / 252)


def test_combine() -> None:
    assert combine([SUPPORTED, SUPPORTED]) == SUPPORTED
    assert combine([SUPPORTED, CONTRADICTED]) == PARTLY
    assert combine([CONTRADICTED, INCONCLUSIVE]) == CONTRADICTED
    assert combine([SUPPORTED, INCONCLUSIVE]) == INCONCLUSIVE
    assert combine([INCONCLUSIVE]) == INCONCLUSIVE


def test_rule_texts_state_the_parameters() -> None:
    assert "above 0.5" in Direction(+1, 0.5).text() and "below" in Direction(-1).text()
    assert "[1.2, 1.8]" in Within(1.2, 1.8).text()
