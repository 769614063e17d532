"""Critical learning rates (normlab.stats.frontier) on synthetic sweeps in every outcome: censored
on each side, a clean transition, perfect separation (with the exact widening), a boundary
that moves with seed noise, and differences of log critical lrs. The coverage checks simulate
many sweeps from a known truth and count how often the 95% interval holds it: a fit that
reported the bare gap under separation, or a Wald interval, would fail them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from normlab.stats.frontier import critical_lr, log_ratio

LRS = [1e-4 * 10 ** (i / 3) for i in range(8)]  # 1e-4 .. 2.2e-2, a third of a decade apart
X = np.log10(LRS)
TRUE = -3.1  # log10 of the critical lr the simulations put inside the range


def _log(v: float | None, default: float) -> float:
    return default if v is None else math.log10(v)


def _sweep(rng: np.random.Generator, c: float = TRUE, slope: float | None = None, sd: float | None = None,
           seeds: int = 5) -> list[int]:
    """Seeds that train at each lr: a logistic in log lr (``slope``), or each seed with its own
    critical lr drawn around ``c`` (``sd`` decades): a boundary that moves with seed noise."""
    if slope is not None:
        return list(rng.binomial(seeds, 1 / (1 + np.exp(-slope * (X - c)))))
    own = rng.normal(c, sd, seeds)
    return [int((x < own).sum()) for x in X]


def test_every_lr_trains_is_censored_above_and_none_below() -> None:
    up = critical_lr(LRS, [5] * 8, [5] * 8)
    # the 95% limit: one lr of 5 seeds is not enough (1/32 > 0.025), two are (1/1024)
    assert (up.censored, up.bound, up.lr, up.lo, up.hi) == ("above", max(LRS), None, LRS[-2], None)
    assert up.text() == "> 0.022 (every lr trains; 95%: > 0.01)"
    down = critical_lr(LRS, [0] * 8, [5] * 8)
    assert (down.censored, down.bound, down.lr, down.lo, down.hi) == ("below", min(LRS), None, None, LRS[1])
    # with 6 seeds one lr is enough (1/64 < 0.025); with 2 seeds at 2 lrs nothing is (1/16)
    assert critical_lr(LRS, [6] * 8, [6] * 8).lo == max(LRS)
    thin = critical_lr(LRS[:2], [2, 2], [2, 2])
    assert thin.censored == "above" and thin.lo is None and "no 95% limit" in thin.text()
    # an lr without seeds is left out, not read as a failure
    part = critical_lr(LRS, [5] * 7 + [0], [5] * 7 + [0])
    assert part.censored == "above" and part.bound == LRS[6]


def test_a_clean_transition_is_found_and_narrows_with_seeds() -> None:
    rng = np.random.default_rng(1)
    big = critical_lr(LRS, _sweep(rng, slope=-5, seeds=400), [400] * 8)
    small = critical_lr(LRS, [5, 5, 4, 3, 1, 0, 1, 0], [5] * 8)
    assert big.method == small.method == "profile likelihood"
    assert abs(math.log10(big.lr) - TRUE) < 0.05 and big.lo < 10 ** TRUE < big.hi
    assert big.slope == pytest.approx(-5, rel=0.2) and big.direction == "falls"
    assert math.log10(big.hi / big.lo) < math.log10(small.hi / small.lo) / 3
    assert small.lo < small.lr < small.hi


@pytest.mark.parametrize("seeds, lo, hi", [(5, 1, 4), (6, 2, 3), (2, 0, 5)])
def test_perfect_separation_spans_the_gap_widened_by_exact_tests(seeds: int, lo: int, hi: int) -> None:
    """All train up to LRS[2], none from LRS[3]: the gap. One lr of 5 seeds that all train has
    probability 1/32 > 0.025 under P = 1/2, so the bound goes one lr further; 6 seeds (1/64)
    bound it at the gap; 2 seeds need three lrs (1/64)."""
    f = critical_lr(LRS, [seeds] * 3 + [0] * 5, [seeds] * 8)
    assert f.method.startswith("separated") and f.slope is None
    assert f.lr == pytest.approx(10 ** ((X[2] + X[3]) / 2))
    assert (f.lo, f.hi) == (pytest.approx(LRS[lo]), pytest.approx(LRS[hi]))


def test_quasi_separation_centres_on_the_mixed_lr_and_a_short_side_is_unbounded() -> None:
    f = critical_lr(LRS, [5, 5, 5, 2, 0, 0, 0, 0], [5] * 8)
    assert f.method.startswith("separated") and f.lr == pytest.approx(LRS[3])
    assert f.lo == pytest.approx(LRS[1]) and f.hi == pytest.approx(LRS[5])
    edge = critical_lr(LRS, [5, 0, 0, 0, 0, 0, 0, 0], [5] * 8)  # one training lr: nothing bounds it below
    assert edge.lo is None and edge.hi == pytest.approx(LRS[2])


def test_slow_small_lrs_are_left_out_of_the_upper_frontier() -> None:
    """At a short horizon the smallest lrs stall because they are slow: the frontier measured is
    the transition above the lr where most seeds train, and the lrs below are counted apart."""
    rising = critical_lr(LRS, [0, 0, 0, 0, 6, 6, 6, 6], [6] * 8)
    assert (rising.censored, rising.bound, rising.left_out) == ("above", max(LRS), 4)
    hump = critical_lr(LRS, [0, 2, 5, 5, 3, 0, 0, 0], [5] * 8)
    assert hump.left_out == 2 and hump.lr == pytest.approx(LRS[4])  # quasi-separated above the peak
    assert hump.lo == pytest.approx(LRS[2]) and hump.hi == pytest.approx(LRS[6])
    edge = critical_lr(LRS, [0, 0, 0, 0, 0, 0, 1, 3], [5] * 8)  # most train at the largest lr: nothing above
    assert edge.lr is None and edge.censored is None and edge.method.startswith("too few")


@pytest.mark.parametrize("kind", ["logistic", "steep", "seed-noise"])
def test_the_interval_covers_the_truth_in_repeated_sweeps(kind: str) -> None:
    """60 sweeps of 5 seeds: the interval holds the true critical lr in at least 85% (nominal
    95%), is at most 1.4 decades wide in the median, and the estimate is centred on it. A steep
    boundary separates nearly every sweep (the exact widening), a gentle one rarely (the
    profile likelihood)."""
    rng = np.random.default_rng({"logistic": 2, "steep": 3, "seed-noise": 4}[kind])
    kw = {"logistic": {"slope": -6.0}, "steep": {"slope": -40.0}, "seed-noise": {"sd": 0.15}}[kind]
    hits, widths, errors = 0, [], []
    for _ in range(60):
        k = _sweep(rng, **kw)
        f = critical_lr(LRS, k, [5] * 8)
        assert f.censored is None  # the truth lies well inside the range
        lo, hi = _log(f.lo, -99), _log(f.hi, 99)
        hits += lo <= TRUE <= hi
        widths.append(hi - lo)
        errors.append(math.log10(f.lr) - TRUE)
    assert hits / 60 >= 0.85, hits
    assert np.median(widths) <= 1.4, np.median(widths)
    assert abs(np.mean(errors)) < 0.1 and np.mean(np.abs(errors)) < 0.25


def test_differences_of_log_critical_lrs_cover_the_true_shift() -> None:
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(40):
        a = critical_lr(LRS, _sweep(rng, c=TRUE + 0.5, slope=-6.0), [5] * 8)
        b = critical_lr(LRS, _sweep(rng, c=TRUE - 0.2, slope=-6.0), [5] * 8)
        d = log_ratio(a, b)
        assert d.estimate is not None and d.censored is None
        hits += (-99 if d.lo is None else d.lo) <= 0.7 <= (99 if d.hi is None else d.hi)
    assert hits / 40 >= 0.85, hits


def test_a_censored_side_makes_the_difference_censored() -> None:
    every = critical_lr(LRS, [5] * 8, [5] * 8)
    none = critical_lr(LRS, [0] * 8, [5] * 8)
    mid = critical_lr(LRS, [5, 5, 4, 3, 1, 0, 1, 0], [5] * 8)
    # a > every.lo (its 95% limit, not the last lr), b < mid.hi: a - b > log every.lo - log mid.hi
    d = log_ratio(every, mid)
    assert d.censored == "above" and d.estimate is None and d.hi is None
    assert d.lo == pytest.approx(math.log10(LRS[-2]) - math.log10(mid.hi))
    r = log_ratio(mid, every)
    assert r.censored == "below" and r.hi == pytest.approx(math.log10(mid.hi) - math.log10(LRS[-2]))
    both = log_ratio(every, none)
    assert both.censored == "above" and both.lo == pytest.approx(math.log10(LRS[-2] / LRS[1]))
    # a censored frontier without a 95% limit gives no bound at all
    thin = critical_lr(LRS[:2], [2, 2], [2, 2])
    assert log_ratio(thin, mid).censored == "unknown"
    same = log_ratio(every, every)
    assert same.censored == "unknown" and same.lo is None and same.hi is None


def test_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError):
        critical_lr([1e-3, 2e-3], [3, 6], [5, 5])
    with pytest.raises(ValueError):
        critical_lr([0.0, 2e-3], [1, 0], [5, 5])


def test_a_constant_share_of_seeds_training_places_no_crossing() -> None:
    """Post-LN at 18 blocks with warm-up, step 1000 of campaign 1's frontier stage: 1 of 4 seeds
    trains at each of the three highest lrs, none below. The logistic fitted to the three lrs the
    fit keeps is all but flat (slope ~ -2e-5): its crossing lay tens of thousands of decades away
    and 10 ** it underflowed to an lr of 0.0, which a log ratio then failed on. No crossing is
    placed, and its ratio with any line is unknown, not an error."""
    lrs = [1.975e-05, 2.963e-05, 4.444e-05, 6.667e-05, 1e-4, 1.5e-4]
    f = critical_lr(lrs, [0, 0, 0, 1, 1, 1], [4] * 6)
    assert f.lr is None and f.lo is None and f.hi is None and "no trend with lr" in f.method
    other = critical_lr([1e-3, 2e-3, 4e-3], [4, 2, 0], [4, 4, 4])
    assert log_ratio(other, f).censored == "unknown" and log_ratio(f, other).estimate is None
