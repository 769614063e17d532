"""Hugging Face checkpoints -> ``TransformerLM``, with logits equal to transformers' forward.

Three families are expressible exactly (``from_hf`` picks by ``config.model_type``):

| family | model_type | placement | norm | what else |
|---|---|---|---|---|
| GPT-2 | gpt2 | pre | LayerNorm | learned positions, GELU-tanh, biases, tied head |
| Llama (Mistral without sliding window) | llama, mistral | pre | RMSNorm | RoPE, SwiGLU, no biases, grouped-query attention |
| OLMo-2 | olmo2 | post_branch | RMSNorm | as Llama plus QK-norm (RMSNorm) over all of q and all of k |

Everything else the inspector knows (Gemma 2/3: logit soft-capping and scaled embeddings;
BERT: bidirectional; GPT-NeoX: parallel residual; Qwen2: q/k/v biases without o biases) is
inspect-only: ``from_hf`` refuses it naming the reason.

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
from normlab.model.transformer import TransformerLM

# GPT-2 options whose other values change the computation in ways ``pre`` does not model.
_REQUIRED = {"activation_function": ("gelu_new", "gelu_pytorch_tanh"), "scale_attn_weights": (True,),
             "scale_attn_by_inverse_layer_idx": (False,), "reorder_and_upcast_attn": (False,)}


def config_from_hf(hf_config: Any, **overrides: Any) -> ModelConfig:
    """The ``ModelConfig`` of a transformers ``GPT2Config`` (placement pre, LayerNorm, GELU-tanh)."""
    for key, ok in _REQUIRED.items():
        value = getattr(hf_config, key, ok[0])
        if value not in ok:
            raise UserError(f"GPT2Config.{key}={value!r}: normlab's pre placement matches GPT-2 only "
                            f"with {key} in {list(ok)}")
    base = dict(vocab_size=hf_config.vocab_size, context=hf_config.n_positions, n_layer=hf_config.n_layer,
                d_model=hf_config.n_embd, n_head=hf_config.n_head, placement="pre", norm="layernorm",
                final_norm=True, init="gpt2", ffn="gelu", d_ff=getattr(hf_config, "n_inner", None),
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


# ---------------------------------------------------------------- Llama family and OLMo-2
LLAMA_TYPES = ("llama", "mistral")
# model_type -> why TransformerLM cannot reproduce it (``from_hf`` names the reason).
INSPECT_ONLY = {
    "gemma2": "Gemma 2 soft-caps attention and output logits (tanh) and scales the embedding by sqrt(d)",
    "gemma3_text": "Gemma 3 scales the embedding by sqrt(d), mixes sliding-window and global layers and "
                   "uses two RoPE bases",
    "gpt_neox": "GPT-NeoX/Pythia use a parallel residual (attention and FFN read the same x) and partial RoPE",
    "bert": "BERT is bidirectional (no causal mask) with token-type embeddings and a post-LN embedding norm",
    "roberta": "RoBERTa is bidirectional (no causal mask) with a post-LN embedding norm",
    "qwen2": "Qwen2 has biases on W_Q, W_K, W_V but not on W_O (normlab's model.bias is all or nothing)",
}


def _rope_theta(hf_config: Any) -> float:
    """RoPE base of a transformers config; refuses scaled variants (Llama 3.1 'llama3', YaRN, ...)."""
    # transformers 5 keeps RoPE in ``rope_parameters`` (and mirrors it as ``rope_scaling``);
    # 4.x kept the scaling in ``rope_scaling`` ("type" before "rope_type") and the base in
    # ``rope_theta``. Every place one may sit is read, so no scaling is ever dropped silently.
    rp = getattr(hf_config, "rope_parameters", None) or {}
    for table in (rp, getattr(hf_config, "rope_scaling", None) or {}):
        rtype = table.get("rope_type", table.get("type", "default"))
        if rtype != "default":
            raise UserError(f"rope_type={rtype!r}: normlab's RoPE is the unscaled one (rope_type 'default'); "
                            "inspect this checkpoint with `normlab inspect` instead of importing it")
    return float(rp.get("rope_theta", getattr(hf_config, "rope_theta", 10000.0)))


def llama_config_from_hf(hf_config: Any, **overrides: Any) -> ModelConfig:
    """The ``ModelConfig`` of a ``LlamaConfig``/``MistralConfig``/``Olmo2Config``."""
    kind = hf_config.model_type
    name = type(hf_config).__name__
    d, H = hf_config.hidden_size, hf_config.num_attention_heads
    checks = {"hidden_act": (getattr(hf_config, "hidden_act", "silu"), ("silu",)),
              "attention_bias": (getattr(hf_config, "attention_bias", False), (False,)),
              "mlp_bias": (getattr(hf_config, "mlp_bias", False), (False,)),
              "head_dim": (getattr(hf_config, "head_dim", None) or d // H, (d // H,)),
              "sliding_window": (getattr(hf_config, "sliding_window", None), (None,))}
    for key, (value, ok) in checks.items():
        if value not in ok:
            raise UserError(f"{name}.{key}={value!r}: TransformerLM reproduces {kind} only with "
                            f"{key} in {list(ok)}; inspect it with `normlab inspect` instead")
    base = dict(vocab_size=hf_config.vocab_size, context=hf_config.max_position_embeddings,
                n_layer=hf_config.num_hidden_layers, d_model=d, n_head=H,
                n_kv_head=getattr(hf_config, "num_key_value_heads", None) or H,
                placement="pre", norm="rmsnorm", final_norm=True, init="gpt2", ffn="swiglu",
                d_ff=hf_config.intermediate_size, pos="rope", rope_base=_rope_theta(hf_config), bias=False,
                dropout=float(getattr(hf_config, "attention_dropout", 0.0)),
                tie_embeddings=bool(getattr(hf_config, "tie_word_embeddings", False)),
                norm_eps=float(hf_config.rms_norm_eps))
    if kind == "olmo2":
        base.update(placement="post_branch", qk_norm="rmsnorm", qk_norm_span="full")
    base.update(overrides)
    return ModelConfig(**base)


def _llama_state(sd: dict[str, torch.Tensor], n_layer: int, olmo2: bool) -> dict[str, torch.Tensor]:
    """Rename Llama/OLMo-2 tensors to normlab's; q/k/v and gate/up are stacked as ``qkv`` and ``fc``."""
    sd = {re.sub(r"^model\.", "", k): v for k, v in sd.items()}
    out = {"wte.weight": sd["embed_tokens.weight"], "norm_f.weight": sd["norm.weight"]}
    if "lm_head.weight" in sd:
        out["lm_head.weight"] = sd["lm_head.weight"]
    # OLMo-2 normalises each branch's output (post_branch); Llama its input (pre).
    norms = ({"attn.norm": "post_attention_layernorm", "ffn.norm": "post_feedforward_layernorm",
              "attn.branch.q_norm": "self_attn.q_norm", "attn.branch.k_norm": "self_attn.k_norm"} if olmo2
             else {"attn.norm": "input_layernorm", "ffn.norm": "post_attention_layernorm"})
    for i in range(n_layer):
        h, b = f"layers.{i}.", f"blocks.{i}."
        for ours, theirs in norms.items():
            out[f"{b}{ours}.weight"] = sd[f"{h}{theirs}.weight"]
        out[f"{b}attn.branch.qkv.weight"] = torch.cat([sd[f"{h}self_attn.{p}_proj.weight"] for p in "qkv"])
        out[f"{b}attn.branch.proj.weight"] = sd[f"{h}self_attn.o_proj.weight"]
        out[f"{b}ffn.branch.fc.weight"] = torch.cat([sd[f"{h}mlp.gate_proj.weight"], sd[f"{h}mlp.up_proj.weight"]])
        out[f"{b}ffn.branch.proj.weight"] = sd[f"{h}mlp.down_proj.weight"]
    return out


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
    """A TransformerLM holding the weights of a transformers Llama, Mistral or OLMo-2 model.

    Llama/Mistral become ``placement="pre"`` with RMSNorm, RoPE, SwiGLU and grouped-query
    attention; OLMo-2 becomes ``post_branch`` with QK-norm over the full q and k.
    ``overrides`` change ModelConfig fields (e.g. ``context=2048`` to shrink the RoPE tables).
    """
    cfg = llama_config_from_hf(hf_model.config, **overrides)
    sd = hf_model.state_dict()
    return _load(cfg, _llama_state(sd, cfg.n_layer, hf_model.config.model_type == "olmo2"), "from_hf_llama")


def from_hf(hf_model: Any, **overrides: Any):  # -> TransformerLM
    """Import any expressible transformers causal LM (see the module table), by ``model_type``."""
    kind = getattr(hf_model.config, "model_type", None)
    if kind == "gpt2":
        return from_hf_gpt2(hf_model, config_from_hf(hf_model.config, **overrides))
    if kind in LLAMA_TYPES or kind == "olmo2":
        return from_hf_llama(hf_model, **overrides)
    if kind in INSPECT_ONLY:
        raise UserError(f"model_type {kind!r} is inspect-only: {INSPECT_ONLY[kind]}; "
                        "TransformerLM cannot reproduce it exactly (use `normlab inspect`)")
    raise UserError(f"model_type {kind!r}: cannot import it; importable: gpt2, {', '.join(LLAMA_TYPES)}, olmo2")
