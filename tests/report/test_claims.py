"""`normlab claims --quick`: every quick claim gets a verdict; seed 001's Post-LN gradient
direction comes out "not supported" with the measured layer trend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from normlab.claims.catalogue import CLAIMS, NOT_SUPPORTED
from normlab.claims.measure import rms_formulas


def test_seed_rms_formula_differs_from_rmsnorm() -> None:
    r = rms_formulas()
    for s, ours, seed in zip(r["scale"], r["rms_normlab"], r["rms_seed"]):
        assert ours == pytest.approx(1.0, rel=1e-3)          # RMS 1 at any scale (eps=1e-5 aside)
        assert seed == pytest.approx(1.0 / s, rel=1e-4)       # without the sqrt it scales as 1/s


@pytest.mark.slow
def test_quick_claims(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from normlab.cli import main

    assert main(["claims", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    data = json.loads((tmp_path / "claims.json").read_text())
    recs = {r["id"]: r for r in data["claims"]}
    quick = [c.id for _, c in CLAIMS.items() if c.quick]
    assert sorted(recs) == sorted(quick)
    for r in recs.values():
        assert r["verdict"] in ("supported", "not supported", "inconclusive")
        assert r["id"] in out and r["summary"]
        assert {"statement", "source", "experiment", "quantity", "rule"} <= r.keys()
    s001 = recs["seed001-lower-layers"]
    assert s001["verdict"] == NOT_SUPPORTED, s001["summary"]
    assert s001["numbers"]["spearman_at_L"] > 0.7  # the measured trend: rising toward the output
    assert "0.7" in s001["rule"] and "issue 5" in recs["xiong-thm1"]["rule"]  # rules from the source, stated
    assert recs["seed001-rms"]["verdict"] == NOT_SUPPORTED
    assert recs["deepnorm-constants"]["verdict"] == "supported"
    html = (tmp_path / "index.html").read_text()
    assert 'href="#fig-grad_per_layer"' in html and 'id="fig-grad_per_layer"' in html
