"""What a run records about its data, and how a reader finds that data again.

A run's config.json holds its corpus and tokenizer file by absolute path (``absolute``), so
a run is read the same from any working directory; ``RUN/data.json`` (written through
``RunDir``) records what was actually read: the corpus's path and sha256, the tokenizer
and the split (``make_record``). Resume, analyze, report and inspect find the corpus with
``locate``: ``--data-dir DIR`` first (a moved corpus, by its file name), then the recorded
path; the bytes found must hash to the recorded sha256 (``load_corpus(expect_sha256=)``),
so a run never continues on, or is measured on, another text than its own. A corpus that
cannot be found is one line naming its path, its sha256 and the fix. Runs written before
data.json existed have no sha256 to check and their path as typed (relative to where they
are read from, as before).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normlab.core.errors import UserError
from normlab.data.config import DataConfig
from normlab.data.corpus import load_corpus
from normlab.data.source import KNOWN, sha256_bytes

if TYPE_CHECKING:
    from normlab.data.corpus import Corpus


def _abs(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def absolute(cfg: DataConfig) -> DataConfig:
    """``cfg`` with its corpus file, tokenizer file and data dir as absolute paths (a named
    corpus stays a name): what a fresh run writes into config.json."""
    return dataclasses.replace(
        cfg, corpus=cfg.corpus if cfg.corpus in KNOWN else _abs(cfg.corpus),
        tokenizer=_abs(cfg.tokenizer) if cfg.tokenizer.endswith(".json") else cfg.tokenizer,
        data_dir=_abs(cfg.data_dir) if cfg.data_dir else None)


def make_record(cfg: DataConfig, corpus: Corpus) -> dict[str, Any]:
    """RUN/data.json: the corpus read (path, sha256), the tokenizer and the split."""

    tok_file = cfg.tokenizer if cfg.tokenizer.endswith(".json") else None
    return {"corpus": {"name": cfg.corpus if cfg.corpus in KNOWN else None, "path": _abs(corpus.source),
                       "sha256": corpus.sha256},
            "tokenizer": {"name": corpus.tokenizer.state().get("name", cfg.tokenizer),
                          "path": _abs(tok_file) if tok_file else None,
                          "sha256": sha256_bytes(Path(tok_file).read_bytes()) if tok_file else None,
                          "vocab_size": corpus.vocab_size},
            "split": {"train_fraction": cfg.train_fraction, "train_tokens": int(len(corpus.train)),
                      "val_tokens": int(len(corpus.val))}}


def locate(cfg: DataConfig, record: dict[str, Any] | None, data_dir: str | None = None
           ) -> tuple[DataConfig, str | None]:
    """(the DataConfig that reads a run's corpus here, the sha256 the bytes must have).

    ``record`` is RUN/data.json (None for older runs); ``data_dir`` is ``--data-dir``: for a
    named corpus the folder holding it (as for training), for a corpus file the folder it
    was moved to (looked up by its file name before the recorded path).
    """
    if cfg.corpus in KNOWN:  # found by name and checked against its published sha256
        return (dataclasses.replace(cfg, data_dir=_abs(data_dir)) if data_dir else cfg), None
    rec = (record or {}).get("corpus") or {}
    sha = rec.get("sha256")
    stored = Path(rec.get("path") or cfg.corpus).expanduser()
    moved = Path(data_dir).expanduser() / stored.name if data_dir else None
    # a text file, or a folder `normlab data prepare` wrote (its manifest is checked when read)
    found = next((p for p in (moved, stored) if p is not None and (p.is_file() or p.is_dir())), None)
    if found is None:
        where = f"neither in --data-dir {data_dir} nor at {stored}" if moved else f"no such file at {stored}"
        what = f"the run's corpus (sha256 {sha})" if sha else "the run's corpus"
        raise UserError(f"data.corpus={str(stored)!r}: {where}, {what}; put it back, or pass --data-dir DIR "
                        f"naming the folder that now holds {stored.name}")
    tokenizer = cfg.tokenizer
    if tokenizer.endswith(".json"):  # a tokenizer file moved with the corpus is found the same way
        tok = Path((((record or {}).get("tokenizer") or {}).get("path")) or tokenizer)
        if data_dir and not tok.is_file() and (Path(data_dir).expanduser() / tok.name).is_file():
            tok = Path(data_dir).expanduser() / tok.name
        tokenizer = str(tok)
    return dataclasses.replace(cfg, corpus=_abs(str(found)), tokenizer=tokenizer), sha


def load_located(cfg: DataConfig, record: dict[str, Any] | None, data_dir: str | None = None) -> Corpus:
    """The run's own corpus, found by ``locate`` and checked against its recorded sha256."""

    found, sha = locate(cfg, record, data_dir)
    return load_corpus(found, expect_sha256=sha)


__all__ = ["absolute", "load_located", "locate", "make_record"]
