"""normlab: a laboratory for normalization placement in Transformers.

Public names are imported lazily so that ``import normlab`` (and ``normlab --help``)
stays fast and free of side effects. Type checkers read the imports under
``TYPE_CHECKING`` instead, so ``from normlab import TransformerLM`` is the class to them,
and ``__dir__`` lists the public names for tab completion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from normlab.core.lazy import lazy_dir, lazy_getattr

if TYPE_CHECKING:  # never run: the lazy loading below is what imports them
    from normlab.core.errors import ConfigError, UserError
    from normlab.data.config import DataConfig
    from normlab.model.config import ModelConfig
    from normlab.model.transformer import TransformerLM
    from normlab.run.config import RunConfig
    from normlab.run.train_config import OptimConfig, TrainConfig

__version__ = "0.2.0"

_LAZY = {
    "ModelConfig": "normlab.model.config",
    "TransformerLM": "normlab.model.transformer",
    "RunConfig": "normlab.run.config",
    "DataConfig": "normlab.data.config",
    "OptimConfig": "normlab.run.train_config",
    "TrainConfig": "normlab.run.train_config",
    "UserError": "normlab.core.errors",
    "ConfigError": "normlab.core.errors",
}


__getattr__ = lazy_getattr("normlab", _LAZY)
__dir__ = lazy_dir(globals(), _LAZY)

__all__ = ["__version__", "ConfigError", "DataConfig", "ModelConfig", "OptimConfig", "RunConfig", "TrainConfig",
           "TransformerLM", "UserError"]
