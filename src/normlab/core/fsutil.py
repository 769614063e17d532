"""Crash-safe file helpers: a kill at any instant leaves either the old file or the new one.

Whole files are written to a temporary sibling, fsynced and renamed over the target
(``os.replace`` is atomic on POSIX and Windows). Logs are JSON Lines appended one flushed
line at a time, and readers drop a torn last line (the one a kill cut short).
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from normlab.core.errors import UserError


class CorruptFileError(UserError, ValueError):
    """A file normlab wrote is damaged beyond the torn last line a kill can leave (one CLI line, exit 2)."""


@functools.lru_cache(maxsize=1)
def _umask() -> int:
    # os.umask can only be read by setting it; do it once per process (results are for sharing).
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via temp file + fsync + rename.

    The file gets the mode ``open()`` would give it (0666 minus the umask), not mkstemp's
    private 0600: run directories are results meant to be shared, like metrics.jsonl.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        if hasattr(os, "fchmod"):  # POSIX
            os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def json_text(obj: Any) -> str:
    """The JSON text normlab writes for a file: indented, keys sorted, a final newline."""
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON atomically."""
    atomic_write_text(path, json_text(obj))


def append_jsonl(path: str | Path, obj: dict[str, Any]) -> None:
    """Append one JSON object as one line and flush it to the OS.

    A single ``write`` of a short line is all-or-nothing in practice; if a kill still
    tears it, :func:`read_jsonl` ignores the fragment.
    """
    line = json.dumps(obj, separators=(",", ":"), allow_nan=True) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """All complete JSON lines of ``path`` ([] if missing); a torn last line is ignored.

    A malformed line anywhere but the end is real corruption and raises ``ValueError``.
    """
    p = Path(path)
    if not p.exists():
        return []
    lines = p.read_text(encoding="utf-8", errors="replace").split("\n")
    out: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            # Only the last line may be torn (no trailing newline was written yet).
            if i == len(lines) - 1:
                break
            raise CorruptFileError(f"{p}: line {i + 1} is not valid JSON") from None
    return out


REWRITE = "write it again with the command that made it"  # the fix when the reader knows no better one


def load_json(path: str | Path, fix: str = REWRITE) -> Any:
    """The JSON document in the file ``path``. Every JSON file normlab reads back comes here, so
    damage (empty, not UTF-8, not valid JSON) is always the same one line: the path, what is
    wrong and ``fix`` (a ``CorruptFileError``: exit 2, never a traceback)."""
    p = Path(path)
    raw = p.read_bytes()
    if not raw.strip():
        raise CorruptFileError(f"{p}: damaged (empty file); {fix}")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise CorruptFileError(f"{p}: damaged (not UTF-8 text: byte {e.start}); {fix}") from None
    except json.JSONDecodeError as e:
        raise CorruptFileError(f"{p}: damaged (not valid JSON: {e}); {fix}") from None


def read_json(path: str | Path, default: Any = None, fix: str = REWRITE) -> Any:
    """The JSON document at ``path``, or ``default`` when there is no such file; a damaged file
    is reported by :func:`load_json`, never guessed at."""
    p = Path(path)
    return load_json(p, fix) if p.is_file() else default


def write_jsonl(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """Replace ``path`` by ``rows`` atomically (used to truncate logs on resume)."""
    text = "".join(json.dumps(r, separators=(",", ":"), allow_nan=True) + "\n" for r in rows)
    atomic_write_text(path, text)
