"""Tiny random transformers models of each family, built from configs (never downloaded),
and a small BPE tokenizer trained on the test corpus, saved as a Hugging Face model directory."""

from __future__ import annotations

import functools
from pathlib import Path

import torch

VOCAB = 320  # 256 byte symbols, the special tokens, a few merges


def hf_config(family: str):
    """A d=32, 2-layer transformers config of ``family``."""
    import transformers as t

    common = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=48, max_position_embeddings=64, bos_token_id=0, eos_token_id=1,
                  pad_token_id=1)
    if family == "gpt2":
        return t.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                            bos_token_id=0, eos_token_id=0)
    if family == "llama":  # grouped-query attention: 4 query heads share 2 key/value heads
        return t.LlamaConfig(**common, num_key_value_heads=2, rms_norm_eps=1e-6,
                             rope_parameters={"rope_type": "default", "rope_theta": 500.0})
    if family == "olmo2":
        return t.Olmo2Config(**common, num_key_value_heads=2, rms_norm_eps=1e-6)
    # The families below carry every option import maps: a head width apart from d/H (16, not 8),
    # sliding windows on some layers (8 tokens, shorter than the tests' 24), two RoPE bases, and
    # for Gemma weights large enough (initializer_range) that the soft-caps bend the logits.
    local_global = {"full_attention": {"rope_type": "default", "rope_theta": 1000.0},
                    "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}}
    if family == "qwen3":  # the second layer windowed (layers from max_window_layers on)
        return t.Qwen3Config(**common, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                             use_sliding_window=True, sliding_window=8, max_window_layers=1)
    if family == "olmo3":
        return t.Olmo3Config(**common, num_key_value_heads=2, rms_norm_eps=1e-6, sliding_window=8,
                             layer_types=["sliding_attention", "full_attention"], rope_parameters=local_global)
    if family == "gemma2":
        return t.Gemma2Config(**common, num_key_value_heads=2, head_dim=16, sliding_window=8,
                              query_pre_attn_scalar=12, initializer_range=0.3, final_logit_softcapping=5.0)
    if family == "gemma3":
        return t.Gemma3TextConfig(**common, num_key_value_heads=2, head_dim=16, sliding_window=8,
                                  query_pre_attn_scalar=12, initializer_range=0.3,
                                  layer_types=["sliding_attention", "full_attention"], rope_parameters=local_global)
    if family == "bert":
        return t.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=48, max_position_embeddings=64, pad_token_id=0)
    raise ValueError(family)


def hf_model(family: str, seed: int = 0):
    """A random model of ``family`` in eval mode, its norms and biases moved away from (1, 0)."""
    import transformers as t

    torch.manual_seed(seed)
    cfg = hf_config(family)
    cls = {"gpt2": t.GPT2LMHeadModel, "llama": t.LlamaForCausalLM, "olmo2": t.Olmo2ForCausalLM,
           "qwen3": t.Qwen3ForCausalLM, "olmo3": t.Olmo3ForCausalLM, "gemma2": t.Gemma2ForCausalLM,
           "gemma3": t.Gemma3ForCausalLM, "bert": t.BertForMaskedLM}[family]
    model = cls(cfg).eval()
    with torch.no_grad():  # norm gains start at 1 (or 0 for Gemma): move them so the mapping matters
        for name, p in model.named_parameters():
            if "norm" in name or "ln_" in name or name.endswith(".bias"):
                p.add_(0.2 * torch.randn_like(p))
    return model


@functools.lru_cache(maxsize=4)
def tokenizer(text: str, family: str):
    """A byte-level BPE of VOCAB tokens trained on the start of ``text`` (every byte is in its
    alphabet, so any text encodes), with the special tokens ``family`` needs."""
    import tokenizers as tk
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] if family == "bert" else ["<s>", "</s>"]
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials, show_progress=False,
                                     initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text[:100_000]], trainer=trainer)
    if family == "bert":  # [CLS] text [SEP], as BERT's own tokenizer
        tok.post_processor = tk.processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", tok.token_to_id("[CLS]")),
                                                     ("[SEP]", tok.token_to_id("[SEP]"))])
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                       cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")


def save(family: str, text: str, out: Path, with_tokenizer: bool = True) -> Path:
    """``save_pretrained`` of a tiny ``family`` model (and its tokenizer) into ``out``."""
    model = hf_model(family)
    model.save_pretrained(out)
    if with_tokenizer:
        tokenizer(text, family).save_pretrained(out)
    return out
