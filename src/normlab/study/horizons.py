"""Outcomes at several horizons: a trial judged at each of its evaluations, not only at its end.

``normlab.study.outcome`` judges a trial at its last step (its *horizon*). A run that sits on the
unigram plateau at step 200 may leave it at step 300 (docs/studies.md, "Outcomes at several
horizons"), so "stalls" only ever means "still on the plateau at horizon H". This module reads
a trial's validation losses from its metrics.jsonl and applies the same rule at any H:

* ``diverged`` by H: the run stopped as diverged at or before H, a validation loss up to H is
  not finite, or the last one up to H is above ln V;
* ``stalls`` at H: no validation loss up to H is below the unigram cross-entropy minus the
  margin;
* ``trains`` by H: otherwise. The step of its first validation loss below that edge is where
  it *left the plateau* (``Trajectory.left_at``).

At the trial's last step this is ``outcome.classify`` (tests/study/test_horizons.py checks it on
real runs). Beyond the last step a run reached, a run that trained still counts as trained by
H (it left the plateau before), a diverged one stays diverged, and a run that stopped on the
plateau has no outcome at H: nothing says what it would have done (``study.extend`` resumes
such runs to a longer horizon).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from normlab.data.unigram import DataCE
from normlab.run.dir import RunDir
from normlab.study.outcome import FINAL, OUTCOMES, STALL_MARGIN, CellKey, cell_key
from normlab.study.store import TrialRecord


@dataclass(frozen=True)
class Trajectory:
    """A trial's validation losses by step (the later line wins where a resumed run logged a
    step twice), the last step it reached, where it diverged, and where it left the plateau."""

    evals: tuple[tuple[int, float], ...]
    last_step: int
    diverged_at: int | None
    left_at: int | None
    edge: float       # the unigram cross-entropy minus the margin: "trains" is below it
    uniform: float    # ln V: a last validation loss above it is a divergence


def trajectory(trial: TrialRecord, ce: DataCE, margin: float = STALL_MARGIN) -> Trajectory | None:
    """The trial's trajectory from its run's metrics.jsonl; None when it has no outcome (not
    finished, failed) or never validated."""
    if trial.status not in FINAL:
        return None
    run = RunDir(trial.run_dir)
    vals: dict[int, float] = {}
    last = 0
    for line in run.metrics():
        step = line.get("step")
        if not isinstance(step, int):
            continue
        last = max(last, step)
        v = line.get("val/loss")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            vals[step] = float(v)
    s = run.summary() or {}
    div = s.get("diverged_at_step")
    if div is None and (trial.summary or {}).get("diverged_at_step") is not None:
        div = (trial.summary or {})["diverged_at_step"]
    if div is None and (trial.status == "diverged" or s.get("status") == "diverged"):
        div = last
    if not vals:
        return None
    edge = ce.unigram - margin
    evals = tuple(sorted(vals.items()))
    left = next((st for st, v in evals if math.isfinite(v) and v < edge), None)
    return Trajectory(evals, max(last, evals[-1][0]), None if div is None else int(div), left, edge, ce.uniform)


def outcome_at(tr: Trajectory, horizon: int) -> str | None:
    """The outcome (``OUTCOMES``) at step ``horizon``, or None: no evaluation after step 0 yet by
    then, or the run stopped on the plateau before it."""
    if tr.diverged_at is not None and tr.diverged_at <= horizon:
        return "diverged"
    upto = [v for st, v in tr.evals if 0 < st <= horizon]  # an evaluation at step 0 is the init's, not training's
    if not upto:
        return None
    if any(not math.isfinite(v) for v in upto) or upto[-1] > tr.uniform:
        return "diverged"
    if min(upto) < tr.edge:
        return "trains"
    return "stalls" if horizon <= tr.last_step else None


def horizons(trials: Iterable[TrialRecord], extra: Iterable[int] = ()) -> list[int]:
    """The horizons a study can be read at: each finished trial's length in the store (the
    study's base horizon), the length of every extended run (its own summary.json), and ``extra``."""
    got = set(int(h) for h in extra)
    for t in trials:
        if t.status != "completed":
            continue
        for s in (t.summary or {}, RunDir(t.run_dir).summary() or {}):  # the store's, the run's (extended)
            steps = s.get("steps")
            if isinstance(steps, int) and steps > 0:
                got.add(steps)
    return sorted(got)


@dataclass
class HorizonCell:
    """One map cell read at several horizons: per horizon, how many seeds train, stall or
    diverge, and how many have no outcome there (stopped on the plateau before it); per seed,
    the step at which it left the plateau (None: it never did, up to its last step)."""

    trial_ids: list[str] = field(default_factory=list)
    left_at: list[int | None] = field(default_factory=list)
    last_step: list[int] = field(default_factory=list)
    at: dict[int, dict[str, int]] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The cell as claims.json and the map page give it."""
        return {"trial_ids": self.trial_ids, "left_plateau_at": self.left_at, "last_step": self.last_step,
                "outcomes": {str(h): c for h, c in self.at.items()}}


def horizon_cells(trials: Iterable[TrialRecord], ce: DataCE, at: Iterable[int] | None = None,
                  margin: float = STALL_MARGIN) -> dict[CellKey, HorizonCell]:
    """Every (placement, lr, depth, warm-up) cell with its seeds' outcomes at each horizon of
    ``at`` (default: :func:`horizons` of the trials)."""
    trials = list(trials)
    hs = horizons(trials) if at is None else sorted(set(at))
    cells: dict[CellKey, HorizonCell] = {}
    for t in trials:
        tr = trajectory(t, ce, margin)
        if tr is None:
            continue
        cell = cells.setdefault(cell_key(t), HorizonCell(at={h: {**{o: 0 for o in OUTCOMES}, "unknown": 0}
                                                             for h in hs}))
        cell.trial_ids.append(t.id)
        cell.left_at.append(tr.left_at if tr.left_at is not None and tr.left_at <= tr.last_step else None)
        cell.last_step.append(tr.last_step)
        for h in hs:
            cell.at[h][outcome_at(tr, h) or "unknown"] += 1
    return cells


def trains_by(trials: Iterable[TrialRecord], ce: DataCE, horizon: int,
              margin: float = STALL_MARGIN) -> dict[CellKey, tuple[int, int]]:
    """(seeds that train by ``horizon``, seeds with an outcome there) per cell: what the
    critical-lr fits read (``normlab.study.frontier``). Diverged seeds count as not training;
    seeds without an outcome at the horizon are left out."""
    out: dict[CellKey, tuple[int, int]] = {}
    for k, c in horizon_cells(trials, ce, [horizon], margin).items():
        n = c.at[horizon]
        out[k] = (n["trains"], n["trains"] + n["stalls"] + n["diverged"])
    return out


__all__ = ["HorizonCell", "Trajectory", "horizon_cells", "horizons", "outcome_at", "trains_by", "trajectory"]
