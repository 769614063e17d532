"""The worker loop of the local executor: claim a trial, run it under a heartbeat, record it.

Each worker is one process with its own SQLite connection. It keeps claiming until every
trial is final; while others still run trials it polls, so that a trial whose worker died
(SIGKILL, OOM) is reclaimed once its lease lapses and resumed from its checkpoint.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from normlab.core import stopping
from normlab.run.dir import RunDir
from normlab.run.resolve import RunConfig
from normlab.study.store import Lease, Store, worker_id
from normlab.study.trials import load_trial
from normlab.train.loggers import STUDY_ENV
from normlab.train.run import compatible, run_batched


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker runs trials; the same for every worker of one ``study run``."""

    threads: int = 1           # torch intra-op threads per trial
    lease_s: float = 60.0      # a running trial without heartbeat this long is presumed dead
    heartbeat_s: float = 5.0   # lease renewal period (must be well under lease_s)
    poll_s: float = 1.0        # wait between claims while other workers hold the last trials
    retries: int = 1           # failures before a trial is final 'failed' (from the spec)
    trial: str = "train"       # TRIALS name or "module:function" (from the spec)
    batch: int = 1             # up to this many compatible fresh trials trained as one batch
    #                            (0: the executor sizes its packs: slurm)


class Heartbeat:
    """Renews the leases of ``items`` every ``period`` seconds from a daemon thread."""

    def __init__(self, db_root: Path, items: list[tuple[str, int]], period: float) -> None:
        self.items, self.period = items, period
        self._root = db_root
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="study-heartbeat")

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        store = Store(self._root)  # a connection of its own: sqlite3 objects stay in one thread
        try:
            while not self._stop.wait(self.period):
                if self.items:
                    try:
                        store.heartbeat(list(self.items))
                    except Exception:  # a busy database must not kill the trial; next beat retries
                        pass
        finally:
            store.close()


@contextlib.contextmanager
def study_env(spec: dict[str, Any], claims: list[Lease]) -> Iterator[None]:
    """Name the study and each claimed trial's axis values for the trial's loggers (W&B group,
    TensorBoard hparams; ``normlab.train.loggers.study_context``), through the environment so
    that it also reaches a trial that starts processes of its own."""

    old = os.environ.get(STUDY_ENV)
    os.environ[STUDY_ENV] = json.dumps({"name": spec.get("name"), "metric": spec.get("metric", "best_val_loss"),
                                        "trials": {str(c.run_dir.resolve()): c.params for c in claims}},
                                       default=str)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(STUDY_ENV, None)
        else:
            os.environ[STUDY_ENV] = old


def run_claimed(claim: Lease, opts: WorkerOptions) -> tuple[dict[str, Any] | None, str | None]:
    """Run one claimed trial in this process: (summary, None) or (None, error text)."""
    import torch

    try:
        torch.set_num_threads(max(1, opts.threads))
        cfg = RunConfig.from_json(claim.config_json)
        # A run directory with config.json is a started run: resume it (run_training returns a
        # finished run's summary at once, so a trial killed after training is not retrained).
        resume = RunDir(claim.run_dir).is_run()
        summary = load_trial(opts.trial)(cfg, claim.run_dir, resume=resume)
        if not isinstance(summary, dict):
            return None, f"trial returned {type(summary).__name__}, not a summary dict"
        return _summary_json(summary), None
    except Exception as e:
        return None, _error_text(e)


def batchable(first_json: str, other_json: str) -> bool:
    """Whether two trials' configs can train as one batch (``normlab.train.batched``)."""

    return compatible([_config(first_json), _config(other_json)])


@functools.lru_cache(maxsize=512)
def _config(config_json: str):  # -> RunConfig; parsed once per claim scan, not once per comparison

    return RunConfig.from_json(config_json)


