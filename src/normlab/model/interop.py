"""Hugging Face checkpoints -> ``TransformerLM``, with logits equal to transformers' forward.

GPT-2 is mapped here; the RoPE families (Llama, Mistral, Qwen3, OLMo-2, OLMo-3, Gemma 2,
Gemma 3) through the one table of ``hf_families`` (``from_hf`` picks by ``config.model_type``).
Everything else the inspector knows (BERT: bidirectional; GPT-NeoX: parallel residual;
Qwen2: q/k/v biases without o biases) is inspect-only: ``from_hf`` refuses it naming the reason.

GPT-2 in detail:

GPT-2 (Radford et al. 2019) is a Pre-LN Transformer with a final LayerNorm: each block is
x + attn(ln_1(x)), then x + mlp(ln_2(x)), and ln_f before the tied head. Loading its
weights into ``placement="pre"`` and matching the logits to 1e-5 proves that normlab's
Pre-LN is GPT-2's. transformers stores linear maps as ``Conv1D`` with weight (in, out), the
transpose of ``nn.Linear``; ``c_attn`` holds W_Q, W_K, W_V side by side, as our ``qkv``.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from normlab.core.errors import UserError
from normlab.model.config import ModelConfig
from normlab.model.hf_families import FAMILIES, lab_gelu, state_from_hf
from normlab.model.hf_families import config_from_hf as rope_config_from_hf
from normlab.model.transformer import TransformerLM

# GPT-2 options whose other values change the computation in ways ``pre`` does not model.
_REQUIRED = {"scale_attn_weights": (True,), "scale_attn_by_inverse_layer_idx": (False,),
             "reorder_and_upcast_attn": (False,)}


def config_from_hf(hf_config: Any, **overrides: Any) -> ModelConfig:
    """The ``ModelConfig`` of a transformers ``GPT2Config`` (placement pre, LayerNorm, and the
    GELU its ``activation_function`` names: GPT-2's gelu_new is ``activation="gelu_tanh"``, set
    explicitly so that the import never follows the lab's default)."""
    for key, ok in _REQUIRED.items():
        value = getattr(hf_config, key, ok[0])
        if value not in ok:
            raise UserError(f"GPT2Config.{key}={value!r}: normlab's pre placement matches GPT-2 only "
                            f"with {key} in {list(ok)}")
    base = dict(vocab_size=hf_config.vocab_size, context=hf_config.n_positions, n_layer=hf_config.n_layer,
                d_model=hf_config.n_embd, n_head=hf_config.n_head, placement="pre", norm="layernorm",
                final_norm=True, init="gpt2", ffn="gelu", d_ff=getattr(hf_config, "n_inner", None),
                activation=lab_gelu(hf_config, "activation_function", "gelu_new"),
                pos="learned", bias=True, dropout=float(hf_config.resid_pdrop),
                tie_embeddings=bool(getattr(hf_config, "tie_word_embeddings", True)),
                norm_eps=float(hf_config.layer_norm_epsilon))
    base.update(overrides)
    return ModelConfig(**base)


def _gpt2_state(sd: dict[str, torch.Tensor], n_layer: int) -> dict[str, torch.Tensor]:
    """Rename (and transpose) GPT-2 tensors to normlab's names."""
    sd = {re.sub(r"^transformer\.", "", k): v for k, v in sd.items()}
    out = {"wte.weight": sd["wte.weight"], "wpe.weight": sd["wpe.weight"],
           "norm_f.weight": sd["ln_f.weight"], "norm_f.bias": sd["ln_f.bias"]}
    if "lm_head.weight" in sd:
        out["lm_head.weight"] = sd["lm_head.weight"]
    for i in range(n_layer):
        h, b = f"h.{i}.", f"blocks.{i}."
        pairs = {"attn.norm": "ln_1", "ffn.norm": "ln_2"}
        for ours, theirs in pairs.items():
            out[f"{b}{ours}.weight"] = sd[f"{h}{theirs}.weight"]
            out[f"{b}{ours}.bias"] = sd[f"{h}{theirs}.bias"]
        conv = {"attn.branch.qkv": "attn.c_attn", "attn.branch.proj": "attn.c_proj",
                "ffn.branch.fc": "mlp.c_fc", "ffn.branch.proj": "mlp.c_proj"}
        for ours, theirs in conv.items():
            out[f"{b}{ours}.weight"] = sd[f"{h}{theirs}.weight"].t()  # Conv1D (in, out) -> Linear (out, in)
            out[f"{b}{ours}.bias"] = sd[f"{h}{theirs}.bias"]
    return out


def from_hf_gpt2(hf_model_or_state_dict: Any, config: Any = None):  # -> TransformerLM
    """Build a ``pre`` TransformerLM holding the weights of a transformers GPT-2.

    ``hf_model_or_state_dict``: a ``GPT2LMHeadModel`` / ``GPT2Model``, or its state dict.
    ``config``: a ``GPT2Config`` or a ``ModelConfig``; required with a bare state dict,
    because the number of heads cannot be read from the weights.
    """
    src = hf_model_or_state_dict
    if isinstance(src, dict):
        sd = src
        if config is None:
            raise UserError("from_hf_gpt2: a state dict needs config= (a GPT2Config or ModelConfig): "
                            "n_head cannot be inferred from the weights")
    else:
        sd = src.state_dict()
        config = config if config is not None else src.config
    cfg = config if isinstance(config, ModelConfig) else config_from_hf(config)
    if cfg.placement != "pre" or cfg.pos != "learned" or cfg.ffn != "gelu" or cfg.norm != "layernorm":
        raise UserError("from_hf_gpt2: config must describe GPT-2 (placement pre, pos learned, "
                        "ffn gelu, norm layernorm)")
    return _load(cfg, _gpt2_state(sd, cfg.n_layer), "from_hf_gpt2")


# ------------------------------------------- the RoPE families (Llama ... Gemma 3): hf_families.py
# model_type -> why TransformerLM cannot reproduce it (``from_hf`` names the reason).
INSPECT_ONLY = {
    "gpt_neox": "GPT-NeoX/Pythia use a parallel residual (attention and FFN read the same x) and partial RoPE",
    "bert": "BERT is bidirectional (no causal mask) with token-type embeddings and a post-LN embedding norm",
    "roberta": "RoBERTa is bidirectional (no causal mask) with a post-LN embedding norm",
    "qwen2": "Qwen2 has biases on W_Q, W_K, W_V but not on W_O (normlab's model.bias is all or nothing)",
}


def llama_config_from_hf(hf_config: Any, **overrides: Any) -> ModelConfig:
    """The ``ModelConfig`` of a Llama, Mistral, Qwen3, OLMo-2, OLMo-3, Gemma 2 or Gemma 3 config
    (``hf_families.config_from_hf``)."""
    return rope_config_from_hf(hf_config, **overrides)


def _load(cfg: ModelConfig, state: dict[str, torch.Tensor], who: str):  # -> TransformerLM

    model = TransformerLM(cfg)
    if cfg.tie_embeddings:
        state.pop("lm_head.weight", None)  # the head is wte
    elif "lm_head.weight" not in state:
        state["lm_head.weight"] = state["wte.weight"]
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not (cfg.tie_embeddings and k == "lm_head.weight")]
    if missing or unexpected:
        raise UserError(f"{who}: weights do not fit the config (missing {missing}, unexpected {unexpected})")
    return model


