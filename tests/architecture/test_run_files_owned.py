"""Every file a run's tools write under RUN/ is one ``RunDir`` names (``RunDir.OWNED``): found
by training, analysing and reporting a run, not from a hand-kept list of file names."""

from __future__ import annotations

from pathlib import Path

import pytest

from normlab.run.dir import OWNED, RunDir
from normlab.run.resolve import resolve


def _written(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    from normlab.report import build_report
    from normlab.train import run_training

    run = tmp_path_factory.mktemp("owned") / "run"
    cfg = resolve("smoke", overrides=["train.steps=4", "train.eval_every=2", "train.checkpoint_every=2",
                                      "train.keep_checkpoints=true", "train.diag_every=2",
                                      "train.log_every=1", "model.n_layer=1"])
    run_training(cfg, run, quiet=True)
    build_report(run)  # the page, and the layer analysis it reads (report.prepare)
    return run


def test_every_file_of_a_trained_analysed_reported_run_is_owned(trained: Path) -> None:
    files = _written(trained)
    tops = {f.split("/")[0] for f in files}
    # the run wrote what the contract says, so the check below is not vacuous
    assert {"config.json", "metrics.jsonl", "summary.json", "checkpoints", "analysis", "report"} <= tops
    assert "diagnostics.jsonl" in tops
    assert [f for f in files if not RunDir.owns(f)] == []


def test_a_stray_file_is_not_owned(trained: Path) -> None:
    assert not RunDir.owns("notes.txt")
    assert not RunDir.owns("metrics.jsonl/extra")  # a file entry owns nothing below it
    assert RunDir.owns("checkpoints/best/model.safetensors")
    assert all(RunDir.owns(e.rstrip("/") + ("/x" if e.endswith("/") else "")) for e in OWNED)
