"""Design (power) analysis (claims/design.py, claims/design_frontier.py): the smallest effect a
part's rule detects with 80% power, and the one-line refusal of a part that cannot decide."""

from __future__ import annotations

import math

import pytest

from normlab.claims.design import mean_design, rate_design, require_decidable
from normlab.claims.design_frontier import Arm, bracket_problem, censored_text, frontier_design
from normlab.claims.rules import Direction, Outside, Within
from normlab.core.errors import UserError
from normlab.stats.effects import Effect


def _nct_detectable(n: int, sd: float) -> float:
    """The one-sample t test's effect with 80% power at two-sided 0.05 (noncentral t): the
    textbook answer the simulation must reproduce."""
    from scipy import optimize, stats

    q = stats.t.isf(0.025, n - 1)
    return optimize.brentq(lambda d: stats.nct.sf(q, n - 1, d * math.sqrt(n) / sd) - 0.8, 1e-6, 10 * sd)


def test_a_mean_detects_what_the_noncentral_t_says() -> None:
    d = mean_design("x/slope", Direction(+1, 0.0), 5, 1.0, effect=1.0, sims=4000)
    assert d.decidable and d.detectable == pytest.approx(_nct_detectable(5, 1.0), rel=0.05)
    assert d.power is not None and 0.3 < d.power < 0.8  # below the detectable effect
    below = mean_design("x/slope", Direction(-1, 0.2), 5, 1.0, sims=4000)
    assert below.detectable == pytest.approx(0.2 - _nct_detectable(5, 1.0), rel=0.05)
    assert d.text().startswith("x/slope: 5 seeds: detects +1.")


def test_a_welch_difference_needs_more_with_fewer_seeds() -> None:
    few = mean_design("x/diff", Direction(+1), 3, 0.1, 3, 0.1, sims=1000)
    many = mean_design("x/diff", Direction(+1), 8, 0.1, 8, 0.1, sims=1000)
    assert few.detectable is not None and many.detectable is not None and few.detectable > 2 * many.detectable


def test_an_equivalence_margin_too_narrow_for_the_seeds_is_refused() -> None:
    # seed 002's "negligible": +-0.05 nats with 6 seeds a side; per-seed spread 0.08 cannot show it
    d = mean_design("seed002-post-shallow-long/negligible", Within(-0.05, 0.05), 6, 0.08, 6, 0.08, sims=1000,
                    unit="nats")
    assert not d.decidable
    with pytest.raises(UserError) as err:
        require_decidable(d)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("seed002-post-shallow-long/negligible: cannot decide at the planned design")
    assert "no true value gives the rule's verdict 80% power" in msg
    ok = mean_design("x/negligible", Within(-0.05, 0.05), 6, 0.01, 6, 0.01, sims=1000)
    assert ok.decidable and ok.detectable is not None and 0.0 < ok.detectable < 0.05
    require_decidable(ok)


def test_outside_reports_the_nearest_truth_it_shows() -> None:
    d = mean_design("x/depends", Outside(-0.05, 0.05), 5, 0.02, sims=1000)
    assert d.detectable is not None and d.detectable > 0.05


def test_fewer_than_three_seeds_can_never_decide() -> None:
    d = mean_design("x/p", Direction(+1), 2, 1.0)
    assert not d.decidable and "fewer than 3 seeds a side" in d.text()


def test_most_runs_needs_six_of_six() -> None:
    # "most runs" (a rate above 1/2): 4 of 4 has the exact lower limit 0.40, never above 1/2
    four = rate_design("seed002-pet-project/post-fails", Direction(+1, 0.5), 4)
    assert not four.decidable and "no true value gives the rule's verdict 80% power (at best 0%)" in four.text()
    six = rate_design("seed002-pet-project/post-fails", Direction(+1, 0.5), 6, effect=0.9)
    assert six.decidable and six.detectable == pytest.approx(0.8 ** (1 / 6), abs=2e-3)  # only 6 of 6 decides
    assert six.power == pytest.approx(0.9**6, rel=1e-6)


def test_a_difference_of_rates_is_exact() -> None:
    d = rate_design("warmup-post/trains", Direction(+1), 4, 4, p_b=0.0, effect=1.0, grid=100)
    assert d.decidable and d.detectable is not None and 0.3 < d.detectable < 1.0
    assert d.power == pytest.approx(1.0)  # 4 of 4 against 0 of 4, surely: [0.26, 1]
    with pytest.raises(ValueError, match="p_b"):
        rate_design("x", Direction(+1), 4, 4)


