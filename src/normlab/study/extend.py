"""Extending stalled trials to a longer horizon by resuming them, not rerunning them.

With a constant lr after warm-up a longer run's first steps are the shorter run, so a trial
that is still on the unigram plateau at its last step is resumed from its final checkpoint
(``run_training(resume=True, steps=H)``) to the next horizon of :func:`stages`: double the
last one, up to the spec's ``extend_stalled_to``. It stops as soon as it leaves the plateau (or
diverges) at a stage, or at the long horizon. The store's record of the trial (its status and
summary at the study's own ``train.steps``) is left as it was, so every verdict at the base
horizon stands; the longer horizons are read from the run's metrics.jsonl
(``normlab.study.horizons``), and each extension is an ``extended`` event in the store's log.

**Cost.** Only stalled trials are extended: at most (stalled trials) x (extend_stalled_to -
train.steps) steps more, less for each that leaves the plateau at an earlier stage (the
sizing of the presets is in docs/studies.md). Rerunning the same command resumes: an
extension that was killed continues from its checkpoint, and a finished one is not repeated.

**Stages.** :func:`extend_to` resumes the trials it is given, whatever their outcome, to one
next stage of a staged study (``StudySpec.stages``); the claims' settling engine
(``claims/settling.py``) chooses them: the runs of the parts that have not settled.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Iterator

from normlab.core.errors import UserError
from normlab.run.dir import RunDir
from normlab.study.at_horizon import reached
from normlab.study.horizons import outcome_at, trajectory
from normlab.study.outcome import STALL_MARGIN, trial_ces
from normlab.study.store import Store, TrialRecord
from normlab.train import run_training

log = logging.getLogger(__name__)


def stages(start: int, to: int) -> list[int]:
    """The horizons a run stalled at step ``start`` is resumed to: 2 start, 4 start, ... then ``to``."""
    out, h = [], start
    while h * 2 < to:
        h *= 2
        out.append(h)
    return out + [to] if to > start else out


def stalled(trials: list[TrialRecord], to: int, margin: float = STALL_MARGIN) -> list[tuple[TrialRecord, int]]:
    """(trial, last step) of every completed trial still on the plateau at its last step, short of ``to``."""
    ces = trial_ces(trials)
    out = []
    for t in trials:
        if t.status != "completed" or t.id not in ces:
            continue
        tr = trajectory(t, ces[t.id], margin)
        if tr is not None and tr.last_step < to and outcome_at(tr, tr.last_step) == "stalls":
            out.append((t, tr.last_step))
    return out


def extend_run(run_dir: str, start: int, to: int, edge: float, threads: int = 1) -> dict[str, Any]:
    """Resume the run in ``run_dir`` stage by stage until its best validation loss is below
    ``edge`` (it left the plateau), it diverges, or it reaches ``to``. Returns where it stopped."""
    import torch

    torch.set_num_threads(threads)
    summary: dict[str, Any] = {}
    for h in stages(start, to):
        summary = run_training(None, run_dir, resume=True, steps=h, quiet=True)
        best = summary.get("best_val_loss")
        if summary.get("status") != "completed" or (isinstance(best, (int, float)) and best < edge):
            break
    return {"steps": summary.get("steps"), "status": summary.get("status"), "best_val_loss": summary.get("best_val_loss")}


def extend_stalled(store_root: str | Path, to: int, *, workers: int = 1, threads: int = 1, display: Any = None,
                   margin: float = STALL_MARGIN) -> int:
    """Extend every stalled trial of the store to ``to`` (see the module doc); returns how many
    were extended. ``display``: a ``normlab.core.progress.Progress`` told of each one."""
    store = Store(store_root)
    try:
        todo = stalled(store.trials(), to, margin)
        ces = trial_ces([t for t, _ in todo])
    finally:
        store.close()
    if not todo:
        return 0
    if display is not None:
        display.note(f"{len(todo)} trial(s) still on the unigram plateau at their last step: resuming them, "
                     f"at most to step {to}")
        display.add("extension", len(todo))
    jobs = [(str(t.run_dir), start, to, ces[t.id].unigram - margin, threads) for t, start in todo]
    return _noted(store_root, todo, _map(_one, jobs, workers), "", display)


def _noted(store_root: str | Path, todo: list[tuple[TrialRecord, int]], results: Iterator[Any], stage: str,
           display: Any) -> int:
    """An ``extended`` event in the store for each resumed trial as its result comes in (a run
    another process holds is left to it); returns how many were extended."""
    done = 0
    for (t, start), res in zip(todo, results):
        store = Store(store_root)
        try:
            if isinstance(res, UserError):  # another process holds the run: it extends it
                log.info("extension of %s skipped: %s", t.id, res)
            else:
                store.note(t.id, "extended", f"from step {start} to {res['steps']}{stage}: {res['status']}, best val "
                                             f"loss {res['best_val_loss']}")
                done += 1
        finally:
            store.close()
        if display is not None:
            display.advance("extension")
    return done


def to_stage(trials: list[TrialRecord], to: int) -> list[tuple[TrialRecord, int]]:
    """(trial, last step) of each trial whose run can be resumed and has not reached ``to``: a
    completed trial whose run has not diverged since (a diverged run has no finite weights)."""
    out = []
    for t in trials:
        own = RunDir(t.run_dir).summary() or {}
        if t.status != "completed" or own.get("status") == "diverged" or own.get("diverged_at_step") is not None:
            continue
        last = reached(t)
        if last is not None and last < to:
            out.append((t, last))
    return out


def extend_to(store_root: str | Path, ids: list[str], to: int, *, workers: int = 1, threads: int = 1,
              display: Any = None) -> int:
    """Resume the trials ``ids`` of the store to step ``to`` (one stage), each an ``extended``
    event; returns how many were resumed. A trial already there, or diverged, is left as it is,
    so rerunning after an interruption repeats no finished extension."""
    store = Store(store_root)
    try:
        want = set(ids)
        todo = to_stage([t for t in store.trials() if t.id in want], to)
    finally:
        store.close()
    if not todo:
        return 0
    if display is not None:
        display.add("extension", len(todo))
    results = _map(_stage, [(str(t.run_dir), to, threads) for t, _ in todo], workers)
    return _noted(store_root, todo, results, f" (stage {to})", display)


def _stage(job: tuple[str, int, int]) -> dict[str, Any] | UserError:
    import torch

    run_dir, to, threads = job
    torch.set_num_threads(threads)
    try:
        s = run_training(None, run_dir, resume=True, steps=to, quiet=True)
    except UserError as e:
        return e
    return {"steps": s.get("steps"), "status": s.get("status"), "best_val_loss": s.get("best_val_loss")}


def _one(job: tuple[str, int, int, float, int]) -> dict[str, Any] | UserError:
    try:
        return extend_run(*job)
    except UserError as e:
        return e


def _map(fn: Callable[[Any], Any], jobs: list[Any], workers: int) -> Iterator[Any]:
    """``fn`` of each job in this process (one worker) or in spawned processes (spawn: a fork
    would inherit torch's thread pool), each result as it comes, in the jobs' order."""
    if workers <= 1 or len(jobs) == 1:
        yield from (fn(j) for j in jobs)
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=mp.get_context("spawn")) as pool:
        yield from pool.map(fn, jobs)


__all__ = ["extend_run", "extend_stalled", "extend_to", "stages", "stalled", "to_stage"]
