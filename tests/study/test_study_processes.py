"""Real processes on one store: SIGKILL mid-study then rerun; two study commands at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from normlab.core.fsutil import read_jsonl
from normlab.study.store import Store

from .conftest import cli, tiny_spec

STEPS = 120


def test_sigkill_midway_then_rerun_completes_each_trial_exactly_once(tmp_path, data_dir) -> None:
    spec = tiny_spec(tmp_path / "s.toml", steps=STEPS, every=60, ckpt=10)
    root = tmp_path / "store"
    env = {**os.environ, "NORMLAB_DATA_DIR": str(data_dir)}
    proc = subprocess.Popen(cli("study", "run", str(spec), "--store", str(root), "--workers", "2"),
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # Kill the whole study (main process and its workers) once one trial is done and another
    # is part-way, with a checkpoint on disk: the worst moment for a resumable store.
    deadline, killed = time.time() + 120, False
    while time.time() < deadline and proc.poll() is None:
        if (root / "spec.json").exists():
            trials = Store(root).trials()
            done = [t for t in trials if t.status == "completed"]
            midway = [t for t in trials if t.status == "running" and (t.run_dir / "checkpoints" / "latest").exists()]
            if done and midway:
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
                break
        time.sleep(0.05)
    proc.wait(timeout=30)
    assert killed, f"study ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    before = Store(root)
    assert before.unfinished() > 0 and before.counts().get("running", 0) >= 1

    rerun = subprocess.run(cli("study", "run", "--store", str(root), "--workers", "1"), env=env,
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    store = Store(root)
    trials = store.trials()
    assert len(trials) == 4 and {t.status for t in trials} == {"completed"}
    resumed = 0
    for t in trials:
        events = [e["event"] for e in store.events(t.id)]
        assert events.count("completed") == 1, (t.id, events)
        summary = json.loads((t.run_dir / "summary.json").read_text())
        assert summary["status"] == "completed" and summary["steps"] == STEPS == t.summary["steps"]
        steps = [r["step"] for r in read_jsonl(t.run_dir / "metrics.jsonl")]
        assert steps == sorted(set(steps)) and steps[-1] == STEPS  # no step logged twice, none lost
        env_json = json.loads((t.run_dir / "env.json").read_text())
        if "lost" in events:
            assert t.attempts == 2
            resumed += "resumes" in env_json  # run_training continued from RUN/checkpoints/latest
        else:
            assert t.attempts == 1 and "resumes" not in env_json
    assert resumed >= 1
    assert set(os.listdir(root / "runs")) == {t.id for t in trials}
    assert "completed 4" in rerun.stdout


def test_two_study_processes_on_one_store_run_each_trial_once(tmp_path, fake_path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(f'name = "two"\ntrial = "{fake_path}:ok"\nseeds = [0, 1, 2, 3]\n'
                    '[axes]\n"optim.lr" = [1e-3, 3e-3]\n')
    root = tmp_path / "store"
    env = {**os.environ, "NORMLAB_FAKE_SLEEP": "0.4"}
    cmd = cli("study", "run", str(spec), "--store", str(root), "--workers", "1")
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-1000:] for o in outs]
    store = Store(root)
    trials = store.trials()
    assert len(trials) == 8 and {t.status for t in trials} == {"completed"}
    calls = Path(root / "calls.log").read_text().split()
    assert sorted(calls) == sorted(t.id for t in trials)  # every trial ran, and only once
    assert all(t.attempts == 1 for t in trials)
    claims = [e for e in store.events() if e["event"] == "claim"]
    assert len(claims) == 8
