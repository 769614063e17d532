"""The `nanogpt-cpu` preset end to end, as a user runs it: wall time, val loss, peak memory.

Runs `normlab train --preset nanogpt-cpu` in a child process per seed (so the clock includes
start-up, data loading, evaluation and checkpoints, and the peak RSS is that run's alone)
and reads each run's summary.json. Targets (issue 8): val loss <= 1.886 in <= 60 s wall,
peak RSS <= 400 MiB. nanoGPT's own CPU recipe: val ~1.88 in ~95 s on this kind of machine.

    python benchmarks/nanogpt_cpu.py [--seeds 1] [--set train.steps=2000 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import json_arg, target, write_targets  # noqa: E402


def one_run(seed: int, sets: list[str], out: Path) -> tuple[float, float, float]:
    """(wall seconds, best val loss, peak RSS MiB) of one child `normlab train` run."""
    cmd = [sys.executable, "-m", "normlab", "train", "--preset", "nanogpt-cpu", "--quiet", "--out", str(out),
           "--set", f"seed={seed}"]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.perf_counter()
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far; one child per script run keeps it exact
    # for the first seed and an upper bound after (every run has the same shape).
    subprocess.run(cmd, check=True, env=os.environ.copy())
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    summary = json.loads((out / "summary.json").read_text())
    return wall, summary["best_val_loss"], rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=1, help="runs with seeds 1337, 1338, ...")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="override a preset option (repeatable), e.g. --set train.steps=2000")
    json_arg(ap)
    a = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.seeds):
            wall, val, rss = one_run(1337 + i, a.sets, Path(tmp) / f"run{i}")
            runs.append((wall, val, rss))
            print(f"seed {1337 + i}: val {val:.4f}, {wall:.1f} s wall, peak RSS {rss:.0f} MiB", flush=True)
    walls, vals = [r[0] for r in runs], [r[1] for r in runs]
    wall, val, rss = statistics.median(walls), statistics.mean(vals), max(r[2] for r in runs)
    spread = f" (seeds {min(vals):.4f}-{max(vals):.4f})" if len(vals) > 1 else ""
    print(f"nanogpt-cpu {' '.join(a.sets)}: mean val {val:.4f}{spread} (target <= 1.886: "
          f"{'met' if val <= 1.886 else 'MISSED'}); median wall {wall:.1f} s (target <= 60 s: "
          f"{'met' if wall <= 60 else 'MISSED'}); peak RSS {rss:.0f} MiB (target <= 400: "
          f"{'met' if rss <= 400 else 'MISSED'})")
    write_targets(a.json, [
        target("nanogpt-cpu val loss", f"{val:.4f}{spread}", "<= 1.886", val <= 1.886),
        target("nanogpt-cpu wall time", f"{wall:.1f} s", "<= 60 s", wall <= 60),
        target("nanogpt-cpu peak RSS", f"{rss:.0f} MiB", "<= 400 MiB", rss <= 400)])


if __name__ == "__main__":
    main()
