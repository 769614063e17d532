"""Token shards ``normlab data prepare`` wrote, read back as one memory-mapped token stream.

DIR holds ``manifest.json`` (format, version, the sha256 of the source text and of each
shard, the tokenizer's identity, the token count of each shard, the dtype), the tokenizer's
state (``tokenizer.json``, the lab's own format, as in checkpoints) and ``tokens-NNNNN.bin``
files of raw uint16/uint32 ids. :class:`TokenStream` reads the shards as the one array their
concatenation is, so a training run on DIR draws exactly the windows (and splits at exactly
the token) it would on the same tokens in one array: batches stay a pure function of (seed,
step, micro-batch), and resume is exact. Every shard's size and sha256 are checked before a
run uses them (the hashes once per process); any damage or mismatch is one ``UserError``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from normlab.core.errors import UserError
from normlab.core.fscheck import read_json_table
from normlab.data.tokenizers import tokenizer_from_state

FORMAT, VERSION = "normlab-token-shards", 1
MANIFEST, TOKENIZER = "manifest.json", "tokenizer.json"
_VERIFIED: set[tuple[Any, ...]] = set()  # shards hashed in this process: (path, size, mtime_ns, sha256)


def dtype_for(vocab_size: int) -> np.dtype:
    """uint16 while every id fits (vocabularies up to 65,536), else uint32."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def state_sha256(state: dict[str, Any]) -> str:
    """The tokenizer's identity: sha256 of its state as canonical JSON."""
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode("utf-8")).hexdigest()


class TokenStream:
    """Memory-mapped shards as one read-only 1-D array: ``len``, slices (views, no copy), and
    integer-array indexing (the gather that cuts windows); ``np.asarray`` copies (use a slice)."""

    def __init__(self, parts: list[np.ndarray], start: int = 0, stop: int | None = None) -> None:
        self._parts = parts
        self._ends = np.cumsum([len(p) for p in parts], dtype=np.int64)
        self._begins = self._ends - [len(p) for p in parts]
        self.start, self.stop = start, int(self._ends[-1]) if stop is None else stop
        self.dtype = parts[0].dtype

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            lo, hi, step = key.indices(len(self))
            if step != 1:
                raise IndexError("a TokenStream is sliced with step 1 only")
            return TokenStream(self._parts, self.start + lo, self.start + max(lo, hi))
        idx = np.asarray(key)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            raise IndexError(f"token index out of range [0, {len(self)})")
        flat = idx.ravel().astype(np.int64) + self.start
        which = np.searchsorted(self._ends, flat, side="right")
        out = np.empty(flat.shape, dtype=self.dtype)
        for k in np.unique(which):
            hit = which == k
            out[hit] = self._parts[k][flat[hit] - self._begins[k]]
        return out.reshape(idx.shape)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[np.arange(len(self))]
        return out if dtype is None else out.astype(dtype)


def _damaged(folder: Path, what: str) -> UserError:
    return UserError(f"data.corpus={str(folder)!r}: {what}; prepare it again (normlab data prepare SRC --out DIR)")


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """DIR's manifest, checked for its format and version."""

    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise UserError(f"data.corpus={str(folder)!r}: a folder without {MANIFEST}; give a text file, or a folder "
                        "`normlab data prepare SRC --out DIR` wrote")
    m = read_json_table(path, "prepare the folder again (normlab data prepare SRC --out DIR)")
    if m.get("format") != FORMAT or m.get("version") != VERSION:
        raise _damaged(folder, f"{MANIFEST} is not a version-{VERSION} {FORMAT} manifest "
                       f"(format {m.get('format')!r}, version {m.get('version')!r})")
    return m


