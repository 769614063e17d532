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
import socket
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from normlab.core.errors import UserError
from normlab.core.fscheck import read_json_table, sqlite_errors, writable_dir
from normlab.core.fsutil import CorruptFileError, atomic_write_text
from normlab.run.config import RunConfig
from normlab.run.dir import RunDir
from normlab.study.grow import growth_refusal
from normlab.study.spec import safe_relpath

SCHEMA_VERSION = 1
FINAL = ("completed", "diverged", "failed")
CLAIMABLE = ("pending", "interrupted")
MAX_DEATHS = 3  # a trial whose worker dies this many times more than `retries` is marked failed
# The store's files: only this module spells them (readers ask ``Store.is_store``/``has_db``, ``SPEC``).
SPEC, DB = "spec.json", "study.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS trials (
    id TEXT PRIMARY KEY, idx INTEGER NOT NULL, params TEXT NOT NULL, config TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0, worker TEXT, started_at REAL, finished_at REAL,
    heartbeat REAL, error TEXT, summary TEXT, run_dir TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    trial TEXT NOT NULL, attempt INTEGER NOT NULL, event TEXT NOT NULL, worker TEXT,
    at REAL NOT NULL, detail TEXT);
"""


def worker_id() -> str:
    """``host:pid`` of this process: unique on a machine, and checkable for liveness."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _worker_dead(worker: str | None) -> bool:
    """True only when ``worker`` ran on this host and its process is gone."""
    host, _, pid = (worker or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass
class TrialRecord:
    """One row of the store, for readers (status, reports)."""

    id: str
    params: dict[str, Any]
    status: str
    summary: dict[str, Any] | None
    run_dir: Path
    error: str | None
    attempts: int = 0
    worker: str | None = None
    started_at: float | None = None  # the last claim's time (None: never started)
    finished_at: float | None = None


@dataclass
class Lease:
    """A lease on one trial, held by this worker: run it, then :meth:`Store.finish` with this attempt."""

    id: str
    attempt: int
    params: dict[str, Any]
    config_json: str
    run_dir: Path
    previous: str | None = None  # status before the claim (running = reclaimed from a dead worker)
    extra: dict[str, Any] = field(default_factory=dict)


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
        self.spec: dict[str, Any] = _read_spec(self.root / SPEC)
        _check_db(self.db_path)
        self._check_version(self.conn)

    # -- connection ------------------------------------------------------------------
    @property
    def conn(self) -> sqlite3.Connection:
        # One connection per process: after fork/spawn each worker opens its own.
        if self._conn is None or getattr(self, "_pid", None) != os.getpid():
            self._conn = _connect(self.db_path, self._busy)
            self._pid = os.getpid()
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _check_version(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise UserError(f"{self.db_path}: written by a newer normlab (store schema v{version}; this "
                            f"version reads v{SCHEMA_VERSION}); upgrade normlab to use this store")

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
            held = _read_spec(spec_path)
            if held != json.loads(text):
                why = growth_refusal(held, json.loads(text))
                if why:
                    raise UserError(f"{root}: this store holds a different study: {why}; a study grows only by "
                                    "seeds and axis values. Pick a new --store, or rerun without a spec to resume it")
                grown = True  # more seeds or axis values: the finished trials stay, the new ones are added
            _check_db(root / DB)  # a complete store: damage is reported, never written over
        root.mkdir(parents=True, exist_ok=True)
        with sqlite_errors(root / DB, "restore it from a backup, or start a new --store"):
            conn = _connect(root / DB, 60.0)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise UserError(f"{root / DB}: written by a newer normlab (store schema "
                                f"v{version}; this version reads v{SCHEMA_VERSION}); upgrade normlab")
            conn.execute("BEGIN IMMEDIATE")
            for stmt in _SCHEMA.strip().split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            # new trials of a grown study go after the ones held, so the held order never changes
            after = conn.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM trials").fetchone()[0] if grown else 0
            conn.executemany(
                "INSERT OR IGNORE INTO trials (id, idx, params, config, run_dir) VALUES (?, ?, ?, ?, ?)",
                [(t.id, after + t.index, json.dumps(t.params, sort_keys=True), t.config_json, f"{runs_dir}/{t.id}")
                 for t in _new_trials(conn, root, trials)])
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
        return _trials(self.conn, self.root)

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
        with _immediate(self.conn) as c:
            rows = c.execute("SELECT id, status, worker, heartbeat, attempts, failures, params, config, run_dir "
                             "FROM trials WHERE status IN ('pending', 'interrupted', 'running') "
                             "ORDER BY idx").fetchall()
            for tid, status, owner, beat, attempts, failures, params, config, run_dir in rows:
                if out:  # filling a batch behind a fresh first trial
                    if status != "pending" or attempts or fits is None or not fits(out[0].config_json, config):
                        continue
                elif status == "running":
                    if not ((beat or 0) < now - lease_s or _worker_dead(owner)):
                        continue
                    deaths = attempts - failures
                    if deaths > retries + MAX_DEATHS:
                        c.execute("UPDATE trials SET status='failed', finished_at=?, error=? WHERE id=?",
                                  (now, f"its worker died {deaths} times (last: {owner})", tid))
                        _event(c, tid, attempts, "failed", worker, now, f"worker {owner} died")
                        continue
                    _event(c, tid, attempts, "lost", owner, now, "lease expired or worker process gone")
                c.execute("UPDATE trials SET status='running', worker=?, attempts=attempts+1, started_at=?, "
                          "heartbeat=?, finished_at=NULL WHERE id=?", (worker, now, now, tid))
                _event(c, tid, attempts + 1, "claim", worker, now, status if not out else f"{status}, batched")

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
        with _immediate(self.conn) as c:
            row = c.execute("SELECT worker, heartbeat, params, config, run_dir FROM trials WHERE id=? AND "
                            "attempts=? AND status='running'", (trial, attempt)).fetchone()
            if row is None:
                return None
            owner, beat, params, config, run_dir = row
            if owner != worker and not ((beat or 0) < now - lease_s or _worker_dead(owner)):
                return None
            c.execute("UPDATE trials SET worker=?, heartbeat=? WHERE id=?", (worker, now, trial))
            _event(c, trial, attempt, "adopt", worker, now, f"from {owner}")
        return Lease(trial, attempt, json.loads(params), config,
                     self.root / safe_relpath(run_dir, f"trials[{trial}].run_dir"), previous="running")

    def requeue_failed(self) -> int:
        """Put every failed trial back to pending with its failure count reset (a rerun after the
        cause was fixed: a missing corpus, an extra not installed); its attempts and events stay, so
        the audit log shows the earlier failure. Returns how many were requeued."""
        now = time.time()
        with _immediate(self.conn) as c:
            rows = c.execute("SELECT id, attempts, error FROM trials WHERE status='failed'").fetchall()
            for tid, attempts, error in rows:
                c.execute("UPDATE trials SET status='pending', failures=0, finished_at=NULL, error=NULL WHERE id=?",
                          (tid,))
                _event(c, tid, attempts, "requeue", worker_id(), now, f"retried after: {(error or '').splitlines()[0]}")
        return len(rows)

    def heartbeat(self, ids_attempts: list[tuple[str, int]]) -> None:
        """Renew the leases of trials this worker runs."""
        now = time.time()
        with _immediate(self.conn) as c:
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
        with _immediate(self.conn) as c:
            row = _held(c, claim, worker)
            if row is None:
                _event(c, claim.id, claim.attempt, "stale", worker, now, f"result {outcome} dropped: lease lost")
                return None
            status, failures = outcome, row[1]
            if outcome == "failed":
                failures += 1
                status = "failed" if failures > retries else "pending"
            c.execute("UPDATE trials SET status=?, failures=?, finished_at=?, heartbeat=NULL, error=?, "
                      "summary=COALESCE(?, summary) WHERE id=?",
                      (status, failures, now, error, json.dumps(summary) if summary else None, claim.id))
            _event(c, claim.id, claim.attempt, outcome if status != "pending" else "retry", worker, now,
                   error or note)
        return status

    def note(self, trial: str, event: str, detail: str) -> None:
        """Add an event to the audit log of a final trial without changing its record (an
        extension to a longer horizon: ``normlab.study.extend``)."""
        with _immediate(self.conn) as c:
            row = c.execute("SELECT attempts FROM trials WHERE id=?", (trial,)).fetchone()
            _event(c, trial, row[0] if row else 0, event, worker_id(), time.time(), detail)

    def release(self, claim: Lease, worker: str, reason: str, retries: int = 1) -> str | None:
        """Put back a trial whose process or node died under it (a Ray task lost with its node):
        not a failure of the trial, so it is claimable again at once and resumes from its
        checkpoint, like a reclaimed trial of a dead local worker; and like one, it is failed
        after ``retries + MAX_DEATHS`` deaths. Returns the new status (None: lease lost)."""
        now = time.time()
        with _immediate(self.conn) as c:
            row = _held(c, claim, worker)
            if row is None:
                _event(c, claim.id, claim.attempt, "stale", worker, now, f"loss dropped: lease lost ({reason})")
                return None
            deaths = row[0] - row[1]
            if deaths > retries + MAX_DEATHS:
                c.execute("UPDATE trials SET status='failed', finished_at=?, heartbeat=NULL, error=? WHERE id=?",
                          (now, f"its worker died {deaths} times (last: {reason})", claim.id))
                _event(c, claim.id, claim.attempt, "failed", worker, now, reason)
                return "failed"
            c.execute("UPDATE trials SET status='pending', heartbeat=NULL WHERE id=?", (claim.id,))
            _event(c, claim.id, claim.attempt, "lost", worker, now, reason)
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
    spec = _read_spec(root / SPEC)
    try:
        conn = _connect(root / DB, 60.0, read_only=True)
        try:
            return spec, _trials(conn, root)
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise UserError(f"{root / DB}: not a study database this version reads ({e})") from None


def _trials(conn: sqlite3.Connection, root: Path) -> list[TrialRecord]:
    rows = conn.execute("SELECT id, params, status, summary, run_dir, error, attempts, worker, started_at, "
                        "finished_at FROM trials ORDER BY idx").fetchall()
    return [TrialRecord(r[0], json.loads(r[1]), r[2], json.loads(r[3]) if r[3] else None,
                        root / safe_relpath(r[4], f"trials[{r[0]}].run_dir"), r[5], r[6], r[7], r[8], r[9])
            for r in rows]


def _read_spec(path: Path) -> dict[str, Any]:
    return read_json_table(path, "restore it from a backup, or start a new --store")


def _check_db(path: Path) -> None:
    """Refuse a study.sqlite that is not an intact store database (one line, never replaced)."""

    if not path.is_file():  # connecting would create an empty database in its place
        raise CorruptFileError(f"{path}: missing from its store (spec.json is there); restore it from a backup, "
                               "or start a new --store")
    # SQLite would make an empty file a new database. (stat, never open: closing a descriptor of the
    # file would drop the POSIX locks this process's other connections hold on it.)
    if path.stat().st_size == 0:
        raise CorruptFileError(f"{path}: damaged study database (empty file); restore it from a backup, or "
                               "start a new --store (normlab never replaces it)")
    with sqlite_errors(path, "restore it from a backup, or start a new --store"):
        conn = _connect(path, 60.0, read_only=True)  # the check itself must not change the file (WAL mode, say)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise UserError(f"{path}: written by a newer normlab (store schema v{version}; this "
                                f"version reads v{SCHEMA_VERSION}); upgrade normlab to use this store")
            bad = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall() if r[0] != "ok"]
            if bad:
                raise sqlite3.DatabaseError(f"quick_check: {bad[0]}")
            conn.execute("SELECT COUNT(*) FROM trials").fetchone()
        finally:
            conn.close()


