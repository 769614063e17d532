"""Checkpoints without pickle: safetensors for tensors, JSON for everything else.

A checkpoint is a directory (``RunDir.checkpoint_dir(name)`` places it in a run) holding

  model.safetensors      weights (``safetensors.torch.save_model`` handles the tied head)
  optimizer.safetensors  AdamW moments and step counters (Muon's momentum), flattened ``"<param>.<key>"``
  rng.safetensors        torch CPU (and CUDA) generator states, for dropout
  state.json             loop counters, accumulators, optimizer param groups, tokenizer
  model_config.json      the ModelConfig, so the folder is also a ``normlab.model.io`` model dir
  manifest.json          byte size and sha256 of each file above, written last

It is written to ``<name>.tmp/`` and swapped in by renames, so a kill at any moment
leaves a complete ``<name>/`` or, during the two-rename window, a complete ``<name>.old/``
that :func:`find` falls back to. The manifest makes "complete" checkable: a checkpoint whose
files do not match it (truncated by a full disk, a bit flipped, a file swapped in by hand)
is never loaded, and files it does not list (say a planted ``optimizer.pt``) are never read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from torch import nn

from normlab.core.errors import UserError
from normlab.core.fsutil import json_text
from normlab.core.schema import to_dict
from normlab.model.io import CONFIG as MODEL_CONFIG
from normlab.model.io import WEIGHTS


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
    from safetensors import SafetensorError

    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    try:
        _save(folder, tmp, model, state, optimizer)
    except (OSError, SafetensorError) as e:  # safetensors reports ENOSPC as SafetensorError
        # Disk full or read-only: the previous checkpoint is untouched (only tmp was being
        # written); drop the partial copy to give the space back, and say so in one line.
        shutil.rmtree(tmp, ignore_errors=True)
        why = (e.strerror if isinstance(e, OSError) else None) or str(e)
        raise UserError(f"cannot write checkpoint {folder}: {why}; the previous "
                        "checkpoint is intact (free space or fix permissions, then --resume)") from e


def _save(folder: Path, tmp: Path, model: nn.Module, state: dict[str, Any],
          optimizer: torch.optim.Optimizer | None) -> None:
    from safetensors.torch import save_file, save_model

    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / WEIGHTS))
    if hasattr(model, "cfg"):  # also a model dir for TransformerLM.load (report, analyze)

        _write_json(tmp / MODEL_CONFIG, to_dict(model.cfg))
    meta = dict(state)
    if optimizer is not None:
        tensors, opt_meta = flatten_state(optimizer)
        save_file(tensors, str(tmp / OPTIMIZER))
        meta["optimizer"] = opt_meta
    rng = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            rng[f"cuda{i}"] = s
    save_file(rng, str(tmp / RNG))
    _write_json(tmp / STATE, meta)
    _write_json(tmp / MANIFEST, {"files": {f.name: _digest(f) for f in sorted(tmp.iterdir())}})
    for f in tmp.iterdir():  # data on disk before the rename makes it visible: one fsync per file
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    _fsync_dir(tmp)
    if folder.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(folder, old)
    os.replace(tmp, folder)
    _fsync_dir(folder.parent)
    shutil.rmtree(old, ignore_errors=True)


# A checkpoint's own files (the model's two are ``normlab.model.io``'s): spelled here only.
OPTIMIZER, RNG, STATE, MANIFEST = "optimizer.safetensors", "rng.safetensors", "state.json", "manifest.json"


def _write_json(path: Path, obj: Any) -> None:
    # A plain write: the whole tmp/ folder is the atomic unit (renamed in only once complete and
    # fsynced file by file), so a temp file + fsync per JSON file would only double the fsyncs.
    path.write_text(json_text(obj), encoding="utf-8")


def _digest(path: Path) -> dict[str, Any]:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": h.hexdigest()}


def problem(folder: Path) -> str | None:
    """Why ``folder`` is not a complete, intact checkpoint (None when it is).

    Sizes are compared before hashes so a truncated file is named cheaply.
    """
    folder = Path(folder)
    try:
        files = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
    except FileNotFoundError:
        return f"{folder}: no {MANIFEST} (checkpoint incomplete or not written by normlab)"
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        return f"{folder}/{MANIFEST}: unreadable ({type(e).__name__})"
    for name in (WEIGHTS, STATE):
        if name not in files:
            return f"{folder}/{MANIFEST}: does not list {name}"
    for name, want in files.items():
        f = folder / name
        if "/" in name or "\\" in name or name.startswith("."):
            return f"{folder}/{MANIFEST}: bad file name {name!r}"
        if not f.is_file():
            return f"{f}: missing"
        if f.stat().st_size != want.get("bytes"):
            return f"{f}: {f.stat().st_size} bytes, manifest says {want.get('bytes')} (truncated?)"
        if _digest(f)["sha256"] != want.get("sha256"):
            return f"{f}: sha256 differs from {MANIFEST} (corrupted)"
    return None


def candidates(folder: Path) -> tuple[Path, Path]:
    """``folder`` and the ``.old`` twin an interrupted swap leaves in its place, in the order a
    reader tries them."""
    folder = Path(folder)
    return folder, folder.with_name(folder.name + ".old")


def find(folder: Path) -> Path | None:
    """The intact checkpoint at ``folder``, or its ``.old`` twin after an interrupted swap."""
    for cand in candidates(folder):
        if cand.is_dir() and problem(cand) is None:
            return cand
    return None


def read_state(folder: Path) -> dict[str, Any]:
    return json.loads((Path(folder) / STATE).read_text(encoding="utf-8"))


def _state_or_none(folder: Path) -> dict[str, Any] | None:
    """A folder's state.json (a training checkpoint's), or None: absent (an imported or saved
    model) or unreadable (the callers fall back to what else the folder holds)."""
    try:
        state = read_state(folder) if (Path(folder) / STATE).is_file() else None
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def step_of(folder: Path) -> int | None:
    """The training step a checkpoint folder holds, from its state.json; None without one."""
    loop = (_state_or_none(folder) or {}).get("loop") or {}
    return loop.get("step") if isinstance(loop.get("step"), int) else None


def identity(folder: Path) -> dict[str, Any] | None:
    """Which weights a checkpoint folder holds, read without hashing: its name (``best``,
    ``latest``), the step of its state.json and the sha256 its manifest gives model.safetensors
    (checked against the file by every load). What a measurement of it records, so that a
    cached result can be told from one of newer weights; None without a readable manifest."""
    folder = Path(folder)
    try:
        files = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
        sha = files[WEIGHTS]["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {"checkpoint": folder.name.removesuffix(".old"), "step": step_of(folder), "sha256": sha}


def tokenizer_state(folder: Path) -> dict[str, Any] | None:
    """The tokenizer a checkpoint folder was trained with (its state.json), None without one."""
    tok = (_state_or_none(folder) or {}).get("tokenizer")
    return tok if isinstance(tok, dict) and tok else None


def load(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
         restore_rng: bool = True) -> dict[str, Any]:
    """Load weights (and optimizer, RNG) from a checkpoint; returns its ``state.json``."""
    from safetensors.torch import load_file, load_model

    folder = Path(folder)
    bad = problem(folder)
    if bad is not None:  # never load a torn or tampered checkpoint
        raise UserError(f"checkpoint not loadable: {bad}")
    state = read_state(folder)
    listed = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]  # only verified files
    load_model(model, str(folder / WEIGHTS))
    if optimizer is not None and OPTIMIZER in listed:
        tensors = load_file(str(folder / OPTIMIZER))
        optimizer.load_state_dict(unflatten_state(tensors, state["optimizer"]))
    if restore_rng and RNG in listed:
        rng = load_file(str(folder / RNG))
        torch.set_rng_state(rng["cpu"])
        cuda = [rng[k] for k in sorted(rng) if k.startswith("cuda")]
        if cuda and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(cuda[: torch.cuda.device_count()])
    return state


def rng_state() -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The global CPU and (if initialised) CUDA generator states, for :func:`set_rng_state`."""
    return torch.get_rng_state(), (torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [])


