"""Timed train steps, the matmul peak, and the FLOP count behind GFLOP/s and MFU.

Method: build a peer at one size, take ``warmup`` AdamW steps (allocator, caches, lazy
kernels), then ``repeats`` windows of ``window`` steps each on fixed random tokens; each
window gives tokens/s = window * batch * context / seconds. The median is the result and
the min-max range its spread. CUDA windows end with a synchronize.

FLOPs per train step (Kaplan et al. 2020; PaLM, Chowdhery et al. 2022, appendix B):
    6 * N * B * T  +  12 * L * d * T * B * T
N = parameters that take part in matrix products (all parameters minus the position
table; a tied output head counts once), B*T tokens per step; the second term is the
attention scores and weighted sum (forward 2 matmuls of 2*T*d per token, x3 for backward),
counted over the full T x T square as PaLM does. MFU = achieved / measured matmul peak.
"""

from __future__ import annotations

import contextlib
import resource
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from normlab.bench.peers import PEERS, PeerMissing, Size


@dataclass
class Result:
    peer: str
    size: str
    params: int
    tokens_per_s: float        # median over windows
    tps_min: float
    tps_max: float
    gflops: float              # achieved, from the median
    mfu: float                 # gflops / matmul peak of the dtype
    peak_rss_mib: float        # process peak resident memory so far (monotonic across peers)
    peak_dev_mib: float | None  # CUDA peak allocated for this peer
    final_loss: float

    def row(self) -> dict[str, Any]:
        return asdict(self)


def matmul_peak(dtype: torch.dtype, device: torch.device, n: int = 2048, reps: int = 5) -> float:
    """Best-of-``reps`` GFLOP/s of an n x n x n matmul (2 n^3 FLOPs) in ``dtype``."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b  # warm-up
    best = float("inf")
    for _ in range(reps):
        _sync(device)
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best / 1e9


def step_flops(n_matmul: int, s: Size) -> float:
    tokens = s.batch * s.context
    return 6.0 * n_matmul * tokens + 12.0 * s.n_layer * s.d_model * s.context * tokens


def matmul_params(model: torch.nn.Module, s: Size) -> int:
    """Parameters used in matrix products: all minus the learned position table (context x d)."""
    n = sum(p.numel() for p in model.parameters())
    return n - s.context * s.d_model


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def measure(peer: str, size_name: str, s: Size, device: torch.device, dtype: str = "float32",
            warmup: int = 5, repeats: int = 5, window: int = 10, peak: float = 0.0,
            seed: int = 0) -> Result:
    """Time ``repeats`` windows of ``window`` AdamW train steps of ``peer`` at size ``s``."""
    torch.manual_seed(seed)
    model, loss_fn = PEERS.get(peer)(s)
    model = model.to(device).train()
    fused = getattr(model, "bench_fused", False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, fused=True if fused else None)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, s.vocab, (s.batch, s.context), generator=gen).to(device)
    y = torch.randint(0, s.vocab, (s.batch, s.context), generator=gen).to(device)
    amp = (torch.autocast(device.type, dtype=torch.bfloat16) if dtype == "bfloat16"
           else contextlib.nullcontext())
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    def step() -> torch.Tensor:
        with amp:
            loss = loss_fn(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    for _ in range(warmup):
        step()
    _sync(device)
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(window):
            loss = step()
        _sync(device)
        rates.append(window * s.batch * s.context / (time.perf_counter() - t0))
    med = statistics.median(rates)
    n = sum(p.numel() for p in model.parameters())
    gflops = step_flops(matmul_params(model, s), s) * med / (s.batch * s.context) / 1e9
    dev_peak = torch.cuda.max_memory_allocated(device) / 2 ** 20 if device.type == "cuda" else None
    return Result(peer, size_name, n, med, min(rates), max(rates), gflops,
                  gflops / peak if peak else float("nan"), peak_rss_mib(), dev_peak, float(loss))


def run_peer(peer: str, size_name: str, s: Size, device: torch.device, **kw: Any) -> Result | str:
    """``measure`` or, when the peer's library is missing, a one-line note."""
    try:
        return measure(peer, size_name, s, device, **kw)
    except PeerMissing as e:
        return f"{peer}: skipped, not installed ({e})"
