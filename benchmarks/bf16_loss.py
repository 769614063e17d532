"""bfloat16 autocast vs float32: the tiny model's loss after 300 steps must agree within 1%.

    python benchmarks/bf16_loss.py [--steps 300]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import json_arg, target, tiny_run, write_targets  # noqa: E402

from normlab.core.fsutil import read_jsonl  # noqa: E402
from normlab.train import run_training  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=300)
    json_arg(ap)
    a = ap.parse_args()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in ("float32", "bfloat16"):
            s = run_training(tiny_run(a.steps, dtype=dtype), Path(tmp) / dtype, quiet=True)
            last = read_jsonl(Path(tmp) / dtype / "metrics.jsonl")[-1]
            out[dtype] = (s["final_val_loss"], last["train/loss"], s["tokens_per_s"])
    (v32, t32, r32), (v16, t16, r16) = out["float32"], out["bfloat16"]
    rel = abs(v16 - v32) / v32
    print(f"{a.steps} steps: val loss float32 {v32:.4f}, bfloat16 {v16:.4f} ({rel:.2%} apart; target <= 1%: "
          f"{'met' if rel <= 0.01 else 'MISSED'}); train loss {t32:.4f} vs {t16:.4f}; "
          f"tokens/s {r32:.0f} vs {r16:.0f}")
    write_targets(a.json, [target(f"bf16 val loss vs fp32 after {a.steps} steps",
                                  f"{v16:.4f} vs {v32:.4f} ({rel:.2%})", "<= 1%", rel <= 0.01)])


if __name__ == "__main__":
    main()
