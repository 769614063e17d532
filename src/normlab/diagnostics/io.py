"""File helpers for diagnostics outputs: use ``normlab.fsutil`` when present (atomic writes)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` so that readers see the old file or the new one, never half of it."""
    try:
        from normlab.fsutil import atomic_write_text as _impl  # type: ignore[import-not-found]
    except ImportError:
        _impl = None
    if _impl is not None:
        _impl(path, text)
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_jsonl(path: str | Path, obj: dict[str, Any]) -> None:
    """Append one JSON line and flush it (a crash leaves at most a torn last line)."""
    try:
        from normlab.fsutil import append_jsonl as _impl  # type: ignore[import-not-found]
    except ImportError:
        _impl = None
    if _impl is not None:
        _impl(path, obj)
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(obj, allow_nan=True) + "\n")
        fh.flush()


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every complete JSON line of ``path`` (a torn last line is ignored)."""
    try:
        from normlab.fsutil import read_jsonl as _impl  # type: ignore[import-not-found]
    except ImportError:
        _impl = None
    if _impl is not None:
        return _impl(path)
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
