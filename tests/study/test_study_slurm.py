"""The slurm executor against a real one-node Slurm cluster (tests/study/slurm_cluster.py).

Each test drives ``normlab study run --executor slurm`` as a user would, in its own process,
on tiny real trainings; the cluster (munged, slurmctld, slurmd) runs in the module's network
namespace. The faults are Slurm's own: ``scancel`` of a running job, a job held so that it
never starts, the driver SIGKILLed while its jobs run, a job that reaches its time limit, a
run shipped back from node scratch holding a link or a path escape. What is checked every
time: each trial recorded exactly once, by the driver alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from normlab.core.fsutil import read_jsonl
from normlab.run.dir import SLURM_JOBS
from normlab.study.shipping import checkpoint_step
from normlab.study.store import Store

from .conftest import HERE, SRC, cli, tiny_spec
from .fake_trials import check_hostile_refused, hostile_spec

pytest.importorskip("submitit")

DEADLINE = 400  # seconds for one study command; far above what it takes
# Every job of these tests: short polls, a lost job noticed within seconds.
FAST = ["--slurm", "lost_grace_s=2", "--slurm", "time=30", "--slurm", "signal_s=60"]
# sitecustomize for the jobs: every SQLite database a job's Python opens is appended to a log
AUDIT = """import os, sys
def _hook(event, args):
    if event == "sqlite3.connect":
        with open(os.environ["NORMLAB_TEST_SQLITE_LOG"], "a") as fh:
            fh.write(f"{os.getpid()} {args[0]}\\n")
sys.addaudithook(_hook)
"""


def _env(cluster, data_dir: Path | None = None, **extra: str) -> dict[str, str]:
    env = {**cluster.env, **extra}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(SRC), env.get("PYTHONPATH", "")])  # fake_trials, on nodes too
    if data_dir is not None:
        env["NORMLAB_DATA_DIR"] = str(data_dir)
    return env


def _study(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "w") as fh:
        # FAST first: a test's own --slurm options come later and win
        return subprocess.Popen(cli("study", "run", "--executor", "slurm", "--quiet", *FAST, *args), env=env,
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def _finish(proc: subprocess.Popen, log: Path, timeout: float = DEADLINE) -> str:
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return log.read_text(errors="replace")


def _wait_for(what: str, cond, proc: subprocess.Popen | None, log: Path, timeout: float = DEADLINE):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = cond()
        if got:
            return got
        assert proc is None or proc.poll() is None, f"the study ended before {what}:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-3000:]}")


def _jobs(run_dir: Path) -> list[dict]:
    """RUN/slurm_jobs.jsonl: the job each attempt of the trial ran in."""
    return read_jsonl(run_dir / SLURM_JOBS) if (run_dir / SLURM_JOBS).exists() else []


def _submitted(store_root: Path) -> list[str]:
    """Every Slurm job id the driver(s) recorded submitting, from the ledger."""
    return [j for r in read_jsonl(store_root / "slurm" / "jobs.jsonl") if r["event"] == "submitted" for j in r["jobs"]]


def _queue(cluster) -> dict[str, str]:
    out = cluster.run(["squeue", "-h", "-r", "-o", "%i %T"], check=False).stdout.split()
    return dict(zip(out[::2], out[1::2]))


def _check_once(store: Store, steps: int, out: str = "") -> None:
    """Every trial completed with one ``completed`` event, all of the driver's making."""
    trials = store.trials()
    assert {t.status for t in trials} == {"completed"}, ([(t.id, t.status, t.error) for t in trials], out[-3000:])
    for t in trials:
        events = store.events(t.id)
        assert [e["event"] for e in events].count("completed") == 1, (t.id, events)
        assert t.summary["steps"] == steps
        logged = [r["step"] for r in read_jsonl(t.run_dir / "metrics.jsonl")]
        assert logged == sorted(set(logged)) and logged[-1] == steps, (t.id, logged)
    # every event is a driver's (host:pid of a `study run`), none a job's
    jobs = {f"{j['host']}:{j['pid']}" for t in trials for j in _jobs(t.run_dir)}
    writers = {e["worker"] for t in trials for e in store.events(t.id)}
    assert jobs and not writers & jobs, (writers, jobs)