def _connect(path: Path, busy_s: float, read_only: bool = False) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN IMMEDIATE ourselves, so the write lock is taken
    # before reading what to change (no lost updates between two claimers).
    if path.is_file() and os.statvfs(path.parent).f_flag & os.ST_RDONLY:
        return _connect_read_only(path)
    if read_only:
        import urllib.parse

        return sqlite3.connect(f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro", uri=True, timeout=busy_s,
                               isolation_level=None)
    conn = sqlite3.connect(path, timeout=busy_s, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_s * 1000)}")
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if mode.lower() != "wal":
        raise UserError(f"{path}: SQLite could not use WAL mode (got {mode}); put the store on a local disk")
    conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL survives process crashes
    return conn


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A store on a read-only file system (a published copy, a read-only share) can still be read
    (``study status``, ``report --out``): nobody can write it, so SQLite may treat it as
    immutable and need no WAL files beside it. Writers fail later with one line (the CLI checks
    ``--store`` first)."""
    import urllib.parse

    wal = path.with_name(path.name + "-wal")
    if wal.is_file() and wal.stat().st_size:  # committed rows not yet in the main file: immutable would miss them
        raise UserError(f"{path}: on a read-only file system with unmerged changes in {wal.name}; copy the store "
                        "to a writable disk and read the copy")
    return sqlite3.connect(f"file:{urllib.parse.quote(str(path.resolve()))}?immutable=1", uri=True,
                           isolation_level=None)


class _immediate:
    """``with _immediate(conn) as c:`` one write transaction, rolled back on any error."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        self.conn.execute("COMMIT" if kind is None else "ROLLBACK")


