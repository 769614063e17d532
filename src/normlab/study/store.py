"""The study store: one directory, one SQLite database that is the truth about every trial.

Layout: ``STORE/spec.json`` (resolved spec), ``STORE/study.sqlite`` (tables ``trials`` and
``events``), ``STORE/runs/<id>/`` (training run directories). Every state change is one
``BEGIN IMMEDIATE`` transaction, so concurrent processes serialise on SQLite's write lock:

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

Layout beyond the database: STORE/slurm/ belongs to the slurm executor
(``normlab.study.slurm_queue``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable

from normlab.core.errors import UserError
from normlab.core.fscheck import sqlite_errors, writable_dir
from normlab.core.fsutil import atomic_write_text
from normlab.run.dir import RunDir
from normlab.study import store_db as db
from normlab.study.grow import growth_refusal
from normlab.study.spec import safe_relpath
from normlab.study.store_db import Lease, TrialRecord, worker_id

FINAL = ("completed", "diverged", "failed")
CLAIMABLE = ("pending", "interrupted")
MAX_DEATHS = 3  # a trial whose worker dies this many times more than `retries` is marked failed
# The store's files: only this module spells them (readers ask ``Store.is_store``/``has_db``, ``SPEC``).
SPEC, DB = "spec.json", "study.sqlite"



class Store:
    """A study store directory. ``Store(path)`` opens an existing one (readers and workers)."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 60.0) -> None:
        self.root = Path(path)
        self.db_path = self.root / DB
        if self.root.exists() and not self.root.is_dir():
            raise UserError(f"{self.root}: is a file, not a study store directory; give the store's directory")
        if not self.db_path.exists() or not (self.root / SPEC).exists():
            if RunDir(self.root).holds_run():  # never advise making a store inside a run
                raise UserError(f"{self.root}: a training run directory, not a study store; `normlab report "
                                f"{self.root}` shows the run, and a store is the --store DIR a `normlab study run "
                                "SPEC --store DIR` made")
            raise UserError(f"{self.root}: no study store here (create one with "
                            f"`normlab study run SPEC --store {self.root}`)")
        self._busy = busy_timeout_s
        self._conn: sqlite3.Connection | None = None
        self.spec: dict[str, Any] = db.read_spec(self.root / SPEC)
        db.check_db(self.db_path)
        self._check_version(self.conn)

    # -- connection ------------------------------------------------------------------
    @property
    def conn(self) -> sqlite3.Connection:
        # One connection per process: after fork/spawn each worker opens its own.
        if self._conn is None or getattr(self, "_pid", None) != os.getpid():
            self._conn = db.connect(self.db_path, self._busy)
            self._pid = os.getpid()
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _check_version(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > db.SCHEMA_VERSION:
            raise UserError(f"{self.db_path}: written by a newer normlab (store schema v{version}; this "
                            f"version reads v{db.SCHEMA_VERSION}); upgrade normlab to use this store")

    # -- creation --------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | Path, spec: dict[str, Any], trials: list[Any],
               runs_dir: str = "runs") -> "Store":
        """Create (or reopen) the store of ``spec`` and insert its trials; idempotent and safe
        when two processes do it at once. A store holding the same study with fewer seeds or
        axis values grows: its trials are kept (ids unchanged) and the new ones added; any other
        difference is refused, naming the field (``normlab.study.grow``)."""

        root = writable_dir(path, "--store", "choose another --store (a store is written as it runs)")
        text = json.dumps(spec, indent=2, sort_keys=True)
        spec_path = root / SPEC
        grown = False
        if spec_path.exists():
            held = db.read_spec(spec_path)
            if held != json.loads(text):
                why = growth_refusal(held, json.loads(text))
                if why:
                    raise UserError(f"{root}: this store holds a different study: {why}; a study grows only by "
                                    "seeds and axis values. Pick a new --store, or rerun without a spec to resume it")
                grown = True  # more seeds or axis values: the finished trials stay, the new ones are added
            db.check_db(root / DB)  # a complete store: damage is reported, never written over
        root.mkdir(parents=True, exist_ok=True)
        with sqlite_errors(root / DB, "restore it from a backup, or start a new --store"):
            conn = db.connect(root / DB, 60.0)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > db.SCHEMA_VERSION:
                raise UserError(f"{root / DB}: written by a newer normlab (store schema "
                                f"v{version}; this version reads v{db.SCHEMA_VERSION}); upgrade normlab")
            conn.execute("BEGIN IMMEDIATE")
            for stmt in db.SCHEMA.strip().split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute(f"PRAGMA user_version = {db.SCHEMA_VERSION}")
            # new trials of a grown study go after the ones held, so the held order never changes
            after = conn.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM trials").fetchone()[0] if grown else 0
            conn.executemany(
                "INSERT OR IGNORE INTO trials (id, idx, params, config, run_dir) VALUES (?, ?, ?, ?, ?)",
                [(t.id, after + t.index, json.dumps(t.params, sort_keys=True), t.config_json, f"{runs_dir}/{t.id}")
                 for t in db.new_trials(conn, root, trials)])
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()
        if grown or not spec_path.exists():
            atomic_write_text(spec_path, text)  # last: a store with spec.json is complete (and says what it holds)
        return cls(root)

    # -- what a folder is (readers ask these; only this module spells the store's files) ----------
    @staticmethod
    def is_made(path: str | Path) -> bool:
        """Whether a store was made at ``path``: its spec.json, which ``create`` writes last."""
        return (Path(path) / SPEC).exists()

    @staticmethod
    def has_db(path: str | Path) -> bool:
        """Whether ``path`` holds a store database (what tells a store folder from a run's)."""
        return (Path(path) / DB).is_file()

    @staticmethod
    def is_store(path: str | Path) -> bool:
        """Whether ``path`` holds both files of a store (spec.json beside study.sqlite)."""
        return (Path(path) / SPEC).is_file() and Store.has_db(path)

    @staticmethod
    def spec_path(path: str | Path) -> Path:
        """Where a store at ``path`` keeps its resolved spec (a page reads it without opening the store)."""
        return Path(path) / SPEC

    # -- readers ---------------------------------------------------------------------
    def trials(self) -> list[TrialRecord]:
        return db.trial_rows(self.conn, self.root)

    def span(self) -> tuple[float, float] | None:
        """(first start, last finish) over every trial; None before one has started and finished."""
        row = self.conn.execute("SELECT MIN(started_at), MAX(finished_at) FROM trials").fetchone()
        return (float(row[0]), float(row[1])) if row and row[0] is not None and row[1] is not None else None

    def running(self) -> list[tuple[str, dict[str, Any]]]:
        """(id, params) of every trial running now, in the study's order."""
        rows = self.conn.execute("SELECT id, params FROM trials WHERE status = 'running' ORDER BY idx").fetchall()
        return [(tid, json.loads(params)) for tid, params in rows]

    def counts(self) -> dict[str, int]:
        return dict(self.conn.execute("SELECT status, COUNT(*) FROM trials GROUP BY status").fetchall())

    def events(self, trial: str | None = None) -> list[dict[str, Any]]:
        q = "SELECT trial, attempt, event, worker, at, detail FROM events"
        rows = self.conn.execute(q + (" WHERE trial = ?" if trial else "") + " ORDER BY rowid",
                                 (trial,) if trial else ()).fetchall()
        keys = ("trial", "attempt", "event", "worker", "at", "detail")
        return [dict(zip(keys, r)) for r in rows]

    def unfinished(self) -> int:
        """Trials not yet final (pending, running anywhere, interrupted)."""
        marks = ",".join("?" * len(FINAL))
        return self.conn.execute(f"SELECT COUNT(*) FROM trials WHERE status NOT IN ({marks})", FINAL).fetchone()[0]

    def unfinished_configs(self) -> list[str]:
        """The config JSON of every trial not yet final (what a GPU pack is sized for)."""
        marks = ",".join("?" * len(FINAL))
        return [r[0] for r in self.conn.execute(f"SELECT config FROM trials WHERE status NOT IN ({marks}) ORDER BY idx",
                                                FINAL)]

    # -- writers (each one transaction) ----------------------------------------------
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


def peek(path: str | Path) -> tuple[dict[str, Any], list[TrialRecord]]:
    """(spec, trials) of the store at ``path``, read through a read-only connection: no WAL
    switch, no check, no lock, no byte of spec.json or study.sqlite changed (the seen-seeds
    ledger reads stores it does not own, published copies included; SQLite may leave its empty
    -wal/-shm files beside a WAL database, as any reader's). A folder that is not a store this
    version reads is a ``UserError``."""
    root = Path(path)
    for name in (SPEC, DB):
        if not (root / name).is_file():  # connecting would create an empty database in its place
            raise UserError(f"{root / name}: missing; not a study store")
    spec = db.read_spec(root / SPEC)
    try:
        conn = db.connect(root / DB, 60.0, read_only=True)
        try:
            return spec, db.trial_rows(conn, root)
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise UserError(f"{root / DB}: not a study database this version reads ({e})") from None



__all__ = ["CLAIMABLE", "DB", "FINAL", "Lease", "SPEC", "Store", "TrialRecord", "peek", "worker_id"]
