"""Workers x threads x trial batching for a study of 8 tiny trials, timed through the study runner.

Each layout runs the same 8 trials (nanogpt-cpu shape; different seeds, learning rates and
warm-ups) into a fresh store. The baseline is the plain sequential study: one worker with
all cores as torch threads, no batching. Prints wall time and speedup per layout; the
fastest layout is what `normlab study run` should default to on this machine.

    python benchmarks/study_layout.py [--steps 200] [--trials 8]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import json_arg, target, tiny_run, write_targets  # noqa: E402

from normlab.study.runner import run_study  # noqa: E402
from normlab.study.spec import StudySpec  # noqa: E402


def spec(steps: int, trials: int) -> StudySpec:
    base = json.loads(tiny_run(steps).to_json())
    base["train"]["threads"] = 0  # the worker sets torch threads from the layout
    lrs = [1e-3, 2e-3, 5e-4, 3e-3]
    return StudySpec(name="layout", base=base, seeds=list(range(trials // len(lrs) or 1)),
                     axes={"optim.lr": lrs[: min(trials, len(lrs))]})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--trials", type=int, default=8, help="a multiple of 4 (4 learning rates x seeds)")
    json_arg(ap)
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    layouts = [  # (label, workers, threads per trial, batch)
        (f"1 worker x {cores} threads (sequential)", 1, cores, 1),
        (f"{cores} workers x 1 thread", cores, 1, 1),
        (f"1 worker x {cores} threads, batch {a.trials}", 1, cores, a.trials),
        (f"{cores} workers x 1 thread, batch {a.trials // cores}", cores, 1, a.trials // cores),
    ]
    n = len(spec(a.steps, a.trials).trials())
    print(f"{n} trials x {a.steps} steps (4L d=128 ctx 64 batch 12), {cores} cores")
    base = None
    speed: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, workers, threads, batch) in enumerate(layouts):
            t0 = time.perf_counter()
            store = run_study(spec(a.steps, a.trials), Path(tmp) / f"s{i}", workers=workers, threads=threads,
                              batch=batch, progress=False)
            wall = time.perf_counter() - t0
            ok = sum(t.status == "completed" for t in store.trials())
            base = base or wall
            speed[label] = base / wall
            print(f"{label:<40} {wall:7.1f} s  {base / wall:5.2f}x  ({ok}/{n} completed)", flush=True)
    best = max(speed, key=speed.get)
    write_targets(a.json, [target(f"study of {n} tiny trials vs sequential solo runs",
                                  f"best layout: {best}, {speed[best]:.2f}x; "
                                  + "; ".join(f"{k}: {v:.2f}x" for k, v in speed.items() if k != best),
                                  ">= 1.4x", speed[best] >= 1.4)])


if __name__ == "__main__":
    main()
