"""Metric loggers by name, all with ``log(metrics, step)``, ``finish(summary)`` and ``close()``.

``jsonl`` (RUN/metrics.jsonl) is always on: it is the run directory's contract. The
others are extras named in ``train.loggers``; their libraries are imported only when
asked for, and a missing one is a one-line error naming the pip extra, raised by
``require()`` before anything under RUN is written.

A study worker describes the trial it runs in the environment variable ``NORMLAB_STUDY``
(:func:`study_context`): W&B then puts every trial of a study into one group named after
it with the swept axes as config keys, and TensorBoard writes the axes and the study's
metric through its hparams plugin, so both tools' own comparison views work.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, ClassVar

from normlab.core.errors import UserError
from normlab.core.fsutil import atomic_write_text
from normlab.core.lazy import load_object
from normlab.core.registry import Registry
from normlab.run.dir import RunDir

STUDY_ENV = "NORMLAB_STUDY"  # JSON: {"name", "metric", "trials": {run_dir: axis values}}


def study_context(run_dir: Path) -> dict[str, Any] | None:
    """(study name, metric, this trial's axis values) when a study worker runs ``run_dir``."""
    raw = os.environ.get(STUDY_ENV)
    if not raw:
        return None
    ctx = json.loads(raw)
    params = ctx.get("trials", {}).get(str(Path(run_dir).resolve()))
    if params is None:
        return None
    return {"name": ctx["name"], "metric": ctx.get("metric", "best_val_loss"), "params": params}


class Logger:
    requires: ClassVar[tuple[str, str] | None] = None  # (module, pip extra) this logger imports
    # The logger's own folder under RUN/, None when it writes no file of its own. RunDir checks
    # the folders of the registry (``logger_folders`` below), so a plugin's folder is a run
    # entry like tensorboard/'s: listed as owned, and found again by a resumed run.
    folder: ClassVar[str | None] = None

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        self.run_dir = run_dir

    def folder_path(self) -> Path:
        """RUN/<folder>/ (``RunDir.logger_dir``), made if missing: where this logger writes."""
        if self.folder is None:
            raise RuntimeError(f"{type(self).__name__} declares no folder (set its class attribute `folder`)")
        path = RunDir(self.run_dir).logger_dir(self.folder, logger_folders())
        path.mkdir(parents=True, exist_ok=True)
        return path

    @classmethod
    def require(cls) -> None:
        """Raise the one-line UserError if the logger's package is missing (nothing written yet)."""
        if cls.requires:
            _need(*cls.requires)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        raise NotImplementedError

    def finish(self, summary: dict[str, Any]) -> None:
        """The run's summary.json, once, before ``close`` (runs that raise skip it)."""

    def close(self) -> None:
        pass


# The loggers ``train.loggers`` names, filled by ``normlab.train.catalogue`` at the first lookup.
# Names are looked up when a run starts (``require_loggers``, called by ``train.plan``), never
# when a config is built: the config layer sits below training and cannot see this registry.
LOGGERS: Registry[type[Logger]] = Registry("logger", "train.loggers", catalogue="normlab.train.catalogue")


def logger_folders() -> dict[str, str]:
    """{folder: logger name} of every registered logger that declares a folder under RUN/ (a
    plugin's included), checked by the run directory's owner (``RunDir.logger_folders``)."""
    return RunDir.logger_folders(LOGGERS.items())


class JsonlLogger(Logger):
    """One flushed JSON line per logged step in RUN/metrics.jsonl. The line is written by
    ``RunDir.append_metrics``, handed in by :func:`make_loggers` (the run directory module owns
    the file; the logger only hands it each line)."""

    def __init__(self, run_dir: Path, config: dict[str, Any],
                 line: Callable[[int, dict[str, Any]], None] | None = None) -> None:
        super().__init__(run_dir, config)
        self.line = line

    def log(self, metrics: dict[str, Any], step: int) -> None:
        if self.line is None:
            raise RuntimeError("the jsonl logger writes through RunDir.append_metrics: build it with make_loggers")
        self.line(step, metrics)


def _need(module: str, extra: str) -> Any:
    """The optional third-party package a logger declares in ``requires`` (a plugin logger
    declares its own): imported by name so that a missing one is the one-line error below."""
    try:
        return load_object(module)
    except ImportError:
        raise UserError(f"train.loggers: {extra!r} needs the {module.split('.')[0]} package: "
                        f"pip install 'normlab[{extra}]' (or drop {extra!r} from train.loggers)") from None


def _hparam(v: Any) -> Any:
    """An axis value as the hparams plugin takes it (numbers, strings, booleans)."""
    return v if isinstance(v, (bool, int, float, str)) else json.dumps(v)


class TensorBoardLogger(Logger):
    """TensorBoard event files under RUN/tensorboard/ (a study trial adds its hparams)."""

    requires = ("tensorboard", "tensorboard")
    folder = "tensorboard"

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        super().__init__(run_dir, config)
        self.require()
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(self.folder_path()))

    def log(self, metrics: dict[str, Any], step: int) -> None:
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.writer.add_scalar(k, v, step)

    def finish(self, summary: dict[str, Any]) -> None:
        study = study_context(self.run_dir)
        if study is None:
            return
        value = summary.get(study["metric"])
        metrics = {f"hparam/{study['metric']}": float(value)} if isinstance(value, (int, float)) else {}
        # run_name "." keeps the hparams in this run's own directory, beside its scalars.
        self.writer.add_hparams({k: _hparam(v) for k, v in study["params"].items()}, metrics, run_name=".")

    def close(self) -> None:
        self.writer.close()


