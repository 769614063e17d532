"""``normlab.run.dir.RunDir``: what it writes reads back, a damaged checkpoint is never loaded,
and a run is recognised by its files (no training: a tiny model saved by hand)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from normlab.core.errors import UserError
from normlab.model.config import ModelConfig
from normlab.model.transformer import TransformerLM
from normlab.run.dir import RunDir
from normlab.run.resolve import RunConfig


class _Tok:
    def state(self) -> dict:
        return {"kind": "char", "chars": "ab"}


def _run(tmp_path: Path) -> tuple[RunDir, RunConfig, TransformerLM]:
    cfg = RunConfig(model=ModelConfig(n_layer=1, d_model=16, n_head=2, context=8, vocab_size=11))
    run = RunDir(tmp_path / "run")
    run.write_config(cfg)
    run.write_env({"host": "h"})
    torch.manual_seed(0)
    model = TransformerLM(cfg.model)
    for name in ("latest", "best"):
        run.save_checkpoint(name, model, {"loop": {"step": 3}, "tokenizer": _Tok().state()})
    return run, cfg, model


def test_what_is_written_reads_back(tmp_path: Path) -> None:
    run, cfg, model = _run(tmp_path)
    assert run.is_run() and run.holds_run() and not run.is_report_run()
    assert run.config() == cfg
    run.append_metrics(1, {"train/loss": 3.0})
    run.append_metrics(2, {"train/loss": 2.0})
    with open(run.path / "metrics.jsonl", "a") as fh:  # a killed run's torn last line
        fh.write('{"step": 3, "tra')
    assert [r["step"] for r in run.metrics()] == [1, 2] and run.is_report_run()
    run.truncate_logs(1)
    assert [r["step"] for r in run.metrics()] == [1]
    run.write_env({"host": "again"}, resume=True)
    assert run.env() == {"host": "h", "resumes": [{"host": "again"}]}
    assert run.summary() is None
    run.write_summary({"status": "completed"})
    assert run.summary() == {"status": "completed"}
    loaded, got_cfg, state = run.load_model("best")
    assert got_cfg == cfg and state["loop"]["step"] == 3 and not loaded.training
    for a, b in zip(loaded.state_dict().values(), model.state_dict().values()):
        assert torch.equal(a, b)


def test_a_damaged_checkpoint_is_an_error_naming_the_intact_one(tmp_path: Path) -> None:
    run, _, _ = _run(tmp_path)
    with open(run.checkpoint_dir("best") / "model.safetensors", "ab") as fh:
        fh.write(b"x")
    assert run.find_checkpoint("best") is None and run.checkpoint_problem("best")
    with pytest.raises(UserError, match=r"checkpoints/best is damaged .*use --checkpoint latest"):
        run.load_model("best")
    assert run.pick_checkpoint("latest") == run.checkpoint_dir("latest")


def test_not_a_run(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "nothing")
    assert not run.is_run() and not run.holds_run() and run.metrics() == [] and run.summary() is None
    with pytest.raises(UserError, match="sample .*nothing: no config.json there"):
        run.config("sample")
    (tmp_path / "nothing").mkdir()
    (tmp_path / "nothing" / "summary.json").write_text("{bad")
    with pytest.raises(UserError, match="summary.json: damaged .*delete it and `normlab train --resume"):
        run.summary()
