"""torch.compile on vs off for normlab's tiny model on CPU (short windows; compile time shown apart).

    python benchmarks/compile_cpu.py [--repeats 5] [--window-steps 10]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from normlab.bench.peers import SIZES, normlab


def tokens_per_s(compiled: bool, repeats: int, window: int) -> tuple[float, float, float, float]:
    s = SIZES.get("tiny")
    torch.manual_seed(0)
    model, _ = normlab(s)
    fwd = torch.compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, s.vocab, (s.batch, s.context))
    y = torch.randint(0, s.vocab, (s.batch, s.context))

    def step() -> None:
        fwd(x, y)[1].backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t0 = time.perf_counter()
    for _ in range(3):
        step()  # includes compilation when compiled
    warm = time.perf_counter() - t0
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(window):
            step()
        rates.append(window * s.batch * s.context / (time.perf_counter() - t0))
    return statistics.median(rates), min(rates), max(rates), warm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--window-steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0 = torch default)")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    print(f"threads: {torch.get_num_threads()}")
    eager = tokens_per_s(False, a.repeats, a.window_steps)
    comp = tokens_per_s(True, a.repeats, a.window_steps)
    for name, r in (("eager", eager), ("compile", comp)):
        print(f"{name:<8} {r[0]:8.0f} tok/s (min-max {r[1]:.0f}-{r[2]:.0f}); first 3 steps {r[3]:.1f} s")
    gain = comp[0] / eager[0]
    print(f"compile / eager = {gain:.2f}x; break-even after about "
          f"{(comp[3] - eager[3]) / max(1e-9, (1 / eager[0] - 1 / comp[0]) * 768):.0f} steps"
          if gain > 1 else f"compile / eager = {gain:.2f}x: keep train.compile = false on CPU")


if __name__ == "__main__":
    main()
