"""Placements that also put norms inside the branch (names: ``catalogue.py``).

HybridNorm normalises q, k and v inside attention; NormFormer and Sub-LN normalise the
input of the branch's output projection (W_O, W_2) through the branch's ``pre_proj`` hook
(``attention.py``). Notation as in ``placements.py``: x the residual stream entering the
sub-layer, F the branch, LN the configured norm (``model.norm``). Each class states in its
``source`` the paper and the file its formula was checked against (docs/placements.md).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from normlab.model.placement import Placement, Site


class HybridNorm(Placement):
    """HybridNorm: attention normalises q, k and v per head (with ``model.norm``) and has no
    input norm; the FFN normalises the stream and adds its branch to the normalised stream.

    Per block: y = x + Attn_qkv(x); x' = LN(y) + FFN(LN(y)). The FFN's norm belongs to its
    sub-layer, as ``ff_norm`` belongs to the FFN in the official code (BryceZhuo/HybridNorm,
    ``dense_model/olmo/model.py``, OLMoSequentialBlock with ``ffn_residual_after_norm: true``,
    ``attn_norm: false``, ``use_{query,key,value}_norm: true`` in
    ``configs/exps/1.2B-dense-HybriedNorm.yaml``; q/k/v norms over the head dimension, of the
    block norm's type). The final norm stays (OLMo's ``ln_f``).
    """

    formula = "attn: x <- x + F_qkv(x) (q, k, v normed per head); ffn: x <- LN(x) + F(LN(x))"
    source = ("HybridNorm (Zhuo et al. 2025); BryceZhuo/HybridNorm dense_model/olmo/model.py "
              "and configs/exps/1.2B-dense-HybriedNorm.yaml")
    sets_qk_norm = True  # installs its own q/k/v norms: refused with model.qk_norm

    def __init__(self, branch: Any, site: Site) -> None:  # CausalSelfAttention (set_qk) or an FFN
        super().__init__(branch, site)
        cfg = site.cfg
        self.pre = self._pre_ln()
        if site.kind == "attn":
            q, k, v = (site.make_norm(cfg.head_dim, cfg.norm_eps, cfg.bias) for _ in range(3))
            branch.set_qk(q, k, site.attn_scale, v_norm=v)  # sp: 1/sqrt(d_head); muP: 1/d_head
        self.norm: nn.Module | None = site.norm() if (site.kind == "ffn" or self.pre) else None

    def _pre_ln(self) -> bool:
        """Whether this sub-layer is Pre-LN instead (HybridNorm*'s first block)."""
        return False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm is None:      # attention: no input norm, q/k/v normed inside
            return self.residual_add(x, self.branch(x))
        if self.pre:
            return self.residual_add(x, self.branch(self.norm(x)))
        h = self.norm(x)           # FFN: the residual continues from the normalised stream
        return self.residual_add(h, self.branch(h))


class HybridNormStar(HybridNorm):
    """HybridNorm*: HybridNorm with block 1 Pre-LN on both sub-layers (its attention keeps the
    q/k/v norms). The official README's HybridNorm* command sets block 0 to
    ``{'attn_norm': True, 'ffn_residual': False}``, i.e. x + Attn_qkv(LN(x)), x + FFN(LN(x)).

    A placement name, not an option or layout: the paper and ``normlab placements`` name it
    as its own architecture, and as a name it stays usable in per-layer lists (only the
    sub-layers of block 1 differ; in any other block it is HybridNorm).
    """

    formula = "block 1: x <- x + F(LN(x)) (attention keeps q/k/v norms); other blocks as hybridnorm"
    source = ("HybridNorm* (Zhuo et al. 2025); BryceZhuo/HybridNorm README (norm_pos_special_config "
              "for block 0) and dense_model/olmo/model.py")

    def _pre_ln(self) -> bool:
        return self.site.layer == 1


class HeadScale(nn.Module):
    """NormFormer's head scales: head h's output times a learnable gamma_h (init 1), before W_O."""

    def __init__(self, n_head: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_head))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        self.weight.fill_(1.0)

    def forward(self, y: torch.Tensor) -> torch.Tensor:  # (B, T, H * Dh), heads concatenated
        B, T, C = y.shape
        return (y.view(B, T, self.weight.numel(), -1) * self.weight[:, None]).view(B, T, C)


