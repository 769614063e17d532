"""Timed train steps, the matmul peak, and the FLOP count behind GFLOP/s and MFU.

Method: build every peer at one size, take ``warmup`` AdamW steps each (allocator, caches,
lazy kernels), then ``repeats`` rounds in which each peer times one window of ``window``
steps on fixed random tokens, in rotating order; each window gives tokens/s = window *
batch * context / seconds. The median is the result and the min-max range its spread.
CUDA windows end with a synchronize. Interleaving matters on shared or turbo-clocked
machines: timed one after the other, the same peer measured 15k or 21k tok/s depending on
whether it ran first or after another peer.

FLOPs per train step: ``normlab.model.cost.step_flops`` of normlab's model at the size
(3x the forward matrix products, attention's T x T products included; every peer is
built at that shape, so one count serves them all). MFU = achieved / measured matmul peak.
"""

from __future__ import annotations

import contextlib
import resource
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from normlab.bench.peers import PEERS, PeerMissing, Size, activation_of, model_config
from normlab.model import cost


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
    windows: list[float] = field(default_factory=list)  # tokens/s of each window, round by round
    activation: str = ""       # the FFN's GELU (``peers.activation_of``): its kernel's cost is part of the step

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


def step_flops(s: Size) -> float:
    """FLOPs of one train step at size ``s`` (the count of ``normlab.model.cost``)."""

    return cost.step_flops(model_config(s), s.batch)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


class Trainee:
    """One peer built at one size, taking AdamW steps on fixed random tokens."""

    def __init__(self, peer: str, s: Size, device: torch.device, dtype: str = "float32",
                 seed: int = 0) -> None:
        self.peer, self.size, self.device = peer, s, device
        torch.manual_seed(seed)
        model, self.loss_fn = PEERS.get(peer)(s)  # PeerMissing propagates
        self.model = model.to(device).train()
        fused = getattr(model, "bench_fused", False)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.1,
                                     fused=True if fused else None)
        gen = torch.Generator().manual_seed(seed)
        self.x = torch.randint(0, s.vocab, (s.batch, s.context), generator=gen).to(device)
        self.y = torch.randint(0, s.vocab, (s.batch, s.context), generator=gen).to(device)
        self.amp = (torch.autocast(device.type, dtype=torch.bfloat16) if dtype == "bfloat16"
                    else contextlib.nullcontext())
        self.rates: list[float] = []
        self.loss = float("nan")
        self.dev_mib: float | None = None

    def step(self) -> torch.Tensor:
        with self.amp:
            loss = self.loss_fn(self.x, self.y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss.detach()

    def window(self, steps: int) -> None:
        """Time ``steps`` train steps and record their tokens/s."""
        _sync(self.device)
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = self.step()
        _sync(self.device)
        self.rates.append(steps * self.size.batch * self.size.context / (time.perf_counter() - t0))
        self.loss = float(loss)

    def result(self, size_name: str, peak: float) -> Result:
        s = self.size
        med = statistics.median(self.rates)
        gflops = step_flops(s) * med / (s.batch * s.context) / 1e9
        return Result(self.peer, size_name, cost.count(self.model), med,
                      min(self.rates), max(self.rates), gflops, gflops / peak if peak else float("nan"),
                      peak_rss_mib(), self.dev_mib, self.loss, list(self.rates), activation_of(self.model))


def measure_many(peers: list[str], size_name: str, s: Size, device: torch.device,
                 dtype: str = "float32", warmup: int = 5, repeats: int = 5, window: int = 10,
                 peak: float = 0.0, seed: int = 0) -> list[Result | str]:
    """Build every peer, warm each up, then time ``repeats`` rounds of one window per peer.

    Windows are interleaved (round r starts at peer r mod n), so a machine that speeds up or
    slows down during the run (turbo, a neighbour's job, allocator state) shifts every peer
    alike instead of whichever happens to run last. A peer whose library is missing, or that
    fails while warming up (``torch.compile`` without a C++ compiler), becomes a one-line
    note in its place.
    """
    trainees: dict[str, Trainee | str] = {}
    for p in peers:
        before = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        try:
            t = Trainee(p, s, device, dtype, seed)
            for _ in range(warmup):
                t.step()
        except PeerMissing as e:
            trainees[p] = f"{p}: skipped, not installed ({e})"
            continue
        except Exception as e:  # e.g. torch.compile without a C++ compiler: the other peers still run
            first = (str(e).strip().splitlines() or [""])[0][:200]
            trainees[p] = f"{p}: skipped, failed in warm-up ({type(e).__name__}: {first})"
            continue
        if device.type == "cuda":  # this peer's own peak: the others' tensors are subtracted
            t.dev_mib = (torch.cuda.max_memory_allocated(device) - before) / 2 ** 20
        trainees[p] = t
    live = [t for t in trainees.values() if isinstance(t, Trainee)]
    for r in range(repeats):
        for i in range(len(live)):
            live[(r + i) % len(live)].window(window)
    return [t.result(size_name, peak) if isinstance(t, Trainee) else t for t in trainees.values()]
