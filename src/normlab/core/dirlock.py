"""Exclusive output folders: created atomically and held by an OS lock while one process writes.

A writer holds an exclusive ``flock`` on a lock file inside its folder for as long as it
writes (the folder's owner names the file: ``normlab.run.dir.LOCK``). The kernel drops the
lock when the process ends, however it ends (SIGKILL, the OOM killer), so a lock is never
stale and nothing has to be cleaned up by hand. ``flock`` rather than ``lockf``: a POSIX
record lock is dropped when *any* descriptor of the file closes in the process, and a
reader opening the file would silently release its own writer's lock.

The file records its holder (pid, host, command, start) for the refusal's message and for
readers, which never hold the lock: :func:`holder` probes it (a shared ``flock`` tried
without waiting and let go at once, on its own open file description, so it touches no
writer's lock) and names the recorded holder only while the lock is held; a recorded pid
alone is no proof (a killed writer leaves its record, and in another PID namespace, a Ray
node's, the number may be another process's). The holder deletes the file when it lets go, while still holding it; an acquirer
that locked a file deleted meanwhile notices (the path no longer names the inode it
locked) and tries again, so a folder that nobody writes carries no lock file.

Without ``fcntl`` (Windows) folders are created the same way but not locked.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from normlab import __version__
from normlab.core.errors import UserError
from normlab.core.fsutil import atomic_write_json

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Holder:
    """Who holds a folder's lock, as its lock file records it (fields None when not yet written)."""

    pid: int | None = None
    host: str | None = None
    command: str | None = None
    since: float | None = None

    def describe(self) -> str:
        """'pid 4242 (normlab train, since 14:03:07)', plus the host when it is another machine."""
        who = f"pid {self.pid}" if self.pid is not None else "another process"
        bits = [b for b in (self.command, time.strftime("since %H:%M:%S", time.localtime(self.since))
                            if self.since else None) if b]
        where = f" on {self.host}" if self.host and self.host != socket.gethostname() else ""
        return who + (f" ({', '.join(bits)})" if bits else "") + where


