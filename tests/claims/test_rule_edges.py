"""Edges the type check found: an effect with an interval but no t statistics, a missing log Z,
and Holm's adjustment around missing p-values."""

from __future__ import annotations

import pytest

from normlab.claims.rules import SUPPORTED, Within
from normlab.claims.training_statistics import _dist
from normlab.stats import Effect, holm


def test_within_without_a_t_interval_has_no_evidence_p_value() -> None:
    e = Effect(0.1, 0.0, 0.2, n_a=5, method="bootstrap")  # an interval, but no se and df
    rule = Within(-1.0, 1.0)
    assert rule.verdict(e) == SUPPORTED and rule.p(e) == 1.0


def test_distance_of_a_missing_value_is_missing() -> None:
    assert _dist(None) is None and _dist(1.5, None) is None
    assert _dist(-2.0) == 2.0 and _dist(1.0, 3.5) == 2.5


def test_holm_leaves_missing_p_values_out() -> None:
    out = holm([0.04, None, 0.01, 0.03])
    assert out[1] is None
    assert out == pytest.approx([0.06, None, 0.03, 0.06])  # 0.01 x 3, max(0.03 x 2, .), max(0.04 x 1, 0.06)
