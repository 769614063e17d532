"""A campaign stage whose seeds come in group-sequential looks (claims/sequential_stage.py): its
plan checked naming the key, its registration holding the largest look's seeds and the design,
seeds added only to the studies an open part reads, the composed claims.json (each part where it
stopped, the combined p), a rerun replaying the kept looks, and the whole stage through the
campaign runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from normlab.claims import campaign, campaign_plan, sequential_stage
from normlab.claims.sequential_stage import LOOKS, parse, registered, run_looks, spec
from normlab.core.errors import ConfigError, UserError
from normlab.stats.sequential import SeedPlan

SP = SeedPlan((4, 6, 8), alpha=0.05)
W = SP.weights()
# per claim: its study, the rule's verdict and p at each look's seed count
WORLD = {"strong": ("s1", "supported", {4: 1e-6, 6: 1e-7, 8: 1e-8}),       # stops at the first look
         "medium": ("s2", "supported", {4: 0.01, 6: 0.001, 8: 1e-4}),      # above 4's share, below 6's
         "null": ("s3", "inconclusive", {4: 0.5, 6: 0.6, 8: 0.4})}         # open to the maximum


def _record(claim: str, n: int) -> dict[str, Any]:
    study, verdict, ps = WORLD[claim]
    part = {"id": "a", "verdict": verdict, "rule_verdict": verdict, "departures": [], "p": ps[n],
            "rule": {"kind": "direction", "sign": 1, "ref": 0.0}, "rule_text": "above 0",
            "effect": {"estimate": 1.0, "lo": 0.5, "hi": 1.5, "n_a": n, "n_b": n, "method": "welch",
                       "values_a": [1.0] * n, "values_b": [0.0] * n}, "effect_text": f"+1 [+0.5, +1.5], n {n}/{n}",
            "quantity": "q", "asserts": "a", "why": "", "note": "", "trials": []}
    return {"id": claim, "verdict": verdict, "statement": claim, "source": "s", "studies": [study],
            "experiment": "e", "settings": "s", "regime": [], "effect_figure": f"claim-{claim}",
            "rule_hash": "h", "code_hash": "c", "parts": [part]}


def _fake(calls: list[dict[str, int]], out: Path) -> Any:
    def run_at(counts: dict[str, int]) -> None:
        calls.append(counts)
        recs = [_record(c, counts[WORLD[c][0]]) for c in WORLD]
        out.mkdir(parents=True, exist_ok=True)
        meta = {"mode": "confirmatory", "seeds": {WORLD[c][0]: list(range(counts[WORLD[c][0]])) for c in WORLD}}
        (out / "claims.json").write_text(json.dumps({"meta": meta, "claims": recs}))
    return run_at


def test_seeds_go_only_where_a_part_is_open_and_the_parts_compose(tmp_path: Path) -> None:
    calls: list[dict[str, int]] = []
    studies = {c: [WORLD[c][0]] for c in WORLD}
    doc = run_looks(tmp_path, SP, studies, _fake(calls, tmp_path))
    assert calls == [{"s1": 4, "s2": 4, "s3": 4}, {"s1": 4, "s2": 6, "s3": 6}, {"s1": 4, "s2": 6, "s3": 8}]
    parts = {r["id"]: r["parts"][0] for r in doc["claims"]}
    assert parts["strong"]["sequential"]["stopped_at"] == 4 and parts["strong"]["effect"]["n_a"] == 4
    assert parts["strong"]["p"] == pytest.approx(1e-6 / W[0]) and parts["strong"]["sequential"]["decided"]
    assert parts["medium"]["sequential"]["stopped_at"] == 6 and parts["medium"]["p_look"] == 0.001
    assert parts["medium"]["p"] == pytest.approx(min(0.01 / W[0], 0.001 / W[1]))
    assert parts["medium"]["sequential"]["p_by_look"] == {"4": 0.01, "6": 0.001}
    assert parts["null"]["sequential"]["stopped_at"] == 8 and not parts["null"]["sequential"]["decided"]
    assert parts["null"]["p"] == pytest.approx(0.4 / W[2]) and "registered maximum of 8 seeds" in parts["null"]["sequential"]["text"]
    assert doc["meta"]["sequential"]["looks"] == [4, 6, 8] and doc["meta"]["family_size"] == 3
    written = json.loads((tmp_path / "claims.json").read_text())
    assert written["claims"][0]["parts"][0]["sequential"]["stopped_at"] == 4  # OUT/claims.json is the composed one
    assert (tmp_path / "index.html").exists() and (tmp_path / "claims.md").exists()
    assert sorted(p.name for p in (tmp_path / LOOKS).iterdir()) == ["4", "6", "8"]
    # started again: every look is replayed from its kept claims.json, nothing runs
    again: list[dict[str, int]] = []
    assert run_looks(tmp_path, SP, studies, _fake(again, tmp_path))["claims"] == doc["claims"]
    assert again == []


def test_a_stage_where_every_part_stops_early_runs_one_look(tmp_path: Path) -> None:
    calls: list[dict[str, int]] = []
    world = {"strong": WORLD["strong"]}
    run_at = _fake(calls, tmp_path)

    def only_strong(counts: dict[str, int]) -> None:
        run_at({**counts, "s2": 4, "s3": 4})
        data = json.loads((tmp_path / "claims.json").read_text())
        data["claims"] = [r for r in data["claims"] if r["id"] in world]
        (tmp_path / "claims.json").write_text(json.dumps(data))
    doc = run_looks(tmp_path, SP, {"strong": ["s1"]}, only_strong)
    assert len(calls) == 1 and doc["claims"][0]["verdict_holm"] == "supported"


def test_a_damaged_look_names_its_file_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / LOOKS / "4").mkdir(parents=True)
    (tmp_path / LOOKS / "4" / "claims.json").write_text("{not json")
    with pytest.raises(UserError, match=r"looks/4/claims.json: cannot read .*delete it and run the stage again"):
        run_looks(tmp_path, SP, {"strong": ["s1"]}, _fake([], tmp_path))


@pytest.mark.parametrize("table, field", [
    ("[1, 2]", "stage[0].sequential"),
    ({"looks": [4, 6], "speed": 1}, "stage[0].sequential"),
    ({"looks": "4,6"}, r"stage\[0\]\.sequential\.looks"),
    ({"looks": [6, 4]}, r"stage\[0\]\.sequential\.looks"),
    ({"looks": [4, 6], "alpha": 2}, r"stage\[0\]\.sequential\.alpha"),
    ({"looks": [4, 6], "alpha": "small"}, r"stage\[0\]\.sequential\.alpha"),
])
def test_bad_sequential_tables_name_the_key(table: Any, field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace("[0]", r"\[0\]") if "\\" not in field else field):
        parse("stage[0]", table)


def test_a_quick_claim_in_a_sequential_stage_is_refused(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(PLAN.replace('claims = ["hybridnorm-depth"]', 'claims = ["xiong-thm1"]'))
    with pytest.raises(ConfigError, match=r"stage\[0\]\.sequential=.*xiong-thm1 is a quick claim"):
        campaign_plan.load_plan(tmp_path / "plan.toml")


def test_the_registration_records_the_design() -> None:
    d = spec(SP)
    assert d["looks"] == [4, 6, 8] and d["weights"] == pytest.approx(list(W))
    assert registered({"sequential": d}) == SP and registered({}) is None


PLAN = """
name = "t"
scale = "cpu"
first_seed = 9000
budget_core_hours = 2
workers = 1
[[stage]]
name = "a"
registration = "registration/a.json"
claims = ["hybridnorm-depth"]
estimate_core_hours = 0.5
[stage.sequential]
looks = [4, 6, 8]
alpha = 0.05
"""


def _plan(tmp: Path) -> campaign_plan.Plan:
    (tmp / "ev" / "registration").mkdir(parents=True, exist_ok=True)
    (tmp / "ev" / "plan.toml").write_text(PLAN)
    (tmp / "ev" / "registration" / "a.json").write_text("{}")
    return campaign_plan.load_plan(tmp / "ev" / "plan.toml")


def test_the_campaign_registers_the_largest_look_and_runs_the_looks(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    p = _plan(tmp_path)
    assert p.stage("a").sequential == SP
    got: dict[str, Any] = {}

    def build(scale: str, only: list[str], **kw: Any) -> dict[str, Any]:
        got.update(kw)
        return {}
    monkeypatch.setattr("normlab.claims.registration.build", build)
    campaign.registration_doc(p, "registration/a.json")
    assert got["seeds"] == 8 and got["sequential"]["looks"] == [4, 6, 8]
    runs: list[Any] = []

    def run_claims(run: Any) -> None:  # hybridnorm-depth reads study new-methods: its part opens to 8 seeds
        runs.append(run)
        n = run.seed_counts["new-methods"]
        rec = _record("null", n)
        rec["id"], rec["studies"] = "hybridnorm-depth", ["new-methods"]
        run.out.mkdir(parents=True, exist_ok=True)
        (run.out / "claims.json").write_text(json.dumps({"meta": {"mode": "confirmatory"}, "claims": [rec]}))
    monkeypatch.setattr("normlab.claims.run_claims", run_claims)
    assert campaign.run_campaign(p, tmp_path / "out", quiet=True) == ["a"]
    assert [r.seed_counts for r in runs] == [{"new-methods": n} for n in (4, 6, 8)]
    published = json.loads((tmp_path / "ev" / "a" / "claims.json").read_text())
    assert published["claims"][0]["parts"][0]["sequential"]["stopped_at"] == 8
    assert [r["event"] for r in campaign.records(p)] == ["start", "end"]


class _Reg:
    doc = {"studies": {"s1": {}, "s2": {}}, "sequential": {"looks": [4, 8], "alpha": 0.05}}

    @staticmethod
    def seeds(n: str) -> list[int]:
        return list(range(9000, 9008))


def test_a_look_reads_the_first_registered_seeds_and_a_bad_count_is_named(tmp_path: Path) -> None:
    from normlab.claims.options import ClaimsRun
    from normlab.claims.plan import seeds_of

    reg = tmp_path / "reg.json"
    run = ClaimsRun(quick=False, registration=reg, seed_counts={"s1": 4})
    assert seeds_of(run, _Reg()) == {"s1": [9000, 9001, 9002, 9003], "s2": list(range(9000, 9008))}
    assert seeds_of(run, None) == {}
    with pytest.raises(UserError, match=r"seed_counts\[s1\]=6: .*registers looks at 4, 8 seeds; a run may read only"):
        seeds_of(ClaimsRun(quick=False, registration=reg, seed_counts={"s1": 6}), _Reg())
    _Reg.doc["sequential"]["looks"] = [4, 9]
    try:
        with pytest.raises(UserError, match=r"seed_counts\[s1\]=9: .*registers 8 seeds for it"):
            seeds_of(ClaimsRun(quick=False, registration=reg, seed_counts={"s1": 9}), _Reg())
    finally:
        _Reg.doc["sequential"]["looks"] = [4, 8]
    with pytest.raises(UserError, match=r"seed_counts\[s9\]: not a study of .*; valid: s1, s2"):
        seeds_of(ClaimsRun(quick=False, registration=reg, seed_counts={"s9": 4}), _Reg())
    with pytest.raises(UserError, match=r"seed_counts\[s1\]=2: a count of at least 3"):
        ClaimsRun(quick=False, registration=reg, seed_counts={"s1": 2})
    with pytest.raises(UserError, match="seed_counts: reads the first seeds of a registration's studies"):
        ClaimsRun(quick=False, seed_counts={"s1": 4})


def test_a_look_counts_its_own_earlier_looks_as_its_work_and_nothing_else(tmp_path: Path) -> None:
    from normlab.claims import ledger

    reg_at = 1_700_000_000.0
    out = tmp_path / "out"
    out.mkdir()
    # an earlier look of this stage (after the registration) and an older run into the same folder
    (out / "claims.json").write_text(json.dumps({"meta": {"written_at": "2023-11-14T23:00:00Z",
                                                          "seeds": {"s1": [1, 2, 3]}}, "claims": []}))
    (out / "history.jsonl").write_text(json.dumps({"id": "c", "written_at": "2023-11-14T20:00:00Z", "verdict": "x",
                                                   "rule_hash": "h", "seeds": {"s1": [7]}}) + "\n")
    plain = ledger.read([out], own=out, before=reg_at)
    assert set(plain.clash("s1", [1, 2, 3, 7])) == {1, 2, 3, 7}  # a plain rerun: every verdict counts
    look = ledger.read([out], own=out, before=reg_at, looks=True)
    assert set(look.clash("s1", [1, 2, 3, 7])) == {7}  # the look's own earlier look is its work; 7 predates it
    other = tmp_path / "other"
    other.mkdir()
    (other / "claims.json").write_text((out / "claims.json").read_text())
    assert set(ledger.read([out, other], own=out, before=reg_at, looks=True).clash("s1", [1])) == {1}  # not ours


def test_the_campaign_page_says_where_each_part_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from normlab.claims.campaign_page import page

    p = _plan(tmp_path)

    def run_claims(run: Any) -> None:
        rec = _record("strong", run.seed_counts["new-methods"])
        rec["id"], rec["studies"] = "hybridnorm-depth", ["new-methods"]
        run.out.mkdir(parents=True, exist_ok=True)
        (run.out / "claims.json").write_text(json.dumps({"meta": {"mode": "confirmatory"}, "claims": [rec]}))
    monkeypatch.setattr("normlab.claims.run_claims", run_claims)
    campaign.run_campaign(p, tmp_path / "out", quiet=True)
    assert "| `hybridnorm-depth` | a | supported | +1 [+0.5, +1.5], n 4/4 | read at its study's fixed horizon (not " \
           "staged); decided at 4 seeds: supported (p 1e-06 < 0.00305, the look's level) |" in page(p)


def test_a_part_with_no_p_value_is_not_said_to_be_limited_by_seeds() -> None:
    """seed002-deep-output-norm/sandwich-96 in campaign 2: every run of both arms failed, so the
    rule gave no p-value at either look; the look wrote "limited by seeds", which the page corrects
    (its limit is the horizon); a part with a p-value keeps the look's sentence."""
    said = "undecided at the registered maximum of 8 seeds (no p-value, level 0.000167): inconclusive, limited by seeds"
    part = {"sequential": {"stopped_at": 8, "p_by_look": {"4": None, "8": None}, "text": said}}
    got = sequential_stage.text(part)
    assert got is not None and "limited by seeds" not in got
    assert got.startswith("undecided at the registered maximum of 8 seeds (no p-value") and "no p-value that more seeds" in got
    with_p = {"sequential": {"stopped_at": 8, "p_by_look": {"4": 0.2, "8": 0.09}, "text": said.replace("no p-value", "p 0.09")}}
    assert sequential_stage.text(with_p) == said.replace("no p-value", "p 0.09")
    assert sequential_stage.text({"descriptive": True, **part}) == sequential_stage.descriptive_text(8)
