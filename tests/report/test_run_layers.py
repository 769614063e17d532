"""The run page's layer section comes from the diagnostics' analysis of a real checkpoint, the
one the run has now: a run resumed past its analysis is measured again."""

from __future__ import annotations

import json
import shutil

import pytest

from normlab.report import build_report
from normlab.report.pages import build_report as page_only
from normlab.run.dir import RunDir
from normlab.run.resolve import resolve
from normlab.train import run_training


def _analysis(run) -> dict:
    return json.loads((run / "analysis" / "analysis.json").read_text())


@pytest.mark.slow
def test_run_report_has_layer_similarity_and_deletion(tmp_path, data_dir):
    cfg = resolve("smoke", overrides=["train.steps=10", "train.eval_every=5", f"data.data_dir={data_dir}"])
    run = tmp_path / "run"
    run_training(cfg, run, quiet=True)
    page = build_report(run)
    html = page.read_text()
    assert "Layers of the model at step 10 (checkpoint best" in html
    for name in ("layer_similarity", "layer_deletion"):
        assert (page.parent / "figures" / f"{name}.png").stat().st_size > 0
    res = _analysis(run)  # what the page was drawn from
    assert len(res["deletion_loss"]) == cfg.model.n_layer
    assert len(res["angular_distance"]) == cfg.model.n_layer + 1
    assert res["checkpoint"] == RunDir(run).checkpoint_identity()


@pytest.mark.slow
def test_resumed_run_is_measured_on_its_newest_checkpoint(tmp_path, data_dir):
    cfg = resolve("smoke", overrides=["train.steps=10", "train.eval_every=5", f"data.data_dir={data_dir}"])
    run = tmp_path / "run"
    run_training(cfg, run, quiet=True)
    build_report(run)
    stale = _analysis(run)
    assert stale["checkpoint"]["step"] == 10
    shutil.copy(run / "analysis" / "analysis.json", tmp_path / "stale.json")

    run_training(None, run, resume=True, steps=40, quiet=True)
    newest = RunDir(run).checkpoint_identity("latest")
    assert newest is not None and newest["step"] == 40
    assert RunDir(run).checkpoint_identity() == {**newest, "checkpoint": "best"}  # best moved with it

    html = build_report(run).read_text()
    fresh = _analysis(run)
    assert fresh["checkpoint"] == RunDir(run).checkpoint_identity()
    assert fresh["checkpoint"]["sha256"] == newest["sha256"] != stale["checkpoint"]["sha256"]
    assert fresh["val_loss"] < stale["val_loss"] and fresh["deletion_loss"] != stale["deletion_loss"]
    assert "Layers of the model at step 40 (checkpoint best" in html and "not of the model above" not in html

    # an analysis that cannot be redone (here: the page alone, no prepare) says whose it is
    shutil.copy(tmp_path / "stale.json", run / "analysis" / "analysis.json")
    html = page_only(run).read_text()
    assert "Layers of the model at step 10" in html
    assert "the run&#x27;s checkpoint is now step 40: they are not of the model above" in html
