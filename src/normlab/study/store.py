"""The study store: one directory, one SQLite database that is the truth about every trial.

Layout: ``STORE/spec.json`` (resolved spec), ``STORE/study.sqlite`` (tables ``trials`` and
``events``), ``STORE/runs/<id>/`` (training run directories). This module owns the directory:
its file names, opening and creating a store, growing it, and the readers. How a trial passes
between workers (claim, finish, release, adopt: one ``BEGIN IMMEDIATE`` transaction each) is
``normlab.study.store_leases``, a base of :class:`Store`; the SQLite layer is
``normlab.study.store_db``.

Layout beyond the database: STORE/slurm/ belongs to the slurm executor
(``normlab.study.slurm_queue``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from normlab.core.errors import UserError
from normlab.core.fscheck import sqlite_errors, writable_dir
from normlab.core.fsutil import atomic_write_text
from normlab.run.dir import RunDir
from normlab.study import store_db as db
from normlab.study.grow import growth_refusal
from normlab.study.store_db import Lease, TrialRecord, worker_id
from normlab.study.store_leases import Leases

FINAL = ("completed", "diverged", "failed")
CLAIMABLE = ("pending", "interrupted")
# The store's files: only this module spells them (readers ask ``Store.is_store``/``has_db``, ``SPEC``).
SPEC, DB = "spec.json", "study.sqlite"



class Store(Leases):
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
