"""A TransformerLens ``TransformerBridge`` (transformer_lens >= 3) as a Subject.

The bridge wraps a transformers model; its ``blocks`` are the residual blocks (hook
``hook_resid_pre`` is x_{l-1}, ``hook_resid_post`` x_l), ``bridge(ids, return_type="logits")``
the forward, ``bridge.tokenizer`` the tokenizer. The bridge computes attention itself, so
the attention logits are read at its hook point ``attn.hook_attn_scores`` (a torch module:
a plain forward hook, nothing of TransformerLens' hook machinery is switched on).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

from normlab.core.errors import UserError
from normlab.diagnostics.attention_record import AttentionRecord, head_entropy
from normlab.diagnostics.families import FAMILIES, Family
from normlab.diagnostics.subject import Subject, subject_from_module


def subject_from_bridge(bridge: Any, *, name: str | None = None, family: Family | None = None,
                        context: int | None = None) -> Subject:
    """``subject_from_module`` with what a TransformerBridge knows filled in."""

    hf = getattr(bridge, "original_model", None)
    if hf is None or not hasattr(bridge, "blocks") or not hasattr(bridge, "cfg"):
        raise UserError(f"subject_from_bridge: a {type(bridge).__name__} is not a TransformerLens TransformerBridge "
                        "(no original_model, blocks or cfg); use subject_from_module")
    layers = list(bridge.blocks)
    kind = getattr(getattr(hf, "config", None), "model_type", None)
    fam = family or FAMILIES.get(kind or "") or Family(str(kind), "unknown", "unknown", "outside normlab's family table")
    return subject_from_module(bridge, blocks=layers, embed=hf.get_input_embeddings(), tokenizer=bridge.tokenizer,
                               forward=lambda ids: bridge(ids, return_type="logits"),
                               name=name or getattr(bridge.cfg, "model_name", None) or type(hf).__name__,
                               family=fam, context=context or bridge.cfg.n_ctx,
                               attention=lambda: _scores(layers))


@contextlib.contextmanager
def _scores(layers: list[Any]) -> Iterator[AttentionRecord]:
    """{block: max |score| over attended pairs}: the bridge's scores (B, H, T, S), after the
    scale, with masked pairs at the dtype's minimum (or -inf); each head's entropy from its
    probabilities (``hook_pattern``)."""
    out = AttentionRecord()
    handles = []

    def keep(i: int) -> Any:
        def hook(_m: Any, _args: Any, scores: torch.Tensor) -> None:
            with torch.no_grad():
                s = scores.detach().float()
                attended = s > torch.finfo(scores.dtype).min / 2
                out[i] = torch.where(attended, s.abs(), torch.zeros_like(s)).amax()
        return hook

    def pattern(i: int) -> Any:
        def hook(_m: Any, _args: Any, probs: torch.Tensor) -> None:
            with torch.no_grad():
                out.head_entropy[i] = head_entropy(probs)
        return hook

    for i, block in enumerate(layers):
        attn = getattr(block, "attn", None)
        point = getattr(attn, "hook_attn_scores", None)
        if isinstance(point, torch.nn.Module):
            handles.append(point.register_forward_hook(keep(i)))
        point = getattr(attn, "hook_pattern", None)
        if isinstance(point, torch.nn.Module):
            handles.append(point.register_forward_hook(pattern(i)))
    try:
        yield out
    finally:
        for h in handles:
            h.remove()
