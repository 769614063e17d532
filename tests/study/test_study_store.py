"""Store transactions with cheap fake trials: claims, fencing, retries, leases, versions, table."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from normlab.core.errors import UserError
from normlab.study.results import format_results, results
from normlab.study.runner import open_store, run_study, status_text
from normlab.study.spec import StudySpec
from normlab.study.store import Store, TrialRecord


def _spec(trial: str, **kw) -> StudySpec:
    kw.setdefault("seeds", [0, 1])
    kw.setdefault("axes", {"model.n_layer": [2, 3], "optim.lr": [1e-3, 0.1]})
    return StudySpec(name="fake", trial=trial, retries=2, **kw)


def _calls(store: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (store / "calls.log").read_text().split():
        out[line] = out.get(line, 0) + 1
    return out


def test_failing_trial_is_retried_then_failed_while_others_finish(tmp_path, fake_path) -> None:
    store = run_study(_spec(f"{fake_path}:flaky"), tmp_path / "s", workers=1)
    by = {(t.params["model.n_layer"], t.params["optim.lr"], t.params["seed"]): t for t in store.trials()}
    assert len(by) == 8
    calls = _calls(store.root)
    for (layers, lr, _), t in by.items():
        if layers == 3:  # raises every time: 1 try + retries=2, then final, with the error text
            assert t.status == "failed" and t.attempts == 3 and calls[t.id] == 3
            assert "RuntimeError: boom" in t.error
        else:  # lr 0.1 diverges: a result, not a failure, never retried
            assert t.status == ("diverged" if lr == 0.1 else "completed")
            assert t.attempts == 1 and calls[t.id] == 1 and t.error is None
    assert store.counts() == {"failed": 4, "completed": 2, "diverged": 2}
    assert "failed 4" in status_text(store) and "boom" in status_text(store)
    # rerunning the same study runs nothing again: final states are final
    run_study(_spec(f"{fake_path}:flaky"), store.root, workers=1)
    assert _calls(store.root) == calls
    assert "--retry-failed" in status_text(store)  # the way out is named
    # asked to retry, only the failed ones run again (3 more tries each); finished ones stay
    again = run_study(_spec(f"{fake_path}:flaky"), store.root, workers=1, retry_failed=True)
    after = _calls(again.root)
    assert {i: after[i] - calls[i] for i in calls} == {t.id: 3 if t.status == "failed" else 0 for t in by.values()}
    assert again.counts() == {"failed": 4, "completed": 2, "diverged": 2}
    requeued = [e for e in again.events() if e["event"] == "requeue"]
    assert len(requeued) == 4 and all("boom" in e["detail"] for e in requeued)


def test_claims_are_fenced_by_attempt(tmp_path, fake_path) -> None:
    store = open_store(_spec(f"{fake_path}:ok", axes={"optim.lr": [1e-3]}, seeds=[0]), tmp_path / "s")
    a = store.claim("hostA:1", lease_s=60)
    assert a is not None and a.attempt == 1 and store.claim("hostB:2", lease_s=60) is None
    # a's lease lapses (no heartbeat): B takes over; A's late result is refused, B's is kept
    store.conn.execute("UPDATE trials SET heartbeat = ? WHERE id = ?", (time.time() - 120, a.id))
    b = store.claim("hostB:2", lease_s=60)
    assert b is not None and b.id == a.id and b.attempt == 2 and b.previous == "running"
    assert store.finish(a, "hostA:1", summary={"status": "completed", "best_val_loss": 9.0}) is None
    assert store.finish(b, "hostB:2", summary={"status": "completed", "best_val_loss": 1.5}) == "completed"
    (t,) = store.trials()
    assert t.summary["best_val_loss"] == 1.5 and t.worker == "hostB:2"
    assert [e["event"] for e in store.events(t.id)] == ["claim", "lost", "claim", "stale", "completed"]


def test_dead_local_worker_is_reclaimed_without_waiting_for_the_lease(tmp_path, fake_path) -> None:
    import socket
    import subprocess
    import sys

    store = open_store(_spec(f"{fake_path}:ok", axes={"optim.lr": [1e-3]}, seeds=[0]), tmp_path / "s")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    ghost = f"{socket.gethostname()}:{int(dead.stdout)}"  # that process has exited
    assert store.claim(ghost, lease_s=3600) is not None
    again = store.claim("me:1", lease_s=3600)
    assert again is not None and again.attempt == 2


def test_newer_schema_and_other_study_are_refused(tmp_path, fake_path) -> None:
    root = tmp_path / "s"
    open_store(_spec(f"{fake_path}:ok"), root).close()
    with pytest.raises(UserError, match="different study"):
        open_store(_spec(f"{fake_path}:ok", seeds=[5]), root)
    conn = sqlite3.connect(root / "study.sqlite")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(UserError, match="newer normlab.*v99"):
        Store(root)
    with pytest.raises(UserError, match="no study store"):
        Store(tmp_path / "nowhere")


def test_tampered_run_dir_cannot_escape_the_store(tmp_path, fake_path) -> None:
    store = open_store(_spec(f"{fake_path}:ok"), tmp_path / "s")
    store.conn.execute("UPDATE trials SET run_dir = '../../etc' WHERE idx = 0")
    with pytest.raises(UserError, match="inside the store"):
        store.trials()


def _rec(i: int, status: str, loss: float | None, **params) -> TrialRecord:
    summary = None if loss is None else {"status": status, "best_val_loss": loss}
    return TrialRecord(str(i), params, status, summary, Path("."), None)


def test_results_pick_best_nuisance_by_seed_mean_and_report_std() -> None:
    trials = [
        _rec(1, "completed", 2.0, p="post", lr=1, seed=0), _rec(2, "completed", 3.0, p="post", lr=1, seed=1),
        _rec(3, "completed", 1.0, p="post", lr=2, seed=0), _rec(4, "diverged", 9.0, p="post", lr=2, seed=1),
        _rec(5, "completed", 1.5, p="pre", lr=1, seed=0), _rec(6, "completed", 1.7, p="pre", lr=1, seed=1),
        _rec(7, "completed", 1.2, p="pre", lr=2, seed=0), _rec(8, "running", None, p="pre", lr=2, seed=1),
    ]
    post, pre = results(trials, ["p"], ["lr"])
    # post: lr=2 has one diverged seed, so lr=1 wins although 1.0 < 2.5; mean 2.5, std of (2, 3)
    assert post.nuisance == {"lr": 1} and post.mean == pytest.approx(2.5) and post.std == pytest.approx(0.5 ** 0.5)
    assert post.diverged == 0 and post.final == 4 and post.trials == 4
    # pre: lr=2 has a single completed seed (1.2) vs lr=1 mean 1.6: lr=2 wins, no std from one seed
    assert pre.nuisance == {"lr": 2} and pre.mean == pytest.approx(1.2) and pre.std is None and pre.final == 3
    table = format_results([post, pre])
    assert "2.5000 +/- 0.7071" in table and "1.2000 " in table and "3/4" in table


def test_spec_json_is_the_resolved_spec(tmp_path, fake_path) -> None:
    store = open_store(_spec(f"{fake_path}:ok", nuisance=["optim.lr"]), tmp_path / "s")
    spec = json.loads((store.root / "spec.json").read_text())
    assert spec["scientific"] == ["model.n_layer"] and spec["nuisance"] == ["optim.lr"]
    assert all(t.run_dir == store.root / "runs" / t.id for t in store.trials())


def test_ray_task_without_shared_filesystem_ships_its_run_dir_back(tmp_path, fake_path) -> None:
    from normlab.study.ray_tasks import ray_trial
    from normlab.study.shipping import unpack_run
    from normlab.study.worker import WorkerOptions

    (trial,) = _spec(f"{fake_path}:ok", axes={"optim.lr": [1e-3]}, seeds=[0]).trials()
    target = tmp_path / "driver" / "runs" / trial.id
    # the store path does not exist on this "node": the task trains in a temp dir and packs it
    summary, error, packed, where = ray_trial(trial.config_json, str(target), str(tmp_path / "absent"),
                                              WorkerOptions(trial=f"{fake_path}:ok"))
    assert error is None and summary["status"] == "completed" and packed and not target.exists()
    assert where["shared_fs"] is False and where["pid"] == os.getpid()
    unpack_run(packed, target)
    assert json.loads((target / "summary.json").read_text()) == summary
    assert sorted(p.name for p in target.iterdir()) == ["ray_nodes.jsonl", "summary.json"]  # no lock file


def test_a_trial_that_keeps_killing_its_worker_is_failed_eventually(tmp_path, fake_path) -> None:
    store = open_store(_spec(f"{fake_path}:ok", axes={"optim.lr": [1e-3]}, seeds=[0]), tmp_path / "s")
    for i in range(1, 20):
        c = store.claim(f"elsewhere:{i}", lease_s=60, retries=2)
        if c is None:
            break
        store.conn.execute("UPDATE trials SET heartbeat = 0")  # that worker died: lease long gone
    (t,) = store.trials()
    # retries=2: up to 2 + MAX_DEATHS(3) = 5 deaths are tolerated; the 6th ends it
    assert t.status == "failed" and t.attempts == 6 and "died 6 times" in t.error


def test_a_claims_run_decides_nothing_on_a_study_with_failed_trials(tmp_path, fake_path, monkeypatch) -> None:
    # every trial of the first launch of a confirmatory run once failed (no corpus) and the
    # claims were decided on none of them; now the run stops, naming the study and the way out
    from normlab.claims.studies import StudyContext

    ctx = StudyContext(out=tmp_path, workers=1)
    monkeypatch.setattr(ctx, "spec", lambda name: _spec(f"{fake_path}:flaky"))
    with pytest.raises(UserError) as e:
        ctx.trials("fake")
    text = str(e.value)
    assert "4 of 8 trials of study 'fake' failed" in text and "boom" in text and "rerun the same command" in text
    assert "fake" not in ctx.studies_read()  # nothing half-read is served to a later claim
    first = _calls(tmp_path / "stores" / "fake")
    with pytest.raises(UserError):  # rerun as told: the failed trials are tried again, the others not
        ctx.trials("fake")
    again = _calls(tmp_path / "stores" / "fake")
    assert sorted(again[i] - first[i] for i in first) == [0, 0, 0, 0, 3, 3, 3, 3]
    read = StudyContext(out=tmp_path, train=False)
    with pytest.raises(UserError, match="rerun without --no-train"):
        read.trials("fake")
