"""The slurm executor: trials as Slurm job arrays through submitit, the driver the only writer
of the store.

The driver (``normlab study run --executor slurm``, on a login node or in a job of its own)
claims trials, renews their leases, submits each round of them as one job array (one trial,
or a pack of ``--batch`` K compatible ones, per array task), and records every outcome; jobs
never open the database (``normlab.study.slurm_job``), so SQLite stays on the driver's disk.

Exactly once (docs/studies.md, "Slurm"):

* a job that returns a result has it recorded by the driver; a job that stopped at a
  checkpoint (its time limit's warning, ``scancel``, preemption) returns "interrupted" and its
  trial is submitted again, to resume there;
* a job that ends without a result (killed, its node lost, cancelled before it started) is a
  death, not a failure: the trial goes back to the queue and resumes from its checkpoint
  when its run directory is shared; a job held after a failed launch is cancelled and
  resubmitted after ``slurm.stuck_s``;
* the driver killed and rerun reattaches to the jobs still queued or running (the ledger,
  ``normlab.study.slurm_queue``, and squeue) and adopts their trials instead of submitting
  them twice. Stopping the driver leaves its jobs running.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normlab.core import stopping
from normlab.core.errors import UserError
from normlab.core.fscheck import writable_dir
from normlab.core.fsutil import atomic_write_bytes
from normlab.run.dir import RunDir
from normlab.run.resolve import RunConfig
from normlab.study import shipping
from normlab.study.slurm_config import SlurmConfig
from normlab.study.slurm_job import job_trials, slurm_job
from normlab.study.slurm_queue import (
    HELD,
    IMPOSSIBLE,
    Ledger,
    SlurmUnreachable,
    array_index,
    result_of,
    scancel,
    squeue,
    started_tarball,
)
from normlab.study.slurm_script import make_executor, pack_size
from normlab.study.store import Lease, Store, worker_id
from normlab.study.worker import Heartbeat, WorkerOptions, batchable

UNREACHABLE_S = 600.0  # Slurm unreachable this long: stop (the jobs go on; a rerun reattaches)


@dataclass
class Flight:
    """One submitted array task and the trials it runs."""

    job: str
    token: str
    index: int
    claims: list[Lease]
    gone_since: float | None = None   # left the queue without a result file (yet)
    held_since: float | None = None   # pending under a reason that never starts by itself


def run_slurm(store_root: str | Path, opts: WorkerOptions, *, workers: int, address: str | None = None,
              options: Any = None) -> None:
    """Run the store's trials as Slurm jobs until all are final (``--executor slurm``)."""
    cfg = options if isinstance(options, SlurmConfig) else SlurmConfig()
    store = Store(store_root)
    root = store.root.resolve()
    ledger = Ledger(root)
    folder = writable_dir(cfg.folder or ledger.jobs_dir, "--slurm folder",
                          "give a folder the nodes see and this user can write: --slurm folder=DIR")
    k, said = pack_size([RunConfig.from_json(c) for c in store.unfinished_configs()], opts.batch, cfg)
    if said:
        print(f"normlab: {said}", file=sys.stderr)
    executor = make_executor(folder, cfg, opts.threads, k)
    study = {"name": store.spec.get("name"), "metric": store.spec.get("metric", "best_val_loss")}
    me = worker_id()
    beat = Heartbeat(root, [], opts.heartbeat_s)
    flights: list[Flight] = []
    try:
        with beat:
            flights = _reattach(store, ledger, me, opts)
            beat.items.extend((c.id, c.attempt) for f in flights for c in f.claims)
            unreachable_since = None
            while True:
                _submit(store, ledger, executor, me, opts, cfg, k, study, str(root), flights, beat, folder)
                if not flights:
                    if store.unfinished() == 0:
                        break
                    time.sleep(opts.poll_s)
                    continue
                try:
                    _poll(store, ledger, folder, me, opts, cfg, flights, beat)
                    unreachable_since = None
                except SlurmUnreachable as e:
                    unreachable_since = unreachable_since or time.monotonic()
                    if time.monotonic() - unreachable_since > UNREACHABLE_S:
                        raise UserError(f"--executor slurm: Slurm unreachable for {UNREACHABLE_S:g} s ({e}); "
                                        "its jobs go on; rerun the same command to reattach") from None
                if stopping.received() is not None:
                    raise KeyboardInterrupt
                time.sleep(opts.poll_s)
    except KeyboardInterrupt:
        if flights:
            names = ",".join(sorted({f.token for f in flights}))
            print(f"normlab: {len(flights)} Slurm job(s) stay queued or running; rerun the same command to "
                  f"reattach to them, or cancel them: scancel --name={names}", file=sys.stderr)
        raise
    finally:
        store.close()


