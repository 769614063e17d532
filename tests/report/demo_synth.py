"""Synthetic stores of the demo study (``pre-vs-post-demo``) with chosen per-seed losses, in the
store's and the run directory's own formats, so the page and its verdict read them as real."""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from pathlib import Path
from typing import Any, Union

STEPS, EVERY, WARMUP = 40, 5, 10
Ending = Union[tuple[float, float], str]  # (val loss at the early step, best val loss), or "diverged"


def demo_spec(steps: int = STEPS, warmup: int = WARMUP, seeds: int = 3) -> Any:
    """The smoke demo spec at ``steps`` steps, warm-up {0, ``warmup``} and ``seeds`` seeds."""
    from normlab.study.demo_preset import pre_vs_post_demo

    spec = pre_vs_post_demo("smoke")
    base = {**spec.base, "train": {**spec.base["train"], "steps": steps, "eval_every": EVERY}}
    return dataclasses.replace(spec, base=base, seeds=list(range(seeds)),
                               axes={**spec.axes, "optim.warmup_steps": [0, warmup]})


def val_curve(early: float, best: float, steps: int = STEPS) -> list[tuple[int, float]]:
    """Validation losses every EVERY steps: 4.2 falling linearly to ``early`` at step steps/2, then
    to ``best`` at the last step (so the best is the last value and the early value is exact)."""
    e = steps // 2
    out = []
    for s in range(EVERY, steps + 1, EVERY):
        v = 4.2 + (early - 4.2) * s / e if s <= e else early + (best - early) * (s - e) / (steps - e)
        out.append((s, v))
    return out


def write_run(d: Path, config_json: str, ending: Ending, steps: int = STEPS) -> str:
    """A run directory; returns its status (completed, or diverged: it stops at step steps/2)."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(config_json)
    (d / "env.json").write_text(json.dumps({"torch": "x", "device": "cpu"}))
    diverged = ending == "diverged"
    vals = dict(val_curve(3.0, 2.9, steps) if diverged else val_curve(*ending, steps))  # type: ignore[misc]
    last = steps // 2 if diverged else steps
    with (d / "metrics.jsonl").open("w") as fh:
        for s in range(1, last + 1):
            base = vals.get(s - s % EVERY, 4.2) if s >= EVERY else 4.2
            row: dict[str, Any] = {"step": s, "tokens": 256 * s, "train/loss": base + 0.05 * math.sin(s), "lr": 1e-3}
            if s in vals and s <= last:
                row["val/loss"] = vals[s]
            fh.write(json.dumps(row) + "\n")
    finite = [v for s, v in vals.items() if s <= last]
    summary = {"status": "diverged" if diverged else "completed", "steps": last, "best_val_loss": min(finite),
               "final_val_loss": None if diverged else finite[-1], "diverged_at_step": last if diverged else None,
               "wall_time_s": 1.0}
    (d / "summary.json").write_text(json.dumps(summary))
    return summary["status"]


def write_store(d: Path, endings: dict[tuple[str, int], list[Ending]], steps: int = STEPS,
                warmup: int = WARMUP) -> Path:
    """A finished demo store: for each (placement, warm-up) the listed seeds' endings."""
    from normlab.study.store_db import SCHEMA as _SCHEMA
    from normlab.study.store_db import SCHEMA_VERSION

    n = max(len(v) for v in endings.values())
    spec = demo_spec(steps, warmup, n)
    d.mkdir(parents=True, exist_ok=True)
    (d / "spec.json").write_text(json.dumps(spec.to_json_data()))
    con = sqlite3.connect(d / "study.sqlite")
    con.executescript(_SCHEMA)  # the store's own schema: the page reads through normlab.study.store
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    for t in spec.trials():
        key = (t.params["model.placement"], t.params["optim.warmup_steps"])
        seeds = endings.get(key, [])
        if t.params["seed"] >= len(seeds):
            continue  # fewer seeds in this arm: those trials never ran
        status = write_run(d / "runs" / t.id, t.config_json, seeds[t.params["seed"]], steps)
        con.execute("INSERT INTO trials (id, idx, params, config, status, attempts, worker, started_at, finished_at,"
                    " heartbeat, error, summary, run_dir) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (t.id, t.index, json.dumps(t.params), t.config_json, status, 1, "w0", 0.0, 1.0, 1.0, None,
                     (d / "runs" / t.id / "summary.json").read_text(), f"runs/{t.id}"))
    con.commit()
    con.close()
    return d
