"""Designs from the lab's seen data (``claims/design_seen.py``, priors from ``claims/seen_priors.py``): which published run gives a part's
prior, how each effect method maps to a design, the planned n, the floor for a degenerate spread,
the committed priors file against the evidence, and the wiring into registration (a seen design
that cannot decide is refused by --require-designs, which also lists a training part with no
design at all)."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from normlab.claims import design_seen, registration, seen_priors
from normlab.claims.claim import CLAIMS, Part
from normlab.claims.design import mean_design, rate_design
from normlab.claims.design_seen import SD_FLOOR, design_from, seen_design
from normlab.claims.rules import Direction, Within
from normlab.claims.seen_priors import extract
from normlab.core.errors import ConfigError, UserError

EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence"
Q = "best val loss, a minus b, per seed"


def _welch(a: list[float], b: list[float]) -> dict[str, Any]:
    return {"method": "welch", "estimate": statistics.fmean(a) - statistics.fmean(b), "n_a": len(a), "n_b": len(b),
            "values_a": a, "values_b": b, "counts": None, "se": 0.01}


def _run(root: Path, name: str, written: str, parts: dict[str, dict[str, Any]], superseded: str = "",
         mode: str = "confirmatory", scale: str = "cpu") -> None:
    meta = {"written_at": written, "scale": scale, "mode": mode, "seeds": {"s": [0, 1, 2, 3], "other": [9]}}
    if superseded:
        meta["superseded"] = superseded
    claims = [{"id": "c", "quick": False, "studies": ["s"],
               "parts": [{"id": k, "quantity": Q, "horizon": 200, "effect": e} for k, e in parts.items()]},
              {"id": "q", "quick": True, "parts": [{"id": "x", "quantity": Q, "effect": _welch([1, 2], [3, 4])}]}]
    (root / name).mkdir(parents=True)
    (root / name / "claims.json").write_text(json.dumps({"meta": meta, "claims": claims}))


def test_the_newest_confirmatory_run_wins_and_a_superseded_one_loses(tmp_path: Path) -> None:
    mover = {"method": "MOVER (Zou & Donner 2008) from the two intervals", "estimate": 0.1, "n_a": 4, "n_b": 4}
    _run(tmp_path, "old", "2026-01-01T00:00:00Z", {"a": _welch([1, 2, 3], [1, 1, 1])})
    _run(tmp_path, "new", "2026-02-01T00:00:00Z", {"a": _welch([5, 6, 7, 8], [1, 1, 1, 1]), "lr": mover})
    _run(tmp_path, "explored", "2026-03-01T00:00:00Z", {"a": _welch([0, 0, 0], [9, 9, 9]), "b": _welch([1, 2], [3, 4])},
         superseded="replaced by new", mode="")
    _run(tmp_path, "long", "2026-04-01T00:00:00Z", {"a": _welch([2, 3, 4], [1, 1, 1])}, scale="seed")
    got = extract(tmp_path)["priors"]
    a = got["cpu"]["c/a"]
    assert a["run"] == "new" and a["values_a"] == [5, 6, 7, 8] and a["confirmatory"]  # newer confirmatory
    assert a["seeds"] == {"s": [0, 1, 2, 3]} and a["horizon"] == 200 and a["quantity"] == Q  # the claim's studies
    assert got["cpu"]["c/b"]["run"] == "explored"  # the only run that has it, superseded or not
    assert "c/lr" not in got["cpu"] and "q/x" not in got["cpu"]  # critical lrs: no prior; quick claims: apart
    assert got["probe"]["q/x"]["run"] == "long"  # the probe has no horizon: one key whatever the run's scale
    assert got["seed"]["c/a"]["run"] == "long"  # another scale is another horizon: kept apart
    with pytest.raises(UserError, match="no claims.json"):
        extract(tmp_path / "missing")


def test_a_part_read_at_an_early_look_has_that_looks_seeds(tmp_path: Path) -> None:
    """A sequential stage reads a part at the look it stopped at: its prior counts that look's
    seeds, not the later ones other parts took (else its planned n halves, and its design reads
    the unread seeds as runs that gave no value)."""
    _run(tmp_path, "staged", "2026-01-01T00:00:00Z", {"early": _welch([1, 2], [3, 4]), "late": _welch([1, 2, 3, 4], [5, 6, 7, 8])})
    data = json.loads((tmp_path / "staged" / "claims.json").read_text())
    data["claims"][0]["parts"][0]["sequential"] = {"stopped_at": 2}
    data["claims"][0]["parts"][1]["sequential"] = {"stopped_at": 4}
    (tmp_path / "staged" / "claims.json").write_text(json.dumps(data))
    got = extract(tmp_path)["priors"]["cpu"]
    assert got["c/early"]["seeds"] == {"s": [0, 1]} and got["c/late"]["seeds"] == {"s": [0, 1, 2, 3]}
    assert "gave a value" not in design_from("c/early", Direction(+1), got["c/early"]).plan

def test_a_one_sample_part_with_a_big_seen_effect_is_decidable_and_powered() -> None:
    prior = {"method": "one-sample t", "estimate": -0.8, "values_a": [-0.81, -0.8, -0.79, -0.8], "n_a": 4,
             "run": "r", "horizon": 200}
    d = design_from("c/trains", Direction(-1, -0.15), prior)
    assert d.decidable and d.power is not None and d.power >= 0.8
    assert d.plan.startswith("4 seeds (seen r, step 200, SD 0.00816)")


def test_a_tiny_n_part_with_a_huge_spread_is_refused_in_one_line() -> None:
    d = design_from("c/post", Direction(+1), {"method": "one-sample t", "estimate": 2.5, "values_a": [0.0, 5.0],
                                             "n_a": 2, "run": "r", "seeds": {"s": list(range(6))}})
    assert not d.decidable and "fewer than 3 seeds" in d.text() and "\n" not in d.text()
    assert "2 of 6 seeds gave a value" in d.text()  # why so few: four runs gave no value (diverged)
    wide = design_from("c/same", Within(-0.05, 0.05), {"method": "welch", "estimate": 0.0, "values_a": [0, 3, -3],
                                                       "values_b": [1, -2, 4], "n_a": 3, "n_b": 3, "run": "r"})
    assert not wide.decidable and "no true value gives the rule's verdict 80% power" in wide.text()
    with pytest.raises(UserError, match=r"^c/same: cannot decide at the planned design"):
        from normlab.claims.design import require_decidable
        require_decidable(wide)


def test_rates_and_welch_and_interactions_map_to_their_designs() -> None:
    rule = Direction(+1, 0.5)
    one = design_from("c/fails", rule, {"method": "clopper-pearson", "estimate": 4 / 6, "counts": [4, 6], "n_a": 6,
                                        "run": "r"})
    want = rate_design("c/fails", rule, 6, effect=4 / 6)
    assert (one.detectable, one.power) == (want.detectable, want.power) and "4 of 6" in one.plan
    two = design_from("c/more", Direction(+1), {"method": "exact-unconditional", "estimate": 0.5,
                                                "counts": [3, 4, 1, 4], "n_a": 4, "n_b": 4, "run": "r"})
    want = rate_design("c/more", Direction(+1), 4, 4, p_b=0.25, effect=0.5)
    assert (two.detectable, two.power) == (want.detectable, want.power)
    a, b = [0.1, 0.2, 0.15, 0.12], [0.0, 0.05, -0.02, 0.01]
    w = design_from("c/lower", Direction(+1), {**_welch(a, b), "run": "r"})
    want = mean_design("c/lower", Direction(+1), 4, statistics.stdev(a), 4, statistics.stdev(b), effect=w.effect)
    assert w.detectable == pytest.approx(want.detectable) and w.power == want.power
    i = design_from("c/x", Direction(+1), {"method": "interaction", "estimate": 0.8, "se": 0.02, "n_a": 4, "n_b": 4,
                                           "run": "r"})
    want = mean_design("c/x", Direction(+1), 4, 0.02 * math.sqrt(2), 4, 0.02 * math.sqrt(2), effect=0.8)
    assert i.detectable == pytest.approx(want.detectable)  # the planned se at the seen n is the seen se


def test_a_degenerate_spread_gets_the_floor() -> None:
    rule = Direction(-1)
    dead = design_from("c/d", rule, {"method": "welch", "estimate": -0.3, "values_a": [0.0] * 4,
                                     "values_b": [0.3, 0.31, 0.29, 0.3], "n_a": 4, "n_b": 4, "run": "r"})
    assert f"SD {SD_FLOOR:.3g} / " in dead.plan
    assert dead.detectable == pytest.approx(mean_design("c/d", rule, 4, SD_FLOOR, 4, 0.00816).detectable, abs=2e-3)
    one = design_from("c/o", rule, {"method": "one-sample t", "estimate": -1.0, "values_a": [-1.0], "n_a": 1,
                                    "run": "r"})
    assert "SD 0.01" in one.plan and not one.decidable  # one value: the floor, and too few seeds anyway


def _claim(cid: str, parts: list[Part], studies: tuple[str, ...], quick: bool = False) -> Any:
    return SimpleNamespace(id=cid, parts=tuple(parts), studies=studies, rule_hash=lambda scale: cid, quick=quick)


def test_only_the_latest_quantity_competes(tmp_path: Path) -> None:
    # an older confirmatory reading of another quantity loses to a later exploratory pilot of the
    # part's current one; among readings of one quantity, confirmatory still wins over a later pilot
    _run(tmp_path, "old", "2026-01-01T00:00:00Z", {"a": _welch([1, 2, 3], [1, 1, 1]), "b": _welch([1, 2, 3], [0, 0, 0])})
    (tmp_path / "pilot").mkdir()
    meta = {"written_at": "2026-02-01T00:00:00Z", "scale": "cpu", "mode": "exploratory", "seeds": {"s": [7, 8]}}
    parts = [{"id": "a", "quantity": "a new quantity", "effect": _welch([9, 9.5], [1, 1.5])},
             {"id": "b", "quantity": Q, "effect": _welch([5, 6], [0, 1])}]
    (tmp_path / "pilot" / "claims.json").write_text(json.dumps({"meta": meta, "claims": [
        {"id": "c", "quick": False, "studies": ["s"], "parts": parts}]}))
    got = extract(tmp_path)["priors"]["cpu"]
    assert got["c/a"]["run"] == "pilot" and got["c/a"]["quantity"] == "a new quantity"
    assert got["c/b"]["run"] == "old"


def test_a_quick_part_is_planned_at_the_stage_quick_seeds() -> None:
    part = Part("p", "a", Q, Direction(+1), "why")
    prior = {"method": "one-sample t", "estimate": 1.0, "values_a": [1.0 + 0.1 * i for i in range(5)], "n_a": 5,
             "run": "r", "seeds": {"probe": [100, 101, 102, 103, 104]}, "quantity": Q}
    doc = {"priors": {"probe": {"q/p": prior}, "cpu": {}}}
    quick = _claim("q", [part], (), quick=True)
    assert seen_design(quick, "cpu", doc)["p"].plan.startswith("5 seeds")  # outside a stage: as seen
    with design_seen.at_quick_seeds(40):
        assert design_seen.planned_quick_seeds() == 40
        assert seen_design(quick, "cpu", doc)["p"].plan.startswith("40 seeds")  # 5 x 40 / 5
        assert seen_design(quick, "smoke", doc)["p"].plan.startswith("40 seeds")  # the probe has no scale
        assert seen_design(_claim("q", [part], ()), "cpu", doc) == {}  # a training claim reads its scale's priors
    assert design_seen.planned_quick_seeds() is None
    with pytest.raises(ConfigError, match=r"quick_seeds=2: a count of at least 3 probe seeds"):
        with design_seen.at_quick_seeds(2):
            pass


def test_a_measurement_of_fixed_seeds_plans_those_whatever_the_stage_asks() -> None:
    # the exact checks (seed002-gpt2, seed002-code-causal) build 3 models whatever the probe's seeds
    assert CLAIMS.get("seed002-gpt2").needs.fixed_seeds() == 3 and CLAIMS.get("forward-norms").needs.fixed_seeds() is None
    part = Part("p", "a", Q, Direction(+1), "why")
    prior = {"method": "one-sample t", "estimate": 1.0, "values_a": [1.0, 1.1, 1.2], "n_a": 3, "run": "r",
             "seeds": {"probe": [100, 101, 102, 103, 104]}, "quantity": Q}
    doc = {"priors": {"probe": {"q/p": prior}}}
    exact = _claim("q", [part], (), quick=True)
    exact.needs = SimpleNamespace(fixed_seeds=lambda: 3)
    with design_seen.at_quick_seeds(48):
        assert seen_design(exact, "cpu", doc)["p"].plan.startswith("3 seeds")
        assert seen_design(_claim("q", [part], (), quick=True), "cpu", doc)["p"].plan.startswith("29 seeds")  # 3 x 48/5


def test_a_quick_claim_declared_design_plans_the_stage_quick_seeds() -> None:
    c = CLAIMS.get("seed001-pre-identity")  # declared designs at the probe's 5 seeds, no seen reading
    assert registration.designs(c, "cpu")["near"].plan.startswith("5 seeds")
    with design_seen.at_quick_seeds(24):
        assert registration.designs(c, "cpu")["near"].plan.startswith("24 seeds")


def test_planned_n_scales_the_seen_n_by_the_planned_over_the_seen_seeds() -> None:
    part = Part("p", "a", Q, Direction(+1), "why")
    seen10 = list(range(10))  # zloss plans 5 seeds at cpu; the prior's run had 10
    prior = {"method": "one-sample t", "estimate": 1.0, "values_a": [1.0 + 0.1 * i for i in range(10)], "n_a": 10,
             "run": "r", "seeds": {"zloss": seen10}, "quantity": Q}
    doc = {"priors": {"cpu": {"c/p": prior}}}
    got = seen_design(_claim("c", [part], ("zloss",)), "cpu", doc)
    assert got["p"].plan.startswith("5 seeds")
    assert design_seen.ratio(("zloss", "pre-vs-post"), "cpu", {"zloss": seen10, "pre-vs-post": [0, 1, 2]}) == 0.5
    assert design_seen.ratio(("zloss",), "cpu", {}) == 1.0  # no seeds recorded: the seen n as it was
    assert seen_design(_claim("c", [part], ("zloss",)), "smoke", doc) == {}  # no prior at that scale
    moved = dataclasses.replace(part, quantity="another quantity")
    assert seen_design(_claim("c", [moved], ("zloss",)), "cpu", doc) == {}  # a prior of another quantity is none
    twin = _claim("twin", [dataclasses.replace(part, id="t")], ("zloss",))  # the same quantity, read by another claim
    assert "as c/p" in seen_design(twin, "cpu", doc)["t"].plan


def test_the_committed_priors_are_what_the_evidence_gives() -> None:
    if not (EVIDENCE / "claims.json").is_file():
        pytest.skip("no docs/evidence beside the tests (an installed package)")
    assert seen_priors.dumps(extract(EVIDENCE)) == seen_priors.PRIORS.read_text(encoding="utf-8"), \
        "run `python -m normlab.claims.seen_priors docs/evidence` and commit the file"


def _unseen(cid: str) -> Any:
    """A real training claim under a new id, its quantities measured by no published run."""
    c = CLAIMS.get(cid)
    return dataclasses.replace(c, id="test-unseen", parts=tuple(dataclasses.replace(p, quantity=f"unmeasured {p.id}")
                                                               for p in c.parts))


def test_require_designs_lists_a_training_part_with_no_design() -> None:
    c = _unseen("zloss-logz")
    assert registration.designs(c, "cpu") == {}
    registration.require_designs([c], "cpu")  # a plain registration records none
    with pytest.raises(UserError, match=r"--require-designs: test-unseen/drifts, test-unseen/near-0, "
                                        r"test-unseen/lower declare no design analysis"):
        registration.require_designs([c], "cpu", every=True)


def test_a_seen_design_that_cannot_decide_is_recorded_and_refused_by_require_designs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    c = _unseen("zloss-logz")
    doc = {"format": seen_priors.FORMAT, "priors": {"cpu": {
        f"test-unseen/{p.id}": {"method": "one-sample t", "estimate": 1.0, "values_a": [0.0, 2.0], "n_a": 2,
                                "run": "r", "seeds": {}, "quantity": p.quantity} for p in c.parts}}}
    monkeypatch.setattr(design_seen, "load", lambda *a: doc)
    monkeypatch.setattr(design_seen, "_MEMO", {})
    got = registration.document([c], "cpu")["claims"]["test-unseen"]["parts"]
    assert [p["design"]["decidable"] for p in got] == [False, False, False]  # recorded with the part
    with pytest.raises(UserError, match=r"^test-unseen/drifts: cannot decide .*\(and 2 more part\(s\)") as e:
        registration.document([c], "cpu", every_design=True)
    assert "\n" not in str(e.value)


def test_the_seed_claims_declare_their_designs() -> None:
    c = CLAIMS.get("seed002-any-depth")
    got = registration.designs(c, "cpu")
    assert sorted(got) == ["trains-48", "trains-96"] and got["trains-48"].part == "seed002-any-depth/trains-48"
    assert registration.designs(c, "smoke") == {}  # planned for cpu's seeds: none at another scale
    assert sorted(registration.designs(CLAIMS.get("seed001-pre-identity"), "smoke")) == ["every-block", "near",
                                                                                        "vs-post"]
    for cid in ("seed002-dropout", "seed002-deep-output-norm", "seed002-layernorm", "seed002-attention-focus",
                "seed001-pre-no-warmup"):
        assert CLAIMS.get(cid).design is not None, cid
