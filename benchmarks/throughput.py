"""Throughput of normlab vs a hand-written Pre-LN GPT, x-transformers and HF GPT-2 at tiny,
baby and deep (float32), then normlab at baby in bfloat16 autocast vs float32 (target >= 1.8x).

    python benchmarks/throughput.py [--repeats 5] [--window-steps 10] [--out bench.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from _common import json_arg, target, write_targets  # noqa: E402

from normlab.bench.harness import Trainee, matmul_peak  # noqa: E402
from normlab.bench.peers import SIZES  # noqa: E402
from normlab.bench.suite import run_suite  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--window-steps", type=int, default=10)
    ap.add_argument("--sizes", default="tiny,baby,deep")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--bf16-only", action="store_true", help="skip the peer table, time only bf16 vs fp32")
    json_arg(ap)
    a = ap.parse_args()
    rows = []
    if not a.bf16_only:
        rows = run_suite(a.sizes.split(","), ["normlab", "hand", "xtransformers", "hf-gpt2"], "cpu", "float32",
                         a.repeats, a.window_steps, out=a.out)["verdicts"]
    dev = torch.device("cpu")
    peaks = {d: matmul_peak(getattr(torch, d), dev) for d in ("float32", "bfloat16")}
    # Interleaved windows, as in the peer table: drift hits both dtypes alike.
    runs = {d: Trainee("normlab-fused", SIZES.get("baby"), dev, d) for d in ("float32", "bfloat16")}
    for t in runs.values():
        for _ in range(3):
            t.step()
    for _ in range(a.repeats):
        for t in runs.values():
            t.window(a.window_steps)
    f32, bf16 = (runs[d].result("baby", peaks[d]) for d in ("float32", "bfloat16"))
    r = bf16.tokens_per_s / f32.tokens_per_s
    print(f"\nbaby bfloat16 {bf16.tokens_per_s:.0f} tok/s vs float32 {f32.tokens_per_s:.0f} tok/s = {r:.2f}x "
          f"(target >= 1.8x: {'met' if r >= 1.8 else 'MISSED'}); MFU bf16 {bf16.mfu:.0%} of "
          f"{peaks['bfloat16']:.0f}, fp32 {f32.mfu:.0%} of {peaks['float32']:.0f} GFLOP/s")
    rows.append(target("baby bf16 vs fp32 tok/s", f"{bf16.tokens_per_s:.0f} / {f32.tokens_per_s:.0f} = {r:.2f}x",
                       ">= 1.8x", r >= 1.8))
    write_targets(a.json, rows)


if __name__ == "__main__":
    main()
