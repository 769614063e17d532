"""``TransformerLM`` -> a transformers model with equal logits: the inverse of ``interop.from_hf``.

A lab model is exported only where a transformers class computes exactly what it computes:

| lab model | transformers class |
|---|---|
| placement pre, LayerNorm, learned positions, GELU-tanh, biases | ``GPT2LMHeadModel`` |
| placement pre, RMSNorm, RoPE, SwiGLU, no biases (grouped-query attention allowed) | ``LlamaForCausalLM`` |
| placement post_branch, RMSNorm, RoPE, SwiGLU, no biases, QK-norm rmsnorm over all of q and k | ``Olmo2ForCausalLM`` |

Exactness is decided by a round trip of the configuration: the transformers config written
for the model is read back with ``interop``'s importer, and every ModelConfig field that
changes the forward pass must come back equal (a field that does not names the refusal).
Only ``init`` (weights are given), ``dropout`` (training only) and ``impl`` (which code computes
the lab side) are exempt.
"""

from __future__ import annotations

from typing import Any

import torch

from normlab.core.errors import UserError
from normlab.core.schema import to_dict
from normlab.model.build import resolve_model
from normlab.model.config import ModelConfig
from normlab.model.interop import config_from_hf, llama_config_from_hf

FAMILIES = {"gpt2": "GPT-2", "llama": "Llama", "olmo2": "OLMo-2"}
_WRITTEN = "GPT-2, Llama and OLMo-2 (the classes export writes)"
# placement -> why none of the exported classes computes it.
_NOT_EXPRESSED = {
    "post": f"none of {_WRITTEN} applies the norm after the residual add",
    "sandwich": f"none of {_WRITTEN} normalises both the branch input and output (Gemma 2/3 do, "
                "with an embedding scale by sqrt(d_model) and logit soft-capping the lab model lacks)",
    "pre_post": f"none of {_WRITTEN} normalises the stream after the add as well as the branch input",
    "deepnorm": f"none of {_WRITTEN} up-weights the shortcut (DeepNorm's alpha)",
    "lns": f"none of {_WRITTEN} scales the branch input by depth (LayerNorm Scaling)",
    "none": f"all of {_WRITTEN} normalise; placement none has no norm on the residual path",
    "layerscale": f"none of {_WRITTEN} scales the branch output per channel (LayerScale's lambda)",
    "admin": f"none of {_WRITTEN} weights the shortcut (Admin's omega)",
    "resi_dual": f"{_WRITTEN} keep one residual stream; ResiDual keeps two",
    "ngpt": f"none of {_WRITTEN} keeps the hidden states on the unit sphere (nGPT)",
    "hybridnorm": f"none of {_WRITTEN} normalises v, or drops the attention's input norm (HybridNorm)",
    "hybridnorm_star": f"none of {_WRITTEN} normalises v, or drops the attention's input norm (HybridNorm*)",
    "normformer": f"none of {_WRITTEN} scales heads or normalises the attention output and FFN activation "
                  "(NormFormer)",
    "subln": f"none of {_WRITTEN} normalises the input of W_O and W_2 (Sub-LN; transformers' BitNet does, "
             "with ternary BitLinear weights the lab model lacks)",
}
_EXEMPT = ("init", "dropout", "impl")


def _placement(cfg: ModelConfig) -> str:
    """The one placement name of every sub-layer, or a refusal."""
    import dataclasses

    plan = resolve_model(cfg)
    names = sorted({n for pair in plan.names() for n in pair})
    if len(names) > 1:
        raise UserError(f"model.placement mixes {', '.join(names)}: a transformers model repeats one block; "
                        "export needs one placement for every sub-layer")
    opts = plan.layout[0][0].options
    if dataclasses.fields(opts) and opts != type(opts)():  # an option set away from its default
        raise UserError(f"placement {names[0]} (with options): not exported; {_NOT_EXPRESSED.get(names[0], '')}")
    return names[0]


def family_for(cfg: ModelConfig) -> str:
    """'gpt2', 'llama' or 'olmo2': the transformers family that expresses ``cfg`` exactly; else a
    UserError naming the placement or field that no exported class computes."""

    name = _placement(cfg)
    if name == "pre":
        if cfg.norm not in ("layernorm", "rmsnorm"):
            raise UserError(f"model.norm={cfg.norm!r}: GPT-2 uses layernorm, Llama rmsnorm; no exported class "
                            f"has {cfg.norm}")
        family = "gpt2" if cfg.norm == "layernorm" else "llama"
    elif name == "post_branch":
        family = "olmo2"
    else:
        why = _NOT_EXPRESSED.get(name, "export writes placements pre (GPT-2, Llama) and post_branch (OLMo-2) only")
        raise UserError(f"placement {name}: {why}")
    hf_cfg = hf_config(cfg, family)
    back = config_from_hf(hf_cfg) if family == "gpt2" else llama_config_from_hf(hf_cfg)
    ours, theirs = _forward_fields(cfg, name), _forward_fields(back, name)
    for key, value in ours.items():
        if theirs.get(key) != value:
            raise UserError(f"model.{key}={value!r}: {FAMILIES[family]} (placement {name}, norm {cfg.norm}) "
                            f"computes only {key}={theirs.get(key)!r}; no exported class matches this model")
    return family


def _forward_fields(cfg: ModelConfig, placement: str) -> dict[str, Any]:
    """The fields that change the forward pass, with defaults resolved (d_ff none -> 4 d)."""

    out = {k: v for k, v in to_dict(cfg).items() if k not in _EXEMPT}
    out.update(placement=placement, d_ff=cfg.ff_width, n_kv_head=cfg.kv_heads,
               final_norm=resolve_model(cfg).final_norm)
    if cfg.pos != "rope":
        out.pop("rope_base")  # unused without RoPE
    if cfg.qk_norm is None:
        out.pop("qk_norm_span")
    return out


