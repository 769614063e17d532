"""The norms, each a module over the last dimension of size d (names: ``model/catalogue.py``).

| name      | formula                                              | parameters, init          | source |
|-----------|------------------------------------------------------|---------------------------|--------|
| layernorm | gamma * (x - mean) / sqrt(var + eps) + beta          | gamma=1, beta=0 (if bias) | Ba et al. 2016 |
| rmsnorm   | g * x / sqrt(mean(x^2) + eps)  (no re-centring)      | g=1                       | Zhang & Sennrich 2019; T5, LLaMA |
| rmsnorm_1p | (1 + w) * x / sqrt(mean(x^2) + eps)                | w=0                       | Gemma (Team 2024) |
| scalenorm | g * x / max(||x||, eps)                              | scalar g=sqrt(d)          | Nguyen & Salazar 2019 |
| dyt       | gamma * tanh(alpha * x) + beta                       | scalar alpha=0.5, gamma=1, beta=0 | Zhu et al. 2025 |
| derf      | gamma * erf(alpha * x + s) + beta                    | scalars alpha=0.5, s=0; gamma=1, beta=0 | Chen et al. 2025 |
| seednorm  | (alpha * tanh(x . beta) + gamma) * x / RMS(x)        | gamma=1, alpha=1, beta=0 (vectors) | Cai et al. 2025 |
| none      | x                                                    | -                         | - |

QK-norms (applied per head to q and k, over the head dimension): layernorm, rmsnorm,
rmsnorm_1p and l2 (Henry et al. 2020: unit-length q and k; the attention then uses a learned
scale in place of 1/sqrt(d_head), see attention.py).

Each norm creates its tensors empty and writes the init of the table in ``reset_parameters``,
which ``__init__`` calls: the one place each constant is written, so a model built on the
meta device gets the same values after ``to_empty`` (``TransformerLM.materialise``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class LayerNorm(nn.Module):
    """gamma * (x - mean(x)) / sqrt(var(x) + eps) + beta; beta only when ``bias``."""

    formula = "gamma * (x - mean) / sqrt(var + eps) + beta"
    source = "Ba et al. 2016"

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(d))
        self.bias = nn.Parameter(torch.empty(d)) if bias else None
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        self.weight.fill_(1.0)
        if self.bias is not None:
            self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """g * x / sqrt(mean(x^2) + eps): the square root is there (seed 001 drops it)."""

    formula = "g * x / sqrt(mean(x^2) + eps)  (no re-centring)"
    source = "Zhang & Sennrich 2019; T5, LLaMA"

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = False) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(d))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        self.weight.fill_(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, self.weight.shape, self.weight, self.eps)


class RMSNorm1p(nn.Module):
    """RMSNorm with the gain stored as its offset from 1: (1 + w) * x / sqrt(mean(x^2) + eps).

    The function of ``RMSNorm`` with g = 1 + w; what differs is the parameter: w starts at
    0, and weight decay or a checkpoint's stored values act on w (Gemma 2/3's convention).
    """

    formula = "(1 + w) * x / sqrt(mean(x^2) + eps), w = 0 at init (gain stored as its offset from 1)"
    source = "Gemma (Gemma Team 2024), Gemma 2, Gemma 3"

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = False) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(d))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        self.weight.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Gemma's order: normalise, then multiply by (1 + w) computed in x's precision
        return F.rms_norm(x, self.weight.shape, None, self.eps) * (1.0 + self.weight)


class ScaleNorm(nn.Module):
    """g * x / ||x|| with one scalar g initialised to sqrt(d), so the output has RMS 1."""

    formula = "g * x / ||x||, scalar g = sqrt(d) at init"
    source = "Nguyen & Salazar 2019"

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = False) -> None:
        super().__init__()
        self.eps, self.d = eps, d
        self.weight = nn.Parameter(torch.empty(()))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        self.weight.fill_(math.sqrt(self.d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * x / x.norm(dim=-1, keepdim=True).clamp_min(self.eps)


class DyT(nn.Module):
    """Dynamic Tanh: gamma * tanh(alpha * x) + beta, learnable scalar alpha (init 0.5).

    "Transformers without Normalization" (Zhu et al. 2025).
    """

    formula = "gamma * tanh(alpha * x) + beta, scalar alpha = 0.5 at init"
    source = "DyT, Zhu et al. 2025"

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True, alpha0: float = 0.5) -> None:
        super().__init__()
        self.alpha0 = alpha0
        self.alpha = nn.Parameter(torch.empty(()))
        self.weight = nn.Parameter(torch.empty(d))
        self.bias = nn.Parameter(torch.empty(d)) if bias else None
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        self.alpha.fill_(self.alpha0)
        self.weight.fill_(1.0)
        if self.bias is not None:
            self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.weight * torch.tanh(self.alpha * x)
        return y + self.bias if self.bias is not None else y


class Derf(nn.Module):
    """Dynamic erf: gamma * erf(alpha * x + s) + beta, learnable scalars alpha (init 0.5) and s
    (init 0), DyT's per-channel affine gamma, beta.

    "Stronger Normalization-Free Transformers" (Chen et al. 2025, arXiv 2512.10938); checked
    against the authors' ``Dynamic_erf`` (zlab-princeton/Derf, ``language model/model_derf.patch``
    and ``ViT/dynamic_erf.py``: alpha_init_value=0.5, shift_init_value=0.0, both shape (1,)).
    """

    formula = "gamma * erf(alpha * x + s) + beta, scalars alpha = 0.5, s = 0 at init"
    source = "Derf, Chen et al. 2025 (arXiv 2512.10938; zlab-princeton/Derf)"

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True, alpha0: float = 0.5) -> None:
        super().__init__()
        self.alpha0 = alpha0
        self.alpha = nn.Parameter(torch.empty(()))
        self.shift = nn.Parameter(torch.empty(()))
        self.weight = nn.Parameter(torch.empty(d))
        self.bias = nn.Parameter(torch.empty(d)) if bias else None
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        self.alpha.fill_(self.alpha0)
        self.shift.zero_()
        self.weight.fill_(1.0)
        if self.bias is not None:
            self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.weight * torch.erf(self.alpha * x + self.shift)
        return y + self.bias if self.bias is not None else y


class SeeDNorm(nn.Module):
    """Self-rescaled dynamic normalization: RMSNorm whose per-channel gain gamma is modulated by
    the input itself, (alpha * tanh(x . beta) + gamma) * x / sqrt(mean(x^2) + eps); x . beta is
    one scalar per token, alpha, beta, gamma are vectors over d.

    Cai et al. 2025 (arXiv 2510.22777, Eq. 1, sigma = tanh); no official code was found. The
    init (gamma = 1, alpha = 1, beta = 0: RMSNorm at init, with gradient reaching beta) is
    normlab's choice, not confirmed against the paper (docs/placements.md, "What was checked").
    """

    formula = "(alpha * tanh(x . beta) + gamma) * x / RMS(x); gamma = alpha = 1, beta = 0 at init"
    source = "SeeDNorm, Cai et al. 2025 (arXiv 2510.22777)"

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = False) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(d))        # gamma
        self.alpha = nn.Parameter(torch.empty(d))
        self.beta = nn.Parameter(torch.empty(d))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        self.weight.fill_(1.0)
        self.alpha.fill_(1.0)
        self.beta.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.tanh(x @ self.beta).unsqueeze(-1)   # (..., 1): one scalar per token
        return (self.alpha * gate + self.weight) * F.rms_norm(x, self.weight.shape, None, self.eps)


class L2Norm(nn.Module):
    """x / ||x|| (no parameters): unit-length rows, for Henry et al.'s QK-norm."""

    formula = "x / ||x||; attention scale = learned g (init log2(T^2 - T))"
    source = "Henry et al. 2020 (QKNorm)"
    learned_scale = True  # the attention replaces 1/sqrt(d_head) by a learned scalar g

    def __init__(self, d: int, eps: float = 1e-6, bias: bool = False) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1, eps=self.eps)


def identity(d: int, eps: float = 1e-5, bias: bool = True) -> nn.Module:
    """``model.norm = "none"``: no normalization."""
    return nn.Identity()


identity.formula = "x"  # type: ignore[attr-defined]
identity.source = "no normalization"  # type: ignore[attr-defined]
