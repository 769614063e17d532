"""Every performance target of issues 8 and 42 in one table: runs each benchmark script in its own
process (clean memory, no shared caches), reads the rows each writes with ``--json``, and
prints target / measured / goal / verdict. About 15 minutes on a 2-core CPU.

    python benchmarks/targets.py [--quick] [--out targets.json]

``--quick`` shortens every script (fewer windows and steps) to check the plumbing; its
numbers are noisier and not the reference. GPU rows run only when CUDA is available.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent


def scripts(quick: bool, cuda: bool, nanogpt: Path | None = None) -> list[list[str]]:
    q = quick
    out = [
        ["throughput.py", "--repeats", "3" if q else "7", "--window-steps", "3" if q else "10"],
        ["trial_batching.py", "--steps", "20" if q else "200", "--trials", "8", "--rounds", "1" if q else "2"],
        ["study_layout.py", "--steps", "20" if q else "200", "--trials", "8"],
        ["bf16_loss.py", "--steps", "30" if q else "300"],
        ["diag_overhead.py", "--rounds", "2" if q else "5", "--steps", "10" if q else "40"],
        ["nanogpt_cpu.py"] + (["--set", "train.steps=100"] if q else []),
        ["vs_nanogpt.py", "--steps", "5" if q else "40", "--warmup", "1" if q else "5"]
        + (["--nanogpt", str(nanogpt)] if nanogpt else []),  # issue 42
    ]
    if cuda:
        out.append(["trial_batching.py", "--steps", "20" if q else "200", "--trials", "8", "--device", "cuda"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="short runs: check the plumbing, not the numbers")
    ap.add_argument("--out", type=Path, help="also write every row as JSON here")
    ap.add_argument("--nanogpt", type=Path, help="a checkout of karpathy/nanoGPT for vs_nanogpt.py "
                                                 "(without it: its hand-written stand-in)")
    a = ap.parse_args()
    import torch

    from normlab.bench.suite import target

    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, cmd in enumerate(scripts(a.quick, torch.cuda.is_available(), a.nanogpt)):
            out = Path(tmp) / f"{i}.json"
            print(f"\n$ python benchmarks/{' '.join(cmd)}", flush=True)
            proc = subprocess.run([sys.executable, str(HERE / cmd[0]), *cmd[1:], "--json", str(out)])
            if proc.returncode != 0 or not out.exists():
                rows.append({"target": cmd[0], "measured": f"script failed (exit {proc.returncode})",
                             "goal": "-", "verdict": "error"})
                continue
            rows += json.loads(out.read_text())["rows"]
    if not torch.cuda.is_available():
        rows.append(target("trial batching, 8 trials, cuda", "not run: no CUDA device here", ">= 5x", None))
    w = max(len(r["target"]) for r in rows)
    print(f"\n{'target':<{w}}  {'verdict':<7}  {'goal':<10}  measured")
    for r in rows:
        print(f"{r['target']:<{w}}  {r['verdict']:<7}  {r['goal']:<10}  {r['measured']}")
    if a.out is not None:
        a.out.write_text(json.dumps({"quick": a.quick, "rows": rows}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
