"""Gated attention's output gate (``model.attn_gate``), applied by ``CausalSelfAttention`` after SDPA."""

from __future__ import annotations

import torch
from torch import nn

from normlab.model.config import ModelConfig


class OutputGate(nn.Module):
    """Gated attention's output gate (Qiu et al. 2025, arXiv 2505.06708, G1): Y' = Y * sigmoid(x W_g + b_g),
    x the attention's input (after the placement's norm), Y the heads' output after SDPA, before W_O.
    "elementwise" gives every head dimension its own score (the paper's best variant); "headwise" one
    score per head. The official code (qiuzh20/gated_attention, modeling_qwen3.py:271-276, 304-312,
    355-356) stores W_g as extra rows of q_proj; a Linear of its own is the same function and leaves
    the qkv rows that other code reads (Sub-LN's W_V, nGPT's q/k) where they were. Its weights are
    drawn as every other input projection (N(0, 0.02) under gpt2, as Qwen's initializer_range)."""

    formula = {"elementwise": "Y_h <- Y_h * sigmoid(x W_g,h + b_g,h), one score per head dimension (after SDPA)",
               "headwise": "Y_h <- Y_h * sigmoid(x w_g,h + b_g,h), one score per head (after SDPA)"}
    source = "Gated Attention (Qiu et al. 2025, arXiv 2505.06708; Qwen3-Next)"

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.per_head = cfg.attn_gate == "headwise"
        self.w = nn.Linear(cfg.d_model, cfg.n_head if self.per_head else cfg.q_width, bias=cfg.bias)  # W_g, b_g

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # x (B, T, d), y (B, T, H, Dh)
        g = torch.sigmoid(self.w(x)).view(*y.shape[:3], -1)  # (B, T, H, Dh) or (B, T, H, 1)
        return y * g
