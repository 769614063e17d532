"""The losses a language model is judged against, computed from the data, never typed in.

* ``unigram``: the cross-entropy (nats/token) of the validation split under the unigram
  distribution of the training split, i.e. the loss of a model that learned only how often
  each symbol occurs. A run that ends there has learned nothing about order: it *stalls*.
* ``uniform``: ln V, the loss of predicting every symbol of the vocabulary alike (a model at
  initialisation sits near it). A run that ends above it got worse than knowing nothing.

Both use the split and tokenizer the training runs use (``load_corpus``). Smoothing: add-one
(Laplace, ``SMOOTHING``) over the tokenizer's vocabulary, so a validation symbol that never
occurs in the training split costs -ln(1 / (N + V)) instead of an infinite loss. On Tiny
Shakespeare every one of the 65 symbols occurs in the training split, so the smoothing moves
the value by less than 1e-6: 3.3473 nats/char (the unsmoothed value is 3.3473 too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from normlab.data.corpus import load_corpus

if TYPE_CHECKING:
    from normlab.data.config import DataConfig

SMOOTHING = 1.0  # add-one pseudo-count per vocabulary symbol (see the module doc)


@dataclass(frozen=True)
class DataCE:
    """Reference cross-entropies of one corpus split, in nats/token."""

    unigram: float    # validation split under the training split's (smoothed) unigram distribution
    vocab_size: int

    @property
    def uniform(self) -> float:
        """ln V: the loss of the uniform prediction."""
        return math.log(self.vocab_size)


def unigram_ce(train: np.ndarray, val: np.ndarray, vocab_size: int, smoothing: float = SMOOTHING) -> float:
    """Cross-entropy (nats/token) of ``val`` under the add-``smoothing`` unigram distribution of
    ``train``, both arrays of token ids below ``vocab_size``."""
    if len(val) == 0 or vocab_size < 1:
        raise ValueError("unigram_ce needs a non-empty validation split and a vocabulary")
    counts, seen = _counts(train, vocab_size), _counts(val, vocab_size)
    with np.errstate(divide="ignore", invalid="ignore"):  # unsmoothed: ln 0, and 0 * -inf counts as 0
        logp = np.log(counts + smoothing) - math.log(counts.sum() + smoothing * vocab_size)
        terms = np.where(seen > 0, seen * logp, 0.0)
    return float(-terms.sum() / seen.sum())


def _counts(tokens: np.ndarray, vocab_size: int, block: int = 1 << 24) -> np.ndarray:
    """Occurrences of each id, counted a block at a time (prepared shards may not fit in memory)."""
    total = np.zeros(vocab_size, dtype=np.int64)
    for i in range(0, len(tokens), block):
        c = np.bincount(np.asarray(tokens[i:i + block], dtype=np.int64), minlength=vocab_size)
        if len(c) > vocab_size:
            raise ValueError(f"token ids reach beyond the vocabulary of {vocab_size}")
        total += c
    return total.astype(np.float64)


_CACHE: dict[tuple[str, str, int, float], DataCE] = {}


def data_ce(cfg: DataConfig) -> DataCE:
    """The reference cross-entropies of the corpus, tokenizer and split of ``cfg``.

    Cached in this process by the corpus's sha256, the tokenizer and the split fraction: the
    corpus itself loads from normlab's token cache (memory-mapped), so a second call costs a
    file hash, not a count over a million tokens."""

    corpus = load_corpus(cfg)
    key = (corpus.sha256, f"{cfg.tokenizer}:{cfg.bpe_vocab}", corpus.vocab_size, cfg.train_fraction)
    if key not in _CACHE:
        _CACHE[key] = DataCE(unigram_ce(corpus.train, corpus.val, corpus.vocab_size), corpus.vocab_size)
    return _CACHE[key]


__all__ = ["SMOOTHING", "DataCE", "data_ce", "unigram_ce"]
