"""The slurm executor's memory of its jobs (the ledger) and its view of the queue (squeue).

The ledger, STORE/slurm/jobs.jsonl, is what lets a driver killed mid-study reattach: every
submission is written *before* ``sbatch`` (its token, which is the jobs' name, and the trials
and attempts of each array task) and again after (the job ids); a job whose outcome the driver
recorded is closed. A rerun reads the open jobs, asks squeue which are still queued or
running, and adopts their trials instead of submitting them again. A submission cut between
``sbatch`` and its second line is found by its name in the queue.

Only this module spells the files under STORE/slurm/ (the submitit folder included).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normlab.core.errors import UserError
from normlab.core.fsutil import append_jsonl, read_jsonl

DIR, LEDGER, JOBS = "slurm", "jobs.jsonl", "jobs"
# Pending reasons under which a job will not start by itself: held after a failed launch, or by
# an admin or user. Held longer than slurm.stuck_s, it is cancelled and submitted again.
HELD = ("launch failed requeued held", "JobHeldAdmin", "JobHeldUser")
# Pending reasons that no wait or resubmission cures: the request does not fit the cluster.
# (A drained or down node is not one: ReqNodeNotAvail passes when the node comes back.)
IMPOSSIBLE = ("BadConstraints", "PartitionConfig", "PartitionTimeLimit", "PartitionNodeLimit", "InvalidAccount",
              "InvalidQOS", "QOSMaxWallDurationPerJobLimit", "AccountNotAllowed")


@dataclass
class Open:
    """A submitted job (one array task) whose outcome is not yet recorded."""

    job: str | None                  # Slurm's id ("123_4"), None until learnt
    token: str                       # the job's name: the submission it belongs to
    index: int                       # its array index (0 for a lone job)
    trials: list[tuple[str, int]]    # (trial id, attempt) of its pack


class Ledger:
    """STORE/slurm/: the ledger and submitit's job folder."""

    def __init__(self, store_root: Path) -> None:
        self.dir = Path(store_root) / DIR
        self.path = self.dir / LEDGER

    @property
    def jobs_dir(self) -> Path:
        return self.dir / JOBS

    @staticmethod
    def new_token() -> str:
        return f"normlab-{uuid.uuid4().hex[:12]}"

    def intend(self, token: str, packs: list[list[tuple[str, int]]]) -> None:
        """Before sbatch: the trials of each array task of submission ``token``."""
        self.dir.mkdir(parents=True, exist_ok=True)
        append_jsonl(self.path, {"event": "intend", "token": token, "packs": packs, "at": time.time()})

    def submitted(self, token: str, jobs: list[str]) -> None:
        append_jsonl(self.path, {"event": "submitted", "token": token, "jobs": jobs, "at": time.time()})

    def close(self, job: str | None, token: str, index: int, why: str) -> None:
        append_jsonl(self.path, {"event": "closed", "job": job, "token": token, "index": index, "why": why,
                                 "at": time.time()})

    def open_jobs(self) -> list[Open]:
        """Every array task submitted (or about to be) and not closed, in submission order."""
        if not self.path.is_file():
            return []
        out: dict[tuple[str, int], Open] = {}
        for row in read_jsonl(self.path):
            token = str(row.get("token"))
            if row.get("event") == "intend":
                for i, pack in enumerate(row["packs"]):
                    out[(token, i)] = Open(None, token, i, [(str(t), int(a)) for t, a in pack])
            elif row.get("event") == "submitted":
                for i, job in enumerate(row["jobs"]):
                    if (token, i) in out:
                        out[(token, i)].job = str(job)
            elif row.get("event") == "closed":
                out.pop((token, int(row.get("index", 0))), None)
        return list(out.values())


@dataclass(frozen=True)
class Queued:
    state: str   # PENDING, RUNNING, COMPLETING, ...
    reason: str  # why it is pending ("None" when running)


def squeue(tokens: list[str]) -> dict[str, tuple[str, Queued]]:
    """{job id: (its name, state and reason)} for every job named by ``tokens`` still in the queue,
    one line per array task. Raises SlurmUnreachable when squeue fails."""
    if not tokens:
        return {}
    out = _slurm(["squeue", "--noheader", "--array", "--name", ",".join(sorted(set(tokens))),
                  "--format", "%i|%j|%T|%r"])
    found = {}
    for line in out.splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) == 4:
            found[parts[0]] = (parts[1], Queued(parts[2], parts[3]))
    return found


def scancel(jobs: list[str]) -> None:
    if jobs:
        _slurm(["scancel", *jobs])


class SlurmUnreachable(RuntimeError):
    """A Slurm command failed (the controller is down or unreachable): retried by the driver."""


def _slurm(cmd: list[str]) -> str:
    if shutil.which(cmd[0]) is None:
        raise UserError(f"--executor slurm: {cmd[0]} is not on PATH; run the study from a Slurm login "
                        "node (or a machine with the Slurm client commands and its slurm.conf)")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise SlurmUnreachable(f"{cmd[0]} did not answer in 120 s") from None
    if done.returncode != 0:
        raise SlurmUnreachable(f"{' '.join(cmd[:1])} failed: {(done.stderr or done.stdout).strip()[:300]}")
    return done.stdout


def started_tarball(folder: Path, trial: str, attempt: int) -> Path:
    """Where the driver puts a started run for a job that trains in node scratch to resume."""
    return Path(folder) / "started" / f"{trial}-a{attempt}.tar.gz"


def array_index(job: str) -> int:
    """The array index of "123_4" (0 for a lone job "123")."""
    _, sep, idx = job.partition("_")
    return int(idx) if sep and idx.isdigit() else 0


def result_of(folder: Path, job: str) -> tuple[str, Any] | None:
    """submitit's result file of ``job``: ("success", value) or ("error", traceback); None if absent."""
    from submitit.core.utils import JobPaths, pickle_load

    path = JobPaths(folder, job_id=job, task_id=0).result_pickle
    if not path.is_file():
        return None
    try:
        got = pickle_load(path)
    except Exception as e:  # torn by a killed job, or written by another submitit
        return "error", f"unreadable result file {path}: {type(e).__name__}: {e}"
    return tuple(got) if isinstance(got, (tuple, list)) and len(got) == 2 else ("error", f"{path}: not a result")
