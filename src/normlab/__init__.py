"""normlab: a laboratory for normalization placement in Transformers.

Public names are imported lazily so that ``import normlab`` (and ``normlab --help``)
stays fast and free of side effects.
"""

from __future__ import annotations

from normlab.lazy import lazy_getattr

__version__ = "0.2.0"

_LAZY = {
    "ModelConfig": "normlab.model.config",
    "TransformerLM": "normlab.model.transformer",
    "RunConfig": "normlab.runconfig",
    "DataConfig": "normlab.data.config",
    "OptimConfig": "normlab.train.config",
    "TrainConfig": "normlab.train.config",
    "UserError": "normlab.errors",
    "ConfigError": "normlab.errors",
}


__getattr__ = lazy_getattr("normlab", _LAZY)

__all__ = ["__version__", *_LAZY]
