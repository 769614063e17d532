"""Studies on a real two-node Ray cluster started with ``ray start``, and its faults.

Every test runs in its own network namespace (tests/netns.py): the head and a worker node
(``ray start --block``, one CPU each, a custom resource naming each) and the driver
(``normlab study run --executor ray --ray-address``) talk over loopback only. The faults:
a worker node's raylet SIGKILLed while it trains a trial, a node that cannot see the store
(its run directories come back as tarballs), a hostile tarball, the driver SIGKILLed.

The tests share clusters where they can (tests/netns.py runs a module's netns tests in one
namespace): ``TestOnASharedCluster`` runs on one token-authenticated head and worker, and its
last test kills that worker; ``TestANodeWithoutTheStore`` on a head without CPUs and a worker that
cannot see the store, whose last test kills that worker. Each class's tests run in file order.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from netns import INSIDE
from normlab.core.fsutil import read_jsonl
from normlab.run.dir import RAY_NODES as NODES_LOG
from normlab.study.store import Store

from .conftest import HERE, SRC, cli, tiny_spec
from .fake_trials import check_hostile_refused, hostile_spec
from .ray_cluster import Cluster, stop_process

pytest.importorskip("ray")

STEPS = 120
DEADLINE = 300  # seconds for one study command; far above what it takes


@pytest.fixture(scope="class")
def authed(tmp_path_factory: pytest.TempPathFactory):
    """A head and a worker node (one CPU each) that accept only drivers holding the cluster's
    token; None outside the test's namespace, where the test body does not run."""
    if not os.environ.get(INSIDE):
        yield None
        return
    d = tmp_path_factory.mktemp("authed")
    token = d / "token"
    token.write_text("normlab-test-" + os.urandom(16).hex())
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    with Cluster(d, env=auth, prefix="a") as cluster:
        cluster.start("head", 1, head=True)
        cluster.start("w1", 1)
        cluster.wait_nodes()
        cluster.auth = auth  # type: ignore[attr-defined]
        yield cluster


@pytest.fixture(scope="class")
def storeless(tmp_path_factory: pytest.TempPathFactory):
    """A head without CPUs and a worker node that cannot see ``cluster.hidden`` (where the tests
    put their stores): every trial trains on the worker, and its runs come back as tarballs."""
    if not os.environ.get(INSIDE):
        yield None
        return
    d = tmp_path_factory.mktemp("storeless")
    hidden = d / "driver"
    hidden.mkdir()
    # fake_trials (the hostile archives) must import on the worker, which keeps the env it starts with
    path = {"PYTHONPATH": os.pathsep.join([str(HERE), str(SRC), os.environ.get("PYTHONPATH", "")])}
    with Cluster(d, env=path, prefix="b") as cluster:
        cluster.start("head", 0, head=True)
        cluster.start("w1", 1, hide=hidden)  # the stores' folder does not exist there
        cluster.wait_nodes()
        cluster.hidden = hidden  # type: ignore[attr-defined]
        yield cluster


def _spec(tmp_path: Path, steps: int = STEPS, **kw) -> Path:
    return tiny_spec(tmp_path / "s.toml", steps=steps, every=60, ckpt=10, **kw)


def _env(data_dir: Path | None = None, **extra: str) -> dict[str, str]:
    env = {**os.environ, **extra}
    if data_dir is not None:
        env["NORMLAB_DATA_DIR"] = str(data_dir)
    return env


