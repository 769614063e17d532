"""Throughput of normlab vs x-transformers and HF GPT-2 at tiny, baby and deep (float32),
then normlab at baby in bfloat16 autocast vs float32 (target >= 1.8x).

    python benchmarks/throughput.py [--repeats 5] [--window-steps 10] [--out bench.json]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from normlab.bench.harness import matmul_peak, measure
from normlab.bench.peers import SIZES
from normlab.bench.suite import run_suite


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--window-steps", type=int, default=10)
    ap.add_argument("--sizes", default="tiny,baby,deep")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    run_suite(a.sizes.split(","), ["normlab", "xtransformers", "hf-gpt2"], "cpu", "float32",
              a.repeats, a.window_steps, out=a.out)
    dev = torch.device("cpu")
    peak = matmul_peak(torch.bfloat16, dev)
    kw = {"repeats": a.repeats, "window": a.window_steps}
    f32 = measure("normlab", "baby", SIZES.get("baby"), dev, "float32", **kw)
    bf16 = measure("normlab", "baby", SIZES.get("baby"), dev, "bfloat16", peak=peak, **kw)
    r = bf16.tokens_per_s / f32.tokens_per_s
    print(f"\nbaby bfloat16 {bf16.tokens_per_s:.0f} tok/s vs float32 {f32.tokens_per_s:.0f} tok/s = {r:.2f}x "
          f"(target >= 1.8x: {'met' if r >= 1.8 else 'MISSED'}); bf16 MFU {bf16.mfu:.0%} of {peak:.0f} GFLOP/s")


if __name__ == "__main__":
    main()