class WandbLogger(Logger):
    """Weights & Biases; set WANDB_MODE=offline to log with no network (files in RUN/wandb).

    The W&B run id is drawn once and kept in RUN/wandb/normlab-run-id, so ``--resume``
    continues the same W&B run; a study trial joins the group named after its study.
    """

    requires = ("wandb", "wandb")
    folder = "wandb"
    ID_FILE = "normlab-run-id"

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        super().__init__(run_dir, config)
        wandb = _need(*self.requires)
        id_file = self.folder_path() / self.ID_FILE
        if id_file.is_file():
            run_id = id_file.read_text(encoding="utf-8").strip()
        else:
            import secrets

            run_id = secrets.token_hex(4)  # W&B ids are short lowercase alphanumerics
            atomic_write_text(id_file, run_id + "\n")
        study = study_context(run_dir)
        kw: dict[str, Any] = {}
        if study is not None:  # axis keys at the top level: W&B's parallel coordinates use them
            config = {**config, **study["params"]}
            kw = {"group": study["name"], "job_type": "trial"}
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "normlab"),
                              name=config.get("name") or run_dir.name, dir=str(run_dir), config=config,
                              resume="allow", id=run_id, **kw)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.run.log(metrics, step=step)

    def finish(self, summary: dict[str, Any]) -> None:
        self.run.summary.update({k: v for k, v in summary.items() if v is not None})

    def close(self) -> None:
        self.run.finish()


def make_loggers(names: list[str], run_dir: Path, config: dict[str, Any],
                 line: Callable[[int, dict[str, Any]], None]) -> list[Logger]:
    """jsonl (writing with ``line``, ``RunDir.append_metrics``) plus the extras named in
    ``train.loggers`` (in that order, no duplicates)."""
    extras = [LOGGERS.get(n)(run_dir, config) for n in dict.fromkeys(names) if n != "jsonl"]
    return [JsonlLogger(run_dir, config, line), *extras]


def check_logger_names(names: list[str]) -> None:
    """Each name in ``train.loggers`` is a logger (the ConfigError lists the valid ones), without
    importing any logger's package: ``normlab config`` checks this much of what ``require_loggers`` does."""
    for n in names:
        LOGGERS.get(n, "train.loggers")


def require_loggers(names: list[str]) -> None:
    """Check every logger named in ``train.loggers`` can start (its package is installed)."""
    for n in names:
        LOGGERS.get(n, "train.loggers").require()
