"""The ray executor: each trial one Ray task, the driver the only writer of the store.

The driver (``normlab study run --executor ray``) claims trials, renews their leases and
records every result; tasks never open the database, so SQLite stays on one machine.
Where a task's node sees the store's path (a shared filesystem) it trains in the trial's
run directory and can resume there; where it does not, it trains in a temporary directory
and ships the run directory back as a tarball, which the driver checks before unpacking
(``normlab.study.shipping``, shared with the Slurm executor).

Faults (docs/studies.md, "Faults on a cluster"):

* a task's process or node dies (``NodeDiedError``, ``WorkerCrashedError``, ...): the trial
  is released to the queue (a death, not a failure) and rerun on a surviving node, from its
  checkpoint when the run directory is shared, from scratch when it is not;
* the driver dies: Ray ends its tasks; the next ``study run`` reclaims the trials it held
  (dead pid on this host, or lease expiry elsewhere) and resumes them.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from normlab.core.errors import UserError
from normlab.core.fsutil import append_jsonl
from normlab.run.dir import RunDir
from normlab.study import shipping
from normlab.study.store import Lease, Store, worker_id
from normlab.study.worker import Heartbeat, WorkerOptions, run_claimed, study_env

# Ray errors that mean the task's process or node died, not that the trial failed.
_LOST = ("WorkerCrashedError", "NodeDiedError", "LocalRayletDiedError", "ObjectLostError", "OutOfMemoryError")


def ray_trial(config_json: str, run_dir: str, store_root: str, opts: WorkerOptions,
              study: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any] | None, str | None, bytes | None, dict[str, Any]]:
    """A Ray task: run one trial; (summary, error, tarred run dir if not shared, where it ran).

    ``study`` ({"spec": {name, metric}, "params": axis values}) names the trial for its loggers
    exactly as a local worker does (W&B group, TensorBoard hparams; ``study_env``), wherever
    the task trains (the run directory, or a scratch copy on a node without the store)."""

    shared = Path(store_root).is_dir()
    scratch = None if shared else shipping.scratch_dir()
    target = Path(run_dir) if scratch is None else scratch / "run"
    try:
        with shipping.exclusive(target, opts.lease_s) as busy:
            if busy:
                return None, busy, None, {}
            where = _record_node(target, shared)
            claim = Lease("ray", 0, dict((study or {}).get("params", {})), config_json, target)
            with study_env((study or {}).get("spec", {}), [claim] if study else []):
                summary, error = run_claimed(claim, opts)
        packed = shipping.pack(target) if scratch is not None and target.exists() else None
        return summary, error, packed, where
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _record_node(run_dir: Path, shared: bool) -> dict[str, Any]:
    """Append where this attempt runs (Ray node, host, pid, checkpoint it starts from) to
    RUN/ray_nodes.jsonl, and return it for the store's event."""
    import ray

    node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    where = {"node_id": node, "node_ip": ray.util.get_node_ip_address() if node else None,
             "host": socket.gethostname(), "pid": os.getpid(), "shared_fs": shared,
             "checkpoint_step": shipping.checkpoint_step(run_dir), "at": time.time()}
    append_jsonl(RunDir(run_dir).ray_nodes, where)  # one line per attempt, where it ran
    return where


def _lost(e: BaseException) -> bool:
    """Whether a failed ``ray.get`` means the task died with its process or node."""
    import ray.exceptions as rx

    if isinstance(e, rx.RayTaskError):  # the task itself raised: a failure of the trial
        return False
    return isinstance(e, tuple(getattr(rx, n) for n in _LOST if hasattr(rx, n)))


def _connect(address: str | None, cpus: int, env: dict[str, str]) -> None:
    import ray

    kw: dict[str, Any] = {"address": address} if address else {"num_cpus": cpus}
    try:
        ray.init(**kw, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env={"env_vars": env} if env else None)
    except (ConnectionError, ray.exceptions.AuthenticationError) as e:
        if not address:
            raise
        raise UserError(f"--ray-address {address}: cannot join that Ray cluster ({e}); check the address "
                        "(`ray status` on the head) and give this process the cluster's token: "
                        "RAY_AUTH_TOKEN=TOKEN or RAY_AUTH_TOKEN_PATH=FILE (`ray get-auth-token` on the head "
                        "prints it)") from None


def drive(store_root: str | Path, opts: WorkerOptions, *, workers: int, address: str | None = None) -> None:
    """Run the store's trials as Ray tasks until all are final (the ``ray`` executor)."""
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'normlab[ray]'") from None
    store = Store(store_root)
    root = store.root.resolve()
    env = {k: v for k, v in os.environ.items() if k.startswith("NORMLAB_") or k == "PYTHONPATH"}
    started = not ray.is_initialized()
    if started:
        _connect(address, workers * opts.threads, env)
    task = ray.remote(num_cpus=opts.threads, max_retries=0)(ray_trial)

    def slots() -> int:  # re-read each round: nodes join and leave a live cluster
        return max(1, int(ray.cluster_resources().get("CPU", 1)) // opts.threads) if address else workers

    me = worker_id()  # the driver holds every lease; tasks never touch the database
    inflight: dict[Any, Lease] = {}
    beat = Heartbeat(root, [], opts.heartbeat_s)
    try:
        with beat:
            while True:
                while len(inflight) < slots():
                    claim = store.claim(me, opts.lease_s, opts.retries)
                    if claim is None:
                        break
                    inflight[task.remote(claim.config_json, str(claim.run_dir), str(root), opts,
                                         trial_study(store.spec, claim))] = claim
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
                    _record(store, me, claim, ref, opts)
    except KeyboardInterrupt:
        for claim in inflight.values():  # resumable from their checkpoints on the next run
            store.finish(claim, me, summary={"status": "interrupted"}, retries=opts.retries)
        raise
    finally:
        store.close()
        if started:
            ray.shutdown()


def trial_study(spec: dict[str, Any], claim: Lease) -> dict[str, Any]:
    """What a Ray task needs to name its trial for the loggers: the study's name and metric, the
    trial's axis values (the store's spec is not shipped: it can be large, and tasks never read it)."""
    return {"spec": {"name": spec.get("name"), "metric": spec.get("metric", "best_val_loss")},
            "params": claim.params}


def _record(store: Store, me: str, claim: Lease, ref: Any, opts: WorkerOptions) -> None:
    """Store the outcome of one finished task: its result, a failure, or a loss."""
    import ray

    try:
        summary, error, packed, where = ray.get(ref)
    except Exception as e:
        reason = f"ray task lost: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if _lost(e):
            store.release(claim, me, reason, retries=opts.retries)
            return
        summary, error, packed, where = None, f"ray task failed: {type(e).__name__}: {e}", None, {}
    refused = shipping.install(packed, claim.run_dir, f"node {where.get('node_id')}")
    if refused:
        summary, error = None, refused
    note = f"ray node {where['node_id']} ({where['node_ip']})" if where.get("node_id") else None
    store.finish(claim, me, summary=summary, error=error, retries=opts.retries, note=note)
