"""transformers' RoPE families in the lab's terms, both ways: one table per family that
``interop`` reads to import a checkpoint and ``hf_export`` to write one.

Read from each family's modeling file in transformers 5.24 (``models/<name>/modeling_<name>.py``):

| model_type | placement | norm | FFN | QK-norm | also |
|---|---|---|---|---|---|
| llama | pre | rmsnorm | swiglu | - | |
| mistral | pre | rmsnorm | swiglu | - | one sliding window for every layer |
| qwen3 | pre | rmsnorm | swiglu | rmsnorm per head, before RoPE | head_dim apart from d/H; windows per ``layer_types`` |
| olmo2 | post_branch | rmsnorm | swiglu | rmsnorm over all of q, all of k | |
| olmo3 | post_branch | rmsnorm | swiglu | as OLMo-2 | windows per ``layer_types`` (3 of 4), a RoPE base per layer type |
| gemma2 | sandwich | rmsnorm_1p | geglu | - | embedding x sqrt(d), query_pre_attn_scalar, attention and output soft-caps, windows |
| gemma3_text | sandwich | rmsnorm_1p | geglu | rmsnorm_1p per head | as Gemma 2 (caps off by default), local and global RoPE bases |

Every option that changes the forward pass is either mapped to a ``ModelConfig`` field or
refused in one line naming it (a scaled RoPE, biases, another activation, bidirectional
attention).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from normlab.core.errors import UserError
from normlab.model.config import ModelConfig

_RMS_LLAMA = {"attn.norm": "input_layernorm", "ffn.norm": "post_attention_layernorm"}
_RMS_OLMO = {"attn.norm": "post_attention_layernorm", "ffn.norm": "post_feedforward_layernorm"}
_RMS_GEMMA = {"attn.norm_in": "input_layernorm", "attn.norm_out": "post_attention_layernorm",
              "ffn.norm_in": "pre_feedforward_layernorm", "ffn.norm_out": "post_feedforward_layernorm"}
_QK = {"attn.branch.q_norm": "self_attn.q_norm", "attn.branch.k_norm": "self_attn.k_norm"}


@dataclass(frozen=True)
class RopeFamily:
    """One transformers family: its classes, its block in the lab's terms, its tensor names."""

    name: str                       # "Qwen3"
    classes: tuple[str, str]        # (config class, causal LM class) in transformers
    placement: str
    norm: str
    ffn: str
    act: tuple[str, str]            # (config key, the family's activation; GeGLU's GELU is mapped by GELUS)
    norms: dict[str, str]           # lab tensor under blocks.{i}. -> transformers' under model.layers.{i}.
    qk_norm: tuple[str, str] | None = None  # (model.qk_norm, model.qk_norm_span)
    layer_types: bool = False       # sliding/full attention per layer (``config.layer_types``)
    rope_per_type: bool = False     # a RoPE table per layer type (rope_parameters[layer_type])
    gemma: bool = False             # embedding x sqrt(d), query_pre_attn_scalar, soft-caps
    head_dim: bool = True           # the config takes head_dim apart from hidden_size / heads
    extra: dict[str, Any] = field(default_factory=dict)  # further config keys export writes


FAMILIES: dict[str, RopeFamily] = {
    "llama": RopeFamily("Llama", ("LlamaConfig", "LlamaForCausalLM"), "pre", "rmsnorm", "swiglu",
                        ("hidden_act", "silu"), _RMS_LLAMA, extra={"mlp_bias": False}),
    "mistral": RopeFamily("Mistral", ("MistralConfig", "MistralForCausalLM"), "pre", "rmsnorm", "swiglu",
                          ("hidden_act", "silu"), _RMS_LLAMA),
    "qwen3": RopeFamily("Qwen3", ("Qwen3Config", "Qwen3ForCausalLM"), "pre", "rmsnorm", "swiglu",
                        ("hidden_act", "silu"), {**_RMS_LLAMA, **_QK}, ("rmsnorm", "head"), layer_types=True),
    "olmo2": RopeFamily("OLMo-2", ("Olmo2Config", "Olmo2ForCausalLM"), "post_branch", "rmsnorm", "swiglu",
                        ("hidden_act", "silu"), {**_RMS_OLMO, **_QK}, ("rmsnorm", "full"), head_dim=False),
    "olmo3": RopeFamily("OLMo-3", ("Olmo3Config", "Olmo3ForCausalLM"), "post_branch", "rmsnorm", "swiglu",
                        ("hidden_act", "silu"), {**_RMS_OLMO, **_QK}, ("rmsnorm", "full"), layer_types=True,
                        rope_per_type=True, head_dim=False),
    "gemma2": RopeFamily("Gemma 2", ("Gemma2Config", "Gemma2ForCausalLM"), "sandwich", "rmsnorm_1p", "geglu",
                         ("hidden_activation", "gelu_pytorch_tanh"), _RMS_GEMMA, layer_types=True, gemma=True),
    "gemma3_text": RopeFamily("Gemma 3", ("Gemma3TextConfig", "Gemma3ForCausalLM"), "sandwich", "rmsnorm_1p",
                              "geglu", ("hidden_activation", "gelu_pytorch_tanh"), {**_RMS_GEMMA, **_QK},
                              ("rmsnorm_1p", "head"), layer_types=True, rope_per_type=True, gemma=True),
}
SLIDING, FULL = "sliding_attention", "full_attention"

