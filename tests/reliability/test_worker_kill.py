"""A worker killed mid-trial (local pool process or Ray task) leaves its trial resumable:
the same `study run` finishes every trial, each completed exactly once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from normlab.study.runner import run_study
from normlab.study.spec import StudySpec

STUDY_TESTS = Path(__file__).resolve().parents[1] / "study"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> str:
    import os

    monkeypatch.syspath_prepend(str(STUDY_TESTS))
    src = Path(__file__).resolve().parents[2] / "src"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(STUDY_TESTS), str(src), os.environ.get("PYTHONPATH", "")]))
    return "fake_trials:dies_once"


def _check(store_root: Path, store) -> None:
    trials = store.trials()
    assert {t.status for t in trials} == {"completed"}, [(t.status, t.error) for t in trials]
    calls: dict[str, int] = {}
    for line in (store_root / "calls.log").read_text().split():
        calls[line] = calls.get(line, 0) + 1
    for t in trials:
        killed = t.params["seed"] == 0
        # the killed attempt and the completed one; the others ran once
        assert calls[t.run_dir.name] == (2 if killed else 1), (t.params, calls)
        assert t.attempts == (2 if killed else 1)
    assert sum(1 for e in store.events() if e["event"] == "completed") == len(trials)


@pytest.mark.slow
def test_local_worker_sigkilled_mid_trial_is_reclaimed_in_the_same_run(tmp_path, fake) -> None:
    spec = StudySpec(name="kill", trial=fake, retries=1, seeds=[0, 1], axes={"optim.lr": [1e-3, 2e-3]})
    # Two spawned workers: the survivor sees the dead worker's pid gone and takes its trial
    # over at once (no waiting for the lease).
    store = run_study(spec, tmp_path / "s", workers=2, lease_s=30, poll_s=0.2)
    _check(tmp_path / "s", store)


@pytest.mark.skipif(sys.platform != "linux", reason="SIGKILL semantics")
@pytest.mark.netns(timeout=300)
def test_ray_task_sigkilled_mid_trial_is_retried_in_the_same_run(tmp_path, fake) -> None:
    pytest.importorskip("ray")
    spec = StudySpec(name="kill", trial=fake, retries=1, seeds=[0, 1], axes={"optim.lr": [1e-3]})
    store = run_study(spec, tmp_path / "s", executor="ray", workers=2, lease_s=30, poll_s=0.2)
    _check(tmp_path / "s", store)
