"""The worker loop of the local executor: claim a trial, run it under a heartbeat, record it.

Each worker is one process with its own SQLite connection. It keeps claiming until every
trial is final; while others still run trials it polls, so that a trial whose worker died
(SIGKILL, OOM) is reclaimed once its lease lapses and resumed from its checkpoint.
"""

from __future__ import annotations

import json
import os
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normlab.study.store import Claim, Store, worker_id


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker runs trials; the same for every worker of one ``study run``."""

    threads: int = 1           # torch intra-op threads per trial
    lease_s: float = 60.0      # a running trial without heartbeat this long is presumed dead
    heartbeat_s: float = 5.0   # lease renewal period (must be well under lease_s)
    poll_s: float = 1.0        # wait between claims while other workers hold the last trials
    retries: int = 1           # failures before a trial is final 'failed' (from the spec)
    trial: str = "train"       # TRIALS name or "module:function" (from the spec)


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


def run_claimed(claim: Claim, opts: WorkerOptions) -> tuple[dict[str, Any] | None, str | None]:
    """Run one claimed trial in this process: (summary, None) or (None, error text)."""
    import torch

    from normlab.config import RunConfig
    from normlab.study.trials import load_trial

    try:
        torch.set_num_threads(max(1, opts.threads))
        cfg = RunConfig.from_json(claim.config_json)
        # A run directory with config.json is a started run: resume it (run_training returns a
        # finished run's summary at once, so a trial killed after training is not retrained).
        resume = (claim.run_dir / "config.json").is_file()
        summary = load_trial(opts.trial)(cfg, claim.run_dir, resume=resume)
        if not isinstance(summary, dict):
            return None, f"trial returned {type(summary).__name__}, not a summary dict"
        return json.loads(json.dumps(summary, default=str)), None
    except Exception as e:
        tail = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-3:])
        return None, f"{type(e).__name__}: {e}\n{tail}".strip()


def work(store_root: str | Path, opts: WorkerOptions, *, parent_pid: int | None = None) -> int:
    """Claim and run trials until all are final; returns how many this worker ran."""
    store = Store(store_root)
    me = worker_id()
    ran = 0
    try:
        while True:
            if parent_pid is not None and os.getppid() != parent_pid:
                break  # the study process is gone: finish nothing new, leave the rest to a rerun
            claim = store.claim(me, opts.lease_s, opts.retries)
            if claim is None:
                if store.unfinished() == 0:
                    break
                time.sleep(opts.poll_s)
                continue
            beat = Heartbeat(store.root, [(claim.id, claim.attempt)], opts.heartbeat_s)
            try:
                with beat:
                    summary, error = run_claimed(claim, opts)
            except KeyboardInterrupt:
                store.finish(claim, me, summary={"status": "interrupted"}, retries=opts.retries)
                raise
            store.finish(claim, me, summary=summary, error=error, retries=opts.retries)
            ran += 1
            if summary and summary.get("status") == "interrupted":
                break  # Ctrl-C reached the trial: stop here, a rerun resumes it from its checkpoint
    finally:
        store.close()
    return ran


def _process_main(store_root: str, opts: WorkerOptions, parent_pid: int) -> None:
    """Entry point of a pool process (spawned: a fresh interpreter, torch threads set by us)."""
    _die_with_parent()
    try:
        work(store_root, opts, parent_pid=parent_pid)
    except KeyboardInterrupt:
        pass


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
