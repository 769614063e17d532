"""The step cadence shared by the solo and the batched loop, and the shared clipping."""

from __future__ import annotations

import pytest
import torch

from normlab.run.train_config import TrainConfig
from normlab.train.cadence import Cadence
from normlab.train.step import clip_grads_


def _plans(c: Cadence) -> dict[str, list[int]]:
    steps = range(1, c.steps + 1)
    return {"eval": [s for s in steps if c.is_eval(s)], "log": [s for s in steps if c.is_log(s)],
            "ckpt": [s for s in steps if c.is_ckpt(s)], "diag": [s for s in steps if c.is_diag(s)]}


def test_steps_named_by_the_intervals() -> None:
    p = _plans(Cadence(steps=12, eval_every=6, log_every=4, checkpoint_every=5, diag_every=3))
    assert p == {"eval": [6, 12], "log": [4, 6, 8, 12], "ckpt": [5, 10, 12], "diag": [3, 6, 9, 12]}


@pytest.mark.parametrize("steps, eval_every, log_every, ckpt_every", [
    (7, 3, 2, 4), (10, 0, 3, 0), (1, 5, 5, 5), (13, 13, 1, 13), (20, 7, 9, 0)])
def test_last_step_evaluates_logs_and_checkpoints(steps: int, eval_every: int, log_every: int,
                                                  ckpt_every: int) -> None:
    c = Cadence(steps, eval_every, log_every, ckpt_every)
    plan = c.what(steps)
    assert plan.eval and plan.log and plan.ckpt and plan.sync


def test_every_eval_step_is_a_log_step() -> None:
    # log_every does not divide eval_every: the eval steps still write their metrics line
    c = Cadence(steps=30, eval_every=7, log_every=4, checkpoint_every=0)
    evals = [s for s in range(1, 31) if c.is_eval(s)]
    assert evals == [7, 14, 21, 28, 30]
    assert all(c.is_log(s) for s in evals)
    assert not c.is_log(27)


def test_zero_intervals_mean_only_the_last_step() -> None:
    c = Cadence(steps=9, eval_every=0, log_every=2, checkpoint_every=0)
    p = _plans(c)
    assert p["eval"] == [9] and p["ckpt"] == [9] and p["diag"] == []
    assert p["log"] == [2, 4, 6, 8, 9]


def test_sync_steps_are_the_steps_of_any_kind() -> None:
    c = Cadence(steps=12, eval_every=0, log_every=5, checkpoint_every=0, diag_every=4)
    assert [s for s in range(1, 13) if c.what(s).sync] == [4, 5, 8, 10, 12]
    assert not c.what(3).sync and c.what(4).diag and not c.what(4).log


def test_built_from_the_train_config() -> None:
    t = TrainConfig(steps=50, eval_every=20, log_every=10, checkpoint_every=25, diag_every=15)
    assert Cadence.of(t) == Cadence(50, 20, 10, 25, 15)
    assert _plans(Cadence.of(t))["ckpt"] == [25, 50]


def test_direct_construction_is_checked() -> None:
    with pytest.raises(ValueError, match="log_every"):
        Cadence(steps=10, eval_every=0, log_every=0, checkpoint_every=0)
    with pytest.raises(ValueError, match="checkpoint_every"):
        Cadence(steps=10, eval_every=0, log_every=1, checkpoint_every=-1)


@pytest.mark.parametrize("max_norm", [float("inf"), 1e-3, 0.5, 1e6])
def test_shared_clipping_is_bitwise_clip_grad_norm(max_norm: float) -> None:
    """Both loops clip with clip_grads_; the solo loop's numbers must stay clip_grad_norm_'s."""
    torch.manual_seed(0)
    shapes = [(7, 5), (5,), (3, 4, 2), (1,)]
    a = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    for p, q in zip(a, b):
        p.grad = torch.randn(p.shape) * 3
        q.grad = p.grad.clone()
    want = torch.nn.utils.clip_grad_norm_(a, max_norm)
    got = clip_grads_([q.grad for q in b], max_norm)
    assert torch.equal(got, want)
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(a, b))
    after = float(torch.linalg.vector_norm(torch.cat([q.grad.flatten() for q in b])))
    if max_norm < float(want):  # the gradients really were scaled down to the threshold
        assert after == pytest.approx(max_norm, rel=1e-4)
    else:
        assert after == pytest.approx(float(want), rel=1e-6)


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_diagnostics_see_the_gradients_before_clipping(tmp_path) -> None:
    """after_backward runs before clipping: the per-group norms of diagnostics.jsonl add up
    (root of the sum of squares) to the unclipped global norm of metrics.jsonl."""
    from normlab.core.fsutil import read_jsonl
    from normlab.train import run_training

    from .conftest import tiny_cfg

    cfg = tiny_cfg("train.steps=4", "train.log_every=1", "train.diag_every=1", "optim.grad_clip=0.01")
    run_training(cfg, tmp_path / "run", quiet=True)
    metrics = {r["step"]: r["grad_norm"] for r in read_jsonl(tmp_path / "run" / "metrics.jsonl")}
    diag = {r["step"]: r["grad_norm"] for r in read_jsonl(tmp_path / "run" / "diagnostics.jsonl")}
    assert sorted(diag) == sorted(metrics) == [1, 2, 3, 4]
    for step, groups in diag.items():
        assert metrics[step] > 0.1  # far above the threshold: clipping really scaled these steps
        assert sum(g * g for g in groups) ** 0.5 == pytest.approx(metrics[step], rel=1e-4), step


