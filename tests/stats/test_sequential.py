"""Group-sequential seeds (stats/sequential.py): the boundaries against published tables, and a
plan's looks in every outcome."""

from __future__ import annotations

import pytest

from normlab.core.errors import ConfigError
from normlab.stats.sequential import SeedPlan, obf_boundaries, obf_classic, obf_spent

# Lan-DeMets O'Brien-Fleming-type spending (Lan & DeMets 1983: a(t) = 2 - 2 Phi(z_{a/2} / sqrt(t))
# on each side, a = 0.025), two-sided alpha 0.05, K equally spaced looks: the boundaries as
# tabulated for this function (gsDesign's sfLDOF at one-sided 0.025; ldbounds, iuse = 1; Reboussin,
# DeMets, Kim & Lan 2000), e.g. K = 5: 4.877, 3.357, 2.680, 2.290, 2.031.
LAN_DEMETS = {2: (2.963, 1.969), 3: (3.710, 2.511, 1.993), 4: (4.333, 2.963, 2.359, 2.014),
              5: (4.877, 3.357, 2.680, 2.290, 2.031)}
# O'Brien & Fleming's (1979) own boundaries C sqrt(K / k), two-sided 0.05: C = 1.977, 2.004,
# 2.024, 2.040 for K = 2..5 (Jennison & Turnbull 2000, Table 2.3). Not a spending function: they
# check the multivariate normal integrals on a second published table.
CLASSIC = {2: (2.797, 1.977), 3: (3.471, 2.454, 2.004), 4: (4.049, 2.863, 2.337, 2.024),
           5: (4.562, 3.226, 2.634, 2.281, 2.040)}


@pytest.mark.parametrize("k", sorted(LAN_DEMETS))
def test_lan_demets_boundaries_match_the_published_table(k: int) -> None:
    got = obf_boundaries(tuple((i + 1) / k for i in range(k)))
    assert got == pytest.approx(LAN_DEMETS[k], abs=0.006)


@pytest.mark.parametrize("k", sorted(CLASSIC))
def test_classic_obrien_fleming_boundaries_match_the_published_table(k: int) -> None:
    assert obf_classic(k) == pytest.approx(CLASSIC[k], abs=0.006)


def test_the_spending_function_spends_alpha_by_the_end_and_little_early() -> None:
    assert obf_spent(1.0) == pytest.approx(0.05)
    assert obf_spent(0.25) < 1e-4 < obf_spent(0.5) < obf_spent(0.75) < 0.05


def test_a_single_look_is_the_fixed_test() -> None:
    assert SeedPlan((6,)).boundaries() == pytest.approx((1.959964,), abs=1e-6)


PLAN = SeedPlan((4, 6, 8))


def test_a_plan_states_its_levels() -> None:
    levels = PLAN.nominal()
    assert levels[0] < levels[1] < levels[2] < 0.05 and levels[2] > 0.04
    assert PLAN.fractions() == (0.5, 0.75, 1.0)
    assert PLAN.spec() == {"looks": [4, 6, 8], "alpha": 0.05, "spending": "Lan-DeMets O'Brien-Fleming"}
    assert PLAN.text().startswith("looks at 4 seeds: p < 0.00")


def test_a_look_decides_only_below_its_level() -> None:
    early = PLAN.nominal()[0]
    done = PLAN.look(4, "supported", early / 2)
    assert done.stop and done.verdict == "supported" and done.next_seeds is None
    assert done.text().startswith("decided at 4 seeds: supported")
    # decisive at 0.05 but not at the first look's level: add seeds
    more = PLAN.look(4, "supported", 0.01)
    assert not more.stop and more.verdict == "inconclusive" and more.next_seeds == 6
    assert more.text().endswith("add seeds up to 6")
    assert PLAN.look(6, "inconclusive", 0.3).next_seeds == 8


