"""The scoping rule decides every part alike (the init at initialisation, the horizon in training),
it and the decision code are registered with the rules (a change makes a part post-hoc), and the
tables lead with the Holm-adjusted verdict, the unadjusted one beside it."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gitrepo import commit, need_git, repo  # noqa: E402

from normlab.claims import decision, registered, registration  # noqa: E402
from normlab.claims.claim import CLAIMS  # noqa: E402
from normlab.claims.output import holm_verdicts, markdown_table  # noqa: E402
from normlab.claims.regime import Regime, factor  # noqa: E402
from normlab.stats.effects import Effect  # noqa: E402

EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence"
EFFECT = Effect(estimate=1.0, lo=0.5, hi=1.5, n_a=5, se=0.2, df=4.0)


@pytest.mark.parametrize(("cid", "part", "scale", "away"), [
    ("seed001-pre-flat", "flat", "init", ["init"]),        # the seed states no init; xavier vs GPT-2 matters
    ("seed004-decay", "factor", "init", ["init"]),
    ("xiong-thm1", "pre", "init", []),                      # Xiong et al. state xavier: inside
    ("seed001-rms", "normalises", "init", []),              # an exact check holds at any weights
    ("warmup-post", "post-5e-4", "cpu", ["steps"]),         # 200 steps is not "full training"
    ("zloss-logz", "lower", "cpu", ["steps"]),              # the horizon scopes every part, not the listed ones
    ("seed002-pet-project", "post-fails", "seed", []),      # 4900 steps: the seed's own horizon
    # at cpu scale lr 1e-3, not the seed's 3e-4, and GPT-2's init, not the seed's code's PyTorch defaults
    ("seed002-pet-project", "post-fails", "cpu", ["lr", "init", "steps"]),
])
def test_the_scoping_rule_applies_init_and_horizon_to_every_part(cid: str, part: str, scale: str, away: list) -> None:
    c = CLAIMS.get(cid)
    assert (c.regime or Regime(())).departures(scale, part, kind=c.kind) == away


def test_a_required_factor_not_declared_departs_and_a_blanket_horizon_does_not_count() -> None:
    assert Regime(()).departures("cpu", "x", kind="training") == ["steps"]
    assert Regime(()).departures("init", "x", kind="init") == ["init"]
    blanket = Regime((factor("steps", "1000 steps", inside=True),))
    named = Regime((factor("steps", "1000 steps", inside={"seed": True}),))
    assert blanket.departures("cpu", kind="training") == ["steps"]
    assert named.departures("seed", kind="training") == [] and named.departures("cpu", kind="training") == ["steps"]
    # the claims.json regime lists the required factor the claim did not declare
    rows = Regime(()).spec("cpu", {"steps": "200 steps"}, kind="training")["factors"]
    assert rows == [{"factor": "steps", "source": "not stated", "lab": "200 steps", "matters": True, "inside": False,
                     "departs": True, "why": "required by the scoping rule, not declared by the claim", "parts": []}]


def _marks(tmp: Path, now: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Register xiong-thm1 as it is, then decide it with ``now`` (a claim) and mark it."""
    c = CLAIMS.get("xiong-thm1")
    root = repo(tmp)
    f = root / "registration.json"
    registration.write(f, registration.document([c], "cpu"))
    commit(root, f, 1_000_000_000)
    reg = registration.load(f)
    registration.require_match(reg, [now], "cpu", quick=True, allow_post_hoc=True)
    rec = {"id": c.id, "quick": True, "rule_hash": now.rule_hash(None), "scoping_hash": now.scoping_hash(),
           "parts": [{**p.spec(), "effect": EFFECT.as_dict(), "verdict": p.rule.verdict(EFFECT)} for p in now.parts]}
    registered.mark([rec], {c.id: now}, reg, {}, 2_000_000_000)
    return [f"{p['registered']}: {p['registered_note']}" for p in rec["parts"]]


def test_a_changed_scoping_makes_a_part_post_hoc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_git()
    c = CLAIMS.get("xiong-thm1")
    assert all(m.startswith("before-data") for m in _marks(tmp_path / "same", c, monkeypatch))
    assert c.regime is not None
    moved = Regime(tuple(dataclasses.replace(f, inside={"*": False}) if f.name == "init" else f
                         for f in c.regime.factors))
    marks = _marks(tmp_path / "moved", dataclasses.replace(c, regime=moved), monkeypatch)
    assert marks == ["post-hoc: scoping (regime factors or the scoping rule) changed since the registration"] * 2


def test_a_changed_decision_code_makes_a_part_post_hoc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_git()
    c = CLAIMS.get("xiong-thm1")
    code = decision.decision_code_hash()
    assert len(code) == 16 and code == decision.decision_code_hash()
    root = repo(tmp_path)
    f = root / "registration.json"
    registration.write(f, registration.document([c], "cpu"))
    commit(root, f, 1_000_000_000)
    reg = registration.load(f)
    assert reg.doc["decision_code"] == code
    monkeypatch.setattr(registration, "decision_code_hash", lambda: "0" * 16)  # the Holm derivation edited, say
    registration.require_match(reg, [c], "cpu", quick=True, allow_post_hoc=True)
    assert reg.changed == {c.id: "decision code changed"}
    rec = {"id": c.id, "quick": True, "rule_hash": c.rule_hash(None),
           "parts": [{**p.spec(), "effect": EFFECT.as_dict(), "verdict": p.rule.verdict(EFFECT)} for p in c.parts]}
    registered.mark([rec], {c.id: c}, reg, {}, 2_000_000_000)
    assert {p["registered"] for p in rec["parts"]} == {"post-hoc"}


def test_the_decision_code_hash_covers_the_holm_derivation() -> None:
    from normlab.claims import output

    names = {getattr(o, "__qualname__", getattr(o, "__name__", "")) for o in decision._decision_code()}
    assert {"holm_verdicts", "adjust", "claim_verdict", "Claim.decide", "holm"} <= names
    assert output.holm_verdicts in decision._decision_code()


def test_the_table_leads_with_the_adjusted_verdict() -> None:
    records = json.loads((EVIDENCE / "claims.json").read_text())["claims"]
    holm_verdicts(records)
    changed = next(r for r in records if r["verdict_holm"] != r["verdict"])
    row = next(x for x in markdown_table(records).splitlines() if x.startswith(f"| `{changed['id']}` |"))
    cells = [x.strip() for x in row.split(" | ")]
    assert cells[1] == f"{changed['verdict_holm']} after Holm: {changed['holm_note']}"
    assert cells[2] == changed["verdict"]
    assert markdown_table(records).startswith("| claim | verdict (Holm-adjusted) | unadjusted |")
