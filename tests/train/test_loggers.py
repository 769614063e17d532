"""W&B (offline, the real package) and TensorBoard loggers: what they hold equals metrics.jsonl.

Both read back what the library wrote (the .wandb transaction log, the event files), so a
logger that silently drops, renames or reorders steps fails here.
"""

from __future__ import annotations

import json
import math

import pytest

from normlab.core.fsutil import read_jsonl
from normlab.train import run_training

from .logreaders import tensorboard_hparams, tensorboard_scalars, wandb_run


@pytest.fixture
def wandb_offline(monkeypatch, tmp_path):
    for var, value in {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONFIG_DIR": tmp_path / "wb-cfg",
                       "WANDB_CACHE_DIR": tmp_path / "wb-cache", "WANDB_DATA_DIR": tmp_path / "wb-data"}.items():
        monkeypatch.setenv(var, str(value))


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-12)


@pytest.mark.usefixtures("wandb_offline")
def test_wandb_history_config_summary_and_resumed_run_id(tmp_path, tiny):
    run = tmp_path / "run"
    run_training(tiny.cfg('train.loggers=["wandb"]', "train.steps=20"), run, quiet=True)
    summary = run_training(None, run, resume=True, quiet=True, steps=30)  # extends: a second W&B session
    first, second = wandb_run(run)
    assert first["id"] == second["id"], "the resumed run must continue the same W&B run"
    rows = read_jsonl(run / "metrics.jsonl")
    history = first["history"] + second["history"]
    assert [h["step"] for h in history] == [r["step"] for r in rows] == list(range(5, 31, 5))
    for h, r in zip(history, rows):
        assert set(h) == set(r), (h, r)
        assert all(_same(h[k], r[k]) for k in r), (h, r)
    cfg = json.loads((run / "config.json").read_text())
    assert second["config"]["model"] == cfg["model"] and second["config"]["train"]["steps"] == 30
    assert _same(second["summary"]["best_val_loss"], summary["best_val_loss"])
    assert second["summary"]["status"] == "completed" and second["summary"]["steps"] == 30


def test_tensorboard_scalars_equal_metrics_jsonl(tmp_path, tiny):
    run = tmp_path / "run"
    run_training(tiny.cfg('train.loggers=["tensorboard"]'), run, quiet=True)
    scalars = tensorboard_scalars(run / "tensorboard")
    rows = read_jsonl(run / "metrics.jsonl")
    for key in ("train/loss", "val/loss", "lr", "grad_norm", "tokens"):
        want = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
        got = scalars[key]
        assert [s for s, _ in got] == [s for s, _ in want], key
        assert all(math.isclose(g, w, rel_tol=1e-6) for (_, g), (_, w) in zip(got, want)), key  # float32


@pytest.mark.usefixtures("wandb_offline")
def test_study_trials_share_a_wandb_group_and_write_tensorboard_hparams(tmp_path, data_dir, monkeypatch):
    from normlab.study.runner import run_study
    from normlab.study.spec import spec_from_dict

    monkeypatch.setenv("NORMLAB_CACHE_DIR", str(tmp_path / "cache"))
    base = {"model": {"n_layer": 2, "d_model": 32, "n_head": 2, "context": 16},
            "optim": {"warmup_steps": 1},
            "train": {"steps": 4, "batch_size": 4, "eval_every": 4, "eval_batches": 1, "log_every": 2,
                      "loggers": ["wandb", "tensorboard"]}}
    spec = spec_from_dict({"name": "wb-study", "base": base, "axes": {"model.placement": ["post", "pre"]},
                           "seeds": [0], "metric": "final_val_loss"})
    store = run_study(spec, tmp_path / "store", workers=1)
    trials = store.trials()
    assert len(trials) == 2 and all(t.status == "completed" for t in trials)
    for t in trials:
        (session,) = wandb_run(t.run_dir)
        assert session["group"] == "wb-study"
        assert session["config"]["model.placement"] == t.params["model.placement"]
        assert session["config"]["seed"] == 0
        values, metrics = tensorboard_hparams(t.run_dir / "tensorboard")
        assert values == {"model.placement": t.params["model.placement"], "seed": 0}
        assert metrics == ["hparam/final_val_loss"]
        tag = tensorboard_scalars(t.run_dir / "tensorboard")["hparam/final_val_loss"]
        assert math.isclose(tag[0][1], t.summary["final_val_loss"], rel_tol=1e-6)
