"""Tokenizers by name: ``char`` (vocabulary from the corpus), ``byte`` (256), ``bpe`` (extra).

A tokenizer is fitted on the whole corpus text, encodes it to a numpy array in one
vectorised pass, and exposes a JSON-able ``state`` from which it can be rebuilt (stored
next to the cached token array and in checkpoints, so ``normlab sample`` can decode).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from normlab.core.errors import UserError
from normlab.core.registry import Registry


class Tokenizer:
    """Base: ``fit(text)``, ``encode``/``decode``, ``vocab_size`` and ``state``."""

    name = ""

    def fit(self, text: str) -> None:
        """Learn the vocabulary from the corpus (no-op for fixed vocabularies)."""

    def encode_array(self, text: str) -> np.ndarray:
        return np.asarray(self.encode(text), dtype=np.int64)

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def decode(self, ids: list[int]) -> str:
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def state(self) -> dict[str, Any]:
        return {"name": self.name}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Tokenizer":
        return cls()


TOKENIZERS: Registry[type[Tokenizer]] = Registry("tokenizer", "data.tokenizer", catalogue="normlab.data.catalogue")


class CharTokenizer(Tokenizer):
    """One id per distinct character, sorted by code point (65 for Tiny Shakespeare)."""

    name = "char"

    def __init__(self, chars: str = "") -> None:
        self.chars = chars
        self._index = {c: i for i, c in enumerate(chars)}
        self._lut: np.ndarray | None = None

    def fit(self, text: str) -> None:
        CharTokenizer.__init__(self, "".join(sorted(set(text))))

    def encode_array(self, text: str) -> np.ndarray:
        # A table from code point to id (-1: not in the vocabulary), indexed by the text's code
        # points: no Python loop, and 8 bytes per character at most (a streamed corpus encodes
        # piece by piece, so this bounds its memory).
        points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        lut = self._table()
        ids = lut[np.minimum(points, len(lut) - 1)]
        if len(points) and (points.max() >= len(lut) - 1 or ids.min() < 0):
            raise UserError("text contains characters outside the char vocabulary of the corpus")
        return ids

    def _table(self) -> np.ndarray:
        if self._lut is None:
            vocab = np.frombuffer(self.chars.encode("utf-32-le"), dtype=np.uint32)
            lut = np.full(int(vocab.max(initial=0)) + 2, -1, dtype=np.int32)  # the last entry: beyond
            lut[vocab] = np.arange(len(vocab), dtype=np.int32)
            self._lut = lut
        return self._lut

    def encode(self, text: str) -> list[int]:
        try:
            return [self._index[c] for c in text]
        except KeyError as e:
            raise UserError(f"character {e.args[0]!r} is not in the corpus vocabulary "
                            f"({len(self.chars)} characters)") from None

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def state(self) -> dict[str, Any]:
        return {"name": self.name, "chars": self.chars}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Tokenizer":
        return cls(state["chars"])


class ByteTokenizer(Tokenizer):
    """The UTF-8 bytes of the text: a fixed vocabulary of 256."""

    name = "byte"

    def encode_array(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")

    @property
    def vocab_size(self) -> int:
        return 256


class _LibraryTokenizer(Tokenizer):
    """Shared by the tokenizers that wrap a ``tokenizers.Tokenizer`` in ``self._tok``."""

    _tok: Any

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids))

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size()


class BPETokenizer(_LibraryTokenizer):
    """Byte-level BPE trained locally on the corpus (Sennrich et al. 2016; GPT-2's variant).

    Needs the ``tokenizers`` library: ``pip install 'normlab[bpe]'``.
    """

    name = "bpe"

    def __init__(self, vocab: int = 512, json_text: str | None = None) -> None:
        self.vocab = vocab
        self._tok = _tokenizers().Tokenizer.from_str(json_text) if json_text else None

    def fit(self, text: str) -> None:
        tk = _tokenizers()
        tok = tk.Tokenizer(tk.models.BPE())
        tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = tk.decoders.ByteLevel()
        trainer = tk.trainers.BpeTrainer(vocab_size=self.vocab, show_progress=False,
                                         initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator([text], trainer=trainer)
        self._tok = tok

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text).ids

    def state(self) -> dict[str, Any]:
        return {"name": self.name, "vocab": self.vocab, "json": self._tok.to_str()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Tokenizer":
        return cls(state["vocab"], state["json"])


class PretrainedTokenizer(_LibraryTokenizer):
    """A fixed Hugging Face ``tokenizer.json`` (a checkpoint's own; ``data.tokenizer=PATH``).

    Encodes without special tokens (the corpus is one stream); ``vocab_size`` counts the
    tokenizer's ids, which a checkpoint's embedding may exceed (padded vocabularies).
    """

    name = "pretrained"

    def __init__(self, json_text: str) -> None:
        self.json_text = json_text
        self._tok = _tokenizers().Tokenizer.from_str(json_text)

    @classmethod
    def from_file(cls, path: str) -> "PretrainedTokenizer":
        try:
            return cls(open(path, encoding="utf-8").read())
        except OSError as e:
            raise UserError(f"data.tokenizer={path!r}: cannot read it ({e.strerror})") from None
        except Exception as e:  # tokenizers raises its own exception type for a malformed file
            raise UserError(f"data.tokenizer={path!r}: not a tokenizer.json ({e})") from None

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def state(self) -> dict[str, Any]:
        return {"name": self.name, "json": self.json_text}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Tokenizer":
        return cls(state["json"])


def _tokenizers() -> Any:
    try:
        import tokenizers
    except ImportError:
        raise UserError("data.tokenizer='bpe' needs the 'tokenizers' package: "
                        "pip install 'normlab[bpe]'") from None
    return tokenizers


def make_tokenizer(name: str, bpe_vocab: int = 512) -> Tokenizer:
    if name.endswith(".json"):
        return PretrainedTokenizer.from_file(name)
    cls = TOKENIZERS.get(name)
    return BPETokenizer(bpe_vocab) if cls is BPETokenizer else cls()


def tokenizer_from_state(state: dict[str, Any]) -> Tokenizer:
    return TOKENIZERS.get(state["name"]).from_state(state)
