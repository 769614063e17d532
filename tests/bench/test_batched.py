"""Trial batching: every trial of a batched run reproduces its solo run (tiny model, few steps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from normlab.core.errors import UserError
from normlab.core.fsutil import read_jsonl
from normlab.data.config import DataConfig
from normlab.model.config import ModelConfig
from normlab.run.resolve import RunConfig
from normlab.run.train_config import OptimConfig, TrainConfig


def tiny(data_dir: Path, seed: int = 1, placement: str = "pre", **optim) -> RunConfig:
    o = {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 3, **optim}
    return RunConfig(
        model=ModelConfig(n_layer=2, d_model=32, n_head=2, context=16, placement=placement),
        data=DataConfig(data_dir=str(data_dir)),
        optim=OptimConfig(**o),
        train=TrainConfig(steps=12, batch_size=4, eval_every=6, eval_batches=2, log_every=1,
                          checkpoint_every=6, device="cpu"),
        seed=seed)


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def test_batched_trials_match_solo_runs(data_dir: Path, tmp_path: Path) -> None:
    from normlab.train import run_training
    from normlab.train.run import run_batched

    cfgs = [tiny(data_dir, seed=1),
            tiny(data_dir, seed=2, lr=1e-2, warmup_steps=0, grad_clip=0.0),
            tiny(data_dir, seed=3, lr=5e-3, schedule="linear", z_loss=1e-3, weight_decay=0.0, beta2=0.95),
            tiny(data_dir, seed=4, schedule="wsd", decay_frac=0.5, decay_shape="linear")]
    dirs = [tmp_path / f"b{i}" for i in range(len(cfgs))]
    summaries = run_batched(cfgs, dirs, quiet=True)
    assert [s["status"] for s in summaries] == ["completed"] * 4
    losses = []
    for i, cfg in enumerate(cfgs):
        solo = run_training(cfg, tmp_path / f"s{i}", quiet=True)
        got, want = read_jsonl(dirs[i] / "metrics.jsonl"), read_jsonl(tmp_path / f"s{i}" / "metrics.jsonl")
        assert [r["step"] for r in got] == [r["step"] for r in want] == list(range(1, 13))
        for g, w in zip(got, want):
            assert _rel(g["train/loss"], w["train/loss"]) < 1e-4, (i, g["step"])
            assert _rel(g["grad_norm"], w["grad_norm"]) < 1e-3, (i, g["step"])
            assert g["lr"] == pytest.approx(w["lr"], rel=1e-12)
            assert ("val/loss" in g) == ("val/loss" in w)
            if "val/loss" in w:
                assert _rel(g["val/loss"], w["val/loss"]) < 1e-4
        assert _rel(summaries[i]["final_val_loss"], solo["final_val_loss"]) < 1e-4
        assert summaries[i]["steps"] == solo["steps"] == 12
        losses.append([r["train/loss"] for r in got])
        # same run-directory contract as a solo run
        for name in ("config.json", "env.json", "summary.json", "checkpoints/latest/model.safetensors",
                     "checkpoints/latest/optimizer.safetensors", "checkpoints/best/model.safetensors"):
            assert (dirs[i] / name).is_file(), name
        assert RunConfig.from_json((dirs[i] / "config.json").read_text()).seed == cfg.seed
        assert json.loads((dirs[i] / "summary.json").read_text())["status"] == "completed"
    assert losses[0] != losses[1]  # the trials really were different runs


def test_batched_checkpoint_holds_the_solo_optimizer_state(data_dir: Path, tmp_path: Path) -> None:
    """The AdamW state exported from the stack is the one a solo run would checkpoint."""
    import torch
    from safetensors.torch import load_file

    from normlab.train import run_training
    from normlab.train.run import run_batched

    cfg = tiny(data_dir, seed=5)
    run_training(cfg, tmp_path / "solo", quiet=True)
    run_batched([cfg, tiny(data_dir, seed=6)], [tmp_path / "b", tmp_path / "other"], quiet=True)
    want = load_file(str(tmp_path / "solo" / "checkpoints" / "latest" / "optimizer.safetensors"))
    got = load_file(str(tmp_path / "b" / "checkpoints" / "latest" / "optimizer.safetensors"))
    assert sorted(got) == sorted(want) and any(k.endswith("exp_avg_sq") for k in got)
    for k in want:
        assert torch.allclose(got[k].float(), want[k].float(), rtol=1e-3, atol=1e-7), k
    w_model = load_file(str(tmp_path / "solo" / "checkpoints" / "latest" / "model.safetensors"))
    g_model = load_file(str(tmp_path / "b" / "checkpoints" / "latest" / "model.safetensors"))
    for k in w_model:
        assert (g_model[k] - w_model[k]).abs().max() < 1e-4, (k, (g_model[k] - w_model[k]).abs().max())
    state = json.loads((tmp_path / "b" / "checkpoints" / "latest" / "state.json").read_text())
    assert state["loop"]["step"] == 12


def test_divergent_trial_is_dropped_and_others_continue(data_dir: Path, tmp_path: Path) -> None:
    from normlab.train.run import run_batched

    cfgs = [tiny(data_dir, seed=1, placement="post"),
            tiny(data_dir, seed=1, placement="post", lr=1.0, warmup_steps=0, grad_clip=0.0)]
    cfgs[1].train.diverge_loss = 5.0
    out = run_batched(cfgs, [tmp_path / "ok", tmp_path / "bad"], quiet=True)
    assert out[0]["status"] == "completed" and out[0]["steps"] == 12
    assert out[1]["status"] == "diverged"
    assert out[1]["diverged_at_step"] is not None and out[1]["diverged_at_step"] <= out[1]["steps"]
    last = read_jsonl(tmp_path / "bad" / "metrics.jsonl")[-1]
    assert last["diverged"] is True and last["step"] == out[1]["steps"]


@pytest.mark.parametrize("change, message", [
    ({"model": {"dropout": 0.1}}, "dropout"),
    ({"model": {"placement": "ngpt"}}, "ngpt"),
    ({"train": {"diag_every": 5}}, "diag_every"),
    ({"optim": {"name": "muon"}}, "optim.name='muon'"),
])
def test_incompatible_single_config_refused(data_dir: Path, tmp_path: Path, change: dict, message: str) -> None:
    from normlab.core.schema import merge
    from normlab.train.run import compatible, incompatibility, run_batched

    cfg = RunConfig.from_dict(merge(json.loads(tiny(data_dir).to_json()), change))
    assert not compatible([cfg, cfg])
    assert message in incompatibility([cfg, cfg])
    with pytest.raises(UserError, match=message):
        run_batched([cfg, cfg], [tmp_path / "a", tmp_path / "b"])
    assert not (tmp_path / "a").exists()  # refused before touching any run directory


def test_compatibility_rules(data_dir: Path) -> None:
    from normlab.train.run import compatible, incompatibility

    a = tiny(data_dir, seed=1)
    assert compatible([a, tiny(data_dir, seed=2, lr=1e-2, warmup_steps=0)])
    b = tiny(data_dir)
    b.model.n_layer = 3
    assert "model section differs" in incompatibility([a, b])
    c = tiny(data_dir)
    c.train.batch_size = 8
    assert "train section differs" in incompatibility([a, c])
    d = tiny(data_dir)
    d.train.diverge_loss = 7.0
    assert compatible([a, d])
    assert not compatible([])


def test_a_batched_trial_killed_midway_resumes_alone_from_its_checkpoint(data_dir: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """What the study runner relies on: a batched worker dies, each trial resumes solo; as a
    solo run's, each trial's summary says it failed and why."""
    from normlab.train import run_training
    from normlab.train.metrics import Metrics
    from normlab.train.run import run_batched

    cfgs = [tiny(data_dir, seed=1), tiny(data_dir, seed=2, lr=1e-2)]
    dirs = [tmp_path / "b0", tmp_path / "b1"]
    real_line = Metrics.log

    def dying_line(self, step, metrics):  # the worker "dies" at step 9, after the step-6 checkpoint
        if step == 9:
            raise SystemExit("killed")
        real_line(self, step, metrics)

    monkeypatch.setattr(Metrics, "log", dying_line)
    with pytest.raises(SystemExit):
        run_batched(cfgs, dirs, quiet=True)
    monkeypatch.setattr(Metrics, "log", real_line)
    for cfg, d in zip(cfgs, dirs):
        summary = json.loads((d / "summary.json").read_text())
        assert summary["status"] == "failed" and summary["error"] == "SystemExit: killed" and summary["batched"]
        resumed = run_training(cfg, d, resume=True, quiet=True)
        solo = run_training(cfg, tmp_path / f"solo{cfg.seed}", quiet=True)
        assert resumed["status"] == "completed" and resumed["steps"] == 12
        got = [r for r in read_jsonl(d / "metrics.jsonl") if "train/loss" in r]
        want = [r for r in read_jsonl(tmp_path / f"solo{cfg.seed}" / "metrics.jsonl") if "train/loss" in r]
        assert [r["step"] for r in got] == [r["step"] for r in want]  # no duplicated or missing steps
        assert max(_rel(a["train/loss"], b["train/loss"]) for a, b in zip(got, want)) <= 1e-4
        assert _rel(resumed["best_val_loss"], solo["best_val_loss"]) <= 1e-4


def test_batched_trials_pass_the_solo_pre_flight_before_anything_is_written(data_dir: Path, tmp_path: Path) -> None:
    """The batched loop runs each trial through the solo run's checks (``train.plan.prepare``):
    an unusable run directory is one UserError naming the flag, and no other trial's
    directory is created."""
    from normlab.train.run import run_batched

    (tmp_path / "a-file").write_text("not a directory")
    cfgs = [tiny(data_dir, seed=1), tiny(data_dir, seed=2)]
    with pytest.raises(UserError, match="--out"):
        run_batched(cfgs, [tmp_path / "ok", tmp_path / "a-file" / "run"], quiet=True)
    assert not (tmp_path / "ok").exists()


def test_a_signal_checkpoints_every_trial_and_each_resumes_alone(data_dir: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C or SIGTERM during a batch: the step in flight finishes, every trial is checkpointed
    at it and marked interrupted (as the solo loop does), and each resumes solo to the solo run."""
    import os
    import signal

    from normlab.train import batched, run_training
    from normlab.train.run import run_batched

    cfgs = [tiny(data_dir, seed=1), tiny(data_dir, seed=2)]
    dirs = [tmp_path / "s0", tmp_path / "s1"]
    real_lr = batched.lr_now

    def signalling_lr(optim, s, steps):  # SIGTERM arrives while step 4 (1-based) is computed
        if s == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return real_lr(optim, s, steps)

    monkeypatch.setattr(batched, "lr_now", signalling_lr)
    out = run_batched(cfgs, dirs, quiet=True)
    monkeypatch.setattr(batched, "lr_now", real_lr)
    assert [o["status"] for o in out] == ["interrupted", "interrupted"] and [o["steps"] for o in out] == [4, 4]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is given back
    for cfg, d in zip(cfgs, dirs):
        assert json.loads((d / "checkpoints" / "latest" / "state.json").read_text())["loop"]["step"] == 4
        resumed = run_training(cfg, d, resume=True, quiet=True)
        solo = run_training(cfg, tmp_path / f"solo{cfg.seed}", quiet=True)
        assert resumed["status"] == "completed" and resumed["steps"] == 12
        assert _rel(resumed["best_val_loss"], solo["best_val_loss"]) <= 1e-4
