"""A trial read at step H: its run as if it had stopped there.

With a constant lr after warm-up, a run resumed past step H logged up to H exactly what a run of
H steps logs (``study/extend.py``; ``StudySpec.stages`` refuses any other schedule). So reading a
staged study at a stage H is reading its runs' files up to step H. :func:`read_at` writes that
view of a run, ``ROOT/<trial id>/`` (``RunDir.write_cut``: config.json and data.json, the logs
without their lines after H, and :func:`summary_at`'s summary.json), and returns the trial with
that folder as its run directory and that summary. Every reader of a run (``outcome.classify``,
``horizons.trajectory``, the claims' per-trial quantities, the in-training diagnostics) then reads
it at H without knowing: best and final validation loss by H, the last diagnostics line up to
H, the outcome at H. A view has no checkpoint (a run keeps its last step's only): what reads a
checkpoint cannot be read at a horizon, and the claims' horizon context refuses it.

A run that stopped before H (it diverged, or nobody resumed it) is read where it stopped, its
summary's ``steps`` saying where; one that diverged after H is a completed run at H.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from normlab.run.dir import RunDir
from normlab.study.outcome import FINAL
from normlab.study.store import TrialRecord


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def reached(trial: TrialRecord) -> int | None:
    """The last step the trial's run has trained to: its summary.json's steps (extended runs
    rewrite it), else its last logged step (a run killed while resumed has no summary), else the
    store's record; None when nothing says."""
    run = RunDir(trial.run_dir)
    own = run.summary() or {}
    if isinstance(own.get("steps"), int):
        return int(own["steps"])
    steps = [r["step"] for r in run.metrics() if isinstance(r.get("step"), int)]
    if steps:
        return max(steps)
    got = (trial.summary or {}).get("steps")
    return int(got) if isinstance(got, int) else None


def summary_at(trial: TrialRecord, horizon: int) -> dict[str, Any]:
    """The summary a run of ``horizon`` steps would have written: status (diverged by then, else
    completed), steps, best and final validation loss over the evaluations after step 0 up to
    it (as the training loop keeps them, ``train.lifecycle.validated``), and where it diverged."""
    run = RunDir(trial.run_dir)
    own = run.summary() or trial.summary or {}
    last_step = reached(trial) or horizon
    got = own.get("diverged_at_step")
    div = int(got) if isinstance(got, (int, float)) else None
    if div is None and (own.get("status") == "diverged" or trial.status == "diverged"):
        div = last_step
    diverged = div is not None and div <= horizon
    best: float | None = None
    last: float | None = None
    for r in run.metrics():
        step, v = r.get("step"), _number(r.get("val/loss"))
        if not isinstance(step, int) or not 0 < step <= horizon or v is None:
            continue
        last = v
        if best is None or v < best:  # as the loop keeps it (a NaN first value stays best: it diverged)
            best = v
    return {"status": "diverged" if diverged else "completed",
            "steps": last_step if diverged else min(horizon, last_step),
            "best_val_loss": best, "final_val_loss": None if diverged else last,
            "diverged_at_step": div if diverged else None, "read_at": horizon}


def read_at(trial: TrialRecord, horizon: int, root: str | Path) -> TrialRecord:
    """``trial`` read at step ``horizon``: its view written to ``root/<id>`` (rewritten on each
    call: a run's lines up to ``horizon`` never change, so the view is the same whenever it is
    made once the run has passed it). A trial without an outcome (failed, unfinished) is
    returned as it is: it has no run to read."""
    if trial.status not in FINAL or not RunDir(trial.run_dir).is_run():
        return trial
    summary = summary_at(trial, horizon)
    view = RunDir(Path(root) / trial.id)
    view.write_cut(RunDir(trial.run_dir), horizon, summary)
    return dataclasses.replace(trial, status=summary["status"], summary=summary, run_dir=view.path)


__all__ = ["reached", "read_at", "summary_at"]
