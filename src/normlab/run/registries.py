"""The names a run's config refers to in its train and optim sections, as empty registries:
lr schedules (``optim.schedule``) and metric loggers (``train.loggers``).

They are declared here, below the training loop, so that ``TrainConfig`` and ``OptimConfig``
can check a name when they are built without importing the loop; ``normlab.train.catalogue``
fills them (at the first lookup), as ``model/registries.py`` is filled by the model's catalogue.
"""

from __future__ import annotations

from typing import Any, Callable

from normlab.core.registry import Registry

ScheduleFn = Callable[[int, int, int, float], float]  # (step, warmup, total, min_ratio) -> factor
SCHEDULES: Registry[ScheduleFn] = Registry("schedule", "optim.schedule", catalogue="normlab.train.catalogue")
# Logger classes (normlab.train.loggers.Logger); typed loosely here so this module stays below train.
LOGGERS: Registry[type[Any]] = Registry("logger", "train.loggers", catalogue="normlab.train.catalogue")
