"""Two residual designs of 2026 that own the residual state: SiameseNorm and Attention Residuals.

Like ResiDual and nGPT (``streams.py``) each brings its own ``Stream`` and cannot be mixed with
other placements. Their states, as the capture path reads them (``diagnostics/subject.py``):

  siamese    (x, y): the Post-Norm-like stream x first (the main one), the Pre-Norm-like y second
  attn_res   (s, (v_0, ..., v_k)): s = v_0 + ... + v_k, the sum a plain residual stream would hold
             (the main one, for the statistics; the model never reads it), then every source so far
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from normlab.model.config import ModelConfig
from normlab.model.norms import RMSNorm
from normlab.model.placement import Placement, Site, Stream

NormFactory = Callable[[int, float, bool], nn.Module]

# --------------------------------------------------------------------------- SiameseNorm


class SiameseStream(Stream):
    """Both streams start as the embedding; the output is LN_x(x_L) + LN_y(y_L), then the model's
    final norm (official code: ``forward_features`` of deit-model-siamesenorm.py:353-356, and
    ln_f / ln_y_f / ln_final_f in OLMo_model_hybrid_pre.py:1420-1422)."""

    def __init__(self, cfg: ModelConfig, make_norm: NormFactory) -> None:
        super().__init__()
        self.norm_x = make_norm(cfg.d_model, cfg.norm_eps, cfg.bias)
        self.norm_y = make_norm(cfg.d_model, cfg.norm_eps, cfg.bias)

    def begin(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, x

    def end(self, h: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = h
        return self.norm_x(x) + self.norm_y(y)


class SiameseNorm(Placement):
    """SiameseNorm (Li et al. 2026, arXiv 2602.08064), the post-pre variant of the official code
    (Qwen-Applications/SiameseNorm, deit-model-siamesenorm.py:216-227; dit-model-siamesenorm.py:123-135
    is the same with adaLN): a Post-Norm-like stream x and a Pre-Norm-like stream y share every
    branch. Per sub-layer of block l: u = LN_post(x); z = F(LN_in(u + LN_pre(y))); x <- u + z / c;
    y <- y + z, with c = sqrt(2l) for both sub-layers of block l (``c = ((index+1)*2)**0.5``).
    y keeps Pre-Norm's identity path for the gradient; x is normalised at every sub-layer as in
    Post-Norm. Every norm is ``model.norm`` (the official code builds all of them as its norm layer).
    """

    depth_scaling = "scales each branch on its Post-LN stream by 1/sqrt(2l), l the sub-layer's depth"
    formula = "u = LN_post(x); z = F(LN_in(u + LN_pre(y))); x <- u + z/sqrt(2l); y <- y + z; out LN(x_L) + LN(y_L)"
    source = "SiameseNorm (Li et al. 2026, arXiv 2602.08064; official code, post-pre variant)"
    final_norm = True  # ln_final_f / final_norm after the two streams are summed

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm_post, self.norm_pre, self.norm_in = site.norm(), site.norm(), site.norm()
        self.c = math.sqrt(2 * site.layer)

    def forward(self, h: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = h
        u = self.norm_post(x)
        z = self.branch(self.norm_in(u + self.norm_pre(y)))
        return u + z / self.c, y + z

    @classmethod
    def make_stream(cls, cfg: ModelConfig, make_norm: NormFactory) -> Stream:
        return SiameseStream(cfg, make_norm)


# --------------------------------------------------------------------------- Attention Residuals


def depth_attention(sources: tuple[torch.Tensor, ...], query: torch.Tensor, key_norm: nn.Module) -> torch.Tensor:
    """sum_i softmax_i(w . RMSNorm(v_i)) v_i over the sources v_i (B, T, d): the official README's
    ``block_attn_res`` (MoonshotAI/Attention-Residuals), whose sources here are single sub-layers."""
    V = torch.stack(sources)                                           # (N, B, T, d)
    logits = torch.einsum("d,nbtd->nbt", query, key_norm(V))           # the keys: the values RMS-normalised
    return torch.einsum("nbt,nbtd->btd", logits.softmax(0), V)         # softmax over depth, not over tokens


class AttnResStream(Stream):
    """State (s, (v_0,)) with v_0 the embedding; the output is one more depth attention, with a
    pseudo-query of its own, over every source (the ports' ``final_attn_res_proj`` / ``_norm``),
    then the model's final norm."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.query = nn.Parameter(torch.empty(cfg.d_model))
        self.key_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        self.query.zero_()  # uniform weights at init, as every pseudo-query

    def begin(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        return x, (x,)

    def end(self, h: tuple[torch.Tensor, tuple[torch.Tensor, ...]]) -> torch.Tensor:
        return depth_attention(h[1], self.query, self.key_norm)


class AttentionResiduals(Placement):
    """Full Attention Residuals (Kimi Team 2026, arXiv 2603.15031; official README of
    MoonshotAI/Attention-Residuals): no residual addition. Sub-layer l reads
    h_l = sum_{i<l} alpha_{i->l} v_i, alpha_{i->l} = softmax_i(w_l . RMSNorm(v_i)), over the
    embedding v_0 and every earlier sub-layer output v_i (a "layer" is a sub-layer: the README's
    block_size "counts ATTN + MLP"), and adds its own output v_l = F(LN(h_l)) to the sources.
    w_l is a learned vector per sub-layer, zero at init (uniform weights); the key norm is an
    RMSNorm with a gain (the README's ``attn_res_norm``), whatever ``model.norm`` is; LN is
    ``model.norm``, the layer's pre-norm. Block AttnRes (sources summed per block of layers, the
    paper's memory saving) is not implemented: Full AttnRes is the variant it approximates.
    """

    depth_scaling = ("has no residual add: each sub-layer reads a softmax mix of every earlier output, whose "
                     "weights sum to 1 at any depth")
    formula = "h_l = sum_{i<l} softmax_i(w_l . RMSNorm(v_i)) v_i; v_0 = emb, v_l = F(LN(h_l)); out likewise"
    source = "Attention Residuals (Kimi Team 2026, arXiv 2603.15031; official README pseudocode), Full variant"
    final_norm = True  # the Kimi models are Pre-Norm: a final norm before the head

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        d = site.cfg.d_model
        self.norm = site.norm()
        self.query = nn.Parameter(torch.empty(d))  # w_l
        self.key_norm = RMSNorm(d, site.cfg.norm_eps)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        self.query.zero_()

    def forward(self, h: tuple[torch.Tensor, tuple[torch.Tensor, ...]]) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        s, sources = h
        v = self.branch(self.norm(depth_attention(sources, self.query, self.key_norm)))
        return s + v, (*sources, v)

    @classmethod
    def make_stream(cls, cfg: ModelConfig, make_norm: NormFactory) -> Stream:
        return AttnResStream(cfg)
