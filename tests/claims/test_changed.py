"""Which verdicts the campaign changed against the earlier runs (claims/changed.py), on synthetic
claims.json files: a part whose horizon and verdict moved, a part added, a change made by the
catalogue's Holm alone, and a claim that kept its verdict (not listed)."""

from __future__ import annotations

import json
from pathlib import Path

from normlab.claims.changed import changes
from normlab.claims.family import catalogue_family
from normlab.claims.holm import adjust, holm_verdicts

RULE = {"kind": "direction", "sign": 1, "ref": 0.0}


def _part(pid: str, verdict: str, p: float | None, n: int = 4, **extra: object) -> dict:
    return {"id": pid, "p": p, "verdict": verdict, "rule_verdict": verdict, "departures": [], "rule": RULE,
            "quantity": "q", "effect": {"estimate": 1.0, "n_a": n, "n_b": n}, **extra}


def _regime(**lab: str) -> dict:
    return {"factors": [{"factor": k, "lab": v, "matters": True} for k, v in lab.items()]
            + [{"factor": "ignored", "lab": "x", "matters": False}]}


def _write(folder: Path, claims: dict[str, list[dict]], regimes: dict[str, dict] | None = None,
           written_at: str = "") -> None:
    from normlab.claims.claim import claim_verdict
    from normlab.claims.regime import scoped

    records = [{"id": cid, "verdict": scoped(*claim_verdict(parts)), "parts": parts,
                "regime": (regimes or {}).get(cid, {})} for cid, parts in claims.items()]
    adjust(records)
    holm_verdicts(records)
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"mode": "confirmatory", **({"written_at": written_at} if written_at else {})}
    (folder / "claims.json").write_text(json.dumps({"meta": meta, "claims": records}))


def test_changes_name_what_differs(tmp_path: Path) -> None:
    _write(tmp_path, {"moved": [_part("a", "inconclusive", 0.3, horizon=200)],
                      "kept": [_part("a", "supported", 1e-9, horizon=200)],
                      "adjusted": [_part("a", "contradicted", 1e-9, horizon=200)]},
           {"moved": _regime(init="gpt2", width="d = 64")})
    _write(tmp_path / "campaign" / "s", {
        "moved": [_part("a", "supported", 1e-9, n=6, horizon=400, settled_at=400, settle_status="settled"),
                  _part("b", "supported", 1e-9)],
        "kept": [_part("a", "supported", 1e-9, horizon=200)],
        # p 0.01 would pass alone; one Holm over the catalogue's 14 p-values asks 0.05 / 10 of it
        "adjusted": [_part("a", "supported", 0.01, horizon=200)] + [_part(f"f{i}", "inconclusive", 0.9)
                                                                     for i in range(8)]},
        {"moved": _regime(init="xavier", steps="400 steps")})
    found = {c.claim: c for c in changes(catalogue_family(tmp_path), "campaign")}
    assert set(found) == {"moved", "adjusted"}  # "kept" reads supported on both sides
    moved = found["moved"]
    assert moved.earlier == [(".", "inconclusive")] and moved.campaign == [("campaign/s", "supported")]
    assert "s: added b" in moved.why
    assert "s: a: inconclusive -> supported (step 200 -> settled at step 400, seeds 4/4 -> 6/6)" in moved.why
    adjusted = found["adjusted"]
    assert moved.why[:3] == ["s: init: gpt2 -> xavier", "s: steps: 400 steps (not in the earlier regime)",
                             "s: width: d = 64 (no longer in the regime)"]
    assert adjusted.campaign == [("campaign/s", "inconclusive")]
    assert "s: a: contradicted -> inconclusive (supported before the catalogue's Holm)" in adjusted.why


def test_nothing_changed_lists_nothing(tmp_path: Path) -> None:
    _write(tmp_path, {"c": [_part("a", "supported", 1e-9)]})
    _write(tmp_path / "campaign" / "s", {"c": [_part("a", "supported", 1e-9)]})
    assert changes(catalogue_family(tmp_path), "campaign") == []


def test_the_campaign_page_lists_the_changes(tmp_path: Path) -> None:
    from normlab.claims.campaign_page import page
    from normlab.claims.campaign_plan import load_plan

    evidence = tmp_path / "evidence"
    folder = evidence / "campaign"
    folder.mkdir(parents=True)
    (folder / "plan.toml").write_text('name = "c"\nscale = "cpu"\nbudget_core_hours = 1\nfirst_seed = 9000\n[[stage]]\n'
                                      'name = "s"\nregistration = "registration/s.json"\nclaims = ["xiong-thm1"]\n'
                                      'estimate_core_hours = 0.5\n')
    _write(evidence, {"c": [_part("a", "inconclusive", 0.3, horizon=200)]})
    _write(folder / "s", {"c": [_part("a", "supported", 1e-9, horizon=400, settled_at=400, settle_status="settled")]})
    text = page(load_plan(folder / "plan.toml"))
    assert "## Verdicts that changed against the earlier runs" in text
    assert ("| `c` | run 1: inconclusive | s: supported | s: a: inconclusive -> supported (step 200 -> settled at "
            "step 400) |") in text


def test_a_second_campaign_reads_against_the_latest_run_before_it_and_its_descriptive_parts_move_nothing(
        tmp_path: Path) -> None:
    """Campaign 2 compares each claim with its latest reading before campaign 2 began (campaign
    1's stage), not with a run published after it began; a part it registered as descriptive is
    named as such, and a claim with only descriptive parts has no verdict to change."""
    _write(tmp_path / "campaign" / "s", {"c": [_part("a", "inconclusive", 0.3), _part("b", "supported", 1e-9)],
                                         "d": [_part("a", "inconclusive", 0.4)],
                                         "e": [_part("a", "supported", 1e-9)]}, written_at="2026-12-06T10:00:00Z")
    desc = {**_part("a", "descriptive", None), "descriptive": True}
    _write(tmp_path / "campaign-2" / "s", {"c": [desc, _part("b", "supported", 1e-9)], "d": [dict(desc)],
                                           "e": [_part("a", "supported", 1e-9)]}, written_at="2026-12-06T20:00:00Z")
    _write(tmp_path / "late", {"e": [_part("a", "contradicted", 1e-9)]}, written_at="2026-12-06T21:00:00Z")
    found = {c.claim: c for c in changes(catalogue_family(tmp_path), "campaign-2")}
    assert set(found) == {"c"}  # d: descriptive, no verdict; e: the later run is not "earlier"
    assert found["c"].earlier == [("campaign/s", "inconclusive")]
    assert found["c"].why == ["s: a: registered as descriptive (was inconclusive), so the claim rests on its other parts"]