# transformers' GELUs (``ACT2FN`` keys) -> the ``model.activation`` that computes the same function:
# "gelu" is torch's exact GELU; gelu_new (GPT-2's, written out in Python) and gelu_pytorch_tanh
# (Gemma's, torch's kernel) are the tanh approximation.
GELUS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}


def hf_gelu(activation: str, tanh_name: str) -> str:
    """The ``ACT2FN`` key export writes for ``model.activation``: "gelu" for the exact GELU, else
    the family's own name for the tanh GELU (``tanh_name``). An activation transformers has no
    name for gets the family's too, and export's round trip then refuses it naming the field."""
    return "gelu" if activation == "gelu" else tanh_name


def lab_gelu(hf_config: Any, key: str, default: str) -> str:
    """The ``model.activation`` of a config whose activation is ``hf_config.<key>`` (``default``
    when unset); a UserError naming the key for any activation but a GELU the lab computes."""
    value = getattr(hf_config, key, default)
    if value not in GELUS:
        raise _refuse(hf_config, key, value, f"in {list(GELUS)}")
    return GELUS[value]


def _refuse(hf_config: Any, key: str, value: Any, ok: Any) -> UserError:
    kind = hf_config.model_type
    return UserError(f"{type(hf_config).__name__}.{key}={value!r}: TransformerLM reproduces {kind} only with "
                     f"{key} {ok}; inspect it with `normlab inspect` instead")


def _rope_default(table: dict[str, Any], where: str) -> float | None:
    rtype = table.get("rope_type", table.get("type", "default"))
    if rtype != "default":
        raise UserError(f"rope_type={rtype!r}{where}: normlab's RoPE is the unscaled one (rope_type 'default'); "
                        "inspect this checkpoint with `normlab inspect` instead of importing it")
    theta = table.get("rope_theta")
    return None if theta is None else float(theta)


def rope_theta(hf_config: Any) -> float:
    """RoPE base of a transformers config with one RoPE table; refuses scaled variants (Llama 3.1
    'llama3', YaRN, ...)."""
    # transformers 5 keeps RoPE in ``rope_parameters`` (and mirrors it as ``rope_scaling``);
    # 4.x kept the scaling in ``rope_scaling`` ("type" before "rope_type") and the base in
    # ``rope_theta``. Every place one may sit is read, so no scaling is ever dropped silently.
    rp = getattr(hf_config, "rope_parameters", None) or {}
    _rope_default(getattr(hf_config, "rope_scaling", None) or {}, "")
    theta = _rope_default(rp, "")
    return theta if theta is not None else float(getattr(hf_config, "rope_theta", 10000.0))


def _windows(hf_config: Any, fam: RopeFamily) -> tuple[int | None, list[int] | None]:
    """(model.sliding_window, model.window_layers) of a config."""
    window = getattr(hf_config, "sliding_window", None)
    types = list(getattr(hf_config, "layer_types", None) or []) if fam.layer_types else []
    if not fam.layer_types:  # Mistral: one window for every layer; Llama and OLMo-2 have none
        return (int(window), None) if window is not None else (None, None)
    other = sorted(set(types) - {SLIDING, FULL})
    if other:
        raise _refuse(hf_config, "layer_types", other, f"made of {SLIDING!r} and {FULL!r}")
    blocks = [i + 1 for i, t in enumerate(types) if t == SLIDING]
    if not blocks:
        return None, None
    if window is None:
        raise _refuse(hf_config, "sliding_window", None, f"set where layer_types has {SLIDING!r}")
    return int(window), None if len(blocks) == hf_config.num_hidden_layers else blocks


