"""The slurm executor's parts without a cluster: its options, its ledger, the store's adoption
of a dead driver's trial, the pack size, and the driver's reading of the queue in every case
(a job still queued, held too long, impossible, gone with a result, gone without one).
The same executor against a real Slurm: tests/study/test_study_slurm.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from normlab.cli import main
from normlab.core.errors import ConfigError, UserError
from normlab.study import slurm
from normlab.study.runner import open_store, run_study
from normlab.study.slurm_config import SlurmConfig, load_slurm
from normlab.study.slurm_queue import Ledger, Queued, array_index
from normlab.study.slurm_script import pack_size, parameters
from normlab.study.spec import load_spec
from normlab.study.worker import Heartbeat, WorkerOptions

from .conftest import tiny_spec


def test_options_come_from_a_file_then_flags_and_errors_name_the_option(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.toml"
    conf.write_text('[slurm]\npartition = "cpu"\ntime = 90\nsetup = ["module load x"]\n')
    cfg = load_slurm(conf, ["time=30", "gpus=1"])
    assert (cfg.partition, cfg.time, cfg.gpus, cfg.setup) == ("cpu", 30, 1, ["module load x"])
    with pytest.raises(UserError, match=r"--slurm partitoin: no such option; did you mean 'partition'\?"):
        load_slurm(None, ["partitoin=x"])
    with pytest.raises(ConfigError, match=r"slurm.signal_s=4000: must be > 0 and under slurm.time \(60 min"):
        load_slurm(None, ["signal_s=4000"])
    with pytest.raises(ConfigError, match="slurm.run_dirs='nfs': must be one of auto, shared, local"):
        SlurmConfig(run_dirs="nfs")
    (tmp_path / "bare.toml").write_text('partition = "cpu"\n')
    with pytest.raises(UserError, match=r"bare.toml: no \[slurm\] table"):
        load_slurm(tmp_path / "bare.toml")
    with pytest.raises(UserError, match="no such file"):
        load_slurm(tmp_path / "missing.toml")


def test_slurm_options_without_the_slurm_executor_are_one_line_exit_2(tmp_path: Path, capsys) -> None:
    spec = tiny_spec(tmp_path / "s.toml")
    assert main(["study", "run", str(spec), "--store", str(tmp_path / "st"), "--slurm", "time=5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "add --executor slurm (this run uses --executor local)" in err[0]
    assert not (tmp_path / "st").exists()


def test_batching_is_refused_by_an_executor_that_runs_one_trial_per_task(tmp_path: Path) -> None:
    spec = load_spec(tiny_spec(tmp_path / "s.toml"))
    with pytest.raises(ConfigError, match="--executor ray trains one trial per task"):
        run_study(spec, tmp_path / "st", executor="ray", batch=2)
    with pytest.raises(UserError, match="--executor local takes no SlurmConfig options"):
        run_study(spec, tmp_path / "st", executor="local", options=SlurmConfig())


def test_the_job_parameters_follow_the_section() -> None:
    p = parameters(SlurmConfig(partition="gpu", gpus=2, mem_gb=1.5, setup=["module load cuda"]), threads=2, k=3)
    assert p["cpus_per_task"] == 6 and p["gpus_per_node"] == 2 and p["mem"] == "1536M" and p["partition"] == "gpu"
    assert p["setup"] == ["export OMP_NUM_THREADS=2", "module load cuda"] and p["signal_delay_s"] == 120
    assert "account" not in p and "qos" not in p


def test_the_ledger_keeps_what_is_open_across_its_three_lines(tmp_path: Path) -> None:
    led = Ledger(tmp_path)
    led.intend("t1", [[("a", 1)], [("b", 1), ("c", 1)]])
    led.intend("t2", [[("d", 2)]])  # cut before sbatch returned: no job id yet
    led.submitted("t1", ["7_0", "7_1"])
    led.close("7_0", "t1", 0, "recorded")
    got = [(o.job, o.token, o.index, o.trials) for o in Ledger(tmp_path).open_jobs()]
    assert got == [("7_1", "t1", 1, [("b", 1), ("c", 1)]), (None, "t2", 0, [("d", 2)])]
    assert array_index("7_1") == 1 and array_index("8") == 0


def _store(tmp_path: Path):
    return open_store(load_spec(tiny_spec(tmp_path / "s.toml")), tmp_path / "st")


def test_a_dead_drivers_running_trial_is_adopted_at_its_attempt_and_a_live_ones_is_not(tmp_path: Path) -> None:
    store = _store(tmp_path)
    dead = f"{os.uname().nodename}:{2**22 + 12345}"  # a pid above the kernel's limit: never alive
    lease = store.claim(dead, lease_s=3600)
    got = store.adopt(lease.id, lease.attempt, "me:1", lease_s=3600)
    assert got is not None and got.attempt == lease.attempt == 1 and got.run_dir == lease.run_dir
    events = store.events(lease.id)
    assert events[-1]["event"] == "adopt" and events[-1]["detail"] == f"from {dead}"
    assert store.adopt(lease.id, 2, "me:2", lease_s=3600) is None  # not that attempt
    live = store.claim(f"{os.uname().nodename}:{os.getpid()}", lease_s=3600)
    assert store.adopt(live.id, live.attempt, "me:1", lease_s=3600) is None  # its holder runs
    assert store.claim("other:1", lease_s=3600).id not in (lease.id, live.id)  # adopted: not claimable


def test_pack_size_from_batch_gpus_and_memory(tmp_path: Path) -> None:
    store = _store(tmp_path)
    from normlab.run.resolve import RunConfig

    cfgs = [RunConfig.from_json(c) for c in store.unfinished_configs()]
    assert pack_size(cfgs, 3, SlurmConfig()) == (3, "packs up to 3 compatible trials per job (--batch 3)")
    assert pack_size(cfgs, 0, SlurmConfig()) == (1, None)  # no GPUs: one trial per job
    k, said = pack_size(cfgs, 0, SlurmConfig(gpus=1, gpu_memory_gb=0.05))
    assert k > 1 and said.startswith(f"packs {k} trials per GPU") and "budget" in said
    import torch

    if not torch.cuda.is_available():
        k, said = pack_size(cfgs, 0, SlurmConfig(gpus=1))
        assert k == 1 and "--slurm gpu_memory_gb=G" in said


class _Fake:
    """squeue, the result files and scancel as the driver sees them, set by each case."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.queue: dict[str, tuple[str, Queued]] = {}
        self.results: dict[str, tuple[str, object]] = {}
        self.cancelled: list[str] = []
        monkeypatch.setattr(slurm, "squeue", lambda tokens: dict(self.queue))
        monkeypatch.setattr(slurm, "result_of", lambda folder, job: self.results.get(job))
        monkeypatch.setattr(slurm, "scancel", lambda jobs: self.cancelled.extend(jobs))


