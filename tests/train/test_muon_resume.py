"""Muon and the wsd schedule through whole runs: stopped half-way and resumed, a run ends with the
weights, optimizer state and metrics of the run that was never stopped, bit for bit; and the
smoke preset trains with each when chosen by --set."""

from __future__ import annotations

import json
import math
import os
import signal

import pytest
from safetensors.torch import load_file

from normlab.core.fsutil import read_jsonl
from normlab.train import run_training

STEPS = ("train.steps=20", "train.checkpoint_every=10", "train.eval_every=10", "train.log_every=2")


def _latest(run) -> tuple[dict, dict, dict]:
    """The final checkpoint's weights, optimizer tensors and optimizer JSON (groups, scalars)."""
    folder = run / "checkpoints" / "latest"
    state = json.loads((folder / "state.json").read_text())
    return load_file(str(folder / "model.safetensors")), load_file(str(folder / "optimizer.safetensors")), \
        state["optimizer"]


@pytest.mark.parametrize("optim", [("optim.name=muon",), ("optim.schedule=wsd",),
                                   ("optim.name=muon", "optim.schedule=wsd", "optim.decay_shape=linear")],
                         ids=["muon", "wsd", "muon+wsd"])
def test_stopped_half_way_and_resumed_equals_the_straight_run(tmp_path, tiny, monkeypatch, optim):
    """The stop is a SIGINT at step 11's first batch (the resume test's way): the checkpoint holds
    step 10 of a 20-step run, so the resumed run keeps the schedule of train.steps=20 (wsd decays
    over its last 4 steps), and Muon's momentum and the AdamW moments come back from the files."""
    from normlab.train.loop import Trainer

    cfg = tiny.cfg(*STEPS, *optim)
    assert run_training(cfg, tmp_path / "ref", quiet=True)["status"] == "completed"
    real = Trainer._batch

    def batch(self, s, m):
        if (s, m) == (10, 0):
            os.kill(os.getpid(), signal.SIGINT)
        return real(self, s, m)

    monkeypatch.setattr(Trainer, "_batch", batch)
    run = tmp_path / "run"
    s = run_training(cfg, run, quiet=True)
    assert s["status"] == "interrupted" and s["steps"] == 10
    monkeypatch.setattr(Trainer, "_batch", real)
    assert run_training(None, run, resume=True, quiet=True)["status"] == "completed"
    (w_ref, o_ref, meta_ref), (w, o, meta) = _latest(tmp_path / "ref"), _latest(run)
    assert w_ref.keys() == w.keys() and all(w_ref[k].equal(w[k]) for k in w_ref)  # bitwise (equal: same dtype)
    assert o_ref.keys() == o.keys() and all(o_ref[k].equal(o[k]) for k in o_ref)
    assert meta_ref == meta
    assert tiny.comparable(run) == tiny.comparable(tmp_path / "ref")
    if "optim.name=muon" in optim:  # the momentum buffers travelled (a resume without them would differ)
        assert any(k.endswith(".momentum_buffer") for k in o) and any(k.endswith(".exp_avg") for k in o)
        assert meta["param_groups"][0]["ns_steps"] == 5 and meta["param_groups"][0]["lr"] > 0


@pytest.mark.parametrize("sets", [("optim.name=muon",), ("optim.schedule=wsd",),
                                  ("optim.name=muon", "optim.schedule=wsd")], ids=["muon", "wsd", "muon+wsd"])
def test_the_smoke_preset_trains_with_muon_and_wsd(tmp_path, data_dir, sets):
    """`normlab train --preset smoke --set optim.name=muon --set optim.schedule=wsd`: the loss
    stays finite and falls, and config.json records the choice."""
    from normlab.cli import main

    args = ["train", "--quiet", "--preset", "smoke", "--out", str(tmp_path / "run")]
    for item in sets:
        args += ["--set", item]
    assert main(args) == 0
    rows = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "train/loss" in r]
    losses = [r["train/loss"] for r in rows]
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0] - 0.5, losses  # from ln 65 = 4.17 toward the unigram entropy and below
    optim = json.loads((tmp_path / "run" / "config.json").read_text())["optim"]
    chosen = {k.removeprefix("optim."): v for k, v in (item.split("=") for item in sets)}
    assert {k: optim.get(k) for k in chosen} == chosen