def _study(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "w") as fh:
        return subprocess.Popen(cli("study", "run", *args), env=env, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _finish(proc: subprocess.Popen, log: Path, timeout: float = DEADLINE) -> str:
    try:
        proc.wait(timeout=timeout)
    finally:
        stop_process(proc)
    return log.read_text(errors="replace")


def _attempts(run_dir: Path) -> list[dict]:
    """RUN/ray_nodes.jsonl: where each attempt of the trial ran."""
    return read_jsonl(run_dir / NODES_LOG)


def _check_complete_once(store: Store, steps: int = STEPS) -> None:
    """Every trial completed, one ``completed`` event each, one run directory each, no step
    logged twice or missing."""
    trials = store.trials()
    assert {t.status for t in trials} == {"completed"}, [(t.id, t.status, t.error) for t in trials]
    for t in trials:
        events = [e["event"] for e in store.events(t.id)]
        assert events.count("completed") == 1, (t.id, events)
        logged = [r["step"] for r in read_jsonl(t.run_dir / "metrics.jsonl")]
        assert logged == sorted(set(logged)) and logged[-1] == steps == t.summary["steps"], (t.id, logged)
    assert sorted(os.listdir(store.root / "runs")) == sorted(t.id for t in trials)


def _wait_for(what: str, cond, proc: subprocess.Popen, log: Path, timeout: float = DEADLINE):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = cond()
        if got:
            return got
        assert proc.poll() is None, f"the study ended before {what}:\n{log.read_text()[-3000:]}"
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-3000:]}")


def _training_on(store_root: Path, node_id: str):
    """A trial of the store whose current attempt trains on ``node_id`` and has a checkpoint."""
    for run in sorted((store_root / "runs").glob("*")):
        tries = _attempts(run) if (run / NODES_LOG).exists() else []
        if tries and tries[-1]["node_id"] == node_id and (run / "checkpoints" / "latest").is_dir() \
                and not (run / "summary.json").exists():
            return run
    return None