def _held(c: sqlite3.Connection, claim: Lease, worker: str) -> tuple[int, int] | None:
    """(attempts, failures) when ``worker`` still holds ``claim``'s attempt (fencing), else None."""
    return c.execute("SELECT attempts, failures FROM trials WHERE id=? AND attempts=? AND status='running' "
                     "AND worker=?", (claim.id, claim.attempt, worker)).fetchone()


def _event(c: sqlite3.Connection, trial: str, attempt: int, event: str, worker: str | None,
           at: float, detail: str | None) -> None:
    c.execute("INSERT INTO events (trial, attempt, event, worker, at, detail) VALUES (?, ?, ?, ?, ?, ?)",
              (trial, attempt, event, worker, at, detail))


def _new_trials(conn: sqlite3.Connection, root: Path, trials: list[Any]) -> list[Any]:
    """``trials`` minus those the store holds already. A trial id hashes the whole config as
    this version writes it, so a store made by an older normlab (whose configs spelled some
    options differently) holds the same trial under another id: it is matched by its
    parameters and kept when its stored config reads back equal, and refused otherwise
    (running both would count one seed twice)."""

    held = {params: (tid, config) for tid, params, config in conn.execute("SELECT id, params, config FROM trials")}
    ids = {tid for tid, _ in held.values()}
    out = []
    for t in trials:
        key = json.dumps(t.params, sort_keys=True)
        if t.id in ids:
            continue
        if key in held:
            tid, config = held[key]
            if RunConfig.from_json(config) != RunConfig.from_json(t.config_json):
                raise UserError(f"{root}: trial {tid} ({key}) was made with a different config than this "
                                "study now gives it; pick a new --store, or rerun without a spec to resume it")
            continue
        out.append(t)
    return out
