"""The run page's layer section comes from the diagnostics' analysis of a real checkpoint."""

from __future__ import annotations

import json

import pytest

from normlab.report import build_report
from normlab.run.resolve import resolve
from normlab.train import run_training


@pytest.mark.slow
def test_run_report_has_layer_similarity_and_deletion(tmp_path, data_dir):
    cfg = resolve("smoke", overrides=["train.steps=10", "train.eval_every=5", f"data.data_dir={data_dir}"])
    run = tmp_path / "run"
    run_training(cfg, run, quiet=True)
    page = build_report(run)
    html = page.read_text()
    assert "Layers of the final model (checkpoint" in html
    for name in ("layer_similarity", "layer_deletion"):
        assert (page.parent / "figures" / f"{name}.png").stat().st_size > 0
    res = json.loads((run / "analysis" / "analysis.json").read_text())  # what the page was drawn from
    assert len(res["deletion_loss"]) == cfg.model.n_layer
    assert len(res["angular_distance"]) == cfg.model.n_layer + 1
