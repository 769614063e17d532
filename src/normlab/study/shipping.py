"""Trials that run away from the driver (a Ray task, a Slurm job): where they train, and how a
finished run directory comes back.

Both remote executors keep the store on the driver's disk and never let a trial open it. A
trial trains in its run directory when its node sees the store's filesystem (and can then
resume there after a death), otherwise in a scratch directory whose contents are shipped back
as a gzipped tarball; the driver checks the archive before installing it (:func:`unpack_run`).

A file lock on RUN/.trial.lock keeps an attempt from training while an earlier one, not yet
ended by its scheduler, still writes there (:class:`exclusive`).
"""

from __future__ import annotations

import fcntl
import io
import os
import posixpath
import shutil
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from normlab.run import checkpoint
from normlab.run.dir import RunDir


class UnsafeRunArchive(ValueError):
    """A shipped-back run directory holding something other than files and folders inside it."""


class exclusive:
    """``with exclusive(run_dir, wait_s) as busy``: an exclusive lock on RUN/.trial.lock, or
    ``busy`` (an error text) when an earlier attempt still holds it after ``wait_s``."""

    def __init__(self, run_dir: Path, wait_s: float) -> None:
        self.path, self.wait_s, self.fd = RunDir(run_dir).trial_lock, wait_s, -1

    def __enter__(self) -> str | None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return None
            except BlockingIOError:
                if time.monotonic() > deadline:  # __exit__ still runs: it closes the file
                    return f"{self.path.parent}: still in use by an earlier attempt after {self.wait_s:g} s"
                time.sleep(0.2)

    def __exit__(self, *exc: Any) -> None:
        os.close(self.fd)  # releases the lock; a killed process releases it the same way


def checkpoint_step(run_dir: Path) -> int | None:
    """The step of RUN's intact latest checkpoint (what a resumed attempt starts from), or None."""

    run = RunDir(run_dir)
    if not run.has_checkpoints():
        return None
    found = run.find_checkpoint("latest")
    return int(checkpoint.read_state(found)["loop"]["step"]) if found else None


def scratch_dir() -> Path:
    """A node-local directory for a trial whose node does not see the store (removed by the caller)."""
    return Path(tempfile.mkdtemp(prefix="normlab-trial-"))


def pack(run_dir: Path) -> bytes:
    """RUN as a gzipped tarball (without the attempt's lock file), to ship back to the driver."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(run_dir, arcname=".", filter=lambda m: None if m.name == f"./{RunDir(run_dir).trial_lock.name}" else m)
    return buf.getvalue()


def unpack_run(packed: bytes, run_dir: Path) -> None:
    """Install a run directory shipped back by a trial on a node without the store's filesystem.

    Only regular files and directories inside the run directory are accepted; one link,
    device, absolute path or ``..`` refuses the whole archive (``UnsafeRunArchive``) before
    anything is written. It is unpacked beside ``run_dir`` and renamed into place, so a
    refused or torn archive leaves no half-written run directory.
    """
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
        members = tar.getmembers()
        for m in members:
            name = posixpath.normpath(m.name)
            if name.startswith("/") or name == ".." or name.startswith("../"):
                raise UnsafeRunArchive(f"run archive refused: {m.name!r} points outside the run directory")
            if not (m.isfile() or m.isdir()):
                kind = "a symlink" if m.issym() else "a hard link" if m.islnk() else "not a regular file"
                raise UnsafeRunArchive(f"run archive refused: {m.name!r} is {kind}")
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{run_dir.name}.unpack-", dir=run_dir.parent))
        try:
            tar.extractall(staging, members=members, filter="data")  # "data": a second line of defence
            old = run_dir.with_name(f".{run_dir.name}.old")
            if run_dir.exists():  # a partial earlier attempt: the shipped run replaces it
                shutil.rmtree(old, ignore_errors=True)
                os.replace(run_dir, old)
            os.replace(staging, run_dir)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def install(packed: bytes | None, run_dir: Path, where: str) -> str | None:
    """Install a shipped-back run (``None``: nothing shipped); the error text when refused."""
    if not packed:
        return None
    try:
        unpack_run(packed, run_dir)
    except (UnsafeRunArchive, tarfile.TarError) as e:
        return f"{e} (shipped by {where})"
    return None
