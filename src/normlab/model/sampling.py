"""Autoregressive sampling from any module mapping (B, T) token ids to (B, T, V) logits."""

from __future__ import annotations

import torch
from torch import nn


@torch.no_grad()
def generate(model: nn.Module, idx: torch.Tensor, new_tokens: int, context: int,
             temperature: float = 1.0, top_k: int | None = None,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """Autoregressive sampling: (B, T) prompt ids -> (B, T + new_tokens).

    ``temperature`` 0 means greedy; ``top_k`` keeps the k most likely tokens
    (Fan et al. 2018) before sampling.
    """
    for _ in range(new_tokens):
        logits = model(idx[:, -context:])[0][:, -1, :].float()       # (B, V)
        if temperature <= 0:
            nxt = logits.argmax(dim=-1, keepdim=True)
        else:
            logits = logits / temperature
            if top_k is not None and top_k < logits.size(-1):
                kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = torch.softmax(logits, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
