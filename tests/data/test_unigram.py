"""The unigram cross-entropy: hand-computed on a tiny text, ~3.347 on Tiny Shakespeare, cached."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from normlab.data import unigram
from normlab.data.config import DataConfig
from normlab.data.unigram import data_ce, unigram_ce


def test_hand_computed_on_a_tiny_text_with_a_symbol_unseen_in_training(tmp_path: Path) -> None:
    # 10 characters, 80/20: train "aaaaaabb" (a 6, b 2, c 0 of N = 8), val "bc"; the char vocabulary
    # {a, b, c} comes from the whole text. Add-one: p(b) = 3/11, p(c) = 1/11.
    text = tmp_path / "t.txt"
    text.write_text("aaaaaabbbc", encoding="utf-8")
    ce = data_ce(DataConfig(corpus=str(text), train_fraction=0.8))
    want = -(math.log(3 / 11) + math.log(1 / 11)) / 2  # = ln 11 - ln 3 / 2 = 1.848589
    assert ce.vocab_size == 3 and ce.unigram == pytest.approx(want, abs=1e-12)
    assert ce.unigram == pytest.approx(1.848589, abs=1e-6) and ce.uniform == pytest.approx(math.log(3))


def test_smoothing_only_matters_for_unseen_symbols() -> None:
    train, val = np.array([0, 0, 1, 1]), np.array([0, 1])
    assert unigram_ce(train, val, 2, smoothing=0.0) == pytest.approx(math.log(2))
    assert unigram_ce(train, val, 2) == pytest.approx(math.log(2))  # (2+1)/(4+2) each: still 1/2
    assert unigram_ce(train, np.array([2]), 3, smoothing=0.0) == math.inf  # never seen: infinite unsmoothed
    assert unigram_ce(train, np.array([2]), 3) == pytest.approx(math.log(7))  # 1/(4+3)
    with pytest.raises(ValueError, match="beyond the vocabulary"):
        unigram_ce(np.array([0, 5]), val, 2)


def test_tiny_shakespeare_unigram_is_3_347(data_dir: Path) -> None:
    ce = data_ce(DataConfig(data_dir=str(data_dir)))
    assert ce.vocab_size == 65 and ce.uniform == pytest.approx(4.1744, abs=1e-4)
    assert ce.unigram == pytest.approx(3.3473, abs=1e-4)


def test_cached_per_corpus_tokenizer_and_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = tmp_path / "t.txt"
    text.write_text("aaaabcabcbcc", encoding="utf-8")
    calls = []
    real = unigram.unigram_ce
    monkeypatch.setattr(unigram, "unigram_ce", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = data_ce(DataConfig(corpus=str(text), train_fraction=0.5))
    assert data_ce(DataConfig(corpus=str(text), train_fraction=0.5)) == first and len(calls) == 1
    other = data_ce(DataConfig(corpus=str(text), train_fraction=0.75))  # another split: counted again
    assert len(calls) == 2 and other != first
    text.write_text("aaaabcabcbcb", encoding="utf-8")  # edited text: another sha256, never the stale value
    data_ce(DataConfig(corpus=str(text), train_fraction=0.5))
    assert len(calls) == 3