def set_rng_state(state: tuple[torch.Tensor, list[torch.Tensor]]) -> None:
    torch.set_rng_state(state[0])
    if state[1]:
        torch.cuda.set_rng_state_all(state[1])


def flatten_state(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Optimizer state as (tensors for safetensors, JSON-able rest): no pickle needed."""
    sd = opt.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for pid, st in sd["state"].items():
        for key, val in st.items():
            if isinstance(val, torch.Tensor):
                tensors[f"{pid}.{key}"] = val.detach().contiguous().cpu()
            else:
                scalars.setdefault(str(pid), {})[key] = val
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()} for g in sd["param_groups"]]
    return tensors, {"param_groups": groups, "scalars": scalars}


_TUPLES = ("betas", "ns_coefficients")


def unflatten_state(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`flatten_state`: a dict for ``optimizer.load_state_dict``."""
    state: dict[int, dict[str, Any]] = {}
    for name, t in tensors.items():
        pid, key = name.split(".", 1)
        state.setdefault(int(pid), {})[key] = t
    for pid, extra in meta["scalars"].items():
        state.setdefault(int(pid), {}).update(extra)
    # JSON has no tuples: put back the ones the optimizers hold (AdamW's betas, Muon's ns_coefficients)
    groups = [{k: (tuple(v) if k in _TUPLES else v) for k, v in g.items()} for g in meta["param_groups"]]
    return {"state": state, "param_groups": groups}
