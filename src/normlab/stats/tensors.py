"""The statistics of the lab as small pure functions (definitions in docs/diagnostics.md).

Activations are (B, T, d) tensors: B sequences, T positions, width d. "Token" means one
(b, t) row. All functions return 0-d tensors (no host sync) unless stated otherwise.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import torch

if TYPE_CHECKING:
    import numpy as np


def mean_sq(x: torch.Tensor) -> torch.Tensor:
    """E||x||^2 / d over tokens = mean of x^2 (the quantity of Xiong et al. 2020, Lemma 1)."""
    return x.detach().float().pow(2).mean()


def max_abs(x: torch.Tensor) -> torch.Tensor:
    """max |x| over every entry (fp16 overflows at 65504; claim sandwich-max-abs)."""
    return x.detach().abs().amax().float()


def moments(tensors: Sequence[torch.Tensor], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(mean, variance, max |x|) of every entry of ``tensors`` pooled, as a (3,) tensor in
    ``dtype``: OLMo-core's GAP monitor per parameter or gradient (``torch.var_mean``, so the
    unbiased variance), here over all of a layer's tensors at once. NaNs when there are none."""
    if not tensors:
        return torch.full((3,), math.nan, dtype=dtype)
    flat = torch.cat([t.detach().reshape(-1).to(dtype) for t in tensors])
    var, mean = torch.var_mean(flat)
    return torch.stack((mean, var, flat.abs().amax()))


