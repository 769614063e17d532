"""Every rule kind in each outcome, the seed minimum, p-values consistent with the interval, and
how a claim's verdict follows from its parts."""

from __future__ import annotations

import pytest

from normlab.claims.rules import CONTRADICTED, INCONCLUSIVE, PARTLY, SUPPORTED, Direction, Within, combine
from normlab.stats.effects import one_sample, rate, rate_diff, welch

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


def test_the_reviewers_case_is_inconclusive() -> None:
    # 0 of 4 against "more than half": Wilson's [0, 0.49] said contradicted while the exact test
    # said p = 0.125; the exact interval [0, 0.602] and that same test now agree
    e = rate(0, 4)
    assert Direction(+1, 0.5).verdict(e) == INCONCLUSIVE and Direction(+1, 0.5).p(e) == pytest.approx(0.125)
    assert Direction(+1, 0.5).verdict(rate(4, 4)) == INCONCLUSIVE      # 4 of 4 cannot show > 1/2 either
    six = rate(6, 6)                                                     # 6 of 6 can: [0.025^(1/6) = 0.541, 1]
    assert Direction(+1, 0.5).verdict(six) == SUPPORTED and Direction(+1, 0.5).p(six) == pytest.approx(2 / 64)


# n = 4, Clopper-Pearson: 0/4 [0, 0.602], 2/4 [0.068, 0.932], 4/4 [0.398, 1]; p by hand (binomial tails)
RATE_DIRECTION = [
    (4, +1, 0.2, SUPPORTED, 2 * 0.2**4), (4, -1, 0.2, CONTRADICTED, 2 * 0.2**4),
    (0, -1, 0.7, SUPPORTED, 2 * 0.3**4), (0, +1, 0.7, CONTRADICTED, 2 * 0.3**4),
    (0, +1, 0.5, INCONCLUSIVE, 0.125), (4, +1, 0.5, INCONCLUSIVE, 0.125), (2, -1, 0.5, INCONCLUSIVE, 1.0),
]


@pytest.mark.parametrize("k,sign,ref,want,p", RATE_DIRECTION)
def test_direction_on_rates_at_n4(k: int, sign: int, ref: float, want: str, p: float) -> None:
    e, r = rate(k, 4), Direction(sign, ref)
    assert r.verdict(e) == want and r.p(e) == pytest.approx(p)
    assert (r.p(e) < 0.05) == (want != INCONCLUSIVE)


P_IN_2OF4 = 2 * (1 - 0.95**4 - 4 * 0.05 * 0.95**3)   # 2 x P(X >= 2 | 0.05) = 2 x P(X <= 2 | 0.95)


@pytest.mark.parametrize("k,lo,hi,want,p", [
    (2, 0.05, 0.95, SUPPORTED, P_IN_2OF4),          # [0.068, 0.932] inside
    (4, 0.0, 0.3, CONTRADICTED, 2 * 0.3**4),        # [0.398, 1] above 0.3: 2 x P(X >= 4 | 0.3)
    (0, 0.7, 1.0, CONTRADICTED, 2 * 0.3**4),        # [0, 0.602] below 0.7: 2 x P(X <= 0 | 0.7)
    (2, 0.1, 0.9, INCONCLUSIVE, None),              # straddles both bounds
    (4, 0.3, 1.0, INCONCLUSIVE, None),              # 1 is in the interval: "inside [0.3, 1]" is never shown
])
def test_within_on_rates_at_n4(k: int, lo: float, hi: float, want: str, p: float | None) -> None:
    e, r = rate(k, 4), Within(lo, hi)
    got = r.p(e)
    assert r.verdict(e) == want and got is not None
    assert (got < 0.05) == (want != INCONCLUSIVE)
    if p is not None:
        assert got == pytest.approx(p)


@pytest.mark.parametrize("counts,rule,want", [
    ((4, 4, 0, 4), Direction(+1), SUPPORTED), ((4, 4, 0, 4), Direction(-1), CONTRADICTED),
    ((3, 4, 1, 4), Direction(+1), INCONCLUSIVE), ((4, 4, 0, 4), Within(-0.2, 0.2), CONTRADICTED),
    ((2, 4, 2, 4), Within(-0.2, 0.2), INCONCLUSIVE), ((2, 4, 2, 4), Within(-0.99, 0.99), SUPPORTED),
    ((4, 4, 0, 4), Direction(+1, 0.3), INCONCLUSIVE), ((4, 4, 0, 4), Direction(+1, 0.25), SUPPORTED),
])
def test_rules_on_rate_differences_at_n4(counts: tuple[int, int, int, int], rule: Direction | Within,
                                         want: str) -> None:
    # 4/4 vs 0/4: [2 x 0.025^(1/8) - 1, 1] = [0.261, 1], p at 0 is 2 / 256
    e = rate_diff(*counts)
    got = rule.p(e)
    assert rule.verdict(e) == want and got is not None and (got < 0.05) == (want != INCONCLUSIVE)
    if counts == (4, 4, 0, 4) and rule == Direction(+1):
        assert got == pytest.approx(2 / 256)


def test_rates_below_three_runs_are_inconclusive() -> None:
    assert Direction(+1, 0.01).verdict(rate(2, 2)) == INCONCLUSIVE and Direction(+1, 0.01).p(rate(2, 2)) is None
    assert Within(0.0, 0.5).p(rate_diff(0, 2, 0, 5)) is None


def test_combine() -> None:
    assert combine([SUPPORTED, SUPPORTED]) == SUPPORTED
    assert combine([SUPPORTED, CONTRADICTED]) == PARTLY
    assert combine([CONTRADICTED, INCONCLUSIVE]) == CONTRADICTED
    assert combine([SUPPORTED, INCONCLUSIVE]) == INCONCLUSIVE
    assert combine([INCONCLUSIVE]) == INCONCLUSIVE


def test_rule_texts_state_the_parameters() -> None:
    assert "above 0.5" in Direction(+1, 0.5).text() and "below" in Direction(-1).text()
    assert "[1.2, 1.8]" in Within(1.2, 1.8).text()