def _reattach(store: Store, ledger: Ledger, me: str, opts: WorkerOptions) -> list[Flight]:
    """Adopt the trials of jobs an earlier driver submitted and whose outcome it did not record."""
    opened = ledger.open_jobs()
    if not opened:
        return []
    queued = squeue([o.token for o in opened])
    by_name = {(name, array_index(job)): job for job, (name, _) in queued.items()}
    flights = []
    for o in opened:
        job = o.job or by_name.get((o.token, o.index))
        if job is None:  # cut before sbatch (its trials are reclaimed as a dead driver's)
            ledger.close(None, o.token, o.index, "no job found: never submitted, or its id was not recorded")
            continue
        claims = [c for c in (store.adopt(t, a, me, opts.lease_s) for t, a in o.trials) if c is not None]
        if claims:
            flights.append(Flight(job, o.token, o.index, claims))
        elif not _still_running(store, o.trials):
            ledger.close(job, o.token, o.index, "its trials were recorded or claimed again")
    return flights


def _still_running(store: Store, trials: list[tuple[str, int]]) -> bool:
    running = {(t.id, t.attempts) for t in store.trials() if t.status == "running"}
    return any((t, a) in running for t, a in trials)


def _submit(store: Store, ledger: Ledger, executor: Any, me: str, opts: WorkerOptions, cfg: SlurmConfig, k: int,
            study: dict[str, Any], root: str, flights: list[Flight], beat: Heartbeat, folder: Path) -> None:
    """Claim packs for the free array slots and submit them as one job array."""
    packs: list[list[Lease]] = []
    while len(flights) + len(packs) < cfg.array_parallelism and stopping.received() is None:
        claims = store.claim_many(me, opts.lease_s, opts.retries, limit=k, fits=batchable if k > 1 else None)
        if not claims:
            break
        packs.append(claims)
        beat.items.extend((c.id, c.attempt) for c in claims)
    if not packs:
        return
    token = ledger.new_token()
    ledger.intend(token, [[(c.id, c.attempt) for c in p] for p in packs])
    executor.update_parameters(job_name=token)
    n = len(packs)
    try:
        started = {} if cfg.run_dirs == "shared" else _started([c for p in packs for c in p], folder)
        jobs = executor.map_array(slurm_job, [job_trials(p, started) for p in packs], [root] * n, [opts] * n,
                                  [study] * n, [cfg.run_dirs] * n)
    except Exception as e:  # sbatch refused: nothing was queued, the trials go back as they were
        for claims in packs:
            for c in claims:
                store.finish(c, me, summary={"status": "interrupted"}, retries=opts.retries)
                beat.items.remove((c.id, c.attempt))
        for i in range(n):
            ledger.close(None, token, i, f"sbatch refused: {e}")
        first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise UserError(f"--executor slurm: sbatch refused the job array ({first}); check the --slurm options "
                        "(--dry-run prints the job script)") from None
    ledger.submitted(token, [str(j.job_id) for j in jobs])
    flights += [Flight(str(j.job_id), token, i, p) for i, (j, p) in enumerate(zip(jobs, packs))]


