"""The parts of the ray executor that need no cluster: shipped-back archives, lost tasks
in the store, the run-directory lock. (The cluster itself: test_study_cluster.py.)"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from normlab.study.runner import open_store
from normlab.study.shipping import UnsafeRunArchive, exclusive, unpack_run
from normlab.study.spec import StudySpec


def _archive(*members: tuple[str, str]) -> bytes:
    """A gzipped tar of (name, kind) members: kind file, dir, symlink:TARGET, hardlink:TARGET, fifo."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind.startswith("symlink:"):
                info.type, info.linkname = tarfile.SYMTYPE, kind.split(":", 1)[1]
            elif kind.startswith("hardlink:"):
                info.type, info.linkname = tarfile.LNKTYPE, kind.split(":", 1)[1]
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            data = b"{}" if kind == "file" else b""
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


GOOD = [(".", "dir"), ("./summary.json", "file"), ("./checkpoints", "dir"), ("./checkpoints/latest", "dir"),
        ("./checkpoints/latest/state.json", "file")]


def test_a_shipped_run_directory_is_installed_whole(tmp_path) -> None:
    run = tmp_path / "runs" / "abc"
    run.mkdir(parents=True)
    (run / "partial.txt").write_text("left by an earlier attempt")
    unpack_run(_archive(*GOOD), run)
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*")) == [
        "checkpoints", "checkpoints/latest", "checkpoints/latest/state.json", "summary.json"]
    assert os.listdir(run.parent) == ["abc"]  # no staging or old copy left beside it


@pytest.mark.parametrize("bad, says", [
    (("./link", "symlink:summary.json"), "'./link' is a symlink"),       # inside the run: still refused
    (("./passwd", "symlink:/etc/passwd"), "'./passwd' is a symlink"),
    (("./hard", "hardlink:summary.json"), "'./hard' is a hard link"),
    (("./pipe", "fifo"), "'./pipe' is not a regular file"),
    (("../escaped", "file"), "'../escaped' points outside the run directory"),
    (("./a/../../escaped", "file"), "points outside the run directory"),
    (("/tmp/escaped", "file"), "'/tmp/escaped' points outside the run directory"),
])
def test_an_archive_with_a_link_or_a_path_out_of_the_run_is_refused_whole(tmp_path, bad, says) -> None:
    run = tmp_path / "store" / "runs" / "abc"
    with pytest.raises(UnsafeRunArchive, match="run archive refused") as e:
        unpack_run(_archive(*GOOD, bad), run)
    assert says in str(e.value)
    assert not run.exists() and not list(tmp_path.rglob("escaped"))  # nothing of it was written


def _store(tmp_path: Path, fake_path: str):
    spec = StudySpec(name="lost", trial=f"{fake_path}:ok", retries=0, seeds=[0], axes={"optim.lr": [1e-3]})
    return open_store(spec, tmp_path / "s")


def test_a_lost_task_goes_back_to_the_queue_without_counting_as_a_failure(tmp_path, fake_path) -> None:
    store = _store(tmp_path, fake_path)
    claim = store.claim("driver:1", lease_s=60, retries=0)
    # retries = 0: a failure would be final; a lost node is not the trial's failure
    assert store.release(claim, "driver:1", "ray task lost: NodeDiedError: ...", retries=0) == "pending"
    (t,) = store.trials()
    assert t.status == "pending" and t.error is None
    again = store.claim("driver:1", lease_s=60, retries=0)
    assert again.id == claim.id and again.attempt == 2 and again.previous == "pending"
    assert store.release(claim, "driver:1", "late", retries=0) is None  # an old attempt: fenced
    assert [e["event"] for e in store.events()] == ["claim", "lost", "claim", "stale"]
    store.finish(again, "driver:1", summary={"status": "completed", "best_val_loss": 1.0}, retries=0,
                 note="ray node n1")
    assert store.events()[-1]["event"] == "completed" and store.events()[-1]["detail"] == "ray node n1"


def test_a_trial_whose_tasks_keep_dying_is_failed_eventually(tmp_path, fake_path) -> None:
    store = _store(tmp_path, fake_path)
    statuses = []
    for _ in range(10):
        claim = store.claim("driver:1", lease_s=60, retries=0)
        if claim is None:
            break
        statuses.append(store.release(claim, "driver:1", "ray task lost: WorkerCrashedError", retries=0))
    (t,) = store.trials()
    # retries = 0: up to MAX_DEATHS (3) deaths are tolerated, the 4th ends it
    assert statuses == ["pending"] * 3 + ["failed"] and t.status == "failed" and "died 4 times" in t.error


def test_an_attempt_waits_for_the_run_directory_an_earlier_one_still_holds(tmp_path) -> None:
    run = tmp_path / "run"
    with exclusive(run, 5) as busy:
        assert busy is None
        with exclusive(run, 0.3) as second:  # same file, another open file description: refused
            assert second is not None and "still in use by an earlier attempt" in second
    with exclusive(run, 0.3) as third:  # released when the holder is done (or dies)
        assert third is None
    assert json.dumps(os.listdir(run)) == '[".trial.lock"]'