def _record(lock: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(lock.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent, or being written this instant
    return data if isinstance(data, dict) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _probe(lock: Path) -> bool | None:
    """Whether a process holds ``lock`` now: a shared lock tried without waiting and let go at
    once (it never blocks a writer for longer than the probe). None when it cannot be opened."""
    if fcntl is None:
        return None
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def holder(lock: Path) -> Holder | None:
    """Who writes the folder of ``lock`` now, without holding the lock (what readers ask): the
    recorded holder while the lock is held (a process killed without letting go leaves its
    record, but the kernel has released its lock; its pid may even be another process's, in
    another PID namespace such as a Ray node's), else None. On another host, as recorded."""
    rec = _record(lock)
    if not rec or not isinstance(rec.get("pid"), int):
        return None
    h = Holder(rec["pid"], rec.get("host"), rec.get("command"), rec.get("since"))
    if h.host in (None, socket.gethostname()):
        held_now = _probe(lock)
        if held_now is False or (held_now is None and not _alive(rec["pid"])):
            return None
    return h


def command_line() -> str:
    """'normlab train' for the CLI (console script or ``python -m normlab``), else the program's
    name ('pytest', 'ray'): what a refusal calls the holder."""
    prog = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path("python")
    name = prog.parent.name if prog.name == "__main__.py" else prog.stem
    if name == "normlab" and len(sys.argv) > 1:
        return f"normlab {sys.argv[1]}"
    return name or "python"


class FolderLock:
    """The exclusive lock of one folder; ``acquire`` never waits (a held folder is refused)."""

    def __init__(self, lock: Path) -> None:
        self.path, self.fd = Path(lock), -1

    def acquire(self, command: str) -> Holder | None:
        """Take the lock and record this process in it: None; or, when another process holds
        it, that process (as far as its record says; read for up to 3 s, since the
        holder writes its record just after it locked)."""
        if fcntl is None:  # pragma: no cover - Windows
            return None
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return self._who()
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the holder deleted this file as we opened it: lock the new one
        self.fd = fd
        rec = {"pid": os.getpid(), "host": socket.gethostname(), "command": command, "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(rec).encode("utf-8"), 0)
        return None

    def _who(self) -> Holder:
        deadline = time.monotonic() + 3.0
        while True:
            rec = _record(self.path)
            if (rec and isinstance(rec.get("pid"), int)) or time.monotonic() > deadline:
                rec = rec or {}
                return Holder(rec.get("pid"), rec.get("host"), rec.get("command"), rec.get("since"))
            time.sleep(0.02)

    def release(self) -> None:
        """Delete the lock file, then let go (see the module docstring: safe in this order)."""
        if self.fd < 0:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self.fd)  # closing the last descriptor releases the flock
        self.fd = -1


def refusal(flag: str, folder: Path, holding: Holder, other: str | None = None) -> UserError:
    """The one line a second writer gets: the folder, its holder's pid, and the fix."""
    alt = f", or {other}" if other else ""
    return UserError(f"{flag} {folder}: being written by {holding.describe()}; wait for it to finish or stop it "
                     f"(kill {holding.pid or 'PID'}){alt}")


def make_dirs(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing ancestors; the ones this call made, outermost first
    (what a failed start removes again). An existing ``folder`` gives []."""
    missing = []
    p = Path(folder)
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    made = []
    for p in reversed(missing):
        try:
            p.mkdir()
            made.append(p)
        except FileExistsError:  # another process made it meanwhile: it is not ours to remove
            pass
    return made


def create_unique(parent: Path, stem: str) -> tuple[Path, list[Path]]:
    """Create ``parent/stem``, else ``stem-1``, ``stem-2``, ...: (the folder, every folder this
    call made). ``mkdir`` fails on an existing name, so two processes asking at once get two
    folders."""
    made = make_dirs(parent)
    i = 0
    while True:
        path = parent / (stem if i == 0 else f"{stem}-{i}")
        try:
            path.mkdir()
            return path, [*made, path]
        except FileExistsError:
            i += 1


@contextlib.contextmanager
def held(folder: Path, lock_name: str, *, flag: str, kind: str, marker: str, created: Sequence[Path] = (),
         command: str | None = None, check: Callable[[], None] | None = None, other: str | None = None
         ) -> Iterator[None]:
    """``with held(folder, LOCK, flag="--out", kind="probe", marker=MARKER)``: ``folder`` (made
    if missing) is this process's to write for the block.

    Another writer is refused in one line naming its pid and the fix (``other``: the way
    around it, e.g. "choose another --out"), and so is a folder whose marker names another kind. ``check`` runs under the lock before anything is
    written (a re-check of what the caller checked before, which another process may have
    changed since); then the marker ``{"kind": kind}`` is written if absent. When the block
    fails and nothing but the lock and the new marker is in the folder, the marker goes,
    and so do the folders this claim made (or the caller: ``created``, outermost first) while
    they are empty, so a failed start leaves nothing behind.
    """

    folder = Path(folder)
    created = list(created) or make_dirs(folder)
    lock = FolderLock(folder / lock_name)
    try:
        holding = lock.acquire(command or command_line())
        if holding is not None:
            raise refusal(flag, folder, holding, other)
    except BaseException:
        _tidy(created)
        raise
    wrote = False
    try:
        found = same_kind(folder, marker, kind, flag)
        if check is not None:
            check()
        if found is None:
            atomic_write_json(folder / marker, {"kind": kind, "normlab": __version__})
            wrote = True
        yield
    except BaseException:
        if wrote and {p.name for p in folder.iterdir()} <= {lock_name, marker}:
            (folder / marker).unlink()
        lock.release()
        _tidy(created)
        raise
    lock.release()


def same_kind(folder: Path, marker: str, kind: str, flag: str) -> str | None:
    """Refuse a folder whose marker names another kind than ``kind``; the kind it names (None: none)."""
    found = marked_kind(folder, marker)
    if found not in (None, kind):
        raise UserError(f"{flag} {folder}: holds a {found} ({marker} says so), not a {kind}; choose another {flag}")
    return found


def marked_kind(folder: Path, marker: str) -> str | None:
    """The kind a folder's marker names (None without a readable marker: an older folder)."""
    rec = _record(Path(folder) / marker)
    return rec.get("kind") if rec and isinstance(rec.get("kind"), str) else None


def _tidy(created: list[Path]) -> None:
    for p in reversed(created):
        try:
            p.rmdir()  # only when empty: what another process wrote is kept
        except OSError:
            return


__all__ = ["FolderLock", "Holder", "command_line", "create_unique", "make_dirs", "held", "holder", "marked_kind", "refusal", "same_kind"]
