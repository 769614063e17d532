"""Causal multi-head self-attention and the feed-forward sub-layers (the branches F; FFN
and activation names in ``catalogue.py``)."""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from normlab.model.attention_gate import OutputGate
from normlab.model.config import ModelConfig
from normlab.model.registries import ACTIVATIONS


class Rotary(nn.Module):
    """Rotary position embedding (Su et al. 2021), rotating pairs (i, i + Dh/2) of q and k."""

    cos: torch.Tensor  # buffers, declared for type checkers
    sin: torch.Tensor

    def __init__(self, head_dim: int, context: int, base: float = 10000.0) -> None:
        super().__init__()
        self.head_dim, self.context, self.base = head_dim, context, base
        # Not persistent: derived from the config, so checkpoints stay weights-only.
        self.register_buffer("cos", torch.empty(context, head_dim // 2, dtype=torch.float32), persistent=False)
        self.register_buffer("sin", torch.empty(context, head_dim // 2, dtype=torch.float32), persistent=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """The tables, recomputed (on the buffers' device) from head_dim, context and base."""
        dev, Dh = self.cos.device, self.head_dim
        inv = 1.0 / self.base ** (torch.arange(0, Dh, 2, dtype=torch.float32, device=dev) / Dh)
        ang = torch.outer(torch.arange(self.context, dtype=torch.float32, device=dev), inv)  # (T, Dh/2)
        self.cos.copy_(ang.cos())
        self.sin.copy_(ang.sin())

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x (B, H, T, Dh)
        T = x.size(-2)
        x1, x2 = x.chunk(2, dim=-1)
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class CausalSelfAttention(nn.Module):
    """softmax(q k^T * scale + causal mask) v, heads concatenated, then W_O.

    ``qkv`` holds W_Q, W_K, W_V stacked along the output dimension (rows 0:d, d:2d, 2d:3d
    when ``head_dim`` = d / n_head; W_Q has n_head * ``model.d_head`` rows when that is set).
    With grouped-query attention (``n_kv_head`` < ``n_head``, Ainslie et al. 2023) W_K and
    W_V have ``n_kv_head * head_dim`` rows each and query head h reads key/value head
    h // (n_head / n_kv_head), the grouping of Llama-family checkpoints.
    With ``qk_norm`` q and k are normalised per head before the dot product (over all of q
    and all of k before the split into heads with ``qk_norm_span="full"``, as OLMo-2); with
    ``qk_norm="l2"`` (Henry et al. 2020) the 1/sqrt(d_head) factor is replaced by a learned
    scalar g, initialised to log2(T^2 - T) for context T as in that paper; ``model.attn_scale``
    replaces 1/sqrt(d_head) by a fixed factor (Gemma). In the blocks of ``model.window_layers``
    a query sees the last ``model.sliding_window`` keys only (itself included), and
    ``model.attn_softcap`` c caps the logits as c*tanh(logit/c) before the mask (Gemma 2), which
    takes the explicit path (SDPA has no cap).
    ``model.attn_gate`` multiplies each head's output by sigmoid(x W_g + b_g) before W_O (gated
    attention, Qiu et al. 2025: G1, after SDPA; ``OutputGate``). Set ``record = True`` to take the
    explicit (slower) path that stores the maximum |logit|, the minimum and mean attention entropy
    (queries 1.., nats) and each head's mean entropy over every query (``head_entropy``,
    (n_head,)) of the last call in ``self.stats``.
    """

    def __init__(self, cfg: ModelConfig, qk_norm: Callable[[int, float, bool], nn.Module] | None = None,
                 layer: int = 1, scale: float | None = None) -> None:
        """``qk_norm``: the norm ``model.qk_norm`` names (the model builder resolves it), or None;
        ``layer``: the 1-based block, which picks its sliding window and RoPE base; ``scale``: the
        parametrisation's softmax scale (``model.param``; none = 1/sqrt(d_head)), which
        ``model.attn_scale`` replaces when set."""
        super().__init__()
        d, self.n_head, self.head_dim = cfg.d_model, cfg.n_head, cfg.head_dim
        self.n_kv_head = cfg.kv_heads
        q, kv = cfg.q_width, self.n_kv_head * self.head_dim
        self.split = (q, kv, kv)
        self.qkv = nn.Linear(d, q + 2 * kv, bias=cfg.bias)
        self.proj = nn.Linear(q, d, bias=cfg.bias)
        self.proj.residual = True  # type: ignore[assignment]  # marks a residual projection for init (GPT-2 scaling)
        # Built here, after W_O, so that construction order stays registration order (materialise replays it).
        self.gate = OutputGate(cfg) if cfg.attn_gate is not None else None
        self.dropout = cfg.dropout
        self.drop = nn.Dropout(cfg.dropout)
        make = qk_norm
        self.full_span = cfg.qk_norm_span == "full"
        dq, dk = (q, kv) if self.full_span else (self.head_dim, self.head_dim)
        self.q_norm = make(dq, cfg.norm_eps, cfg.bias) if make else nn.Identity()
        self.k_norm = make(dk, cfg.norm_eps, cfg.bias) if make else nn.Identity()
        self.v_norm = make(dk, cfg.norm_eps, cfg.bias) if make and cfg.qkv_norm else nn.Identity()
        # softmax temperature: a float, or a learned scalar (l2 QK-norm)
        default = scale if scale is not None else 1.0 / math.sqrt(self.head_dim)
        self.scale: float | nn.Parameter = cfg.attn_scale if cfg.attn_scale is not None else default
        if getattr(make, "learned_scale", False):  # unit-length q, k (L2Norm): 1/sqrt(d) would be far too small
            self.scale = nn.Parameter(torch.empty(()))
        self.context = cfg.context
        self.reset_parameters()
        base = cfg.rope_base_of(layer)
        self.rotary = Rotary(self.head_dim, cfg.context, base) if cfg.pos == "rope" else None
        self.window = cfg.sliding_window if cfg.windowed(layer) else None  # keys a query sees, itself included
        self.softcap = cfg.attn_softcap
        # Applied to the concatenated heads (B, T, n_head*head_dim) before W_O: a placement's hook
        # (Sub-LN's inner norm, NormFormer's head scales); the identity, and not called, by default.
        self.pre_proj: nn.Module = nn.Identity()
        self.record = False
        self.stats: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """The learned l2 scale g, if any: log2(T^2 - T) (Henry et al. 2020). Only this module's
        own tensor; W_Q, W_K, W_V, W_O and the norms reset themselves."""
        if isinstance(self.scale, nn.Parameter):
            T = max(self.context, 2)
            self.scale.fill_(math.log2(T * T - T))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(self.split, dim=-1)  # (B, T, d), (B, T, kv), (B, T, kv)
        if self.full_span:
            q, k, v = self._norm_qkv(q, k, v)
        Dh = self.head_dim
        q = q.view(B, T, -1, Dh).transpose(1, 2)  # (B, H, T, Dh)
        k = k.view(B, T, -1, Dh).transpose(1, 2)  # (B, Hkv, T, Dh)
        v = v.view(B, T, -1, Dh).transpose(1, 2)
        if not self.full_span:
            q, k, v = self._norm_qkv(q, k, v)
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        if self.n_kv_head != self.n_head:  # each key/value head serves n_head / n_kv_head query heads
            groups = self.n_head // self.n_kv_head
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        scale = self.scale
        if self.record or self.softcap is not None:  # SDPA has no soft-cap: the explicit path computes it
            y = self._explicit(q, k, v, scale)
        else:
            factor = 1.0
            if isinstance(scale, torch.Tensor):  # SDPA takes a float scale only; folding the learned g
                q = q * scale                     # into q keeps autograd right
            else:
                factor = scale
            # A sliding window needs its mask; plain causal attention keeps SDPA's fused causal kernel.
            mask = None if self.window is None else ~self._hidden_mask(T, q.device)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None, scale=factor,
                                               dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2)  # (B, T, H, Dh)
        if self.gate is not None:
            y = self.gate(x, y)
        y = y.reshape(B, T, -1)  # (B, T, n_head*head_dim), heads concatenated
        if type(self.pre_proj) is not nn.Identity:
            y = self.pre_proj(y)
        y = self.proj(y)  # -> (B, T, d)
        return self.drop(y) if self.drop.p else y  # dropout at p=0 is the identity: skip the call

    def _norm_qkv(self, q: torch.Tensor, k: torch.Tensor,
                  v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # An unset norm is an nn.Identity: skipping its call saves the module dispatch
        # (three per layer and step), and the result is the same tensor.
        qn, kn, vn = self.q_norm, self.k_norm, self.v_norm
        if type(qn) is not nn.Identity:
            q = qn(q)
        if type(kn) is not nn.Identity:
            k = kn(k)
        if type(vn) is not nn.Identity:
            v = vn(v)
        return q, k, v

    def set_qk(self, q_norm: nn.Module, k_norm: nn.Module, scale: float, v_norm: nn.Module | None = None) -> None:
        """Replace the q/k (and, given ``v_norm``, v) normalisation and the softmax scale (used by
        placements such as nGPT and HybridNorm)."""
        if isinstance(self.scale, nn.Parameter):
            del self.scale  # drop the learned l2 scale: the new q/k norms own the scaling
        self.q_norm, self.k_norm, self.scale = q_norm, k_norm, scale
        if v_norm is not None:
            self.v_norm = v_norm
        self.full_span = False  # the replacements work per head

    def _hidden_mask(self, T: int, device: torch.device) -> torch.Tensor:
        """(T, T), True where query t may not see key s: the future (s > t) and, in a
        sliding-window block, keys at least ``window`` back (s <= t - window, transformers' rule)."""
        # Cached: the recording path runs at every diagnostic step. One made under inference
        # mode (the diagnostics' forward) cannot be saved for a backward (the sharpness's): remade.
        m = getattr(self, "_hidden", None)
        if m is None or m.size(0) != T or m.device != device or (m.is_inference() and not torch.is_inference_mode_enabled()):
            m = torch.ones(T, T, dtype=torch.bool, device=device).triu(1)
            if self.window is not None:
                m |= torch.ones(T, T, dtype=torch.bool, device=device).tril(-self.window)
            self._hidden = m
        return m

    def _explicit(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  scale: float | torch.Tensor) -> torch.Tensor:
        T = q.size(-2)
        future = self._hidden_mask(T, q.device)                     # (T, T), True where not attended
        logits = (q @ k.transpose(-2, -1)) * scale                  # (B, H, T, T)
        capped = logits
        if self.softcap is not None:  # Gemma 2's order of operations: divide, tanh, multiply
            capped = torch.tanh(logits / self.softcap) * self.softcap
        att = capped.masked_fill(future, float("-inf")).softmax(dim=-1)
        with torch.no_grad():
            rows = torch.special.entr(att).sum(-1)                    # (B, H, T): entropy of each query's row
            # Query 0 sees one key, so its entropy is always 0: leave it out of min and mean.
            ent = rows[..., 1:] if T > 1 else att.new_zeros(1)        # (B, H, T-1)
            # per head, every query (Zhai et al. 2023's mean over rows): (H,)
            self.stats = {"max_logit": logits.masked_fill(future, 0).abs().amax(),
                          "min_entropy": ent.amin(), "mean_entropy": ent.mean(), "head_entropy": rows.mean(dim=(0, 2))}
        if self.training and self.dropout:
            att = F.dropout(att, self.dropout)
        return att @ v


def gelu(x: torch.Tensor) -> torch.Tensor:
    """The exact GELU, x * Phi(x) (Hendrycks & Gimpel 2016): PyTorch's and nanoGPT's default."""
    return F.gelu(x)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """The tanh approximation of GELU, GPT-2's ``gelu_new`` (Gemma's ``gelu_pytorch_tanh``).
    On CPU its kernel costs about 4x the exact one's (issue 42: 737 vs 175 us on 768 x 512)."""
    return F.gelu(x, approximate="tanh")


class MLP(nn.Module):
    """GELU FFN: W_2 act(W_1 x), act = ``model.activation`` (GPT-2: the tanh GELU)."""

    reads_activation = True  # model.activation changes what it computes (hf_export compares it)

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.act: Callable[[torch.Tensor], torch.Tensor] = ACTIVATIONS.get(cfg.activation)
        self.fc = nn.Linear(cfg.d_model, cfg.ff_width, bias=cfg.bias)    # W_1
        self.proj = nn.Linear(cfg.ff_width, cfg.d_model, bias=cfg.bias)  # W_2
        self.proj.residual = True  # type: ignore[assignment]  # (torch types attributes as tensors or modules)
        self.drop = nn.Dropout(cfg.dropout)
        # Applied to the activation (B, T, d_ff) before W_2: a placement's hook (Sub-LN's and
        # NormFormer's mid-FFN norm); the identity, and not called, by default.
        self.pre_proj: nn.Module = nn.Identity()

    def act_rows(self) -> slice:
        """Rows of ``fc``'s output that feed the nonlinearity (nGPT scales them by sqrt(d))."""
        return slice(0, self.fc.out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc(x))
        if type(self.pre_proj) is not nn.Identity:
            h = self.pre_proj(h)
        y = self.proj(h)
        return self.drop(y) if self.drop.p else y


class SwiGLU(nn.Module):
    """SwiGLU FFN (Shazeer 2020): W_2 (silu(W_1a x) * W_1b x); W_1a, W_1b stacked in ``fc``.
    Its gate is SiLU by definition: ``model.activation`` does not apply."""

    reads_activation = False

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, 2 * cfg.ff_width, bias=cfg.bias)
        self.proj = nn.Linear(cfg.ff_width, cfg.d_model, bias=cfg.bias)
        self.proj.residual = True  # type: ignore[assignment]  # (torch types attributes as tensors or modules)
        self.drop = nn.Dropout(cfg.dropout)
        # Applied to the activation (B, T, d_ff) before W_2: a placement's hook (Sub-LN's and
        # NormFormer's mid-FFN norm); the identity, and not called, by default.
        self.pre_proj: nn.Module = nn.Identity()

    def act_rows(self) -> slice:
        """Rows of ``fc``'s output that feed the nonlinearity: the gate half."""
        return slice(0, self.proj.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.fc(x).chunk(2, dim=-1)
        h = F.silu(gate) * up
        if type(self.pre_proj) is not nn.Identity:
            h = self.pre_proj(h)
        y = self.proj(h)
        return self.drop(y) if self.drop.p else y



class GeGLU(SwiGLU):
    """GeGLU FFN (Shazeer 2020): W_2 (gelu(W_1a x) * W_1b x); W_1a, W_1b stacked in ``fc``.

    The GELU is ``model.activation``, as in the MLP: one option names the GELU of every FFN
    that has one, so no FFN computes another GELU than the config says. Gemma's is the tanh
    GELU (``gelu_pytorch_tanh``), which ``interop`` sets when it imports Gemma."""

    reads_activation = True

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.act: Callable[[torch.Tensor], torch.Tensor] = ACTIVATIONS.get(cfg.activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.fc(x).chunk(2, dim=-1)
        y = self.proj(self.act(gate) * up)
        return self.drop(y) if self.drop.p else y
