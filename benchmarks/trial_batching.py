"""8 tiny trials (different seeds, learning rates, warm-ups) batched vs 8 sequential solo runs.

Prints the wall-time speedup (target >= 1.4x on CPU, >= 5x on a GPU) and the largest relative
difference between each batched trial's loss curve and its solo run (target <= 1e-4).

    python benchmarks/trial_batching.py [--steps 200] [--trials 8] [--device cpu]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import target, tiny_run, write_targets  # noqa: E402

from normlab.fsutil import read_jsonl  # noqa: E402
from normlab.train import run_training  # noqa: E402
from normlab.train.batched import run_batched  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="train.threads for both arms (0 = torch default)")
    ap.add_argument("--json", type=Path, help="write the target rows here (benchmarks/targets.py reads them)")
    a = ap.parse_args()
    lrs = [1e-3, 2e-3, 5e-4, 3e-3]
    cfgs = []
    for i in range(a.trials):
        c = tiny_run(a.steps, seed=1000 + i, lr=lrs[i % len(lrs)], warmup=[0, 20, 50][i % 3])
        c.train.device, c.train.threads = a.device, a.threads
        cfgs.append(c)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        run_batched(cfgs, [root / f"b{i}" for i in range(a.trials)], quiet=True)
        t_batched = time.perf_counter() - t0
        t0 = time.perf_counter()
        for i, c in enumerate(cfgs):
            run_training(c, root / f"s{i}", quiet=True)
        t_solo = time.perf_counter() - t0
        worst = 0.0
        for i in range(a.trials):
            got = [r["train/loss"] for r in read_jsonl(root / f"b{i}" / "metrics.jsonl")]
            want = [r["train/loss"] for r in read_jsonl(root / f"s{i}" / "metrics.jsonl")]
            assert len(got) == len(want), (len(got), len(want))
            worst = max(worst, max(abs(g - w) / abs(w) for g, w in zip(got, want)))
    speed = t_solo / t_batched
    target_x = 5.0 if a.device.startswith("cuda") else 1.4
    print(f"{a.trials} trials x {a.steps} steps on {a.device}: batched {t_batched:.1f} s, "
          f"sequential {t_solo:.1f} s, speedup {speed:.2f}x (target >= {target_x}x: "
          f"{'met' if speed >= target_x else 'MISSED'})")
    print(f"loss curves: max relative difference batched vs solo {worst:.2e} "
          f"(target <= 1e-4: {'met' if worst <= 1e-4 else 'MISSED'})")
    write_targets(a.json, [
        target(f"trial batching, {a.trials} trials x {a.steps} steps, {a.device}",
               f"batched {t_batched:.1f} s vs sequential {t_solo:.1f} s = {speed:.2f}x", f">= {target_x}x",
               speed >= target_x),
        target("trial batching loss curves vs solo", f"max rel. difference {worst:.1e}", "<= 1e-4", worst <= 1e-4)])


if __name__ == "__main__":
    main()
