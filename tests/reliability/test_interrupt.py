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
        "train.steps=400", "train.eval_every=100", "train.eval_batches=2", "train.log_every=10",
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


def _stop(proc: subprocess.Popen, group: bool) -> str:
    """SIGINT, as Ctrl-C sends it (to the process, or to its whole group as a terminal does); its stderr."""
    if group:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    return err


def _resume_command(err: str, command: str) -> list[str]:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"normlab {command}: interrupted; "), err
    assert "resume with: normlab " in lines[0], err
    argv = shlex.split(lines[0].split("resume with: ", 1)[1])
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
    resume = _resume_command(_stop(proc, group=False), "train")
    assert resume == ["train", "--resume", str(run)]
    assert main([*resume, "--quiet"]) == 0
    assert "completed, 400 steps" in capsys.readouterr().err


@pytest.mark.usefixtures("data_dir")
@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_of_study_run_names_the_resume_command_and_it_resumes(tmp_path, capsys, workers):
    spec = tmp_path / "s.toml"
    short = [s for s in TINY if s != "train.steps=400"] + ["train.steps=150"]  # two trials resume in parallel
    base = "\n".join(f"{k.split('.')[1]} = {v}" for k, v in (s.split("=") for s in short if s.startswith("train.")))
    model = "\n".join(f"{k.split('.')[1]} = {v}" for k, v in (s.split("=") for s in TINY if s.startswith("model.")))
    spec.write_text(f'name = "stop"\nseeds = [0]\n[base.model]\n{model}\n[base.train]\n{base}\n'
                    f'[axes]\n"model.placement" = {["pre", "post"][:workers]}\n'.replace("'", '"'))
    store = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-m", "normlab", "study", "run", str(spec), "--store", str(store),
                             "--workers", str(workers)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=_env(), start_new_session=True)
    _wait_for("runs/*/checkpoints/latest/state.json", store, proc)
    resume = _resume_command(_stop(proc, group=workers > 1), "study")
    assert resume == ["study", "run", "--store", str(store), "--workers", str(workers)]
    from normlab.study.store import Store

    s = Store(store)
    assert set(s.counts()) <= {"interrupted", "pending", "completed"} and s.counts().get("interrupted"), s.counts()
    s.close()
    if workers == 1:  # the same command line either way; running it once is enough (worker processes are slow to start)
        assert main(resume) == 0
        s = Store(store)
        assert s.counts() == {"completed": 1}
        s.close()
