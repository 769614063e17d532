"""The catalogue's contract: every claim quotes a statement, cites a source and splits into parts
with stated rules and reasons; rules are hashed, and a changed rule shows in the history."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from normlab.claims.claim import CLAIMS
from normlab.claims.output import update_history
from normlab.claims.rules import Direction


def test_every_claim_is_complete_and_self_explaining() -> None:
    reg = CLAIMS
    assert len(reg.names()) == len(set(reg.names())) >= 27
    for _, c in reg.items():
        assert c.statement and c.source and c.experiment and c.settings and c.parts, c.id
        assert c.quick or c.studies, f"{c.id}: a training claim names the studies it reads"
        for p in c.parts:
            assert p.asserts and p.quantity and p.why and p.rule.text(), (c.id, p.id)
        text = json.dumps([c.statement, c.source, c.experiment, [p.spec() for p in c.parts]])
        for word in ("REFERENCE", "issue ", "shared/"):  # a rule states its own reason
            assert word not in text, (c.id, word)
        if c.source.startswith("seed"):
            assert ".txt" in c.source, f"{c.id}: name the seed file"


def test_rule_hash_follows_the_rule_not_the_code_layout() -> None:
    c = CLAIMS.get("warmup-post")
    assert c.rule_hash() == CLAIMS.get("warmup-post").rule_hash()
    moved = dataclasses.replace(c, parts=(dataclasses.replace(c.parts[0], rule=Direction(+1, 0.01)),) + c.parts[1:])
    assert moved.rule_hash() != c.rule_hash()
    assert dataclasses.replace(c, statement=c.statement + " ").rule_hash() != c.rule_hash()


def test_history_keeps_the_old_verdict_when_a_rule_changes(tmp_path: Path) -> None:
    prov = {"written_at": "2026-01-01T00:00:00Z", "git_revision": "abc", "normlab": "0"}
    rec = {"id": "x", "rule_hash": "h1", "code_hash": "c", "verdict": "supported", "parts": [{"id": "a", "verdict": "supported"}]}
    update_history([dict(rec)], tmp_path, prov)
    same = dict(rec)
    update_history([same], tmp_path, {**prov, "written_at": "2026-01-02T00:00:00Z"})
    assert "rule_changed" not in same
    changed = {**rec, "rule_hash": "h2", "verdict": "contradicted"}
    update_history([changed], tmp_path, {**prov, "written_at": "2026-01-03T00:00:00Z"})
    assert changed["rule_changed"] == {"from_hash": "h1", "verdict_before": "supported", "at": "2026-01-02T00:00:00Z"}
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["verdict"] == "supported"  # nothing rewritten


def test_seed_scale_is_for_the_claims_that_state_it(tmp_path: Path) -> None:
    """`--scale seed` decides seed 002's pet-project claims on the seed's own settings, and is
    refused for claims without such a setting (their experiment text would be wrong)."""
    import pytest

    from normlab.claims import run_claims
    from normlab.core.errors import UserError

    reg = CLAIMS
    have = sorted(i for i, c in reg.items() if "seed" in c.experiments)
    assert have == ["seed002-pet-project"]  # the seed scale trains no warm-up arm, which seed 001's claim reads
    pet = reg.get("seed002-pet-project")
    assert "lr 3e-4 constant, batch 32, 4900 steps" in pet.experiment_at("seed")
    assert pet.experiment_at("cpu") == pet.experiment and pet.rule_hash("cpu") == pet.rule_hash()
    assert pet.rule_hash("seed") != pet.rule_hash()  # another experiment is another decision
    with pytest.raises(UserError, match=r"--scale=seed: only claims seed002-pet-project have"):
        run_claims(quick=False, scale="seed", only=["seed002-pet-project", "seed001-early-gradients"], out=tmp_path,
                   train=False)
    with pytest.raises(UserError, match=r"--scale=huge: choose one of smoke, cpu, gpu, seed"):
        run_claims(quick=False, scale="huge", out=tmp_path, train=False)
    assert not any(tmp_path.iterdir())  # refused before anything is written


def test_training_runs_group_overlapping_studies_and_split_sessions() -> None:
    """Studies trained together are one run; a study trained hours later is a run of its own,
    and the wall time is the sum of the runs, not the span between them."""
    from normlab.claims.publish import training_runs

    spans = {"a": (0.0, 100.0), "b": (50.0, 300.0), "c": (350.0, 400.0), "d": (10_000.0, 10_500.0)}
    runs = training_runs(spans)
    assert [r["studies"] for r in runs] == [["a", "b", "c"], ["d"]]
    assert [r["wall_s"] for r in runs] == [400.0, 500.0]
    assert training_runs({}) == []