def test_a_smoke_study_runs_each_trial_once_in_its_own_job_and_no_job_opens_the_store(
        slurm_cluster, tmp_path, data_dir) -> None:
    audit = tmp_path / "audit"
    audit.mkdir()
    (audit / "sitecustomize.py").write_text(AUDIT)
    opened = tmp_path / "sqlite-opens.log"
    # the hook works: a Python started with it logs the database it opens
    probe = {**os.environ, "PYTHONPATH": str(audit), "NORMLAB_TEST_SQLITE_LOG": str(opened)}
    subprocess.run([sys.executable, "-c", "import sqlite3; sqlite3.connect(':memory:')"], env=probe, check=True)
    assert ":memory:" in opened.read_text()
    opened.unlink()
    conf = tmp_path / "slurm.toml"
    conf.write_text(f'[slurm]\npartition = "{slurm_cluster.partition}"\n'
                    f'setup = ["export PYTHONPATH={audit}:$PYTHONPATH", "export NORMLAB_TEST_SQLITE_LOG={opened}"]\n')
    spec, root, log = tiny_spec(tmp_path / "s.toml", steps=12, every=6, ckpt=6), tmp_path / "store", tmp_path / "log"
    out = _finish(_study([str(spec), "--store", str(root), "--slurm-config", str(conf)], _env(slurm_cluster, data_dir),
                         log), log)
    store = Store(root)
    _check_once(store, 12, out)
    jobs = [_jobs(t.run_dir) for t in store.trials()]
    assert all(len(j) == 1 and j[0]["shared_fs"] for j in jobs), jobs  # one job each, in its run directory
    assert len({j[0]["job"] for j in jobs}) == 4 and sorted(j[0]["job"] for j in jobs) == sorted(_submitted(root))
    # the jobs ran the hook and opened no database; the driver alone wrote the store
    assert not opened.exists() or opened.read_text() == "", opened.read_text()
    assert sorted(p.name for p in tmp_path.rglob("*.sqlite*")) == sorted(p.name for p in root.glob("study.sqlite*"))


@pytest.mark.parametrize("kill, where", [(False, "shared"), (True, "shared"), (False, "local")],
                         ids=["scancel", "sigkill", "scancel-node-scratch"])
def test_scancel_of_a_running_job_then_resubmission_resumes_its_trial_from_its_checkpoint(
        slurm_cluster, tmp_path, data_dir, kill, where) -> None:
    """``scancel`` (SIGTERM: the trial checkpoints and returns) and the job's trial process
    SIGKILLed, as the OOM killer does (the job ends without a result: a death) both end with the
    trial resumed from a checkpoint. In node scratch (a store the nodes do not see) the stopped
    run comes back to the store and goes out again with the next job, which resumes it."""
    spec = tiny_spec(tmp_path / "s.toml", steps=3000, every=1500, ckpt=25, seeds="[0]", axes='"model.placement" = ["pre"]')
    root, log = tmp_path / "store", tmp_path / "log"
    proc = _study([str(spec), "--store", str(root), "--slurm", f"partition={slurm_cluster.partition}",
                   "--slurm", f"run_dirs={where}"], _env(slurm_cluster, data_dir), log)
    scratch = Path(tempfile.gettempdir())  # the jobs' TMPDIR: they inherit this process's environment
    live = _wait_for("a checkpoint", lambda: next((r for r in [*root.glob("runs/*"), *scratch.glob("normlab-trial-*/*")]
                                                  if (checkpoint_step(r) or 0) >= 50), None), proc, log)
    first = _jobs(live)[0]["job"]
    run = root / "runs" / live.name
    if kill:
        os.kill(_jobs(live)[0]["pid"], signal.SIGKILL)
    else:
        slurm_cluster.run(["scancel", first])
    out = _finish(proc, log)
    store = Store(root)
    _check_once(store, 3000, out)
    jobs = _jobs(run)
    assert len(jobs) == 2 and jobs[0]["job"] == first and jobs[1]["job"] != first, (jobs, out[-2000:])
    assert jobs[0]["checkpoint_step"] is None and jobs[1]["checkpoint_step"] >= 50  # resumed, not restarted
    assert {j["shared_fs"] for j in jobs} == {where == "shared"}
    events = [e["event"] for e in store.events(store.trials()[0].id)]
    assert events[-1] == "completed" and ("lost" in events if kill else "interrupted" in events or "lost" in events), events


def test_the_driver_sigkilled_then_rerun_adopts_its_running_jobs_and_submits_nothing_twice(
        slurm_cluster, tmp_path, data_dir) -> None:
    spec = tiny_spec(tmp_path / "s.toml", steps=1500, every=750, ckpt=50)  # 4 trials, 2 cores: 2 run, 2 wait
    root, log = tmp_path / "store", tmp_path / "log"
    env = _env(slurm_cluster, data_dir)
    proc = _study([str(spec), "--store", str(root), "--slurm", f"partition={slurm_cluster.partition}"], env, log)
    _wait_for("all four submitted, two running", lambda: len(_submitted(root)) == 4
              and list(_queue(slurm_cluster).values()).count("RUNNING") == 2, proc, log)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and nothing else: the jobs are Slurm's
    proc.wait()
    queued = _queue(slurm_cluster)
    assert len(queued) == 4, queued  # every job lives on without its driver
    log2 = tmp_path / "log2"
    out = _finish(_study(["--store", str(root), "--slurm", f"partition={slurm_cluster.partition}"], env, log2), log2)
    store = Store(root)
    _check_once(store, 1500, out)
    assert len(_submitted(root)) == 4, out[-2000:]  # the rerun submitted nothing
    for t in store.trials():
        assert t.attempts == 1 and len(_jobs(t.run_dir)) == 1, (t.id, _jobs(t.run_dir))
        assert "adopt" in [e["event"] for e in store.events(t.id)]


