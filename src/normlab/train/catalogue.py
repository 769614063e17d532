"""Every built-in metric logger, one line each.

The only module that fills ``loggers.LOGGERS``; the registry imports it at its first lookup.
Installed plugins add loggers of their own (docs/plugins.md).
"""

from __future__ import annotations

from normlab.core import plugins
from normlab.train import loggers

loggers.LOGGERS.add("jsonl", loggers.JsonlLogger)
loggers.LOGGERS.add("tensorboard", loggers.TensorBoardLogger)
loggers.LOGGERS.add("wandb", loggers.WandbLogger)
# installed plugins add theirs at the first lookup (docs/plugins.md); none is imported here
loggers.LOGGERS.fill_later(plugins.filler("loggers", loggers.Logger))
