"""Exact checks of seed statements, repeated over random draws so that each has n >= 3
values (the quick claims seed001-rms, seed002-gpt2 and seed002-code-causal read them through
:mod:`normlab.diagnostics.measurements`):

- :func:`rms_formula`: seed 001's RMS formula against normlab's RMSNorm;
- :func:`gpt2_parity`: a random tiny transformers GPT-2 loaded into normlab's pre and post placements;
- :func:`seed_block_causality`: seed 002's TransformerBlock as written, which is not causal.
"""

from __future__ import annotations

import math

from normlab.model.interop import from_hf_gpt2
from normlab.model.norms import RMSNorm
from normlab.model.transformer import TransformerLM


def rms_formula(seed: int, d: int = 128) -> dict[str, float]:
    """Seed 001's RMS (without the square root) against normlab's RMSNorm on x = s z, z of
    unit RMS: log10 of output RMS at s = 10 over s = 0.1 (0 for a normaliser)."""
    import torch

    norm = RMSNorm(d, eps=1e-5)
    z = torch.randn(64, d, generator=torch.Generator().manual_seed(seed))
    z = z / z.pow(2).mean(-1, keepdim=True).sqrt()

    def seed_formula(x: torch.Tensor) -> torch.Tensor:
        return x / x.pow(2).mean(-1, keepdim=True)

    def rms(t: torch.Tensor) -> float:
        return float(t.pow(2).mean().sqrt())

    with torch.no_grad():
        return {"seed_log10_ratio": math.log10(rms(seed_formula(10 * z)) / rms(seed_formula(0.1 * z))),
                "normlab_log10_ratio": math.log10(rms(norm(10 * z)) / rms(norm(0.1 * z)))}


def gpt2_parity(seed: int) -> dict[str, float] | None:
    """A random tiny transformers GPT-2 (no download) loaded into normlab's pre and post
    placements: log10 max |logit difference| to GPT-2's own forward. None without transformers."""
    import importlib.util

    if importlib.util.find_spec("transformers") is None:  # the claim is inconclusive without it
        return None
    import dataclasses

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=65, n_positions=32, n_embd=64, n_layer=3, n_head=4, bos_token_id=0,
                                    eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)).eval()
    idx = torch.randint(0, 65, (2, 32), generator=torch.Generator().manual_seed(seed + 1))
    pre = from_hf_gpt2(hf).eval()
    post = TransformerLM(dataclasses.replace(pre.cfg, placement="post", final_norm=None)).eval()
    # post's per-sub-layer norm plays ln_1/ln_2's role; GPT-2's weights fit the same names
    post.load_state_dict({k: v for k, v in pre.state_dict().items() if "norm_f" not in k}, strict=False)
    with torch.no_grad():
        ref = hf(idx).logits
        d_pre = float((pre(idx)[0] - ref).abs().max())
        d_post = float((post(idx)[0] - ref).abs().max())
    return {"log10_diff_pre": math.log10(max(d_pre, 1e-30)), "log10_diff_post": math.log10(max(d_post, 1e-30)),
            "logit_scale": float(ref.abs().max())}


def seed_block_causality(seed: int, d: int = 64, heads: int = 4, T: int = 16) -> float:
    """Seed 002's TransformerBlock as written (nn.MultiheadAttention called with x, x, x and no
    mask, in its default sequence-first layout): change the tokens from position T/2 on and
    return log10 of the largest change of the outputs *before* T/2, relative to the output
    scale (a causal block gives exactly 0 change, i.e. -inf; we floor at -30)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)

    class SeedBlock(nn.Module):  # the seed's code, pre-norm branch, reproduced for measurement
        def __init__(self) -> None:
            super().__init__()
            self.attention = nn.MultiheadAttention(d, heads)
            self.ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d))
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attention(self.norm1(x), self.norm1(x), self.norm1(x))[0]
            return x + self.ffn(self.norm2(x))

    block = SeedBlock().eval()
    x = torch.randn(T, 2, d)  # (sequence, batch, d): nn.MultiheadAttention's default layout
    x2 = x.clone()
    x2[T // 2:] = torch.randn(T - T // 2, 2, d)
    with torch.no_grad():
        y, y2 = block(x), block(x2)
    change = float((y[: T // 2] - y2[: T // 2]).abs().max() / y.abs().max())
    return math.log10(max(change, 1e-30))
