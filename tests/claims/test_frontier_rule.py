"""The critical-lr claims' rule on synthetic frontiers, in every outcome: a shift seen, a shift
against the statement, no shift, a censored side that decides alone or says nothing, too few
seeds, and a boundary that moves with seed noise (each seed's own threshold)."""

from __future__ import annotations

import numpy as np
import pytest

from normlab.claims.rules import CONTRADICTED, INCONCLUSIVE, SUPPORTED, Direction
from normlab.stats.frontier import critical_lr, log_ratio, ratio_effect

LRS = [2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2]
RAISES = Direction(+1)  # "warm-up raises the critical lr": a minus b above 0


def _sweep(c: float, seeds: int, rng: np.random.Generator | None = None, sd: float = 0.0) -> list[int]:
    """Seeds that train at each lr when seed s trains below its own threshold (log10 c + noise)."""
    own = np.full(seeds, np.log10(c)) if rng is None else rng.normal(np.log10(c), sd, seeds)
    return [int((np.log10(x) < own).sum()) for x in LRS]


def _verdict(ka: list[int], kb: list[int], n: int = 5, rule: Direction = RAISES) -> tuple[str, float | None]:
    e = ratio_effect(log_ratio(critical_lr(LRS, ka, [n] * 7), critical_lr(LRS, kb, [n] * 7)), n, n)
    return rule.verdict(e), rule.p(e)


def test_a_clear_shift_is_supported_its_reverse_contradicted_and_none_inconclusive() -> None:
    up, down = [5, 5, 5, 5, 3, 1, 0], [5, 4, 2, 0, 0, 0, 0]
    v, p = _verdict(up, down)
    assert v == SUPPORTED and p is not None and p < 0.05
    v, p = _verdict(down, up)
    assert v == CONTRADICTED and p is not None and p < 0.05
    v, p = _verdict(down, down)
    assert v == INCONCLUSIVE and p is not None and p >= 0.05


def test_a_censored_side_decides_alone_when_its_limit_clears_the_other_interval() -> None:
    every, low = [5] * 7, [5, 2, 0, 0, 0, 0, 0]
    e = ratio_effect(log_ratio(critical_lr(LRS, every, [5] * 7), critical_lr(LRS, low, [5] * 7)), 5, 5)
    assert e.estimate is None and e.lo is not None and e.lo > 0 and e.hi is None
    assert e.text().startswith("> ") and "censored" in e.text()
    assert RAISES.verdict(e) == SUPPORTED and RAISES.p(e) is None  # a bound, never a p-value
    assert Direction(-1).verdict(e) == CONTRADICTED
    # both censored on the same side: nothing is known, whatever the rule
    v, p = _verdict(every, every)
    assert v == INCONCLUSIVE and p is None
    # censored, but its 95% limit does not clear the other line's interval
    e2 = ratio_effect(log_ratio(critical_lr(LRS, every, [5] * 7), critical_lr(LRS, [5, 5, 5, 5, 3, 0, 0], [5] * 7)), 5, 5)
    assert e2.estimate is None and e2.lo is not None and e2.lo < 0
    assert RAISES.verdict(e2) == INCONCLUSIVE and RAISES.p(e2) is None


def test_too_few_seeds_is_inconclusive_even_when_censored() -> None:
    e = ratio_effect(log_ratio(critical_lr(LRS, [2] * 7, [2] * 7), critical_lr(LRS, [2, 0, 0, 0, 0, 0, 0], [2] * 7)), 2, 2)
    assert RAISES.verdict(e) == INCONCLUSIVE


def test_a_boundary_that_moves_with_seed_noise() -> None:
    """Each seed trains below its own threshold, spread 0.15 decades around the line's. A shift
    of 1.2 decades is seen in most draws; one of 0.6 (two lr steps) is never contradicted but
    mostly left inconclusive (5 seeds at lrs a factor 2 apart: each interval reaches an lr
    beyond the gap); no shift is rarely decided."""
    rng = np.random.default_rng(7)
    big = [_verdict(_sweep(8e-3, 5, rng, 0.15), _sweep(5e-4, 5, rng, 0.15))[0] for _ in range(40)]
    assert big.count(SUPPORTED) >= 34, big
    shifted = [_verdict(_sweep(4e-3, 5, rng, 0.15), _sweep(1e-3, 5, rng, 0.15))[0] for _ in range(40)]
    assert CONTRADICTED not in shifted and INCONCLUSIVE in shifted and SUPPORTED in shifted
    same = [_verdict(_sweep(2e-3, 5, rng, 0.15), _sweep(2e-3, 5, rng, 0.15))[0] for _ in range(40)]
    assert same.count(INCONCLUSIVE) >= 34, same
    # the noise does move the boundary: not every draw gives the same counts
    assert len({tuple(_sweep(2e-3, 5, rng, 0.15)) for _ in range(10)}) > 1


@pytest.mark.parametrize("est,lo,hi,ref_side", [(0.3, 0.1, 0.5, "lo"), (-0.3, -0.5, -0.1, "hi")])
def test_the_holm_p_is_below_005_exactly_when_the_interval_excludes_0(est: float, lo: float, hi: float,
                                                                     ref_side: str) -> None:
    from normlab.stats.frontier import LogRatio

    e = ratio_effect(LogRatio(est, lo, hi), 5, 5)
    assert RAISES.p(e) < 0.05
    edge = ratio_effect(LogRatio(est, 0.0 if ref_side == "lo" else lo, 0.0 if ref_side == "hi" else hi), 5, 5)
    assert RAISES.p(edge) == pytest.approx(0.05, abs=1e-9)


def test_tables_show_open_and_censored_intervals() -> None:
    """The claims table and a part's text show a side nothing bounds as an infinity, and a
    censored difference by its one known limit (neither may fail to format)."""
    from normlab.claims.output import effect_cell
    from normlab.stats.effects import Effect

    assert effect_cell({"estimate": 0.3, "lo": 0.1, "hi": None}) == "+0.3 [+0.1, +inf]"
    assert effect_cell({"estimate": -0.3, "lo": None, "hi": -0.1}) == "-0.3 [-inf, -0.1]"
    assert effect_cell({"estimate": None, "lo": 0.2, "hi": None}) == "> +0.2 (censored)"
    assert effect_cell({"estimate": None, "lo": None, "hi": -0.2}) == "< -0.2 (censored)"
    assert effect_cell({"estimate": None, "lo": None, "hi": None}) == "n/a"
    assert Effect(0.3, 0.1, None, 4, 4).text() == "+0.3 [+0.1, +inf], n 4/4"
    assert Effect(None, None, -0.2, 4, 4).text() == "< -0.2 (censored), n 4/4"
