"""The settling engine end to end on real runs: a cut-down smoke stability map (the cells of
``deepnorm-depth``, 2 seeds, 12 steps) with stages [12, 24, 36], trained, read at each stage,
its unsettled parts' runs resumed by ``study.extend.extend_to`` (``extended`` events in the
store), and a rerun that resumes nothing and decides the same."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from normlab.claims.cache import Cache
from normlab.claims.claim import CLAIMS
from normlab.claims.settling import settle_claims
from normlab.claims.studies import StudyContext
from normlab.study.store import Store

MAP = "stability-map"


class SmallMap(StudyContext):
    """The smoke map restricted to deepnorm-depth's cells (lr 5e-4, warm-up 5; 2 and 4 blocks)."""

    def spec(self, name: str) -> Any:
        spec = super().spec(name)
        return dataclasses.replace(spec, axes={**spec.axes, "model.placement": ["post", "deepnorm"],
                                               "optim.lr": [5e-4], "optim.warmup_steps": [5]})


def _extended(out: Path) -> list[str]:
    store = Store(out / "stores" / MAP)
    try:
        return [e["trial"] for e in store.events() if e["event"] == "extended"]
    finally:
        store.close()


def test_a_smoke_map_is_settled_by_resuming_its_runs(tmp_path: Path, data_dir: Path) -> None:  # noqa: ARG001
    ctx = SmallMap(out=tmp_path, scale="smoke", workers=1, stages={MAP: [12, 24, 36]})
    claim = CLAIMS.get("deepnorm-depth")
    rec = settle_claims(ctx, [claim], Cache(tmp_path / "cache"))[claim.id]
    trials = ctx.trials(MAP)
    assert len(trials) == 8 and all(t.summary["steps"] == 12 for t in trials)  # the store keeps stage 1
    first = _extended(tmp_path)
    assert all(p["settle_status"] in ("settled", "unsettled") for p in rec["parts"])
    assert all(p["settled_at"] in (24, 36) and p["horizon"] == p["settled_at"] for p in rec["parts"])
    # every run read to stage 2; to stage 3 only the runs of parts that still moved at 24
    moved = {i for p in rec["parts"] if p["settled_at"] == 36 for i in p["trials"]}
    assert sorted(first) == sorted([t.id for t in trials] + list(moved))
    # rerun: the same readings replay from the runs' files, nothing is resumed again
    again = settle_claims(SmallMap(out=tmp_path, scale="smoke", workers=1, stages={MAP: [12, 24, 36]}), [claim],
                          Cache(tmp_path / "cache"))[claim.id]
    assert _extended(tmp_path) == first
    keys = ("id", "effect", "settled_at", "drift", "settle_status", "rule_verdict")
    assert [{k: p[k] for k in keys} for p in again["parts"]] == [{k: p[k] for k in keys} for p in rec["parts"]]
