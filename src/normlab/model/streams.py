"""Placements that own the residual stream (they return their own ``Stream``).

ResiDual carries two states through the blocks; nGPT keeps every hidden state and every
weight row on the unit sphere. Neither can be mixed with other placements in one model.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from normlab.model.config import ModelConfig
from normlab.model.placement import Placement, Site, Stream

# --------------------------------------------------------------------------- ResiDual


class ResiDualStream(Stream):
    """(x, d) with d_0 = x_0; the output is x_L + LN(d_L) (the end norm lives here)."""

    def __init__(self, cfg: ModelConfig, make_norm: Callable[[int, float, bool], nn.Module]) -> None:
        super().__init__()
        self.norm = make_norm(cfg.d_model, cfg.norm_eps, cfg.bias)

    def begin(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, x

    def end(self, h: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, d = h
        return x + self.norm(d)


class ResiDual(Placement):
    """ResiDual: a Post-LN stream x and the un-normalised sum d of every branch output; k in
    the formula counts sub-layers. The Post-LN stream x keeps Post-LN's well-conditioned gradients;
    the un-normalised sum d of every branch output gives each sub-layer a direct path to the
    output, as in Pre-LN. Output x_L + LN(d_L). ``final_norm`` defaults to off: both
    terms are already normalised (x_L by the last sub-layer's LN, d_L by the stream's end
    norm), and the paper feeds their sum straight to the output projection.
    The state between blocks is the tuple (x, d), each (B, T, d_model); x is the main stream.
    """

    formula = "x <- LN(x + F(x)); d <- d + F(x); d_0 = x_0; out x_L + LN(d_L)"
    source = "ResiDual (Xie et al. 2023)"
    final_norm = False

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()

    def forward(self, h: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        x, d = h
        f = self.branch(x)
        return self.norm(self.residual_add(x, f)), self.residual_add(d, f)

    @classmethod
    def make_stream(cls, cfg: ModelConfig, make_norm: Callable[[int, float, bool], nn.Module]) -> Stream:
        return ResiDualStream(cfg, make_norm)


# --------------------------------------------------------------------------- nGPT


class ScaledParam(nn.Module):
    """nGPT's scaling trick (Loshchilov et al. 2024, §2.5): a learnable vector stored as
    ``raw`` = init_scale and used as raw * (init_value / init_scale). Its effective value
    starts at ``init_value`` but the optimiser sees a tensor of size ``init_scale``, so one
    global learning rate suits it and the weights alike."""

    def __init__(self, shape: tuple[int, ...], init_value: float, init_scale: float) -> None:
        super().__init__()
        self.ratio, self.init_scale = init_value / init_scale, init_scale
        self.raw = nn.Parameter(torch.empty(shape))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        self.raw.fill_(self.init_scale)

    def forward(self) -> torch.Tensor:
        return self.raw * self.ratio


class SphereQK(nn.Module):
    """nGPT's q/k norm: Norm(x) * s_qk, s_qk per head dimension (init 1, scale 1/sqrt(d)).

    One instance serves q and k, as in the paper, so the logit of each dimension carries
    s_qk^2. Note: normlab applies q/k norms before RoPE; the rotation keeps ||q|| = 1 but
    mixes the per-dimension scale within each rotated pair (the paper scales after RoPE).
    """

    def __init__(self, n_head: int, head_dim: int, d_model: int) -> None:
        super().__init__()
        self.s_qk = ScaledParam((n_head, 1, head_dim), 1.0, 1.0 / math.sqrt(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, H, T, Dh)
        return F.normalize(x, dim=-1) * self.s_qk()


class NGPTStream(Stream):
    """Embeddings on the sphere, h_0 = Norm(embedding), logits z * s_z (init 1, scale 1/sqrt(d))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.s_z = ScaledParam((cfg.vocab_size,), 1.0, 1.0 / math.sqrt(cfg.d_model))

    def begin(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1)

    def logits(self, z: torch.Tensor) -> torch.Tensor:  # (B, T, V)
        return z * self.s_z()

    def init_(self, model: nn.Module) -> None:
        self.after_step(model)

    @torch.no_grad()
    def after_step(self, model: nn.Module) -> None:
        for name in ("wte", "wpe", "lm_head"):  # rows of (V, d), (T, d), (V, d) onto the sphere
            m = getattr(model, name, None)
            if m is not None:
                m.weight.copy_(F.normalize(m.weight, dim=1))


