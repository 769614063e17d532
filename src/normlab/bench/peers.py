"""Peers at identical shapes: normlab, a hand-written Pre-LN GPT, x-transformers and Hugging
Face GPT-2, by name.

Each factory returns ``(model, loss_fn)`` where ``loss_fn(x, y)`` is the mean next-token
cross-entropy, or raises ``PeerMissing`` when its library is not installed (the bench
then prints a note and skips it). Shapes follow the size table; every peer is a Pre-LN
decoder with learned positions, GELU FFN of width 4d, tied embeddings and no dropout,
so parameter counts agree to about 1% (the bench prints them). The hand-written model and
GPT-2 compute normlab's GELU (``model.activation`` of the shape's config); x-transformers
keeps its own, the exact GELU. ``activation_of`` names each peer's GELU for the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from normlab.bench.handwritten import HandGPT
from normlab.core.registry import Registry
from normlab.model.catalogue import FFNS
from normlab.model.config import ModelConfig
from normlab.model.hf_families import GELUS, hf_gelu
from normlab.model.transformer import TransformerLM


@dataclass(frozen=True)
class Size:
    """One benchmark shape: layers, width, heads, context, batch (sequences per step)."""

    n_layer: int
    d_model: int
    n_head: int
    context: int
    batch: int
    vocab: int = 65  # Tiny Shakespeare characters


SIZES: Registry[Size] = Registry("size", "--sizes", catalogue="normlab.bench.catalogue")

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
PeerFn = Callable[[Size], tuple[nn.Module, LossFn]]
PEERS: Registry[PeerFn] = Registry("peer", "--peers", catalogue="normlab.bench.catalogue")
GROUPS = {"normlab": ["normlab", "normlab-fused", "normlab-compiled"], "hand": ["hand-pre"],
          "xtransformers": ["xt-pre", "xt-sandwich"], "hf-gpt2": ["hf-gpt2"]}


class PeerMissing(Exception):
    """The peer's library is not installed."""


def _ce(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


def model_config(s: Size) -> Any:
    """normlab's ModelConfig of shape ``s``: Pre-LN, GELU, learned positions, tied, no dropout
    (the shape every peer is built at, and what the bench's FLOPs are counted on)."""

    return ModelConfig(vocab_size=s.vocab, context=s.context, n_layer=s.n_layer, d_model=s.d_model,
                       n_head=s.n_head, placement="pre", dropout=0.0)


def _normlab(s: Size) -> nn.Module:
    return TransformerLM(model_config(s))


def normlab(s: Size) -> tuple[nn.Module, LossFn]:
    """normlab's TransformerLM, placement pre (GPT-2 layout)."""
    m = _normlab(s)
    return m, lambda x, y: m(x, y)[1]


def normlab_fused(s: Size) -> tuple[nn.Module, LossFn]:
    """The same model with AdamW(fused=True) (the bench reads ``model.bench_fused``)."""
    m, fn = normlab(s)
    m.bench_fused = True  # type: ignore[assignment]  # a marker; torch types attributes as tensors or modules
    return m, fn


def normlab_compiled(s: Size) -> tuple[nn.Module, LossFn]:
    """The fused variant with the forward under ``torch.compile`` (what ``train.compile=true``
    does); compilation happens in the untimed warm-up steps."""
    m, _ = normlab_fused(s)
    fwd = torch.compile(m)
    return m, lambda x, y: fwd(x, y)[1]


def hand_pre(s: Size) -> tuple[nn.Module, LossFn]:
    """A minimal hand-written Pre-LN GPT (``bench/handwritten.py``): the floor of normlab's overhead."""

    m = HandGPT(s.vocab, s.context, s.n_layer, s.d_model, s.n_head, model_config(s).activation)
    return m, lambda x, y: _ce(m(x), y)


def _xt(s: Size, **kw: object) -> tuple[nn.Module, LossFn]:
    try:
        from x_transformers import Decoder, TransformerWrapper
    except ImportError as e:
        raise PeerMissing("pip install x-transformers") from e
    m = TransformerWrapper(num_tokens=s.vocab, max_seq_len=s.context, tie_embedding=True,
                           attn_layers=Decoder(dim=s.d_model, depth=s.n_layer, heads=s.n_head,
                                               attn_dim_head=s.d_model // s.n_head,
                                               attn_flash=True, **kw))
    return m, lambda x, y: _ce(m(x), y)


def xt_pre(s: Size) -> tuple[nn.Module, LossFn]:
    """x-transformers Decoder, pre_norm (its default)."""
    return _xt(s)


def xt_sandwich(s: Size) -> tuple[nn.Module, LossFn]:
    """x-transformers Decoder, sandwich_norm=True (CogView's Sandwich-LN)."""
    return _xt(s, sandwich_norm=True)


def hf_gpt2(s: Size) -> tuple[nn.Module, LossFn]:
    """transformers' GPT2LMHeadModel built from a GPT2Config (never downloaded), SDPA attention,
    with normlab's GELU (GPT-2's own gelu_new when that is the tanh GELU)."""
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError as e:
        raise PeerMissing("pip install transformers") from e
    act = hf_gelu(model_config(s).activation, "gelu_new")
    cfg = GPT2Config(vocab_size=s.vocab, n_positions=s.context, n_embd=s.d_model, n_layer=s.n_layer,
                     n_head=s.n_head, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
                     bos_token_id=None, eos_token_id=None, activation_function=act)
    cfg._attn_implementation = "sdpa"  # torch's fused attention, as normlab uses
    m = GPT2LMHeadModel(cfg)
    return m, lambda x, y: _ce(m(input_ids=x).logits, y)


def activation_of(model: nn.Module) -> str:
    """The GELU a peer computes, in ``model.activation``'s names ("gelu" exact, "gelu_tanh"):
    a lab model's config, the hand-written model's own, a transformers config's
    ``activation_function``, else the first activation module found (nanoGPT's and
    x-transformers' ``nn.GELU``); "unknown" when none is."""
    cfg = getattr(model, "cfg", None)
    if isinstance(cfg, ModelConfig):
        return cfg.activation if getattr(FFNS.get(cfg.ffn), "reads_activation", True) else "silu"
    if isinstance(getattr(model, "activation", None), str):
        return str(model.activation)
    hf = getattr(getattr(model, "config", None), "activation_function", None)
    if isinstance(hf, str):
        return GELUS.get(hf, hf)
    for m in model.modules():
        if isinstance(m, nn.GELU):
            return "gelu" if m.approximate == "none" else "gelu_tanh"
        if isinstance(m, (nn.SiLU, nn.ReLU)):
            return type(m).__name__.lower()
    return "unknown"


def expand(names: list[str]) -> list[str]:
    """Peer groups (normlab, xtransformers, hf-gpt2) to their variants; single variants pass."""
    out: list[str] = []
    for n in names:
        for v in GROUPS.get(n, [n]):
            PEERS.get(v)
            out.append(v)
    return list(dict.fromkeys(out))