def _ropes(hf_config: Any, fam: RopeFamily, windowed: bool) -> tuple[float, float | None]:
    """(model.rope_base, model.rope_local_base) of a config."""
    if not fam.rope_per_type:
        return rope_theta(hf_config), None
    _rope_default(getattr(hf_config, "rope_scaling", None) or {}, "")
    rp = hf_config.rope_parameters
    full = _rope_default(rp[FULL], f" ({FULL})")
    local = _rope_default(rp[SLIDING], f" ({SLIDING})")
    if full is None or local is None:
        raise UserError(f"{type(hf_config).__name__}.rope_parameters: no rope_theta per layer type ({rp})")
    return full, local if windowed and local != full else None


def config_from_hf(hf_config: Any, **overrides: Any) -> ModelConfig:
    """The ``ModelConfig`` of a config of one of ``FAMILIES``; a one-line UserError names the
    first option TransformerLM does not compute."""
    fam = FAMILIES[hf_config.model_type]
    d, H = hf_config.hidden_size, hf_config.num_attention_heads
    head_dim = (getattr(hf_config, "head_dim", None) if fam.head_dim else None) or d // H
    key, act = fam.act
    gelu = fam.ffn == "geglu"  # its GELU is model.activation; SwiGLU's gate is SiLU, nothing else
    checks: dict[str, tuple[Any, Any]] = {} if gelu else {key: (getattr(hf_config, key, act), act)}
    checks.update({"attention_bias": (getattr(hf_config, "attention_bias", False), False),
                   "mlp_bias": (getattr(hf_config, "mlp_bias", False), False),
                   "use_bidirectional_attention": (bool(getattr(hf_config, "use_bidirectional_attention", False)),
                                                   False)})
    for name, (value, ok) in checks.items():
        if value != ok:
            raise _refuse(hf_config, name, value, f"= {ok!r}")
    activation = lab_gelu(hf_config, key, act) if gelu else None
    window, blocks = _windows(hf_config, fam)
    base, local = _ropes(hf_config, fam, window is not None)
    qk, span = fam.qk_norm or (None, "head")
    out = dict(vocab_size=hf_config.vocab_size, context=hf_config.max_position_embeddings,
               n_layer=hf_config.num_hidden_layers, d_model=d, n_head=H,
               n_kv_head=getattr(hf_config, "num_key_value_heads", None) or H,
               d_head=None if head_dim * H == d else head_dim, placement=fam.placement, norm=fam.norm,
               qk_norm=qk, qk_norm_span=span, final_norm=True, init="gpt2", ffn=fam.ffn,
               d_ff=hf_config.intermediate_size, pos="rope", rope_base=base, rope_local_base=local, bias=False,
               dropout=float(getattr(hf_config, "attention_dropout", 0.0) or 0.0),
               tie_embeddings=bool(getattr(hf_config, "tie_word_embeddings", False)),
               norm_eps=float(hf_config.rms_norm_eps), sliding_window=window, window_layers=blocks)
    if activation is not None:
        out["activation"] = activation
    if fam.gemma:
        scalar = hf_config.query_pre_attn_scalar  # the softmax factor is scalar^-1/2, not head_dim^-1/2
        out.update(embed_scale=hf_config.hidden_size ** 0.5,
                   attn_scale=None if scalar == head_dim else scalar ** -0.5,
                   attn_softcap=getattr(hf_config, "attn_logit_softcapping", None),
                   logit_softcap=getattr(hf_config, "final_logit_softcapping", None))
    out.update(overrides)
    return ModelConfig(**out)


