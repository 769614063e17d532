"""A store made before the placement options moved keeps its trials (no seed counted twice)."""

from __future__ import annotations

import json

import pytest

from normlab.core.errors import UserError
from normlab.run.config import RunConfig
from normlab.study.spec import Trial
from normlab.study.store import Store


def _old_json(cfg: RunConfig, **model) -> str:
    data = json.loads(cfg.to_json())
    data["model"].update({"mix_fraction": 0.25, "admin_omega": "profile", "rezero": False, **model})
    return json.dumps(data, indent=2, sort_keys=True)


def test_old_trials_are_matched_by_params(tmp_path) -> None:
    spec = {"name": "s"}
    new = [Trial(f"new{i}", i, {"seed": i}, RunConfig(seed=i).to_json()) for i in range(2)]
    old = [Trial(f"old{i}", i, {"seed": i}, _old_json(RunConfig(seed=i))) for i in range(2)]
    Store.create(tmp_path, spec, old)
    store = Store.create(tmp_path, spec, new)  # same study, configs written the new way
    assert sorted(t.id for t in store.trials()) == ["old0", "old1"]
    extra = Trial("new2", 2, {"seed": 2}, RunConfig(seed=2).to_json())
    assert sorted(t.id for t in Store.create(tmp_path, spec, [*new, extra]).trials()) == ["new2", "old0", "old1"]


def test_same_params_other_config_is_refused(tmp_path) -> None:
    spec = {"name": "s"}
    Store.create(tmp_path, spec, [Trial("old0", 0, {"seed": 0}, _old_json(RunConfig(seed=0), admin_omega="closed_form",
                                                                         placement="admin"))])
    with pytest.raises(UserError, match=r"trial old0 .* was made with a different config"):
        Store.create(tmp_path, spec, [Trial("new0", 0, {"seed": 0}, RunConfig(seed=0).to_json())])