class NormFormer(Placement):
    """NormFormer: Pre-LN plus a norm on the attention output, per-head scales of the attention
    heads before W_O, and a norm on the FFN's activation before W_2; final norm on.

    The head scales follow the paper (HeadScaleMHA = Concat(gamma_i h_i) W_O, gamma_i init 1).
    fairseq's ``--scale-heads`` scales head-sized chunks *after* W_O instead, which the author
    describes as a faster variant, not the same function (fairseq issue #3973). Checked against
    fairseq ``fairseq/modules/transformer_layer.py`` (``attn_ln`` after attention, ``c_attn``,
    ``ffn_layernorm`` after the activation) and ``examples/normformer/README.md``
    (``--scale-attn --scale-fc --scale-heads``; ``--scale-resids`` is not implemented here).
    """

    formula = "attn: x <- x + LN_out(F_hs(LN(x))), heads scaled before W_O; ffn: x <- x + W_2 LN_mid(act(W_1 LN(x)))"
    source = ("NormFormer (Shleifer et al. 2021); fairseq fairseq/modules/transformer_layer.py "
              "and examples/normformer/README.md")

    def __init__(self, branch: Any, site: Site) -> None:
        super().__init__(branch, site)
        cfg = site.cfg
        self.norm = site.norm()
        if site.kind == "attn":
            self.norm_out: nn.Module | None = site.norm()
            branch.pre_proj = HeadScale(cfg.n_head)
        else:
            self.norm_out = None
            branch.pre_proj = site.make_norm(branch.proj.in_features, cfg.norm_eps, cfg.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.branch(self.norm(x))
        return self.residual_add(x, self.norm_out(f) if self.norm_out is not None else f)


def _scale_residual_branch(placement: Placement, gain: float) -> None:
    """W_V, W_O, W_1, W_2 of ``placement``'s branch times ``gain`` (DeepNet/Magneto style).

    As DeepNorm's beta does in this lab, the gain replaces the init scheme's own depth scaling
    of W_O and W_2 (GPT-2's 1/sqrt(2L)): the papers apply it to a depth-free Xavier init.
    Biases are zero at init, so only the weights are scaled.
    """
    cfg, scheme = placement.site.cfg, placement.site.init
    with torch.no_grad():
        for name, m in placement.branch.named_modules():
            if name == "qkv":
                q, kv, _ = placement.branch.split  # type: ignore[misc]  # (W_Q, W_K, W_V) row counts
                m.weight[q + kv:].mul_(gain)  # W_V rows only (after W_Q's and W_K's)
            elif name in ("proj", "fc"):
                plain = nn.Linear(m.in_features, m.out_features, bias=False, device="meta")
                undo = scheme.linear_std(plain, cfg) / scheme.linear_std(m, cfg)  # 1 unless residual
                m.weight.mul_(gain * undo)


class SubLN(Placement):
    """Sub-LN (Magneto, "Foundation Transformers"): Pre-LN plus a norm on the input of each
    output projection (the concatenated heads before W_O, the activation before W_2), and
    W_V, W_O, W_1, W_2 scaled at init by gamma = sqrt(log 2L); final norm on.

    Checked against torchscale (microsoft/torchscale): ``component/multihead_attention.py``
    (``inner_attn_ln`` over d before ``out_proj``), ``component/feedforward_network.py``
    (``ffn_layernorm`` over d_ff after the activation), ``architecture/decoder.py`` (decoder-only
    ``init_scale = sqrt(log(2 * decoder_layers))`` on fc1, fc2, out_proj, v_proj) and
    ``architecture/config.py`` (``subln`` turns on ``decoder_normalize_before``).
    """

    formula = "x <- x + W_out LN_mid(F_in(LN(x))); W_V, W_O, W_1, W_2 x gamma, gamma = sqrt(log 2L)"
    source = ("Sub-LN / Magneto (Wang et al. 2022); torchscale component/multihead_attention.py, "
              "component/feedforward_network.py, architecture/decoder.py")
    depth_scaling = "scales W_V, W_O, W_1, W_2 at init by gamma = sqrt(log 2L)"

    def __init__(self, branch: Any, site: Site) -> None:
        super().__init__(branch, site)
        cfg = site.cfg
        self.norm = site.norm()
        branch.pre_proj = site.make_norm(branch.proj.in_features, cfg.norm_eps, cfg.bias)
        self.gamma = math.sqrt(math.log(2 * cfg.n_layer))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.branch(self.norm(x))  # (no residual_add: refused with completep, depth_scaling)

    def init_(self) -> None:
        _scale_residual_branch(self, self.gamma)
