"""Executors: who runs the trials of a store. Both write into the same store the same way.

* ``local``: a pool of worker processes on this machine, each claiming trials from SQLite.
  For the tiny models of this lab, several 1-thread runs beat one many-thread run
  (measured in docs/studies.md), hence the default: one worker per core, 1 thread each.
* ``ray``: each trial a Ray task (Moritz et al. 2018, "Ray: A Distributed Framework for
  Emerging AI Applications") on an existing cluster (``address``) or a local instance
  (``normlab.study.ray_tasks``).
* ``slurm``: job arrays on a Slurm cluster through submitit, the driver the only writer of the
  store (``normlab.study.slurm``); its section is ``[slurm]`` (``SlurmConfig``).

Each is an :class:`Executor`: its function, whether it trains ``--batch`` K trials together,
and the type of its own options section (None: it takes none).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from normlab.core import stopping
from normlab.core.registry import Registry
from normlab.study.ray_tasks import drive
from normlab.study.slurm import run_slurm
from normlab.study.slurm_config import SlurmConfig
from normlab.study.store import Store
from normlab.study.worker import WorkerOptions, _process_main, work


@dataclass(frozen=True)
class Executor:
    """How ``study run`` hands a store to an executor: ``run(root, opts, workers=, address=,
    options=)``."""

    run: Callable[..., None]
    batches: bool = False        # trains --batch K compatible trials as one computation
    sizes_packs: bool = False    # without --batch, chooses K itself (from the trials' memory cost)
    options: type | None = None  # the type of its options section (``--slurm ...``)


EXECUTORS: Registry[Executor] = Registry("executor", "--executor", catalogue="normlab.study.catalogue")
STOP_WAIT_S = 60.0  # after a stop signal, how long workers may take to checkpoint before they are killed


def default_workers(threads: int = 1) -> int:
    """One worker per available core (per ``threads`` cores)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, threads))


def run_local(store_root: str | Path, opts: WorkerOptions, *, workers: int, address: str | None = None,
              options: Any = None) -> None:
    """Run the store's trials in ``workers`` processes on this machine (in-process if 1).

    SIGINT or SIGTERM to this process is passed to every worker, so that ``kill PID`` stops
    the study as Ctrl-C to its process group does: each worker checkpoints its trial and
    claims nothing more; this returns once they have stopped (``stopping.received()`` says why).
    """
    if workers <= 1:
        work(store_root, opts)
        return
    import multiprocessing as mp
    from multiprocessing.connection import wait

    # spawn, not fork: a forked child would inherit torch's thread pool and our SQLite handle.
    ctx = mp.get_context("spawn")
    procs: list[Any] = []

    def forward(signum: int) -> None:
        for p in procs:
            _send(p, signum)

    def start(i: int) -> None:
        p = ctx.Process(target=_process_main, args=(str(store_root), opts, os.getpid()), name=f"normlab-study-{i}")
        p.start()
        if i < len(procs):
            procs[i] = p
        else:
            procs.append(p)
        if stopping.received() is not None:  # the signal came while it started: forward() missed it
            _send(p, stopping.received())

    store = Store(store_root)
    try:
        with stopping.handling(forward):
            for i in range(workers):
                start(i)
            stopped_at = None
            while any(p.is_alive() for p in procs):
                wait([p.sentinel for p in procs if p.is_alive()], timeout=opts.poll_s)
                if stopping.received() is not None:
                    stopped_at = stopped_at or time.monotonic()
                    if time.monotonic() - stopped_at > STOP_WAIT_S:
                        for p in procs:  # its trial stays running under a dead pid: the rerun reclaims it
                            p.kill()
                    continue
                # A worker killed by a signal (OOM killer, SIGKILL) is replaced while trials remain;
                # its trial is reclaimed by the store (dead pid) and resumed. The store fails a trial
                # that keeps killing its workers, so this loop ends.
                for i, p in enumerate(procs):
                    if not p.is_alive() and p.exitcode is not None and p.exitcode < 0 and store.unfinished():
                        start(i)
            for p in procs:
                p.join()
    finally:
        store.close()


def _send(proc: Any, signum: int | None) -> None:
    if signum is not None and proc.pid is not None and proc.exitcode is None:  # never a reaped pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signum)


def run_ray(store_root: str | Path, opts: WorkerOptions, *, workers: int, address: str | None = None,
            options: Any = None) -> None:
    """Run the store's trials as Ray tasks (``address``: an existing cluster; else a local one)."""

    drive(store_root, opts, workers=workers, address=address)


LOCAL = Executor(run_local, batches=True)
RAY = Executor(run_ray)
SLURM = Executor(run_slurm, batches=True, sizes_packs=True, options=SlurmConfig)
