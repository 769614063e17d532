"""The ``[slurm]`` section: how the slurm executor asks Slurm for its jobs.

Given as a TOML file (``--slurm-config FILE``, its ``[slurm]`` table) and/or ``--slurm
KEY=VALUE`` (which wins); every key is checked here, with errors that name it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

from normlab.core.errors import ConfigError, UserError
from normlab.core.schema import Section, apply_overrides, doc, from_dict

RUN_DIRS = ("auto", "shared", "local")


@dataclass(frozen=True)
class SlurmConfig(Section):
    """One Slurm job array per round of trials; each array task trains one trial, or a pack of
    ``--batch`` K compatible ones."""

    section = "slurm"
    partition: str | None = doc("partition (sbatch --partition; none: the cluster's default)", None)
    time: int = doc("time limit of each job in minutes (sbatch --time); a trial that needs longer "
                    "stops at a checkpoint and goes on in its next job", 60)
    signal_s: int = doc("seconds before the time limit at which Slurm warns the job (SIGUSR2), so the "
                        "trial checkpoints and returns; Slurm may send it up to 60 s early", 120)
    cpus_per_trial: int | None = doc("CPUs per trial (sbatch --cpus-per-task is this times the pack "
                                     "size; none: --threads-per-run)", None)
    gpus: int = doc("GPUs per job (sbatch --gpus-per-node); with GPUs and no --batch, the pack size "
                    "is chosen from the trials' memory cost", 0)
    gpu_memory_gb: float | None = doc("memory of one GPU of the partition, for sizing packs on a "
                                      "driver without that GPU (none: this machine's GPU)", None)
    mem_gb: float | None = doc("memory per job in GB (sbatch --mem; none: the partition's default)", None)
    array_parallelism: int = doc("jobs of this study queued or running at once (the array's %N)", 16)
    account: str | None = doc("account to charge (sbatch --account)", None)
    qos: str | None = doc("quality of service (sbatch --qos)", None)
    constraint: str | None = doc("node features required (sbatch --constraint)", None)
    setup: list[str] = doc("shell lines each job runs before training (module load, conda activate)", [])
    python: str | None = doc("the Python on the nodes that has normlab (none: this interpreter)", None)
    folder: str | None = doc("where jobs' scripts, pickles and logs go; the nodes must see it "
                             "(none: STORE/slurm/jobs)", None)
    run_dirs: str = doc("where a job trains: shared (the store's runs/, visible from the nodes: a "
                        "killed job resumes from its checkpoint), local (node scratch, shipped back "
                        "when done), auto (shared when the node sees the store)", "auto")
    stuck_s: float = doc("a job held by Slurm after a failed launch (or by an admin) this long is "
                         "cancelled and resubmitted", 600.0)
    lost_grace_s: float = doc("how long a job gone from the queue may lack its result file before "
                              "it is presumed dead (a shared filesystem's attribute cache)", 30.0)

    def __post_init__(self) -> None:
        self.check(self.time >= 1, "time", "must be >= 1 (minutes)")
        self.check(0 < self.signal_s < self.time * 60, "signal_s",
                   f"must be > 0 and under slurm.time ({self.time} min = {self.time * 60} s)")
        self.check(self.cpus_per_trial is None or self.cpus_per_trial >= 1, "cpus_per_trial", "must be >= 1")
        self.check(self.gpus >= 0, "gpus", "must be >= 0")
        self.check(self.gpu_memory_gb is None or self.gpu_memory_gb > 0, "gpu_memory_gb", "must be > 0, e.g. 80")
        self.check(self.mem_gb is None or self.mem_gb > 0, "mem_gb", "must be > 0")
        self.check(self.array_parallelism >= 1, "array_parallelism", "must be >= 1")
        self.check(self.run_dirs in RUN_DIRS, "run_dirs", f"must be one of {', '.join(RUN_DIRS)}")
        self.check(self.stuck_s > 0, "stuck_s", "must be > 0 seconds")
        self.check(self.lost_grace_s >= 0, "lost_grace_s", "must be >= 0 seconds")

    @property
    def interpreter(self) -> str:
        return self.python or sys.executable


def load_slurm(path: str | Path | None = None, overrides: list[str] | None = None) -> SlurmConfig:
    """The section from ``path``'s ``[slurm]`` table (if given), then ``KEY=VALUE`` overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        try:
            table = tomllib.loads(p.read_text())
        except FileNotFoundError:
            raise UserError(f"--slurm-config {p}: no such file; give the TOML file with a [slurm] table") from None
        except IsADirectoryError:
            raise UserError(f"--slurm-config {p}: a directory; give the TOML file with a [slurm] table") from None
        except OSError as e:
            raise UserError(f"--slurm-config {p}: cannot read it ({e.strerror})") from None
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise UserError(f"--slurm-config {p}: not a valid TOML file ({e})") from None
        if "slurm" not in table:
            raise UserError(f"--slurm-config {p}: no [slurm] table; write its options under [slurm]")
        data = dict(table["slurm"])
    try:
        data = apply_overrides(SlurmConfig, data, list(overrides or []))
    except ConfigError as e:  # name the flag the user typed, then the key and its fix
        raise UserError(f"--slurm {e}") from None
    return from_dict(SlurmConfig, data, "slurm.")
