"""Every built-in learning-rate schedule and metric logger, one line each.

The only module that fills ``schedules.SCHEDULES`` and ``loggers.LOGGERS``; each registry
imports it at its first lookup. Installed plugins add loggers of their own (docs/plugins.md).
"""

from __future__ import annotations

from normlab.core import plugins
from normlab.train import loggers, schedules

loggers.LOGGERS.add("jsonl", loggers.JsonlLogger)
loggers.LOGGERS.add("tensorboard", loggers.TensorBoardLogger)
loggers.LOGGERS.add("wandb", loggers.WandbLogger)
# installed plugins add theirs at the first lookup (docs/plugins.md); none is imported here
loggers.LOGGERS.fill_later(plugins.filler("loggers", loggers.Logger))

schedules.SCHEDULES.add("constant", schedules.constant)
schedules.SCHEDULES.add("cosine", schedules.cosine)
schedules.SCHEDULES.add("linear", schedules.linear)
schedules.SCHEDULES.add("inverse_sqrt", schedules.inverse_sqrt)
schedules.SCHEDULES.add("none", schedules.none)
