"""Checkpoints without pickle: safetensors for tensors, JSON for everything else.

A checkpoint is a directory ``RUN/checkpoints/<name>/`` holding

  model.safetensors      weights (``safetensors.torch.save_model`` handles the tied head)
  optimizer.safetensors  AdamW moments and step counters, flattened ``"<param>.<key>"``
  rng.safetensors        torch CPU (and CUDA) generator states, for dropout
  state.json             loop counters, accumulators, optimizer param groups, tokenizer

It is written to ``<name>.tmp/`` and swapped in by renames, so a kill at any moment
leaves a complete ``<name>/`` or, during the two-rename window, a complete ``<name>.old/``
that :func:`find` falls back to.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from torch import nn

from normlab.fsutil import atomic_write_json
from normlab.train.optim import flatten_state, unflatten_state


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save(folder: Path, model: nn.Module, state: dict[str, Any],
         optimizer: torch.optim.Optimizer | None = None) -> None:
    """Write a complete checkpoint to ``folder`` atomically (see the module docstring)."""
    from safetensors.torch import save_file, save_model

    folder = Path(folder)
    tmp, old = folder.with_name(folder.name + ".tmp"), folder.with_name(folder.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / "model.safetensors"))
    meta = dict(state)
    if optimizer is not None:
        tensors, opt_meta = flatten_state(optimizer)
        save_file(tensors, str(tmp / "optimizer.safetensors"))
        meta["optimizer"] = opt_meta
    rng = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            rng[f"cuda{i}"] = s
    save_file(rng, str(tmp / "rng.safetensors"))
    atomic_write_json(tmp / "state.json", meta)
    for f in tmp.iterdir():  # data on disk before the rename makes it visible
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    _fsync_dir(tmp)
    if folder.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(folder, old)
    os.replace(tmp, folder)
    _fsync_dir(folder.parent)
    shutil.rmtree(old, ignore_errors=True)


def find(folder: Path) -> Path | None:
    """The complete checkpoint at ``folder``, or its ``.old`` twin after an interrupted swap."""
    folder = Path(folder)
    for cand in (folder, folder.with_name(folder.name + ".old")):
        if (cand / "state.json").is_file() and (cand / "model.safetensors").is_file():
            return cand
    return None


def read_state(folder: Path) -> dict[str, Any]:
    return json.loads((Path(folder) / "state.json").read_text(encoding="utf-8"))


def load(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
         restore_rng: bool = True) -> dict[str, Any]:
    """Load weights (and optimizer, RNG) from a checkpoint; returns its ``state.json``."""
    from safetensors.torch import load_file, load_model

    folder = Path(folder)
    state = read_state(folder)
    load_model(model, str(folder / "model.safetensors"))
    if optimizer is not None and (folder / "optimizer.safetensors").is_file():
        tensors = load_file(str(folder / "optimizer.safetensors"))
        optimizer.load_state_dict(unflatten_state(tensors, state["optimizer"]))
    if restore_rng and (folder / "rng.safetensors").is_file():
        rng = load_file(str(folder / "rng.safetensors"))
        torch.set_rng_state(rng["cpu"])
        cuda = [rng[k] for k in sorted(rng) if k.startswith("cuda")]
        if cuda and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(cuda[: torch.cuda.device_count()])
    return state