PILOT = (5e-4, 1e-3, 2e-3, 3e-3, 6e-3, 1.2e-2)  # the map's lrs and frontier-ends', 4 seeds each


def test_a_grid_that_stops_short_of_the_boundary_is_refused_in_one_line() -> None:
    # frontier-placement at 6 blocks: Pre-LN trains at every lr up to 1.2e-2 (its boundary above
    # the grid, say 3e-2), Post-LN's lies between 3e-3 and 6e-3: the difference's 95% bound can
    # reach -0.301 decades at best, whatever the data
    d = frontier_design("frontier-placement/L6-w0", Direction(+1), Arm("pre", PILOT, 4, 3e-2),
                        Arm("post", PILOT, 4, 4.2e-3))
    assert not d.decidable and d.best_bound == pytest.approx(-0.301, abs=1e-3)
    with pytest.raises(UserError) as err:
        require_decidable(d)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("frontier-placement/L6-w0: cannot decide at the planned design (pre: 6 lrs")
    assert "its 95% bound reaches at best -0.301 decades against the reference 0" in msg
    assert "pre's lrs end at 0.012, below its boundary 0.03: add lrs above it" in msg


def test_a_design_around_the_boundaries_at_1_5x_passes() -> None:
    pre, post = 3e-2, 4.2e-3
    a = Arm("pre", tuple(pre * 1.5 ** (k + 0.5) for k in range(-3, 3)), 4, pre)
    b = Arm("post", tuple(post * 1.5 ** (k + 0.5) for k in range(-3, 3)), 4, post)
    assert bracket_problem(a) == "" and bracket_problem(b) == ""
    d = frontier_design("frontier-placement/L6-w0", Direction(+1), a, b, sims=60)
    require_decidable(d)
    assert d.best_bound is not None and d.best_bound > 0
    assert d.detectable is not None and 0 < d.detectable < d.effect  # the expected +0.85 decades is detectable
    assert d.power is not None and d.power >= 0.8


def test_a_frontier_design_gives_its_chance_of_a_verdict_either_way() -> None:
    """``decides`` counts "contradicted" too: Pre-LN's boundary well below Post-LN's makes
    "Pre-LN's critical lr is higher" almost surely contradicted, with no power for "supported";
    boundaries a hair apart decide rarely either way."""
    def arm(name: str, boundary: float) -> Arm:  # one grid 1.5x apart spanning both boundaries
        return Arm(name, tuple(2e-4 * 1.5 ** k for k in range(16)), 4, boundary)

    lower = frontier_design("p/below", Direction(+1), arm("pre", 6e-4), arm("post", 4.2e-3), sims=60)
    assert lower.power is not None and lower.power < 0.05
    assert lower.decides is not None and lower.decides > 0.95 and lower.record()["decides"] == lower.decides
    close = frontier_design("p/close", Direction(+1), arm("pre", 4.4e-3), arm("post", 4.2e-3), sims=60)
    assert close.decides is not None and close.decides < 0.3 and close.power is not None and lower.decides > 0.3
    assert close.decides >= close.power

def test_brackets_name_what_is_missing() -> None:
    assert "censored in the pilot" in bracket_problem(Arm("pre", PILOT, 4, None))
    assert "a factor 2 apart" in bracket_problem(Arm("post", PILOT, 4, 4.2e-3))
    one_lr_above = Arm("post", (1e-3, 1.5e-3, 2.25e-3, 3.375e-3), 4, 3e-3)
    assert "1 lr of 4 seeds above its boundary: too few" in bracket_problem(one_lr_above)
    assert "start at" in bracket_problem(Arm("post", (1e-2, 1.5e-2), 4, 3e-3))


def test_a_censored_difference_is_a_bound_never_a_p_value() -> None:
    e = Effect(None, -0.301, None, 4, 4, method="censored")
    assert censored_text(e) == "> -0.301 decades (censored: a bound, no p-value)"
    assert censored_text(Effect(None, None, -0.4, 4, 4)) == "< -0.4 decades (censored: a bound, no p-value)"
    assert censored_text(Effect(0.1, 0.0, 0.2, 4, 4)) == Effect(0.1, 0.0, 0.2, 4, 4).text()
