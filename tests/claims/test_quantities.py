"""Issue 40, point 4: the parts that were re-read to measure their own sentence. Each reads what
its sentence says (the first sub-layer apart, the variance's slope, one effect scoped alike in
two claims), and the detectable effect its `why` states is what ``claims/design.py`` computes
for the planned seeds from the stated prior."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synthetic as S  # noqa: E402
import worlds as WD  # noqa: E402

from normlab.claims.claim import CLAIMS  # noqa: E402
from normlab.claims.design import Design, mean_design, rate_design  # noqa: E402
from normlab.claims.measure import empty  # noqa: E402


def _part(cid: str, pid: str) -> Any:
    return next(p for p in CLAIMS.get(cid).parts if p.id == pid)


# (claim, part, the design from the prior its why states, the number its why states)
DESIGNS: list[tuple[str, str, Callable[[Any], Design], float]] = [
    ("seed002-clipping", "vs-post", lambda r: mean_design("", r, 6, 0.05, 6, 0.05), -0.092),
    ("seed004-lr-sensitive", "explode", lambda r: rate_design("", r, 25, 25, p_b=0.05), 0.33),
    ("seed004-lr-sensitive", "init", lambda r: mean_design("", r, 4, 0.01, 4, 0.19), 0.45),
    ("liu-amplification", "post", lambda r: mean_design("", r, 5, 0.065), 0.04),
    ("liu-amplification", "pre", lambda r: mean_design("", r, 5, 0.065), 0.24),
    ("seed001-ln-amplifies", "small", lambda r: mean_design("", r, 5, 0.05), -0.084),
    ("seed001-ln-amplifies", "amplifies-first", lambda r: mean_design("", r, 5, 0.05), 0.084),
    ("seed001-ln-amplifies", "amplifies-later", lambda r: mean_design("", r, 5, 0.01), 0.017),
    ("seed004-post-ceiling", "ceiling", lambda r: mean_design("", r, 6, 0.015, 6, 0.015), -0.028),
    ("seed002-post-shallow-long", "negligible", lambda r: mean_design("", r, 6, 0.015, 6, 0.015), 0.023),
    ("seed002-post-vanish", "vanish", lambda r: mean_design("", r, 5, 0.2), -1.34),
]


@pytest.mark.parametrize(("cid", "pid", "design", "stated"), DESIGNS, ids=[f"{c}/{p}" for c, p, _, _ in DESIGNS])
def test_the_stated_detectable_effect_is_the_designs(cid: str, pid: str, design: Callable[[Any], Design],
                                                      stated: float) -> None:
    part = _part(cid, pid)
    d = design(part.rule)
    assert d.decidable and d.detectable is not None
    assert abs(abs(d.detectable) - abs(stated)) <= 0.006 * max(1.0, abs(stated)), (d.text(), stated)
    assert "80% power" in part.why and re.search(rf"{abs(stated):g}", part.why), part.why


def test_the_end_gap_is_one_effect_scoped_alike(tmp_path: Path) -> None:
    """seed002-post-shallow-long and seed004-post-ceiling: one quantity, one measurement, one
    scoping, at every scale."""
    a, b = _part("seed002-post-shallow-long", "negligible"), _part("seed004-post-ceiling", "ceiling")
    assert a.quantity == b.quantity
    ca, cb = CLAIMS.get("seed002-post-shallow-long"), CLAIMS.get("seed004-post-ceiling")
    for scale in ("smoke", "cpu", "gpu", "seed"):
        assert ca.regime.departures(scale, a.id, kind="training") == cb.regime.departures(scale, b.id, kind="training")
        assert "steps" in ca.regime.departures(scale, a.id, kind="training")  # 1000 steps is not where training ends
    ctx = S.FakeContext(tmp_path, WD.WORLDS["seed004-post-ceiling"]("S"))
    assert ca.measure(ctx)["negligible"].effect == cb.measure(ctx)["ceiling"].effect


def test_the_init_clause_is_seed002_init_sensitive_s_effect(tmp_path: Path) -> None:
    mine, theirs = _part("seed004-lr-sensitive", "init"), _part("seed002-init-sensitive", "post")
    assert (mine.quantity, mine.rule) == (theirs.quantity, theirs.rule)
    c4, c2 = CLAIMS.get("seed004-lr-sensitive"), CLAIMS.get("seed002-init-sensitive")
    for scale in ("cpu", "gpu"):
        assert c4.regime.departures(scale, "init", kind="training") == c2.regime.departures(scale, "post", kind="training")
    ctx = S.FakeContext(tmp_path, WD.seed004_lr_sensitive("S"))
    assert c4.measure(ctx)["init"].effect == c2.measure(ctx)["post"].effect


def _ln(first: float, later: float) -> Any:
    q = empty()
    def rows(s: int) -> list[dict[str, float]]:  # a seed's 32 sub-layers, a little apart from the other seeds'
        return [{"ratio": 0.005, "gain": first * (1 + 0.01 * s)}] + \
            [{"ratio": 0.005, "gain": later * (1 + 0.001 * s)}] * 31

    q.extra["ln_gain_gpt2"] = {"L": 16, "init": "gpt2", "post": [rows(s) for s in range(5)]}
    return q


def test_the_first_sub_layer_is_read_apart() -> None:
    """A gain of 35 at the first sub-layer and 0.99 at the others: the median over sub-layers (the
    earlier reading) says 'below 1'; the first sub-layer's part says what the first one does."""
    rec = CLAIMS.get("seed001-ln-amplifies").decide(_ln(35.0, 0.99))
    got = {p["id"]: p["rule_verdict"] for p in rec["parts"]}
    assert got == {"small": "supported", "amplifies-first": "supported", "amplifies-later": "contradicted"}


def _liu(power: float) -> Any:
    q = empty()
    depths = [2, 4, 8, 16, 32]
    run = {L: [{"change": 1e-3 * L ** (power + 0.01 * s)} for s in range(5)] for L in depths}
    q.extra["one_step_blocks"] = {"depths": depths, "post": run, "pre": run, "admin": run}
    return q


@pytest.mark.parametrize(("power", "post", "pre"), [(0.5, "supported", "contradicted"),
                                                    (1.0, "contradicted", "contradicted"),
                                                    (0.2, "contradicted", "supported")])
def test_liu_reads_the_variance_s_slope(power: float, post: str, pre: str) -> None:
    """A change whose variance grows like N has a norm slope of 1/2: supported; the slope 1 the
    earlier rule wanted is now outside the margin."""
    got = {p["id"]: p["rule_verdict"] for p in CLAIMS.get("liu-amplification").decide(_liu(power))["parts"]}
    assert got == {"post": post, "pre": pre, "admin": pre}
