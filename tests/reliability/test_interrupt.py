"""Ctrl-C of ``normlab train`` and ``normlab study run`` (a real process, SIGINT by pid): exit 130 and one
line naming the exact command that resumes, and that command does resume."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from normlab.cli import main

SRC = Path(__file__).resolve().parents[2] / "src"
TINY = ["model.n_layer=2", "model.d_model=32", "model.n_head=2", "model.context=16", "train.batch_size=4",
        "train.steps=200", "train.eval_every=100", "train.eval_batches=2", "train.log_every=10",
        "train.checkpoint_every=10", "train.threads=1"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
            "OMP_NUM_THREADS": "1"}


def _wait_for(pattern: str, root: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if list(root.glob(pattern)):
            return
        if proc.poll() is not None:
            pytest.fail(f"ended before {pattern} appeared: {proc.communicate()[1]}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"no {pattern} within 180 s")


def _stop(proc: subprocess.Popen) -> str:
    """SIGINT by pid, as Ctrl-C sends it; the process's stderr."""
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    return err


def _resume_command(err: str, command: str) -> list[str]:
    # Progress lines may come first; the interruption is one line, and the last.
    lines = err.strip().splitlines()
    said = [ln for ln in lines if "interrupted" in ln]
    assert said == lines[-1:] and said[0].startswith(f"normlab {command}: interrupted; "), err
    assert "resume with: normlab " in said[0], err
    argv = shlex.split(said[0].split("resume with: ", 1)[1])
    assert argv[0] == "normlab"
    return argv[1:]


@pytest.mark.usefixtures("data_dir")
def test_ctrl_c_of_train_names_the_resume_command_and_it_resumes(tmp_path, capsys):
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "normlab", "train", "--quiet", "--out", str(run)]
    for s in TINY:
        argv += ["--set", s]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env())
    _wait_for("checkpoints/latest/state.json", run, proc)
    resume = _resume_command(_stop(proc), "train")
    assert resume == ["train", "--resume", str(run)]
    assert main([*resume, "--quiet"]) == 0
    assert "completed, 200 steps" in capsys.readouterr().err


@pytest.mark.usefixtures("data_dir")
def test_ctrl_c_of_study_run_names_the_resume_command_and_it_resumes(tmp_path, capsys):
    """One worker: the trial, in the study's own process, takes the signal, checkpoints and stops."""
    spec = tmp_path / "s.toml"
    base = "\n".join(f"{k.split('.')[1]} = {v}" for k, v in (s.split("=") for s in TINY if s.startswith("train.")))
    model = "\n".join(f"{k.split('.')[1]} = {v}" for k, v in (s.split("=") for s in TINY if s.startswith("model.")))
    spec.write_text(f'name = "stop"\nseeds = [0]\n[base.model]\n{model}\n[base.train]\n{base}\n'
                    '[axes]\n"model.placement" = ["pre"]\n')
    store = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-m", "normlab", "study", "run", str(spec), "--store", str(store),
                             "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=_env())
    _wait_for("runs/*/checkpoints/latest/state.json", store, proc)
    resume = _resume_command(_stop(proc), "study")
    assert resume == ["study", "run", "--store", str(store), "--workers", "1"]
    from normlab.study.store import Store

    s = Store(store)
    assert s.counts() == {"interrupted": 1}, s.counts()
    s.close()
    assert main(resume) == 0
    s = Store(store)
    assert s.counts() == {"completed": 1}
    s.close()


def test_ctrl_c_in_the_study_process_itself_names_the_resume_command(tmp_path, capsys, monkeypatch):
    """The resume line keeps the executor flags (the study process interrupted in place; real
    signals to a two-worker study: test_study_signals.py)."""
    from normlab.study import runner

    def stopped(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_study", stopped)
    code = main(["study", "run", "pre-vs-post", "--scale", "smoke", "--store", str(tmp_path / "st my"),
                 "--workers", "3", "--executor", "local", "--lease", "30"])
    err = capsys.readouterr().err
    assert code == 130
    assert _resume_command(err, "study") == ["study", "run", "--store", str(tmp_path / "st my"), "--workers", "3",
                                             "--lease", "30.0"]