def test_the_last_look_stops_undecided_naming_the_limit() -> None:
    last = PLAN.look(8, "contradicted", 0.049)  # above the last look's level (about 0.042)
    assert last.stop and last.verdict == "inconclusive" and last.next_seeds is None
    assert "registered maximum of 8 seeds" in last.text() and "limited by seeds" in last.text()
    assert PLAN.look(8, "contradicted", 0.01).verdict == "contradicted"


def test_bad_plans_and_looks_name_the_option() -> None:
    with pytest.raises(ConfigError, match=r"sequential\.looks=\[6, 4\]"):
        SeedPlan((6, 4))
    with pytest.raises(ConfigError, match=r"sequential\.looks=\[2, 4\]"):
        SeedPlan((2, 4))
    with pytest.raises(ConfigError, match=r"sequential\.alpha=1\.5"):
        SeedPlan((4, 8), alpha=1.5)
    with pytest.raises(ConfigError, match=r"sequential\.seeds=5: is not a registered look; looks: 4, 6, 8"):
        PLAN.look(5, "supported", 0.001)


def test_weighted_looks_share_alpha_in_the_spending_functions_shape() -> None:
    w = PLAN.weights()
    assert sum(w) == pytest.approx(1.0) and w[0] < w[1] < w[2]
    spent = [obf_spent(t) for t in PLAN.fractions()]  # the shares are the spending function's increments
    assert [w[0], w[0] + w[1]] == pytest.approx([spent[0] / 0.05, spent[1] / 0.05])
    small = SeedPlan((4, 6, 8), alpha=2.5e-4)  # at a catalogue's level the first look keeps almost nothing
    assert small.weights()[0] < 1e-3 < small.weights()[2]
    assert SeedPlan((6,)).weights() == pytest.approx((1.0,))


def test_a_weighted_look_stops_below_its_share_and_the_p_value_combines_them() -> None:
    w = PLAN.weights()
    assert PLAN.weighted_look(4, "supported", 0.9 * w[0] * 0.05).stop
    go_on = PLAN.weighted_look(4, "supported", 1.1 * w[0] * 0.05)
    assert not go_on.stop and go_on.next_seeds == 6 and go_on.nominal == pytest.approx(w[0] * 0.05)
    assert not PLAN.weighted_look(6, "inconclusive", 1e-9).stop  # the rule must be decisive
    assert PLAN.weighted_look(8, "supported", 0.9).stop  # the maximum: stops undecided
    assert PLAN.combined_p({4: 0.01, 6: 0.004}) == pytest.approx(min(0.01 / w[0], 0.004 / w[1]))
    assert PLAN.combined_p({4: None, 6: 0.5}) == 1.0 and PLAN.combined_p({4: None}) is None
    with pytest.raises(ConfigError, match=r"sequential\.seeds=5"):
        PLAN.combined_p({5: 0.01})


def test_the_combined_p_value_is_valid_under_optional_stopping() -> None:
    # under the null, seeds added while the part is undecided (the campaign's stopping), the
    # combined p is at most x with probability at most x: the Welch t test on nested seeds
    import numpy as np
    from scipy import stats

    rng = np.random.default_rng(5)
    plan = SeedPlan((4, 6, 8), alpha=0.05)
    hits = {0.05: 0, 0.01: 0}
    sims = 4000
    for _ in range(sims):
        a, b = rng.normal(size=8), rng.normal(size=8)
        ps: dict[int, float | None] = {}
        for n in plan.looks:
            p = float(stats.ttest_ind(a[:n], b[:n], equal_var=False).pvalue)
            ps[n] = p
            if plan.weighted_look(n, "supported" if p < 0.05 else "inconclusive", p).stop:
                break
        got = plan.combined_p(ps)
        for x in hits:
            hits[x] += got is not None and got <= x
    assert hits[0.05] / sims <= 0.05 + 2 * (0.05 * 0.95 / sims) ** 0.5
    assert hits[0.01] / sims <= 0.01 + 2 * (0.01 * 0.99 / sims) ** 0.5
    assert hits[0.05] / sims > 0.02  # not vacuous: most of alpha is used
