"""Parts registered as descriptive (issue 40: a part whose design cannot decide at the level the
catalogue asks is redesigned, or registered as descriptive, with no verdict): the registration
accepts it and records it; the run measures it, gives it no verdict and no p-value, and derives
the claim's verdict from its other parts; no Holm family and no decided share counts it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gitrepo import commit, need_git, repo  # noqa: E402

from normlab.claims import campaign_plan, registration, run_claims  # noqa: E402
from normlab.claims.claim import CLAIMS, describe  # noqa: E402
from normlab.claims.design import mean_design  # noqa: E402
from normlab.claims.holm import adjust, holm_verdicts  # noqa: E402
from normlab.core.errors import ConfigError, UserError  # noqa: E402

QUICK = "xiong-thm1"  # parts pre and post


def _part(pid: str, verdict: str, p: float | None) -> dict[str, Any]:
    return {"id": pid, "verdict": verdict, "rule_verdict": verdict, "departures": [], "p": p,
            "effect": {"estimate": 0.1, "lo": 0.0, "hi": 0.2}}


def test_describe_takes_the_verdict_and_the_p_away_and_the_claim_rests_on_the_rest() -> None:
    records = [{"id": "c", "parts": [_part("a", "supported", 1e-6), _part("b", "contradicted", 1e-4)]},
               {"id": "d", "parts": [_part("only", "supported", 1e-3)]}]
    assert describe(records, {"c/b", "d/only"}) == 2
    a, b = records[0]["parts"]
    assert (b["verdict"], b["rule_verdict"], b["p"], b["descriptive"]) == ("descriptive", "descriptive", None, True)
    assert b["effect"] == {"estimate": 0.1, "lo": 0.0, "hi": 0.2}  # still measured and shown
    assert a["verdict"] == "supported" and "descriptive" not in a
    assert records[0]["verdict"] == "supported"  # was partly supported: b no longer counts
    assert records[1]["verdict"] == "descriptive"  # a claim of descriptive parts only has no verdict
    assert adjust(records) == 1  # the family: part a alone
    holm_verdicts(records)
    assert records[0]["verdict_holm"] == "supported" and records[1]["verdict_holm"] == "descriptive"
    assert b["holm_ok"] is None and b["p_holm"] is None


def test_an_undecidable_part_registers_as_descriptive_and_a_stray_name_lists_the_parts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    c = CLAIMS.get(QUICK)

    def design(claim: Any, scale: str) -> dict[str, Any]:  # pre: 3 seeds of sd 10, nothing detectable
        return {p.id: mean_design(f"{claim.id}/{p.id}", p.rule, 3, 10.0 if p.id == "pre" else 0.01, sims=200)
                for p in claim.parts}

    monkeypatch.setattr(c, "design", design)
    with pytest.raises(UserError, match=rf"^{QUICK}/pre: cannot decide.*register it as descriptive \(no verdict\)$"):
        registration.build("cpu", [QUICK])
    doc = registration.build("cpu", [QUICK], descriptive=[f"{QUICK}/pre"])
    parts = {p["id"]: p for p in doc["claims"][QUICK]["parts"]}
    assert parts["pre"]["descriptive"] is True and not parts["pre"]["design"]["decidable"]
    assert "descriptive" not in parts["post"]
    # the mark is not part of the rule: the rule hash is the one an unmarked registration has
    assert doc["claims"][QUICK]["rule_hash"] == c.rule_hash(None)
    with pytest.raises(UserError, match=rf"^descriptive: {QUICK}/nope is not a part of the chosen claims; "
                                        rf"valid: {QUICK}/pre, {QUICK}/post$"):
        registration.build("cpu", [QUICK], descriptive=[f"{QUICK}/nope"])


def test_a_registered_run_publishes_the_part_with_no_verdict(tmp_path: Path) -> None:
    need_git()
    root = repo(tmp_path / "lab")
    f = root / "registration.json"
    registration.write(f, registration.build("cpu", [QUICK], quick=True, quick_seeds=3, first_seed=40,
                                             descriptive=[f"{QUICK}/post"]))
    commit(root, f, int(time.time()) - 30)
    assert registration.load(f).descriptive() == {f"{QUICK}/post"}  # its hashes check out with the mark
    out = tmp_path / "out"
    run_claims(quick=True, out=out, only=[QUICK], registration=f, seeds=3, depths=[2, 4], d_model=32)
    data = json.loads((out / "claims.json").read_text())
    rec = data["claims"][0]
    parts = {p["id"]: p for p in rec["parts"]}
    assert parts["post"]["verdict"] == "descriptive" and parts["post"]["p"] is None
    assert parts["post"]["effect"]["estimate"] is not None and parts["post"]["trials"]  # measured
    assert parts["pre"]["verdict"] != "descriptive" and parts["pre"]["p"] is not None
    assert rec["verdict"] == parts["pre"]["verdict"]  # the claim rests on pre alone
    assert data["meta"]["family_size"] == 1
    assert "descriptive" in (out / "claims.md").read_text()


def test_a_plan_stage_names_its_descriptive_parts_or_fails_listing_them(tmp_path: Path) -> None:
    def plan(descriptive: Any) -> Path:
        p = tmp_path / "plan.toml"
        p.write_text(f'name = "c"\nscale = "cpu"\nfirst_seed = 9000\nbudget_core_hours = 1\nworkers = 1\n'
                     f'[[stage]]\nname = "s"\nregistration = "registration/s.json"\nclaims = ["seed002-dropout"]\n'
                     f'descriptive = {json.dumps(descriptive)}\n')
        return p

    loaded = campaign_plan.load_plan(plan(["seed002-dropout/trains"]))
    assert loaded.stages[0].descriptive == ["seed002-dropout/trains"]
    from normlab.claims.campaign_page import page  # the page names them before any data

    assert "Registered as descriptive (measured, no verdict, no p-value): `seed002-dropout/trains`." in page(loaded)
    with pytest.raises(ConfigError) as e:
        campaign_plan.load_plan(plan(["seed002-dropout/faster"]))
    assert e.value.field == "stage[0].descriptive" and "valid: seed002-dropout/trains, seed002-dropout/not-spikier" \
        in str(e.value)
    with pytest.raises(ConfigError, match="stage\\[0\\].descriptive"):
        campaign_plan.load_plan(plan("seed002-dropout/trains"))


def test_a_descriptive_part_holds_no_look_open(tmp_path: Path) -> None:
    from normlab.claims.sequential_stage import run_looks
    from normlab.stats.sequential import SeedPlan

    calls: list[dict[str, int]] = []

    def run_at(counts: dict[str, int]) -> None:  # a record as a run writes it (tables and page drawn from it)
        calls.append(counts)
        n = counts["s"]
        part = {**_part("d", "descriptive", None), "descriptive": True, "rule": {"kind": "direction", "sign": 1,
                "ref": 0.0}, "rule_text": "above 0", "effect": {"estimate": 0.1, "lo": 0.0, "hi": 0.2, "n_a": n,
                "values_a": [0.1] * n, "values_b": [0.0] * n,
                "n_b": n, "method": "welch"}, "effect_text": "+0.1 [0, +0.2]", "quantity": "q", "asserts": "a",
                "why": "", "note": "", "trials": []}
        rec = {"id": "c", "verdict": "descriptive", "statement": "c", "source": "s", "studies": ["s"],
               "experiment": "e", "settings": "s", "regime": [], "rule_hash": "h", "code_hash": "c", "parts": [part],
               "effect_figure": "claim-c"}
        (tmp_path / "claims.json").write_text(json.dumps({"meta": {"mode": "confirmatory"}, "claims": [rec]}))

    doc = run_looks(tmp_path, SeedPlan((4, 6, 8), 0.05), {"c": ["s"]}, run_at)
    assert calls == [{"s": 4}]  # read at the first look; no seeds added for it
    seq = doc["claims"][0]["parts"][0]["sequential"]
    assert seq["text"] == "registered as descriptive: read at the first look (4 seeds), no verdict"
    assert seq["decided"] is False
    assert doc["claims"][0]["parts"][0]["verdict"] == "descriptive" and doc["claims"][0]["verdict"] == "descriptive"


def test_the_catalogue_family_and_the_decided_share_leave_a_descriptive_part_out(tmp_path: Path) -> None:
    from normlab.claims.decided import readout, share
    from normlab.claims.family import catalogue_family

    eff = {"estimate": 1.0, "lo": 0.9, "hi": 1.1, "n_a": 8, "n_b": 8, "se": 0.04, "df": 14.0}
    parts = [{**_part("strong", "supported", 1e-9), "effect": eff, "rule": {"kind": "direction", "sign": 1, "ref": 0}},
             {**_part("near", "inconclusive", 0.3), "effect": eff, "rule": {"kind": "direction", "sign": 1, "ref": 0}}]
    records = [{"id": "c", "parts": parts}]
    describe(records, {"c/near"})
    adjust(records)
    holm_verdicts(records)
    folder = tmp_path / "campaign-2" / "s"
    folder.mkdir(parents=True)
    (folder / "claims.json").write_text(json.dumps({"meta": {"mode": "confirmatory"}, "claims": records}))
    fam = catalogue_family(tmp_path)
    assert fam.size == 1  # only the decisive part's p
    rows = readout(fam, ["campaign-2/s"])
    assert [r.part for r in rows] == ["strong"] and rows[0].decided
    assert share(rows).startswith("1 of 1 registered parts decided after the catalogue's adjustment (100%")


def test_a_descriptive_parts_sequential_sentence_comes_from_its_mark() -> None:
    """A stage composed before the mark was read by compose wrote "undecided ... add seeds": the
    page derives the sentence from the mark instead, so it says only what its rules did."""
    from normlab.claims.sequential_stage import text

    old = {"descriptive": True, "sequential": {"stopped_at": 5, "text": "undecided at 5 seeds: add seeds up to 8"}}
    assert text(old) == "registered as descriptive: read at the first look (5 seeds), no verdict"
    assert text({"sequential": {"stopped_at": 8, "text": "decided at 8 seeds"}}) == "decided at 8 seeds"
    assert text({}) is None
