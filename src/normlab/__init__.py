"""normlab: a laboratory for normalization placement in Transformers.

Public names are imported lazily so that ``import normlab`` (and ``normlab --help``)
stays fast and free of side effects.
"""

from __future__ import annotations

from normlab.core.lazy import lazy_getattr

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

__all__ = ["__version__", *_LAZY]
