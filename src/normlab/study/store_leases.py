"""The lease protocol of the study store: how a trial passes between workers. Kept apart from
``normlab.study.store`` (which owns the store's directory, its files, its creation and its
readers) because these are the transactions concurrent processes race on, and each one is read
against the others: claim, fencing, retry, release, adoption.

Every state change is one ``BEGIN IMMEDIATE`` transaction (``store_db.immediate``), so
concurrent processes serialise on SQLite's write lock:

* claim: pending/interrupted -> running (attempts + 1, worker, heartbeat); a running trial
  whose lease expired (no heartbeat for ``lease_s``) or whose worker process on this host
  is gone is reclaimed the same way and resumes from its checkpoint;
* finish: only the holder of the current attempt may record a result ("fencing"), so a
  presumed-dead worker that comes back cannot overwrite its successor's result;
* completed and diverged are final; an exception is retried ``retries`` times, then final
  ``failed`` with the error text;
* release: a trial whose Ray task or Slurm job was lost goes back to pending at once (a
  death, not a failure), to resume from its checkpoint;
* adopt: a rerun Slurm driver takes over the running attempt of a dead driver whose job still
  runs, without a new attempt (``normlab.study.slurm``).

:class:`Leases` is a base of :class:`~normlab.study.store.Store`, so callers keep asking the
store (``store.claim(...)``); it holds no state of its own.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable

from normlab.study import store_db as db
from normlab.study.spec_checks import safe_relpath
from normlab.study.store_db import Lease, worker_id

MAX_DEATHS = 3  # a trial whose worker dies this many times more than `retries` is marked failed


class Leases:
    """The store's writers, each one transaction (see the module docstring)."""

    root: Path

    @property
    def conn(self) -> sqlite3.Connection:
        # The Store opens it (one per process); the protocol only uses it.
        raise NotImplementedError

    def claim(self, worker: str, lease_s: float, retries: int = 1) -> Lease | None:
        """Take the next runnable trial, or None when nothing is runnable now."""
        got = self.claim_many(worker, lease_s, retries)
        return got[0] if got else None

    def claim_many(self, worker: str, lease_s: float, retries: int = 1, limit: int = 1,
                   fits: Callable[[str, str], bool] | None = None) -> list[Lease]:
        """Take the next runnable trial and, when ``limit`` > 1 and it has never started, up to
        ``limit - 1`` more never-started pending trials for which ``fits(first_config_json,
        config_json)`` is true (trial batching). A reclaimed, interrupted or retried trial is
        always taken alone: it resumes from its own checkpoint, or retries without a batch."""
        now = time.time()
        out: list[Lease] = []
        with db.immediate(self.conn) as c:
            rows = c.execute("SELECT id, status, worker, heartbeat, attempts, failures, params, config, run_dir "
                             "FROM trials WHERE status IN ('pending', 'interrupted', 'running') "
                             "ORDER BY idx").fetchall()
            for tid, status, owner, beat, attempts, failures, params, config, run_dir in rows:
                if out:  # filling a batch behind a fresh first trial
                    if status != "pending" or attempts or fits is None or not fits(out[0].config_json, config):
                        continue
                elif status == "running":
                    if not ((beat or 0) < now - lease_s or db.worker_dead(owner)):
                        continue
                    deaths = attempts - failures
                    if deaths > retries + MAX_DEATHS:
                        c.execute("UPDATE trials SET status='failed', finished_at=?, error=? WHERE id=?",
                                  (now, f"its worker died {deaths} times (last: {owner})", tid))
                        db.event(c, tid, attempts, "failed", worker, now, f"worker {owner} died")
                        continue
                    db.event(c, tid, attempts, "lost", owner, now, "lease expired or worker process gone")
                c.execute("UPDATE trials SET status='running', worker=?, attempts=attempts+1, started_at=?, "
                          "heartbeat=?, finished_at=NULL WHERE id=?", (worker, now, now, tid))
                db.event(c, tid, attempts + 1, "claim", worker, now, status if not out else f"{status}, batched")

                out.append(Lease(tid, attempts + 1, json.loads(params), config,
                                 self.root / safe_relpath(run_dir, f"trials[{tid}].run_dir"), previous=status))
                if len(out) >= limit or status != "pending" or attempts:
                    break
        return out

    def adopt(self, trial: str, attempt: int, worker: str, lease_s: float) -> Lease | None:
        """Take over ``trial``'s running ``attempt`` from a holder that is gone (dead pid on this
        host, or lease expired), without a new attempt: its Slurm job still runs it, and a
        rerun driver reattaches to that job instead of claiming the trial again. None when the
        trial is not running that attempt, or its holder is alive."""
        now = time.time()
        with db.immediate(self.conn) as c:
            row = c.execute("SELECT worker, heartbeat, params, config, run_dir FROM trials WHERE id=? AND "
                            "attempts=? AND status='running'", (trial, attempt)).fetchone()
            if row is None:
                return None
            owner, beat, params, config, run_dir = row
            if owner != worker and not ((beat or 0) < now - lease_s or db.worker_dead(owner)):
                return None
            c.execute("UPDATE trials SET worker=?, heartbeat=? WHERE id=?", (worker, now, trial))
            db.event(c, trial, attempt, "adopt", worker, now, f"from {owner}")
        return Lease(trial, attempt, json.loads(params), config,
                     self.root / safe_relpath(run_dir, f"trials[{trial}].run_dir"), previous="running")

    def requeue_failed(self) -> int:
        """Put every failed trial back to pending with its failure count reset (a rerun after the
        cause was fixed: a missing corpus, an extra not installed); its attempts and events stay, so
        the audit log shows the earlier failure. Returns how many were requeued."""
        now = time.time()
        with db.immediate(self.conn) as c:
            rows = c.execute("SELECT id, attempts, error FROM trials WHERE status='failed'").fetchall()
            for tid, attempts, error in rows:
                c.execute("UPDATE trials SET status='pending', failures=0, finished_at=NULL, error=NULL WHERE id=?",
                          (tid,))
                db.event(c, tid, attempts, "requeue", worker_id(), now, f"retried after: {(error or '').splitlines()[0]}")
        return len(rows)

    def heartbeat(self, ids_attempts: list[tuple[str, int]]) -> None:
        """Renew the leases of trials this worker runs."""
        now = time.time()
        with db.immediate(self.conn) as c:
            c.executemany("UPDATE trials SET heartbeat=? WHERE id=? AND attempts=? AND status='running'",
                          [(now, tid, a) for tid, a in ids_attempts])

    def finish(self, claim: Lease, worker: str, *, summary: dict[str, Any] | None = None,
               error: str | None = None, retries: int = 1, note: str | None = None) -> str | None:
        """Record the outcome of ``claim``; returns the new status, or None if the lease was lost.
        ``note`` (say, the Ray node that ran it) is kept as the event's detail when there is no error."""
        now = time.time()
        outcome = (summary or {}).get("status") if error is None else "failed"
        if outcome not in ("completed", "diverged", "interrupted", "failed"):
            outcome, error = "failed", error or f"trial returned status {outcome!r}"
        if outcome == "failed" and error is None:
            error = (summary or {}).get("error") or "the run ended with status 'failed'"
        with db.immediate(self.conn) as c:
            row = db.held(c, claim, worker)
            if row is None:
                db.event(c, claim.id, claim.attempt, "stale", worker, now, f"result {outcome} dropped: lease lost")
                return None
            status, failures = outcome, row[1]
            if outcome == "failed":
                failures += 1
                status = "failed" if failures > retries else "pending"
            c.execute("UPDATE trials SET status=?, failures=?, finished_at=?, heartbeat=NULL, error=?, "
                      "summary=COALESCE(?, summary) WHERE id=?",
                      (status, failures, now, error, json.dumps(summary) if summary else None, claim.id))
            db.event(c, claim.id, claim.attempt, outcome if status != "pending" else "retry", worker, now,
                   error or note)
        return status

    def note(self, trial: str, event: str, detail: str) -> None:
        """Add an event to the audit log of a final trial without changing its record (an
        extension to a longer horizon: ``normlab.study.extend``)."""
        with db.immediate(self.conn) as c:
            row = c.execute("SELECT attempts FROM trials WHERE id=?", (trial,)).fetchone()
            db.event(c, trial, row[0] if row else 0, event, worker_id(), time.time(), detail)

    def release(self, claim: Lease, worker: str, reason: str, retries: int = 1) -> str | None:
        """Put back a trial whose process or node died under it (a Ray task lost with its node):
        not a failure of the trial, so it is claimable again at once and resumes from its
        checkpoint, like a reclaimed trial of a dead local worker; and like one, it is failed
        after ``retries + MAX_DEATHS`` deaths. Returns the new status (None: lease lost)."""
        now = time.time()
        with db.immediate(self.conn) as c:
            row = db.held(c, claim, worker)
            if row is None:
                db.event(c, claim.id, claim.attempt, "stale", worker, now, f"loss dropped: lease lost ({reason})")
                return None
            deaths = row[0] - row[1]
            if deaths > retries + MAX_DEATHS:
                c.execute("UPDATE trials SET status='failed', finished_at=?, heartbeat=NULL, error=? WHERE id=?",
                          (now, f"its worker died {deaths} times (last: {reason})", claim.id))
                db.event(c, claim.id, claim.attempt, "failed", worker, now, reason)
                return "failed"
            c.execute("UPDATE trials SET status='pending', heartbeat=NULL WHERE id=?", (claim.id,))
            db.event(c, claim.id, claim.attempt, "lost", worker, now, reason)
        return "pending"

