"""`normlab claims --scale smoke` (the full, training path) on two claims: verdict objects are well
formed, the rule is stated, the studies land in OUT/stores/<study>, and a second call reuses the
store (no trial is trained again)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from normlab.claims.studies import Group, compare


def test_compare_rule_by_hand() -> None:
    a, b = Group([3.0, 3.2], 0, 2), Group([2.0, 2.2], 0, 2)
    how, d, s = compare(a, b)
    # means 3.1 and 2.1; both stds sqrt(0.02) = 0.1414, pooled 0.1414; 1.0 > 2 * 0.1414
    assert how == "larger" and d == pytest.approx(1.0) and s == pytest.approx(0.02 ** 0.5)
    assert compare(b, a)[0] == "smaller"
    assert compare(Group([2.0, 2.4], 0, 2), Group([2.1, 2.3], 0, 2))[0] == "same"  # d = 0 < 2s
    assert compare(Group([2.0], 0, 1), b)[0] == "unknown"  # one seed: no spread, never a verdict
    assert compare(Group([], 1, 1), b)[0] == "unknown"


def _mtimes(root: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime_ns for p in root.glob("stores/*/runs/*/summary.json")}


def test_full_claims_smoke_reuses_store(tmp_path: Path, data_dir: Path,  # noqa: ARG001 (skips without corpus)
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from normlab.cli import main
    from normlab.study.store import Store

    args = ["claims", "--scale", "smoke", "--out", str(tmp_path), "--only", "seed002-pet-project",
            "--only", "zloss-logz"]
    assert main(args) == 0
    out = capsys.readouterr().out
    recs = {r["id"]: r for r in json.loads((tmp_path / "claims.json").read_text())["claims"]}
    assert sorted(recs) == ["seed002-pet-project", "zloss-logz"]
    for r in recs.values():
        assert r["verdict"] in ("supported", "not supported", "inconclusive")
        assert r["quick"] is False and r["id"] in out
        assert r["rule"] and r["statement"] and r["source"] and r["summary"]
        assert "smoke" in r["spread"]                      # the scale is stated with the spread
    # smoke scale has one seed: no spread, so the rules that compare means cannot decide
    assert recs["seed002-pet-project"]["verdict"] == "inconclusive"
    nums = recs["seed002-pet-project"]["numbers"]["no_warmup"]
    assert nums["pre"]["seeds"] + nums["pre"]["diverged"] == 1 and nums["pre"]["std"] is None
    for study, n in (("pre-vs-post", 4), ("zloss", 2)):
        trials = Store(tmp_path / "stores" / study).trials()
        assert len(trials) == n and all(t.status in ("completed", "diverged") for t in trials)
    before = _mtimes(tmp_path)
    assert len(before) == 6
    assert main(args) == 0                                 # second call: everything cached
    assert _mtimes(tmp_path) == before
    again = {r["id"]: r for r in json.loads((tmp_path / "claims.json").read_text())["claims"]}
    assert again["seed002-pet-project"]["summary"] == recs["seed002-pet-project"]["summary"]
