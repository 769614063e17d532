"""Training: ``run_training(cfg, run_dir, resume=..., quiet=..., steps=...) -> summary dict``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from normlab.train.run import run_training as _run

if TYPE_CHECKING:
    from normlab.run.resolve import RunConfig


def run_training(cfg: "RunConfig | None", run_dir: str | Path, *, resume: bool = False, quiet: bool = False,
                 steps: int | None = None) -> dict:
    """Train one model into ``run_dir``; see :func:`normlab.train.run.run_training`."""

    return _run(cfg, run_dir, resume=resume, quiet=quiet, steps=steps)


__all__ = ["run_training"]