def _started(claims: list[Lease], folder: Path) -> dict[str, str]:
    """The runs of ``claims`` begun by an earlier job (shipped back when it stopped at a checkpoint),
    tarred into the job folder, so that a job in node scratch resumes them: trial id -> path."""
    out = {}
    for c in claims:
        if RunDir(c.run_dir).is_run():
            path = started_tarball(folder, c.id, c.attempt)
            atomic_write_bytes(path, shipping.pack(c.run_dir))
            out[c.id] = str(path)
    return out


def _poll(store: Store, ledger: Ledger, folder: Path, me: str, opts: WorkerOptions, cfg: SlurmConfig,
          flights: list[Flight], beat: Heartbeat) -> None:
    """Record every job that left the queue; resubmit held ones; stop on impossible requests."""
    queued = squeue(sorted({f.token for f in flights}))
    now = time.monotonic()
    for f in list(flights):
        if f.job in queued:
            _, q = queued[f.job]
            if q.state == "PENDING" and q.reason in IMPOSSIBLE:
                _give_back(store, ledger, me, opts, flights, beat, f, f"cannot start: {q.reason}")
                scancel([f.job])
                raise UserError(f"--executor slurm: job {f.job} cannot start on this cluster ({q.reason}); "
                                "fix --slurm partition/time/gpus/account/qos/constraint and rerun")
            held = q.state == "PENDING" and any(q.reason.startswith(h) for h in HELD)
            f.held_since = (f.held_since or now) if held else None
            if f.held_since is not None and now - f.held_since > cfg.stuck_s:
                scancel([f.job])  # it leaves the queue without a result: released and resubmitted below
            continue
        got = result_of(folder, f.job)
        if got is None:
            f.gone_since = f.gone_since or now
            if now - f.gone_since < cfg.lost_grace_s:
                continue
            for c in f.claims:
                store.release(c, me, f"slurm job {f.job} ended without a result (cancelled, killed, timed out or "
                                     "its node lost); it resumes from its checkpoint", retries=opts.retries)
            why = "ended without a result"
        else:
            _record(store, me, opts, f, got)
            why = "recorded"
        for c in f.claims:  # the run so far, if one was sent: the store's run directory has it now
            started_tarball(folder, c.id, c.attempt).unlink(missing_ok=True)
        _drop(ledger, flights, beat, f, why)


def _record(store: Store, me: str, opts: WorkerOptions, f: Flight, got: tuple[str, Any]) -> None:
    kind, value = got
    if kind != "success" or not isinstance(value, list) or len(value) != len(f.claims):
        text = str(value).strip().splitlines()[-1] if str(value).strip() else kind
        for c in f.claims:
            store.finish(c, me, error=f"slurm job {f.job} failed: {text}", retries=opts.retries)
        return
    for c, (summary, error, packed, where) in zip(f.claims, value):
        refused = shipping.install(packed, c.run_dir, f"slurm job {f.job} on {where.get('host')}")
        if refused:
            summary, error = None, refused
        store.finish(c, me, summary=summary, error=error, retries=opts.retries,
                     note=f"slurm job {f.job} on {where.get('host')}")


def _give_back(store: Store, ledger: Ledger, me: str, opts: WorkerOptions, flights: list[Flight],
               beat: Heartbeat, f: Flight, why: str) -> None:
    for c in f.claims:
        store.finish(c, me, summary={"status": "interrupted"}, retries=opts.retries)
    _drop(ledger, flights, beat, f, why)


def _drop(ledger: Ledger, flights: list[Flight], beat: Heartbeat, f: Flight, why: str) -> None:
    ledger.close(f.job, f.token, f.index, why)
    flights.remove(f)
    for c in f.claims:
        if (c.id, c.attempt) in beat.items:
            beat.items.remove((c.id, c.attempt))
