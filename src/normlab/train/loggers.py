"""Metric loggers by name, all with ``log(metrics, step)`` and ``close()``.

``jsonl`` (RUN/metrics.jsonl) is always on: it is the run directory's contract. The
others are extras named in ``train.loggers``; their libraries are imported only when
asked for, and a missing one is a one-line error naming the pip extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from normlab.errors import UserError
from normlab.fsutil import append_jsonl
from normlab.registry import Registry


class Logger:
    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        self.run_dir = run_dir

    def log(self, metrics: dict[str, Any], step: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


LOGGERS: Registry[type[Logger]] = Registry("logger", "train.loggers")


@LOGGERS.register("jsonl")
class JsonlLogger(Logger):
    """One flushed JSON line per logged step in RUN/metrics.jsonl."""

    def log(self, metrics: dict[str, Any], step: int) -> None:
        append_jsonl(self.run_dir / "metrics.jsonl", {"step": step, **metrics})


def _need(module: str, extra: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(f"train.loggers: {extra!r} needs the {module.split('.')[0]} package: "
                        f"pip install 'normlab[{extra}]'") from None


@LOGGERS.register("tensorboard")
class TensorBoardLogger(Logger):
    """TensorBoard event files under RUN/tensorboard/."""

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        super().__init__(run_dir, config)
        _need("tensorboard", "tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(run_dir / "tensorboard"))

    def log(self, metrics: dict[str, Any], step: int) -> None:
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.writer.add_scalar(k, v, step)

    def close(self) -> None:
        self.writer.close()


@LOGGERS.register("wandb")
class WandbLogger(Logger):
    """Weights & Biases; set WANDB_MODE=offline to log with no network (files in RUN/wandb)."""

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        super().__init__(run_dir, config)
        wandb = _need("wandb", "wandb")
        self.run = wandb.init(project="normlab", name=config.get("name") or run_dir.name,
                              dir=str(run_dir), config=config, resume="allow", id=run_dir.name)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


def make_loggers(names: list[str], run_dir: Path, config: dict[str, Any]) -> list[Logger]:
    """jsonl plus the extras named in ``train.loggers`` (in that order, no duplicates)."""
    ordered = ["jsonl"] + [n for n in names if n != "jsonl"]
    return [LOGGERS.get(n)(run_dir, config) for n in dict.fromkeys(ordered)]
