"""Step-time overhead of in-training diagnostics (TrainingDiagnostics) at k=1 and k=10.

A plain AdamW loop on the nanoGPT CPU recipe shape (4 layers, d=128, 4 heads, context 64,
batch 12, Pre-LN) calls the diagnostics exactly as normlab.train's loop does. The three
settings (off, k=1, k=10) are interleaved in rounds so that load from other processes hits
them alike; the overhead is the median step time relative to "off".

    .venv/bin/python benchmarks/diag_overhead.py [--steps 40] [--rounds 5] [--threads 1]

Targets (issue 5): < 10% at k=1, < 2% at k=10.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from _common import json_arg, target, write_targets  # noqa: E402

from normlab import ModelConfig, TransformerLM  # noqa: E402
from normlab.diagnostics.training import TrainingDiagnostics  # noqa: E402


def run(model, opt, batches, diag, steps: int, start: int) -> list[float]:
    times = []
    for s in range(start, start + steps):
        idx, tgt = batches[s % len(batches)]
        t0 = time.process_time()  # CPU time of this process: robust to other load on a shared machine
        on = diag is not None and diag.active(s)
        if on:
            diag.before_forward(s)
        opt.zero_grad(set_to_none=True)
        _, loss = model(idx, tgt)
        loss.backward()
        if on:
            diag.after_backward(s)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        model.after_step()
        if on:
            diag.after_step(s, {"train/loss": loss.item()})
        else:
            loss.item()  # the loop reads the loss every step anyway
        times.append(time.process_time() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--context", type=int, default=64)
    json_arg(ap)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=65, context=args.context, n_layer=args.n_layer, d_model=args.d_model, n_head=4,
                      placement="pre")
    model = TransformerLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, 65, (args.batch, args.context), generator=g),
                torch.randint(0, 65, (args.batch, args.context), generator=g)) for _ in range(8)]
    times: dict[str, list[float]] = {"off": [], "k=1": [], "k=10": []}
    with tempfile.TemporaryDirectory() as tmp:
        diags = {"off": None, "k=1": TrainingDiagnostics(model, f"{tmp}/k1", batches[0], every=1),
                 "k=10": TrainingDiagnostics(model, f"{tmp}/k10", batches[0], every=10)}
        run(model, opt, batches, None, 5, 0)  # warm-up
        step = 0
        for _ in range(args.rounds):
            for name, diag in diags.items():
                times[name] += run(model, opt, batches, diag, args.steps, step)
                step += args.steps
    base = statistics.median(times["off"])
    print(f"model L={args.n_layer} d={args.d_model} batch={args.batch}x{args.context}, threads={args.threads}, "
          f"{args.rounds} rounds x {args.steps} steps per setting")
    for name, t in times.items():
        med, mean = statistics.median(t), statistics.fmean(t)
        print(f"{name:<5} median {med * 1e3:7.2f} ms  mean {mean * 1e3:7.2f} ms  "
              f"overhead (mean) {100 * (mean / statistics.fmean(times['off']) - 1):+6.1f}%  "
              f"(median) {100 * (med / base - 1):+6.1f}%")
    over = {k: statistics.median(times[k]) / base - 1 for k in ("k=1", "k=10")}
    write_targets(args.json, [
        target("diagnostics every 10 steps", f"{over['k=10']:+.1%} step time (median)", "< 2%", over["k=10"] < 0.02),
        target("diagnostics every step", f"{over['k=1']:+.1%} step time (median)", "< 10%", over["k=1"] < 0.10)])


if __name__ == "__main__":
    main()
