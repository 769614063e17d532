"""The slurm executor's job script and pack size, shared by a run and its ``--dry-run``.

submitit writes the sbatch script (``#SBATCH`` lines from the ``[slurm]`` section, then
``srun python -m submitit.core._submit FOLDER``); this module maps the section onto submitit's
parameters once, so the script a dry run prints is the script a run submits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from normlab.core.errors import UserError
from normlab.study.slurm_config import SlurmConfig


def submitit_module() -> Any:
    try:
        import submitit
    except ImportError:
        raise UserError("--executor slurm needs submitit: pip install 'normlab[slurm]'") from None
    return submitit


def parameters(cfg: SlurmConfig, threads: int, k: int) -> dict[str, Any]:
    """submitit's SlurmExecutor parameters for jobs of ``k`` trials of ``threads`` threads each."""
    cpus = (cfg.cpus_per_trial or threads) * k
    out: dict[str, Any] = {
        "time": cfg.time, "signal_delay_s": cfg.signal_s, "cpus_per_task": cpus,
        "array_parallelism": cfg.array_parallelism,
        # every trial's torch threads, as a local worker sets them; then the user's own lines
        "setup": [f"export OMP_NUM_THREADS={cfg.cpus_per_trial or threads}", *cfg.setup],
    }
    for key, value in (("partition", cfg.partition), ("account", cfg.account), ("qos", cfg.qos),
                       ("constraint", cfg.constraint)):
        if value:
            out[key] = value
    if cfg.gpus:
        out["gpus_per_node"] = cfg.gpus
    if cfg.mem_gb:
        out["mem"] = f"{int(cfg.mem_gb * 1024)}M"
    return out


def make_executor(folder: Path, cfg: SlurmConfig, threads: int, k: int) -> Any:
    """A submitit SlurmExecutor writing its scripts, pickles and logs to ``folder``."""
    submitit = submitit_module()
    # max_num_timeout=0: submitit's own requeue is not used; the driver resubmits a stopped trial
    ex = submitit.SlurmExecutor(folder=folder, python=cfg.interpreter, max_num_timeout=0)
    ex.update_parameters(**parameters(cfg, threads, k))
    return ex


def script_text(folder: Path, cfg: SlurmConfig, threads: int, k: int, tasks: int, name: str) -> str:
    """The sbatch script of one job array of ``tasks`` array tasks, as a run would submit it."""
    from submitit.slurm.slurm import _make_sbatch_string

    ex = make_executor(folder, cfg, threads, k)
    params = dict(ex.parameters, job_name=name)
    if tasks > 1:
        params["map_count"] = tasks
    return str(_make_sbatch_string(command=ex._submitit_command_str, folder=ex.folder, **params))


def pack_size(configs: list[Any], batch: int, cfg: SlurmConfig) -> tuple[int, str | None]:
    """How many trials each job trains, and a line saying how it was chosen; ``configs``: the
    RunConfigs of the trials still to run.

    ``--batch K`` (``batch`` >= 1) is taken as given. Otherwise a job without GPUs trains one
    trial (on CPU one trial per core is faster than a batch: docs/performance.md), and a job
    with GPUs packs as many trials as fit in one GPU's memory, by the costliest trial's own
    cost (``normlab.study.packing``)."""
    if batch >= 1:
        return batch, (f"packs up to {batch} compatible trials per job (--batch {batch})" if batch > 1 else None)
    if not cfg.gpus or not configs:
        return 1, None
    from normlab.study.packing import device_memory, pack_for_all

    memory = int(cfg.gpu_memory_gb * 2**30) if cfg.gpu_memory_gb else device_memory()
    if memory is None:
        return 1, ("one trial per job: no GPU on this machine to size packs by; give the partition's GPU "
                   "memory with --slurm gpu_memory_gb=G (or --batch K)")
    pack = pack_for_all(configs, memory)
    return pack.k, pack.text()


def plan_text(spec: Any, trials: list[Any], store: str | Path, cfg: SlurmConfig, *, threads: int,
              batch: int | None) -> str:
    """What ``study run --executor slurm`` would submit (``--dry-run``): the packing, the array
    and the sbatch script of its first job array; nothing is written or submitted."""
    from normlab.run.resolve import RunConfig
    from normlab.study.slurm_queue import Ledger

    k, said = pack_size([RunConfig.from_json(t.config_json) for t in trials], batch or 0, cfg)
    packs = -(-len(trials) // k)
    first = min(packs, cfg.array_parallelism)
    folder = Path(cfg.folder) if cfg.folder else Ledger(Path(store).resolve()).jobs_dir
    lines = [f"slurm: {said or f'{k} trial(s) per job'}",
             f"slurm: {packs} job(s) of up to {k} trial(s), as job arrays of at most {cfg.array_parallelism} "
             f"tasks at once; the first: --array=0-{first - 1}%{first}" if first > 1 else
             f"slurm: {packs} job(s) of up to {k} trial(s)",
             f"slurm: each job: {cfg.time} min, SIGUSR2 {cfg.signal_s} s before the limit (the trial "
             "checkpoints and is resubmitted); job folder (the nodes must see it): " + str(folder),
             "# the sbatch script of the first job array (`sbatch --test-only FILE` checks it):",
             script_text(folder, cfg, threads, k, first, "normlab-dry-run")]
    return "\n".join(lines)