def from_hf_llama(hf_model: Any, **overrides: Any):  # -> TransformerLM
    """A TransformerLM holding the weights of a transformers model of ``hf_families.FAMILIES``.

    Llama/Mistral/Qwen3 become ``placement="pre"``, OLMo-2/OLMo-3 ``post_branch`` with QK-norm
    over the full q and k, Gemma 2/3 ``sandwich`` with ``rmsnorm_1p`` (see ``hf_families``).
    ``overrides`` change ModelConfig fields (e.g. ``context=2048`` to shrink the RoPE tables).
    """
    cfg = llama_config_from_hf(hf_model.config, **overrides)
    kind = hf_model.config.model_type
    return _load(cfg, state_from_hf(hf_model.state_dict(), cfg, kind), "from_hf_llama")


def from_hf(hf_model: Any, **overrides: Any):  # -> TransformerLM
    """Import any expressible transformers causal LM (see the module table), by ``model_type``."""
    kind = getattr(hf_model.config, "model_type", None)
    if kind == "gpt2":
        return from_hf_gpt2(hf_model, config_from_hf(hf_model.config, **overrides))
    if kind in FAMILIES:
        return from_hf_llama(hf_model, **overrides)
    if kind in INSPECT_ONLY:
        raise UserError(f"model_type {kind!r} is inspect-only: {INSPECT_ONLY[kind]}; "
                        "TransformerLM cannot reproduce it exactly (use `normlab inspect`)")
    raise UserError(f"model_type {kind!r}: cannot import it; importable: gpt2, {', '.join(FAMILIES)}")