def run_claimed_batch(claims: list[Lease], opts: WorkerOptions) -> list[tuple[dict[str, Any] | None, str | None]]:
    """Train fresh claimed trials together (``run_batched``); one (summary, error) per claim.

    If the batch raises, every trial gets the error and is retried by the store, alone
    (retried trials never join a batch), so one bad trial cannot keep failing the others.
    """
    import torch

    try:
        torch.set_num_threads(max(1, opts.threads))
        cfgs = [RunConfig.from_json(c.config_json) for c in claims]
        summaries = run_batched(cfgs, [c.run_dir for c in claims], quiet=True)
        return [(_summary_json(s), None) for s in summaries]
    except Exception as e:
        err = f"batch of {len(claims)}: {_error_text(e)}"
        return [(None, err) for _ in claims]


def _summary_json(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary as the store keeps it: JSON values only (paths and the like become strings)."""
    return json.loads(json.dumps(summary, default=str))


def _error_text(e: Exception) -> str:
    """What the store records for a raising trial: the exception and the last traceback frames."""
    tail = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-3:])
    return f"{type(e).__name__}: {e}\n{tail}".strip()


def work(store_root: str | Path, opts: WorkerOptions, *, parent_pid: int | None = None) -> int:
    """Claim and run trials until all are final; returns how many this worker ran.

    SIGINT and SIGTERM stop it: a trial in training checkpoints its last completed step (the
    loop's own handler) and one still being set up raises KeyboardInterrupt (raised again to
    the caller); either is recorded interrupted, and nothing is claimed after. Between trials
    the signal is only noted, so that no store write is cut in half.
    """
    store = Store(store_root)
    busy = [False]  # a trial is being set up or run

    def on_stop(signum: int) -> None:
        if busy[0]:
            raise KeyboardInterrupt

    try:
        with stopping.handling(on_stop):
            return _claim_and_run(store, worker_id(), opts, parent_pid, busy)
    finally:
        store.close()


def _claim_and_run(store: Store, me: str, opts: WorkerOptions, parent_pid: int | None, busy: list[bool]) -> int:
    ran = 0
    while True:
        if parent_pid is not None and os.getppid() != parent_pid:
            break  # the study process is gone: finish nothing new, leave the rest to a rerun
        if stopping.received() is not None:
            break
        batching = opts.batch > 1 and opts.trial == "train"
        claims = store.claim_many(me, opts.lease_s, opts.retries, limit=opts.batch if batching else 1,
                                  fits=batchable)
        if not claims:
            if store.unfinished() == 0:
                break
            time.sleep(opts.poll_s)
            continue
        if stopping.received() is not None:  # it came while claiming: give the claims back
            for claim in claims:
                store.finish(claim, me, summary={"status": "interrupted"}, retries=opts.retries)
            break
        beat = Heartbeat(store.root, [(c.id, c.attempt) for c in claims], opts.heartbeat_s)
        try:
            busy[0] = True
            with beat, study_env(store.spec, claims):
                outcomes = run_claimed_batch(claims, opts) if len(claims) > 1 else [run_claimed(claims[0], opts)]
        except KeyboardInterrupt:
            for claim in claims:
                store.finish(claim, me, summary={"status": "interrupted"}, retries=opts.retries)
            raise
        finally:
            busy[0] = False
        for claim, (summary, error) in zip(claims, outcomes):
            store.finish(claim, me, summary=summary, error=error, retries=opts.retries)
        ran += len(claims)
        if any(s and s.get("status") == "interrupted" for s, _ in outcomes):
            break  # Ctrl-C reached the trial: stop here, a rerun resumes it from its checkpoint
    return ran


def _process_main(store_root: str, opts: WorkerOptions, parent_pid: int) -> None:
    """Entry point of a pool process (spawned: a fresh interpreter, torch threads set by us)."""
    _die_with_parent()
    with contextlib.suppress(KeyboardInterrupt):  # a stop signal: work() has recorded its trials
        work(store_root, opts, parent_pid=parent_pid)


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when the study process dies, as a crash of the whole run
    would. The store then sees a dead worker and reclaims its trial on the next run."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