class TestOnASharedCluster:
    @pytest.mark.netns(timeout=900)
    def test_study_on_a_two_node_cluster_with_token_auth_runs_trials_on_both(self, tmp_path, data_dir, authed) -> None:
        cluster, auth = authed, authed.auth
        spec, root = _spec(tmp_path, seeds="[0, 1, 2]"), tmp_path / "store"
        ids = cluster.wait_nodes()
        args = [str(spec), "--store", str(root), "--executor", "ray", "--ray-address", cluster.address]
        # Without the cluster's token the driver is refused: one line naming the fix, exit 2.
        nokey = {k: v for k, v in _env(data_dir, HOME=str(tmp_path), RAY_gcs_server_port_wait_time_s="3").items()
                 if not k.startswith("RAY_AUTH")}
        r = subprocess.run(cli("study", "run", *args), env=nokey, capture_output=True, text=True, timeout=DEADLINE)
        assert r.returncode == 2, r.stderr[-3000:]
        assert "RAY_AUTH_TOKEN" in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]
        log = tmp_path / "study.log"
        out = _finish(_study(args, _env(data_dir, **auth), log), log)
        assert "completed 6" in out, out[-3000:]
        store = Store(root)
        _check_complete_once(store)
        ran_on = {t.id: _attempts(t.run_dir) for t in store.trials()}
        assert all(len(a) == 1 and a[0]["shared_fs"] and a[0]["node_ip"] == "127.0.0.1" for a in ran_on.values())
        assert {a[0]["node_id"] for a in ran_on.values()} == set(ids.values())  # both nodes trained trials
        for t in store.trials():  # the store's event names the node too
            (done,) = [e for e in store.events(t.id) if e["event"] == "completed"]
            assert done["detail"] == f"ray node {ran_on[t.id][0]['node_id']} (127.0.0.1)"

    @pytest.mark.netns(timeout=900)
    def test_driver_killed_mid_study_then_rerun_finishes_each_trial_once(self, tmp_path, data_dir, authed) -> None:
        spec, root = _spec(tmp_path, seeds="[0, 1, 2]"), tmp_path / "store"
        cluster, env = authed, _env(data_dir, **authed.auth)
        args = ["--store", str(root), "--executor", "ray", "--ray-address", cluster.address]
        log = tmp_path / "first.log"
        proc = _study([str(spec), *args], env, log)

        def done_and_midway():
            if not (root / "spec.json").exists():
                return None
            trials = Store(root).trials()
            done = [t for t in trials if t.status == "completed"]
            midway = [t for t in trials if t.status == "running" and (t.run_dir / "checkpoints" / "latest").is_dir()]
            return done and midway and (done, midway)

        try:
            done, midway = _wait_for("one finished trial and one part-way", done_and_midway, proc, log)
        finally:
            stop_process(proc)  # SIGKILL: the driver dies with its leases held
        before = {t.id: t for t in Store(root).trials()}
        assert before[midway[0].id].status == "running"
        log2 = tmp_path / "second.log"
        out = _finish(_study(args, env, log2), log2)  # same cluster, same store, no spec
        assert "completed 6" in out, out[-3000:]
        store = Store(root)
        _check_complete_once(store)
        for t in store.trials():
            was = before[t.id].status
            if was == "completed":  # finished before the kill: not run again
                assert t.attempts == 1 and len(_attempts(t.run_dir)) == 1, t.id
            elif was == "running":  # in flight: reclaimed from the dead driver, resumed or rerun once
                assert t.attempts == 2 and [e["event"] for e in store.events(t.id)].count("lost") == 1, t.id
            else:
                assert t.attempts == 1, t.id
        for t in midway:  # it had a checkpoint when the driver died: the rerun continued from it
            last = _attempts(store.root / "runs" / t.id)[-1]
            assert (last["checkpoint_step"] or 0) >= 10, _attempts(store.root / "runs" / t.id)
            # resumed mid-run, or its training had ended before the kill and the rerun only read its summary
            resumed = "resumes" in json.loads((store.root / "runs" / t.id / "env.json").read_text())
            assert resumed or last["checkpoint_step"] == STEPS, _attempts(store.root / "runs" / t.id)

    @pytest.mark.netns(timeout=900)
    def test_worker_node_lost_mid_trial_the_trial_resumes_on_the_survivor(self, tmp_path, data_dir, authed) -> None:
        # retries = 0: a node loss that counted as a failure would end the trial 'failed'. Trials ten
        # times longer than the other tests': on an idle machine 120 steps end between the first
        # checkpoint and the kill, and the test then sees no loss at all.
        spec, root = _spec(tmp_path, steps=10 * STEPS, extra="retries = 0"), tmp_path / "store"
        cluster = authed  # the class's last test: its worker node dies here
        worker = next(n for n in cluster.nodes if n.name == "w1")
        log = tmp_path / "study.log"
        proc = _study([str(spec), "--store", str(root), "--executor", "ray", "--ray-address", cluster.address,
                       "--lease", "600"], _env(data_dir, **cluster.auth), log)
        try:
            victim = _wait_for("a trial training on the worker node", lambda: _training_on(root, worker.id),
                               proc, log)
            cluster.kill_raylet(worker)
            out = _finish(proc, log)
        finally:
            stop_process(proc)
        assert "completed 4" in out, out[-3000:]
        store = Store(root)
        _check_complete_once(store, steps=10 * STEPS)
        (lost,) = [t for t in store.trials() if t.run_dir == victim]
        events = store.events(lost.id)
        # the driver saw the task die with its node and put the trial back at once (no lease wait)
        assert [e["event"] for e in events] == ["claim", "lost", "claim", "completed"], events
        assert "NodeDiedError" in events[1]["detail"] or "WorkerCrashedError" in events[1]["detail"], events[1]
        first, second = _attempts(lost.run_dir)
        assert first["node_id"] == worker.id and second["node_id"] == cluster.nodes[0].id
        assert second["checkpoint_step"] and second["checkpoint_step"] >= 10  # resumed, not restarted
        assert "resumes" in json.loads((lost.run_dir / "env.json").read_text())
        for t in store.trials():
            if t.id != lost.id:
                assert t.attempts == 1 and len(_attempts(t.run_dir)) == 1


