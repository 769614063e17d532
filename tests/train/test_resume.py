"""Kill -9 or Ctrl-C a run after a checkpoint, resume it, and get the uninterrupted metrics bit for bit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from normlab.core.fsutil import read_jsonl
from normlab.train import run_training

# Long enough (in steps) that the kill lands mid-run; tiny enough to take a few seconds.
LONG = ("train.steps=300", "train.checkpoint_every=20", "train.eval_every=50", "train.log_every=7",
        "model.dropout=0.1")  # dropout: the resumed run must also restore the RNG state


def _start(run: Path, tiny) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "normlab", "train", "--quiet", "--out", str(run), *tiny.args(*LONG)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ))


def _wait_for_checkpoint(proc: subprocess.Popen, run: Path, at_least: int = 20) -> int:
    state = run / "checkpoints" / "latest" / "state.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if state.is_file():
            step = json.loads(state.read_text())["loop"]["step"]
            if step >= at_least:
                return step
        if proc.poll() is not None:
            pytest.fail(f"run ended before a checkpoint: {proc.stderr.read().decode()}")
        time.sleep(0.01)
    proc.kill()
    pytest.fail("no checkpoint within 120 s")


@pytest.fixture(scope="session")
def reference(shared_dir, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """Metrics of the uninterrupted LONG run, trained once per session (every worker reads it)."""
    from .conftest import comparable, tiny_cfg

    if not (Path(os.environ.get("NORMLAB_DATA_DIR", "/nonexistent")) / "tinyshakespeare.txt").is_file():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")  # as the tiny fixture does

    def build(out: Path) -> None:
        with pytest.MonkeyPatch.context() as mp:  # the autouse cache fixture has not run yet
            mp.setenv("NORMLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
            run_training(tiny_cfg(*LONG), out / "ref", quiet=True)

    return comparable(shared_dir("train-long-reference", build) / "ref")


@pytest.mark.slow
def test_sigkill_then_resume_reproduces_metrics_bitwise(tmp_path, tiny, reference):
    run = tmp_path / "run"
    proc = _start(run, tiny)
    step = _wait_for_checkpoint(proc, run)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (run / "summary.json").exists(), "the run finished before the kill; nothing was tested"
    assert step < 300
    rc = subprocess.run([sys.executable, "-m", "normlab", "train", "--quiet", "--resume", str(run)],
                        capture_output=True, text=True).returncode
    assert rc == 0
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"
    resumed = tiny.comparable(run)
    assert [r["step"] for r in resumed] == sorted({r["step"] for r in resumed})  # no duplicates
    assert resumed == reference


@pytest.mark.slow
def test_ctrl_c_checkpoints_and_marks_interrupted(tmp_path, tiny):
    run = tmp_path / "run"
    proc = _start(run, tiny)
    _wait_for_checkpoint(proc, run)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    summary = json.loads((run / "summary.json").read_text())
    assert proc.returncode == 130, err.decode()
    assert summary["status"] == "interrupted" and 20 <= summary["steps"] < 300
    state = json.loads((run / "checkpoints" / "latest" / "state.json").read_text())
    assert state["loop"]["step"] == summary["steps"]        # checkpoint written at the stop
    assert all(r["step"] <= summary["steps"] for r in read_jsonl(run / "metrics.jsonl"))
    s = run_training(None, run, resume=True, quiet=True)
    assert s["status"] == "completed" and s["steps"] == 300


def test_resume_of_a_finished_run_is_a_no_op(tmp_path, tiny):
    first = run_training(tiny.cfg("train.steps=5"), tmp_path / "run", quiet=True)
    before = (tmp_path / "run" / "metrics.jsonl").read_bytes()
    assert run_training(None, tmp_path / "run", resume=True, quiet=True) == first
    assert (tmp_path / "run" / "metrics.jsonl").read_bytes() == before


@pytest.mark.slow
def test_sigterm_leaves_a_resumable_run_with_a_summary(tmp_path, tiny, reference):
    run = tmp_path / "run"
    proc = _start(run, tiny)
    _wait_for_checkpoint(proc, run)
    proc.send_signal(signal.SIGTERM)  # what a scheduler or `kill` sends
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err.decode()  # 128 + SIGTERM, as a shell reports it
    assert b"resume with: normlab train --resume" in err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "interrupted" and 20 <= summary["steps"] < 300
    state = json.loads((run / "checkpoints" / "latest" / "state.json").read_text())
    assert state["loop"]["step"] == summary["steps"]
    s = run_training(None, run, resume=True, quiet=True)
    assert s["status"] == "completed" and s["steps"] == 300
    assert tiny.comparable(run) == reference


def test_ctrl_c_mid_step_abandons_the_step_at_once_and_resume_matches(tmp_path, tiny, monkeypatch):
    """A signal inside forward/backward does not wait for the step's remaining micro-batches
    (a long step would delay the stop by its whole length); the checkpoint is the last
    completed step, RNG included, so the resumed run equals the uninterrupted one."""
    from normlab.train.loop import Trainer

    extra = ("train.grad_accum=2", "model.dropout=0.1")
    run_training(tiny.cfg(*extra), tmp_path / "ref", quiet=True)
    real, asked = Trainer._batch, []

    def batch(self, s, m):
        asked.append((s, m))
        if (s, m) == (12, 0):  # step 13's first micro-batch: the signal lands mid-step
            os.kill(os.getpid(), signal.SIGINT)
        return real(self, s, m)

    monkeypatch.setattr(Trainer, "_batch", batch)
    run = tmp_path / "run"
    s = run_training(tiny.cfg(*extra), run, quiet=True)
    assert s["status"] == "interrupted" and s["steps"] == 12
    assert (12, 1) not in asked, "the step ran to its end before stopping"
    assert json.loads((run / "summary.json").read_text())["status"] == "interrupted"
    assert json.loads((run / "checkpoints" / "latest" / "state.json").read_text())["loop"]["step"] == 12
    monkeypatch.setattr(Trainer, "_batch", real)
    assert run_training(None, run, resume=True, quiet=True)["status"] == "completed"
    assert tiny.comparable(run) == tiny.comparable(tmp_path / "ref")


def test_a_signal_during_backward_abandons_the_step_before_the_backward_ends(tmp_path, tiny, monkeypatch):
    """The backward is one call into torch, so the loop's gradient hooks are where a signal can
    act. The signal is made pending from hooks written in C (no Python runs in the main thread
    between them, as in a real backward): when the backward reaches its first tensor, a helper
    thread sends SIGINT to itself (the handler is left for the main thread) while the main
    thread waits on a queue. The step then stops before every gradient is there, and the run
    resumes to the uninterrupted metrics. On a CPU only: on a GPU the backward runs in the
    device's thread, where Python runs no signal handler."""
    import queue
    import threading

    from normlab.train.loop import Trainer

    extra = ("train.grad_accum=2", "model.dropout=0.1", "train.device=cpu")
    run_training(tiny.cfg(*extra), tmp_path / "ref", quiet=True)
    real_batch, real_loss, target = Trainer._batch, Trainer._loss, [False]
    reached, sent, grads_at_stop = queue.SimpleQueue(), queue.SimpleQueue(), []

    def signal_from_helper() -> None:
        reached.get()
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        sent.put(None)  # what the waiting hook returns: the gradient unchanged

    def batch(self, s, m):
        target[0] = (s, m) == (12, 0)  # step 13's first micro-batch
        return real_batch(self, s, m)

    def loss(self, x, y):
        obj, ce, log_z = real_loss(self, x, y)
        if target[0]:
            real_zero = self.opt.zero_grad

            def zero_grad(set_to_none=True):
                grads_at_stop.append([p.grad is not None for p in self.params])
                real_zero(set_to_none=set_to_none)

            self.opt.zero_grad = zero_grad
            obj.register_hook(reached.put)  # the objective's gradient: the backward's first
            obj.register_hook(sent.get)  # blocks (its gradient, a nonzero scalar, is block=True) until sent
        return obj, ce, log_z

    helper = threading.Thread(target=signal_from_helper, daemon=True)
    helper.start()
    monkeypatch.setattr(Trainer, "_batch", batch)
    monkeypatch.setattr(Trainer, "_loss", loss)
    run = tmp_path / "run"
    s = run_training(tiny.cfg(*extra), run, quiet=True)
    helper.join(timeout=60)
    assert s["status"] == "interrupted" and s["steps"] == 12
    assert grads_at_stop and not all(grads_at_stop[0]), "the backward ran to its end before stopping"
    assert json.loads((run / "checkpoints" / "latest" / "state.json").read_text())["loop"]["step"] == 12
    monkeypatch.undo()
    assert run_training(None, run, resume=True, quiet=True)["status"] == "completed"
    assert tiny.comparable(run) == tiny.comparable(tmp_path / "ref")


