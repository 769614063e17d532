"""``normlab data prepare``: a text source streamed through a tokenizer into token shards.

Memory stays flat: the source is read a piece at a time (``normlab.data.stream``), each
piece's tokens are appended to the open shard file and hashed, and nothing grows with the
corpus but the shard files on disk. The tokenizer is fixed before the stream is encoded:

* ``char``: a first pass collects every character of the whole stream, so the vocabulary is
  exact (the one ``load_corpus`` gives for the same text) and no character can appear
  later that it lacks. A sample could miss a rare character and fail hours into the
  encoding; the extra pass only reads and decodes, which costs little beside encoding.
* ``bpe``: byte-level BPE trained on a sample of about ``sample_bytes``, taken as every
  k-th piece of the stream so it spans the whole corpus, not its first files. Byte-level
  BPE can encode any text, so the rest of the stream needs no vocabulary of its own.
* ``byte`` and a given ``tokenizer.json``: fixed already; one pass.

Everything is written into a hidden sibling of DIR (``.DIR.partial-*``), fsynced, and
renamed to DIR at the end, so an interrupted prepare leaves no DIR at all (a ``kill -9``
can leave the hidden folder, which nothing reads; it is named in a warning next time).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from normlab import __version__
from normlab.core.errors import UserError
from normlab.core.fsutil import _umask, json_text
from normlab.core.progress import Progress
from normlab.data.hf_source import dataset_source
from normlab.data.shards import FORMAT, MANIFEST, TOKENIZER, VERSION, dtype_for, state_sha256
from normlab.data.source import KNOWN, read_corpus_bytes
from normlab.data.stream import HF_PREFIX, Pass, Source, file_source, folder_source
from normlab.data.tokenizers import CharTokenizer, Tokenizer, make_tokenizer

log = logging.getLogger(__name__)
SHARD_TOKENS = 1 << 27  # tokens per shard file (256 MiB of uint16)


def _fit(source: Source, name: str, bpe_vocab: int, sample_bytes: int, progress: Any) -> tuple[Tokenizer, Pass | None, str]:
    """The tokenizer, the pass that fitted it (None when none was needed) and how it was fitted."""
    tok = make_tokenizer(name, bpe_vocab)
    if name == "char":
        seen, chars = Pass(), set()
        for piece in _counted(source.pieces(seen), progress, "vocabulary"):
            chars.update(piece)
        tok = CharTokenizer("".join(sorted(chars)))
        return tok, seen, f"every character of the stream ({seen.bytes} bytes)"
    if name == "bpe":
        every = max(1, math.ceil(source.size / max(1, sample_bytes)))
        seen, sample = Pass(), []
        for i, piece in enumerate(_counted(source.pieces(seen), progress, "sample")):
            if i % every == 0:
                sample.append(piece)
        text = "".join(sample)
        del sample
        tok.fit(text)
        return tok, seen, f"a sample of {len(text.encode('utf-8'))} bytes (every {every}th piece of the stream)"
    return tok, None, "given" if name.endswith(".json") else "fixed"


def _counted(pieces: Any, progress: Any, what: str) -> Any:
    """Feeds the progress display (MiB of text) as pieces go by."""
    progress.item(what)
    done = 0
    for piece in pieces:
        yield piece
        done += len(piece)
        if done >= 1 << 20:
            progress.advance("megabyte", done >> 20)
            done &= (1 << 20) - 1


def open_source(src: str, *, glob: str = "**/*.txt", hf_config: str | None = None, split: str = "train",
                column: str = "text") -> Source:
    """The Source SRC names: ``hf:NAME_OR_PATH``, a folder, a text file or a known corpus."""
    if src.startswith(HF_PREFIX):
        return dataset_source(src[len(HF_PREFIX):], hf_config, split, column)
    p = Path(src).expanduser()
    if p.is_dir():
        return folder_source(p, glob)
    if p.is_file():
        return file_source(p)

    if src in KNOWN:  # a small corpus with a published checksum: verified (downloaded if missing), then read
        _, where = read_corpus_bytes(src, None)
        return file_source(where)
    raise UserError(f"SRC {src!r}: no such file or folder; give a text file, a folder of text files, "
                    f"hf:NAME_OR_PATH (a Hugging Face dataset) or a known corpus ({', '.join(KNOWN)})")


class _ShardWriter:
    """Appends token arrays to numbered shard files of ``per_shard`` tokens, hashing each."""

    def __init__(self, folder: Path, dtype: np.dtype, per_shard: int) -> None:
        self.folder, self.dtype, self.per_shard = folder, dtype, per_shard
        self.done: list[dict[str, Any]] = []
        self._fh: Any = None

    def add(self, ids: np.ndarray) -> None:
        ids = np.ascontiguousarray(ids, dtype=self.dtype)
        while len(ids):
            if self._fh is None:
                self._name = f"tokens-{len(self.done):05d}.bin"
                self._fh, self._h, self._n = open(self.folder / self._name, "wb"), hashlib.sha256(), 0
            part, ids = ids[: self.per_shard - self._n], ids[self.per_shard - self._n:]
            self._fh.write(part.data)
            self._h.update(part.data)
            self._n += len(part)
            if self._n == self.per_shard:
                self._close()

    def _close(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        self._fh = None
        self.done.append({"file": self._name, "tokens": self._n, "sha256": self._h.hexdigest()})

    def finish(self) -> list[dict[str, Any]]:
        if self._fh is not None:
            self._close()
        return self.done


def _write_file(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def prepare_shards(source: Source, out: str | Path, tokenizer: str = "char", *, bpe_vocab: int = 512,
                   sample_bytes: int = 8 << 20, shard_tokens: int = SHARD_TOKENS, progress: Any = None) -> dict[str, Any]:
    """Tokenise ``source`` into shards under ``out`` (which must not exist or be empty); returns the manifest."""

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"--out {out}: already exists and is not empty; choose another --out or remove it")
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in sorted(out.parent.glob(f".{out.name}.partial-*")):
        log.warning(f"{stale}: left by an interrupted prepare; nothing reads it, remove it to free the space")
    progress = progress or Progress("data prepare", enabled=False)
    passes = 1 if tokenizer not in ("char", "bpe") else 2
    progress.add("megabyte", passes * max(1, source.size >> 20))
    tok, fitted, how = _fit(source, tokenizer, bpe_vocab, sample_bytes, progress)
    dtype = dtype_for(tok.vocab_size)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's private 0700 would hide the corpus from its users
        writer, seen = _ShardWriter(tmp, dtype, shard_tokens), Pass()
        for piece in _counted(source.pieces(seen), progress, "tokens"):
            writer.add(tok.encode_array(piece))
        shards = writer.finish()
        if fitted is not None and fitted.sha256 != seen.sha256:
            raise UserError(f"SRC {source.label}: changed while it was being prepared (sha256 "
                            f"{fitted.sha256[:12]}... then {seen.sha256[:12]}...); prepare it again when it is stable")
        state = tok.state()
        _write_file(tmp / TOKENIZER, json.dumps(state))
        manifest = {
            "format": FORMAT, "version": VERSION, "normlab": __version__,
            "source": {**source.record, "documents": seen.documents},
            "sha256": seen.sha256, "text_bytes": seen.bytes,
            "tokenizer": {"name": tok.name, "vocab_size": tok.vocab_size, "sha256": state_sha256(state),
                          "file": TOKENIZER, "fitted_on": how},
            "dtype": np.dtype(dtype).name, "tokens": sum(s["tokens"] for s in shards), "shards": shards,
        }
        _write_file(tmp / MANIFEST, json_text(manifest))
        if out.is_dir():
            out.rmdir()  # empty (checked above): the rename needs the name free
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fd = os.open(out.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself survives a crash
    finally:
        os.close(fd)
    return manifest