def _flight(tmp_path: Path):
    store = _store(tmp_path)
    me = "driver:1"
    claim = store.claim(me, lease_s=3600)
    ledger = Ledger(store.root)
    ledger.intend("tok", [[(claim.id, claim.attempt)]])
    ledger.submitted("tok", ["5"])
    return store, ledger, me, [slurm.Flight("5", "tok", 0, [claim])], Heartbeat(store.root, [], 1.0)


def _poll(tmp_path, store, ledger, me, flights, beat, **cfg) -> None:
    slurm._poll(store, ledger, tmp_path, me, WorkerOptions(), SlurmConfig(**cfg), flights, beat)


def test_poll_waits_on_a_queued_job_and_records_a_finished_one(tmp_path: Path, monkeypatch) -> None:
    fake = _Fake(monkeypatch)
    store, ledger, me, flights, beat = _flight(tmp_path)
    fake.queue["5"] = ("tok", Queued("RUNNING", "None"))
    _poll(tmp_path, store, ledger, me, flights, beat)
    assert len(flights) == 1 and store.trials()[0].status == "running"
    del fake.queue["5"]
    fake.results["5"] = ("success", [({"status": "completed", "best_val_loss": 2.0}, None, None, {"host": "n1"})])
    _poll(tmp_path, store, ledger, me, flights, beat)
    t = next(t for t in store.trials() if t.status != "pending")
    assert flights == [] and t.status == "completed" and store.events(t.id)[-1]["detail"] == "slurm job 5 on n1"
    assert ledger.open_jobs() == []


def test_poll_releases_a_job_gone_without_a_result_after_the_grace(tmp_path: Path, monkeypatch) -> None:
    _Fake(monkeypatch)
    store, ledger, me, flights, beat = _flight(tmp_path)
    _poll(tmp_path, store, ledger, me, flights, beat, lost_grace_s=3600)
    assert len(flights) == 1  # within the grace: a shared filesystem may show the file late
    flights[0].gone_since = -1e9
    _poll(tmp_path, store, ledger, me, flights, beat, lost_grace_s=30)
    t = next(t for t in store.trials() if t.attempts)
    assert flights == [] and t.status == "pending" and store.events(t.id)[-1]["event"] == "lost"


def test_poll_cancels_a_job_held_past_stuck_s(tmp_path: Path, monkeypatch) -> None:
    fake = _Fake(monkeypatch)
    store, ledger, me, flights, beat = _flight(tmp_path)
    fake.queue["5"] = ("tok", Queued("PENDING", "JobHeldAdmin"))
    _poll(tmp_path, store, ledger, me, flights, beat, stuck_s=3600)
    assert fake.cancelled == [] and flights[0].held_since is not None
    flights[0].held_since = -1e9
    _poll(tmp_path, store, ledger, me, flights, beat, stuck_s=60)
    assert fake.cancelled == ["5"]
    fake.queue["5"] = ("tok", Queued("PENDING", "Resources"))  # waiting its turn: not held
    _poll(tmp_path, store, ledger, me, flights, beat, stuck_s=60)
    assert flights[0].held_since is None


def test_poll_stops_on_a_job_that_cannot_start_and_gives_its_trial_back(tmp_path: Path, monkeypatch) -> None:
    fake = _Fake(monkeypatch)
    store, ledger, me, flights, beat = _flight(tmp_path)
    fake.queue["5"] = ("tok", Queued("PENDING", "PartitionTimeLimit"))
    with pytest.raises(UserError, match="job 5 cannot start on this cluster \\(PartitionTimeLimit\\); fix --slurm"):
        _poll(tmp_path, store, ledger, me, flights, beat)
    assert fake.cancelled == ["5"] and flights == [] and ledger.open_jobs() == []
    assert {t.status for t in store.trials()} == {"pending", "interrupted"}


def test_a_failed_job_fails_its_trials_with_the_jobs_error(tmp_path: Path, monkeypatch) -> None:
    fake = _Fake(monkeypatch)
    store, ledger, me, flights, beat = _flight(tmp_path)
    fake.results["5"] = ("error", "Traceback ...\nModuleNotFoundError: No module named 'normlab'")
    _poll(tmp_path, store, ledger, me, flights, beat)
    t = next(t for t in store.trials() if t.attempts)
    assert t.status in ("pending", "failed") and "slurm job 5 failed: ModuleNotFoundError" in (
        t.error or json.dumps(store.events(t.id)))
