"""The real one-node Slurm cluster the Slurm executor's tests run on (tests/study/slurm_cluster.py).

What submitit asks of Slurm, checked on the cluster itself: batch jobs run (as the submitting
user, root included), ``scancel`` ends a running job and its processes, ``--test-only`` and
``--signal`` are accepted, a job array honours its ``%`` limit, and ``srun`` works inside a
batch script the way submitit's scripts call it. Every test runs in the module's network
namespace, on one cluster (tests/conftest.py, tests/netns.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from . import slurm_cluster as sc
from .slurm_cluster import SlurmCluster


def test_a_batch_job_runs_as_its_submitter(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    job = slurm_cluster.submit("-o", str(tmp_path / "job.log"), "--wrap", f"id -u > {out}; echo $SLURM_JOB_ID >> {out}")
    assert slurm_cluster.wait(job) == ["COMPLETED"]
    assert out.read_text().split() == [str(os.geteuid()), str(job)]


def test_a_failing_job_ends_failed(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    job = slurm_cluster.submit("-o", str(tmp_path / "job.log"), "--wrap", "exit 3")
    assert slurm_cluster.wait(job) == ["FAILED"]


def test_scancel_ends_a_running_job_and_its_processes(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    job = slurm_cluster.submit("-o", str(tmp_path / "job.log"), "--wrap", "sleep 60")
    slurm_cluster.wait_for(lambda: slurm_cluster.states(job) == ["RUNNING"], 30, f"job {job} not running")
    slurm_cluster.wait_for(lambda: "sleep" in _commands(slurm_cluster), 30, "the job's sleep not seen")
    slurm_cluster.run(["scancel", str(job)])
    assert slurm_cluster.wait(job, timeout=30) == ["CANCELLED"]
    assert not slurm_cluster.run(["squeue", "-h", "-j", str(job)], check=False).stdout.strip()
    slurm_cluster.wait_for(lambda: "sleep" not in _commands(slurm_cluster), 15, "the cancelled job's sleep lives on")


def test_test_only_accepts_what_fits_and_refuses_what_cannot(slurm_cluster: SlurmCluster) -> None:
    fits = slurm_cluster.run(["sbatch", "--test-only", "--wrap", "true"], check=False)
    assert fits.returncode == 0, fits.stderr
    assert "to start at" in fits.stderr
    too_big = slurm_cluster.run(["sbatch", "--test-only", "-c", str(slurm_cluster.cpus + 1), "--wrap", "true"],
                                check=False)
    assert too_big.returncode != 0


def test_a_time_limit_with_a_warning_signal_is_accepted(slurm_cluster: SlurmCluster) -> None:
    """submitit asks for USR2 some seconds before the time limit (to checkpoint and requeue)."""
    for signal in ("USR2@30", "B:USR2@30"):
        r = slurm_cluster.run(["sbatch", "--test-only", "--time=1", f"--signal={signal}", "--wrap", "true"],
                              check=False)
        assert r.returncode == 0, r.stderr


def test_a_job_array_runs_every_task_at_most_two_at_once(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    task = 'date +%s.%N > {d}/start_$SLURM_ARRAY_TASK_ID; sleep 2; date +%s.%N > {d}/end_$SLURM_ARRAY_TASK_ID'
    job = slurm_cluster.submit("--array=0-2%2", "-o", str(tmp_path / "task_%a.log"), "--wrap", task.format(d=tmp_path))
    assert slurm_cluster.wait(job) == ["COMPLETED"] * 3
    spans = [(float((tmp_path / f"start_{i}").read_text()), float((tmp_path / f"end_{i}").read_text()))
             for i in range(3)]
    assert max(sum(s <= t < e for s, e in spans) for t, _ in spans) <= 2  # the %2 limit held


def test_srun_runs_inside_a_batch_script(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """As submitit's scripts do: ``srun --unbuffered --output ... --error ... CMD`` in an sbatch script."""
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH --output={tmp_path}/%j_0_log.out\n#SBATCH --ntasks=1\n"
                      f"srun --unbuffered --output {tmp_path}/%j_%t_step.out --error {tmp_path}/%j_%t_step.err "
                      "sh -c 'hostname; echo step $SLURM_STEP_ID task $SLURM_PROCID'\n")
    job = slurm_cluster.submit(str(script))
    assert slurm_cluster.wait(job) == ["COMPLETED"], (tmp_path / f"{job}_0_log.out").read_text()
    lines = (tmp_path / f"{job}_0_step.out").read_text().splitlines()
    assert lines == [os.uname().nodename, "step 0 task 0"]


def _commands(cluster: SlurmCluster) -> list[str]:
    names = []
    for pid in cluster.pids():
        try:
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            continue
    return names


# --- installing Slurm where it is missing (a fake apt-get; fake program names, so the real
# installation, if any, is neither used nor touched) ---

@pytest.fixture
def fake_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bin dir first on PATH, Slurm's programs renamed to ones nowhere, the install lock in tmp_path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(sc, "DAEMONS", ("nl-fake-slurmd",))
    monkeypatch.setattr(sc, "CLIENTS", ("nl-fake-sbatch",))
    monkeypatch.setattr(sc, "_SBIN", ())
    monkeypatch.setattr(sc, "_LOCK", str(tmp_path / "install.lock"))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    return bin_dir


def _fake_apt(bin_dir: Path, install: str) -> Path:
    """An apt-get that logs its arguments and environment, then runs ``install`` for 'install'."""
    log = bin_dir / "apt.log"
    apt = bin_dir / "apt-get"
    apt.write_text(f'#!/bin/sh\necho "$DEBIAN_FRONTEND $*" >> {log}\n'
                   f'case " $* " in *" install "*) {install};; esac\n')
    apt.chmod(0o755)
    return log


def test_a_missing_slurm_is_installed_with_apt(fake_system: Path) -> None:
    made = " ".join(f"printf '#!/bin/sh\\n' > {fake_system}/{n} && chmod +x {fake_system}/{n} &&"
                    for n in ("nl-fake-slurmd", "nl-fake-sbatch"))
    log = _fake_apt(fake_system, made + " true")
    assert sc.unavailable.__wrapped__() is None
    calls = log.read_text().splitlines()
    assert len(calls) == 2 and calls[0].startswith("noninteractive ") and calls[0].endswith(" update")
    assert calls[1].startswith("noninteractive ") and calls[1].endswith(" -y -o DPkg::Lock::Timeout=600 install slurm-wlm munge")
    assert sc.unavailable.__wrapped__() is None  # installed now: apt is not run again
    assert len(log.read_text().splitlines()) == 2


def test_an_install_that_fails_or_installs_nothing_says_so(fake_system: Path) -> None:
    _fake_apt(fake_system, "echo no space left >&2; exit 100")
    assert "apt-get install slurm-wlm munge failed (100): no space left" in sc.unavailable.__wrapped__()
    _fake_apt(fake_system, "true")
    assert "yet nl-fake-slurmd, nl-fake-sbatch are missing" in sc.unavailable.__wrapped__()


def test_slurm_is_not_installed_without_root_or_apt(fake_system: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _fake_apt(fake_system, "true")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "installing it needs root" in sc.unavailable.__wrapped__()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(sc, "which", lambda n: None)  # nothing at all: no apt-get either
    assert "there is no apt-get" in sc.unavailable.__wrapped__()
    assert not log.exists()
