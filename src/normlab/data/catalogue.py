"""Every built-in tokenizer, one line each.

The only module that fills ``tokenizers.TOKENIZERS``; the registry imports it at its first lookup.
"""

from __future__ import annotations

from normlab.data import tokenizers

tokenizers.TOKENIZERS.add("char", tokenizers.CharTokenizer)
tokenizers.TOKENIZERS.add("byte", tokenizers.ByteTokenizer)
tokenizers.TOKENIZERS.add("bpe", tokenizers.BPETokenizer)
tokenizers.TOKENIZERS.add("pretrained", tokenizers.PretrainedTokenizer)
