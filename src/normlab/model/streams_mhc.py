"""Manifold-constrained hyper-connections (mHC, Xie et al. 2025, arXiv 2512.24880): n residual streams.

The state between sub-layers is the tuple (x_1, ..., x_n), each (B, T, d), so the capture path
reads x_1 as the main stream and x_2 as the second (``diagnostics/subject.py``). Like ResiDual,
it owns the residual stream and cannot be mixed with other placements.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from normlab.model.config import ModelConfig
from normlab.model.placement import Placement, Site, Stream

STREAMS = 4  # n, the paper's expansion rate (DeepSeek-V4's hc_mult = 4)
SINKHORN_ITERS = 20  # t_max
ALPHA = 0.01  # the gating factors' value at init (as the HC family's dynamic scales, lucidrains: 1e-2)


def sinkhorn(logits: torch.Tensor, iters: int = SINKHORN_ITERS) -> torch.Tensor:
    """Sinkhorn-Knopp on (..., n, n): M = exp(logits), then ``iters`` times rows to sum 1, then
    columns (the paper's M <- T_c(T_r(M))). Subtracting each row's maximum first changes nothing
    (the first step divides every row by its sum) and keeps exp finite."""
    m = (logits - logits.amax(-1, keepdim=True)).exp()
    for _ in range(iters):
        m = m / m.sum(-1, keepdim=True)
        m = m / m.sum(-2, keepdim=True)
    return m


class MHCStream(Stream):
    """x_0 = n copies of the embedding; the output is their sum (the HC paper's and lucidrains'
    ``reduce_fn``), then the model's final norm."""

    def begin(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x,) * STREAMS

    def end(self, h: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return torch.stack(h).sum(0)


class MHC(Placement):
    """mHC: x_{l+1} = H_res x_l + H_post^T F(LN(H_pre x_l)) on the n x d state x_l (the paper's
    Eq. 3; LN the sub-layer's pre-norm, ``model.norm``). The three maps are computed per token from
    r = RMS-normalised vec(x_l) (1 x nd, no gain): H_pre = sigmoid(a_pre r phi_pre + b_pre),
    H_post = 2 sigmoid(a_post r phi_post + b_post), H_res = Sinkhorn(a_res mat(r phi_res) + b_res),
    so H_res is (nearly) doubly stochastic and the residual path neither grows nor shrinks with
    depth. Checked against DeepSeek-V4's reference code (hc_pre, hc_post, hc_split_sinkhorn), which
    differs in adding eps = 1e-6 to H_pre and to the Sinkhorn sums (not here).

    Init, which no retrievable text of the paper gives, is lucidrains' mHC's: phi = 0, a = 0.01,
    b_pre one-hot on stream (k-1) mod n for global sub-layer k (so layers read different streams
    and the copies can diverge), b_post = 1, b_res = I.
    """

    depth_scaling = "mixes its 4 streams by a doubly stochastic H_res and learned H_pre, H_post instead of an add"
    formula = ("x <- H_res x + H_post^T F(LN(H_pre x)), n = 4 streams; H_pre = sigmoid(.), H_post = 2 sigmoid(.), "
               "H_res = Sinkhorn(.) of a * (RMS(vec x) phi) + b")
    source = "mHC (Xie et al. 2025, arXiv 2512.24880; DeepSeek-V4 reference code)"
    final_norm = True  # the streams' sum goes through the final norm before the head

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        n, d = STREAMS, site.cfg.d_model
        self.norm = site.norm()
        self.eps = site.cfg.norm_eps
        self.phi = nn.Parameter(torch.empty(n * d, 2 * n + n * n))  # [phi_pre | phi_post | phi_res]
        self.b = nn.Parameter(torch.empty(2 * n + n * n))            # [b_pre | b_post | b_res]
        self.a = nn.Parameter(torch.empty(3))                        # a_pre, a_post, a_res
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        n = STREAMS
        self.phi.zero_()
        self.a.fill_(ALPHA)
        self.b.zero_()
        self.b[(self.site.index - 1) % n] = 1.0                        # b_pre: one-hot
        self.b[n:2 * n] = 1.0                                          # b_post
        self.b[2 * n:] = torch.eye(n, device=self.b.device).flatten()  # b_res = I

    def maps(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """H_pre (B, T, n), H_post (B, T, n), H_res (B, T, n, n) of the state x (B, T, n, d)."""
        n = STREAMS
        v = x.flatten(-2)
        r = v * torch.rsqrt(v.square().mean(-1, keepdim=True) + self.eps)  # RMSNorm of vec(x), no gain
        m = r @ self.phi
        pre = torch.sigmoid(self.a[0] * m[..., :n] + self.b[:n])
        post = 2 * torch.sigmoid(self.a[1] * m[..., n:2 * n] + self.b[n:2 * n])
        res = sinkhorn((self.a[2] * m[..., 2 * n:] + self.b[2 * n:]).unflatten(-1, (n, n)))
        return pre, post, res

    def forward(self, h: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        x = torch.stack(h, dim=2)                                   # (B, T, n, d)
        pre, post, res = self.maps(x)
        f = self.branch(self.norm((pre.unsqueeze(-1) * x).sum(2)))  # F(LN(H_pre x)), (B, T, d)
        out = res @ x + post.unsqueeze(-1) * f.unsqueeze(2)         # H_res x + H_post^T F
        return tuple(out.unbind(2))

    @classmethod
    def make_stream(cls, cfg: ModelConfig, make_norm: Callable[[int, float, bool], nn.Module]) -> Stream:
        return MHCStream()