def test_a_job_held_so_that_it_never_starts_is_cancelled_and_submitted_again(slurm_cluster, tmp_path, data_dir) -> None:
    spec = tiny_spec(tmp_path / "s.toml", steps=12, every=6, ckpt=6, seeds="[0]", axes='"model.placement" = ["pre"]')
    root, log = tmp_path / "store", tmp_path / "log"
    node = slurm_cluster.node
    slurm_cluster.run(["scontrol", "update", f"nodename={node}", "state=drain", "reason=test"])
    try:
        proc = _study([str(spec), "--store", str(root), "--slurm", f"partition={slurm_cluster.partition}",
                       "--slurm", "stuck_s=2"], _env(slurm_cluster, data_dir), log)
        first = _wait_for("a pending job", lambda: next((j for j, s in _queue(slurm_cluster).items() if s == "PENDING"),
                                                        None), proc, log)
        slurm_cluster.run(["scontrol", "hold", first])  # an admin's hold: it would never start by itself
        _wait_for("a second submission", lambda: len(_submitted(root)) == 2, proc, log)
    finally:
        slurm_cluster.run(["scontrol", "update", f"nodename={node}", "state=resume"])
    out = _finish(proc, log)
    store = Store(root)
    _check_once(store, 12, out)
    t = store.trials()[0]
    assert [j["job"] for j in _jobs(t.run_dir)] == [_submitted(root)[1]]  # only the second job ever ran it
    assert first not in _queue(slurm_cluster)


def test_a_job_at_its_time_limit_stops_its_trial_at_a_checkpoint_and_the_next_job_resumes_it(
        slurm_cluster, tmp_path, data_dir) -> None:
    # time=2 and signal_s=1: Slurm warns the job (SIGUSR2) 1 to 61 s before its 2-minute limit
    spec = tiny_spec(tmp_path / "s.toml", steps=200_000, every=100_000, ckpt=25, seeds="[0]",
                     axes='"model.placement" = ["pre"]')
    root, log = tmp_path / "store", tmp_path / "log"
    proc = _study([str(spec), "--store", str(root), "--slurm", f"partition={slurm_cluster.partition}",
                   "--slurm", "time=2", "--slurm", "signal_s=1"], _env(slurm_cluster, data_dir), log)
    try:
        _wait_for("the store", lambda: Store.is_made(root), proc, log, timeout=60)
        store = Store(root)
        tid = store.trials()[0].id
        run = store.trials()[0].run_dir
        _wait_for("the first job's end", lambda: len(_jobs(run)) >= 2, proc, log, timeout=300)
    finally:
        proc.send_signal(signal.SIGTERM)  # the trial would need many more jobs: stop the driver
        _finish(proc, log, timeout=60)
    events = store.events(tid)
    first = next(e for e in events if e["attempt"] == 1 and e["event"] not in ("claim",))
    assert first["event"] == "interrupted", events  # it returned at a checkpoint, not killed mid-write
    jobs = _jobs(run)
    assert jobs[1]["checkpoint_step"] is not None and jobs[1]["checkpoint_step"] >= 25, jobs
    summary_steps = [r["step"] for r in read_jsonl(run / "metrics.jsonl")]
    assert summary_steps == sorted(set(summary_steps))  # the resumed job logged no step twice


def test_a_run_shipped_back_with_a_link_or_a_path_escape_is_refused(slurm_cluster, tmp_path, fake_path) -> None:
    spec = hostile_spec(tmp_path / "s.toml", fake_path)
    root, log = tmp_path / "store", tmp_path / "log"
    out = _finish(_study([str(spec), "--store", str(root), "--slurm", f"partition={slurm_cluster.partition}",
                          "--slurm", "run_dirs=local"], _env(slurm_cluster), log), log)
    check_hostile_refused(root, out)
    assert not list(tmp_path.rglob("escaped"))


def test_the_dry_run_prints_a_job_array_that_sbatch_test_only_accepts(slurm_cluster, tmp_path) -> None:
    spec, root = tiny_spec(tmp_path / "s.toml"), tmp_path / "store"
    done = subprocess.run(cli("study", "run", str(spec), "--store", str(root), "--executor", "slurm", "--dry-run",
                              "--slurm", f"partition={slurm_cluster.partition}", "--slurm", "array_parallelism=3",
                              "--slurm", "time=20", "--slurm", "mem_gb=1"),
                          env=_env(slurm_cluster), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "4 job(s) of up to 1 trial(s)" in text and "--array=0-2%3" in text
    script = text[text.index("#!/bin/bash"):]
    assert "#SBATCH --array=0-2%3" in script and "#SBATCH --time=20" in script and "#SBATCH --partition=" in script
    assert "#SBATCH --signal=USR2@120" in script and "submitit.core._submit" in script
    (tmp_path / "job.sh").write_text(script)
    check = slurm_cluster.run(["sbatch", "--test-only", str(tmp_path / "job.sh")], check=False)
    assert check.returncode == 0, check.stderr
    assert not root.exists()  # a dry run writes nothing
