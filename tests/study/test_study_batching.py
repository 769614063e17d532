"""The study runner trains compatible trials as one batch (``--batch K``) with solo-equal results."""

from __future__ import annotations

from pathlib import Path

import pytest

from normlab.core.errors import ConfigError
from normlab.core.fsutil import read_jsonl
from normlab.run.resolve import RunConfig
from normlab.study.runner import run_study
from normlab.study.spec import load_spec
from normlab.study.worker import batchable
from normlab.train import run_training

from .conftest import tiny_spec


def _spec(tmp_path: Path):
    # lr and warm-up differ between trials (what batching allows), architecture does not.
    path = tiny_spec(tmp_path / "s.toml", steps=12, every=6, ckpt=6, seeds="[0, 1]",
                     axes='"optim.lr" = [1e-3, 3e-3]')
    return load_spec(path)


def test_batched_study_matches_solo_runs(tmp_path: Path, data_dir: Path) -> None:
    spec = _spec(tmp_path)
    store = run_study(spec, tmp_path / "store", workers=1, batch=4, progress=False)
    trials = store.trials()
    assert {t.status for t in trials} == {"completed"} and len(trials) == 4
    claims = [e for e in store.events() if e["event"] == "claim"]
    assert sum("batched" in (e.get("detail") or "") for e in claims) == 3  # one group of four
    for t in trials:
        solo = tmp_path / "solo" / t.id
        run_training(RunConfig.from_json((t.run_dir / "config.json").read_text()), solo, quiet=True)
        got = [r["train/loss"] for r in read_jsonl(t.run_dir / "metrics.jsonl") if "train/loss" in r]
        want = [r["train/loss"] for r in read_jsonl(solo / "metrics.jsonl") if "train/loss" in r]
        assert len(got) == len(want) > 0
        assert max(abs(g - w) / abs(w) for g, w in zip(got, want)) <= 1e-4, t.id


def test_only_fresh_compatible_trials_join_a_batch(tmp_path: Path, data_dir: Path) -> None:
    spec = _spec(tmp_path)
    from normlab.study.runner import open_store

    store = open_store(spec, tmp_path / "store")
    first = store.claim("w1", lease_s=60)            # one trial started alone
    assert first is not None
    store.finish(first, "w1", error="boom", retries=1)  # back to pending with attempts=1
    group = store.claim_many("w2", 60, 1, limit=4, fits=batchable)
    assert [c.id for c in group] == [first.id]       # a retried trial runs alone
    group = store.claim_many("w2", 60, 1, limit=4, fits=batchable)
    assert len(group) == 3 and first.id not in [c.id for c in group]
    assert store.claim_many("w3", 60, 1, limit=4, fits=batchable) == []  # all four held


def test_incompatible_trials_are_not_batched(tmp_path: Path) -> None:
    path = tiny_spec(tmp_path / "s.toml", seeds="[0]", axes='"model.placement" = ["post", "pre"]')
    from normlab.study.runner import open_store

    store = open_store(load_spec(path), tmp_path / "store")
    group = store.claim_many("w", 60, 1, limit=4, fits=batchable)
    assert len(group) == 1  # post and pre differ in architecture


def test_batch_option_errors_name_the_flag(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    with pytest.raises(ConfigError, match="--batch"):
        run_study(spec, tmp_path / "a", batch=0)
    with pytest.raises(ConfigError, match="--executor local"):
        run_study(spec, tmp_path / "b", batch=4, executor="ray")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