def activation_moments(xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, variance) of each activation of ``xs`` (S, B, ...), as OLMo-core's GAP monitor
    takes them: per sequence b over all its entries (unbiased variance), then averaged over
    the B sequences. Two (S,) tensors."""
    var, mean = torch.var_mean(xs.detach().float().flatten(2), dim=-1)
    return mean.mean(dim=1), var.mean(dim=1)


class Moments:
    """Running (count, mean, sum of squared deviations, max |x|) in float64, merged tensor by
    tensor (Chan et al.'s pairwise update), for gradients seen one at a time and then dropped."""

    def __init__(self) -> None:
        self.n, self.mean, self.m2, self.max_abs = 0, 0.0, 0.0, math.nan

    def add(self, t: torch.Tensor) -> None:
        x = t.detach().double().reshape(-1)
        nb = x.numel()
        if nb == 0:
            return
        mb = float(x.mean())
        m2b, mx = float((x - mb).pow(2).sum()), float(x.abs().amax())
        n = self.n + nb
        d = mb - self.mean
        self.mean += d * nb / n
        self.m2 += m2b + d * d * self.n * nb / n
        self.n = n
        self.max_abs = mx if math.isnan(self.max_abs) else max(self.max_abs, mx)

    def row(self) -> list[float]:
        """[mean, unbiased variance, max |x|] (NaN where undefined)."""
        if self.n == 0:
            return [math.nan] * 3
        return [self.mean, self.m2 / (self.n - 1) if self.n > 1 else math.nan, self.max_abs]


def _cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-token cosine between rows of a and b: (..., d) x (..., d) -> (...)."""
    a, b = a.detach().float(), b.detach().float()
    return torch.nn.functional.cosine_similarity(a, b, dim=-1, eps=1e-12)


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Mean over tokens of cos(a_t, b_t), e.g. consecutive layers x_l and x_{l+1}."""
    return _cos(a, b).mean()


def angular_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Mean over tokens of arccos(cos(a_t, b_t)) / pi, in [0, 1] (Gromov et al. 2024)."""
    return (torch.arccos(_cos(a, b).clamp(-1.0, 1.0)) / math.pi).mean()


def block_influence(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """ShortGPT's block influence (Men et al. 2024): 1 - mean_t cos(x_in, x_out)."""
    return 1.0 - cosine(a, b)


def token_cosine(x: torch.Tensor) -> torch.Tensor:
    """Mean pairwise cosine between distinct tokens of the same sequence (rank collapse,
    Noci et al. 2022): 1 means every position carries the same direction. x (B, T, d), T >= 2."""
    u = torch.nn.functional.normalize(x.detach().float(), dim=-1, eps=1e-12)  # (B, T, d)
    gram = u @ u.transpose(-1, -2)                                           # (B, T, T)
    T = x.size(-2)
    off = gram.sum(dim=(-1, -2)) - gram.diagonal(dim1=-2, dim2=-1).sum(-1)   # (B,)
    return (off / (T * (T - 1))).mean()


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Linear CKA (Kornblith et al. 2019) between two representations of the same n samples.

    x (n, d1), y (n, d2); both centred over samples, then
    CKA = ||y^T x||_F^2 / (||x^T x||_F ||y^T y||_F), in [0, 1], invariant to rotation and scale.
    """
    x = x.detach().double().reshape(-1, x.size(-1))
    y = y.detach().double().reshape(-1, y.size(-1))
    x = x - x.mean(0, keepdim=True)
    y = y - y.mean(0, keepdim=True)
    num = (y.T @ x).pow(2).sum()
    den = torch.linalg.matrix_norm(x.T @ x) * torch.linalg.matrix_norm(y.T @ y)
    return (num / den.clamp_min(1e-300)).float()


def jacobian_rms(out: torch.Tensor, inputs: Sequence[torch.Tensor], n_proj: int = 2,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """RMS singular value ||J_l||_F / sqrt(N) of J_l = d out / d inputs[l], for every l at once.

    ``out`` and each ``inputs[l]`` hold N numbers (all tokens: attention mixes positions, so
    J_l is the full (N x N) Jacobian). Estimator: Hutchinson-style random projections,
    ||J||_F^2 = E_v ||v^T J||^2 for v ~ N(0, I_N); each projection is one vector-Jacobian
    product, i.e. one backward pass from ``out`` that yields v^T J_l for every l together.
    Unbiased for ||J||_F^2; its relative standard deviation is at most sqrt(2 / n_proj)
    and about sqrt(2 / (n_proj * N_eff)) when the spectrum is spread over N_eff directions,
    so at N = 8*64*128 one projection is already precise. Returns a (len(inputs),) tensor;
    1 means the map preserves norms on average (e.g. the identity).
    """
    total = torch.zeros(len(inputs), dtype=torch.float64, device=out.device)
    for _ in range(n_proj):
        v = torch.randn(out.shape, generator=generator, dtype=out.dtype, device="cpu").to(out.device)
        vjps = torch.autograd.grad(out, list(inputs), grad_outputs=v, retain_graph=True,
                                   allow_unused=True)
        sq = [g.double().pow(2).sum() if g is not None else torch.zeros((), dtype=torch.float64, device=out.device)
              for g in vjps]
        total += torch.stack(sq)
    return (total / (n_proj * out.numel())).sqrt().float()


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman rank correlation (average ranks for ties); nan when a side is constant."""
    import numpy as np

    def ranks(a: Sequence[float] | np.ndarray) -> np.ndarray:
        a = np.asarray(a, dtype=float)
        order = a.argsort(kind="stable")
        r = np.empty(len(a))
        r[order] = np.arange(len(a), dtype=float)
        for v in np.unique(a):  # ties share their mean rank
            r[a == v] = r[a == v].mean()
        return r

    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def ols(x: Sequence[float], y: Sequence[float]) -> dict[str, float]:
    """Least-squares line y = a + b x: slope b, its standard error, intercept a, R^2, n.

    stderr(b) = sqrt(RSS / (n - 2) / sum (x - mean x)^2) (nan when n <= 2)."""
    import numpy as np

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(x)
    sxx = float(((x - x.mean()) ** 2).sum())
    b = float(((x - x.mean()) * (y - y.mean())).sum() / sxx)
    a = float(y.mean() - b * x.mean())
    rss = float(((y - a - b * x) ** 2).sum())
    tss = float(((y - y.mean()) ** 2).sum())
    se = math.sqrt(rss / (n - 2) / sxx) if n > 2 else float("nan")
    return {"slope": b, "stderr": se, "intercept": a, "r2": 1 - rss / tss if tss else float("nan"), "n": n}
