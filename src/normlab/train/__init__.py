"""Training: one way in, ``prepare(cfg, run_dir, ...)`` then ``execute(plan)``, or both in one
call, ``run_training(cfg, run_dir, resume=..., quiet=..., steps=..., data_dir=...) -> summary``
(``normlab.train.run``, the composition root; the CLI calls the same two)."""

from __future__ import annotations

from normlab.train.run import execute, prepare, run_training

__all__ = ["execute", "prepare", "run_training"]