def _verified(folder: Path, shard: dict[str, Any], dtype: np.dtype) -> np.ndarray:
    path = folder / shard["file"]
    want = int(shard["tokens"]) * dtype.itemsize
    try:
        st = path.stat()
    except FileNotFoundError:
        raise _damaged(folder, f"shard {shard['file']} is missing") from None
    if st.st_size != want:
        raise _damaged(folder, f"shard {shard['file']} holds {st.st_size} bytes, the manifest says {want} "
                       f"({shard['tokens']} {dtype.name} tokens): truncated or replaced")
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, shard["sha256"])
    if key not in _VERIFIED:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            while block := fh.read(1 << 22):
                h.update(block)
        if h.hexdigest() != shard["sha256"]:
            raise _damaged(folder, f"shard {shard['file']} has sha256 {h.hexdigest()[:12]}..., the manifest says "
                           f"{shard['sha256'][:12]}...: its tokens changed")
        _VERIFIED.add(key)
    return np.memmap(path, dtype=dtype, mode="r")


def _tokenizer_matches(cfg: Any, tok: dict[str, Any], state: dict[str, Any], folder: Path) -> None:
    """The run's data.tokenizer must name the tokenizer DIR was made with (config.json then says
    what the run used)."""
    made = tok["name"] if tok["name"] != "pretrained" else "a tokenizer.json"
    fix = f"it was prepared with {made} (vocabulary {tok['vocab_size']})"
    if cfg.tokenizer.endswith(".json"):
        try:
            given = Path(cfg.tokenizer).read_text(encoding="utf-8")
        except OSError as e:
            raise UserError(f"data.tokenizer={cfg.tokenizer!r}: cannot read it ({e.strerror})") from None
        if tok["name"] != "pretrained" or state.get("json") != given:
            raise UserError(f"data.tokenizer={cfg.tokenizer!r}: not the tokenizer of data.corpus={str(folder)!r}; "
                            f"{fix}: give that tokenizer" + (f" (data.tokenizer={tok['name']})"
                                                             if tok["name"] != "pretrained" else ""))
    elif cfg.tokenizer != tok["name"]:
        hint = "the path of the same tokenizer.json" if tok["name"] == "pretrained" else tok["name"]
        raise UserError(f"data.tokenizer={cfg.tokenizer!r}: data.corpus={str(folder)!r} is not tokenised with it; "
                        f"{fix}: set data.tokenizer={hint}")
    elif tok["name"] == "bpe" and cfg.bpe_vocab != state.get("vocab"):
        raise UserError(f"data.bpe_vocab={cfg.bpe_vocab}: data.corpus={str(folder)!r} holds a BPE of "
                        f"{state.get('vocab')}; set data.bpe_vocab={state.get('vocab')}")


def open_prepared(cfg: Any) -> tuple[TokenStream, Any, str, str]:
    """(tokens, tokenizer, sha256 of the source text, folder) of the prepared ``cfg.corpus``,
    every shard checked against the manifest and the tokenizer against ``cfg``."""

    folder = Path(cfg.corpus).expanduser()
    m = read_manifest(folder)
    try:
        tok, shards, dtype = m["tokenizer"], m["shards"], np.dtype(m["dtype"])
        state = json.loads((folder / tok["file"]).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _damaged(folder, f"its tokenizer file {m['tokenizer']['file']} is missing") from None
    except (KeyError, TypeError, ValueError) as e:
        raise _damaged(folder, f"{MANIFEST} or its tokenizer file is damaged ({type(e).__name__}: {e})") from None
    if state_sha256(state) != tok["sha256"]:
        raise _damaged(folder, f"{tok['file']} is not the tokenizer the manifest names (sha256 "
                       f"{state_sha256(state)[:12]}..., the manifest says {tok['sha256'][:12]}...)")
    if dtype != dtype_for(tok["vocab_size"]) or not shards:
        raise _damaged(folder, f"{MANIFEST} names dtype {dtype.name} for a vocabulary of {tok['vocab_size']} "
                       f"and {len(shards)} shards")
    _tokenizer_matches(cfg, tok, state, folder)
    parts = [_verified(folder, s, dtype) for s in shards]
    return TokenStream(parts), tokenizer_from_state(state), str(m["sha256"]), str(folder)
