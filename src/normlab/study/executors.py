"""Executors: who runs the trials of a store. Both write into the same store the same way.

* ``local``: a pool of worker processes on this machine, each claiming trials from SQLite.
  For the tiny models of this lab, several 1-thread runs beat one many-thread run
  (measured in docs/studies.md), hence the default: one worker per core, 1 thread each.
* ``ray``: each trial a Ray task (Moritz et al. 2018, "Ray: A Distributed Framework for
  Emerging AI Applications") on an existing cluster (``address``) or a local instance.
  The driver alone touches the database (claims, heartbeats, results), so only the run
  directories need a shared filesystem; without one, a task ships its run directory back.
"""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from normlab.registry import Registry
from normlab.study.store import Store, worker_id
from normlab.study.worker import Heartbeat, WorkerOptions, _process_main, work

Executor = Callable[..., None]
EXECUTORS: Registry[Executor] = Registry("executor", "--executor")


def default_workers(threads: int = 1) -> int:
    """One worker per available core (per ``threads`` cores)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, threads))


@EXECUTORS.register("local")
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


def _ray_trial(config_json: str, run_dir: str, store_root: str, resume: bool, opts: WorkerOptions
               ) -> tuple[dict[str, Any] | None, str | None, bytes | None]:
    """A Ray task: run one trial; return (summary, error, tarred run dir if not shared)."""
    from normlab.study.store import Claim
    from normlab.study.worker import run_claimed

    shared = Path(store_root).is_dir()
    target = Path(run_dir) if shared else Path(tempfile.mkdtemp(prefix="normlab-trial-")) / "run"
    claim = Claim("ray", 0, {}, config_json, target)
    summary, error = run_claimed(claim, opts)
    packed = None
    if not shared and target.exists():
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(target, arcname=".")
        packed = buf.getvalue()
    return summary, error, packed


def unpack_run(packed: bytes, run_dir: Path) -> None:
    """Extract a run directory shipped back by a task on a node without the store's filesystem."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
        tar.extractall(run_dir, filter="data")  # "data": no absolute paths, links or '..' escapes


@EXECUTORS.register("ray")
def run_ray(store_root: str | Path, opts: WorkerOptions, *, workers: int, address: str | None = None) -> None:
    """Run the store's trials as Ray tasks (``address``: an existing cluster; else a local one)."""
    try:
        import ray
    except ImportError:
        from normlab.errors import UserError

        raise UserError("--executor ray needs Ray: pip install 'normlab[ray]'") from None
    store = Store(store_root)
    root = store.root.resolve()
    env = {k: v for k, v in os.environ.items() if k.startswith("NORMLAB_") or k == "PYTHONPATH"}
    started = not ray.is_initialized()
    if started:
        kw: dict[str, Any] = {"address": address} if address else {"num_cpus": workers * opts.threads}
        ray.init(**kw, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env={"env_vars": env} if env else None)
    slots = max(1, int(ray.cluster_resources().get("CPU", 1)) // opts.threads) if address else workers
    task = ray.remote(num_cpus=opts.threads, max_retries=0)(_ray_trial)
    me = worker_id()  # the driver holds every lease; tasks never touch the database
    inflight: dict[Any, Any] = {}
    beat = Heartbeat(root, [], opts.heartbeat_s)
    try:
        with beat:
            while True:
                while len(inflight) < slots:
                    claim = store.claim(me, opts.lease_s, opts.retries)
                    if claim is None:
                        break
                    resume = (claim.run_dir / "config.json").is_file()
                    ref = task.remote(claim.config_json, str(claim.run_dir), str(root), resume, opts)
                    inflight[ref] = claim
                    beat.items.append((claim.id, claim.attempt))
                if not inflight:
                    if store.unfinished() == 0:
                        break
                    time.sleep(opts.poll_s)
                    continue
                done, _ = ray.wait(list(inflight), num_returns=1, timeout=opts.poll_s)
                for ref in done:
                    claim = inflight.pop(ref)
                    beat.items.remove((claim.id, claim.attempt))
                    try:
                        summary, error, packed = ray.get(ref)
                    except Exception as e:  # the task itself died (worker crash, node loss)
                        summary, error, packed = None, f"ray task failed: {type(e).__name__}: {e}", None
                    if packed:
                        unpack_run(packed, claim.run_dir)
                    store.finish(claim, me, summary=summary, error=error, retries=opts.retries)
    except KeyboardInterrupt:
        for claim in inflight.values():  # resumable from their checkpoints on the next run
            store.finish(claim, me, summary={"status": "interrupted"}, retries=opts.retries)
        raise
    finally:
        store.close()
        if started:
            ray.shutdown()
