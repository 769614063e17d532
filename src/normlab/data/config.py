"""Data configuration (section ``data``)."""

from __future__ import annotations

from dataclasses import dataclass

from normlab.core.schema import Section, doc
from normlab.data.tokenizers import TOKENIZERS

# chosen by a tokenizer.json path, never by its registry name
BY_PATH = "pretrained"


@dataclass
class DataConfig(Section):
    """Which corpus, how it is tokenised and split."""

    section = "data"
    corpus: str = doc("'tinyshakespeare', a path to a UTF-8 text file, or a folder `normlab data prepare` "
                      "wrote (token shards; data.tokenizer must name the tokenizer they were made with)",
                      "tinyshakespeare")
    data_dir: str | None = doc("directory holding tinyshakespeare.txt (else $NORMLAB_DATA_DIR, "
                               "else the user cache, downloading if missing)", None)
    tokenizer: str = doc("char (vocabulary from the corpus), byte (256), bpe (needs extra 'bpe'), or the path "
                         "of a Hugging Face tokenizer.json (e.g. one `normlab import` wrote)", "char")
    bpe_vocab: int = doc("vocabulary size when tokenizer=bpe", 512)
    train_fraction: float = doc("leading fraction of tokens used for training; the rest validates", 0.9)

    def __post_init__(self) -> None:
        self.check(bool(self.corpus), "corpus", "name a corpus ('tinyshakespeare') or a text file path")

        names = [n for n in TOKENIZERS.names() if n != BY_PATH]
        self.check(self.tokenizer in names or self.tokenizer.endswith(".json"), "tokenizer",
                   f"use one of {', '.join(names)} or the path of a tokenizer.json")
        self.check(self.bpe_vocab >= 257, "bpe_vocab", "must be >= 257 (bytes plus merges)")
        self.check(0 < self.train_fraction < 1, "train_fraction", "must be in (0, 1), e.g. 0.9")
