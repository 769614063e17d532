"""Save and load a model as ``model.safetensors`` + ``model_config.json`` (never unpickles).

safetensors stores raw tensors only, so loading a checkpoint cannot run code; the config is
plain JSON validated by ``ModelConfig`` like any user config. ``safetensors.torch``'s
``save_model``/``load_model`` handle the tied embedding (one tensor under two names).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from normlab.core.errors import UserError
from normlab.core.fscheck import read_json_table
from normlab.core.schema import from_dict, to_dict
from normlab.model.config import ModelConfig

# The files of a model directory, spelled here only (a checkpoint is one too: ``run.checkpoint``).
WEIGHTS = "model.safetensors"
CONFIG = "model_config.json"
# A Hugging Face model directory's config (``save_pretrained``). A lab run's config.json has the
# same name (``RunDir``): an HF one is told apart by the ``model_type`` it names (``is_hf_dir``).
HF_CONFIG = "config.json"


def is_model_dir(folder: str | Path) -> bool:
    """Whether ``folder`` is a lab model directory (``save_model``, ``normlab import``, a checkpoint)."""
    return (Path(folder) / CONFIG).is_file()


def is_hf_dir(folder: str | Path) -> bool:
    """A Hugging Face model directory: its config.json names a ``model_type`` (a lab run's
    config.json, the same file name, holds the run's sections instead)."""
    try:
        data = json.loads((Path(folder) / HF_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "model_type" in data


def _replace_atomically(tmp: Path, final: Path) -> None:
    with open(tmp, "rb") as fh:  # flush to disk before the rename makes it visible
        os.fsync(fh.fileno())
    os.replace(tmp, final)


def _data_sha256(path: Path) -> tuple[str, dict]:
    """(sha256 of the tensor bytes after the header, the header's ``__metadata__``)."""
    import hashlib
    import struct

    with open(path, "rb") as fh:
        raw = fh.read(8)
        n = struct.unpack("<Q", raw)[0] if len(raw) == 8 else -1
        size = os.fstat(fh.fileno()).st_size
        if n < 2 or 8 + n > size:
            raise UserError(f"{path}: not a safetensors file (bad header length; truncated?)")
        try:
            meta = json.loads(fh.read(n)).get("__metadata__") or {}
        except (ValueError, UnicodeDecodeError, AttributeError):
            raise UserError(f"{path}: corrupt safetensors header") from None
        h = hashlib.sha256()
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest(), meta


def save_model(model: Any, dir: str | Path) -> Path:
    """Write ``dir/model.safetensors`` and ``dir/model_config.json``; returns ``dir``.

    Each file is written to a temporary name and renamed, so a crash never leaves a torn file.
    """
    from safetensors.torch import save_model as st_save

    out = Path(dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / (WEIGHTS + ".tmp")
    meta = {"format": "pt", "normlab": "TransformerLM"}
    st_save(model, str(tmp), metadata=meta)
    # safetensors checks structure, not content: a flipped bit in the data loads silently.
    # The data section does not depend on the header, so its hash can go in the header.
    st_save(model, str(tmp), metadata={**meta, "sha256": _data_sha256(tmp)[0]})
    _replace_atomically(tmp, out / WEIGHTS)
    tmp = out / (CONFIG + ".tmp")
    tmp.write_text(json.dumps(to_dict(model.cfg), indent=2, sort_keys=True) + "\n")
    _replace_atomically(tmp, out / CONFIG)
    return out


def load_config(dir: str | Path):  # -> ModelConfig
    """Read and validate ``dir/model_config.json``."""

    path = Path(dir) / CONFIG
    if not path.is_file():
        raise UserError(f"{path}: no such file; is {dir} a directory written by save_model?")
    data = read_json_table(path, "restore it from a backup, or save the model again")
    return from_dict(ModelConfig, ModelConfig.upgrade(data), "model.")


def load_weights(model: Any, dir: str | Path, device: str = "cpu") -> None:
    """Load ``dir/model.safetensors`` into ``model`` (strict, data hash checked). Building the
    model from ``dir/model_config.json`` is ``TransformerLM.load(dir)``."""
    from safetensors import SafetensorError
    from safetensors.torch import load_model as st_load

    path = Path(dir) / WEIGHTS
    if not path.exists():
        raise UserError(f"{path}: no such file; is {dir} a directory written by save_model?")
    digest, meta = _data_sha256(path)
    if "sha256" in meta and meta["sha256"] != digest:  # files from other tools carry no hash
        raise UserError(f"{path}: tensor data does not match its sha256 (corrupted file)")
    try:
        missing, unexpected = st_load(model, str(path), strict=True, device=device)
    except (SafetensorError, RuntimeError) as e:
        raise UserError(f"{path}: cannot load weights into the model of {CONFIG} ({e})") from None
