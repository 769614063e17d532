"""Load a corpus as token arrays: read, verify, tokenise once, cache as memory-mapped .npy.

The cache key is the sha256 of the corpus bytes plus the tokenizer (and its settings), so
an edited text file or another tokenizer never reuses stale tokens. The split is by
tokens: the first ``train_fraction`` train, the rest validate (90/10 for Tiny Shakespeare
gives 1,003,854 / 111,540 characters, the customary split).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from normlab.core.errors import UserError
from normlab.core.fsutil import atomic_write_bytes, atomic_write_text
from normlab.data.config import DataConfig
from normlab.data.shards import open_prepared
from normlab.data.source import KNOWN, cache_dir, read_corpus_bytes, sha256_bytes
from normlab.data.tokenizers import Tokenizer, make_tokenizer, tokenizer_from_state


@dataclass
class Corpus:
    """Token arrays of one corpus. ``train``/``val`` are 1-D integer arrays (memory-mapped)."""

    train: np.ndarray  # or a TokenStream over prepared shards (normlab.data.shards): len, slices, gathers
    val: np.ndarray
    tokenizer: Tokenizer
    sha256: str
    source: str

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode([int(i) for i in ids])


def _decode_text(data: bytes, source: str) -> str:
    if not data.strip():
        raise UserError(f"{source}: the corpus is empty; give a text file with some content")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{source}: not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r}); "
                        f"convert it, e.g. iconv -t UTF-8") from None


def _token_dtype(vocab: int) -> type:
    return np.uint16 if vocab <= 2**16 else np.int32


def load_corpus(cfg: DataConfig, expect_sha256: str | None = None) -> Corpus:
    """Read, verify and tokenise ``cfg.corpus`` (cached), split into train and validation.

    A folder ``normlab data prepare`` wrote is read as its memory-mapped shards
    (``normlab.data.shards``); the split is the same rule either way. ``expect_sha256``: the
    bytes a run recorded (``normlab.data.record``); others are refused."""

    if cfg.corpus not in KNOWN and Path(cfg.corpus).expanduser().is_dir():
        tokens, tokenizer, digest, source = open_prepared(cfg)
        _expected(digest, expect_sha256, source)
    else:
        tokens, tokenizer, digest, source = _tokenised_text(cfg, expect_sha256)
    n_train = int(len(tokens) * cfg.train_fraction)
    if n_train < 2 or len(tokens) - n_train < 2:
        raise UserError(f"{source}: {len(tokens)} tokens are too few to split "
                        f"(data.train_fraction={cfg.train_fraction}); use a longer text")
    return Corpus(tokens[:n_train], tokens[n_train:], tokenizer, digest, source)


def _expected(digest: str, expect_sha256: str | None, source: str) -> None:
    if expect_sha256 and digest != expect_sha256:
        raise UserError(f"data.corpus={source!r}: sha256 {digest} is not the run's corpus (sha256 "
                        f"{expect_sha256}); put the original back, or pass --data-dir DIR naming the folder "
                        "that holds it")


def _tokenised_text(cfg: DataConfig, expect_sha256: str | None = None) -> tuple[np.ndarray, Tokenizer, str, str]:
    """The token array of a text corpus (from the cache when there), its tokenizer, sha256 and source."""
    data, source = read_corpus_bytes(cfg.corpus, cfg.data_dir)
    digest = sha256_bytes(data)
    _expected(digest, expect_sha256, source)
    key = cfg.tokenizer + (f"{cfg.bpe_vocab}" if cfg.tokenizer == "bpe" else "")
    if cfg.tokenizer.endswith(".json"):  # a tokenizer file: keyed by its content, not its path
        try:
            key = "file-" + sha256_bytes(Path(cfg.tokenizer).read_bytes())[:16]
        except OSError as e:
            raise UserError(f"data.tokenizer={cfg.tokenizer!r}: cannot read it ({e.strerror})") from None
    folder = cache_dir() / "tokens" / f"{digest[:24]}-{key}"
    tokens_path, tok_path = folder / "tokens.npy", folder / "tokenizer.json"
    tokens = tokenizer = None
    if tokens_path.is_file() and tok_path.is_file():
        try:
            tokenizer = tokenizer_from_state(json.loads(tok_path.read_text(encoding="utf-8")))
            tokens = np.load(tokens_path, mmap_mode="r")
        except (OSError, ValueError, KeyError):
            tokens = tokenizer = None  # a damaged cache entry is rebuilt, never trusted
    if tokens is None or tokenizer is None:
        text = _decode_text(data, source)
        tokenizer = make_tokenizer(cfg.tokenizer, cfg.bpe_vocab)
        tokenizer.fit(text)
        arr: np.ndarray = tokenizer.encode_array(text).astype(_token_dtype(tokenizer.vocab_size))
        tokens = _cache(arr, tokens_path, tok_path, tokenizer)
    return tokens, tokenizer, digest, source


def _cache(arr: np.ndarray, tokens_path: Path, tok_path: Path, tokenizer: Tokenizer) -> np.ndarray:
    import io

    try:
        buf = io.BytesIO()
        np.save(buf, arr)
        atomic_write_bytes(tokens_path, buf.getvalue())
        atomic_write_text(tok_path, json.dumps(tokenizer.state()))
        return np.load(tokens_path, mmap_mode="r")
    except OSError:
        return arr  # read-only cache: keep the in-memory array, tokenise again next time
