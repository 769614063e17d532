"""A hand-written Pre-LN GPT: the floor normlab's abstraction is measured against.

The plainest model of the bench's shapes, with nothing configurable: token and learned
position embeddings; per block LN -> causal attention (fused q/k/v, SDPA) -> residual,
LN -> GELU MLP of width 4d -> residual; a final LN and a head tied to the token embedding.
Same init as normlab's gpt2 scheme (N(0, 0.02), residual projections 0.02/sqrt(2L)).
normlab's ``placement = "pre"`` model computes the same function with the same tensors;
whatever time it spends beyond this one is the cost of its placement machinery. Its GELU is
the one it is compared with (``activation``, a ``model.activation`` name, written out here):
the two GELU kernels differ in cost about 4x on CPU, which would otherwise pass for overhead.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

# model.activation name -> F.gelu's ``approximate``: the two GELUs, spelled without the lab's registry
APPROXIMATE = {"gelu": "none", "gelu_tanh": "tanh"}


class _Block(nn.Module):
    def __init__(self, d: int, heads: int, approximate: str) -> None:
        super().__init__()
        self.heads, self.approximate = heads, approximate
        self.ln_attn, self.ln_mlp = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_attn(x)).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(y.transpose(1, 2).reshape(B, T, C))
        return x + self.down(F.gelu(self.up(self.ln_mlp(x)), approximate=self.approximate))


class HandGPT(nn.Module):
    """``logits = model(idx)``: (B, T) token ids -> (B, T, vocab). ``activation``: "gelu" (exact)
    or "gelu_tanh", as ``model.activation`` names them."""

    def __init__(self, vocab: int, context: int, n_layer: int, d: int, heads: int, activation: str) -> None:
        super().__init__()
        if activation not in APPROXIMATE:
            raise ValueError(f"HandGPT: activation {activation!r}; use one of {', '.join(APPROXIMATE)}")
        self.activation = activation
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.layers = nn.ModuleList(_Block(d, heads, APPROXIMATE[activation]) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d)
        for name, p in self.named_parameters():
            if p.dim() == 1:
                continue  # LayerNorm weights start at 1; biases are zeroed below
            std = 0.02 / math.sqrt(2 * n_layer) if name.endswith(("out.weight", "down.weight")) else 0.02
            nn.init.normal_(p, 0.0, std)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1), device=idx.device))
        for layer in self.layers:
            x = layer(x)
        return F.linear(self.ln_f(x), self.tok.weight)  # the head is the token embedding
