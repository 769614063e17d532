"""The claims cache, ``OUT/cache/``: what a claims run measured, so that an interrupted run
resumes without measuring a finished claim again.

- ``claims/<id>.json``: a claim's decided record (its claims.json entry before the Holm
  adjustment and figures);
- ``probe/<placement>-L<depth>.json``: one probe cell's rows (the quick claims and the
  context figures share cells).

Each file holds the key of what determined it; a file whose key differs (other seeds, depths,
scale, rule, stores, or any change of normlab's source or the torch version) is not used and
is replaced when measured again. The key is a hash, so a stale entry can never be mistaken for
a fresh one, and a damaged file counts as missing (it is a cache: measuring again is the fix).
Values are stored as JSON and a fresh result goes through the same round trip, so a cached
run writes exactly the claims.json an uncached one writes.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import normlab
from normlab.core.fsutil import atomic_write_text


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """sha256 over normlab's Python sources: the code that measured, all of it (an edit anywhere
    re-measures; a resume cache errs on the side of measuring again)."""

    root = Path(normlab.__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def key(**parts: Any) -> str:
    """The cache key of a measurement: a hash of everything that determines it."""
    import torch

    text = json.dumps({**parts, "source": source_hash(), "torch": torch.__version__}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def roundtrip(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples as lists, numpy numbers as floats), as claims.json has it."""
    return json.loads(json.dumps(value, default=float))


class Cache:
    """``OUT/cache`` (``root=None``: caches nothing; every lookup misses)."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self.hits: list[str] = []  # "claims/<id>", "probe/<cell>": what this run reused

    def _path(self, kind: str, name: str) -> Path:
        assert self.root is not None
        return self.root / kind / f"{name}.json"

    def get(self, kind: str, name: str, k: str) -> Any | None:
        if self.root is None:
            return None
        try:
            data = json.loads(self._path(kind, name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # missing or damaged: measure again
        if not isinstance(data, dict) or data.get("key") != k or "value" not in data:
            return None
        self.hits.append(f"{kind}/{name}")
        return data["value"]

    def put(self, kind: str, name: str, k: str, value: Any) -> Any:
        """Keep ``value`` under ``k``; returns it as the cache would give it back."""

        text = json.dumps({"key": k, "value": value}, default=float)
        if self.root is not None:
            atomic_write_text(self._path(kind, name), text)
        return json.loads(text)["value"]