class TestANodeWithoutTheStore:
    @pytest.mark.netns(timeout=900)
    def test_a_shipped_back_run_with_a_symlink_or_a_path_escape_is_refused(self, tmp_path, fake_path, storeless) -> None:
        spec = hostile_spec(tmp_path / "s.toml", fake_path)
        cluster = storeless  # every trial runs on the node without the store
        root = cluster.hidden / "hostile-store"
        log = tmp_path / "study.log"
        out = _finish(_study([str(spec), "--store", str(root), "--executor", "ray", "--ray-address",
                              cluster.address], _env(), log), log)
        check_hostile_refused(root, out)  # nothing of either archive written: no run directory, no staging
        assert not list(tmp_path.rglob("escaped")) and not list(cluster.hidden.parent.rglob("escaped"))

    @pytest.mark.netns(timeout=900)
    def test_node_without_the_store_ships_runs_back_and_its_lost_trial_reruns_from_scratch(
            self, tmp_path, data_dir, storeless) -> None:
        cluster = storeless  # the class's last test: its worker node dies here
        spec, root = _spec(tmp_path, seeds="[0, 1, 2]", extra="retries = 0"), cluster.hidden / "store"
        scratch = Path(os.environ["TMPDIR"])  # where tasks on the worker node train (tests/netns.py)
        # The head has no CPU, so every trial trains on the worker, one after another: a shipped-back
        # trial followed by one in training is certain to happen, however fast or loaded the machine
        # (with a CPU on the head, the head could take all but one trial and the window never came).
        worker = next(n for n in cluster.nodes if n.name == "w1")
        log = tmp_path / "study.log"
        proc = _study([str(spec), "--store", str(root), "--executor", "ray", "--ray-address", cluster.address,
                       "--lease", "600"], _env(data_dir), log)

        def shipped_one_and_trains_another():
            shipped = [r for r in (root / "runs").glob("*") if (r / NODES_LOG).exists()
                       and (r / "summary.json").exists() and not _attempts(r)[0]["shared_fs"]]
            training = [r for r in scratch.glob("normlab-trial-*/run") if (r / "checkpoints" / "latest").is_dir()]
            return shipped and training and training[0]

        try:
            training = _wait_for("a shipped-back trial and one training on the worker node",
                                 shipped_one_and_trains_another, proc, log)
            lost_cfg = json.loads((training / "config.json").read_text())
            cluster.kill_raylet(worker)
            cluster.start("w2", 1)  # sees the store: the lost trial and the rest train here
            out = _finish(proc, log)
        finally:
            stop_process(proc)
        assert "completed 6" in out, out[-3000:]
        store = Store(root)
        _check_complete_once(store)
        by_node = {}
        for t in store.trials():
            tries = _attempts(t.run_dir)
            by_node.setdefault(tries[-1]["node_id"], []).append(t)
            if tries[-1]["node_id"] == worker.id:  # came back as a tarball: a whole run directory
                assert len(tries) == 1 and not tries[0]["shared_fs"] and t.attempts == 1
                assert {"config.json", "summary.json", "metrics.jsonl", "checkpoints"} <= set(os.listdir(t.run_dir))
                assert not (t.run_dir / ".trial.lock").exists()
            else:
                assert tries[-1]["shared_fs"]
        assert by_node.get(worker.id), "no trial came back from the node without the store"
        (lost,) = [t for t in store.trials()
                   if (t.params["seed"], t.params["model.placement"]) == (lost_cfg["seed"], lost_cfg["model"]["placement"])]
        assert [e["event"] for e in store.events(lost.id)] == ["claim", "lost", "claim", "completed"]
        # its checkpoints died with the node: rerun from scratch, once, on the node that sees the store
        (only,) = _attempts(lost.run_dir)
        assert only["node_id"] != worker.id and only["shared_fs"]
        assert only["checkpoint_step"] is None and lost.attempts == 2
        assert "resumes" not in json.loads((lost.run_dir / "env.json").read_text())
