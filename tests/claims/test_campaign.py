"""The campaign runner (claims/campaign.py): its plan checked with errors naming the field, each
stage run once and recorded with its CPU time, a stopped stage resumed, the budget enforced, the
outputs published beside the plan and campaign.md written from the record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from normlab.claims import campaign, campaign_plan
from normlab.claims.campaign_page import page, write_page
from normlab.claims.registration_doc import QUICK_SEEDS
from normlab.core.errors import ConfigError, UserError

PLAN = """
name = "t"
scale = "cpu"
first_seed = 9000
budget_core_hours = 2
workers = 1
description = "A test campaign."
[tolerances]
"hybridnorm-depth/trains" = 0.15
[[stage]]
name = "a"
registration = "registration/a.json"
claims = ["hybridnorm-depth"]
estimate_core_hours = 0.5
full_grid_core_hours = 2.0
why = "first"
[stage.settle]
"new-methods" = [200, 400, 1000]
[[stage]]
name = "b"
registration = "registration/a.json"
claims = ["deepnorm-depth"]
estimate_core_hours = 1.0
full_grid_core_hours = 3.0
"""


def _plan(tmp: Path, text: str = PLAN, registered: bool = True) -> campaign_plan.Plan:
    (tmp / "ev" / "registration").mkdir(parents=True, exist_ok=True)
    (tmp / "ev" / "plan.toml").write_text(text)
    if registered:  # the fake claims run below never reads it
        (tmp / "ev" / "registration" / "a.json").write_text("{}")
    return campaign_plan.load_plan(tmp / "ev" / "plan.toml")


def test_plan_reads_stages_and_tolerances(tmp_path: Path) -> None:
    p = _plan(tmp_path)
    assert [s.name for s in p.stages] == ["a", "b"]
    assert p.stage("a").settle == {"new-methods": [200, 400, 1000]}
    assert p.tolerances == {"hybridnorm-depth/trains": 0.15}
    assert p.registration_path(p.stage("a")) == tmp_path / "ev" / "registration" / "a.json"
    with pytest.raises(UserError, match="--stage c: no such stage.*a, b"):
        p.stage("c")


@pytest.mark.parametrize("edit, field", [
    (lambda t: t.replace('workers = 1', 'workers = 1\nspeed = 3'), "plan.speed"),
    (lambda t: t.replace('first_seed = 9000\n', ''), "plan.first_seed"),
    (lambda t: t.replace('claims = ["deepnorm-depth"]', 'claims = ["no-such-claim"]'), "stage[1].claims"),
    (lambda t: t.replace('"new-methods" = [200, 400, 1000]', '"new-methods" = "long"'), "stage[0].settle"),
    (lambda t: t.replace('name = "b"', 'name = "a"'), "plan.stage.name"),
    (lambda t: t.replace('estimate_core_hours = 1.0', 'estimate_core_hours = -1'), "stage[1].estimate_core_hours"),
])
def test_plan_errors_name_the_field(tmp_path: Path, edit: Any, field: str) -> None:
    with pytest.raises((ConfigError, UserError), match=field.replace(".", r"\.").replace("[", r"\[")):
        _plan(tmp_path, edit(PLAN))


def _fake_claims(calls: list[Any], fail_on: str | None = None) -> Any:
    def run_claims(run: Any) -> list[dict[str, Any]]:
        calls.append(run)
        if fail_on and run.out.name == fail_on:
            raise KeyboardInterrupt
        run.out.mkdir(parents=True, exist_ok=True)
        (run.out / "figures").mkdir(exist_ok=True)
        (run.out / "figures" / "f.svg").write_text("<svg/>")
        rec = {"id": run.only[0], "verdict": "supported", "verdict_holm": "supported",
               "parts": [{"id": "trains", "verdict": "supported", "effect_text": "-0.8 [-0.9, -0.7]",
                          "settled_at": 400, "settle_status": "settled", "drift": -0.01, "lr_drift": None}]}
        (run.out / "claims.json").write_text(json.dumps({"meta": {}, "claims": [rec]}))
        (run.out / "claims.md").write_text("# claims\n")
        return [rec]
    return run_claims


def test_run_records_publishes_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _plan(tmp_path)
    calls: list[Any] = []
    monkeypatch.setattr("normlab.claims.run_claims", _fake_claims(calls, fail_on="b"))
    with pytest.raises(KeyboardInterrupt):
        campaign.run_campaign(p, tmp_path / "out", quiet=True, after=write_page)
    events = [(r["stage"], r["event"]) for r in campaign.records(p)]
    assert events == [("a", "start"), ("a", "end"), ("b", "start"), ("b", "stopped")]
    assert calls[0].registration == tmp_path / "ev" / "registration" / "a.json"
    assert calls[0].stages == {"new-methods": [200, 400, 1000]} and calls[0].only == ["hybridnorm-depth"]
    assert (tmp_path / "ev" / "a" / "figures" / "f.svg").exists() and (tmp_path / "ev" / "a" / "claims.json").exists()
    assert not (tmp_path / "ev" / "b").exists()  # a stopped stage publishes nothing
    md = (tmp_path / "ev" / "campaign.md").read_text()
    assert "1 of 2 stages ended" in md and "stopped, resumes" in md and "step 400 (settled" in md
    # started again: only b runs
    calls.clear()
    monkeypatch.setattr("normlab.claims.run_claims", _fake_claims(calls))
    assert campaign.run_campaign(p, tmp_path / "out", quiet=True) == ["b"]
    assert [c.out.name for c in calls] == ["b"]
    assert campaign.ended(p) == {"a", "b"} and "2 of 2 stages ended" in page(p)
    assert all(r["cpu_s"] >= 0 and r["wall_s"] >= 0 for r in campaign.records(p) if r["event"] != "start")


def test_budget_refuses_a_stage_that_does_not_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _plan(tmp_path, PLAN.replace("budget_core_hours = 2", "budget_core_hours = 1.2"))
    (p.folder / campaign.RECORD).write_text(json.dumps({"event": "end", "stage": "a", "cpu_s": 1800.0,
                                                        "wall_s": 900.0}) + "\n")
    calls: list[Any] = []
    monkeypatch.setattr("normlab.claims.run_claims", _fake_claims(calls))
    with pytest.raises(UserError, match=r"stage b: its estimate \(1.00 core-h\) exceeds .*0.70 of 1.2.*--over-budget"):
        campaign.run_campaign(p, tmp_path / "out", quiet=True)
    assert calls == []
    assert campaign.run_campaign(p, tmp_path / "out", quiet=True, over_budget=True) == ["b"]


def test_registration_doc_gathers_the_stages_of_one_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got: dict[str, Any] = {}

    def build(scale: str, only: list[str], **kw: Any) -> dict[str, Any]:
        got.update(scale=scale, only=only, **kw)
        return {}
    monkeypatch.setattr("normlab.claims.registration.build", build)
    campaign.registration_doc(_plan(tmp_path), "registration/a.json")
    assert got["only"] == ["hybridnorm-depth", "deepnorm-depth"] and got["first_seed"] == 9000
    assert got["stages"] == {"new-methods": [200, 400, 1000]} and got["every_design"] is True
    assert got["tolerances"] == {"hybridnorm-depth/trains": 0.15}
    mixed = PLAN.replace('name = "b"', 'name = "b"\nscale = "seed"')
    with pytest.raises(UserError, match="registration/a.json have scales cpu, seed; give each scale its own"):
        campaign.registration_doc(_plan(tmp_path, mixed), "registration/a.json")
    bad = PLAN + '[stage.settle]\n"new-methods" = [200, 2000]\n'  # stage b's
    with pytest.raises(UserError, match="new-methods is staged .* in one stage and .* in another"):
        campaign.registration_doc(_plan(tmp_path, bad), "registration/a.json")


QUICK = PLAN.replace('claims = ["deepnorm-depth"]', 'claims = ["xiong-thm1", "forward-norms"]\nquick_seeds = 48')


def test_a_stage_of_quick_claims_registers_its_probe_seeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan(tmp_path, QUICK.replace('registration = "registration/a.json"\nclaims = ["xiong',
                                         'registration = "registration/b.json"\nclaims = ["xiong'))
    assert plan.stage("b").quick_seeds == 48 and plan.stage("a").quick_seeds is None
    got: dict[str, Any] = {}

    def build(scale: str, only: list[str], **kw: Any) -> dict[str, Any]:
        got.clear()
        got.update(only=only, **kw)
        return {}
    monkeypatch.setattr("normlab.claims.registration.build", build)
    campaign.registration_doc(plan, "registration/b.json")
    assert got["only"] == ["xiong-thm1", "forward-norms"] and got["quick_seeds"] == 48 and got["plan_quick"] is True
    campaign.registration_doc(plan, "registration/a.json")
    assert got["quick_seeds"] == QUICK_SEEDS and got["plan_quick"] is False  # a training stage: the defaults
    with pytest.raises(UserError, match="registration/a.json differ in their quick_seeds"):
        campaign.registration_doc(_plan(tmp_path, QUICK), "registration/a.json")  # one file, two stages


@pytest.mark.parametrize("edit, why", [
    (lambda t: t.replace("quick_seeds = 48", "quick_seeds = 2"), "an integer >= 3"),
    (lambda t: t.replace("quick_seeds = 48", "quick_seeds = true"), "an integer >= 3"),
    (lambda t: t.replace('claims = ["xiong-thm1", "forward-norms"]', 'claims = ["deepnorm-depth"]'),
     "only for a stage with quick claims"),
])
def test_quick_seeds_errors_name_the_field(tmp_path: Path, edit: Any, why: str) -> None:
    with pytest.raises(ConfigError, match=rf"stage\[1\]\.quick_seeds=.*{why}"):
        _plan(tmp_path, edit(QUICK))


def test_a_quick_stage_registration_plans_every_design_at_its_seeds() -> None:
    from normlab.claims.registration_doc import build

    doc = build("cpu", ["forward-norms", "seed001-pre-identity"], quick_seeds=24, first_seed=9100, every_design=True,
                plan_quick=True, design_level=1e-3)
    assert doc["quick_seeds"] == list(range(9100, 9124))
    plans = [p["design"]["plan"] for c in doc["claims"].values() for p in c["parts"] if p.get("design")]
    assert len(plans) == 5 and all(x.startswith("24 seeds") for x in plans), plans
    with pytest.raises(UserError, match="--require-designs: xiong-thm1/pre, xiong-thm1/post declare no design"):
        build("cpu", ["xiong-thm1"], every_design=True)  # outside a quick stage it declares none


def test_a_stage_not_yet_registered_stops_the_campaign_naming_the_fix(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    p = _plan(tmp_path, registered=False)
    calls: list[Any] = []
    monkeypatch.setattr("normlab.claims.run_claims", _fake_claims(calls))
    with pytest.raises(UserError, match=r"stage a: its registration .*a.json is not written yet; .*campaign register "
                                        r".*--stage a"):
        campaign.run_campaign(p, tmp_path / "out", quiet=True)
    assert calls == [] and campaign.records(p) == []


def test_a_launch_killed_without_a_record_is_listed_with_its_wall_bound(tmp_path: Path) -> None:
    """A launch whose process died with the machine's session wrote its start and nothing after:
    the page says so, bounds its wall time by its stage's next launch, and leaves it out of the CPU
    sums. Another stage's launch in between (stages run side by side) is no sign of a kill."""
    from normlab.core.fsutil import append_jsonl

    p = _plan(tmp_path)
    log = p.folder / campaign.RECORD
    append_jsonl(log, {"event": "start", "stage": "a", "at": 1000.0, "out": "o"})
    append_jsonl(log, {"event": "start", "stage": "b", "at": 1000.0 + 600, "out": "o"})  # beside it
    append_jsonl(log, {"event": "start", "stage": "a", "at": 1000.0 + 1800, "out": "o"})  # 0.5 h later
    append_jsonl(log, {"event": "end", "stage": "b", "at": 1000.0 + 1900, "wall_s": 1300.0, "cpu_s": 0.0})
    append_jsonl(log, {"event": "end", "stage": "a", "at": 1000.0 + 2000, "wall_s": 200.0, "cpu_s": 360.0})
    text = page(p)
    assert "Launches whose CPU time was not recorded:" in text
    assert text.count("killed without a record; at most") == 1  # a's first launch; b's ended
    assert "`a`, launched 1970-01-01 00:16 UTC: killed without a record; at most 0.50 h of wall time (to its next " \
           "launch), at most 0.50 core-hours on 1 workers" in text
    assert campaign.used_core_hours(p) == pytest.approx(0.1)  # only the recorded launch
    append_jsonl(log, {"event": "start", "stage": "b", "at": 5000.0, "out": "o"})  # running now: not listed
    assert page(p).count("killed without a record; at most") == 1