def test_an_extension_killed_part_way_resumes_to_its_new_total(tmp_path, tiny):
    """An extension (``--steps`` past a finished run) raises config.json's train.steps when it
    starts and rewrites summary.json only when it ends; killed between, the run holds the old
    total's summary beside a config asking for more. Resumed, it trains on to the new total,
    and its metrics are those of an extension never killed (here: killed before its first new
    checkpoint, so it restarts from the old final one)."""
    import shutil

    from normlab.run.dir import RunDir

    straight, killed = tmp_path / "straight", tmp_path / "killed"
    run_training(tiny.cfg("train.steps=10", "train.checkpoint_every=5"), straight, quiet=True)
    shutil.copytree(straight, killed)
    done = run_training(None, straight, resume=True, steps=20, quiet=True)
    assert done["steps"] == 20
    run = RunDir(killed)  # what the killed extension left: the raised config, the old summary
    cfg = run.config("--resume")
    run.write_config(type(cfg).from_json(cfg.to_json().replace('"steps": 10', '"steps": 20')))
    assert run.config("--resume").train.steps == 20 and run.summary()["steps"] == 10
    s = run_training(None, killed, resume=True, steps=20, quiet=True)
    assert s["status"] == "completed" and s["steps"] == 20
    assert tiny.comparable(killed) == tiny.comparable(straight)
