"""`normlab claims --scale smoke` runs every training claim end to end on real (tiny) studies:
each claim produces parts with effects and intervals (2 seeds: inconclusive by rule), the
stores land in OUT/stores, and --no-train re-decides from them without training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from normlab.claims.claim import CLAIMS


@pytest.mark.slow
def test_every_training_claim_runs_at_smoke_scale(tmp_path: Path, data_dir: Path) -> None:  # noqa: ARG001
    import io

    from normlab.claims import run_claims
    from normlab.core.progress import plain
    from normlab.study.presets import study_preset

    ids = [c.id for _, c in CLAIMS.items() if not c.quick]
    buf = io.StringIO()
    with plain("claims", buf) as display:  # one display over every study of the run
        recs = run_claims(quick=False, out=tmp_path, only=ids, scale="smoke", workers=2, progress=display)
    studies = list(dict.fromkeys(n for i in ids for n in CLAIMS.get(i).studies))
    n = sum(len(study_preset(s, "smoke").trials()) for s in studies)
    lines = buf.getvalue().splitlines()
    assert lines[0] == f"claims: {len(studies)} studies at scale smoke: 0/{n} trials already in {tmp_path / 'stores'}, " \
                       f"{n} to train", lines
    assert lines[-1].startswith(f"claims: done {n}/{n} trials in "), lines
    assert sum(x.startswith("claims: study ") for x in lines) == len(studies)  # each study says what it found
    assert [r["id"] for r in recs] == ids
    for r in recs:
        # 2 seeds < 3: never decisive; but a rate pooled over cells counts runs, not seeds, and 6 or more runs
        # decide (seed001-pre-no-warmup: 12 smoke runs of 12 steps, none of which trains)
        pooled = [p["id"] for p in r["parts"] if p["effect"]["method"] == "clopper-pearson" and p["effect"]["n_a"] >= 6]
        assert r["verdict"] == "inconclusive" or pooled == [p["id"] for p in r["parts"]], r["id"]
        for p in r["parts"]:
            e = p["effect"]
            if "log10_ratio" in p["numbers"]:  # a critical lr: 12 steps train (almost) nothing: no line has its transition inside
                assert e["estimate"] is None and p["numbers"]["log10_ratio"]["censored"] and "censored" in p["note"], \
                    (r["id"], p["id"], e)
            elif "SpikeScore" in p["quantity"]:  # OLMo-core scores no step before its 128-step window: smoke runs are shorter
                assert e["estimate"] is None and e["n_a"] == 0, (r["id"], p["id"], e)
                continue  # (and no trial gave a value)
            elif "entropy_step" in p["numbers"]:  # seeds split by outcome: 12 steps leave none of them trained
                assert e["estimate"] is None and p["numbers"]["outcomes"]["trains"] == 0, (r["id"], p["id"], e)
                continue
            elif p["numbers"].get("left_out") and not e["n_a"]:  # runs still on the plateau are left out and named
                assert e["estimate"] is None, (r["id"], p["id"], e)
                continue
            else:
                assert e["estimate"] is not None and e["lo"] is not None and e["hi"] is not None, (r["id"], p["id"], e)
            assert p["trials"], (r["id"], p["id"])
    data = json.loads((tmp_path / "claims.json").read_text())
    assert data["meta"]["training_wall_s"] > 0 and set(data["meta"]["studies"]) == {
        "stability-map", "recipe-variants", "pre-vs-post", "lr-sensitivity", "zloss", "collapse", "frontier-bracket",
        "frontier-bracket-post6", "shallow-long", "new-methods", "pre-dropout", "deep-pre", "norm-vs-none", "attention-focus",
        "transfer-width-sp", "transfer-width-mup", "transfer-depth", "transfer-muon", "transfer-sharpness", "transfer-entropy"}
    # the map pages the evidence links
    assert data["meta"]["maps"] == ["maps/stability-map/index.html"]
    # each training part states its horizon (the runs' length), each map cell its outcomes at each horizon
    from normlab.study.presets import study_preset

    lengths = {study_preset(n, "smoke").base["train"]["steps"] for n in data["meta"]["studies"]}
    for r in data["claims"]:
        for p in r["parts"]:
            if not p["trials"]:  # no trial gave a value (above): no horizon to state
                assert p["horizon"] is None, (r["id"], p["id"])
                continue
            assert p["horizon"] in lengths or (isinstance(p["horizon"], list) and set(p["horizon"]) <= lengths), \
                (r["id"], p["id"], p["horizon"])
    cells = data["meta"]["map_outcomes"]["stability-map"]
    assert len(cells) == 72  # 6 placements x 3 lrs x 2 depths x 2 warm-ups
    for c in cells:
        assert list(c["outcomes"]) == ["12"] and len(c["left_plateau_at"]) == len(c["trial_ids"]) == 2
        assert sum(c["outcomes"]["12"].values()) == 2 and c["outcomes"]["12"]["unknown"] == 0
        assert all(s is None or 0 < s <= 12 for s in c["left_plateau_at"])
    assert (tmp_path / "maps" / "stability-map" / "index.html").is_file()
    assert 'href="maps/stability-map/index.html"' in (tmp_path / "index.html").read_text()
    stamp = {p: p.stat().st_mtime_ns for p in tmp_path.glob("stores/*/runs/*/summary.json")}
    again = run_claims(quick=False, out=tmp_path, only=ids, scale="smoke", train=False)
    assert [r["parts"] for r in again] == [r["parts"] for r in recs]
    assert {p: p.stat().st_mtime_ns for p in tmp_path.glob("stores/*/runs/*/summary.json")} == stamp
