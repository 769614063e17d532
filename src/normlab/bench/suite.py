"""The whole comparison: every size x peer in one process, printed as a table with ratios.

Targets (issue 8) printed next to the numbers: normlab >= 1.3x the fastest library peer at
tiny, >= 1.0x at baby (and MFU >= 85% of the measured float32 peak), >= 1.2x at deep. And
(issue 23) the abstraction costs nothing: normlab's plain-AdamW step at tiny >= 1.0x the
hand-written Pre-LN GPT (``hand-pre``) measured in the same windows.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

import torch

from normlab.bench.harness import Result, matmul_peak, measure_many
from normlab.bench.peers import SIZES, expand

TARGETS = {"tiny": 1.3, "baby": 1.0, "deep": 1.2}
MFU_TARGET = {"baby": 0.85}
HAND_TARGET = {"tiny": 1.0}  # normlab (plain AdamW) / hand-pre (plain AdamW), same run


def machine() -> dict[str, Any]:
    import os

    return {"torch": torch.__version__, "python": platform.python_version(), "cpu": platform.processor(),
            "cores": os.cpu_count(), "threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def run_suite(sizes: list[str], peers: list[str], device: str = "cpu", dtype: str = "float32",
              repeats: int = 5, window: int = 10, warmup: int = 5, out: Path | None = None,
              echo: Any = print) -> dict[str, Any]:
    """Measure, print and return {"machine", "peak_gflops", "results", "notes", "verdicts"}."""
    dev = torch.device(device)
    variants = expand(peers)
    for name in sizes:
        SIZES.get(name)
    peaks = {"float32": matmul_peak(torch.float32, dev), "bfloat16": matmul_peak(torch.bfloat16, dev)}
    info = machine()
    echo(f"machine: {json.dumps(info)}")
    echo(f"matmul peak 2048^3: float32 {peaks['float32']:.1f} GFLOP/s, bfloat16 {peaks['bfloat16']:.1f} GFLOP/s")
    echo("FLOPs/step = 3 x forward matrix products (linear layers, head, attention's T x T products), "
         "normlab.model.cost; MFU vs the peak of the dtype")
    echo(f"windows: {repeats} rounds x {window} steps per peer, interleaved, after {warmup} warm-up steps; "
         f"AdamW; {dtype}; {device}; RSS is the process peak after all peers are built")
    results: list[Result] = []
    notes: list[str] = []
    verdicts: list[dict[str, str]] = []
    for size in sizes:
        s = SIZES.get(size)
        echo(f"\n== {size}: {s.n_layer}L d={s.d_model} heads={s.n_head} ctx={s.context} batch={s.batch}")
        echo(f"{'peer':<18}{'params':>10}{'tok/s':>10}{'min-max':>18}{'GFLOP/s':>9}{'MFU':>7}"
             f"{'RSS MiB':>9}{'ratio':>7}  activation")
        rows: list[Result] = []
        for r in measure_many(variants, size, s, dev, dtype=dtype, warmup=warmup, repeats=repeats,
                              window=window, peak=peaks[dtype]):
            if isinstance(r, str):
                notes.append(r)
                echo(f"  note: {r}")
                continue
            rows.append(r)
        best = max((r.tokens_per_s for r in rows), default=0.0)
        for r in rows:
            echo(f"{r.peer:<18}{r.params:>10}{r.tokens_per_s:>10.0f}{f'{r.tps_min:.0f}-{r.tps_max:.0f}':>18}"
                 f"{r.gflops:>9.1f}{r.mfu:>7.0%}{r.peak_rss_mib:>9.0f}{r.tokens_per_s / best:>7.2f}  {r.activation}")
        hand = hand_ratio(rows)
        if hand is not None:
            echo(f"{size} shape: normlab / hand-written = {hand[0]:.2f}x (per round {hand[1]:.2f}-{hand[2]:.2f}; "
                 "plain AdamW for both, interleaved windows)")
        results += rows
        verdicts += _verdicts(size, rows)
    for v in verdicts:
        echo(verdict_line(v))
    report = {"machine": info, "device": device, "dtype": dtype, "peak_gflops": peaks,
              "results": [r.row() for r in results], "notes": notes, "verdicts": verdicts}
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def target(name: str, measured: str, goal: str, ok: bool | None) -> dict[str, str]:
    """One row of a targets table: what, the measured value, the goal, met / MISSED / n/a
    (the shape every script in benchmarks/ writes with --json and targets.py prints)."""
    return {"target": name, "measured": measured, "goal": goal,
            "verdict": "n/a" if ok is None else ("met" if ok else "MISSED")}


def hand_ratio(rows: list[Result]) -> tuple[float, float, float] | None:
    """Median tokens/s of ``normlab`` (plain AdamW) over ``hand-pre``'s, and the min and max
    of the same ratio round by round (both peers' windows of one round ran back to back);
    None without both rows."""
    by = {r.peer: r for r in rows}
    if "normlab" not in by or "hand-pre" not in by:
        return None
    a, b = by["normlab"], by["hand-pre"]
    rounds = [x / y for x, y in zip(a.windows, b.windows)] or [a.tokens_per_s / b.tokens_per_s]
    return a.tokens_per_s / b.tokens_per_s, min(rounds), max(rounds)


def _verdicts(size: str, rows: list[Result]) -> list[dict[str, str]]:
    """normlab's best variant vs the fastest library peer, and plain normlab vs the
    hand-written model, against the issues' targets."""
    out = []
    hand = hand_ratio(rows)
    if size in HAND_TARGET and hand is not None:
        out.append(target(f"{size} normlab vs hand-written Pre-LN (plain AdamW)",
                          f"{hand[0]:.2f}x (per round {hand[1]:.2f}-{hand[2]:.2f})",
                          f">= {HAND_TARGET[size]}x", hand[0] >= HAND_TARGET[size]))
    ours = [r for r in rows if r.peer.startswith("normlab")]
    theirs = [r for r in rows if not r.peer.startswith(("normlab", "hand-"))]
    goal = TARGETS.get(size, 1.0)
    if not ours or not theirs:
        return out + [target(f"{size} vs fastest peer", "no ratio (need normlab and a peer)", f">= {goal}x", None)]
    a, b = max(ours, key=lambda r: r.tokens_per_s), max(theirs, key=lambda r: r.tokens_per_s)
    ratio = a.tokens_per_s / b.tokens_per_s
    out += [target(f"{size} vs fastest peer",
                  f"{a.peer} {a.tokens_per_s:.0f} / {b.peer} {b.tokens_per_s:.0f} tok/s = {ratio:.2f}x "
                  f"(params {abs(a.params / b.params - 1):.1%} apart)", f">= {goal}x", ratio >= goal)]
    if size in MFU_TARGET:
        out.append(target(f"{size} MFU", f"{a.peer} {a.mfu:.0%}", f">= {MFU_TARGET[size]:.0%}",
                          a.mfu >= MFU_TARGET[size]))
    return out


def verdict_line(v: dict[str, str]) -> str:
    return f"{v['target']}: {v['measured']} (target {v['goal']}: {v['verdict']})"
