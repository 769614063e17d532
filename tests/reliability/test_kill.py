"""SIGKILL at random steps and inside every write a run makes; resume must give the uninterrupted metrics.

Each kill happens in a forked child (fast: torch is already imported) through a patched
writer that dies at a chosen moment, e.g. after half of a file is on disk. The parent then
checks that nothing torn is readable and resumes in-process. Complements
tests/train/test_resume.py (a real ``normlab train`` process killed after a checkpoint).
"""

from __future__ import annotations

import json
import logging
import os
import random
from pathlib import Path

import pytest

from normlab.core.fsutil import read_jsonl
from normlab.run import checkpoint
from normlab.train import run_training

from .conftest import comparable, die, in_child, tiny_cfg


def _run_and_die_at(run: Path, patch) -> None:
    def child() -> None:
        with pytest.MonkeyPatch.context() as mp:
            patch(mp)
            run_training(tiny_cfg(), run, quiet=True)

    sig = in_child(child)
    assert sig == 9, "the child was not killed: the fault point was never reached"
    assert not (run / "summary.json").exists()


def _kill_in_checkpoint_file(name: str, nth: int):
    """Die after writing half of ``name`` in the nth checkpoint of latest."""
    def patch(mp: pytest.MonkeyPatch) -> None:
        import safetensors.torch as st

        seen = {"n": 0}
        real = {"save_file": st.save_file, "save_model": st.save_model}

        def wrap(fn_name):
            def fake(obj, path, *a, **k):
                real[fn_name](obj, path, *a, **k)
                p = Path(path)
                if p.parent.name == "latest.tmp" and p.name == name:
                    seen["n"] += 1
                    if seen["n"] == nth:
                        os.truncate(p, p.stat().st_size // 2)
                        die()
            return fake

        mp.setattr(st, "save_file", wrap("save_file"))
        mp.setattr(st, "save_model", wrap("save_model"))
    return patch


def _kill_between_renames(nth: int):
    def patch(mp: pytest.MonkeyPatch) -> None:
        real, seen = os.replace, {"n": 0}

        def fake(src, dst, *a, **k):
            if Path(src).name == "latest.tmp":
                seen["n"] += 1
                if seen["n"] == nth:
                    die()  # latest/ was already renamed to latest.old/
            return real(src, dst, *a, **k)

        mp.setattr(checkpoint.os, "replace", fake)
    return patch


def _kill_mid_log_line(step: int):
    def patch(mp: pytest.MonkeyPatch) -> None:
        from normlab.run import dir as rundir

        real = rundir.append_jsonl

        def fake(path, obj):
            if obj.get("step") == step:
                line = json.dumps(obj)
                with open(path, "a") as fh:  # half a line, no newline: a torn write
                    fh.write(line[: len(line) // 2])
                die()
            real(path, obj)

        mp.setattr(rundir, "append_jsonl", fake)
    return patch


def _kill_at_step(step: int):
    def patch(mp: pytest.MonkeyPatch) -> None:
        from normlab.train.loop import Trainer

        real = Trainer._batch

        def fake(self, s, m):
            if s == step:
                die()
            return real(self, s, m)

        mp.setattr(Trainer, "_batch", fake)
    return patch


_RNG = random.Random(9)  # fixed: the "random" steps are the same in every CI run
FAULTS = {
    "optimizer-file-half-written": _kill_in_checkpoint_file("optimizer.safetensors", 2),
    "model-file-half-written": _kill_in_checkpoint_file("model.safetensors", 3),
    "between-the-two-renames": _kill_between_renames(2),
    "metrics-line-torn": _kill_mid_log_line(25),
    **{f"step-{s}": _kill_at_step(s) for s in sorted(_RNG.sample(range(1, 40), 3))},
}


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
@pytest.mark.parametrize("fault", list(FAULTS))
def test_kill_anywhere_then_resume_matches_uninterrupted_run(fault, tmp_path, reference):
    run = tmp_path / "run"
    _run_and_die_at(run, FAULTS[fault])
    # What a reader sees right after the kill: whole JSON files and lines only.
    json.loads((run / "config.json").read_text())
    rows = read_jsonl(run / "metrics.jsonl")
    assert all(isinstance(r["step"], int) for r in rows)
    found = checkpoint.find(run / "checkpoints" / "latest")
    if found is not None:
        assert checkpoint.problem(found) is None
        assert checkpoint.read_state(found)["loop"]["step"] % 10 == 0
    summary = run_training(None, run, resume=True, quiet=True)
    assert summary["status"] == "completed" and summary["steps"] == 40
    assert comparable(run) == reference


def _corrupt(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncate":
        path.write_bytes(bytes(data[: len(data) - 100]))
    else:  # flip one bit in the tensor data: safetensors itself cannot notice this
        data[-7] ^= 0x10
        path.write_bytes(bytes(data))


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
@pytest.mark.parametrize("name", ["model.safetensors", "optimizer.safetensors", "rng.safetensors"])
@pytest.mark.parametrize("how", ["truncate", "bitflip"])
def test_damaged_checkpoint_is_never_loaded_and_resume_still_matches(name, how, tmp_path, reference, caplog):
    run = tmp_path / "run"
    _run_and_die_at(run, _kill_at_step(25))  # latest = step 20
    ckpt = run / "checkpoints" / "latest"
    _corrupt(ckpt / name, how)
    assert checkpoint.find(ckpt) is None
    with pytest.raises(checkpoint.UserError, match=name):
        checkpoint.load(ckpt, tiny_model())
    with caplog.at_level(logging.WARNING, logger="normlab"):
        summary = run_training(None, run, resume=True, quiet=True)  # restarts from 0, same numbers
    assert any("restarting the run from step 0" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert summary["status"] == "completed" and comparable(run) == reference


def tiny_model():
    from normlab.model.config import ModelConfig
    from normlab.model.transformer import TransformerLM

    return TransformerLM(ModelConfig(n_layer=2, d_model=32, n_head=2, context=16, vocab_size=65))
