"""Corpora, tokenizers and batches. ``load_corpus(DataConfig) -> Corpus`` is the entry point."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from normlab.data.corpus import load_corpus as _load

if TYPE_CHECKING:
    from normlab.data.corpus import Corpus


def load_corpus(cfg: Any) -> "Corpus":
    """Read, verify, tokenise (cached) and split the corpus named by a ``DataConfig``."""

    return _load(cfg)


__all__ = ["load_corpus"]
