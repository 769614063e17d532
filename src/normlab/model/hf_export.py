"""``TransformerLM`` -> a transformers model with equal logits: the inverse of ``interop.from_hf``.

A lab model is exported only where a transformers class computes exactly what it computes:

| lab model | transformers class |
|---|---|
| placement pre, LayerNorm, learned positions, GELU FFN (either GELU), biases | ``GPT2LMHeadModel`` |
| placement pre, RMSNorm, RoPE, SwiGLU, no biases (grouped-query attention allowed) | ``LlamaForCausalLM`` (``MistralForCausalLM`` with one sliding window everywhere) |
| as Llama, plus QK-norm rmsnorm per head (sliding windows per layer allowed) | ``Qwen3ForCausalLM`` |
| placement post_branch, RMSNorm, RoPE, SwiGLU, no biases, QK-norm rmsnorm over all of q and k | ``Olmo2ForCausalLM`` (``Olmo3ForCausalLM`` with sliding windows) |
| placement sandwich, rmsnorm_1p, RoPE, GeGLU (either GELU), embedding x sqrt(d) (caps, windows, query scale allowed) | ``Gemma2ForCausalLM`` (``Gemma3ForCausalLM`` with QK-norm rmsnorm_1p per head) |

Exactness is decided by a round trip of the configuration: the transformers config written
for the model is read back with ``interop``'s importer, and every ModelConfig field that
changes the forward pass must come back equal (a field that does not names the refusal).
Only ``init`` (weights are given), ``dropout`` (training only) and ``impl`` (which code computes
the lab side) are exempt; fields with a resolved default (``d_head``, ``attn_scale``,
``embed_scale``, ...) are compared resolved, and ``activation`` only where the FFN reads it
(SwiGLU's gate is SiLU). The GELU is written under the family's own name for the tanh GELU
(GPT-2's ``gelu_new``, Gemma's ``gelu_pytorch_tanh``) and as ``gelu`` for the exact one,
which transformers computes with torch's exact kernel (``GELUActivation``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from normlab.core.errors import UserError
from normlab.model import hf_families
from normlab.model.build import resolve_model
from normlab.model.config import ModelConfig
from normlab.model.interop import config_from_hf, llama_config_from_hf

FAMILIES = {"gpt2": "GPT-2", **{k: f.name for k, f in hf_families.FAMILIES.items()}}
_WRITTEN = "GPT-2, Llama, Qwen3, OLMo-2/3 and Gemma 2/3 (the classes export writes)"
# placement -> why none of the exported classes computes it.
_NOT_EXPRESSED = {
    "post": f"none of {_WRITTEN} applies the norm after the residual add",
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
    "keel": f"none of {_WRITTEN} up-weights the shortcut and normalises the stream after the add (Keel)",
    "siamese": f"{_WRITTEN} keep one residual stream; SiameseNorm keeps two",
    "attn_res": f"none of {_WRITTEN} replaces the residual sum by attention over depth (Attention Residuals)",
    "mhc": f"{_WRITTEN} keep one residual stream; mHC keeps four",
}
_EXEMPT = ("init", "dropout", "impl", "base_width", "base_depth")  # (base_*: read only by a parametrisation; model.param is compared)


def _placement(cfg: ModelConfig) -> str:
    """The one placement name of every sub-layer, or a refusal."""
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
    """The model_type of the transformers family that expresses ``cfg`` exactly ('gpt2', 'llama',
    'qwen3', 'olmo2', 'gemma2', ...); else a UserError naming the placement or field that no
    exported class computes."""

    name = _placement(cfg)
    windowed = cfg.sliding_window is not None
    if name == "pre":
        if cfg.norm not in ("layernorm", "rmsnorm"):
            raise UserError(f"model.norm={cfg.norm!r}: GPT-2 uses layernorm, Llama and Qwen3 rmsnorm; no exported "
                            f"class has {cfg.norm}")
        family = ("gpt2" if cfg.norm == "layernorm" else "qwen3" if cfg.qk_norm is not None
                  else "mistral" if windowed and cfg.window_layers is None else "qwen3" if windowed else "llama")
    elif name == "post_branch":
        family = "olmo3" if windowed else "olmo2"
    elif name == "sandwich":
        family = "gemma3_text" if cfg.qk_norm is not None or cfg.rope_local_base is not None else "gemma2"
    else:
        why = _NOT_EXPRESSED.get(name, "export writes placements pre, post_branch and sandwich only")
        raise UserError(f"placement {name}: {why}")
    back = config_from_hf(hf_config(cfg, family)) if family == "gpt2" else llama_config_from_hf(hf_config(cfg, family))
    ours, theirs = _forward_fields(cfg, name), _forward_fields(back, name)
    for key in dict.fromkeys([*ours, *theirs]):
        if not hf_families.same(ours.get(key), theirs.get(key)):
            value = getattr(cfg, key, ours.get(key))
            note = f" (resolved: {ours.get(key)!r})" if value != ours.get(key) else ""
            raise UserError(f"model.{key}={value!r}{note}: {FAMILIES[family]} (placement {name}, norm {cfg.norm}) "
                            f"computes only {key}={theirs.get(key)!r}; no exported class matches this model")
    return family


def _forward_fields(cfg: ModelConfig, placement: str) -> dict[str, Any]:
    """The fields that change the forward pass, defaults resolved (d_ff none -> 4 d, ...)."""

    out = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in _EXEMPT}
    plan = resolve_model(cfg)
    windows = [i for i in range(1, cfg.n_layer + 1) if cfg.windowed(i)]
    out.update(placement=placement, d_ff=cfg.ff_width, n_kv_head=cfg.kv_heads, final_norm=plan.final_norm,
               d_head=cfg.head_dim, attn_scale=cfg.attn_scale if cfg.attn_scale is not None else cfg.head_dim ** -0.5,
               embed_scale=cfg.embed_scale if cfg.embed_scale is not None else plan.init.embed_scale(cfg),
               window_layers=windows or None, sliding_window=cfg.sliding_window if windows else None,
               rope_local_base=cfg.rope_base_of(windows[0]) if windows and cfg.pos == "rope" else None)
    if cfg.pos != "rope":
        out.pop("rope_base")  # unused without RoPE
        out.pop("rope_local_base")
    if cfg.qk_norm is None:
        out.pop("qk_norm_span")
    if not getattr(plan.ffn, "reads_activation", True):
        out.pop("activation")  # SwiGLU: its gate is SiLU whatever model.activation says
    return out


def hf_config(cfg: ModelConfig, family: str) -> Any:
    """The transformers config of ``family`` for ``cfg`` (no special tokens: the lab has none)."""
    import transformers as t

    if family != "gpt2":
        return hf_families.hf_config(cfg, family)
    return t.GPT2Config(vocab_size=cfg.vocab_size, n_positions=cfg.context, n_embd=cfg.d_model,
                        n_layer=cfg.n_layer, n_head=cfg.n_head, n_inner=cfg.ff_width,
                        activation_function=hf_families.hf_gelu(cfg.activation, "gelu_new"),
                        resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout,
                        attn_pdrop=cfg.dropout, layer_norm_epsilon=cfg.norm_eps,
                        tie_word_embeddings=cfg.tie_embeddings, bos_token_id=None, eos_token_id=None,
                        pad_token_id=None)


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
    return hf_families.state_to_hf(sd, cfg, family)


def to_hf(model: Any) -> Any:
    """A transformers causal LM (eval mode, float32) whose logits equal ``model``'s; a UserError
    naming the reason when no exported class expresses the model (see the module table)."""
    import transformers as t

    cfg: ModelConfig = model.cfg
    family = family_for(cfg)
    cls = t.GPT2LMHeadModel if family == "gpt2" else getattr(t, hf_families.FAMILIES[family].classes[1])
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