class NGPT(Placement):
    """nGPT, the normalized Transformer: Norm(x) = x / ||x|| in the formula.

    - alpha: learnable per-dimension "eigen learning rate", init 0.05, stored with the
      scaling trick (``ScaledParam``, scale 1/sqrt(d_model)).
    - attention: q and k L2-normalised per head times a learnable s_qk (replaces
      ``model.qk_norm``; ``qkv_norm`` still applies to v), softmax scale sqrt(d_head).
    - FFN: the rows of W_1 that feed the nonlinearity are scaled by s_v * sqrt(d_model) and
      the others (SwiGLU's u) by s_u, both learnable, init 1 (the paper's s_u, s_v).
    - every weight matrix is unit-norm along its d_model axis: rows of W_Q, W_K, W_V, W_1
      and of the embeddings, columns of W_O, W_2. ``after_step`` re-projects after every
      optimizer step (``TransformerLM.after_step``); ``init_`` projects the initial weights.
    - no norm layers (``model.norm`` is not used), no final norm, logits scaled by s_z.
    The paper trains without warm-up and weight decay, and without biases: set
    ``model.bias=false`` for its setting (biases, if present, are left unconstrained).
    """

    formula = "h <- Norm(h + alpha*(Norm(F(h)) - h)), weights and h on the unit sphere"
    source = "nGPT (Loshchilov et al. 2024)"
    final_norm = False
    needs_full_kv = True  # s_qk has one row per query head
    fixed_scales = "keeps every weight matrix and hidden state on the unit sphere and learns its own softmax and logit scales"
    fc_gain: torch.Tensor  # a buffer (FFN sites), declared for type checkers

    def __init__(self, branch: Any, site: Site) -> None:  # attention (set_qk) or FFN (fc, act_rows)
        super().__init__(branch, site)
        cfg = site.cfg
        self.alpha = ScaledParam((cfg.d_model,), 0.05, 1.0 / math.sqrt(cfg.d_model))
        if site.kind == "attn":
            qk = SphereQK(cfg.n_head, cfg.head_dim, cfg.d_model)
            branch.set_qk(qk, qk, math.sqrt(cfg.head_dim))
        else:
            self.act_rows: slice = branch.act_rows()
            self.register_buffer("fc_gain", torch.empty(branch.fc.out_features), persistent=False)
            self.s_fc = ScaledParam((branch.fc.out_features,), 1.0, 1.0)  # [s_v; s_u]
            branch.fc.register_forward_hook(self._scale_fc)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """fc_gain (FFN sites): sqrt(d_model) on the rows of W_1 that feed the nonlinearity, 1 elsewhere."""
        if self.site.kind != "attn":
            self.fc_gain.fill_(1.0)
            self.fc_gain[self.act_rows] = math.sqrt(self.site.cfg.d_model)

    def _scale_fc(self, module: nn.Module, inputs: tuple, out: torch.Tensor) -> torch.Tensor:
        return out * (self.s_fc() * self.fc_gain)  # (B, T, fc_out)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        f = F.normalize(self.branch(h), dim=-1)
        return F.normalize(h + self.alpha() * (f - h), dim=-1)

    @classmethod
    def make_stream(cls, cfg: ModelConfig, make_norm: Callable[[int, float, bool], nn.Module]) -> Stream:
        return NGPTStream(cfg)

    def init_(self) -> None:
        self.after_step()

    @torch.no_grad()
    def after_step(self) -> None:
        for m in self.branch.modules():
            if isinstance(m, nn.Linear):
                # W_O, W_2 write into the stream: unit columns; the others read it: unit rows
                m.weight.copy_(F.normalize(m.weight, dim=0 if getattr(m, "residual", False) else 1))