def hf_config(cfg: ModelConfig, family: str) -> Any:
    """The transformers config of ``family`` for ``cfg`` (no special tokens: the lab has none)."""
    import transformers as t

    none: dict[str, Any] = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)
    if family == "gpt2":
        return t.GPT2Config(vocab_size=cfg.vocab_size, n_positions=cfg.context, n_embd=cfg.d_model,
                            n_layer=cfg.n_layer, n_head=cfg.n_head, n_inner=cfg.ff_width,
                            activation_function="gelu_new", resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout,
                            attn_pdrop=cfg.dropout, layer_norm_epsilon=cfg.norm_eps,
                            tie_word_embeddings=cfg.tie_embeddings, **none)
    cls = t.LlamaConfig if family == "llama" else t.Olmo2Config
    return cls(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.ff_width,
               num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head, num_key_value_heads=cfg.kv_heads,
               hidden_act="silu", max_position_embeddings=cfg.context, rms_norm_eps=cfg.norm_eps,
               rope_parameters={"rope_type": "default", "rope_theta": float(cfg.rope_base)},
               attention_bias=False, attention_dropout=cfg.dropout,
               tie_word_embeddings=cfg.tie_embeddings, **none)


def _hf_state(sd: dict[str, torch.Tensor], cfg: ModelConfig, family: str) -> dict[str, torch.Tensor]:
    """normlab's tensors under transformers' names: ``interop``'s renaming, run backwards."""
    head = sd.get("lm_head.weight", sd["wte.weight"])
    if family == "gpt2":
        out = {"transformer.wte.weight": sd["wte.weight"], "transformer.wpe.weight": sd["wpe.weight"],
               "transformer.ln_f.weight": sd["norm_f.weight"], "transformer.ln_f.bias": sd["norm_f.bias"],
               "lm_head.weight": head}
        for i in range(cfg.n_layer):
            h, b = f"transformer.h.{i}.", f"blocks.{i}."
            for theirs, ours in {"ln_1": "attn.norm", "ln_2": "ffn.norm"}.items():
                out[f"{h}{theirs}.weight"], out[f"{h}{theirs}.bias"] = sd[f"{b}{ours}.weight"], sd[f"{b}{ours}.bias"]
            for theirs, ours in {"attn.c_attn": "attn.branch.qkv", "attn.c_proj": "attn.branch.proj",
                                 "mlp.c_fc": "ffn.branch.fc", "mlp.c_proj": "ffn.branch.proj"}.items():
                out[f"{h}{theirs}.weight"] = sd[f"{b}{ours}.weight"].t().contiguous()  # Linear -> Conv1D
                out[f"{h}{theirs}.bias"] = sd[f"{b}{ours}.bias"]
        return out
    out = {"model.embed_tokens.weight": sd["wte.weight"], "model.norm.weight": sd["norm_f.weight"],
           "lm_head.weight": head}
    norms = ({"post_attention_layernorm": "attn.norm", "post_feedforward_layernorm": "ffn.norm",
              "self_attn.q_norm": "attn.branch.q_norm", "self_attn.k_norm": "attn.branch.k_norm"}
             if family == "olmo2" else {"input_layernorm": "attn.norm", "post_attention_layernorm": "ffn.norm"})
    q, kv = cfg.n_head * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    for i in range(cfg.n_layer):
        h, b = f"model.layers.{i}.", f"blocks.{i}."
        for theirs, ours in norms.items():
            out[f"{h}{theirs}.weight"] = sd[f"{b}{ours}.weight"]
        wq, wk, wv = sd[f"{b}attn.branch.qkv.weight"].split([q, kv, kv])
        for p, w in zip("qkv", (wq, wk, wv)):
            out[f"{h}self_attn.{p}_proj.weight"] = w.contiguous()
        out[f"{h}self_attn.o_proj.weight"] = sd[f"{b}attn.branch.proj.weight"]
        gate, up = sd[f"{b}ffn.branch.fc.weight"].chunk(2)
        out[f"{h}mlp.gate_proj.weight"], out[f"{h}mlp.up_proj.weight"] = gate.contiguous(), up.contiguous()
        out[f"{h}mlp.down_proj.weight"] = sd[f"{b}ffn.branch.proj.weight"]
    return out


def to_hf(model: Any) -> Any:
    """A transformers causal LM (eval mode, float32) whose logits equal ``model``'s; a UserError
    naming the reason when no exported class expresses the model (see the module table)."""
    import transformers as t

    cfg: ModelConfig = model.cfg
    family = family_for(cfg)
    cls = {"gpt2": t.GPT2LMHeadModel, "llama": t.LlamaForCausalLM, "olmo2": t.Olmo2ForCausalLM}[family]
    hf = cls(hf_config(cfg, family))
    sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    state = _hf_state(sd, cfg, family)
    expected = set(hf.state_dict())
    if set(state) != expected:  # a mapping bug, not a user error: say which names disagree
        raise RuntimeError(f"export {family}: names differ (missing {sorted(expected - set(state))}, "
                           f"extra {sorted(set(state) - expected)})")
    hf.load_state_dict(state, strict=True)
    if cfg.tie_embeddings:
        hf.tie_weights()
    return hf.eval()


@torch.no_grad()
def max_logit_diff(model: Any, hf: Any, ids: torch.Tensor) -> float:
    """max |logits(normlab) - logits(transformers)| over ``ids`` (B, T), both in eval mode."""
    ours, _ = model.eval()(ids)
    theirs = hf.eval()(input_ids=ids, use_cache=False).logits
    return float((ours.float() - theirs.float()).abs().max())
