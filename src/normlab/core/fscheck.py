"""Path checks made before a command starts its work, and the one line a file-system failure becomes.

Every command checks the paths it will write (and the stores and checkpoints it will read)
here first, so a mistake costs nothing: a probe is not computed only to fail at writing
it, and nothing is created or changed when a check fails. Each check raises
:class:`~normlab.core.errors.UserError` naming the path and the fix (one CLI line, exit 2) and
creates nothing itself.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Any, Iterator

from normlab.core.errors import UserError
from normlab.core.fsutil import CorruptFileError, load_json

# errno values that mean "the file system refused", never "normlab has a bug": the CLI turns
# an OSError carrying one of them into one line (normlab.cli.main). ENOENT is not among them:
# an input that is missing is checked where it is read, and elsewhere it is more likely a bug.
REFUSALS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EEXIST,
                      errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG, errno.ELOOP, errno.ENOTEMPTY})


def _nearest_existing(p: Path) -> Path:
    q = p
    while not os.path.lexists(q) and q != q.parent:
        q = q.parent
    return q


def _why_not_writable(d: Path) -> str | None:
    """None when files can be created in the existing directory ``d``, else the reason."""
    if os.access(d, os.W_OK | os.X_OK):
        return None
    try:
        if os.statvfs(d).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except OSError:
        pass
    return "permission denied"


def writable_dir(path: str | Path, flag: str, fix: str | None = None) -> Path:
    """Check that ``path`` is, or can be made, a directory normlab can write files in.

    ``flag`` names the argument in the message (``--out``, ``--store``, ``RUN``); ``fix``
    replaces the default advice (choose another ``flag``). Nothing is created: the nearest
    existing ancestor must be a writable directory.
    """
    p = Path(path)
    fix = fix or f"choose another {flag}"
    if os.path.lexists(p) and not p.is_dir():
        raise UserError(f"{flag} {p}: is a file, not a directory; {fix} (or move the file away)")
    q = _nearest_existing(p)
    if not q.is_dir():
        raise UserError(f"{flag} {p}: {q} is a file, so no directory can be made under it; {fix}")
    why = _why_not_writable(q)
    if why:
        where = "" if q == p else f" ({q})"
        raise UserError(f"{flag} {p}: cannot write there{where}: {why}; {fix}, or fix the permissions")
    return p


def writable_file(path: str | Path, flag: str) -> Path:
    """Check that the file ``path`` can be written (created or replaced) in a writable directory."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{flag} {p}: is a directory; give a file name, e.g. {p / 'out.json'}")
    q = _nearest_existing(p.parent)
    if not q.is_dir():
        raise UserError(f"{flag} {p}: {q} is a file, so {p.name} cannot be written under it; choose another {flag}")
    why = _why_not_writable(q)  # files are replaced by a rename: the directory is what must be writable
    if why:
        raise UserError(f"{flag} {p}: cannot write there ({q}: {why}); choose a writable {flag} "
                        "or fix the permissions")
    return p


def existing_dir(path: str | Path, flag: str, what: str) -> Path:
    """Check that ``path`` is an existing directory (an input: a run, a store, a model dir)."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"{flag} {p}: no such directory; give the path of {what}")
    if not p.is_dir():
        raise UserError(f"{flag} {p}: is a file, not a directory; give the path of {what}")
    return p


def refusal(e: OSError) -> str | None:
    """The one line for an OSError the file system raised (see REFUSALS), else None (a bug)."""
    if e.errno not in REFUSALS:
        return None
    where = e.filename if e.filename is not None else "a file"
    fix = {errno.ENOSPC: "free some space", errno.EDQUOT: "free some space",
           errno.EEXIST: "move it away or choose another path", errno.EISDIR: "give a file, not a directory",
           errno.ENOTDIR: "a part of that path is a file, not a directory; give another path",
           errno.ENAMETOOLONG: "give a shorter path"}.get(e.errno, "choose another path or fix the permissions")
    return f"{where}: {e.strerror or os.strerror(e.errno or 0)}; {fix}, then rerun"


def read_json_table(path: str | Path, fix: str) -> dict[str, Any]:
    """A JSON object file normlab wrote (spec.json, summary.json, a run's config.json); damage,
    a document that is not an object included, is one line with ``fix`` (``fsutil.load_json``)."""
    p = Path(path)
    data = load_json(p, fix)
    if not isinstance(data, dict):
        raise CorruptFileError(f"{p}: damaged (not a JSON object); {fix}")
    return data


@contextlib.contextmanager
def sqlite_errors(path: str | Path, fix: str) -> Iterator[None]:
    """``with sqlite_errors(db, fix):`` SQLite's errors on opening or checking ``db`` as one line.

    A file that is not a database (truncated, overwritten) is damage: reported with ``fix``,
    never replaced. A database that cannot be opened for writing (SQLite's WAL files need a
    writable directory) is a permissions problem with its own fix.
    """
    import sqlite3

    try:
        yield
    except sqlite3.Error as e:
        msg = str(e)
        if any(w in msg for w in ("not a database", "malformed", "corrupt", "no such table", "quick_check")):
            raise CorruptFileError(f"{path}: damaged database ({msg}); {fix}") from None
        if any(w in msg for w in ("readonly", "read-only", "unable to open", "disk I/O", "locking protocol")):
            raise UserError(f"{path}: cannot open the database ({msg}); it must be on a writable local disk: "
                            "fix the permissions or copy it somewhere writable") from None
        if "locked" in msg or "busy" in msg:
            raise UserError(f"{path}: {msg} (another process held it past the timeout); wait for it and "
                            "rerun") from None
        raise  # anything else is a bug: keep the traceback
