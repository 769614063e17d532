"""What one Slurm job runs: its trial (or its pack of trials), never the store.

The driver (``normlab.study.slurm``) pickles :func:`slurm_job` and its arguments through
submitit; the job trains each trial in its run directory when the node sees the store's
filesystem, otherwise in node scratch (starting from the run so far, which the driver put in
the job folder, when an earlier job stopped it at a checkpoint), and returns one
:data:`Outcome` per trial, which submitit writes to the job folder for the driver to record.
The job opens no database.

Signals: Slurm warns a job ``slurm.signal_s`` before its time limit with SIGUSR2 (submitit's
``--signal``), and ends it (``scancel``, the limit itself, preemption) with SIGTERM. Both
stop the trial at its next step with a checkpoint, as Ctrl-C does a local run; the job then
returns ``{"status": "interrupted"}`` and the driver submits it again, to resume there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from normlab.core import stopping
from normlab.core.fsutil import append_jsonl
from normlab.run.dir import RunDir
from normlab.study import shipping
from normlab.study.store import Lease
from normlab.study.worker import WorkerOptions, run_claimed, run_claimed_batch, study_env

# (summary, error, shipped run or None, where it ran) for one trial
Outcome = tuple["dict[str, Any] | None", "str | None", "bytes | None", "dict[str, Any]"]


@dataclass(frozen=True)
class JobTrial:
    """What a job needs of one claimed trial; the store and its spec stay with the driver."""

    id: str
    attempt: int
    params: dict[str, Any]
    config_json: str
    run_dir: str
    started: str | None = None  # the run so far, tarred in the job folder, for a job in node scratch


def job_trials(claims: list[Lease], started: dict[str, str] | None = None) -> list[JobTrial]:
    """What a job needs of ``claims``; ``started``: trial id -> the tarball of its run so far."""
    return [JobTrial(c.id, c.attempt, dict(c.params), c.config_json, str(c.run_dir), (started or {}).get(c.id))
            for c in claims]


def slurm_job(trials: list[JobTrial], store_root: str, opts: WorkerOptions, study: dict[str, Any],
              run_dirs: str) -> list[Outcome]:
    """Train ``trials`` (one, or a pack of fresh compatible ones) in this job; one outcome each.

    ``run_dirs``: "shared" trains in the trials' run directories, "local" in node scratch
    (shipped back), "auto" in the run directories when this node sees ``store_root``.
    ``study``: the study's name and metric, for the trials' loggers (``study_env``)."""

    shared = run_dirs == "shared" or (run_dirs == "auto" and Path(store_root).is_dir())
    scratch = None if shared else shipping.scratch_dir()
    targets = [Path(t.run_dir) if scratch is None else scratch / t.id for t in trials]
    claims = [Lease(t.id, t.attempt, t.params, t.config_json, target) for t, target in zip(trials, targets)]
    try:
        with _warning_stops(), stopping.handling(_note), contextlib.ExitStack() as locks:
            for target in targets:
                busy = locks.enter_context(shipping.exclusive(target, opts.lease_s))
                if busy:
                    return [(None, busy, None, {}) for _ in trials]
            if scratch is not None:  # a run stopped at a checkpoint in an earlier job resumes from it here
                for t, target in zip(trials, targets):
                    if t.started:
                        shipping.unpack_run(Path(t.started).read_bytes(), target)
            wheres = [_record_job(target, shared) for target in targets]
            with study_env(study, claims):
                results = run_claimed_batch(claims, opts) if len(claims) > 1 else [run_claimed(claims[0], opts)]
        packs = [shipping.pack(t) if scratch is not None and t.exists() else None for t in targets]
        return [(s, e, p, w) for (s, e), p, w in zip(results, packs, wheres)]
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _note(signum: int) -> None:
    """A stop signal before training began is only noted: the loop sees it and stops at once."""


@contextlib.contextmanager
def _warning_stops() -> Iterator[None]:
    """While inside, Slurm's warning signal (SIGUSR2) asks the trial to stop as SIGTERM does.

    submitit binds SIGUSR2 to its own requeue; this job is resubmitted by the driver instead,
    which then knows where the trial stopped, so the warning is turned into the lab's stop."""

    def relay(signum: int, frame: Any) -> None:
        os.kill(os.getpid(), signal.SIGTERM)

    old = signal.signal(signal.SIGUSR2, relay)
    try:
        yield
    finally:
        signal.signal(signal.SIGUSR2, old)


def _record_job(run_dir: Path, shared: bool) -> dict[str, Any]:
    """Append where this attempt runs (Slurm job, host, pid, the checkpoint it starts from) to
    RUN/slurm_jobs.jsonl, and return it for the driver's event."""
    env = os.environ
    job = (f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}" if "SLURM_ARRAY_TASK_ID" in env
           else env.get("SLURM_JOB_ID"))
    where = {"job": job, "host": socket.gethostname(), "pid": os.getpid(), "shared_fs": shared,
             "checkpoint_step": shipping.checkpoint_step(run_dir), "at": time.time()}
    append_jsonl(RunDir(run_dir).slurm_jobs, where)  # one line per attempt, where it ran
    return where
