"""Shared by the benchmark scripts: the tiny run config (nanoGPT's CPU recipe shape) and the
target rows each script can write with ``--json`` (``targets.py`` collects them)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from normlab.bench.suite import target
from normlab.run.presets import PRESETS
from normlab.run.resolve import RunConfig

__all__ = ["json_arg", "target", "tiny_run", "write_targets"]


def tiny_run(steps: int, seed: int = 1337, lr: float = 1e-3, warmup: int = 100, dtype: str = "float32") -> RunConfig:
    """nanogpt-cpu shape (4L, d=128, ctx 64, batch 12), ``steps`` long, CPU, no checkpoints mid-run."""
    cfg = PRESETS.get("nanogpt-cpu")()
    cfg.seed = seed
    cfg.optim.lr, cfg.optim.min_lr, cfg.optim.warmup_steps = lr, lr / 10, min(warmup, steps // 2)
    t = cfg.train
    t.steps, t.eval_every, t.eval_batches, t.log_every, t.checkpoint_every = steps, steps, 10, 10, 0
    t.device, t.dtype = "cpu", dtype
    return RunConfig.from_json(cfg.to_json())  # re-validated as a whole


def json_arg(ap: argparse.ArgumentParser) -> None:
    """The ``--json FILE`` option every target script takes."""
    ap.add_argument("--json", type=Path, help="write the target rows here (benchmarks/targets.py reads them)")


def write_targets(path: Path | None, rows: list[dict]) -> None:
    """Write ``rows`` (``target(...)`` dicts) as JSON to ``path`` (``--json``), for ``targets.py``."""
    if path is not None:
        path.write_text(json.dumps({"rows": rows}, indent=2) + "\n", encoding="utf-8")
