"""Cheap trial functions for the store's transactional tests (imported by name in workers).

Each call appends one line ``<trial dir name>`` to STORE/calls.log (O_APPEND: whole lines
even from concurrent processes), so tests count how often every trial really ran.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def _record(run_dir: Path) -> None:
    store = run_dir.parent.parent
    if not (store / "spec.json").is_file():
        return  # a Ray task's scratch directory on a node without the store: nothing to count into
    fd = os.open(store / "calls.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{run_dir.name}\n".encode())
    finally:
        os.close(fd)


def ok(cfg: Any, run_dir: Path, *, resume: bool = False) -> dict[str, Any]:
    """Completes with a loss computed from lr and seed (hand-checkable)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    _record(run_dir)
    time.sleep(float(os.environ.get("NORMLAB_FAKE_SLEEP", "0")))
    status = "diverged" if cfg.optim.lr >= 0.1 else "completed"
    summary = {"status": status, "best_val_loss": 1.0 + 10 * cfg.optim.lr + 0.01 * cfg.seed}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return summary


def flaky(cfg: Any, run_dir: Path, *, resume: bool = False) -> dict[str, Any]:
    """Raises for n_layer == 3, otherwise like :func:`ok`."""
    if cfg.model.n_layer == 3:
        _record(Path(run_dir))
        raise RuntimeError("boom: this trial always fails")
    return ok(cfg, run_dir, resume=resume)


def dies_once(cfg: Any, run_dir: Path, *, resume: bool = False) -> dict[str, Any]:
    """SIGKILLs its own process the first time a trial runs (what the OOM killer does to a
    worker mid-trial), then behaves like :func:`ok` when the trial is run again."""
    import signal

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    marker = run_dir / "was_killed"
    if cfg.seed == 0 and not marker.exists():
        _record(run_dir)
        marker.write_text("1")
        os.kill(os.getpid(), signal.SIGKILL)
    return ok(cfg, run_dir, resume=resume)


def hostile(cfg: Any, run_dir: Path, *, resume: bool = False) -> dict[str, Any]:
    """Like :func:`ok`, then ships back what a faulty or hostile node could: for seed 0 a run
    directory holding a symlink, for seed 1 an archive with a member outside the run directory."""
    import io
    import tarfile

    from normlab.study import shipping

    summary = ok(cfg, run_dir, resume=resume)
    if cfg.seed == 0:
        os.symlink("summary.json", Path(run_dir) / "link")
    else:
        honest = shipping.pack

        def escape(_: Path) -> bytes:
            shipping.pack = honest  # this worker process may run other tasks after this one
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                member = tarfile.TarInfo("../escaped")
                member.size = 3
                tar.addfile(member, io.BytesIO(b"bad"))
            return buf.getvalue()

        shipping.pack = escape
    return summary


def plateau(cfg: Any, run_dir: Path, *, resume: bool = False) -> dict[str, Any]:
    """A run directory in the lab's contract (config.json, metrics.jsonl, summary.json) whose
    losses sit where the outcome rule decides: lr >= 0.1 diverges at step 3; lr >= 0.01 falls
    from ln 65 to 3.352 + 0.005 * seed and stays there (Post-LN's twins at the unigram loss of
    Tiny Shakespeare, 3.347); a smaller lr trains to 2.5 + 0.01 * seed."""
    from normlab.run.dir import RunDir

    run = RunDir(run_dir)
    run.write_config(cfg)
    _record(Path(run_dir))
    steps = cfg.train.steps
    end = 3.352 + 0.005 * cfg.seed if cfg.optim.lr >= 0.01 else 2.5 + 0.01 * cfg.seed
    diverged = cfg.optim.lr >= 0.1
    last = 3 if diverged else steps
    curve = [4.17 + (end - 4.17) * min(1.0, 2 * s / steps) for s in range(last + 1)]
    for s, v in enumerate(curve):
        run.append_metrics(s, {"train/loss": v, "val/loss": v, "lr": cfg.optim.lr, "tokens": s * 64})
    summary = {"status": "diverged" if diverged else "completed", "steps": last, "best_val_loss": min(curve),
               "final_val_loss": None if diverged else curve[-1], "diverged_at_step": last if diverged else None}
    run.write_summary(summary)
    return summary


def hostile_spec(path: Path, prefix: str) -> Path:
    """A study of two :func:`hostile` trials (seed 0 ships a symlink, seed 1 a path escape)."""
    path.write_text(f'name = "hostile"\ntrial = "{prefix}:hostile"\nseeds = [0, 1]\nretries = 0\n'
                    '[axes]\n"optim.lr" = [1e-3]\n')
    return path


def check_hostile_refused(root: Path, out: str) -> None:
    """Both :func:`hostile` archives refused whole by the driver of the store at ``root``: the
    trials failed naming why, and nothing of either archive was written (no run directory)."""
    from normlab.study.store import Store

    store = Store(root)
    errors = {t.params["seed"]: t.error or "" for t in store.trials()}
    assert {t.status for t in store.trials()} == {"failed"}, out[-3000:]
    assert "run archive refused: './link' is a symlink" in errors[0], errors
    assert "run archive refused: '../escaped' points outside the run directory" in errors[1], errors
    assert not (root / "runs").exists() or os.listdir(root / "runs") == []
