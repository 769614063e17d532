"""Deciding a claim only reads its study store: a measurement a claim needs (layer deletion on
the final checkpoints) is written under the claims output, never into the runs it reads."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest


def _snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``root``: (sha256, mtime) by relative path. Nothing added, removed,
    changed or even rewritten with the same bytes goes unseen."""
    return {p.relative_to(root).as_posix(): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_deciding_a_claim_leaves_its_study_store_byte_identical(tmp_path: Path) -> None:
    from normlab.claims import run_claims
    from normlab.study.presets import study_preset
    from normlab.study.runner import run_study

    store_dir = tmp_path / "stores" / "collapse"
    run_study(study_preset("collapse", "smoke"), store_dir, workers=1, progress=False).close()
    before = _snapshot(store_dir)
    assert any(k.endswith("checkpoints/latest/model.safetensors") for k in before)  # real checkpoints to measure

    recs = run_claims(quick=False, out=tmp_path, only=["pre-collapse"], scale="smoke", train=False, cache=False)

    assert _snapshot(store_dir) == before
    deletion = next(p for p in recs[0]["parts"] if p["id"] == "deletion")
    assert deletion["effect"]["estimate"] is not None  # the deletion was measured, from the checkpoints
    # the deletion is measured on the pre runs (deletion part) and the lns runs (lns part, lns minus pre)
    lns = next(p for p in recs[0]["parts"] if p["id"] == "lns")
    assert set(deletion["trials"]) < set(lns["trials"])
    written = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "analysis").rglob("analysis.json"))
    assert all(w.startswith("analysis/collapse/") for w in written)
    assert sorted(w.split("/")[2] for w in written) == sorted(lns["trials"])
