"""The study store's SQLite layer (``normlab.study.store`` and its lease protocol
``normlab.study.store_leases`` are its only users): the schema, the connections (WAL on a
writable disk, immutable on a read-only one), the integrity check, one write transaction,
fencing, events, and the rows readers get. Every state change the store makes
goes through :class:`immediate`, so concurrent processes serialise on SQLite's write lock."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab.core.errors import UserError
from normlab.core.fscheck import read_json_table, sqlite_errors
from normlab.core.fsutil import CorruptFileError
from normlab.run.config import RunConfig
from normlab.study.spec_checks import safe_relpath

SCHEMA_VERSION = 1
SCHEMA = """
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


def worker_dead(worker: str | None) -> bool:
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


def trial_rows(conn: sqlite3.Connection, root: Path) -> list[TrialRecord]:
    rows = conn.execute("SELECT id, params, status, summary, run_dir, error, attempts, worker, started_at, "
                        "finished_at FROM trials ORDER BY idx").fetchall()
    return [TrialRecord(r[0], json.loads(r[1]), r[2], json.loads(r[3]) if r[3] else None,
                        root / safe_relpath(r[4], f"trials[{r[0]}].run_dir"), r[5], r[6], r[7], r[8], r[9])
            for r in rows]


def read_spec(path: Path) -> dict[str, Any]:
    return read_json_table(path, "restore it from a backup, or start a new --store")


def check_db(path: Path) -> None:
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
        conn = connect(path, 60.0, read_only=True)  # the check itself must not change the file (WAL mode, say)
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


def connect(path: Path, busy_s: float, read_only: bool = False) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN IMMEDIATE ourselves, so the write lock is taken
    # before reading what to change (no lost updates between two claimers).
    if path.is_file() and os.statvfs(path.parent).f_flag & os.ST_RDONLY:
        return connect_read_only(path)
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


def connect_read_only(path: Path) -> sqlite3.Connection:
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


class immediate:
    """``with immediate(conn) as c:`` one write transaction, rolled back on any error."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        self.conn.execute("COMMIT" if kind is None else "ROLLBACK")


def held(c: sqlite3.Connection, claim: Lease, worker: str) -> tuple[int, int] | None:
    """(attempts, failures) when ``worker`` still holds ``claim``'s attempt (fencing), else None."""
    return c.execute("SELECT attempts, failures FROM trials WHERE id=? AND attempts=? AND status='running' "
                     "AND worker=?", (claim.id, claim.attempt, worker)).fetchone()


def event(c: sqlite3.Connection, trial: str, attempt: int, event: str, worker: str | None,
           at: float, detail: str | None) -> None:
    c.execute("INSERT INTO events (trial, attempt, event, worker, at, detail) VALUES (?, ?, ?, ?, ?, ?)",
              (trial, attempt, event, worker, at, detail))


def new_trials(conn: sqlite3.Connection, root: Path, trials: list[Any]) -> list[Any]:
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
