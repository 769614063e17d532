"""``RunDir``: the one owner of a training run's directory (the contract in docs/training.md).

Every file of ``RUN/`` is named here and only here:

  config.json        the RunConfig the run used (the authority on resume)
  env.json           device, versions and host of the first start, then one entry per resume
  metrics.jsonl      one JSON line per logged step
  diagnostics.jsonl  in-training statistics (``train.diagnostics_every``)
  summary.json       status and results, written when the run ends
  data.json          the data read: corpus path and sha256, tokenizer, split (``normlab.data.record``);
                     absent in runs older than it
  checkpoints/       ``latest`` and ``best`` (``normlab.run.checkpoint``: hash-checked), and
                     with ``train.keep_checkpoints`` the weights of each checkpoint step,
                     ``step_NNNNNN`` (``step_checkpoints``)
  normlab.json       the folder's kind (``{"kind": "run"}``), written when the folder is claimed
  .normlab.lock      present while a process writes RUN: its flock and who it is (``writing``)
  diagnostics_ref.safetensors  W_0's logits for the in-training diagnostics
  analysis/          ``normlab analyze`` (and the run page's layer figures)
  <folder>/          a logger's own folder: the ``folder`` its class declares (tensorboard/,
                     wandb/, a plugin's), learnt from the loggers registry (``logger_folders``)
  report/            ``normlab report RUN``'s default page
  probe.csv          a study's probe trial: the model at initialisation (``probe_csv``)
  ray_nodes.jsonl, slurm_jobs.jsonl, .trial.lock  a Ray or Slurm trial: where each attempt ran,
                     and the attempt that holds RUN

The lock and the marker name every folder the lab writes (``normlab.run.outdir.OutDir``: probe,
inspect, series, analysis): one lock per folder, one marker saying its kind. ``OWNED`` lists
every entry and ``owns`` says whether a path under RUN/ is one of them: a test trains,
analyses and reports a run and checks every file it finds against it.

Readers (sample, analyze, sensitivity, inspect, claims, report) and writers (the solo and the
batched loop) go through it, so a new run file is one edit here. Checkpoints are always
loaded through ``normlab.run.checkpoint``, which checks every file against its manifest.
``RunDir``'s methods that name no file live in two mixins, so that this module stays the list
of RUN's files with their reads and writes: ``dir_checkpoints`` (which checkpoint a reader
gets, the kept step checkpoints, loading and saving one) and ``dir_resume`` (holding RUN,
whether it is finished, its logs back to a step); both reach the files only through this module.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from normlab.core.dirlock import holder, marked_kind
from normlab.core.errors import UserError
from normlab.core.fscheck import read_json_table
from normlab.core.fsutil import append_jsonl, atomic_write_json, read_jsonl
from normlab.run.config import RunConfig
from normlab.run.dir_checkpoints import RunCheckpoints
from normlab.run.dir_resume import RunResume

# The checkpoint code (and torch with it) is imported inside the methods that need it: every
# light reader of a run (report's kind detection, study status, `normlab --help`'s argument
# tables) imports this module, and would otherwise pay for torch.

if TYPE_CHECKING:
    from normlab.core.dirlock import Holder
    from normlab.run.config import RunConfig

CONFIG, ENV, METRICS, DIAGNOSTICS, SUMMARY = "config.json", "env.json", "metrics.jsonl", "diagnostics.jsonl", "summary.json"
DATA = "data.json"
DIAGNOSTICS_REF = "diagnostics_ref.safetensors"  # W_0's logits, so a resumed run measures against them
CHECKPOINTS = "checkpoints"
ANALYSIS, REPORT = "analysis", "report"
# study trials' own files
PROBE_CSV, RAY_NODES, SLURM_JOBS, TRIAL_LOCK = "probe.csv", "ray_nodes.jsonl", "slurm_jobs.jsonl", ".trial.lock"
# every entry of RUN/: a file by its name, a folder (and all below it) by its name and "/"; the
# loggers' folders join them from the registry (``RunDir.logger_folders``), a plugin's included
LOCK = ".normlab.lock"  # in every folder the lab writes: flocked by its one writer (``normlab.core.dirlock``)
MARKER = "normlab.json"  # in every folder the lab writes: {"kind": ...}, so readers need not guess
OWNED = (CONFIG, ENV, METRICS, DIAGNOSTICS, SUMMARY, DIAGNOSTICS_REF, DATA, LOCK, MARKER, PROBE_CSV, RAY_NODES, SLURM_JOBS,
         TRIAL_LOCK, f"{CHECKPOINTS}/", f"{ANALYSIS}/", f"{REPORT}/")
STEP_LOGS = (METRICS, DIAGNOSTICS)  # a line per step: a resume drops those past its checkpoint, a cut past its step
CUT_COPIES = (CONFIG, DATA)  # what a run read at a horizon copies as it is (``RunDir.write_cut``)
STEP_CHECKPOINT = re.compile(r"step_(\d+)")  # a kept step's folder (``step_name``); six digits, more past 999999
# What to do about each JSON file of RUN/ when it is damaged: every read goes through
# ``RunDir._table``, so a malformed or empty file is one line naming it and this fix.
FIXES = {CONFIG: "restore it from a backup, or train the run again into a new --out",
         SUMMARY: "delete it and `normlab train --resume RUN` writes it again",
         ENV: "delete it (it only records where the run ran)",
         DATA: "delete it (the run then reads as one older than data.json: its corpus is not checked)"}


def writer(folder: str | Path) -> Holder | None:
    """Who writes ``folder`` (a run or any output folder) now, without locking: None when nobody."""

    return holder(Path(folder) / LOCK)


def folder_kind(folder: str | Path) -> str | None:
    """The kind ``folder``'s marker names (run, probe, inspect, series, analysis), None without one."""

    return marked_kind(Path(folder), MARKER)


