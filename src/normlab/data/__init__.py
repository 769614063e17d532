"""Corpora, tokenizers and batches. ``load_corpus(DataConfig) -> Corpus`` is the entry point."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from normlab.data.corpus import load_corpus as _load

if TYPE_CHECKING:
    from normlab.data.corpus import Corpus


def load_corpus(cfg: Any, expect_sha256: str | None = None) -> "Corpus":
    """Read, verify, tokenise (cached) and split the corpus named by a ``DataConfig``
    (``expect_sha256``: refuse other bytes, as a run's recorded corpus)."""

    return _load(cfg, expect_sha256)


__all__ = ["load_corpus"]
