"""No file normlab loads can run code: pickles planted in run directories are never unpickled."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

from normlab.run import checkpoint
from normlab.train import run_training

from .conftest import tiny_cfg

SRC = Path(__file__).resolve().parents[2] / "src" / "normlab"


class Payload:
    """Unpickling this calls ``open(marker, "w")``: the marker file proves code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _plant(folder: Path, marker: Path) -> None:
    for name in ("optimizer.pt", "model.bin", "pytorch_model.bin", "state.pkl", "rng.pt", "extra.safetensors"):
        torch.save({"state": Payload(marker)}, folder / name)  # a pickle, whatever the suffix


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_planted_pickles_in_a_checkpoint_are_never_loaded(tmp_path):
    marker = tmp_path / "PWNED"
    run = tmp_path / "run"
    run_training(tiny_cfg("train.steps=10"), run, quiet=True)
    for name in ("latest", "best"):
        _plant(run / "checkpoints" / name, marker)
    _plant(run, marker)
    # resume from latest, load best, sample: everything that reads the run directory
    from normlab.model.transformer import TransformerLM
    from normlab.train.optim import make_optimizer

    cfg = tiny_cfg("model.vocab_size=65")
    m = TransformerLM(cfg.model)
    checkpoint.load(run / "checkpoints" / "latest", m, make_optimizer(m, cfg.optim))
    checkpoint.load(run / "checkpoints" / "best", m)
    (run / "summary.json").unlink()  # make resume do real work: reload the checkpoint
    run_training(None, run, resume=True, quiet=True)
    from normlab.cli import main

    assert main(["sample", str(run), "--tokens", "5"]) == 0
    assert not marker.exists()


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_pickle_swapped_in_for_a_checkpoint_file_is_refused_without_running(tmp_path):
    marker = tmp_path / "PWNED"
    run = tmp_path / "run"
    run_training(tiny_cfg("train.steps=10"), run, quiet=True)
    ckpt = run / "checkpoints" / "latest"
    for name in ("optimizer.safetensors", "model.safetensors"):
        torch.save(Payload(marker), ckpt / name)
        assert checkpoint.find(ckpt) is None
        with pytest.raises(checkpoint.UserError, match=name):
            checkpoint.load(ckpt, torch.nn.Linear(1, 1))
    assert not marker.exists()


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_pickle_as_model_safetensors_in_model_io_is_refused(tmp_path):
    from normlab.core.errors import UserError
    from normlab.model.io import save_model
    from normlab.model.transformer import TransformerLM

    marker = tmp_path / "PWNED"
    save_model(TransformerLM(tiny_cfg("model.vocab_size=65").model), tmp_path / "m")
    torch.save(Payload(marker), tmp_path / "m" / "model.safetensors")
    with pytest.raises(UserError, match="model.safetensors"):
        TransformerLM.load(tmp_path / "m")
    assert not marker.exists()


def test_source_has_no_unsafe_deserialisers():
    """Any torch.load must pass weights_only=True; no pickle/marshal/yaml.load/numpy allow_pickle."""
    bad = []
    for f in SRC.rglob("*.py"):
        text = f.read_text(encoding="utf-8")
        for m in re.finditer(r"torch\.load\(([^)]*)\)", text):
            if "weights_only=True" not in m.group(1):
                bad.append(f"{f}: {m.group(0)}")
        for pat in (r"\bimport pickle\b", r"\bpickle\.loads?\(", r"\bmarshal\.loads?\(", r"\byaml\.load\(",
                    r"allow_pickle\s*=\s*True", r"\bdill\b", r"\bjoblib\.load\("):
            if re.search(pat, text):
                bad.append(f"{f}: {pat}")
    assert not bad, bad
    assert os.path.isdir(SRC)
