"""What a subject's attention recording holds, and the lab model's recording.

A subject's ``attention()`` (``Subject.attention``) yields a dict {block index: max |logit|}
while its context is open. Where the attention probabilities can be read (the lab model's
explicit path, transformers' eager attention, a TransformerLens bridge's ``hook_pattern``)
the dict is an :class:`AttentionRecord`, which also holds each head's mean entropy per block
(``head_entropy``); a hand-written ``attention`` yielding a plain dict still works, and the
per-head statistics are then not computed. The probe, ``normlab inspect`` and the training
diagnostics all read the probabilities through these recordings (the capture path of the
attention statistics).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch


class AttentionRecord(dict[int, torch.Tensor]):
    """{block index: max |logit|}, and ``head_entropy``: {block index: (H,) each head's mean
    over queries (and sequences) of the entropy of its attention row, nats}."""

    def __init__(self) -> None:
        super().__init__()
        self.head_entropy: dict[int, torch.Tensor] = {}


def head_entropy(probs: torch.Tensor) -> torch.Tensor:
    """(H,): mean over the batch and the queries of -sum_j p_ij log p_ij, probs (B, H, T, S)
    (masked keys hold 0, whose term is 0; Zhai et al. 2023's attention entropy per head)."""
    return torch.special.entr(probs.detach().float()).sum(-1).mean(dim=(0, 2))


def entropy_table(record: Any, n_layer: int) -> torch.Tensor | None:
    """(L, H) head entropies of a recording, NaN for a block it did not see; None when it
    holds none (a plain dict, or an attention whose probabilities cannot be read)."""
    got = getattr(record, "head_entropy", None)
    if not got:
        return None
    first = next(iter(got.values()))
    nan = torch.full_like(first, float("nan"))
    return torch.stack([got.get(i, nan).to(first.device) for i in range(n_layer)])


@contextlib.contextmanager
def lab_attention(model: Any) -> Iterator[AttentionRecord]:
    """The recording of a lab ``TransformerLM``: its attention takes the explicit path (plain
    autograd ops, so a second derivative exists, unlike the fused kernels) and leaves its
    statistics of the last call in ``stats``, read into the record when the context exits."""
    branches = {i: b.attn.branch for i, b in enumerate(model.blocks) if hasattr(b.attn.branch, "record")}
    out = AttentionRecord()
    before = {i: a.record for i, a in branches.items()}
    for a in branches.values():
        a.record, a.stats = True, {}
    try:
        yield out
    finally:
        for i, a in branches.items():
            a.record = before[i]
            if "max_logit" in a.stats:
                out[i] = a.stats["max_logit"]
            if "head_entropy" in a.stats:
                out.head_entropy[i] = a.stats["head_entropy"]
