"""Corpus loading: Tiny Shakespeare facts, checksum, offline errors, bad text, cache, tokenizers."""

from __future__ import annotations

import urllib.error
from pathlib import Path

import numpy as np
import pytest

from normlab.core.errors import UserError
from normlab.data import load_corpus
from normlab.data import source as src
from normlab.data.config import DataConfig
from normlab.data.tokenizers import make_tokenizer


def test_tinyshakespeare_split_and_vocab(data_dir: Path):
    c = load_corpus(DataConfig(data_dir=str(data_dir)))
    # Published facts of the file (../shared/data/README.md): 65 chars, 90/10 split.
    assert c.vocab_size == 65
    assert (len(c.train), len(c.val)) == (1_003_854, 111_540)
    assert c.decode(c.train[:14]) == "First Citizen:"
    assert c.decode(c.encode("ROMEO: hi")) == "ROMEO: hi"
    text = (data_dir / "tinyshakespeare.txt").read_text(encoding="utf-8")
    assert c.decode(c.val[-20:]) == text[-20:]


def test_token_cache_is_a_memmap_keyed_by_hash_and_tokenizer(data_dir: Path, monkeypatch, tmp_path):
    monkeypatch.setenv("NORMLAB_CACHE_DIR", str(tmp_path))
    a = load_corpus(DataConfig(data_dir=str(data_dir)))
    b = load_corpus(DataConfig(data_dir=str(data_dir), tokenizer="byte"))
    folders = sorted(p.name for p in (tmp_path / "tokens").iterdir())
    assert len(folders) == 2 and folders[0].split("-")[0] == folders[1].split("-")[0]
    assert {f.rsplit("-", 1)[1] for f in folders} == {"char", "byte"}
    again = load_corpus(DataConfig(data_dir=str(data_dir)))
    assert isinstance(again.train.base if again.train.base is not None else again.train, np.memmap)
    assert np.array_equal(again.train[:1000], a.train[:1000])
    assert b.vocab_size == 256 and len(b.train) + len(b.val) == 1_115_394  # ASCII: one byte per char


def test_checksum_mismatch_is_a_user_error(tmp_path: Path, data_dir: Path):
    bad = (data_dir / "tinyshakespeare.txt").read_bytes().replace(b"ROMEO", b"ROMEX", 1)
    (tmp_path / "tinyshakespeare.txt").write_bytes(bad)
    with pytest.raises(UserError, match="sha256.*does not match"):
        load_corpus(DataConfig(data_dir=str(tmp_path)))


def test_missing_file_in_data_dir(tmp_path: Path):
    with pytest.raises(UserError, match="no tinyshakespeare.txt there"):
        load_corpus(DataConfig(data_dir=str(tmp_path)))


def test_offline_without_copy_says_where_to_put_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv("NORMLAB_DATA_DIR", raising=False)
    monkeypatch.setenv("NORMLAB_CACHE_DIR", str(tmp_path / "cache"))

    def offline(url, dest, timeout=30.0):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(src, "download", offline)
    with pytest.raises(UserError) as e:
        load_corpus(DataConfig())
    msg = str(e.value)
    assert "\n" not in msg and str(tmp_path / "cache" / "corpora") in msg and "NORMLAB_DATA_DIR" in msg


def test_download_is_verified_and_cached(tmp_path, monkeypatch, data_dir):
    monkeypatch.delenv("NORMLAB_DATA_DIR", raising=False)
    monkeypatch.setenv("NORMLAB_CACHE_DIR", str(tmp_path))
    calls = []

    def fake(url, dest, timeout=30.0):
        calls.append(url)
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        Path(dest).write_bytes((data_dir / "tinyshakespeare.txt").read_bytes())

    monkeypatch.setattr(src, "download", fake)
    assert load_corpus(DataConfig()).vocab_size == 65
    load_corpus(DataConfig())
    assert calls == [src.KNOWN["tinyshakespeare"].url]  # second load reads the cache


def test_corrupt_download_is_rejected(tmp_path, monkeypatch):
    monkeypatch.delenv("NORMLAB_DATA_DIR", raising=False)
    monkeypatch.setenv("NORMLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(src, "download", lambda url, dest, timeout=30.0: Path(dest).parent.mkdir(
        parents=True, exist_ok=True) or Path(dest).write_bytes(b"<html>captive portal</html>"))
    with pytest.raises(UserError, match="sha256"):
        load_corpus(DataConfig())


@pytest.mark.parametrize("content, message", [
    (b"", "empty"), (b"  \n\n", "empty"), (b"caf\xe9 au lait " * 10, "not UTF-8"), (b"ab", "too few")])
def test_bad_text_files(tmp_path, content, message):
    p = tmp_path / "t.txt"
    p.write_bytes(content)
    with pytest.raises(UserError, match=message):
        load_corpus(DataConfig(corpus=str(p)))


def test_missing_corpus_path(tmp_path):
    with pytest.raises(UserError, match="no such file.*tinyshakespeare"):
        load_corpus(DataConfig(corpus=str(tmp_path / "nope.txt")))


def test_any_utf8_file_char_vocab(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("héllo wörld, привет мир! " * 40, encoding="utf-8")
    c = load_corpus(DataConfig(corpus=str(p)))
    assert c.vocab_size == len(set("héllo wörld, привет мир! "))
    assert c.decode(list(c.train[:12])) == "héllo wörld,"
    assert len(c.train) == int(0.9 * 25 * 40)


def test_char_vectorised_encoding_matches_the_loop():
    tok = make_tokenizer("char")
    tok.fit("abcxyz\n ÀЖ")
    text = "zyx Ж\nÀ cab"
    assert tok.encode_array(text).tolist() == tok.encode(text)
    with pytest.raises(UserError, match="not in the corpus vocabulary"):
        tok.encode("q")


def test_bpe_round_trip_and_vocab():
    pytest.importorskip("tokenizers")
    tok = make_tokenizer("bpe", 300)
    text = "the quick brown fox jumps over the lazy dog. " * 50
    tok.fit(text)
    ids = tok.encode("the lazy fox")
    assert tok.decode(ids) == "the lazy fox"
    assert 256 < tok.vocab_size <= 300
    assert len(ids) < len("the lazy fox")  # merges learned
