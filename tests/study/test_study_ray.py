"""The ray executor against a real local Ray instance gives the local executor's table."""

from __future__ import annotations

import pytest

from normlab.study.results import format_results, results
from normlab.study.runner import run_study
from normlab.study.spec import load_spec

from .conftest import tiny_spec


@pytest.mark.netns(timeout=300)
def test_ray_and_local_executors_give_the_same_results_table(tmp_path, data_dir) -> None:
    pytest.importorskip("ray")
    spec_path = tiny_spec(tmp_path / "s.toml", steps=16, every=8, ckpt=8, extra='nuisance = ["optim.lr"]',
                          axes='"model.placement" = ["post", "pre"]\n"optim.lr" = [1e-3, 3e-3]')
    tables = {}
    for executor in ("local", "ray"):
        store = run_study(load_spec(spec_path), tmp_path / executor, executor=executor,
                          workers=2 if executor == "ray" else 1)
        trials = store.trials()
        assert len(trials) == 8 and {t.status for t in trials} == {"completed"}
        assert all((t.run_dir / "summary.json").is_file() for t in trials)
        tables[executor] = format_results(results(trials, ["model.placement"], ["optim.lr"]))
    # Same seeds, same configs, one torch thread per trial: bit-identical training.
    assert tables["ray"] == tables["local"]
    assert "+/-" in tables["local"] and "post" in tables["local"]
    ray_workers = {t.worker for t in store.trials()}
    assert len(ray_workers) == 1  # the ray driver held every lease; tasks never touched SQLite
