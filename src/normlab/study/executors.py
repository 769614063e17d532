"""Executors: who runs the trials of a store. Both write into the same store the same way.

* ``local``: a pool of worker processes on this machine, each claiming trials from SQLite.
  For the tiny models of this lab, several 1-thread runs beat one many-thread run
  (measured in docs/studies.md), hence the default: one worker per core, 1 thread each.
* ``ray``: each trial a Ray task (Moritz et al. 2018, "Ray: A Distributed Framework for
  Emerging AI Applications") on an existing cluster (``address``) or a local instance
  (``normlab.study.ray_tasks``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from normlab.core.registry import Registry
from normlab.study.ray_tasks import drive
from normlab.study.store import Store
from normlab.study.worker import WorkerOptions, _process_main, work

Executor = Callable[..., None]
EXECUTORS: Registry[Executor] = Registry("executor", "--executor", catalogue="normlab.study.catalogue")


def default_workers(threads: int = 1) -> int:
    """One worker per available core (per ``threads`` cores)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, threads))


def run_local(store_root: str | Path, opts: WorkerOptions, *, workers: int, address: str | None = None) -> None:
    """Run the store's trials in ``workers`` processes on this machine (in-process if 1)."""
    if workers <= 1:
        work(store_root, opts)
        return
    import multiprocessing as mp

    # spawn, not fork: a forked child would inherit torch's thread pool and our SQLite handle.
    ctx = mp.get_context("spawn")

    def start(i: int) -> Any:
        p = ctx.Process(target=_process_main, args=(str(store_root), opts, os.getpid()), name=f"normlab-study-{i}")
        p.start()
        return p

    procs = [start(i) for i in range(workers)]
    # A worker killed by a signal (OOM killer, SIGKILL) is replaced while trials remain; its
    # trial is reclaimed by the store (dead pid) and resumed. The store fails a trial that
    # keeps killing its workers, so this loop ends.
    store = Store(store_root)
    try:
        while any(p.is_alive() for p in procs):
            time.sleep(opts.poll_s)
            for i, p in enumerate(procs):
                if not p.is_alive() and p.exitcode is not None and p.exitcode < 0 and store.unfinished():
                    procs[i] = start(i)
        for p in procs:
            p.join()
    except KeyboardInterrupt:
        for p in procs:  # they got the same SIGINT; each records its trial as interrupted
            p.join(timeout=30)
        raise
    finally:
        store.close()


def run_ray(store_root: str | Path, opts: WorkerOptions, *, workers: int, address: str | None = None) -> None:
    """Run the store's trials as Ray tasks (``address``: an existing cluster; else a local one)."""

    drive(store_root, opts, workers=workers, address=address)
