"""Synthetic producer outputs in the exact contract formats, with known values."""

from __future__ import annotations

import csv
import json
import math
import sqlite3
from pathlib import Path

STEPS = [0, 10, 20, 30, 40]


def loss_at(placement: str, seed: int, step: int, lr: float = 1e-3, warmup: int = 10) -> float:
    """A known curve: post starts higher and decays slower; a larger lr decays faster, warm-up
    delays the decay a little, and each seed sits a little higher than the last. Every such run
    ends below the unigram loss of Tiny Shakespeare (3.347) by more than the lab's stall margin,
    so it trains by ``normlab.study.outcome``'s rule, as the pages judge it."""
    base = 4.2 if placement == "post" else 4.0
    tau = (60 if placement == "post" else 40) * (1e-3 / lr) ** 0.3
    return base * math.exp(-max(step - warmup / 4, 0) / tau) + 0.03 * seed + 0.5


def stalled_loss(step: int) -> float:
    """A seed that only learns the unigram statistics: down to about 3.3, then flat."""
    return 3.3 + 0.9 * math.exp(-step / 5)


def write_run(d: Path, placement: str = "pre", seed: int = 0, lr: float = 1e-3, warmup: int = 10,
              diverged: bool = False, stalled: bool = False) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    cfg = {"model": {"placement": placement, "n_layer": 2, "d_model": 16, "qk_norm": None},
           "optim": {"lr": lr, "warmup_steps": warmup}, "train": {"steps": 40}, "seed": seed, "name": ""}
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "env.json").write_text(json.dumps({"torch": "x", "device": "cpu"}))
    with (d / "metrics.jsonl").open("w") as fh:
        for s in STEPS:
            if diverged and s > 30:
                break  # a diverged run stops logging where it stopped
            loss = stalled_loss(s) if stalled else loss_at(placement, seed, s, lr, warmup)
            row = {"step": s, "tokens": s * 256, "train/loss": loss,
                   "lr": lr * min(1.0, (s + 1) / max(warmup, 1)), "grad_norm": 1.0 + s / 100 + seed,
                   "time/step_s": 0.01, "tokens_per_s": 1000.0}
            if s % 20 == 0:
                row["val/loss"] = loss + 0.1
            fh.write(json.dumps(row) + "\n")
        fh.write('{"step": 50, "train/lo')  # a torn last line must be ignored
    curve = stalled_loss if stalled else (lambda s: loss_at(placement, seed, s, lr, warmup))
    best = min(curve(s) + 0.1 for s in (0, 20, 40))
    summary = {"status": "diverged" if diverged else "completed", "steps": 40, "best_val_loss": best,
               "final_val_loss": None if diverged else curve(40) + 0.1,
               "diverged_at_step": 30 if diverged else None, "wall_time_s": 1.5, "tokens_per_s": 1000.0}
    (d / "summary.json").write_text(json.dumps(summary))
    with (d / "diagnostics.jsonl").open("w") as fh:
        for s in (0, 20, 40):
            fh.write(json.dumps({"step": s, "grad_norm": [1.0 + s, 2.0 + s], "stream_rms/layer1": 1.0 + s,
                                 "stream_rms/layer2": 3.0 + s}) + "\n")
    return d


def grad(placement: str, L: int, layer: int, seed: int) -> float:
    """Known per-layer grad norms: post rises with layer, pre flat-ish and ~ 1/sqrt(L)."""
    if placement == "post":
        return 2.0 * (1 + layer) + 0.1 * seed
    return 4.0 / math.sqrt(L) + 0.1 * seed


def write_probe(d: Path, depths=(2, 4, 8), seeds=(0, 1)) -> Path:
    """probe.csv rows for the last block's W_2 and the whole block, and a summary.json in the
    probe's format: w2_slope pooled over seeds (numpy's least squares), a Spearman of -1 as
    the probe's float arithmetic writes it."""
    import numpy as np

    d.mkdir(parents=True, exist_ok=True)
    with (d / "probe.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["placement", "init", "n_layer", "d_model", "seed", "layer", "sublayer", "param", "metric", "value"])
        for pl in ("post", "pre"):
            for L in depths:
                for s in seeds:
                    for layer in range(1, L + 1):
                        w.writerow([pl, "xavier", L, 16, s, layer, "ffn", "W_2", "grad_norm", grad(pl, L, layer, s)])
                        w.writerow([pl, "xavier", L, 16, s, layer, "block", "all", "grad_norm",
                                    1.5 * grad(pl, L, layer, s)])
    fits = {}
    for pl in ("post", "pre"):
        x = np.log([L for L in depths for _ in seeds])
        y = np.log([grad(pl, L, L, s) for L in depths for s in seeds])
        a, b = np.polyfit(x, y, 1)
        r = y - (a * x + b)
        se = math.sqrt(float(r @ r) / (len(x) - 2) / float(((x - x.mean()) ** 2).sum()))
        fits[pl] = {"slope": float(a), "stderr": se, "intercept": float(b), "n": len(x)}
    summary = {"w2_slope": fits, "grad_spearman": {"pre": {str(max(depths)): -0.9999999999999999}}}
    (d / "summary.json").write_text(json.dumps(summary))
    (d / "probe_config.json").write_text(json.dumps({"depths": list(depths), "init": "xavier", "d_model": 16}))
    return d


def write_store(d: Path, placements=("post", "pre"), lrs=(1e-3, 3e-3), warmups=(0, 10), seeds=(0, 1),
                stall: tuple[str, float, int, int] | None = None) -> Path:
    """A pre-vs-post-like store; post at the largest lr without warm-up diverges. ``stall`` =
    (placement, lr, warm-up, seed) names one trial that stalls near 3.3 while its siblings train."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "spec.json").write_text(json.dumps({"name": "pre-vs-post", "scientific": ["model.placement"],
                                             "nuisance": ["optim.lr", "optim.warmup_steps", "seed"]}))
    from normlab.study.store_db import SCHEMA as _SCHEMA
    from normlab.study.store_db import SCHEMA_VERSION

    con = sqlite3.connect(d / "study.sqlite")
    con.executescript(_SCHEMA)  # the store's own schema: the report reads through normlab.study.store
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    i = 0
    for pl in placements:
        for lr in lrs:
            for wu in warmups:
                for s in seeds:
                    tid = f"t{i:04d}"
                    i += 1
                    div = pl == "post" and lr == max(lrs) and wu == 0
                    run = write_run(d / "runs" / tid, pl, s, lr, wu, diverged=div, stalled=stall == (pl, lr, wu, s))
                    params = {"model.placement": pl, "optim.lr": lr, "optim.warmup_steps": wu, "seed": s}
                    con.execute("INSERT INTO trials (id, idx, params, config, status, attempts, worker, started_at,"
                                " finished_at, heartbeat, error, summary, run_dir) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", (
                        tid, i, json.dumps(params), (run / "config.json").read_text(),
                        "diverged" if div else "completed", 1, "w0", 0.0, 1.0, 1.0, None,
                        (run / "summary.json").read_text(), f"runs/{tid}"))
    con.commit()
    con.close()
    return d