def test_divergence_rule() -> None:
    from normlab.train.step import diverged

    loss = torch.tensor([1.0, float("nan"), 30.0, 2.0, 3.0])
    norm = torch.tensor([1.0, 1.0, 1.0, float("inf"), 5.0])
    assert diverged(loss, norm, 20.0).tolist() == [False, True, True, True, False]


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_batched_trial_with_a_non_finite_gradient_diverges_at_that_step(tmp_path, monkeypatch) -> None:
    """As in the solo loop, a non-finite gradient norm with a finite loss ends the trial at
    that step (before the fix the batched loop only looked at the loss)."""
    from normlab.train import stack
    from normlab.train.run import run_batched

    from .conftest import tiny_cfg

    real = stack.Stack.step

    def poisoned(self, lrs, step):
        norms = real(self, lrs, step)
        if step == 5 and len(lrs) == 2:
            norms[1] = float("inf")
        return norms

    monkeypatch.setattr(stack.Stack, "step", poisoned)
    cfgs = [tiny_cfg("train.steps=8", "train.log_every=1", f"seed={s}") for s in (1, 2)]
    out = run_batched(cfgs, [tmp_path / "a", tmp_path / "b"], quiet=True)
    assert out[0]["status"] == "completed" and out[0]["steps"] == 8
    assert out[1]["status"] == "diverged" and out[1]["diverged_at_step"] == 5 and out[1]["steps"] == 5


@pytest.mark.slow
def test_ddp_ranks_sync_at_diagnostics_steps(tmp_path, tiny) -> None:
    """Step 3 is a diagnostics step but not a log step: every rank must reach the same
    collectives there (rank 0 alone used to, and gloo failed with a collective mismatch)."""
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("torch.distributed")
    run = tmp_path / "ddp"
    steps = ("train.steps=6", "train.log_every=4", "train.eval_every=0", "train.checkpoint_every=0",
             "train.batch_size=8", "train.diag_every=3")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "normlab", "train", "--quiet", "--out", str(run), *tiny.args(*steps)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"),
                          timeout=300)
    # The run's own files decide (with the mismatch rank 1 died and no summary was written);
    # the launcher's exit status also reflects process-group teardown, which is not tested here.
    assert (run / "summary.json").is_file(), proc.stderr[-3000:]
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"
    assert [r["step"] for r in tiny.comparable(run)] == [4, 6]
    assert [json.loads(line)["step"] for line in (run / "diagnostics.jsonl").read_text().splitlines()] == [3, 6]


@pytest.mark.parametrize("steps, want", [(2000, 250), (200, 25), (20, 2), (7, 1), (1, 1), (20000, 2500)])
def test_eval_interval_follows_the_steps_unless_set(steps: int, want: int) -> None:
    # Unset (none): about 8 validations whatever the length; 2000 steps keep the old 250.
    c = Cadence.of(TrainConfig(steps=steps))
    assert c.eval_every == want
    assert len([s for s in range(1, steps + 1) if c.what(s).eval]) == steps // want + (steps % want != 0)
    # Set, it is kept whatever the length (0: only the last step).
    assert Cadence.of(TrainConfig(steps=steps, eval_every=250)).eval_every == 250
    assert [s for s in range(1, steps + 1) if Cadence.of(TrainConfig(steps=steps, eval_every=0)).what(s).eval] == [steps]


def test_presets_keep_their_pinned_interval() -> None:
    from normlab.run.resolve import resolve

    assert resolve("nanogpt-cpu").train.eval_every == 250
    assert resolve("nanogpt-cpu", overrides=["train.eval_every=none"]).train.eval_every == 1400 // 8
    cfg = resolve(None, overrides=["train.steps=400"])
    assert Cadence.of(cfg.train).eval_every == 50 and cfg.to_dict()["train"]["eval_every"] == 50  # recorded
    assert resolve(None).to_dict()["train"]["eval_every"] == 250  # the old default, so old trial ids hold


def test_kept_checkpoints_start_at_initialisation_solo_and_batched(tmp_path) -> None:
    """train.keep_checkpoints keeps the model at step 0 (before any update) as step_000000, in
    the solo loop and the batched one alike, beside every checkpoint step."""
    from safetensors.torch import load_file

    from normlab.run.dir import RunDir
    from normlab.train.run import run_batched, run_training

    from .conftest import tiny_cfg

    sets = ("train.steps=4", "train.checkpoint_every=2", "train.keep_checkpoints=true")
    run_training(tiny_cfg(*sets, "seed=1"), tmp_path / "solo", quiet=True)
    run_batched([tiny_cfg(*sets, f"seed={s}") for s in (1, 2)], [tmp_path / "b1", tmp_path / "b2"], quiet=True)
    kept = {name: RunDir(tmp_path / name).step_checkpoints() for name in ("solo", "b1", "b2")}
    assert {name: [s for s, _ in k] for name, k in kept.items()} == {n: [0, 2, 4] for n in kept}
    w = {name: [load_file(f / "model.safetensors") for _, f in k] for name, k in kept.items()}
    assert all(torch.equal(w["solo"][0][k], w["b1"][0][k]) for k in w["solo"][0])  # same seed, same init
    assert any(not torch.equal(w["b1"][0][k], w["b2"][0][k]) for k in w["b1"][0])  # another seed, another init
    assert any(not torch.equal(w["solo"][0][k], w["solo"][1][k]) for k in w["solo"][0])  # step 2 trained