def hf_config(cfg: ModelConfig, kind: str) -> Any:
    """The transformers config of family ``kind`` for ``cfg`` (no special tokens: the lab has none)."""
    import transformers as t

    fam = FAMILIES[kind]
    kw: dict[str, Any] = dict(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.ff_width,
                              num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head,
                              num_key_value_heads=cfg.kv_heads, max_position_embeddings=cfg.context,
                              rms_norm_eps=cfg.norm_eps, attention_bias=False, attention_dropout=cfg.dropout,
                              tie_word_embeddings=cfg.tie_embeddings, bos_token_id=None, eos_token_id=None,
                              pad_token_id=None, **fam.extra)
    key, act = fam.act
    kw[key] = hf_gelu(cfg.activation, act) if fam.ffn == "geglu" else act
    if fam.head_dim:
        kw["head_dim"] = cfg.head_dim
    types = [SLIDING if cfg.windowed(i) else FULL for i in range(1, cfg.n_layer + 1)]
    if fam.layer_types:
        # A config without windowed layers still gets a window: Gemma builds the sliding mask either way.
        kw.update(layer_types=types, sliding_window=cfg.sliding_window or cfg.context)
        if kind == "qwen3":
            kw["use_sliding_window"] = cfg.sliding_window is not None
    elif kind == "mistral":
        kw["sliding_window"] = cfg.sliding_window
    if fam.rope_per_type:
        local = cfg.rope_local_base if cfg.rope_local_base is not None else cfg.rope_base
        kw["rope_parameters"] = {FULL: {"rope_type": "default", "rope_theta": float(cfg.rope_base)},
                                 SLIDING: {"rope_type": "default", "rope_theta": float(local)}}
    else:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": float(cfg.rope_base)}
    if fam.gemma:
        scale = cfg.attn_scale if cfg.attn_scale is not None else cfg.head_dim ** -0.5
        kw.update(query_pre_attn_scalar=round(scale ** -2), attn_logit_softcapping=cfg.attn_softcap,
                  final_logit_softcapping=cfg.logit_softcap)
    return getattr(t, fam.classes[0])(**kw)


def state_from_hf(sd: dict[str, torch.Tensor], cfg: ModelConfig, kind: str) -> dict[str, torch.Tensor]:
    """transformers' tensors under the lab's names; q/k/v and gate/up are stacked as ``qkv`` and ``fc``."""
    sd = {k.removeprefix("model."): v for k, v in sd.items()}
    out = {"wte.weight": sd["embed_tokens.weight"], "norm_f.weight": sd["norm.weight"]}
    if "lm_head.weight" in sd:
        out["lm_head.weight"] = sd["lm_head.weight"]
    for i in range(cfg.n_layer):
        h, b = f"layers.{i}.", f"blocks.{i}."
        for ours, theirs in FAMILIES[kind].norms.items():
            out[f"{b}{ours}.weight"] = sd[f"{h}{theirs}.weight"]
        out[f"{b}attn.branch.qkv.weight"] = torch.cat([sd[f"{h}self_attn.{p}_proj.weight"] for p in "qkv"])
        out[f"{b}attn.branch.proj.weight"] = sd[f"{h}self_attn.o_proj.weight"]
        out[f"{b}ffn.branch.fc.weight"] = torch.cat([sd[f"{h}mlp.gate_proj.weight"], sd[f"{h}mlp.up_proj.weight"]])
        out[f"{b}ffn.branch.proj.weight"] = sd[f"{h}mlp.down_proj.weight"]
    return out


def state_to_hf(sd: dict[str, torch.Tensor], cfg: ModelConfig, kind: str) -> dict[str, torch.Tensor]:
    """The lab's tensors under transformers' names: ``state_from_hf`` run backwards."""
    out = {"model.embed_tokens.weight": sd["wte.weight"], "model.norm.weight": sd["norm_f.weight"],
           "lm_head.weight": sd.get("lm_head.weight", sd["wte.weight"])}
    kv = cfg.kv_heads * cfg.head_dim
    for i in range(cfg.n_layer):
        h, b = f"model.layers.{i}.", f"blocks.{i}."
        for ours, theirs in FAMILIES[kind].norms.items():
            out[f"{h}{theirs}.weight"] = sd[f"{b}{ours}.weight"]
        wq, wk, wv = sd[f"{b}attn.branch.qkv.weight"].split([cfg.q_width, kv, kv])
        for p, w in zip("qkv", (wq, wk, wv)):
            out[f"{h}self_attn.{p}_proj.weight"] = w.contiguous()
        out[f"{h}self_attn.o_proj.weight"] = sd[f"{b}attn.branch.proj.weight"]
        gate, up = sd[f"{b}ffn.branch.fc.weight"].chunk(2)
        out[f"{h}mlp.gate_proj.weight"], out[f"{h}mlp.up_proj.weight"] = gate.contiguous(), up.contiguous()
        out[f"{h}mlp.down_proj.weight"] = sd[f"{b}ffn.branch.proj.weight"]
    return out


def same(a: Any, b: Any) -> bool:
    """Config values equal, floats to 1e-12 relative (sqrt(d) and d**0.5 may differ in the last bit)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12)
    return bool(a == b)
