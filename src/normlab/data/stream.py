"""Text sources read in bounded pieces: a text file, a folder of text files, a Hugging Face dataset.

A source is read as pieces of about ``CHUNK`` characters, each cut just after a newline
where it has one, so memory holds one piece at a time and a tokenizer whose pre-tokenizer
splits at whitespace (byte-level BPE) sees the words it would see in the whole text.
Documents (the files of a folder, the rows of a dataset) are joined with a newline where one
does not end with a newline; a single file is its bytes exactly, so the shards of a file hold
the tokens ``load_corpus`` gives for it. Every pass hashes the UTF-8 text it yields: the
sha256 of the stream, compared between passes (a source edited during ``prepare`` is caught).
"""

from __future__ import annotations

import codecs
import hashlib
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Callable, Iterable, Iterator

from normlab.core.errors import UserError

CHUNK = 1 << 17     # characters per piece: a few MB of transient arrays while it is tokenised
HF_PREFIX = "hf:"   # SRC naming a Hugging Face dataset (a save_to_disk folder or a cached name)


@dataclass
class Pass:
    """What one pass over a source yielded: sha256 and size of its UTF-8 text, per-document records."""

    sha256: str = ""
    bytes: int = 0
    documents: list[dict[str, Any]] = field(default_factory=list)


class Source:
    """One SRC of ``normlab data prepare``. ``pieces(seen)`` starts a pass; ``size`` (bytes,
    estimated for a dataset) spaces the BPE sample over the whole stream."""

    def __init__(self, label: str, size: int, documents: Callable[[list[dict[str, Any]]], Iterable[Iterable[str]]],
                 record: dict[str, Any]) -> None:
        self.label, self.size, self._documents, self.record = label, size, documents, record

    def pieces(self, seen: Pass) -> Iterator[str]:
        """The text, piece by piece; ``seen`` is filled as the pass goes (complete at its end)."""
        h, n = hashlib.sha256(), 0
        for piece in _aligned(_joined(self._documents(seen.documents))):
            raw = piece.encode("utf-8")
            h.update(raw)
            n += len(raw)
            yield piece
        seen.sha256, seen.bytes = h.hexdigest(), n
        if n == 0:
            raise UserError(f"{self.label}: the corpus is empty; give text with some content")


def _joined(documents: Iterable[Iterable[str]]) -> Iterator[str]:
    last = "\n"   # no separator before the first document
    for doc in documents:
        first = True
        for block in doc:
            if not block:
                continue
            if first and last != "\n":
                yield "\n"
            first, last = False, block[-1]
            yield block


def _aligned(blocks: Iterable[str]) -> Iterator[str]:
    """Pieces of about CHUNK characters ending just after a newline (a line longer than 4
    pieces is cut after a space, else anywhere)."""
    carry = ""
    for block in blocks:
        text = carry + block
        if len(text) < CHUNK:
            carry = text
            continue
        cut = text.rfind("\n") + 1
        if cut == 0 and len(text) > 4 * CHUNK:
            cut = text.rfind(" ") + 1 or len(text)
        carry = text[cut:]
        if cut:
            yield text[:cut]
    if carry:
        yield carry


def _file_blocks(path: Path, name: str, records: list[dict[str, Any]]) -> Iterator[str]:
    """Decoded text of one file, CHUNK bytes at a time; appends its record (bytes, sha256)."""
    dec = codecs.getincrementaldecoder("utf-8")()
    h, n = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while True:
            block = fh.read(CHUNK)
            try:
                text = dec.decode(block, final=not block)
            except UnicodeDecodeError as e:
                raise UserError(f"{path}: not UTF-8 text (near byte {n + e.start}); convert it, "
                                "e.g. iconv -t UTF-8") from None
            h.update(block)
            n += len(block)
            yield text
            if not block:
                break
    records.append({"path": name, "bytes": n, "sha256": h.hexdigest()})


def file_source(path: str | Path) -> Source:
    p = Path(path).expanduser()
    return Source(str(p), p.stat().st_size, lambda rec: [_file_blocks(p, str(p.resolve()), rec)],
                  {"kind": "file", "path": str(p.resolve())})


def folder_source(path: str | Path, glob: str) -> Source:
    root = Path(path).expanduser()
    pattern = PurePath(glob)
    if pattern.is_absolute() or ".." in pattern.parts:
        raise UserError(f"--glob {glob!r}: reaches outside SRC {root}; give a pattern inside it (e.g. '**/*.txt'), "
                        "or make the folder you mean SRC")
    files = sorted((p for p in root.glob(glob) if p.is_file() and not p.name.startswith(".")),
                   key=lambda p: p.relative_to(root).as_posix())
    inside = root.resolve()
    for f in files:  # a link (to a file, or a folder on the way) can lead out of SRC too
        if not f.resolve().is_relative_to(inside):
            raise UserError(f"--glob {glob!r}: matches {f}, a link to {f.resolve()} outside SRC {root}; "
                            "give a pattern that leaves it out, or copy the file into SRC")
    if not files:
        raise UserError(f"SRC {root}: no files match --glob {glob!r}; give another --glob (e.g. '**/*') "
                        "or a folder of text files")
    size = sum(p.stat().st_size for p in files)
    return Source(str(root), size,
                  lambda rec: (_file_blocks(p, p.relative_to(root).as_posix(), rec) for p in files),
                  {"kind": "folder", "path": str(root.resolve()), "glob": glob})
