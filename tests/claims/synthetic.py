"""Synthetic study stores for the training claims: run directories with exactly the files the
claims read (config.json, metrics.jsonl, summary.json, diagnostics.jsonl), built from a
per-cell description, and a study context that serves them instead of training."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from normlab.config import RunConfig
from normlab.study.store import TrialRecord

SEEDS = 4
INIT = math.log(65)             # the uniform prediction's loss, the reference of every gain
JITTER = (-1.0, 1.0, -0.5, 0.5)  # mean 0: a cell with sigma * JITTER straddles its centre


def jit(seed: int, sigma: float) -> float:
    return JITTER[seed] * sigma


def write_run(d: Path, params: dict[str, Any], q: dict[str, Any]) -> None:
    """A run directory whose files give the quantities in ``q``: best / final val loss, status,
    first eval after step 0, logged pre-clip gradient norms, diagnostics lines, deletion."""
    d.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"optim": {"lr": params.get("optim.lr", 1e-3)}}
    (d / "config.json").write_text(RunConfig.from_dict(data).to_json())
    lines = [{"step": 0, "val/loss": INIT}]
    if "first" in q:
        lines.append({"step": 100, "val/loss": q["first"]})
    lines += [{"step": i + 1, "train/loss": 3.0, "grad_norm": g} for i, g in enumerate(q.get("grad", []))]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    status = q.get("status", "completed")
    summary = {"status": status, "best_val_loss": q.get("best"), "final_val_loss": q.get("final", q.get("best"))}
    (d / "summary.json").write_text(json.dumps(summary))
    if "diag" in q:
        (d / "diagnostics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in q["diag"]))
    if "deletion" in q:
        (d / "deletion.json").write_text(json.dumps(q["deletion"]))


Cell = tuple[str, dict[str, Any], Callable[[int], dict[str, Any]]]  # study, params, seed -> quantities


@dataclass
class FakeContext:
    """Serves synthetic trials per study (the interface claims use: ``trials(name)``)."""

    root: Path
    cells: list[Cell]

    def __post_init__(self) -> None:
        self.by_study: dict[str, list[TrialRecord]] = {}
        for i, (study, params, fn) in enumerate(self.cells):
            for s in range(SEEDS):
                p = {**params, "seed": s}
                d = self.root / study / f"c{i}-s{s}"
                q = fn(s)
                write_run(d, p, q)
                summary = json.loads((d / "summary.json").read_text())
                self.by_study.setdefault(study, []).append(
                    TrialRecord(f"{study}-{i}-{s}", p, q.get("status", "completed"), summary, d, None))

    def trials(self, name: str) -> list[TrialRecord]:
        return self.by_study[name]


def gain_run(g: float) -> dict[str, Any]:
    """A completed run whose gain (best val loss - loss at init) is ``g``."""
    return {"best": INIT + g}


def diag_lines(first: dict[str, Any], last: dict[str, Any], n: int = 4) -> list[dict[str, Any]]:
    """n diagnostic lines: the first with ``first``'s values, the rest with ``last``'s."""
    return [{"step": 0, **first}] + [{"step": 10 * (i + 1), **last} for i in range(n - 1)]


def deletion_from_file(ctx: Any, t: Any) -> float | None:  # noqa: ARG001 (the measurement's signature)
    """Stand-in for the layer-deletion measurement (the real one runs in the smoke end-to-end test)."""
    p = Path(t.run_dir) / "deletion.json"
    return json.loads(p.read_text()) if p.exists() else None
