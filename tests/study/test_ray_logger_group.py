"""A Ray trial names its study for its loggers as a local trial does: same W&B group, job type and
axis keys. Checked on the arguments ``wandb.init`` gets (a stand-in module: no network, no W&B),
with the Ray task function called in this process (no Ray cluster needed for what it passes on)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from normlab.run.resolve import resolve
from normlab.study.ray_tasks import ray_trial, trial_study
from normlab.study.store import Lease
from normlab.study.worker import WorkerOptions, run_claimed, study_env

SPEC = {"name": "grouped", "metric": "best_val_loss"}
PARAMS = {"model.placement": "pre", "seed": 0}


@pytest.fixture
def inits(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every ``wandb.init(**kwargs)`` of this test, through a stand-in ``wandb`` module."""
    calls: list[dict[str, Any]] = []

    class Run:
        summary: dict[str, Any] = {}

        def log(self, metrics: dict[str, Any], step: int) -> None:
            pass

        def finish(self) -> None:
            pass

    fake = types.ModuleType("wandb")
    fake.init = lambda **kw: calls.append(kw) or Run()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "wandb", fake)
    return calls


def _config_json() -> str:
    return resolve(None, None, "pre", ["model.n_layer=1", "model.d_model=16", "model.n_head=1", "model.context=8",
                                       "train.batch_size=2", "train.steps=2", "train.eval_batches=1",
                                       "train.loggers=['wandb']"]).to_json()


@pytest.mark.usefixtures("data_dir")
def test_ray_trial_joins_the_study_group_like_a_local_trial(tmp_path: Path, inits, monkeypatch):
    monkeypatch.setenv("NORMLAB_CACHE_DIR", str(tmp_path / "cache"))
    opts = WorkerOptions(lease_s=5.0)
    local = Lease("a", 1, dict(PARAMS), _config_json(), tmp_path / "store" / "runs" / "a")
    with study_env(SPEC, [local]):
        assert run_claimed(local, opts)[1] is None
    claim = Lease("b", 1, dict(PARAMS), _config_json(), tmp_path / "store" / "runs" / "b")
    summary, error, _, _ = ray_trial(claim.config_json, str(claim.run_dir), str(tmp_path / "store"), opts,
                                     trial_study(SPEC, claim))
    assert error is None and summary["status"] == "completed"
    assert len(inits) == 2
    by_local, by_ray = inits
    for kw in (by_local, by_ray):
        assert kw["group"] == "grouped" and kw["job_type"] == "trial", kw
        assert kw["config"]["model.placement"] == "pre" and kw["config"]["seed"] == 0, kw
    assert {k: v for k, v in by_ray.items() if k not in ("id", "dir", "name")} == \
        {k: v for k, v in by_local.items() if k not in ("id", "dir", "name")}


@pytest.mark.usefixtures("data_dir")
def test_a_ray_trial_on_a_node_without_the_store_is_named_too(tmp_path: Path, inits, monkeypatch):
    """No shared file system: the task trains in a scratch directory, still under its study's name."""
    monkeypatch.setenv("NORMLAB_CACHE_DIR", str(tmp_path / "cache"))
    claim = Lease("c", 1, dict(PARAMS), _config_json(), tmp_path / "elsewhere" / "runs" / "c")
    summary, error, packed, _ = ray_trial(claim.config_json, str(claim.run_dir), str(tmp_path / "elsewhere"),
                                          WorkerOptions(lease_s=5.0), trial_study(SPEC, claim))
    assert error is None and packed, error
    assert inits and inits[0]["group"] == "grouped" and inits[0]["config"]["model.placement"] == "pre"


def test_the_driver_ships_only_name_metric_and_axis_values():
    claim = Lease("d", 1, dict(PARAMS), "{}", Path("runs/d"))
    big = {**SPEC, "base": {"model": {"n_layer": 2}}, "axes": {"model.placement": ["pre", "post"]}}
    assert trial_study(big, claim) == {"spec": SPEC, "params": PARAMS}
