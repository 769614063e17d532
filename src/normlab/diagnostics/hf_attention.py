"""transformers' attention logits, read through its public attention interface.

``hf_attention(model, layers)`` is the ``attention`` of a transformers subject
(``module.subject_from_module``): see its docstring for how.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
from torch import nn

from normlab.diagnostics.attention_record import AttentionRecord, head_entropy

RECORDING = "normlab_eager"  # our entry in transformers' attention interface (registered on first use)
_ACTIVE: list[tuple[dict[int, int], AttentionRecord]] = []  # (module id -> block, out) being recorded


@contextlib.contextmanager
def hf_attention(model: Any, layers: list[nn.Module]) -> Iterator[AttentionRecord]:
    """Record max |q.k * scaling| over attended pairs per block of a transformers model, and
    each head's mean entropy from the probabilities the eager attention returns.

    Public API only: an attention function registered with ``AttentionInterface.register``
    (with the eager mask, ``AttentionMaskInterface.register``) computes the logits and
    then calls the model file's own ``eager_attention_forward`` unchanged; the model is
    switched to it with ``set_attn_implementation`` for the duration and back after. The
    logit is taken before Gemma's soft-cap (the quantity that grows; the cap bounds it).
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(RECORDING, record)
    AttentionMaskInterface.register(RECORDING, ALL_MASK_ATTENTION_FUNCTIONS["eager"])
    out = AttentionRecord()
    owner = {id(m): i for i, layer in enumerate(layers) for m in layer.modules()}
    before = model.config._attn_implementation  # the property transformers' docs read it by
    model.set_attn_implementation(RECORDING)
    _ACTIVE.append((owner, out))
    try:
        yield out
    finally:
        del _ACTIVE[next(i for i, (o, _) in enumerate(_ACTIVE) if o is owner)]
        model.set_attn_implementation(before)


def record(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
           attention_mask: torch.Tensor | None, *args: Any, scaling: float | None = None, **kwargs: Any) -> Any:
    """The registered attention function: the max attended |logit| into every active
    recording that owns ``module``, then the model file's own eager attention, whose
    probabilities (its second output) give each head's entropy."""
    import sys

    mine = [(owner[id(module)], out) for owner, out in _ACTIVE if id(module) in owner]
    with torch.no_grad():
        for i, out in mine:
            s = scaling if scaling is not None else query.size(-1) ** -0.5
            k = key.repeat_interleave(query.size(1) // key.size(1), dim=1)
            logits = (query.float() @ k.float().transpose(-1, -2)) * s     # (B, H, T, S)
            if attention_mask is None:
                ok = (torch.ones(logits.shape[-2:], dtype=torch.bool, device=logits.device).tril()
                      if getattr(module, "is_causal", False) else None)
            else:
                m = attention_mask[..., : k.size(-2)]
                ok = m if m.dtype == torch.bool else m == 0
            if ok is not None:
                logits = logits.masked_fill(~ok, 0.0)
            out[i] = logits.abs().amax()
    own = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if own is None:  # a model file without one: transformers' scaled-dot-product attention
        from transformers import AttentionInterface

        own = AttentionInterface()["sdpa"]
    result = own(module, query, key, value, attention_mask, *args, scaling=scaling, **kwargs)
    probs = result[1] if isinstance(result, tuple) and len(result) > 1 else None
    if isinstance(probs, torch.Tensor):  # (B, H, T, S); sdpa returns none
        with torch.no_grad():
            for i, out in mine:
                out.head_entropy[i] = head_entropy(probs)
    return result