def note_if_written(folder: str | Path, reader: str) -> Holder | None:
    """Log one line when ``folder`` is still being written (readers call it; they never lock)."""
    h = writer(folder)
    if h is not None:
        logging.getLogger(__name__).warning(f"{folder} is still being written by {h.describe()}; "
                                            f"{reader} reads it as it is now")
    return h


class RunDir(RunCheckpoints, RunResume):
    """One run directory: read (and, for the training loops, write) its files."""

    # the names ``RunResume`` works with (this module's: it spells none)
    _LOCK, _MARKER, _CONFIG, _STEP_LOGS, _CUT_COPIES = LOCK, MARKER, CONFIG, STEP_LOGS, CUT_COPIES

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # ------------------------------------------------------------------ what it is
    def is_run(self) -> bool:
        """Whether a run was started here (config.json is written first, by the opening)."""
        return (self.path / CONFIG).is_file()

    def is_report_run(self) -> bool:
        """A run with something to plot: config.json and metrics.jsonl."""
        return self.is_run() and (self.path / METRICS).is_file()

    def holds_run(self) -> bool:
        """Whether any part of a run is here (a fresh run must not start over it)."""
        return any((self.path / n).exists() for n in (CONFIG, METRICS, CHECKPOINTS))

    @staticmethod
    def owns(rel: str | Path, logger_folders: Iterable[str] = ()) -> bool:
        """Whether ``rel`` (a path relative to RUN/) is one of the entries this class names, or in
        one of ``logger_folders`` (``normlab.train.loggers.logger_folders()``: the loggers' own)."""
        parts = Path(rel).parts
        owned = (*OWNED, *(f"{d}/" for d in logger_folders))
        return bool(parts) and (parts[0] in owned if len(parts) == 1 and parts[0] + "/" not in owned
                                else parts[0] + "/" in owned)

    @staticmethod
    def logger_folders(loggers: Iterable[tuple[str, Any]]) -> dict[str, str]:
        """{folder: logger name}: the folder under RUN/ that each of ``loggers`` ((name, class)
        pairs: the loggers registry, which lives above run/) declares in its class's ``folder``,
        checked against the entries this class names and each other, so a plugin's logger gets
        its folder as the built-ins do."""
        out: dict[str, str] = {}
        for name, cls in loggers:
            folder = getattr(cls, "folder", None)
            if folder is None:
                continue
            if not isinstance(folder, str) or not folder or Path(folder).name != folder or folder.startswith("."):
                raise UserError(f"logger {name!r}: folder {folder!r} is not one plain folder name (say {name!r})")
            if folder in OWNED or f"{folder}/" in OWNED or folder in out:
                taken = f"logger {out[folder]!r}'s" if folder in out else "an entry of every run"
                raise UserError(f"logger {name!r}: folder {folder!r} is {taken}; declare another")
            out[folder] = name
        return out

    @property
    def analysis_dir(self) -> Path:
        """RUN/analysis/: ``normlab analyze``'s tables and analysis.json."""
        return self.path / ANALYSIS

    @property
    def probe_csv(self) -> Path:
        """A study probe trial's rows (``study/trials.py``)."""
        return self.path / PROBE_CSV

    @property
    def ray_nodes(self) -> Path:
        """A Ray trial's log of where each attempt ran (``study/ray_tasks.py``)."""
        return self.path / RAY_NODES

    @property
    def slurm_jobs(self) -> Path:
        """A Slurm trial's log of the job each attempt ran in (``study/slurm_job.py``)."""
        return self.path / SLURM_JOBS

    @property
    def trial_lock(self) -> Path:
        """The lock a Ray or Slurm attempt holds while it trains in RUN (``study/shipping.py``)."""
        return self.path / TRIAL_LOCK

    def logger_dir(self, folder: str, known: Iterable[str]) -> Path:
        """RUN/``folder``: a logger's own folder, one of ``known`` (``logger_folders``)."""
        known = list(known)
        if folder not in known:
            raise ValueError(f"no registered logger declares the run folder {folder!r}; declared: "
                             f"{', '.join(known) or 'none'}")
        return self.path / folder

    def has_checkpoints(self) -> bool:
        return (self.path / CHECKPOINTS).is_dir()

    def writer(self) -> Holder | None:
        """The process writing RUN now (readers ask, never lock), else None."""
        return writer(self.path)

    @classmethod
    def of_checkpoint(cls, folder: str | Path) -> RunDir | None:
        """The run a checkpoint folder (RUN/checkpoints/NAME) belongs to, else None."""
        folder = Path(folder).resolve()
        run = cls(folder.parents[1]) if len(folder.parents) > 1 else None
        return run if run is not None and folder.parent.name == CHECKPOINTS and run.is_run() else None

    # ------------------------------------------------------------------ reading
    def config(self, label: str = "RUN") -> RunConfig:
        """The RunConfig in config.json; ``label`` names the argument that gave RUN in the error."""

        if not self.is_run():
            raise UserError(f"{label} {self.path}: no config.json there; is it a normlab run directory "
                            "(`normlab train --out DIR` makes one)?")
        return RunConfig.from_stored(self._table(CONFIG))

    def config_dict(self) -> dict[str, Any]:
        """config.json as stored (the report shows it as written)."""
        cfg = self._table(CONFIG)
        if cfg is None:
            raise UserError(f"{self.path}: no config.json there (is this a training run directory?)")
        return cfg

    def _table(self, name: str) -> dict[str, Any] | None:
        """RUN/``name`` (a JSON object), None when absent; damage is one line with its ``FIXES``."""
        p = self.path / name
        return read_json_table(p, FIXES[name].replace("RUN", str(self.path))) if p.is_file() else None

    def summary(self) -> dict[str, Any] | None:
        """summary.json (None while the run is going or after a kill)."""
        return self._table(SUMMARY)

    def env(self) -> dict[str, Any] | None:
        return self._table(ENV)

    def data_record(self) -> dict[str, Any] | None:
        """data.json: the corpus (path, sha256) and tokenizer the run read; None in older runs."""
        return self._table(DATA)

    def metrics(self) -> list[dict[str, Any]]:
        """metrics.jsonl's lines ([] when absent; a torn last line of a killed run is ignored)."""
        return read_jsonl(self.path / METRICS)

    def diagnostics(self) -> list[dict[str, Any]]:
        return read_jsonl(self.path / DIAGNOSTICS)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_dir(self, name: str) -> Path:
        """Where checkpoint ``name`` (latest, best) lives; writers and the error messages use it."""
        return self.path / CHECKPOINTS / name

    @staticmethod
    def step_name(step: int) -> str:
        """The name of step ``step``'s kept checkpoint (``train.keep_checkpoints``): step_000100."""
        return f"step_{step:06d}"

    def _kept_steps(self) -> list[int]:
        """The steps of the kept step checkpoints, in order (an interrupted swap's twin stands for
        its folder); ``step_checkpoints`` checks each one."""
        root = self.path / CHECKPOINTS
        return sorted({int(m[1]) for p in (root.iterdir() if root.is_dir() else ())
                       if (m := STEP_CHECKPOINT.fullmatch(p.name.removesuffix(".old")))})

    # ------------------------------------------------------------------ writing (the training loops)
    def write_config(self, cfg: Any) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path / CONFIG, json.loads(cfg.to_json()))

    def write_env(self, env: dict[str, Any], resume: bool = False) -> None:
        """env.json; a resume keeps the first start's record and appends its own."""
        first = self.env() if resume else None
        if first is not None:
            first.setdefault("resumes", []).append(env)
            env = first
        atomic_write_json(self.path / ENV, env)

    def write_data_record(self, record: dict[str, Any]) -> None:
        atomic_write_json(self.path / DATA, record)

    def write_summary(self, summary: dict[str, Any]) -> None:
        atomic_write_json(self.path / SUMMARY, summary)

    def append_metrics(self, step: int, metrics: dict[str, Any]) -> None:
        """One flushed line of metrics.jsonl."""
        append_jsonl(self.path / METRICS, {"step": step, **metrics})

    def append_diagnostics(self, rec: dict[str, Any]) -> None:
        """One flushed line of diagnostics.jsonl (``normlab.diagnostics.training``)."""
        append_jsonl(self.path / DIAGNOSTICS, rec)

    @property
    def diagnostics_ref(self) -> Path:
        """Where the in-training diagnostics keep W_0's logits."""
        return self.path / DIAGNOSTICS_REF
