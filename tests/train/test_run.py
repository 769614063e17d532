"""Training runs: the run directory contract, determinism, divergence, diagnostics hook."""

from __future__ import annotations

import json

import pytest
import torch

from normlab.core.fsutil import read_jsonl
from normlab.run.resolve import RunConfig
from normlab.train import run_training

REQUIRED = {"step", "tokens", "train/loss", "lr", "grad_norm", "time/step_s", "tokens_per_s"}


def test_run_directory_contract(tmp_path, tiny):
    cfg = tiny.cfg()
    s = run_training(cfg, tmp_path / "run", quiet=True)
    run = tmp_path / "run"
    assert s["status"] == "completed" and s["steps"] == 30 and s["diverged_at_step"] is None
    assert json.loads((run / "summary.json").read_text()) == s
    stored = RunConfig.from_json((run / "config.json").read_text())
    assert stored.model.vocab_size == 65 and stored.train.steps == 30   # resolved, incl. vocab
    env = json.loads((run / "env.json").read_text())
    assert {"python", "torch", "numpy", "device", "git", "seed", "argv", "hostname", "time"} <= env.keys()
    rows = read_jsonl(run / "metrics.jsonl")
    assert [r["step"] for r in rows] == [5, 10, 15, 20, 25, 30]
    assert all(REQUIRED <= r.keys() for r in rows)
    assert [r["step"] for r in rows if "val/loss" in r] == [10, 20, 30]
    assert rows[-1]["tokens"] == 30 * 4 * 16
    assert s["final_val_loss"] == rows[-1]["val/loss"]
    assert s["best_val_loss"] == min(r["val/loss"] for r in rows if "val/loss" in r)
    # warm-up 5 then cosine: step 5 logs lr of step index 4 = peak
    assert rows[0]["lr"] == pytest.approx(1e-3)
    assert rows[0]["train/loss"] == pytest.approx(4.17, abs=0.15)  # ~ln(65) at init
    for name in ("latest", "best"):
        assert (run / "checkpoints" / name / "model.safetensors").is_file()
    assert (run / "checkpoints" / "latest" / "optimizer.safetensors").is_file()
    assert not list(run.rglob("*.pt")) and not list(run.rglob("*.pkl"))


def test_same_seed_same_metrics_other_seed_differs(tmp_path, tiny):
    a = run_training(tiny.cfg(), tmp_path / "a", quiet=True)
    b = run_training(tiny.cfg(), tmp_path / "b", quiet=True)
    c = run_training(tiny.cfg("seed=7"), tmp_path / "c", quiet=True)
    assert tiny.comparable(tmp_path / "a") == tiny.comparable(tmp_path / "b")
    assert a["final_val_loss"] == b["final_val_loss"] != c["final_val_loss"]


def test_divergence_is_recorded_not_raised(tmp_path, tiny):
    # Post-LN at lr 1.0 with no warm-up and no clipping blows up within a few steps.
    cfg = tiny.cfg("optim.lr=1.0", "optim.min_lr=1.0", "optim.warmup_steps=0", "optim.schedule=constant",
                   "optim.grad_clip=0.0", "train.diverge_loss=8.0", "train.steps=200", placement="post")
    s = run_training(cfg, tmp_path / "run", quiet=True)
    assert s["status"] == "diverged"
    assert 1 <= s["diverged_at_step"] < 200 and s["steps"] < 200
    assert s["final_val_loss"] is None
    last = read_jsonl(tmp_path / "run" / "metrics.jsonl")[-1]
    assert last.get("diverged") is True and last["step"] >= s["diverged_at_step"]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "diverged"


def test_refuses_to_overwrite_an_existing_run(tmp_path, tiny):
    from normlab.core.errors import UserError

    run_training(tiny.cfg("train.steps=5"), tmp_path / "run", quiet=True)
    before = {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()}
    with pytest.raises(UserError, match="already holds a run"):
        run_training(tiny.cfg("train.steps=5"), tmp_path / "run", quiet=True)
    assert {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()} == before


def test_z_loss_logs_log_z(tmp_path, tiny):
    run_training(tiny.cfg("optim.z_loss=1e-4", "train.steps=10"), tmp_path / "run", quiet=True)
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    # Near init the logits are ~0, so log Z ~ ln(65) = 4.17.
    assert rows[0]["train/log_z"] == pytest.approx(4.17, abs=0.3)


def test_diagnostics_hook_follows_the_contract(tmp_path, tiny, monkeypatch):
    calls = []

    class Fake:
        def __init__(self, model, run_dir, fixed_batch, every, optimizer, sharpness_every, sharpness_iters):
            calls.append(("init", every, tuple(fixed_batch[0].shape), run_dir == tmp_path / "run",
                          isinstance(optimizer, torch.optim.Optimizer), sharpness_every, sharpness_iters))
            self.every = every

        def active(self, step):
            return step % self.every == 0

        def before_forward(self, step):
            calls.append(("before_forward", step))

        def after_backward(self, step):
            calls.append(("after_backward", step))

        def after_step(self, step, metrics):
            calls.append(("after_step", step, "train/loss" in metrics))

        def close(self):
            calls.append(("close",))

        def record(self, loss, grad_norm):  # every step, device tensors (the spike window)
            calls.append(("record", loss.dim(), grad_norm.dim()))

        def state(self, step):
            calls.append(("state", step))
            return {"step": step}

        def load_state(self, state, step):
            calls.append(("load_state", state, step))

    # the composition root's name for the class (it builds the diagnostics from their cadence)
    monkeypatch.setattr("normlab.train.run.TrainingDiagnostics", Fake)
    run_training(tiny.cfg("train.steps=8", "train.diag_every=4", "train.checkpoint_every=0"), tmp_path / "run",
                 quiet=True)
    step = [("record", 0, 0)]
    assert calls == [("init", 4, (4, 16), True, True, 0, 20), ("load_state", None, 0), *step * 3,
                     ("before_forward", 4), ("after_backward", 4), *step, ("after_step", 4, True), *step * 3,
                     ("before_forward", 8), ("after_backward", 8), *step, ("after_step", 8, True),
                     ("state", 8), ("state", 8), ("close",)]  # the best and the latest checkpoint
